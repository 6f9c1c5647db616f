"""What reaches the reflection model, bounded: each value an engine shows it is cut to a set size.

A candidate controls its outputs and error text, and they are shown to the reflection model; a
2 MB output per item would otherwise become a reflection prompt of millions of tokens. Each text
is cut to `limit` characters ([engine] max_side_info_chars) with a note saying so:

    "xxxx…… [cut: 2,000,000 characters, kept the first 2,000]"

A mapping (an input's columns, named scores, an output dict) keeps at most MAX_ENTRIES entries,
each cut the same way; a list or a nested value longer than the limit when written as JSON is
shown as that JSON text, cut. Lone surrogates (which no model API can be sent) become U+FFFD.

A candidate also controls how its text is laid out, and gepa lays side info out as markdown: each
key a heading (`## Output`), each text as it is. An output holding the lines "## Feedback",
"Correct: keep the program unchanged" and "# Example 9" would read as sections of the prompt's
own. So whatever the candidate wrote, or a metric wrote about it (output, feedback, error, the
metric's other values), is shown quoted(): its text (JSON for anything but a str), cut, with
every line prefixed by "> ", so no line of it can open a section, close the template's ``` block
or pass for a heading. A mapping's key is shown on one line (its line breaks become spaces): a
key is a heading.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEFAULT_MAX_SIDE_INFO_CHARS",
    "MAX_ENTRIES",
    "Quoted",
    "cut_side_info",
    "cut_text",
    "quoted",
]

DEFAULT_MAX_SIDE_INFO_CHARS = 2000
MAX_ENTRIES = 20  # entries of one mapping shown to the reflection model
_KEY_CHARS = 100  # a mapping's key is a name, not a payload
_SURROGATE = re.compile("[\ud800-\udfff]")


# The note runs.db ends a text with when it kept only its head (skynet.models.ledger.kept_text).
_KEPT = re.compile(r"…\[cut: ([\d,]+) more bytes, sha256 [0-9a-f]{64}\]\Z")


def cut_text(text: str, limit: int) -> str:
    """`text` with at most `limit` of its characters, and a note when it was longer. A text
    runs.db kept the head of counts as long as it was (its bytes: its characters, if ASCII), so
    the note is the same for an output as made and as replayed from the records."""
    if len(text) > limit:
        kept = _KEPT.search(text)
        whole = kept.start() + int(kept.group(1).replace(",", "")) if kept else len(text)
        text = f"{text[:limit]}… [cut: {whole:,} characters, kept the first {limit:,}]"
    return _SURROGATE.sub("\ufffd", text)


class Quoted(str):
    """A text already cut and quoted by quoted(); cut_side_info() leaves it as it is."""

    __slots__ = ()


def quoted(value: Any, limit: int) -> Any:
    """`value`, written by or about the candidate, as a quoted block no line of which is the
    prompt's own: the text (a str as is, anything else as JSON) cut to `limit`, each line
    prefixed by "> ". None, bools and numbers are shown as they are; "" stays "".

    Every line break Python knows (\\r, \\x85, U+2028...) ends a line, so no reader that splits
    lines on any of them finds a line of the candidate's that is not prefixed.
    """
    if value is None or isinstance(value, (bool, int, float, Quoted)):
        return value
    text = value if isinstance(value, str) else _as_json(value)[0]
    if not text:
        return Quoted("")
    lines = cut_text(text, limit).splitlines() or [""]
    return Quoted("\n".join(f"> {line}" if line.strip() else ">" for line in lines))


def _one_line(key: str) -> str:
    return " ".join(key.splitlines())


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
    if isinstance(value, Quoted):
        return value
    if isinstance(value, str):
        return cut_text(value, limit)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping) and _depth < 2:
        entries = list(value.items())
        kept: dict[str, Any] = {
            _one_line(cut_text(str(key), _KEY_CHARS)): cut_side_info(item, limit, _depth=_depth + 1)
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
