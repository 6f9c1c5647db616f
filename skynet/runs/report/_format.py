"""What the text report, the HTML report and the viewer say alike: score cells ("0.612 (2
metric errors left out)"), the gain's lines, the cost table's rows, the facts and notes.

Every function here returns plain strings; the text report escapes them for the terminal and
the HTML report and viewer for the page.
"""

from __future__ import annotations

from typing import Any

from skynet.mean import beside
from skynet.models.ledger import LedgerTotals
from skynet.runs.report._summary import (
    TEST,
    VAL,
    CandidateSummary,
    RunSummary,
    in_pool,
    own_proposers,
    own_reflection,
    reflection_unknown,
)
from skynet.runs.store import EVALUATION


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


def val_text(c: CandidateSummary | None, s: RunSummary) -> str:
    if c is None:
        return "-"
    return _score(c.val_score, c.val_items, s.val_items, c.val_failures, c.val_left_out)


def test_text(c: CandidateSummary | None, s: RunSummary) -> str:
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


def duration_text(seconds: float | None) -> str:
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


def cost_rows(s: RunSummary) -> list[list[str]]:
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
                duration_text(t.elapsed_ms / 1000),
            ]
        )
    return rows


COST_HEADER = ["role", "calls", "cached", "failed", "in tokens", "out tokens", "USD", "time"]


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
    if evaluation_only(s) or s.seed is None or s.best is None:
        return []
    return [*_gain_lines(s), *_val_from_train_line(s), _selection_line(s)]


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


def score_rows(s: RunSummary) -> list[list[str]]:
    """Baseline, best and the change, on val and test (the text and HTML reports share it)."""
    rows = [
        ["baseline", s.seed.id if s.seed else "-", val_text(s.seed, s), test_text(s.seed, s)],
        ["best", s.best.id if s.best else "-", val_text(s.best, s), test_text(s.best, s)],
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


def evaluation_only(s: RunSummary) -> bool:
    return s.run.engine == EVALUATION


EVALUATED_HEADER = ["candidate", "evaluated", "val", "test"]


def evaluated_rows(s: RunSummary) -> list[list[str]]:
    """An evaluation-only run's candidates: what `skynet eval` was asked, and the scores."""
    return [[c.id, c.label or "-", val_text(c, s), test_text(c, s)] for c in s.candidates]


def scores_title(s: RunSummary) -> str:
    sizes = f"val: {s.val_items} items, test: {s.test_items} items"
    if evaluation_only(s):
        return f"Scores, evaluation only: nothing was optimized ({sizes})"
    return f"Scores ({sizes})"


UNSANDBOXED = (
    'unsandboxed: code candidates ran without the sandbox ([artifact] sandbox = "none"); they '
    "could read the data and the run records, so their scores and times may be faked"
)


def is_unsandboxed(s: RunSummary) -> bool:
    """Whether the run's code candidates ran unsandboxed (shown in every report)."""
    artifact = s.run.config.get("artifact") or {}
    return artifact.get("kind") == "code" and artifact.get("sandbox") == "none"


def shown_notes(s: RunSummary) -> list[tuple[str, Any]]:
    # An evaluation-only run's list of what was evaluated is its score table, not a note; the
    # confirmation is said in the gain's lines, the metric calls in the facts.
    skip = {"evaluated", "confirmation"} if evaluation_only(s) else {"confirmation"}
    skip |= {"metric_calls", "self_test"}
    return [(k, v) for k, v in sorted(s.run.notes.items()) if k not in skip]


def objective_rows(s: RunSummary) -> list[list[str]]:
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


def candidate_rows(s: RunSummary, *, pool: bool = True) -> list[list[str]]:
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
                val_text(c, s),
                test_text(c, s),
                str(c.val_errors + c.test_errors),
                " ".join(role),
            ]
        )
    return rows


CANDIDATE_HEADER = ["candidate", "parents", "val", "test", "errors", ""]


def outdated_text(s: RunSummary) -> str:
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


def fact_lines(s: RunSummary) -> list[str]:
    """Evaluations (metric calls against the budget), errors by kind, proposals."""
    errors = f"Evaluation errors: {s.errors}" + (
        f" ({_counts(s.error_kinds)})" if s.error_kinds else ""
    )
    if evaluation_only(s):
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
    own = own_reflection(s) is not None
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


def _own_callables(s: RunSummary) -> list[str]:
    """One line each for the user's own reflection callable and proposers: their model calls
    are made outside Skynet's models, so their cost is not measured (never $0)."""
    lines = []
    own = own_reflection(s)
    if own is not None:
        calls = s.cost["reflection"].calls if "reflection" in s.cost else 0
        lines.append(
            f"Reflection made by your callable {own} ([models] reflection): not measured: "
            f"{calls} call(s) to it were seen; the model calls it made, their tokens and cost "
            "are unknown (never $0)"
        )
    for option, recorded in own_proposers(s):
        lines.append(
            f"Proposals written by your callable {recorded} ([engine.options] {option}): their "
            "model calls are not measured, unless made through Skynet (skynet.llm)"
        )
    return lines


def _own_cost(s: RunSummary, role: str, t: LedgerTotals) -> str:
    """A role's USD cell: "not measured" where the user's callables made its calls."""
    if role == "reflection" and own_reflection(s) is not None:
        return "not measured (your callable)"
    if role in ("reflection", "total") and own_proposers(s):
        said = "unknown (your proposer)"
        return said if role == "reflection" and reflection_unknown(s, t) else f"{_usd(t)} + {said}"
    if role == "total" and own_reflection(s) is not None:
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
