"""What every `skynet` command shares, the built-in ones in skynet.cli and those a scorer package
adds (skynet.packages): the exit codes, the project folder, the flags that override skynet.toml,
and writing a file the user named."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skynet.errors import ConfigError

if TYPE_CHECKING:
    from skynet.config import Overrides

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "EXIT_FAULT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USER",
    "key_values",
    "folder_of",
    "overrides_of",
    "store_of",
    "with_dir",
    "with_models",
    "with_store",
    "write_text",
]

EXIT_OK, EXIT_FAULT, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 130


def folder_of(args: argparse.Namespace) -> Path:
    base = Path(args.C).expanduser() if args.C else Path.cwd()
    target = getattr(args, "dir", None)
    return (base / target) if target else base


# The flags that set one skynet.toml key each: (the args attribute, the key).
_FLAG_KEYS = (
    ("max_metric_calls", "budget.max_metric_calls"),
    ("max_cost_usd", "budget.max_cost_usd"),
    ("max_minutes", "budget.max_minutes"),
    ("engine", "engine.name"),
    ("seed", "engine.seed"),
    ("concurrency", "engine.concurrency"),
    ("task_model", "models.task"),
    ("reflection_model", "models.reflection"),
    ("metric_model", "models.metric"),
)


def overrides_of(args: argparse.Namespace) -> Overrides:
    """The flags' keys and values, each remembering the flag it came from for messages."""
    from skynet.config import Overrides

    found: dict[str, Any] = {}
    given: dict[str, str] = {}
    for attr, key in _FLAG_KEYS:
        value = getattr(args, attr, None)
        if value is not None:
            found[key], given[key] = value, f"--{attr.replace('_', '-')} {value}"
    settings = getattr(args, "set", None) or []
    found.update(key_values(settings, "--set", "engine.seed=3"))
    for setting in settings:
        given[setting.partition("=")[0].strip()] = f"--set {setting}"
    return Overrides(found, given=given)


def key_values(settings: list[str] | None, flag: str, example: str) -> dict[str, Any]:
    """KEY=VALUE flags as a dict, each value read as TOML (else as text)."""
    found: dict[str, Any] = {}
    for setting in settings or []:
        key, sep, raw = setting.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {setting!r}: write KEY=VALUE, e.g. {flag} {example}")
        found[key.strip()] = _toml_value(raw.strip())
    return found


def _toml_value(raw: str) -> Any:
    """A --set value read as TOML (numbers, booleans, lists, quoted strings), else as text."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def write_text(target: Path, text: str, *, flag: str, example: str) -> None:
    """Write a file the user named with `flag`, or a ConfigError saying why it cannot be."""
    try:
        target.write_text(text, encoding="utf-8")
    except IsADirectoryError:
        raise ConfigError(
            f"{target}: is a directory; give {flag} a file path, e.g. {flag} {target / example}"
        ) from None
    except FileNotFoundError:
        raise ConfigError(
            f"{target}: the folder {target.parent} does not exist; create it, or give {flag} "
            "a path in a folder that exists"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"{target}: cannot write it ({exc.strerror or exc}); give {flag} another path"
        ) from None


def with_dir(p: argparse.ArgumentParser) -> None:
    """The optional project-folder argument."""
    p.add_argument("dir", nargs="?", help="the project folder (default: the current one)")


def with_store(p: argparse.ArgumentParser) -> None:
    """--store: the runs of a store outside the project, as skynet.optimize(store=) names it."""
    p.add_argument(
        "--store",
        metavar="PATH",
        help="the folder holding runs.db, as skynet.optimize(store=PATH) names it "
        "(default: the project's .skynet)",
    )


def store_of(args: argparse.Namespace) -> Path:
    """The folder holding the runs: --store PATH (relative to -C, as the folder is), else the
    project's .skynet.

    Raises:
        ConfigError: --store names no folder, or a folder without a runs.db.
    """
    given = getattr(args, "store", None)
    if given is None:
        return folder_of(args) / ".skynet"
    base = Path(args.C).expanduser() if args.C else Path.cwd()
    store = Path(os.path.abspath(base / Path(given).expanduser()))  # "../s" named plainly
    if store.name == "runs.db" and store.is_file():  # the file itself: its folder is meant
        store = store.parent
    fix = (
        "give --store the folder skynet.optimize(store=...) recorded into, the one holding runs.db"
    )
    if not store.is_dir():
        what = "not a folder" if store.exists() else "no such folder"
        raise ConfigError(f"--store {given}: {store}: {what}; {fix}")
    if not (store / "runs.db").is_file():
        raise ConfigError(f"--store {given}: {store}: no runs.db here (no run recorded); {fix}")
    return store


def with_models(p: argparse.ArgumentParser) -> None:
    """The flags that choose the models, and --set for any other key."""
    p.add_argument("--task-model", help="models.task")
    p.add_argument("--reflection-model", help="models.reflection")
    p.add_argument("--metric-model", help="models.metric")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override any skynet.toml key, e.g. --set artifact.max_tokens=64 (repeatable)",
    )
