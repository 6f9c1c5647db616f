"""Text from a candidate made safe for a terminal.

A candidate's text, its outputs and its error messages are written by a model (or by the code it
wrote): printed as they are, an ANSI escape could clear the screen, recolour or rewrite a figure
already printed, and a carriage return could overwrite the start of a line. `printable()` escapes
every control character so the text reads as what it is. Every place where such text reaches the
terminal (the report's text form, error lines, progress and log lines) goes through it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap

__all__ = ["printable", "width", "wrap"]

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


def width(stream: object = None) -> int | None:
    """The width to wrap prose to: $COLUMNS when set, else the terminal's when `stream` (default
    stdout) is one; None when the text goes to a pipe or a file (where a line is left whole for
    grep)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        if callable(isatty) and isatty():
            return shutil.get_terminal_size().columns
    except (OSError, ValueError):
        pass
    return None


def wrap(text: str, columns: int | None, *, indent: str = "", hang: str = "  ") -> list[str]:
    """`text` as lines of at most `columns` (words never split, a long word kept whole), the
    first indented by `indent`, the rest by `indent + hang`; one line when columns is None."""
    if columns is None or len(indent) + len(text) <= columns:
        return [indent + text]
    return textwrap.wrap(
        text,
        width=max(columns, len(indent) + len(hang) + 20),
        initial_indent=indent,
        subsequent_indent=indent + hang,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]
