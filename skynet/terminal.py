"""Text from a candidate made safe for a terminal.

A candidate's text, its outputs and its error messages are written by a model (or by the code it
wrote): printed as they are, an ANSI escape could clear the screen, recolour or rewrite a figure
already printed, and a carriage return could overwrite the start of a line. `printable()` escapes
every control character so the text reads as what it is. Every place where such text reaches the
terminal (the report's text form, error lines, progress and log lines) goes through it.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 controls, DEL, C1 controls, and the bidirectional overrides and isolates that reorder what a
# terminal shows (the "Trojan Source" characters).
_REORDERING = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_REORDERING}]")
# In a multi-line block (a report, a diff, a traceback) newlines and tabs lay the text out.
_CONTROL_BUT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_REORDERING}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, multiline: bool = False) -> str:
    """`text` with every control character escaped as Python writes it (`\\x1b`, `\\r`, `\\u202e`).

    Args:
        text: what to print (anything: it is turned into a string first).
        multiline: keep newlines and tabs, for a block printed as several lines; without it
            they are escaped too, so the text stays on one line.

    Returns:
        Text holding no control character (but newlines and tabs when `multiline`). Printable
        text comes back unchanged, and so does text already escaped: escaping twice is a no-op.
    """
    pattern = _CONTROL_BUT_LAYOUT if multiline else _CONTROL
    return pattern.sub(_escape, str(text))
