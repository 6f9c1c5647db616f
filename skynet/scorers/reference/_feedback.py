"""The grade in plain words for the reflection model: the sub-scores, then what is wrong and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skynet.scorers.reference._rungs import DATE, EXTRA, JUDGE, MISSING, SHAPE, SIMILARITY
from skynet.scorers.reference._values import _shown

if TYPE_CHECKING:
    from skynet.scorers.reference._results import FieldResult, ReferenceResult

_SECTION_LIMIT = 12


def _count(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


def _why(f: FieldResult, threshold: float | None) -> str:
    if f.rung == JUDGE:
        return f"judge {f.grade}/100" if f.grade is not None else f.note
    if f.rung == SIMILARITY and f.similarity is not None:
        need = f", needs {threshold:g}" if threshold is not None and not f.equal else ""
        return f"similarity {f.similarity:.2f}{need}"
    if f.rung == DATE:
        return f.note or "a different date"
    if f.rung == SHAPE:
        return "a different shape (a record, a list or a plain value)"
    return "not equal"


def _section(title: str, lines: list[str]) -> list[str]:
    if not lines:
        return []
    shown = lines[:_SECTION_LIMIT]
    if len(lines) > _SECTION_LIMIT:
        shown.append(f"- … and {len(lines) - _SECTION_LIMIT} more")
    return [title, *shown]


def _feedback(r: ReferenceResult) -> str:
    head = (
        f"quality {r.quality:.2f}: completeness {r.completeness:.2f} ({_count(r.credit)} of "
        f"{r.reference_values} reference values found), correctness {r.correctness:.2f} "
        f"({_count(r.credit)} of {r.given_values} given values right)"
    )
    wrong, partial, missing, extra, errors = [], [], [], [], []
    for f in r.fields:
        if f.rung == MISSING:
            missing.append(f"- {f.path}: the reference has {_shown(f.reference)}")
        elif f.rung == EXTRA:
            extra.append(f"- {f.path}: {_shown(f.candidate)}")
        elif f.credit is None:
            errors.append(f"- {f.path}: {f.note}")
        elif f.credit == 0.0:
            wrong.append(
                f"- {f.path}: gave {_shown(f.candidate)}; the reference has "
                f"{_shown(f.reference)} ({_why(f, r.threshold)})"
            )
        elif f.credit < 1.0:
            partial.append(
                f"- {f.path}: gave {_shown(f.candidate)}; the reference has "
                f"{_shown(f.reference)} (credit {f.credit:.2f}, {_why(f, r.threshold)})"
            )
    for lst in r.lists.values():
        missing += [f"- {lst.path}[{u.index}]: {_shown(u.value)}" for u in lst.missed]
        extra += [f"- {lst.path}: {_shown(u.value)}" for u in lst.hallucinated]
    lines = [head]
    lines += _section("Wrong:", wrong)
    lines += _section("Partly right:", partial)
    lines += _section("Missing (in the reference, not in the answer):", missing)
    lines += _section("Not in the reference:", extra)
    lines += _section("Not graded:", errors)
    if r.notes:
        lines.append("Notes: " + "; ".join(r.notes))
    if len(lines) == 1:
        lines.append("Every value matches the reference.")
    return "\n".join(lines)
