"""Reading an output as the candidate record: a dict, a model, JSON text or a fenced block."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from skynet.scorers.reference._values import _shown

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n(.*?)\n?\s*```", re.S)


def _candidate(output: Any) -> tuple[dict | None, str]:
    """The candidate record and, when there is none, why."""
    if output is None:
        return {}, "the output is empty"
    if type(output) is dict:
        return output, ""
    if isinstance(output, Mapping):
        return dict(output), ""
    dump = getattr(output, "model_dump", None)
    if callable(dump):  # a pydantic model, as a DSPy program may return
        value = dump()
        if isinstance(value, dict):
            return value, ""
    text = getattr(output, "text", output)  # a skynet.scorers.Reply: its text
    if not isinstance(text, str):
        return None, f"the output is a {type(output).__name__}, not a JSON object"
    text = text.strip()
    if not text:
        return {}, "the output is empty"
    fenced = _FENCE.fullmatch(text)
    if fenced:
        text = fenced[1].strip()
    try:
        value = json.loads(text)
    except ValueError as exc:
        return None, f"the output is not JSON ({exc.args[0] if exc.args else exc}): {_shown(text)}"
    if not isinstance(value, dict):
        return None, f"the output is JSON but a {type(value).__name__}, not an object"
    return value, ""
