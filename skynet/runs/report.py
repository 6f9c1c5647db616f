"""The run report: baseline vs best, cost and time by role, the curve and the diff.

`summarize()` computes every figure from the run store; `render_text()` and `render_html()` only
lay them out. A candidate's score on a split is the mean over its evaluations of the items the run
evaluated the seed candidate on, and counts only when every one of those items is present: a
partial minibatch is not a val score. The mean follows skynet.mean: a candidate's own failure
(crash, time-out, bad output) counts as 0; a metric or model fault is left out of the mean and
shown beside it ("0.612 (2 metric errors left out)"). Every text a candidate wrote reaches the
terminal through skynet.terminal.printable: control characters are escaped.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import html
import json
import math
import os
import secrets
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from skynet.contract import STDOUT_KEY
from skynet.data import are_val_copies
from skynet.errors import ConfigError
from skynet.evaluation import CANDIDATE_ERROR
from skynet.gain import Gain, paired_gain
from skynet.mean import Mean, Paired, beside, mean_of, paired, paired_scores
from skynet.models.ledger import LedgerTotals
from skynet.packages import ReportSection, ReportView, package_gain
from skynet.python_objects import is_python_object_text, proposers_in
from skynet.runs.store import EVALUATION, CandidateRow, EvaluationRow, RunRow, RunStore
from skynet.terminal import printable, wrap
from skynet.view.plots import curve_svg, gain_svg

__all__ = [
    "CandidateSummary",
    "RunSummary",
    "gain_lines",
    "known_in_order",
    "render_html",
    "render_text",
    "summarize",
    "summary_json",
]

VAL = "val"
TEST = "test"


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateSummary:
    """One candidate's scores as the report counts them.

    Attributes:
        id: the candidate's id.
        parents: ids of the candidates it was derived from.
        seq: first-seen order in the run.
        content: component name → text.
        val_score: mean val score (its own failures as 0, metric and model faults left out),
            or None when its val evaluations are incomplete or none could be counted.
        val_items: val evaluations counted (errors included).
        val_errors: val evaluations that are errors (of any kind).
        val_failures: val evaluations in which the candidate itself failed: 0 in the mean.
        val_left_out: val errors that are not the candidate's, by kind: out of the mean.
        test_score: mean test score, or None (same rule as val).
        test_items: test evaluations counted (errors included).
        test_errors: test evaluations that are errors.
        test_failures, test_left_out: as for val.
        objectives: mean of each named score over its val evaluations (when val_score is known),
            a failure of the candidate counting as 0.
        val_known_at: seq of its last val evaluation, when val_score is known.
        val_metric_calls: the optimization's metric calls used by then (the curve's x).
        label: what `skynet eval` was asked to score (an evaluation-only run): "seed", a file.
    """

    id: str
    parents: list[str] = field(default_factory=list)
    seq: int = 0
    content: dict[str, str] = field(default_factory=dict)
    val_score: float | None = None
    val_items: int = 0
    val_errors: int = 0
    val_failures: int = 0
    val_left_out: dict[str, int] = field(default_factory=dict)
    test_score: float | None = None
    test_items: int = 0
    test_errors: int = 0
    test_failures: int = 0
    test_left_out: dict[str, int] = field(default_factory=dict)
    objectives: dict[str, float] = field(default_factory=dict)
    val_known_at: int | None = None
    val_metric_calls: int | None = None
    label: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """Every figure the report shows, computed from the run store.

    Attributes:
        run: the run as recorded.
        metric_hash: the metric whose scores are counted; others are stale.
        seed: the baseline (seed) candidate, when recorded.
        best: the best candidate: the one the engine named, else the best val score.
        candidates: every candidate, in first-seen order.
        cost: model-call totals by role (task, reflection, metric, and any other recorded).
        metric_calls: the search's metric calls used, as docs/runs.md defines them: every
            evaluation the engine asked for (every split but test), replays included, from the
            run's "metric_calls" note; for a run recorded before it, its evaluations recorded.
        replayed_calls: of metric_calls, those answered from the run's records, not scored again.
        errors: evaluations that are errors (all splits).
        error_kinds: errors counted by kind (task, metric, contract).
        proposals: proposals counted by status.
        diff: component name → unified diff of the best candidate against the seed (changed
            components only).
        curve: (metric calls used, best val score so far), one point each time a candidate's val
            score became known, in evaluation order.
        val_items: items in the val reference set (those the seed was evaluated on).
        test_items: items in the test reference set.
        stale: (candidate, item) pairs scored only under another metric; rescore to count them.
        wall_seconds: how long the run ran (RunRow.wall_seconds); when that was not measured,
            from its start to its end (or its last record while running), said by wall_note.
        current_hash: the metric hash the project grades under now (None: not known).
        outdated: counted results graded under another hash than `current_hash` (an older
            reference or scoring config): stale until `skynet rescore`.
        repeats: with `repeat = N` (N > 1), the best candidate's items: mean, spread, which run
            is shown.
        sections: the sections a scorer package adds (skynet.packages), e.g. the judge's
            raw and PPI-corrected accuracy.
        printed: the counted evaluations whose score() printed (kept off stdout, in each one's
            extra["metric_stdout"]), as (item id, what it printed), in recording order.
        paired: split -> the seed and the best compared on the items both have a counted
            score (skynet.mean.paired): the change the report shows.
        gain: the best against the seed on the test items, paired, with its interval, p-value
            and verdict (skynet.gain), its val_estimate the same on val; None when either has
            no test evaluation (no test split, confirmation off, or not yet made).
        confirmation: the run's "confirmation" note (RunSession.confirm): its "state" is
            "done", "off", "no test split" or "stopped"; {} for a run made before it.
        confirmation_calls: the test evaluations recorded in the run (the confirmation's, and
            any `skynet eval --split test` recorded into it): apart from metric_calls.
        val_from_train: no val was given: the val items are the train items again
            (skynet.data.val_copies), so the val figures are train figures, not held out.
        evaluations: the counted evaluations (under metric_hash, every split) in recording
            order, from which skynet.runs.detail builds the per-item matrix.
        val_reference: the val reference items (val_items of them).
    """

    run: RunRow
    metric_hash: str
    seed: CandidateSummary | None
    best: CandidateSummary | None
    candidates: list[CandidateSummary]
    cost: dict[str, LedgerTotals]
    metric_calls: int
    errors: int
    error_kinds: dict[str, int]
    proposals: dict[str, int]
    diff: dict[str, str]
    curve: list[tuple[int, float]]
    val_items: int
    test_items: int
    stale: int
    wall_seconds: float | None
    sections: tuple[ReportSection, ...] = ()
    wall_note: str = ""  # how wall_seconds was had when not measured ("start to end, ...")
    current_hash: str | None = None
    outdated: int = 0
    repeats: tuple[ItemRepeats, ...] = ()
    printed: tuple[tuple[str, str], ...] = ()
    paired: dict[str, Paired] = field(default_factory=dict)
    gain: Gain | None = None
    confirmation: dict[str, Any] = field(default_factory=dict)
    confirmation_calls: int = 0
    replayed_calls: int = 0
    val_from_train: bool = False
    evaluations: tuple[EvaluationRow, ...] = ()
    val_reference: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRepeats:
    """One item's repeated runs (`repeat = N`): the mean score and the consistency spread.

    Attributes:
        item_id, split: the item and its split.
        runs: N; scored: how many of them were scored (not errors).
        mean: the mean score; low, high: the least and the greatest score (the spread).
        shown: the run (1-based) whose output the result shows: the median-quality one (for an
            even count, the lower of the two middle runs).
    """

    item_id: str
    split: str
    runs: int
    scored: int
    mean: float | None
    low: float | None
    high: float | None
    shown: int | None


def _repeats(evals: list[EvaluationRow], candidate: str | None) -> tuple[ItemRepeats, ...]:
    found = []
    for e in evals:
        if e.candidate_id != candidate or not e.repetitions:
            continue
        result = e.result()
        spread, shown = result.spread, result.shown
        found.append(
            ItemRepeats(
                item_id=e.item_id,
                split=e.split,
                runs=len(result.repetitions),
                scored=sum(r.ok and r.score is not None for r in result.repetitions),
                mean=e.score,
                low=spread[0] if spread else None,
                high=spread[1] if spread else None,
                shown=shown + 1 if isinstance(shown, int) else None,
            )
        )
    return tuple(sorted(found, key=lambda r: (r.split, r.item_id)))


# --------------------------------------------------------------------------------------------
# Computing.


def _reference(evals: list[EvaluationRow], seed_id: str | None, split: str) -> set[str]:
    on_split = [e for e in evals if e.split == split]
    seeds = {e.item_id for e in on_split if e.candidate_id == seed_id}
    # With no seed evaluation on this split (e.g. `skynet eval` of the best only), each candidate
    # is held to the union of the items the run evaluated on it.
    return seeds if seeds else {e.item_id for e in on_split}


@dataclass(frozen=True, slots=True, kw_only=True)
class _SplitScore:
    """One candidate's figures on one split's reference set."""

    mean: Mean
    items: int
    errors: int
    complete: bool
    known_at: int | None = None
    objectives: dict[str, float] = field(default_factory=dict)

    @property
    def score(self) -> float | None:
        return self.mean.value if self.complete else None


def _split_score(rows: list[EvaluationRow], reference: set[str]) -> _SplitScore:
    counted = [r for r in rows if r.item_id in reference]
    errors = sum(r.error is not None or r.score is None for r in counted)
    mean = mean_of((r.score, r.error_kind, r.error is None) for r in counted)
    if not reference or {r.item_id for r in counted} != reference:
        return _SplitScore(mean=mean, items=len(counted), errors=errors, complete=False)
    known_at = max(r.seq for r in counted)
    ok = [r for r in counted if r.error is None and r.score is not None]
    failures = sum(r.error is not None and r.error_kind == CANDIDATE_ERROR for r in counted)
    names: dict[str, list[float]] = {}
    for r in ok:
        for name, value in r.scores.items():
            names.setdefault(name, []).append(float(value))
    # A failure of the candidate is 0 on every named score too, as in its mean.
    objectives = {name: sum(values) / (len(values) + failures) for name, values in names.items()}
    return _SplitScore(
        mean=mean,
        items=len(counted),
        errors=errors,
        complete=True,
        known_at=known_at,
        objectives=objectives if mean.value is not None else {},
    )


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def summarize(
    store: RunStore,
    run_id: str,
    *,
    metric_hash: str | None = None,
    current_hash: str | None = None,
    project_dir: Path | None = None,
) -> RunSummary:
    """Compute the report of one run from the store.

    Args:
        store: the run store.
        run_id: the run.
        metric_hash: the metric whose scores count (default: the one the run started with);
            evaluations recorded under another are counted as stale.
        current_hash: the metric hash the project grades under now; counted results graded
            under another are reported as outdated (stale until rescored).
        project_dir: the run's project folder, where a scorer package (skynet.packages) finds
            the files its report section reads (the judge's validation record); None for none.

    Raises:
        ConfigError: no such run.
    """
    run = store.get_run(run_id)
    chosen = metric_hash or run.metric_hash
    every = store.evaluations(run_id)
    evals = [e for e in every if e.metric_hash == chosen]
    current_pairs = {(e.candidate_id, e.item_id) for e in evals}
    stale = len({(e.candidate_id, e.item_id) for e in every} - current_pairs)
    outdated = 0
    if current_hash is not None and current_hash != chosen:
        regraded = {(e.candidate_id, e.item_id) for e in every if e.metric_hash == current_hash}
        outdated = len(current_pairs - regraded)

    rows: list[CandidateRow] = store.candidates(run_id)
    known = {c.id for c in rows}
    next_seq = max((c.seq for c in rows), default=0)
    # Evaluated candidates the engine never registered still get a line of their own.
    for e in evals:
        if e.candidate_id not in known:
            next_seq += 1
            known.add(e.candidate_id)
            rows.append(CandidateRow(id=e.candidate_id, content={}, parents=[], seq=next_seq))

    evaluation_only = run.engine == EVALUATION
    # An evaluation-only run has no seed to hold others to: each split's items are all it
    # evaluated there.
    seed_id = None if evaluation_only else run.seed_candidate_id or (rows[0].id if rows else None)
    val_ref = _reference(evals, seed_id, VAL)
    test_ref = _reference(evals, seed_id, TEST)
    labels = (run.notes.get("evaluated") or {}) if evaluation_only else {}

    by_candidate: dict[str, list[EvaluationRow]] = {}
    for e in evals:
        by_candidate.setdefault(e.candidate_id, []).append(e)

    # A val score's x on the curve: the optimization's metric calls used when it became known.
    optimizing = [e for e in evals if e.split != TEST]
    seqs = sorted(e.seq for e in optimizing)
    candidates: list[CandidateSummary] = []
    for c in rows:
        mine = by_candidate.get(c.id, [])
        val = _split_score([e for e in mine if e.split == VAL], val_ref)
        test = _split_score([e for e in mine if e.split == TEST], test_ref)
        known_at = val.known_at if val.score is not None else None
        candidates.append(
            CandidateSummary(
                id=c.id,
                parents=list(c.parents),
                seq=c.seq,
                content=dict(c.content),
                val_score=val.score,
                val_items=val.items,
                val_errors=val.errors,
                val_failures=val.mean.failures,
                val_left_out=dict(val.mean.left_out),
                test_score=test.score,
                test_items=test.items,
                test_errors=test.errors,
                test_failures=test.mean.failures,
                test_left_out=dict(test.mean.left_out),
                objectives=val.objectives,
                val_known_at=known_at,
                val_metric_calls=None if known_at is None else bisect_right(seqs, known_at),
                label=str(labels.get(c.id, "")) if isinstance(labels, dict) else "",
            )
        )
    by_id = {c.id: c for c in candidates}
    seed = by_id.get(seed_id) if seed_id else None

    best: CandidateSummary | None = None
    if evaluation_only:
        pass  # nothing was optimized: no best
    elif run.best_candidate_id is not None:
        best = by_id.get(run.best_candidate_id) or CandidateSummary(id=run.best_candidate_id)
    else:
        scored = [c for c in candidates if c.val_score is not None]
        # Ties go to the earliest candidate; with no val score yet, the seed stands.
        best = max(scored, key=lambda c: (c.val_score, -c.seq)) if scored else seed

    # The curve: the best val score so far, each time a val score became known.
    curve: list[tuple[int, float]] = []
    best_so_far = -math.inf
    for c in known_in_order(candidates):
        assert c.val_score is not None and c.val_metric_calls is not None
        best_so_far = max(best_so_far, c.val_score)
        curve.append((c.val_metric_calls, best_so_far))

    diff: dict[str, str] = {}
    if seed is not None and best is not None and best.id != seed.id:
        for name in sorted(set(seed.content) | set(best.content)):
            before, after = seed.content.get(name, ""), best.content.get(name, "")
            if before == after:
                continue
            diff[name] = "".join(
                difflib.unified_diff(
                    _lines(before), _lines(after), fromfile=f"seed/{name}", tofile=f"best/{name}"
                )
            )

    errors = [e for e in evals if e.error is not None]
    wall = run.wall_seconds  # measured on a monotonic clock (a resume's pause left out)
    wall_note = ""
    if wall is None:
        wall_note = "start to end, any pause included"
        start = _parse_time(run.created)
        last = max((e.created for e in every), default=None)
        end = _parse_time(run.finished) or _parse_time(last)
        wall = (end - start).total_seconds() if start and end else None
        if wall is not None and wall < 0:
            wall = None  # the wall clock was stepped back while it ran: unknown, not negative

    pairs = {
        split: _paired(evals, seed, best, ref)
        for split, ref in ((VAL, val_ref), (TEST, test_ref))
        if seed is not None and best is not None and ref
    }
    confirmation = run.notes.get("confirmation")
    used = run.notes.get("metric_calls")  # RunSession's count, as the progress line showed it
    used = used if isinstance(used, dict) else {}
    view = ReportView(
        run=run,
        project_dir=project_dir,
        evaluations=evals,
        shown=[("baseline", seed.id if seed else None), ("best", best.id if best else None)],
        items={VAL: val_ref, TEST: test_ref},
    )
    gain = None
    if seed is not None and best is not None and test_ref:
        gain = _gain(view, seed, best, test_ref, val=pairs.get(VAL))
    return RunSummary(
        run=run,
        metric_hash=chosen,
        seed=seed,
        best=best,
        candidates=candidates,
        cost=store.cost_by_role(run_id),
        metric_calls=int(used.get("used", len(optimizing))),
        replayed_calls=int(used.get("replayed", 0)),
        errors=len(errors),
        error_kinds=dict(Counter(e.error_kind or "unknown" for e in errors)),
        proposals=dict(Counter(p.status for p in store.proposals(run_id))),
        diff=diff,
        curve=curve,
        val_items=len(val_ref),
        test_items=len(test_ref),
        stale=stale,
        wall_seconds=wall,
        wall_note=wall_note if wall is not None else "",
        sections=_package_sections(view),
        current_hash=current_hash,
        outdated=outdated,
        repeats=_repeats(evals, best.id if best is not None else None),
        printed=tuple(
            (e.item_id, str(e.extra[STDOUT_KEY])) for e in evals if e.extra.get(STDOUT_KEY)
        ),
        paired=pairs,
        gain=gain,
        confirmation=dict(confirmation) if isinstance(confirmation, dict) else {},
        confirmation_calls=len(evals) - len(optimizing),
        val_from_train=_val_from_train(store.items(run_id)),
        evaluations=tuple(evals),
        val_reference=frozenset(val_ref),
    )


def _outcomes(
    evals: list[EvaluationRow], cid: str, reference: set[str]
) -> dict[str, tuple[float | None, str | None, bool]]:
    return {
        e.item_id: (e.score, e.error_kind, e.error is None)
        for e in evals
        if e.candidate_id == cid and e.item_id in reference
    }


def _paired(
    evals: list[EvaluationRow], a: CandidateSummary, b: CandidateSummary, reference: set[str]
) -> Paired:
    """a and b on a split's reference items, compared on those both have counted."""
    return paired(_outcomes(evals, a.id, reference), _outcomes(evals, b.id, reference))


def _gain(
    view: ReportView,
    seed: CandidateSummary,
    best: CandidateSummary,
    reference: set[str],
    *,
    val: Paired | None,
) -> Gain | None:
    """The best against the seed on the test items both have counted (skynet.gain), as the
    run's scorer package measures it when it corrects for its own error (the judge); None
    when either has no test evaluation."""
    evals = view.evaluations
    mine, theirs = _outcomes(evals, seed.id, reference), _outcomes(evals, best.id, reference)
    if not mine or not theirs:
        return None
    _, a, b = paired_scores(mine, theirs)
    val_estimate = None if val is None else val.change
    corrected = package_gain(
        view.run.config, view.project_dir, list(a), list(b), split=TEST, val_estimate=val_estimate
    )
    return corrected or paired_gain(a, b, split=TEST, val_estimate=val_estimate)


SUMMARY_SCHEMA = 1


def summary_json(summary: RunSummary) -> dict[str, Any]:
    """The run's summary as one JSON document (`skynet show RUN --json`; schema in docs/runs.md).

    Its keys are stable within a "schema" number; a key is only ever added. A figure not known
    is null, never 0: a role's cost_usd is null when none of its calls had a known price
    (unpriced_calls says how many calls its cost leaves out).
    """
    from skynet.runs.detail import detailed_json, detailed_results  # it imports this module

    s = summary

    def candidate(c: CandidateSummary | None) -> dict[str, Any] | None:
        return None if c is None else {"id": c.id, "val": c.val_score, "test": c.test_score}

    def cost(role: str, t: LedgerTotals) -> dict[str, Any]:
        priced = t.calls - t.failed_calls - t.unpriced_calls
        unknown = t.unpriced_calls > 0 and priced <= 0 and not t.failed_cost_usd
        unknown = unknown or (role == "reflection" and _reflection_unknown(s, t))
        return {
            "calls": t.calls,
            "cost_usd": None if unknown else t.cost_usd,
            "unpriced_calls": t.unpriced_calls,
            "untokened_calls": t.untokened_calls,
            "unmeasured_calls": t.unmeasured_calls,
            "input_tokens": t.input_tokens,
            "output_tokens": t.output_tokens,
        }

    stopped_by = s.run.notes.get("stopped_by") or (
        s.run.error if s.run.status == "stopped" else None
    )
    limit = s.run.budget.get("max_metric_calls")
    return {
        "schema": SUMMARY_SCHEMA,
        "run_id": s.run.id,
        "status": s.run.status,
        "engine": s.run.engine,
        "stopped_by": str(stopped_by) if stopped_by else None,
        "items": {VAL: s.val_items, TEST: s.test_items},
        "baseline": candidate(s.seed),
        "best": candidate(s.best),
        "gain": None if s.gain is None else s.gain.as_dict(),
        "confirmation": dict(s.confirmation),
        "metric_calls": {
            "search": s.metric_calls,
            "confirmation": s.confirmation_calls,
            "max": limit if limit else None,
        },
        "cost": {role: cost(role, t) for role, t in s.cost.items()},
        "errors": s.errors,
        "error_kinds": dict(s.error_kinds),
        "val_from_train": s.val_from_train,
        "detailed": detailed_json(detailed_results(s)),
    }


def known_in_order(candidates: list[CandidateSummary]) -> list[CandidateSummary]:
    """The candidates whose val score is known, in the order it became known."""
    known = [c for c in candidates if c.val_known_at is not None]
    return sorted(known, key=lambda c: c.val_known_at or 0)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # a last line without newline would glue onto the next diff line
    return lines


# --------------------------------------------------------------------------------------------
# Formatting shared by both renderings.


def _score(
    value: float | None, items: int, expected: int, failures: int, left_out: dict[str, int]
) -> str:
    """A mean with what stands beside it: "0.612 (2 metric errors left out)"."""
    if value is None and items == 0:
        return "-"
    detail = []
    if items < expected:
        detail.append(f"{items} of {expected} items")
    detail += beside(failures, left_out)
    shown = f"{value:.3f}" if value is not None else "-"
    return f"{shown} ({', '.join(detail)})" if detail else shown


def _val(c: CandidateSummary | None, s: RunSummary) -> str:
    if c is None:
        return "-"
    return _score(c.val_score, c.val_items, s.val_items, c.val_failures, c.val_left_out)


def _test(c: CandidateSummary | None, s: RunSummary) -> str:
    if c is None:
        return "-"
    return _score(c.test_score, c.test_items, s.test_items, c.test_failures, c.test_left_out)


def _delta(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None else f"{b - a:+.3f}"


def _change(s: RunSummary, split: str, a: float | None, b: float | None) -> str:
    """The best's change over the seed on a split: on the items both have counted, so an item
    left out for one (a fault, not an answer) is left out for both."""
    if a is None or b is None:
        return ""
    pair = s.paired.get(split)
    if pair is None or pair.change is None:
        return _delta(a, b)
    items = s.val_items if split == VAL else s.test_items
    shared = "" if pair.n == items else f" (on the {pair.n} items both counted)"
    return f"{pair.change:+.3f}{shared}"


def _usd(t: LedgerTotals) -> str:
    return t.cost_text


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def _total(cost: dict[str, LedgerTotals]) -> LedgerTotals:
    values = list(cost.values())
    return LedgerTotals(
        calls=sum(t.calls for t in values),
        failed_calls=sum(t.failed_calls for t in values),
        cached_calls=sum(t.cached_calls for t in values),
        input_tokens=sum(t.input_tokens for t in values),
        output_tokens=sum(t.output_tokens for t in values),
        cost_usd=sum(t.cost_usd for t in values),
        unpriced_calls=sum(t.unpriced_calls for t in values),
        elapsed_ms=sum(t.elapsed_ms for t in values),
        failed_cost_usd=sum(t.failed_cost_usd for t in values),
        untokened_calls=sum(t.untokened_calls for t in values),
        unmeasured_calls=sum(t.unmeasured_calls for t in values),
    )


def _cost_rows(s: RunSummary) -> list[list[str]]:
    rows = []
    for role, t in [*s.cost.items(), ("total", _total(s.cost))]:
        rows.append(
            [
                role,
                str(t.calls),
                str(t.cached_calls),
                str(t.failed_calls),
                f"{t.input_tokens:,}",
                f"{t.output_tokens:,}",
                _own_cost(s, role, t),
                _duration(t.elapsed_ms / 1000),
            ]
        )
    return rows


_COST_HEADER = ["role", "calls", "cached", "failed", "in tokens", "out tokens", "USD", "time"]


def _table(
    header: list[str], rows: list[list[str]], *, text_columns: int = 1, indent: str = "  "
) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        # Names left-aligned, figures right-aligned.
        out = [
            cell.ljust(w) if i < text_columns else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return (indent + "  ".join(out)).rstrip()

    return [line(header), indent + "  ".join("-" * w for w in widths), *map(line, rows)]


def _budget_calls(s: RunSummary) -> str:
    limit = s.run.budget.get("max_metric_calls")
    search = f"{s.metric_calls} of {limit}" if limit else str(s.metric_calls)
    if s.replayed_calls:
        search += (
            f" ({s.replayed_calls} replayed from the run's records: not scored again, but "
            "counted, as the engine counts them)"
        )
    if not s.confirmation_calls:
        return search
    return f"search {search}, confirmation {s.confirmation_calls} (test)"


NO_TEST_SPLIT = (
    "no test split: the val figure chose the best and overstates it; add test items "
    "([data] split or a test file) to confirm"
)


def gain_lines(s: RunSummary) -> list[str]:
    """The run's headline: the best's gain over the seed on held-out test items, paired, with
    its interval and verdict, and beside it the val gain that chose it. Said in words when
    there is none (no test split, confirmation off or stopped). Then how the best was chosen."""
    if _evaluation_only(s) or s.seed is None or s.best is None:
        return []
    return [*_gain_lines(s), *_val_from_train_line(s), _selection_line(s)]


def _val_from_train(items: dict[str, Any]) -> bool:
    """Whether the run's val items are its train items again (skynet.data.val_copies)."""

    def split(name: str) -> dict[str, Any]:
        return {i.item_id: (i.input, i.expected) for i in items.values() if i.split == name}

    return are_val_copies(split("train"), split(VAL))


VAL_FROM_TRAIN = (
    "  val: none was given, so the train rows served as val (as in gepa and dspy.GEPA with "
    "valset=None): the val figures are train figures, not held out"
)


def _val_from_train_line(s: RunSummary) -> list[str]:
    return [VAL_FROM_TRAIN] if s.val_from_train else []


def _selection_line(s: RunSummary) -> str:
    chosen = s.run.notes.get("selection")
    if isinstance(chosen, dict) and chosen.get("mode") == "holdout":
        return (
            f"  selection: holdout: the best was chosen among {len(chosen.get('candidates', []))}"
            f" candidates on {chosen.get('items')} items carved from val (val ranked them; the"
            " val figures are on the rest of val)"
        )
    return (
        "  selection: val (gepa's): the val items chose the best; [engine] select = "
        '"holdout" chooses it on items carved from val instead'
    )


def _gain_lines(s: RunSummary) -> list[str]:
    assert s.seed is not None and s.best is not None
    if s.best.id == s.seed.id:
        test = "" if s.seed.test_score is None else f"; its test score {s.seed.test_score:.3f}"
        return [
            "Gain: none: the best is the seed (no candidate beat it on val)"
            f"{test} on {s.test_items} test items"
            if s.test_items
            else "Gain: none: the best is the seed (no candidate beat it on val)"
        ]
    pair = s.paired.get(VAL)
    val = None if pair is None else pair.change
    val_text = "-" if val is None else f"{val:+.3f}"
    state = s.confirmation.get("state")
    g = s.gain
    if g is not None and g.n > 0:
        lines = [f"Gain on held-out test items (best - seed, paired): {g.describe()}"]
        if g.raw_estimate is not None:
            lines.append(
                f"  in true accuracy, the judge's error corrected: the judge's own figure "
                f"{g.raw_estimate:+.3f}; {g.method}"
            )
        elif "judge's error not corrected" in g.method:
            lines.append(f"  {g.method}")
        if g.val_estimate is not None and g.estimate is not None:
            lines.append(
                f"  val gain {g.val_estimate:+.3f}, on the items that chose the best (a figure "
                f"that selected cannot confirm); shrinkage val to test "
                f"{g.val_estimate - g.estimate:+.3f}"
            )
        if state == "stopped":
            lines.append(f"  confirmation stopped: {s.confirmation.get('stopped_by', '')}")
        return lines
    if state == "no test split" or (not state and s.test_items == 0):
        return [f"Gain: {val_text} on val; {NO_TEST_SPLIT}"]
    if state == "off":
        return [
            f"Gain: {val_text} on val, not confirmed ([budget] confirm = false): the val "
            "figure chose the best and overstates it; `skynet eval --candidate best --against "
            "seed --split test` confirms it"
        ]
    if state == "stopped":
        return [
            f"Gain: {val_text} on val, not confirmed: the confirmation stopped "
            f"({s.confirmation.get('stopped_by', '')})"
        ]
    return [
        f"Gain: {val_text} on val, not confirmed yet: `skynet eval --candidate best --against "
        "seed --split test` confirms it on the test items"
    ]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def _score_rows(s: RunSummary) -> list[list[str]]:
    """Baseline, best and the change, on val and test (the text and HTML reports share it)."""
    rows = [
        ["baseline", s.seed.id if s.seed else "-", _val(s.seed, s), _test(s.seed, s)],
        ["best", s.best.id if s.best else "-", _val(s.best, s), _test(s.best, s)],
    ]
    if s.seed is not None and s.best is not None:
        rows.append(
            [
                "change",
                "",
                _change(s, VAL, s.seed.val_score, s.best.val_score),
                _change(s, TEST, s.seed.test_score, s.best.test_score),
            ]
        )
    return rows


def _evaluation_only(s: RunSummary) -> bool:
    return s.run.engine == EVALUATION


_EVALUATED_HEADER = ["candidate", "evaluated", "val", "test"]


def _evaluated_rows(s: RunSummary) -> list[list[str]]:
    """An evaluation-only run's candidates: what `skynet eval` was asked, and the scores."""
    return [[c.id, c.label or "-", _val(c, s), _test(c, s)] for c in s.candidates]


def _scores_title(s: RunSummary) -> str:
    sizes = f"val: {s.val_items} items, test: {s.test_items} items"
    if _evaluation_only(s):
        return f"Scores, evaluation only: nothing was optimized ({sizes})"
    return f"Scores ({sizes})"


UNSANDBOXED = (
    'unsandboxed: code candidates ran without the sandbox ([artifact] sandbox = "none"); they '
    "could read the data and the run records, so their scores and times may be faked"
)


def _unsandboxed(s: RunSummary) -> bool:
    """Whether the run's code candidates ran unsandboxed (shown in every report)."""
    artifact = s.run.config.get("artifact") or {}
    return artifact.get("kind") == "code" and artifact.get("sandbox") == "none"


def _shown_notes(s: RunSummary) -> list[tuple[str, Any]]:
    # An evaluation-only run's list of what was evaluated is its score table, not a note; the
    # confirmation is said in the gain's lines, the metric calls in the facts.
    skip = {"evaluated", "confirmation"} if _evaluation_only(s) else {"confirmation"}
    skip |= {"metric_calls", "self_test"}
    return [(k, v) for k, v in sorted(s.run.notes.items()) if k not in skip]


def _objective_rows(s: RunSummary) -> list[list[str]]:
    seed_obj = s.seed.objectives if s.seed else {}
    best_obj = s.best.objectives if s.best else {}
    rows = []
    for name in sorted(set(seed_obj) | set(best_obj)):
        a, b = seed_obj.get(name), best_obj.get(name)
        rows.append(
            [
                name,
                "-" if a is None else f"{a:.3f}",
                "-" if b is None else f"{b:.3f}",
                _delta(a, b),
            ]
        )
    return rows


def in_pool(s: RunSummary, c: CandidateSummary) -> bool:
    """Whether `c` is in the search's pool (the seed, or scored on every val item), as gepa's
    and dspy.GEPA's results count candidates; a proposal rejected on its minibatch is not."""
    return c.val_known_at is not None or (s.seed is not None and c.id == s.seed.id)


def _candidate_rows(s: RunSummary, *, pool: bool = True) -> list[list[str]]:
    rows = []
    for c in s.candidates:
        if in_pool(s, c) is not pool:
            continue
        role = []
        if s.seed is not None and c.id == s.seed.id:
            role.append("seed")
        if s.best is not None and c.id == s.best.id:
            role.append("best")
        rows.append(
            [
                c.id,
                ", ".join(c.parents) or "-",
                _val(c, s),
                _test(c, s),
                str(c.val_errors + c.test_errors),
                " ".join(role),
            ]
        )
    return rows


_CANDIDATE_HEADER = ["candidate", "parents", "val", "test", "errors", ""]

_REPEATS_HEADER = ["item", "split", "mean", "spread", "scored", "shown"]


def _outdated(s: RunSummary) -> str:
    verify = (
        "`skynet reference verify` (if a reference was edited), then "
        if (s.run.config.get("metric") or {}).get("name") == "reference"
        else ""
    )
    return (
        f"Stale: {s.outdated} result(s) were graded under an older reference or scoring config "
        f"(metric {s.metric_hash[:12]}, now {(s.current_hash or '')[:12]}); "
        f"{verify}`skynet rescore` grades the saved outputs again (no task call)"
    )


def _repeats_title(s: RunSummary) -> str:
    runs = max(r.runs for r in s.repeats)
    who = s.best.id if s.best is not None else "-"
    return (
        f"Repetitions of the best candidate {who} ({runs} runs per item; the output shown is the "
        "median-quality run, for an even count the lower of the two middle ones)"
    )


def _repeat_rows(s: RunSummary) -> list[list[str]]:
    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    return [
        [
            r.item_id,
            r.split,
            fmt(r.mean),
            f"{fmt(r.low)}-{fmt(r.high)}",
            f"{r.scored}/{r.runs}",
            "-" if r.shown is None else f"run {r.shown}",
        ]
        for r in s.repeats
    ]


def _package_sections(view: ReportView) -> tuple[ReportSection, ...]:
    """The section the run's scorer package adds, if its metric is one (skynet.packages)."""
    from skynet.packages import package_for

    name = (view.run.config.get("metric") or {}).get("name")
    try:
        package = package_for(name if isinstance(name, str) else None)
    except ConfigError as exc:  # a plugin that no longer imports: say so, report the rest
        return (ReportSection(title=f"Scorer {name}", notes=(f"note: {exc}",)),)
    section = package.report(view) if package is not None else None
    return (section,) if section is not None else ()


# --------------------------------------------------------------------------------------------
# Text.


def render_text(summary: RunSummary, *, columns: int | None = None) -> str:
    """The report as plain text for a terminal. Candidate texts, outputs and errors are in it,
    so every control character but newline and tab is escaped (skynet.terminal.printable).

    Args:
        columns: wrap the prose (notes, errors, facts) to this width (skynet.terminal.width());
            None leaves each on one line. Tables and diffs are never wrapped.
    """
    s, run = summary, summary.run

    def prose(text: str, indent: str = "") -> list[str]:
        return wrap(printable(text), columns, indent=indent)

    engine = (
        "evaluation only (skynet eval)"
        if _evaluation_only(s)
        else f"engine {run.engine}  seed {run.seed}"
    )
    out = [
        f"Run {run.id}  {run.status}  {engine}",
        *prose(
            f"started {run.created}  finished {run.finished or '-'}  "
            f"wall time {_duration(s.wall_seconds)}" + (f" ({s.wall_note})" if s.wall_note else ""),
            "  ",
        ),
        f"  dataset {run.dataset_hash[:12]}  metric {s.metric_hash[:12]}",
    ]
    if run.error:
        out += prose(f"error: {run.error}", "  ")
    if _unsandboxed(s):
        out += prose(UNSANDBOXED, "  ")
    for key, value in _shown_notes(s):
        out += prose(f"{key}: {json.dumps(value)}", "  ")
    out.append("")
    headline = gain_lines(s)
    if headline:
        out += [line for text in headline for line in prose(text, "  ")] + [""]

    out.append(_scores_title(s))
    if _evaluation_only(s):
        out += _table(_EVALUATED_HEADER, _evaluated_rows(s), text_columns=2)
    else:
        out += _table(["", "candidate", "val", "test"], _score_rows(s), text_columns=2)
    for section in s.sections:
        out += ["", section.title]
        if section.rows:
            rows = [list(r) for r in section.rows]
            out += _table(list(section.header), rows, text_columns=section.text_columns)
        for note in section.notes:
            out += prose(note, "  ")
    objectives = _objective_rows(s)
    if objectives:
        out += ["", "Objectives (val means)"]
        out += _table(["objective", "baseline", "best", "change"], objectives)
    out += ["", "Cost and time by role"]
    out += _table(_COST_HEADER, _cost_rows(s))
    out.append("")
    for fact in _facts(s):
        out += prose(fact)
    if s.stale:
        out += prose(
            f"Stale: {s.stale} evaluation(s) were scored under another metric; "
            "rescore the run to count them"
        )
    if s.outdated:
        out += prose(_outdated(s))
    if s.repeats:
        out += ["", *prose(_repeats_title(s))]
        out += _table(_REPEATS_HEADER, _repeat_rows(s), text_columns=2)
    if _evaluation_only(s):
        return printable("\n".join(out) + "\n", multiline=True)
    if s.candidates:
        pooled = _candidate_rows(s)
        out += ["", f"Candidates ({len(pooled)}: the seed and those scored on val, the pool)"]
        out += _table(_CANDIDATE_HEADER, pooled, text_columns=2)
        rejected = _candidate_rows(s, pool=False)
        if rejected:
            out += ["", f"Proposals rejected on their minibatch ({len(rejected)}, not in the pool)"]
            out += _table(_CANDIDATE_HEADER, rejected, text_columns=2)
    out += ["", "Best candidate against the seed"]
    if not s.diff:
        out.append("  (no change: the best candidate is the seed)")
    for text in s.diff.values():
        out.append(text.rstrip("\n"))
    # Escaped last, as a whole: nothing a candidate wrote reaches the terminal raw.
    return printable("\n".join(out) + "\n", multiline=True)


def _facts(s: RunSummary) -> list[str]:
    """Evaluations (metric calls against the budget), errors by kind, proposals."""
    errors = f"Evaluation errors: {s.errors}" + (
        f" ({_counts(s.error_kinds)})" if s.error_kinds else ""
    )
    if _evaluation_only(s):
        return [
            f"Evaluations: {sum(c.val_items + c.test_items for c in s.candidates)}",
            errors,
            *_printed(s),
            *_untokened(s),
            *_unmeasured(s),
            *_self_test(s),
        ]
    return [
        f"Metric calls used: {_budget_calls(s)}",
        errors,
        f"Proposals: {_counts(s.proposals)}",
        *_printed(s),
        *_untokened(s),
        *_unmeasured(s),
        *_self_test(s),
    ]


def _self_test(s: RunSummary) -> list[str]:
    """One line when the metric's self-test was not run in full before the run, one per kind of
    item it left out (and why), and one when it called models (a judge): its calls are in the
    metric role's cost above."""
    mode = (s.run.config.get("metric") or {}).get("self_test", "full")
    lines = []
    if mode == "contract":
        lines.append(
            'Metric self-test: contract only ([metric] self_test = "contract"): one item\'s '
            "return value was checked; the answer key and the null control were not"
        )
    if mode == "off":
        lines.append('Metric self-test: off ([metric] self_test = "off"): nothing was checked')
    tests = s.run.notes.get("self_test") or []
    for said in dict.fromkeys(x for t in tests for x in t.get("skipped") or []):
        lines.append(f"Metric self-test: {said}")
    model_calls = sum(t.get("model_calls", 0) for t in tests)
    if model_calls:
        costs = [t.get("cost_usd") for t in tests]
        cost = "cost unknown" if None in costs else f"${sum(costs):.4f}"
        times = f" ({len(tests)} self-tests: the run and its resumes)" if len(tests) > 1 else ""
        lines.append(
            f"Metric self-test{times}: {sum(t.get('metric_calls', 0) for t in tests)} metric "
            f"calls made {model_calls} model calls ({cost}), counted in the metric role's cost "
            "(and in [budget] max_cost_usd, not in the metric calls)"
        )
    return lines


def _unmeasured(s: RunSummary) -> list[str]:
    """One line when calls were made outside Skynet's models: seen, not measured (a line of
    its own for the user's reflection callable and proposers: _own_callables)."""
    own = _own_reflection(s) is not None
    roles = {
        role: t.unmeasured_calls
        for role, t in s.cost.items()
        if t.unmeasured_calls and not (own and role == "reflection")
    }
    if not roles:
        return _own_callables(s)
    return [
        *_own_callables(s),
        f"Not measured: {sum(roles.values())} model call(s) ({_counts(roles)}) went through the "
        "program's or the metric's own dspy.LM, outside Skynet's models: their tokens and cost "
        "are unknown (counted as unpriced, never $0); route them through Skynet by leaving the "
        "LM to Skynet (dspy.configure(lm=...) or a predictor's set_lm(...) are taken over)",
    ]


def _own_reflection(s: RunSummary) -> str | None:
    """The user's reflection callable as the run recorded it ([models] reflection given from
    Python), or None."""
    found = (s.run.config.get("models") or {}).get("reflection")
    return found if is_python_object_text(found) else None


def _own_proposers(s: RunSummary) -> list[tuple[str, str]]:
    """(option, recorded callable) for each proposer of the user's in [engine.options]: gepa's
    custom_candidate_proposer, dspy.GEPA's instruction_proposer (or in its gepa_kwargs)."""
    options = (s.run.config.get("engine") or {}).get("options") or {}
    return proposers_in(options, is_python_object_text)


def _own_callables(s: RunSummary) -> list[str]:
    """One line each for the user's own reflection callable and proposers: their model calls
    are made outside Skynet's models, so their cost is not measured (never $0)."""
    lines = []
    own = _own_reflection(s)
    if own is not None:
        calls = s.cost["reflection"].calls if "reflection" in s.cost else 0
        lines.append(
            f"Reflection made by your callable {own} ([models] reflection): not measured: "
            f"{calls} call(s) to it were seen; the model calls it made, their tokens and cost "
            "are unknown (never $0)"
        )
    for option, recorded in _own_proposers(s):
        lines.append(
            f"Proposals written by your callable {recorded} ([engine.options] {option}): their "
            "model calls are not measured, unless made through Skynet (skynet.llm)"
        )
    return lines


def _reflection_unknown(s: RunSummary, reflection: LedgerTotals) -> bool:
    """Whether the reflection role's cost is unknown, not $0: the user's proposer wrote the
    proposals (its model calls are its own) and no reflection call was measured through Skynet."""
    measured = reflection.calls - reflection.unmeasured_calls
    return bool(_own_proposers(s)) and measured == 0


def _own_cost(s: RunSummary, role: str, t: LedgerTotals) -> str:
    """A role's USD cell: "not measured" where the user's callables made its calls."""
    if role == "reflection" and _own_reflection(s) is not None:
        return "not measured (your callable)"
    if role in ("reflection", "total") and _own_proposers(s):
        said = "unknown (your proposer)"
        return said if role == "reflection" and _reflection_unknown(s, t) else f"{_usd(t)} + {said}"
    if role == "total" and _own_reflection(s) is not None:
        return f"{_usd(t)} + not measured"
    return _usd(t)


def _untokened(s: RunSummary) -> list[str]:
    """One line when replies reported no token usage: their cost is unknown, never $0."""
    roles = {role: t.untokened_calls for role, t in s.cost.items() if t.untokened_calls}
    if not roles:
        return []
    return [
        f"Cost unknown for {sum(roles.values())} call(s) ({_counts(roles)}): the server's reply "
        "reported no token usage, so no price can cost them; they show as unpriced, never as $0"
    ]


def _printed(s: RunSummary) -> list[str]:
    """One line on what score() printed, where it is kept, and the first of it."""
    if not s.printed:
        return []
    item, text = s.printed[0]
    first = " ".join(text.split())
    first = first if len(first) <= 80 else first[:79] + "…"
    return [
        f"Metric output: score() printed on {len(s.printed)} evaluation(s), kept in each one's "
        f"record (extra.metric_stdout); the first, item '{item}': {first}"
    ]


# --------------------------------------------------------------------------------------------
# HTML.


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem 0;color:#222;
padding:0 2rem}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0}
th,td{padding:.25rem .7rem;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
.meta{color:#555}.mono,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85rem}
pre{background:#f6f8fa;padding:.8rem;white-space:pre-wrap;overflow-wrap:anywhere}
.diff span{display:block}.add{color:#116329;background:#dafbe1}.del{color:#82071e;
background:#ffebe9}.hunk{color:#6639ba}.err{color:#82071e}
svg{max-width:100%;height:auto}
"""


def _h(value: Any) -> str:
    # HTML-escaped, and control characters escaped too: they are not text in a page, and the
    # file may well be printed to a terminal.
    return html.escape(printable(value, multiline=True), quote=True)


def _html_table(header: list[str], rows: list[list[str]], mono_first: bool = False) -> str:
    head = "".join(f"<th>{_h(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="mono"' if mono_first and i == 0 else ""
            cells.append(f"<td{cls}>{_h(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _html_diff(text: str) -> str:
    """One block per line of the diff, and nothing between them (a newline beside a block
    would show as an empty line); long lines wrap."""
    lines = []
    for line in text.splitlines():
        if line.startswith(("+++", "---")):
            cls = "file"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        elif line.startswith("@@"):
            cls = "hunk"
        else:
            cls = "same"
        lines.append(f'<span class="{cls}">{_h(line) or " "}</span>')
    return '<pre class="diff">' + "".join(lines) + "</pre>"


def render_html(summary: RunSummary) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG, no scripts)."""
    return page(f"Skynet run {summary.run.id}", overview_html(summary))


def overview_html(summary: RunSummary, *, item_by_item: Sequence[str] = ()) -> list[str]:
    """The report's body as HTML blocks: the overview page of the viewer and of the file.

    Args:
        item_by_item: blocks shown after the best's diff against the seed (the document's
            per-item differences on test, which read the store: skynet.view.pages).
    """
    s, run = summary, summary.run
    meta = [
        f"status <b>{_h(run.status)}</b>",
        "evaluation only (skynet eval)"
        if _evaluation_only(s)
        else f"engine {_h(run.engine)} · seed {_h(run.seed)}",
        f"started {_h(run.created)}",
        f"finished {_h(run.finished or '-')}",
        f"wall time {_h(_duration(s.wall_seconds))}"
        + (f" ({_h(s.wall_note)})" if s.wall_note else ""),
        f'dataset <span class="mono">{_h(run.dataset_hash[:12])}</span>',
        f'metric <span class="mono">{_h(s.metric_hash[:12])}</span>',
    ]
    body = [
        f"<h1>Skynet run {_h(run.id)}</h1>",
        f'<p class="meta">{" · ".join(meta)}</p>',
    ]
    if run.error:
        body.append(f'<p class="err">error: {_h(run.error)}</p>')
    if _unsandboxed(s):
        body.append(f'<p class="err">{_h(UNSANDBOXED)}</p>')
    notes = [[k, json.dumps(v)] for k, v in _shown_notes(s)]
    if notes:
        body.append(_html_table(["note", "value"], notes))
    headline = gain_lines(s)
    if headline:
        body.append('<p class="gain"><b>' + _h(headline[0]) + "</b></p>")
        body += [f"<p>{_h(line.strip())}</p>" for line in headline[1:]]
        kept_seed = s.seed is not None and s.best is not None and s.best.id == s.seed.id
        if s.gain is not None and s.gain.estimate is not None and not kept_seed:
            body.append(gain_svg(s.gain))

    if _evaluation_only(s):
        body.append(f"<h2>{_h(_scores_title(s))}</h2>")
        body.append(_html_table(_EVALUATED_HEADER, _evaluated_rows(s), mono_first=True))
    else:
        body.append(
            f"<h2>Baseline vs best (val: {s.val_items} items, test: {s.test_items} items)</h2>"
        )
        body.append(_html_table(["", "candidate", "val", "test"], _score_rows(s)))
    for section in s.sections:
        body.append(f"<h2>{_h(section.title)}</h2>")
        if section.rows:
            body.append(_html_table(list(section.header), [list(r) for r in section.rows]))
        body += [f"<p>{_h(note)}</p>" for note in section.notes]
    objectives = _objective_rows(s)
    if objectives:
        body.append("<h2>Objectives (val means)</h2>")
        body.append(_html_table(["objective", "baseline", "best", "change"], objectives))

    if not _evaluation_only(s):
        body.append("<h2>Best val score against metric calls used</h2>")
        body.append(curve_svg(s.curve, s.metric_calls))

    body.append("<h2>Cost and time by role</h2>")
    body.append(_html_table(_COST_HEADER, _cost_rows(s)))
    facts = _facts(s)
    if s.stale:
        facts.append(
            f"Stale: {s.stale} evaluation(s) were scored under another metric; "
            "rescore the run to count them"
        )
    if s.outdated:
        facts.append(_outdated(s))
    body.append("<ul>" + "".join(f"<li>{_h(f)}</li>" for f in facts) + "</ul>")
    if _evaluation_only(s):
        return body

    body.append("<h2>Best candidate against the seed</h2>")
    if not s.diff:
        body.append("<p>No change: the best candidate is the seed.</p>")
    for text in s.diff.values():
        body.append(_html_diff(text))
    body += item_by_item

    pooled = _candidate_rows(s)
    body.append(f"<h2>Candidates ({len(pooled)}: the seed and those scored on val)</h2>")
    body.append(_html_table(_CANDIDATE_HEADER, pooled, mono_first=True))
    rejected = _candidate_rows(s, pool=False)
    if rejected:
        body.append(f"<h2>Proposals rejected on their minibatch ({len(rejected)})</h2>")
        body.append(_html_table(_CANDIDATE_HEADER, rejected, mono_first=True))
    return body


# Nothing on a page may fetch anything: a saved report is read offline, and a candidate's text
# that slipped through escaping could not call out either. No script runs but the page's own:
# page() adds script-src with the one script's nonce or hash, never 'unsafe-inline', so injected
# <script> and inline handlers (onerror=, onclick=) are refused by the browser.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'"
)


# How every page Skynet writes begins: `skynet show --html` overwrites a file only when it
# begins so (or HTML_HEAD_BEFORE, a page written before the generator was named), or --force.
HTML_HEAD = (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    '<meta name="generator" content="skynet">'
)
HTML_HEAD_BEFORE = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta http-equiv='


def page(
    title: str,
    body: list[str],
    *,
    css: str = "",
    script: str = "",
    csp: str = CSP,
    attrs: str = "",
    nonce: bool = False,
) -> str:
    """A whole HTML document: inline style and script, nothing fetched.

    Args:
        csp: the Content-Security-Policy without script-src; page() adds the script's.
        nonce: a served page (the viewer): its script is allowed by a fresh random nonce, drawn
            for this rendering. Otherwise (a file, the same bytes each time) by its sha256.
    """
    js = ""
    if script:
        if nonce:
            token = secrets.token_urlsafe(18)
            allowed, js = f"'nonce-{token}'", f'<script nonce="{token}">{script}</script>'
        else:
            digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
            allowed, js = f"'sha256-{digest}'", f"<script>{script}</script>"
        csp = f"{csp}; script-src {allowed}"
    return (
        f"{HTML_HEAD}"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_h(title)}</title><style>{CSS}{css}</style></head>"
        f"<body{attrs}>{''.join(body)}{js}</body></html>\n"
    )


# The databases Skynet keeps in a project's .skynet, and the files that complete one.
_DATABASES = ("runs.db", "cache.db", "embeddings.db")
_COMPANIONS = ("-wal", "-shm", "-journal")


def check_html_target(
    path: str | os.PathLike[str],
    store_dir: Path,
    *,
    force: bool,
    given: str,
    fix: str,
    force_flag: str,
) -> Path:
    """`path`, unless writing a report there would destroy something: an empty path; a database
    of the project (the run store, a cache), any SQLite file, or one's -wal/-shm/-journal
    (never, even with force); an existing file that is not a page Skynet wrote (unless force).

    Args:
        given: how the caller was given the path, for the message ("--html x", "to_html('x')").
        fix: how to give another path; force_flag: how to overwrite anyway ("--force").

    Raises:
        ConfigError: naming the path, why, and the fix.
    """
    if not str(path).strip():
        raise ConfigError(f"{given}: an empty path; {fix}")
    target = Path(path)
    resolved = target.resolve()
    base = resolved
    for suffix in _COMPANIONS:
        if base.name.endswith(suffix):
            base = base.with_name(base.name.removesuffix(suffix))
    store = store_dir.resolve()
    if base in {store / name for name in _DATABASES} or _sqlite_file(base):
        raise ConfigError(
            f"{given}: is {'a file of ' if base != resolved else ''}a database Skynet keeps its "
            f"records in; writing the page there would destroy it (even with {force_flag}); {fix}"
        )
    if resolved.is_file() and not force:
        try:
            with resolved.open("rb") as f:
                head = f.read(len(HTML_HEAD.encode()))
        except OSError:
            head = b""  # the write says why it cannot be written
        if not head.startswith((HTML_HEAD.encode(), HTML_HEAD_BEFORE.encode())):
            raise ConfigError(
                f"{given}: the file exists and is not a page Skynet wrote; {fix}, or add "
                f"{force_flag} to overwrite it"
            )
    return target


def _sqlite_file(path: Path) -> bool:
    """Whether `path` is an SQLite database (its first 16 bytes say so)."""
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False
