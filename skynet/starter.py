"""`skynet init`: write a starter project that `skynet run` runs as it is."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from skynet.errors import ConfigError

__all__ = ["STARTER", "write_starter"]

STARTER = "capitals"
_FILES = ("skynet.toml", "metric.py", "prompt.md", "data.jsonl")


def write_starter(target: Path, template: str = STARTER) -> list[Path]:
    """Copy the starter project into `target` (created if needed); never overwrites a file.

    Raises:
        ConfigError: a file of the starter already exists in `target`.
    """
    source = resources.files("skynet") / "templates" / template
    clashes = [name for name in _FILES if (target / name).exists()]
    if clashes:
        raise ConfigError(
            f"{target}: {', '.join(clashes)} already exist(s); `skynet init` never overwrites: "
            "choose an empty folder"
        )
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name in _FILES:
        path = target / name
        path.write_bytes((source / name).read_bytes())
        written.append(path)
    return written
