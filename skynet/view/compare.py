"""Two runs side by side: what differs in their config, their scores, and item by item.

`compare()` computes it from the run store (each run counted as its own report counts it);
`render_compare_text()` is `skynet show RUN_A RUN_B`, `render_compare_html()` the viewer's
compare page and `skynet show RUN_A RUN_B --html FILE`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from skynet.config import flat_keys
from skynet.runs.report import (
    CSP,
    TEST,
    VAL,
    CandidateSummary,
    RunSummary,
    html_table,
    page,
    test_text,
    text_table,
    val_text,
)
from skynet.runs.report import html_escape as _h  # short: it wraps every value on the page
from skynet.runs.store import RunStore
from skynet.terminal import printable
from skynet.view.pages import (
    PAGE_CSS,
    SCRIPT,
    VIEWER_CSP,
    ItemView,
    _figure,
    counted,
    item_view,
    items_table_html,
)

__all__ = [
    "RunComparison",
    "compare",
    "render_compare_html",
    "render_compare_text",
]

# Items listed in the terminal (the HTML page lists all of them).
TEXT_ITEMS = 30
_CHANGES = {"fixed": "B better", "broken": "B worse", "unchanged": "same"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunComparison:
    """Runs A and B: their reports, config differences, and per-item differences.

    Attributes:
        a, b: each run's report.
        shown_a, shown_b: the candidate of each run compared item by item: its best (an
            evaluation-only run: its last candidate evaluated).
        config: (key, A's value, B's value) for every setting that differs, as dotted keys;
            the data and metric hashes and the engine that ran included.
        items: every val and test item either run evaluated its shown candidate on: a is A's
            evaluation, b is B's; "fixed" means B's scored higher.
    """

    a: RunSummary
    b: RunSummary
    shown_a: CandidateSummary | None
    shown_b: CandidateSummary | None
    config: list[tuple[str, str, str]]
    items: list[ItemView]

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(d.status or "not compared" for d in self.items))


_MISSING = object()  # a setting one run has and the other does not


def _text(value: Any) -> str:
    if value is _MISSING:
        return "(not set)"
    return value if isinstance(value, str) else json.dumps(value, default=repr)


# What the config does not hold: the data and the metric (their hashes), and the engine that
# ran (Auto names the one it chose).
_FACTS = ("dataset", "metric", "engine")


def _settings(s: RunSummary) -> dict[str, Any]:
    """A run's settings as dotted keys: its facts, its config and its resolved budget."""
    facts = {
        "dataset": s.run.dataset_hash[:12],
        "metric": s.metric_hash[:12],
        "engine": s.run.engine,
    }
    return facts | flat_keys(s.run.config) | flat_keys(s.run.budget, "budget")


def _shown(s: RunSummary) -> CandidateSummary | None:
    if s.best is not None:
        return s.best
    return s.candidates[-1] if s.candidates else s.seed


def compare(store: RunStore, a: RunSummary, b: RunSummary) -> RunComparison:
    """Compare two runs' reports (skynet.runs.report.summarize) from the same store."""
    flat_a, flat_b = _settings(a), _settings(b)
    config = [
        (key, _text(flat_a.get(key, _MISSING)), _text(flat_b.get(key, _MISSING)))
        for key in sorted(set(flat_a) | set(flat_b), key=lambda k: (k not in _FACTS, k))
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
    found = [
        (split, item_id, items_a.get(item_id) or items_b.get(item_id))
        for split, item_id in set(ea) | set(eb)
    ]
    # In the data's order (as recorded), then the items no record names, by id.
    found.sort(key=lambda f: (f[0] != VAL, f[2].seq if f[2] is not None else math.inf, f[1]))
    items = [
        item_view(item_id, split, row, ea.get((split, item_id)), eb.get((split, item_id)))
        for split, item_id, row in found
    ]
    return RunComparison(a=a, b=b, shown_a=shown_a, shown_b=shown_b, config=config, items=items)


def _score_rows(c: RunComparison) -> list[list[str]]:
    a, b = c.a, c.b

    def delta(x: float | None, y: float | None) -> str:
        return "" if x is None or y is None else f"{y - x:+.3f}"

    def score(cand: CandidateSummary | None, s: RunSummary, split: str) -> str:
        if cand is None:
            return "-"
        return val_text(cand, s) if split == VAL else test_text(cand, s)

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
        out += text_table(["setting", "A", "B"], [list(r) for r in c.config], text_columns=3)
    else:
        out.append("  (none: the same config, data and metric)")
    out += ["", "Scores"]
    out += text_table(["", "A", "B", "change"], _score_rows(c))
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
        out += text_table(["item", "split", "A", "B", ""], rows, text_columns=2)
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
        html_table(["setting", "A", "B"], [list(r) for r in c.config])
        if c.config
        else "<p>None: the same config, data and metric.</p>",
        "<h2>Scores</h2>",
        html_table(["", "A", "B", "change"], _score_rows(c)),
        f"<h2>Items: A's {_h(_who(c.shown_a))} vs B's {_h(_who(c.shown_b))}</h2>",
        f'<p class="meta">{_h(_counts_line(c))} (fixed: B scored higher than A)</p>',
    ]
    body += items_table_html(c.items, f"A: {a.id}", f"B: {b.id}")
    body = [f'<section class="page" id="overview">{"".join(body)}</section>']
    return page(
        f"Skynet runs {a.id} and {b.id}",
        body,
        css=PAGE_CSS,
        script=SCRIPT,
        csp=VIEWER_CSP if live else CSP,
        nonce=live,
    )
