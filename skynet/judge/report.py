"""The report's judge-accuracy section: for the baseline and the best, on each split, the judge's
raw accuracy and the prediction-powered one (PPI++), whose labelled set is the judge's
validation record."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skynet.errors import SkynetError
from skynet.packages import ReportSection, ReportView

if TYPE_CHECKING:
    from skynet.gain import Gain
    from skynet.scorers.judge import JudgeValidation

__all__ = ["judge_gain_section", "judge_section"]

TITLE = (
    "Judge accuracy: the judge's raw figure and PPI-corrected (labelled set: its validation record)"
)
HEADER = ("", "candidate", "split", "judge raw", "PPI-corrected", "interval", "lam", "N", "n")
IID = (
    "PPI assumes the labelled items were drawn i.i.d. from the outputs it corrects: labels taken "
    "from other candidates' outputs shift the correction (docs/scorers.md)."
)


def _record(
    config: Mapping[str, Any], project_dir: Path | None
) -> tuple[JudgeValidation | None, str]:
    """The run's judge validation record (the path its [judge] section names), or why none."""
    from skynet.scorers.judge import JudgeValidation

    if project_dir is None:
        return None, "the run has no project folder to read it from"
    section = config.get("judge") or {}
    path = Path(section.get("validation") or "judge-validation.json")
    if not path.is_absolute():
        path = project_dir / path
    try:
        return JudgeValidation.load(path), ""
    except SkynetError as exc:
        return None, str(exc)


def judge_gain_section(
    config: Mapping[str, Any],
    project_dir: Path | None,
    a: list[float],
    b: list[float],
    *,
    split: str,
    val_estimate: float | None,
) -> Gain:
    """b over a in true accuracy: the judge's decisions (a score of 1 is a pass) corrected for
    its error on the validation record's labelled items (skynet.gain.judge_gain). Without a
    record, or with scores that are not 0/1, the judge's own paired gain, its method saying why
    it is not corrected."""
    from skynet.gain import judge_gain, paired_gain

    raw = paired_gain(a, b, split=split, val_estimate=val_estimate)
    record, note = _record(config, project_dir)
    if record is None:
        return replace(raw, method=f"{raw.method}; the judge's error not corrected ({note})")
    if not raw.method.startswith("McNemar"):
        return replace(
            raw, method=f"{raw.method}; the judge's error not corrected (scores are not 0/1)"
        )
    return judge_gain(a, b, record.pairs, split=split, val_estimate=val_estimate)


def judge_section(view: ReportView) -> ReportSection:
    from skynet.scorers.ppi import judge_ppi

    record, note = _record(view.run.config, view.project_dir)
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    if record is not None:
        shown: set[str] = set()
        for role, candidate in view.shown:
            if candidate is None or candidate in shown:
                continue
            shown.add(candidate)
            for split, items in view.items.items():
                decisions = [
                    e.score == 1.0
                    for e in view.evaluations
                    if e.candidate_id == candidate
                    and e.split == split
                    and e.item_id in items
                    and e.error is None
                    and e.score is not None
                ]
                if not decisions:
                    continue
                try:
                    p = judge_ppi(decisions, record.judge_decisions, record.human_labels)
                except SkynetError as exc:
                    notes.append(f"note: {exc}")
                    continue
                rows.append(
                    (
                        role,
                        candidate,
                        split,
                        f"{p.judge_raw:.3f}",
                        f"{p.estimate:.3f}",
                        f"{1 - p.alpha:.0%} [{p.low:.3f}, {p.high:.3f}]",
                        f"{p.lam:.2f}",
                        str(p.N),
                        str(p.n),
                    )
                )
    else:
        notes.append(f"note: no PPI-corrected accuracy: {note}")
    return ReportSection(
        title=TITLE,
        header=HEADER,
        rows=tuple(rows),
        text_columns=3,
        notes=((IID,) if rows else ()) + tuple(dict.fromkeys(notes)),
    )
