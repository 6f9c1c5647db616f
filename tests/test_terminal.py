"""Text from a candidate cannot drive the terminal: every control character is escaped."""

from __future__ import annotations

import pytest

from skynet.terminal import printable

ATTACK = "\x1b[2J\x1b[31mPWNED\r"


@pytest.mark.parametrize(
    ("text", "multiline", "shown"),
    [
        ("plain text, unicode: é ✓", False, "plain text, unicode: é ✓"),
        (ATTACK, False, "\\x1b[2J\\x1b[31mPWNED\\r"),
        (ATTACK, True, "\\x1b[2J\\x1b[31mPWNED\\r"),
        ("a\nb\tc", False, "a\\nb\\tc"),  # one line stays one line
        ("a\nb\tc", True, "a\nb\tc"),  # a block keeps its layout
        ("bell\x07 null\x00 del\x7f", True, "bell\\x07 null\\x00 del\\x7f"),
        ("c1 \x9b31m csi", True, "c1 \\x9b31m csi"),  # the one-byte CSI of C1
        ("abc\u202edcba", False, "abc\\u202edcba"),  # right-to-left override
        ("\u2066isolate\u2069", True, "\\u2066isolate\\u2069"),
        ("already \\x1b escaped", False, "already \\x1b escaped"),
        (42, False, "42"),
    ],
)
def test_printable_escapes_controls(text, multiline, shown):
    assert printable(text, multiline=multiline) == shown


def test_escaping_twice_changes_nothing():
    once = printable(ATTACK + "\n", multiline=True)
    assert printable(once, multiline=True) == once
    assert not any(ord(c) < 0x20 and c not in "\n\t" for c in once)
