"""Reading a file the user names (prompt.md, metric.py, code.py, a data or candidate file).

One place says why a file cannot be read: missing, a broken link, a directory, unreadable, not
UTF-8. Each is a SkynetError naming the file, what it was meant to be, and the setting to fix;
an OSError or UnicodeDecodeError never leaves this module. A UTF-8 byte-order mark (written by
some Windows editors) is accepted and dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from skynet.errors import ConfigError, SkynetError

__all__ = ["read_bytes", "read_text"]


def read_bytes(
    path: Path,
    *,
    what: str,
    key: str,
    missing: str,
    error: Callable[[str], SkynetError] = ConfigError,
    shown: str | None = None,
) -> bytes:
    """The bytes of `path`, or `error(message)` saying why they cannot be read.

    Args:
        path: the file.
        what: what the file is meant to be, e.g. "prompt" (said of a directory).
        key: where the user named it, e.g. "artifact.path in skynet.toml" or "--candidate".
        missing: the message (after the path) for a file that does not exist.
        error: builds the error to raise from its message.
        shown: the path as the message shows it (default: `path`).
    """
    name = shown if shown is not None else str(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if path.is_symlink():
            raise error(
                f"{name}: a broken link (to {os.readlink(path)}, which does not exist); point "
                f"it at the {what} file, or set {key} to another file"
            ) from None
        raise error(f"{name}: {missing}") from None
    except IsADirectoryError:
        raise error(
            f"{name}: is a directory, not a {what} file; set {key} to the file itself"
        ) from None
    except OSError as exc:
        raise error(
            f"{name}: cannot read it ({exc.strerror or exc}); make it readable, or set {key} to "
            "another file"
        ) from None


def read_text(
    path: Path,
    *,
    what: str,
    key: str,
    missing: str,
    error: Callable[[str], SkynetError] = ConfigError,
    shown: str | None = None,
) -> str:
    """The text of `path` as UTF-8 (a leading byte-order mark dropped), or `error(message)`.

    Takes the arguments of read_bytes; a file that is not UTF-8 is refused with the line of the
    first bad byte.
    """
    raw = read_bytes(path, what=what, key=key, missing=missing, error=error, shown=shown)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line = raw[:start].count(b"\n") + 1
        name = shown if shown is not None else str(path)
        raise error(
            f"{name}:{line}: not UTF-8 text (byte {start}); save the file as UTF-8"
        ) from None
