"""What reaches the reflection model, bounded: each value an engine shows it is cut to a set size.

A candidate controls its outputs and error text, and they are shown to the reflection model; a
2 MB output per item would otherwise become a reflection prompt of millions of tokens. Each text
is cut to `limit` characters ([engine] max_side_info_chars) with a note saying so:

    "xxxx…… [cut: 2,000,000 characters, kept the first 2,000]"

A mapping (an input's columns, named scores, an output dict) keeps at most MAX_ENTRIES entries,
each cut the same way; a list or a nested value longer than the limit when written as JSON is
shown as that JSON text, cut. Lone surrogates (which no model API can be sent) become U+FFFD.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_MAX_SIDE_INFO_CHARS", "MAX_ENTRIES", "cut_side_info", "cut_text"]

DEFAULT_MAX_SIDE_INFO_CHARS = 2000
MAX_ENTRIES = 20  # entries of one mapping shown to the reflection model
_KEY_CHARS = 100  # a mapping's key is a name, not a payload
_SURROGATE = re.compile("[\ud800-\udfff]")


def cut_text(text: str, limit: int) -> str:
    """`text` with at most `limit` of its characters, and a note when it was longer."""
    if len(text) > limit:
        text = f"{text[:limit]}… [cut: {len(text):,} characters, kept the first {limit:,}]"
    return _SURROGATE.sub("\ufffd", text)


def _as_json(value: Any) -> tuple[str, bool]:
    """(the value as JSON text, True), else (its repr or a note, False)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=repr), True
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(value), False
        except RecursionError:
            return f"<a {type(value).__name__} nested too deep to show>", False


def cut_side_info(value: Any, limit: int, *, _depth: int = 0) -> Any:
    """`value` (an engine's side info for one example, or any part of it) with every text cut
    to `limit` characters, every mapping to MAX_ENTRIES entries, each with a note."""
    if isinstance(value, str):
        return cut_text(value, limit)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping) and _depth < 2:
        entries = list(value.items())
        kept: dict[str, Any] = {
            cut_text(str(key), _KEY_CHARS): cut_side_info(item, limit, _depth=_depth + 1)
            for key, item in entries[:MAX_ENTRIES]
        }
        if len(entries) > MAX_ENTRIES:
            kept["…"] = f"[cut: {len(entries):,} entries, kept the first {MAX_ENTRIES}]"
        return kept
    # Anything else is shown whole when its JSON text is short, else as that text, cut.
    text, is_json = _as_json(value)
    if not is_json or len(text) > limit or _SURROGATE.search(text):
        return cut_text(text, limit)
    return value
