"""Two runs side by side: what differs in their config, their scores, and item by item.

`compare()` computes it from the run store (each run counted as its own report counts it);
`render_compare_text()` is `skynet show RUN_A RUN_B`, `render_compare_html()` the viewer's
compare page and `skynet show RUN_A RUN_B --html FILE`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from skynet.runs.report import (
    CSP,
    TEST,
    VAL,
    CandidateSummary,
    RunSummary,
    _h,
    _html_table,
    _table,
    _test,
    _val,
    page,
)
from skynet.runs.store import EvaluationRow, RunStore
from skynet.terminal import printable
from skynet.view.pages import (
    PAGE_CSS,
    SCRIPT,
    VIEWER_CSP,
    _evaluation_cell,
    _figure,
    _input_of,
    _pre,
    counted,
    status_of,
)

__all__ = [
    "ItemDifference",
    "RunComparison",
    "compare",
    "render_compare_html",
    "render_compare_text",
]

# Items listed in the terminal (the HTML page lists all of them).
TEXT_ITEMS = 30
_CHANGES = {"fixed": "B better", "broken": "B worse", "unchanged": "same"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemDifference:
    """One item both runs were given, with each run's shown candidate's evaluation of it.

    Attributes:
        status: "fixed" (B's scored higher), "broken" (lower), "unchanged", or "" when either
            has no counted score (not evaluated, or a metric or model fault).
    """

    item_id: str
    split: str
    input: Any
    expected: Any
    a: EvaluationRow | None
    b: EvaluationRow | None
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunComparison:
    """Runs A and B: their reports, config differences, and per-item differences.

    Attributes:
        a, b: each run's report.
        shown_a, shown_b: the candidate of each run compared item by item: its best (an
            evaluation-only run: its last candidate evaluated).
        config: (key, A's value, B's value) for every setting that differs, as dotted keys;
            the data and metric hashes and the engine that ran included.
        items: every val and test item either run evaluated its shown candidate on.
    """

    a: RunSummary
    b: RunSummary
    shown_a: CandidateSummary | None
    shown_b: CandidateSummary | None
    config: list[tuple[str, str, str]]
    items: list[ItemDifference]

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(d.status or "not compared" for d in self.items))


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out |= _flat(inner, f"{prefix}.{key}" if prefix else str(key))
        return out
    return {prefix: value}


def _text(value: Any) -> str:
    if value is _MISSING:
        return "(not set)"
    return value if isinstance(value, str) else json.dumps(value, default=repr)


_MISSING = object()


def _shown(s: RunSummary) -> CandidateSummary | None:
    if s.best is not None:
        return s.best
    return s.candidates[-1] if s.candidates else s.seed


def compare(store: RunStore, a: RunSummary, b: RunSummary) -> RunComparison:
    """Compare two runs' reports (skynet.runs.report.summarize) from the same store."""
    # What the config does not hold: the data and the metric (their hashes), and the engine
    # that ran (Auto names the one it chose).
    facts_a = {
        "dataset": a.run.dataset_hash[:12],
        "metric": a.metric_hash[:12],
        "engine": a.run.engine,
    }
    facts_b = {
        "dataset": b.run.dataset_hash[:12],
        "metric": b.metric_hash[:12],
        "engine": b.run.engine,
    }
    flat_a = facts_a | _flat(a.run.config) | _flat(a.run.budget, "budget")
    flat_b = facts_b | _flat(b.run.config) | _flat(b.run.budget, "budget")
    config = [
        (key, _text(flat_a.get(key, _MISSING)), _text(flat_b.get(key, _MISSING)))
        for key in sorted(set(flat_a) | set(flat_b), key=lambda k: (k not in facts_a, k))
        if flat_a.get(key, _MISSING) != flat_b.get(key, _MISSING)
    ]
    shown_a, shown_b = _shown(a), _shown(b)

    def evaluations(s: RunSummary, shown: CandidateSummary | None) -> dict[tuple[str, str], Any]:
        if shown is None:
            return {}
        return {
            (e.split, e.item_id): e
            for e in store.evaluations(s.run.id)
            if e.metric_hash == s.metric_hash
            and e.candidate_id == shown.id
            and e.split in (VAL, TEST)
        }

    ea, eb = evaluations(a, shown_a), evaluations(b, shown_b)
    items_a, items_b = store.items(a.run.id), store.items(b.run.id)

    # In the data's order (as recorded), then the items no record names, by id.
    def order(key: tuple[str, str]) -> tuple[bool, float, str]:
        row = items_a.get(key[1]) or items_b.get(key[1])
        return (key[0] != VAL, row.seq if row is not None else float("inf"), key[1])

    keys = sorted(set(ea) | set(eb), key=order)
    items = []
    for split, item_id in keys:
        row = items_a.get(item_id) or items_b.get(item_id)
        items.append(
            ItemDifference(
                item_id=item_id,
                split=split,
                input=_input_of(row) if row is not None else None,
                expected=row.expected if row is not None else None,
                a=ea.get((split, item_id)),
                b=eb.get((split, item_id)),
                status=status_of(ea.get((split, item_id)), eb.get((split, item_id))),
            )
        )
    return RunComparison(a=a, b=b, shown_a=shown_a, shown_b=shown_b, config=config, items=items)


def _score_rows(c: RunComparison) -> list[list[str]]:
    a, b = c.a, c.b

    def delta(x: float | None, y: float | None) -> str:
        return "" if x is None or y is None else f"{y - x:+.3f}"

    def score(cand: CandidateSummary | None, s: RunSummary, split: str) -> str:
        if cand is None:
            return "-"
        return _val(cand, s) if split == VAL else _test(cand, s)

    rows = []
    for label, pick in [("baseline", lambda s: s.seed), ("best", _shown)]:
        for split in (VAL, TEST):
            ca, cb = pick(a), pick(b)
            va = None if ca is None else (ca.val_score if split == VAL else ca.test_score)
            vb = None if cb is None else (cb.val_score if split == VAL else cb.test_score)
            rows.append(
                [f"{label} {split}", score(ca, a, split), score(cb, b, split), delta(va, vb)]
            )
    cost_a = sum(t.cost_usd for t in a.cost.values())
    cost_b = sum(t.cost_usd for t in b.cost.values())
    rows.append(["metric calls", str(a.metric_calls), str(b.metric_calls), ""])
    rows.append(
        ["cost (priced calls)", f"${cost_a:.4f}", f"${cost_b:.4f}", f"{cost_b - cost_a:+.4f}"]
    )
    return rows


def _counts_line(c: RunComparison) -> str:
    counts = c.counts
    parts = [f"{_CHANGES[k]} on {counts.get(k, 0)}" for k in ("fixed", "broken", "unchanged")]
    if counts.get("not compared"):
        parts.append(f"not compared {counts['not compared']}")
    return ", ".join(parts)


def _who(cand: CandidateSummary | None) -> str:
    return cand.id if cand is not None else "-"


def render_compare_text(c: RunComparison) -> str:
    """`skynet show RUN_A RUN_B`: config differences, scores, and the items that differ."""
    a, b = c.a.run, c.b.run
    out = [
        f"A: run {a.id}  {a.status}  engine {a.engine}  started {a.created}",
        f"B: run {b.id}  {b.status}  engine {b.engine}  started {b.created}",
        "",
        "Config differences",
    ]
    if c.config:
        out += _table(["setting", "A", "B"], [list(r) for r in c.config], text_columns=3)
    else:
        out.append("  (none: the same config, data and metric)")
    out += ["", "Scores"]
    out += _table(["", "A", "B", "change"], _score_rows(c))
    out += [
        "",
        f"Items (A's {_who(c.shown_a)} vs B's {_who(c.shown_b)}, val and test): {_counts_line(c)}",
    ]
    differing = [d for d in c.items if d.status != "unchanged"]
    if differing:
        rows = [
            [
                d.item_id,
                d.split,
                _figure(counted(d.a)) if d.a is not None else "-",
                _figure(counted(d.b)) if d.b is not None else "-",
                _CHANGES.get(d.status, "not compared"),
            ]
            for d in differing[:TEXT_ITEMS]
        ]
        out += _table(["item", "split", "A", "B", ""], rows, text_columns=2)
        if len(differing) > TEXT_ITEMS:
            out.append(
                f"  … {len(differing) - TEXT_ITEMS} more: skynet view, or "
                f"skynet show {a.id} {b.id} --html FILE"
            )
    return printable("\n".join(out) + "\n", multiline=True)


def render_compare_html(c: RunComparison, *, live: bool = False) -> str:
    """The compare page: config differences, scores, every item with both runs' evaluations."""
    a, b = c.a.run, c.b.run

    def link(run_id: str) -> str:
        if live:
            return f'<a class="mono" href="/run/{_h(quote(run_id))}">{_h(run_id)}</a>'
        return f'<span class="mono">{_h(run_id)}</span>'

    body = []
    if live:
        body.append('<nav><a href="/">All runs</a></nav>')
    body += [
        f"<h1>Runs {_h(a.id)} and {_h(b.id)}</h1>",
        f'<p class="meta">A: {link(a.id)} · {_h(a.status)} · engine {_h(a.engine)} · started '
        f"{_h(a.created)}<br>B: {link(b.id)} · {_h(b.status)} · engine {_h(b.engine)} · "
        f"started {_h(b.created)}</p>",
        "<h2>Config differences</h2>",
        _html_table(["setting", "A", "B"], [list(r) for r in c.config])
        if c.config
        else "<p>None: the same config, data and metric.</p>",
        "<h2>Scores</h2>",
        _html_table(["", "A", "B", "change"], _score_rows(c)),
        f"<h2>Items: A's {_h(_who(c.shown_a))} vs B's {_h(_who(c.shown_b))}</h2>",
        f'<p class="meta">{_h(_counts_line(c))} (fixed: B scored higher than A)</p>',
    ]
    counts = c.counts
    errors = sum(any(e is not None and e.error is not None for e in (d.a, d.b)) for d in c.items)
    buttons = [
        ("all", len(c.items)),
        *((k, counts.get(k, 0)) for k in ("fixed", "broken", "unchanged")),
        ("errors", errors),
    ]
    body.append(
        '<div class="filters">'
        + "".join(
            f'<button type="button" data-filter="{k}">{k} <span class="count">{n}</span></button>'
            for k, n in buttons
        )
        + "</div>"
    )
    rows = []
    for d in c.items:
        errored = any(e is not None and e.error is not None for e in (d.a, d.b))
        rows.append(
            f'<tr class="item" data-status="{d.status or "none"}"'
            f"{' data-error=1' if errored else ''}>"
            f'<td class="mono">{_h(d.item_id)}<div class="meta">{_h(d.split)}</div>'
            f'<div class="status {d.status}">{_h(d.status or "-")}</div></td>'
            f"<td>{_pre(d.input) if d.input is not None else '-'}</td>"
            f"<td>{_pre(d.expected) if d.expected is not None else '-'}</td>"
            f"{_evaluation_cell(d.a)}{_evaluation_cell(d.b)}</tr>"
        )
    body.append(
        '<table id="item-table" class="items" data-show="all"><thead><tr><th>item</th>'
        f"<th>input</th><th>expected</th><th>A: {_h(a.id)}</th><th>B: {_h(b.id)}</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )
    body = [f'<section class="page" id="overview">{"".join(body)}</section>']
    return page(
        f"Skynet runs {a.id} and {b.id}",
        body,
        css=PAGE_CSS,
        script=SCRIPT,
        csp=VIEWER_CSP if live else CSP,
    )
