"""The run's summary: every figure the report shows, computed from the run store.

`summarize()` computes them; `summary_json()` is the summary as one JSON document. A candidate's
score on a split is the mean over its evaluations of the items the run evaluated the seed
candidate on, and counts only when every one of those items is present: a partial minibatch is
not a val score. The mean follows skynet.mean: a candidate's own failure (crash, time-out, bad
output) counts as 0; a metric or model fault is left out of the mean and shown beside it.
"""

from __future__ import annotations

import difflib
import math
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from skynet.contract import STDOUT_KEY
from skynet.data import are_val_copies
from skynet.errors import ConfigError
from skynet.evaluation import CANDIDATE_ERROR
from skynet.gain import Gain, paired_gain
from skynet.mean import Mean, Paired, mean_of, paired, paired_scores
from skynet.models.ledger import LedgerTotals
from skynet.packages import ReportSection, ReportView, package_gain
from skynet.python_objects import is_python_object_text, proposers_in
from skynet.runs.store import EVALUATION, CandidateRow, EvaluationRow, RunRow, RunStore

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


def parse_time(text: str | None) -> datetime | None:
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
        start = parse_time(run.created)
        last = max((e.created for e in every), default=None)
        end = parse_time(run.finished) or parse_time(last)
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
        unknown = unknown or (role == "reflection" and reflection_unknown(s, t))
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


def _val_from_train(items: dict[str, Any]) -> bool:
    """Whether the run's val items are its train items again (skynet.data.val_copies)."""

    def split(name: str) -> dict[str, Any]:
        return {i.item_id: (i.input, i.expected) for i in items.values() if i.split == name}

    return are_val_copies(split("train"), split(VAL))


def in_pool(s: RunSummary, c: CandidateSummary) -> bool:
    """Whether `c` is in the search's pool (the seed, or scored on every val item), as gepa's
    and dspy.GEPA's results count candidates; a proposal rejected on its minibatch is not."""
    return c.val_known_at is not None or (s.seed is not None and c.id == s.seed.id)


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


def own_reflection(s: RunSummary) -> str | None:
    """The user's reflection callable as the run recorded it ([models] reflection given from
    Python), or None."""
    found = (s.run.config.get("models") or {}).get("reflection")
    return found if is_python_object_text(found) else None


def own_proposers(s: RunSummary) -> list[tuple[str, str]]:
    """(option, recorded callable) for each proposer of the user's in [engine.options]: gepa's
    custom_candidate_proposer, dspy.GEPA's instruction_proposer (or in its gepa_kwargs)."""
    options = (s.run.config.get("engine") or {}).get("options") or {}
    return proposers_in(options, is_python_object_text)


def reflection_unknown(s: RunSummary, reflection: LedgerTotals) -> bool:
    """Whether the reflection role's cost is unknown, not $0: the user's proposer wrote the
    proposals (its model calls are its own) and no reflection call was measured through Skynet."""
    measured = reflection.calls - reflection.unmeasured_calls
    return bool(own_proposers(s)) and measured == 0
