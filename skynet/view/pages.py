"""The viewer's pages of one run: overview, items, candidates, cost and time.

`render_document` lays them out as one HTML document with a tab per page. The same document is
the self-contained file (`skynet show RUN --html FILE`) and what the local viewer serves
(`live=True`: it reloads as the run records, picks any two candidates, and fetches a model
call's request and reply when it is opened). Everything a candidate wrote is escaped; no page
fetches anything but, in the viewer, its own server.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from skynet.mean import mean_of
from skynet.runs.report import (
    COST_HEADER,
    CSP,
    TEST,
    VAL,
    CandidateSummary,
    RunSummary,
    cost_rows,
    html_table,
    in_pool,
    overview_html,
    page,
    parse_time,
    test_text,
    val_text,
)
from skynet.runs.report import html_escape as _h  # short: it wraps every value on these pages
from skynet.runs.store import CallRow, EvaluationRow, ItemRow, ProposalRow, RunStore
from skynet.view.plots import cost_svg, pareto_svg

__all__ = [
    "ItemView",
    "item_by_item_html",
    "item_view",
    "item_views",
    "items_table_html",
    "pareto_front",
    "render_document",
    "status_of",
]

# What one text shows on a page (an output, an input, a prompt); the rest is said, not shown.
TEXT_LIMIT = 10_000
# The file keeps the request and reply of this many calls (reflection calls first); the viewer
# fetches any call's when it is opened.
FILE_CALL_TEXTS = 200
# Rows of the call list in a file; the viewer lists every call.
FILE_CALLS = 2_000
STATUSES = ("fixed", "broken", "unchanged")
_EPS = 1e-9


# --------------------------------------------------------------------------------------------
# Items.


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemView:
    """One val or test item with the two candidates' evaluations of it.

    Attributes:
        status: "fixed" (b scored higher than a), "broken" (lower), "unchanged", or "" when one
            of the two has no counted score (not evaluated, or a metric/model fault).
        errored: either evaluation is an error.
        item: the item as the run recorded it; None for a run recorded before items were kept.
    """

    item_id: str
    split: str
    item: ItemRow | None
    a: EvaluationRow | None
    b: EvaluationRow | None
    status: str
    errored: bool


def counted(e: EvaluationRow | None) -> float | None:
    """The score an evaluation counts for in the mean (skynet.mean's rule: a candidate's own
    failure is 0, a metric or model fault is not counted: None)."""
    if e is None:
        return None
    return mean_of([(e.score, e.error_kind, e.error is None)]).value


def status_of(a: EvaluationRow | None, b: EvaluationRow | None) -> str:
    """fixed, broken or unchanged from a to b; "" when either has no counted score."""
    sa, sb = counted(a), counted(b)
    if sa is None or sb is None:
        return ""
    if sb > sa + _EPS:
        return "fixed"
    if sb < sa - _EPS:
        return "broken"
    return "unchanged"


def item_views(
    store: RunStore, summary: RunSummary, a: str | None, b: str | None
) -> list[ItemView]:
    """Every val and test item of the run, with candidates a's and b's evaluations of it."""
    run_id = summary.run.id
    items = store.items(run_id)
    evals = [e for e in store.evaluations(run_id) if e.metric_hash == summary.metric_hash]
    by_key = {(e.candidate_id, e.item_id): e for e in evals}
    order: dict[tuple[str, str], ItemRow | None] = {}
    for row in items.values():
        if row.split in (VAL, TEST):
            order[(row.split, row.item_id)] = row
    for e in evals:
        if e.split in (VAL, TEST):
            order.setdefault((e.split, e.item_id), None)
    return [
        item_view(
            item_id,
            split,
            row,
            by_key.get((a, item_id)) if a else None,
            by_key.get((b, item_id)) if b else None,
        )
        for (split, item_id), row in sorted(
            order.items(), key=lambda kv: (kv[0][0] != VAL, kv[1].seq if kv[1] else math.inf)
        )
    ]


def item_view(
    item_id: str,
    split: str,
    item: ItemRow | None,
    a: EvaluationRow | None,
    b: EvaluationRow | None,
) -> ItemView:
    """One item with two evaluations of it, its status and whether either is an error."""
    return ItemView(
        item_id=item_id,
        split=split,
        item=item,
        a=a,
        b=b,
        status=status_of(a, b),
        errored=any(e is not None and e.error is not None for e in (a, b)),
    )


def _shown(value: Any) -> str:
    """A value as text: a string as itself, anything else as indented JSON."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, indent=2, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):
            text = repr(value)
    if len(text) > TEXT_LIMIT:
        text = text[:TEXT_LIMIT] + f"\n… ({len(text) - TEXT_LIMIT:,} more characters)"
    return text


def _input_of(item: ItemRow | None) -> Any:
    if item is None:
        return None
    data = item.input
    # One input field shows as its text, not as a one-key object.
    if isinstance(data, dict) and len(data) == 1:
        return next(iter(data.values()))
    return data


def _pre(value: Any, cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return f"<pre{klass}>{_h(_shown(value))}</pre>"


def _figure(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _evaluation_cell(e: EvaluationRow | None) -> str:
    if e is None:
        return '<td class="eval"><span class="meta">not evaluated</span></td>'
    parts = [f'<div class="score">score <b>{_h(_figure(e.score))}</b>']
    if e.scores:
        named = " · ".join(f"{k} {_figure(float(v))}" for k, v in sorted(e.scores.items()))
        parts.append(f' <span class="named">{_h(named)}</span>')
    parts.append("</div>")
    if e.error is not None:
        parts.append(f'<div class="err">{_h(e.error_kind or "error")}: {_h(e.error)}</div>')
    else:
        parts.append(_pre(e.output, "output"))
    if e.feedback:
        parts.append(f'<div class="feedback">{_h(_shown(e.feedback))}</div>')
    if e.repetitions:
        result = e.result()
        scores = [r.score for r in result.repetitions]
        spread = result.spread
        head = f"{len(scores)} runs: " + ", ".join(_figure(s) for s in scores)
        if spread:
            head += f" (spread {_figure(spread[0])}–{_figure(spread[1])})"
        if isinstance(result.shown, int):
            head += f"; shown: run {result.shown + 1}"
        runs = "".join(
            f"<li>run {i}: score {_h(_figure(r.score))}"
            + (f' <span class="err">{_h(r.error)}</span>' if r.error else "")
            + _pre(r.output, "output")
            + "</li>"
            for i, r in enumerate(result.repetitions, start=1)
        )
        parts.append(
            f'<details class="reps"><summary>{_h(head)}</summary><ol>{runs}</ol></details>'
        )
    return f'<td class="eval">{"".join(parts)}</td>'


def _change(view: ItemView) -> str:
    sa, sb = counted(view.a), counted(view.b)
    if sa is None or sb is None:
        return ""
    return f"{sb - sa:+.3f}"


def _candidate_picker(s: RunSummary, a: str | None, b: str | None) -> str:
    """The viewer's form to pick any two candidates (a GET of the same page)."""

    def options(chosen: str | None) -> str:
        out = []
        for c in s.candidates:
            tag = _role(c, s)
            label = f"{c.id} · val {_figure(c.val_score)}" + (f" · {tag}" if tag else "")
            sel = " selected" if c.id == chosen else ""
            out.append(f'<option value="{_h(c.id)}"{sel}>{_h(label)}</option>')
        return "".join(out)

    return (
        '<form class="picker" method="get" action="#items">'
        f'<label>A <select name="a">{options(a)}</select></label> '
        f'<label>B <select name="b">{options(b)}</select></label> '
        '<button type="submit">compare items</button></form>'
    )


ITEM_BY_ITEM = "Best against the seed, item by item (test)"


def _left_out(e: EvaluationRow | None) -> str:
    """Why an evaluation has no counted score: its error kind, or that there is none."""
    if e is None:
        return "not evaluated"
    if e.error is not None:
        return f"{e.error_kind or 'unknown'} error"
    return "no score"


def _side(e: EvaluationRow | None) -> str:
    score = _figure(counted(e))
    # A candidate's own failure counts as 0 in the gain: said beside the 0.
    return f"{score} (failed)" if e is not None and e.error is not None else score


def item_by_item_html(views: Sequence[ItemView], *, linked: bool) -> list[str]:
    """The best against the seed on each test item (the headline gain's items): one row per item
    both have a counted score for, largest gain first, then the losses; the items left out for
    either, apart, with why.

    Args:
        views: the items with a = the seed's evaluation and b = the best's (item_views).
        linked: each item links to its row on the document's items page.
    """
    tests = [v for v in views if v.split == TEST]
    if not tests:
        return []
    rows, apart = [], []
    for v in tests:
        sa, sb = counted(v.a), counted(v.b)
        if sa is None or sb is None:
            apart.append(v)
        else:
            rows.append((sb - sa, v))
    rows.sort(key=lambda r: -r[0])  # stable: equal differences keep the items' order

    def name(v: ItemView) -> str:
        if not linked:
            return f'<span class="mono">{_h(v.item_id)}</span>'
        return f'<a class="mono" href="#item-{_h(quote(v.item_id, safe=""))}">{_h(v.item_id)}</a>'

    up = sum(d > _EPS for d, _ in rows)
    down = sum(d < -_EPS for d, _ in rows)
    body = [
        f'<h2 id="item-by-item">{_h(ITEM_BY_ITEM)}</h2>',
        f'<p class="meta">{len(rows)} items both have a counted score for (the gain\'s n): '
        f"{up} gained, {down} lost, {len(rows) - up - down} the same. A candidate's own failure "
        "counts as 0; a metric or model fault leaves the item out for both.</p>",
    ]
    if rows:
        cells = []
        for d, v in rows:
            status = "fixed" if d > _EPS else "broken" if d < -_EPS else ""
            cells.append(
                f'<tr class="pair" data-item="{_h(v.item_id)}"><td>{name(v)}</td>'
                f"<td>{_h(_side(v.a))}</td><td>{_h(_side(v.b))}</td>"
                f'<td class="status {status}">{d:+.3f}</td></tr>'
            )
        body.append(
            '<table class="item-by-item"><thead><tr><th>item</th><th>seed</th><th>best</th>'
            f"<th>difference</th></tr></thead><tbody>{''.join(cells)}</tbody></table>"
        )
    if apart:
        said = []
        for v in apart:
            why = [
                f"{side}: {_left_out(e)}"
                for side, e in (("seed", v.a), ("best", v.b))
                if counted(e) is None
            ]
            said.append(
                f'<li class="left-out" data-item="{_h(v.item_id)}">{name(v)}: '
                f"{_h('; '.join(why))}</li>"
            )
        body.append(f"<p>Left out ({len(apart)}):</p><ul>{''.join(said)}</ul>")
    return body


def items_html(
    store: RunStore, s: RunSummary, a: str | None, b: str | None, *, live: bool
) -> list[str]:
    views = item_views(store, s, a, b)
    name_a = _name(s, a)
    name_b = _name(s, b)
    body = [
        "<h2>Items</h2>",
        f'<p class="meta">A = {_h(name_a)} · B = {_h(name_b)} · fixed: B scored higher than A, '
        "broken: lower (a candidate's own failure counts as 0; a metric or model fault is not "
        "compared)</p>",
    ]
    if live:
        body.append(_candidate_picker(s, a, b))
    elif len(s.candidates) > 2:
        body.append(
            '<p class="meta">skynet view compares any two candidates of the run item by item.</p>'
        )
    if views and all(v.item is None for v in views):
        body.append(
            '<p class="meta">This run was recorded before runs kept their items: inputs and '
            "expected outputs are not shown.</p>"
        )
    body += items_table_html(views, f"A: {name_a}", f"B: {name_b}")
    if not views:
        body.append('<p class="meta">No val or test item has been evaluated yet.</p>')
    return body


def items_table_html(views: list[ItemView], head_a: str, head_b: str) -> list[str]:
    """The filter buttons (each with its count) and the items table, one row per item: a run's
    items page, and the compare page."""
    counts = {status: sum(v.status == status for v in views) for status in STATUSES}
    buttons = [("all", len(views)), *counts.items(), ("errors", sum(v.errored for v in views))]
    rows = []
    for v in views:
        error = ' data-error="1"' if v.errored else ""
        expected = v.item.expected if v.item is not None else None
        rows.append(
            f'<tr class="item" id="item-{_h(quote(v.item_id, safe=""))}" '
            f'data-status="{v.status or "none"}"{error}>'
            f'<td class="mono">{_h(v.item_id)}<div class="meta">{_h(v.split)}</div>'
            f'<div class="status {v.status}">{_h(v.status or "-")} {_h(_change(v))}</div></td>'
            f"<td>{_pre(_input_of(v.item)) if v.item is not None else '-'}</td>"
            f"<td>{_pre(expected) if expected is not None else '-'}</td>"
            f"{_evaluation_cell(v.a)}{_evaluation_cell(v.b)}</tr>"
        )
    return [
        '<div class="filters">'
        + "".join(
            f'<button type="button" data-filter="{k}">{k} <span class="count">{n}</span></button>'
            for k, n in buttons
        )
        + "</div>",
        '<table id="item-table" class="items" data-show="all"><thead><tr><th>item</th>'
        f"<th>input</th><th>expected</th><th>{_h(head_a)}</th><th>{_h(head_b)}</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>",
    ]


# --------------------------------------------------------------------------------------------
# Candidates.


def _role(c: CandidateSummary, s: RunSummary) -> str:
    tags = []
    if s.seed is not None and c.id == s.seed.id:
        tags.append("seed")
    if s.best is not None and c.id == s.best.id:
        tags.append("best")
    if not in_pool(s, c):
        tags.append("rejected")  # on its minibatch: a proposal, not in the pool
    return " ".join(tags)


def _name(s: RunSummary, cid: str | None) -> str:
    if cid is None:
        return "-"
    by_id = {c.id: c for c in s.candidates}
    tag = _role(by_id[cid], s) if cid in by_id else ""
    return f"{cid} ({tag})" if tag else cid


def pareto_front(points: Sequence[tuple[str, float, float]]) -> set[str]:
    """The ids no other point dominates (at least as high on both, higher on one)."""
    front = set()
    for cid, x, y in points:
        dominated = any(
            (ox >= x and oy >= y) and (ox > x or oy > y) for other, ox, oy in points if other != cid
        )
        if not dominated:
            front.add(cid)
    return front


def _objectives(s: RunSummary) -> list[str]:
    return sorted({name for c in s.candidates for name in c.objectives})


def _tree(s: RunSummary) -> str:
    """The lineage: each candidate under its first parent; a merge names its other parents."""
    ids = {c.id for c in s.candidates}
    children: dict[str | None, list[CandidateSummary]] = {}
    for c in s.candidates:
        parent = next((p for p in c.parents if p in ids), None)
        children.setdefault(parent, []).append(c)

    def node(c: CandidateSummary, seen: set[str]) -> str:
        seen = seen | {c.id}
        tag = _role(c, s)
        extra = c.parents[1:]
        line = (
            f'<a href="#cand-{_h(c.id)}" class="mono">{_h(c.id)}</a> '
            f"val {_h(val_text(c, s))} · test {_h(test_text(c, s))}"
            + (f' <span class="tag">{_h(tag)}</span>' if tag else "")
            + (f' <span class="meta">(merged with {_h(", ".join(extra))})</span>' if extra else "")
        )
        kids = [k for k in children.get(c.id, []) if k.id not in seen]
        inner = "".join(node(k, seen) for k in kids)
        return f"<li>{line}{f'<ul>{inner}</ul>' if inner else ''}</li>"

    return f'<ul class="tree">{"".join(node(c, set()) for c in children.get(None, []))}</ul>'


def _proposals_html(proposals: list[ProposalRow]) -> str:
    if not proposals:
        return '<p class="meta">No proposal recorded.</p>'
    rows = []
    for p in proposals:
        text = f"<details><summary>text</summary>{_pre(p.text)}</details>" if p.text else ""
        parent = (
            f'<a class="mono" href="#cand-{_h(p.parent_id)}">{_h(p.parent_id)}</a>'
            if p.parent_id
            else ""
        )
        rows.append(
            f'<tr class="proposal" data-status="{_h(p.status)}"><td>{p.seq}</td>'
            f'<td class="status {_h(p.status)}">{_h(p.status)}</td><td>{parent}</td>'
            f"<td>{_h(p.detail)}{text}</td><td>{_h(p.created)}</td></tr>"
        )
    return (
        '<table class="proposals"><thead><tr><th>#</th><th>status</th><th>from</th>'
        f"<th>detail</th><th>time</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def candidates_html(
    store: RunStore, s: RunSummary, x: str | None, y: str | None, *, live: bool
) -> list[str]:
    body = ["<h2>Candidates</h2>", "<h3>Lineage</h3>", _tree(s)]
    names = _objectives(s)
    if len(names) >= 2:
        x = x if x in names else names[0]
        y = y if y in names and y != x else next(n for n in names if n != x)
        points = [
            (c.id, c.objectives[x], c.objectives[y])
            for c in s.candidates
            if x in c.objectives and y in c.objectives
        ]
        marked = {c.id: _role(c, s) for c in s.candidates if _role(c, s)}
        body.append(f"<h3>Pareto front: {_h(x)} and {_h(y)} (val means)</h3>")
        if live:

            def options(chosen: str) -> str:
                return "".join(
                    f'<option value="{_h(n)}"{" selected" if n == chosen else ""}>{_h(n)}</option>'
                    for n in names
                )

            body.append(
                '<form class="picker" method="get" action="#candidates">'
                f'<label>x <select name="x">{options(x)}</select></label> '
                f'<label>y <select name="y">{options(y)}</select></label> '
                '<button type="submit">plot</button></form>'
            )
        body.append(pareto_svg(points, pareto_front(points), x, y, marked))
        on_front = sorted(pareto_front(points))
        body.append(f'<p class="meta">On the front: {_h(", ".join(on_front))}</p>')
    body.append("<h3>Proposals</h3>")
    body.append(_proposals_html(store.proposals(s.run.id)))
    body.append("<h3>Every candidate</h3>")
    for c in s.candidates:
        tag = _role(c, s)
        head = (
            f'<span class="mono">{_h(c.id)}</span> val {_h(val_text(c, s))} '
            f"· test {_h(test_text(c, s))}"
            + (f' <span class="tag">{_h(tag)}</span>' if tag else "")
        )
        facts = [
            f"parents: {', '.join(c.parents) or '-'}",
            f"val items {c.val_items} ({c.val_errors} errors)",
            f"test items {c.test_items} ({c.test_errors} errors)",
        ]
        inner = [f'<p class="meta">{_h(" · ".join(facts))}</p>']
        if c.objectives:
            inner.append(
                html_table(
                    ["objective", "val mean"],
                    [[k, f"{v:.3f}"] for k, v in sorted(c.objectives.items())],
                )
            )
        if not c.content:
            inner.append('<p class="meta">Its text was not recorded.</p>')
        for component, text in sorted(c.content.items()):
            inner.append(f'<div class="component">{_h(component)}</div>')
            inner.append(f'<pre class="candidate-text">{_h(text)}</pre>')
        body.append(
            f'<details class="candidate" id="cand-{_h(c.id)}"><summary>{head}</summary>'
            f"{''.join(inner)}</details>"
        )
    return body


# --------------------------------------------------------------------------------------------
# Cost and time.


def _seconds(since: datetime | None, text: str) -> float:
    when = parse_time(text)
    return max(0.0, (when - since).total_seconds()) if since and when else 0.0


def cost_series(
    calls: list[CallRow], since: datetime | None
) -> tuple[dict[str, list[tuple[float, float, float]]], bool]:
    """role → (seconds since the run started, cumulative USD, cumulative model seconds) after
    each of its calls; and whether any call was priced."""
    series: dict[str, list[tuple[float, float, float]]] = {}
    totals: dict[str, tuple[float, float]] = {}
    priced = False
    for row in calls:
        c = row.call
        usd, secs = totals.get(c.role, (0.0, 0.0))
        if c.cost_usd is not None:
            priced = priced or c.cost_usd > 0
            usd += c.cost_usd
        secs += c.elapsed_ms / 1000
        totals[c.role] = (usd, secs)
        series.setdefault(c.role, []).append((_seconds(since, row.created), usd, secs))
    return series, priced


def _call_summary(row: CallRow, since: datetime | None) -> str:
    c = row.call
    cost = "unpriced" if c.cost_usd is None else f"${c.cost_usd:.5f}"
    flags = []
    if c.cached:
        flags.append("cached")
    if not c.ok:
        flags.append("failed")
    if c.attempts > 1:
        flags.append(f"{c.attempts} attempts")
    return (
        f'<span class="mono">#{row.seq}</span> +{_seconds(since, row.created):.1f}s '
        f"<b>{_h(c.role)}</b> {_h(c.model)}"
        + (f' item <span class="mono">{_h(c.item_id)}</span>' if c.item_id else "")
        + f" · {c.input_tokens:,} in / {c.output_tokens:,} out · {_h(cost)} · "
        f"{c.elapsed_ms:.0f} ms"
        + (f' · <span class="flag">{_h(", ".join(flags))}</span>' if flags else "")
    )


def call_text_html(row: CallRow) -> str:
    """A call's request and reply (and its error), as shown when the call is opened."""
    c = row.call
    parts = []
    if c.error:
        parts.append(f'<div class="err">{_h(c.error)}</div>')
    parts.append("<div>request</div>" + _messages_html(c.prompt))
    parts.append("<div>reply</div>" + _reply_html(c.reply))
    return "".join(parts)


def _messages_html(prompt: str) -> str:
    if not prompt:
        return '<p class="meta">not recorded</p>'
    try:
        messages = json.loads(prompt)
    except ValueError:
        return _pre(prompt)
    if not isinstance(messages, list):
        return _pre(messages)
    out = []
    for m in messages:
        if isinstance(m, dict):
            role = str(m.get("role", ""))
            content = m.get("content")
            out.append(f'<div class="msg-role">{_h(role)}</div>' + _pre(content))
        else:
            out.append(_pre(m))
    return "".join(out)


def _reply_html(reply: str) -> str:
    if not reply:
        return '<p class="meta">none (the call failed, or it was recorded before replies were kept)</p>'
    try:
        data = json.loads(reply)
    except ValueError:
        return _pre(reply)
    if isinstance(data, dict) and ("text" in data or "tool_calls" in data):
        text = data.get("text")
        parts = [_pre(text)] if text else []
        if data.get("tool_calls"):
            parts.append('<div class="msg-role">tool calls</div>' + _pre(data["tool_calls"]))
        rest = {k: v for k, v in data.items() if k not in ("text", "tool_calls") and v}
        if rest:
            facts = " · ".join(f"{k}: {v}" for k, v in rest.items())
            parts.append(f'<div class="meta">{_h(facts)}</div>')
        return "".join(parts) or _pre(data)
    return _pre(data)


def cost_html(store: RunStore, s: RunSummary, *, live: bool) -> list[str]:
    run_id = s.run.id
    calls = store.call_rows(run_id)
    since = parse_time(s.run.created)
    series, priced = cost_series(calls, since)
    body = [
        "<h2>Cost and time</h2>",
        html_table(COST_HEADER, cost_rows(s)),
        cost_svg(series, priced),
        f"<h3>Model calls ({len(calls):,})</h3>",
    ]
    if live:
        shown, with_text = calls, set()
    else:
        shown = calls[:FILE_CALLS]
        # The file carries the request and reply of the reflection calls first, then others.
        ranked = sorted(calls, key=lambda r: (r.call.role != "reflection", r.seq))
        with_text = {r.seq for r in ranked[:FILE_CALL_TEXTS]}
    if len(shown) < len(calls):
        body.append(
            f'<p class="meta">The first {len(shown):,} calls are listed; skynet view lists all '
            f"{len(calls):,}.</p>"
        )
    if not live and len(calls) > len(with_text):
        body.append(
            f'<p class="meta">{len(with_text):,} calls carry their request and reply in this file '
            "(reflection calls first); skynet view shows any call's.</p>"
        )
    rows = []
    for row in shown:
        summary = _call_summary(row, since)
        if live:
            src = f"/run/{quote(run_id)}/call/{row.seq}"
            rows.append(
                f'<details class="call" data-src="{_h(src)}" data-role="{_h(row.call.role)}">'
                f'<summary>{summary}</summary><div class="call-body">loading…</div></details>'
            )
        elif row.seq in with_text:
            full = store.call(run_id, row.seq)
            text = call_text_html(full) if full is not None else ""
            rows.append(
                f'<details class="call" data-role="{_h(row.call.role)}"><summary>{summary}'
                f'</summary><div class="call-body">{text}</div></details>'
            )
        else:
            rows.append(f'<div class="call" data-role="{_h(row.call.role)}">{summary}</div>')
    body.append(f'<div class="calls">{"".join(rows)}</div>')
    return body


# --------------------------------------------------------------------------------------------
# The document.


PAGE_CSS = """
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:.5rem 0;
z-index:1}nav a{margin-right:1.2rem;text-decoration:none;color:#0969da}
nav .run{margin-right:1.5rem;font-weight:bold}
section.page,details,tr.item{scroll-margin-top:3.5rem}
nav a.on{font-weight:bold;color:#222}
table.items{width:100%;table-layout:fixed}table.items td,table.items th{text-align:left}
table.items th:nth-child(1){width:9rem}
table.items pre{max-height:18rem;overflow:auto;margin:.2rem 0}
table[data-show=fixed] tr.item:not([data-status=fixed]),
table[data-show=broken] tr.item:not([data-status=broken]),
table[data-show=unchanged] tr.item:not([data-status=unchanged]),
table[data-show=errors] tr.item:not([data-error]){display:none}
.filters button{margin-right:.4rem}.filters button.on{font-weight:bold;background:#ddf4ff}
.status.fixed{color:#116329}.status.broken{color:#82071e}
.status.accepted{color:#116329}.status.rejected,.status.failed{color:#82071e}
.feedback{color:#444;font-size:.85rem;white-space:pre-wrap;border-left:3px solid #ddd;
padding-left:.5rem}.named{color:#555;font-size:.85rem}
.tree,.tree ul{list-style:none;padding-left:1.2rem}.tree li{margin:.2rem 0}
.tree li::before{content:"└ ";color:#999}.tag{background:#ddf4ff;border-radius:3px;
padding:0 .3rem;font-size:.8rem}
details.candidate{border:1px solid #ddd;border-radius:4px;margin:.4rem 0;padding:.3rem .6rem}
details.candidate[open]{background:#fcfcfd}.component{font-weight:bold;margin-top:.5rem}
.call{font-size:.85rem;border-bottom:1px solid #eee;padding:.2rem 0}
.call-body{padding:.3rem 1rem}.msg-role{color:#6639ba;font-size:.8rem}.flag{color:#bc4c00}
form.picker{margin:.5rem 0}table.proposals td,table.proposals th{text-align:left}
"""

SCRIPT = """
(function(){
function page(){
 var id=(location.hash||'#overview').slice(1),el=document.getElementById(id),
 top=el&&el.closest('section.page')||document.getElementById('overview');
 document.querySelectorAll('section.page').forEach(function(s){s.hidden=(s!==top)});
 document.querySelectorAll('nav a[href^="#"]').forEach(function(a){
  a.classList.toggle('on',a.getAttribute('href')==='#'+top.id)});
 if(el&&el.tagName==='DETAILS'){el.open=true;el.scrollIntoView()}
}
function filter(name){
 var t=document.getElementById('item-table');if(!t)return;t.dataset.show=name;
 document.querySelectorAll('[data-filter]').forEach(function(b){
  b.classList.toggle('on',b.dataset.filter===name)});
 try{sessionStorage.setItem('skynet-filter:'+location.pathname,name)}catch(e){}
}
document.querySelectorAll('[data-filter]').forEach(function(b){
 b.addEventListener('click',function(){filter(b.dataset.filter)})});
var kept=null;try{kept=sessionStorage.getItem('skynet-filter:'+location.pathname)}catch(e){}
filter(kept||'all');
document.querySelectorAll('details.call[data-src]').forEach(function(d){
 d.addEventListener('toggle',function(){
  if(!d.open||d.dataset.loaded)return;d.dataset.loaded='1';
  fetch(d.dataset.src).then(function(r){return r.text()}).then(function(t){
   d.querySelector('.call-body').innerHTML=t})})});
window.addEventListener('hashchange',page);page();
var stamp=document.body.dataset.stamp;
if(stamp){setInterval(function(){
 fetch(document.body.dataset.stampUrl).then(function(r){return r.ok?r.text():stamp})
 .then(function(s){if(s!==stamp)location.reload()}).catch(function(){})},2000)}
})();
"""

# A served page's policy; page() adds script-src with a fresh nonce per rendering.
VIEWER_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'"
)


def render_document(
    store: RunStore,
    summary: RunSummary,
    *,
    a: str | None = None,
    b: str | None = None,
    x: str | None = None,
    y: str | None = None,
    live: bool = False,
    stamp: str = "",
) -> str:
    """The run's pages as one HTML document (a tab per page).

    Args:
        store: the run store the summary was made from.
        summary: the run's report (skynet.runs.report.summarize).
        a, b: the candidates the items page compares (default: the baseline and the best; an
            evaluation-only run: its first two candidates).
        x, y: the objectives of the Pareto plot (default: the first two named scores).
        live: the viewer's document (candidate pickers, calls fetched on demand, reloads when
            the run's `stamp` changes) rather than the self-contained file.
        stamp: the run's state when rendered (RunStore.stamp); live only.
    """
    s = summary
    ids = [c.id for c in s.candidates]
    a = a if a in ids else (s.seed.id if s.seed else (ids[0] if ids else None))
    default_b = s.best.id if s.best else (ids[1] if len(ids) > 1 else a)
    b = b if b in ids else default_b
    run_id = s.run.id
    nav = [
        f'<span class="run mono">{_h(run_id)}</span>',
        '<a href="#overview">Overview</a>',
        '<a href="#items">Items</a>',
        f'<a href="#candidates">Candidates ({sum(in_pool(s, c) for c in s.candidates)})</a>',
        '<a href="#cost">Cost and time</a>',
    ]
    if live:
        nav.append('<a href="/">All runs</a>')
    paired: list[str] = []
    if s.seed is not None and s.best is not None and s.seed.id != s.best.id:
        paired = item_by_item_html(item_views(store, s, s.seed.id, s.best.id), linked=True)
    body = [
        f"<nav>{''.join(nav)}</nav>",
        f'<section class="page" id="overview">{"".join(overview_html(s, item_by_item=paired))}'
        "</section>",
        f'<section class="page" id="items">{"".join(items_html(store, s, a, b, live=live))}'
        "</section>",
        '<section class="page" id="candidates">'
        f"{''.join(candidates_html(store, s, x, y, live=live))}</section>",
        f'<section class="page" id="cost">{"".join(cost_html(store, s, live=live))}</section>',
    ]
    attrs = ""
    if live and stamp:
        attrs = f' data-stamp="{_h(stamp)}" data-stamp-url="/run/{_h(quote(run_id))}/stamp"'
    return page(
        f"Skynet run {run_id}",
        body,
        css=PAGE_CSS,
        script=SCRIPT,
        csp=VIEWER_CSP if live else CSP,
        attrs=attrs,
        nonce=live,
    )
