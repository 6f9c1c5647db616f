"""Plain values: absent or not, read as numbers or booleans, normalised, counted, shown."""

from __future__ import annotations

import json
import math
import numbers
import re
from typing import Any


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _absent(value: Any) -> bool:
    """None, blank text, or an empty record or list: no value."""
    if value is None:
        return True
    kind = type(value)
    if kind is str:
        return not value.strip()
    return (kind is dict or kind is list) and not value


def _has_value(value: Any) -> bool:
    kind = type(value)
    if kind is dict or kind is list:
        return _leaves(value) > 0
    return not _absent(value)


def _leaves(value: Any) -> int:
    """How many values a record, list or value holds (absent ones not counted)."""
    kind = type(value)
    if kind is dict:
        return sum(_leaves(v) for v in value.values())
    if kind is list:
        return sum(_leaves(v) for v in value)
    return 0 if _absent(value) else 1


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_NUMBER_START = frozenset("0123456789+-.")


def _number(value: Any) -> int | float | None:
    """A value as a number: ints and floats, numeric text ("4.0", "1,234.5"); never a bool."""
    kind = type(value)
    if kind is int or kind is float:
        return value
    if kind is str:
        text = value.strip()
        if text[:1] not in _NUMBER_START:
            return None
        if _NUMBER.fullmatch(text):
            return int(text) if text.lstrip("+-").isdigit() else float(text)
        if _GROUPED.fullmatch(text):
            return float(text.replace(",", ""))
        return None
    if kind is bool or not isinstance(value, numbers.Real):
        return None
    return float(value)


def _same_number(a: int | float, b: int | float) -> bool:
    if type(a) is int and type(b) is int:
        return a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


_BOOLS = {"true": True, "false": False, "yes": True, "no": False}


def _boolean(value: Any) -> bool | None:
    if type(value) is bool:
        return value
    if type(value) is str:
        return _BOOLS.get(value.strip().lower())
    return None


def _scalar_key(value: Any) -> tuple[str, Any]:
    """A list item's identity for the all-equal fast path: equal keys are exactly equal values."""
    kind = type(value)
    if kind is bool:
        return ("b", value)
    number = _number(value)
    if number is not None:
        return ("n", float(number))
    return ("s", _norm(value) if kind is str else repr(value))


def _shown(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
