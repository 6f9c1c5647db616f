"""Labelled rows: read a labels file (as `skynet judge collect` writes it, labelled by a person)
and put the judge's decision beside the person's on each row, for validation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skynet.data import Item, read_jsonl
from skynet.errors import DatasetError, ModelError
from skynet.models.governor import Governor
from skynet.scorers.judge._config import JudgeConfig
from skynet.scorers.judge._scorer import JUDGE_FAILED, _Judge
from skynet.textfile import read_text

if TYPE_CHECKING:
    from skynet.models import Models

__all__ = ["LabelledRow", "judge_labelled", "read_labels"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelledRow:
    """One labelled row of a labels file, with the place it came from ("labels.jsonl:3")."""

    where: str
    id: str
    input: dict[str, Any]
    output: Any
    reference: Any
    human: bool


def read_labels(path: Path) -> list[LabelledRow]:
    """Read a labels file (JSONL, as collect writes it, "human" filled in with true/false).

    Raises:
        DatasetError: the file is missing, a line is not a JSON object, lacks a field, or has
            "human" null or not a bool; the message names the file and line.
    """
    text = read_text(
        path,
        what="labels",
        key="--labels",
        missing=f"no such labels file; write one with `skynet judge collect --out {path.name}`",
        error=DatasetError,
    )
    rows: list[LabelledRow] = []
    for parsed in read_jsonl(text, str(path)):
        where, row = parsed.where, parsed.values
        missing = [k for k in ("id", "output", "reference", "human") if k not in row]
        if missing:
            raise DatasetError(
                f"{where}: no {', '.join(map(repr, missing))}; each line has id, input, output, "
                "reference and human"
            )
        human = row["human"]
        if human is None:
            raise DatasetError(
                f"{where}: \"human\" is null (item '{row['id']}' is not labelled yet); set it "
                "to true (the output is right) or false"
            )
        if not isinstance(human, bool):
            raise DatasetError(f'{where}: "human" is {human!r}; set it to true or false')
        given = row.get("input") or {}
        if not isinstance(given, dict):
            raise DatasetError(f'{where}: "input" is a {type(given).__name__}, not an object')
        rows.append(
            LabelledRow(
                where=where,
                id=str(row["id"]),
                input=given,
                output=row["output"],
                reference=row["reference"],
                human=human,
            )
        )
    if not rows:
        raise DatasetError(f"{path}: no labelled rows; label the rows `skynet judge collect` wrote")
    return rows


def judge_labelled(
    config: JudgeConfig,
    rows: Sequence[LabelledRow],
    *,
    models: Models | None = None,
    governor: Governor | None = None,
) -> list[tuple[bool, bool]]:
    """The judge's decision beside the person's on each labelled row: (judge, human) pairs.

    The judge is not yet validated here (validation needs its decisions). A verdict it cannot
    settle counts as its "wrong", as when it scores a run.

    Raises:
        ModelError: a judge call failed after retries (naming the row).
    """
    judge = _Judge(config, models=models, governor=governor)
    pairs: list[tuple[bool, bool]] = []
    for row in rows:
        item = Item(id=row.id, input=row.input, expected={"reference": row.reference})
        try:
            decision = judge.decide(item, row.output)
        except DatasetError as exc:
            raise DatasetError(f"{row.where}: {exc}") from None
        if decision.outcome == JUDGE_FAILED:
            raise ModelError(f"{row.where}: {decision.detail}", model=config.model)
        pairs.append((decision.correct, row.human))
    return pairs
