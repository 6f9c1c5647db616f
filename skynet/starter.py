"""`skynet init`: write a starter project that `skynet run` runs as it is."""

from __future__ import annotations

import contextlib
from importlib import resources
from pathlib import Path

from skynet.errors import ConfigError

__all__ = ["STARTER", "write_starter"]

STARTER = "capitals"
_FILES = ("skynet.toml", "metric.py", "prompt.md", "data.jsonl")


def write_starter(target: Path, template: str = STARTER) -> list[Path]:
    """Copy the starter project into `target` (created if needed); never overwrites a file.

    Raises:
        ConfigError: a file of the starter already exists in `target`, `target` is a file, or
            the folder cannot be written (nothing of the starter is left behind).
    """
    source = resources.files("skynet") / "templates" / template
    if target.exists() and not target.is_dir():
        raise ConfigError(
            f"{target}: is a file, not a folder; `skynet init` writes a project into a folder: "
            "give it a new or empty folder's path"
        )
    clashes = [name for name in _FILES if (target / name).exists()]
    if clashes:
        raise ConfigError(
            f"{target}: {', '.join(clashes)} already exist(s); `skynet init` never overwrites: "
            "choose an empty folder"
        )
    written: list[Path] = []
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in _FILES:
            path = target / name
            written.append(path)
            path.write_bytes((source / name).read_bytes())
    except OSError as exc:
        # Half a starter would be refused by the next `skynet init`; each file was not there.
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        raise ConfigError(
            f"{target}: cannot write the starter project there ({exc.strerror or exc}); "
            "choose a folder this user can write to"
        ) from None
    return written
