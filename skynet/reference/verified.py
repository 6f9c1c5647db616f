"""The verified reference set: the expected outputs a `reference`-scored project grades against.

A person reviews the references, then `skynet reference verify` writes a small mark beside
skynet.toml (`reference.verified.json`: the reference set's hash, its item count, the data file
and the date), which the user commits. A project with `metric.name = "reference"` opens only
when that mark's hash is the hash of the references as they are now, so editing a reference
clears the mark until it is verified again.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from skynet.data import Dataset
from skynet.errors import ConfigError

__all__ = [
    "MARK_FILE",
    "MARK_VERSION",
    "ReferenceMark",
    "check_verified",
    "read_mark",
    "reference_hash",
    "verify",
]

MARK_FILE = "reference.verified.json"
MARK_VERSION = 1


class ReferenceMark(BaseModel):
    """What `skynet reference verify` writes: the reference set a person has reviewed.

    Attributes:
        version: the mark's format version.
        hash: sha256 of every item's id and expected output (`reference_hash`).
        items: how many items the set holds.
        data: the data file the references come from (as skynet.toml names it).
        verified: when it was marked (UTC, ISO 8601).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = MARK_VERSION
    hash: str
    items: int
    data: str
    verified: str


def _items(dataset: Dataset) -> list[Any]:
    return [*dataset.train, *dataset.val, *dataset.test]


def reference_hash(dataset: Dataset) -> str:
    """sha256 of the reference set: every item's id and expected output, in id order.

    Inputs are left out: only an edit to a reference (or an item added or removed) changes it.
    """
    pairs = sorted(([item.id, item.expected] for item in _items(dataset)), key=lambda p: p[0])
    canonical = json.dumps(pairs, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def read_mark(project_dir: Path) -> ReferenceMark | None:
    """The project's mark, or None when there is none.

    Raises:
        ConfigError: the file is there but is not a mark this Skynet reads.
    """
    path = Path(project_dir) / MARK_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{path}: not a readable reference mark ({exc}); run `skynet reference verify` to "
            "write it again"
        ) from None
    version = raw.get("version") if isinstance(raw, dict) else None
    if isinstance(version, int) and version > MARK_VERSION:
        raise ConfigError(
            f"{path}: version {version} was written by a newer Skynet; upgrade Skynet"
        )
    try:
        return ReferenceMark.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise ConfigError(
            f"{path}: {where}: {first['msg']}; run `skynet reference verify` to write it again"
        ) from None


def verify(project_dir: Path, dataset: Dataset, data_file: str) -> ReferenceMark:
    """Mark the project's current reference set as verified: write `reference.verified.json`."""
    mark = ReferenceMark(
        hash=reference_hash(dataset),
        items=len(_items(dataset)),
        data=data_file,
        verified=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    path = Path(project_dir) / MARK_FILE
    path.write_text(json.dumps(mark.model_dump(), indent=2) + "\n", encoding="utf-8")
    return mark


def check_verified(project_dir: Path, dataset: Dataset) -> str:
    """The reference set's hash, when the project's mark verifies it.

    Raises:
        ConfigError: no mark, or the references changed since it was written.
    """
    mark = read_mark(project_dir)
    current = reference_hash(dataset)
    if mark is None:
        raise ConfigError(
            f"{Path(project_dir) / 'skynet.toml'}: metric 'reference' grades against a verified "
            f"reference set, and {MARK_FILE} is missing: review the expected outputs, then run "
            "`skynet reference verify`"
        )
    if mark.hash != current:
        raise ConfigError(
            f"{Path(project_dir) / MARK_FILE}: the reference set changed since it was verified "
            f"({mark.verified}): review it, then run `skynet reference verify`"
        )
    return current
