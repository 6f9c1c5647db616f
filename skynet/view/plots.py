"""The report's plots, drawn by matplotlib as inline SVG: no script, no font or file fetched, so
a saved page stays self-contained and offline. Text stays text (searchable, small).

Every function returns one `<svg>` element (no XML prolog), or a short `<p>` when there is
nothing to draw yet.
"""

from __future__ import annotations

import html
import io
import math
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skynet.gain import Gain

__all__ = ["cost_svg", "curve_svg", "gain_svg", "pareto_svg"]

# pyplot keeps global state; one figure at a time (the viewer serves from several threads).
_LOCK = threading.Lock()
_BLUE, _GREY, _ORANGE = "#0969da", "#8c959f", "#bc4c00"
_ROLE_COLOURS = {"task": _BLUE, "reflection": _ORANGE, "metric": "#1a7f37"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",  # text as <text>, not glyph paths
            "svg.hashsalt": "skynet",  # ids do not change from one rendering to the next
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: Any, label: str) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    # The element alone: no prolog, doctype or metadata (which name the web: nothing is fetched).
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return text.replace("<svg ", f'<svg role="img" aria-label="{html.escape(label)}" ', 1)


def _nothing(text: str) -> str:
    return f'<p class="meta">{html.escape(text)}</p>'


def curve_svg(curve: Sequence[tuple[int, float]], metric_calls: int) -> str:
    """Best val score so far (a step line) against the metric calls used."""
    if not curve:
        return _nothing("no val score recorded yet")
    plt = _pyplot()
    with _LOCK:
        fig, ax = plt.subplots(figsize=(6.4, 3.0))
        try:
            xs = [x for x, _ in curve] + [max(metric_calls, curve[-1][0])]
            ys = [y for _, y in curve] + [curve[-1][1]]
            ax.step(xs, ys, where="post", color=_BLUE, linewidth=2)
            ax.plot([x for x, _ in curve], [y for _, y in curve], "o", color=_BLUE, markersize=4)
            ax.set_xlabel("metric calls used")
            ax.set_ylabel("best val score")
            ax.set_xlim(left=0)
            ax.grid(alpha=0.3)
            return _svg(fig, "best val score against metric calls used")
        finally:
            plt.close(fig)


def pareto_svg(
    points: Sequence[tuple[str, float, float]],
    front: set[str],
    x_name: str,
    y_name: str,
    marked: dict[str, str] | None = None,
) -> str:
    """Candidates on two objectives (higher is better on both); the Pareto front joined.

    Args:
        points: (candidate id, x, y).
        front: ids of the candidates no other one dominates.
        x_name, y_name: the objectives' names (axis labels).
        marked: candidate id → label written beside its point (e.g. "seed", "best").
    """
    if not points:
        return _nothing("no candidate has a score on both objectives yet")
    plt = _pyplot()
    marked = marked or {}
    with _LOCK:
        fig, ax = plt.subplots(figsize=(5.2, 4.0))
        try:
            rest = [p for p in points if p[0] not in front]
            on = sorted((p for p in points if p[0] in front), key=lambda p: p[1])
            if rest:
                ax.scatter([p[1] for p in rest], [p[2] for p in rest], color=_GREY, s=22)
            ax.plot([p[1] for p in on], [p[2] for p in on], "o-", color=_BLUE, markersize=5)
            for cid, x, y in points:
                if cid in marked:
                    ax.annotate(
                        marked[cid], (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8
                    )
            ax.set_xlabel(x_name)
            ax.set_ylabel(y_name)
            ax.grid(alpha=0.3)
            return _svg(fig, f"candidates on {x_name} and {y_name}, Pareto front joined")
        finally:
            plt.close(fig)


def cost_svg(series: dict[str, list[tuple[float, float, float]]], priced: bool) -> str:
    """Cumulative cost (when any call was priced) and cumulative model time, by role, against
    the run's wall time.

    Args:
        series: role → (seconds since the run started, cumulative USD, cumulative model
            seconds) after each of its calls, in order.
        priced: whether any call had a known price (else only the time panel is drawn).
    """
    if not any(series.values()):
        return _nothing("no model call recorded")
    plt = _pyplot()
    with _LOCK:
        panels = 2 if priced else 1
        fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 3.0), squeeze=False)
        try:
            for i, (title, column) in enumerate(
                [("cumulative USD", 1), ("cumulative model time (s)", 2)][-panels:]
            ):
                ax = axes[0][i]
                for role, points in sorted(series.items()):
                    if not points:
                        continue
                    ax.step(
                        [0.0] + [p[0] for p in points],
                        [0.0] + [p[column] for p in points],
                        where="post",
                        label=role,
                        color=_ROLE_COLOURS.get(role, _GREY),
                    )
                ax.set_xlabel("run time (s)")
                ax.set_ylabel(title)
                ax.set_xlim(left=0)
                ax.grid(alpha=0.3)
                ax.legend(frameon=False)
            return _svg(fig, "cumulative cost and model time by role over the run")
        finally:
            plt.close(fig)


# The gain's plot is drawn by hand: two markers on one axis need no matplotlib (nor its half
# second of import), and its text is exactly the report's figures.
_GAIN_WIDTH, _GAIN_LABELS, _GAIN_RIGHT = 660, 270, 640
_GAIN_ROW, _GAIN_AXIS = 28, 74


def _ticks(lo: float, hi: float) -> tuple[list[float], int]:
    """At most six round values in [lo, hi] (0 among them when it lies there), and the
    decimals their labels need."""
    raw = (hi - lo) / 5
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(f * power for f in (1.0, 2.0, 2.5, 5.0, 10.0) if f * power >= raw)
    decimals = next(d for d in range(8) if abs(round(step, d) - step) < step * 1e-6)
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + 1e-9:
        ticks.append(round(k * step, 10))
        k += 1
    return ticks, decimals


def gain_svg(gain: Gain | None) -> str:
    """The best's gain over the seed on test: its estimate and 95% interval against 0, and the
    val gain of the same best beside it, marked as the figure that chose the best.

    Returns a short `<p>` when the gain has no estimate (no test item both have counted).
    """
    if gain is None or gain.estimate is None:
        return _nothing("no test gain to draw: no test item has a counted score for both")
    est = gain.estimate
    low = gain.low if gain.low is not None else est
    high = gain.high if gain.high is not None else est
    val = gain.val_estimate
    values = [0.0, est, low, high] + ([val] if val is not None else [])
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 if hi > lo else 0.05  # nothing but 0 to draw: a small span
    lo, hi = lo - pad, hi + pad

    def x(v: float) -> float:
        return round(_GAIN_LABELS + (v - lo) / (hi - lo) * (_GAIN_RIGHT - _GAIN_LABELS), 1)

    def text(tx: float, ty: float, words: str, *, anchor: str = "start", cls: str = "") -> str:
        klass = f' class="{cls}"' if cls else ' fill="#555"'
        return (
            f'<text x="{tx}" y="{ty}" text-anchor="{anchor}" font-size="11"{klass}>'
            f"{html.escape(words)}</text>"
        )

    split = gain.split
    interval = f"[{low:+.3f}, {high:+.3f}]"
    test_label = f"{split} {est:+.3f} {interval}, n = {gain.n}"
    described = f"{split} gain {est:+.3f}, 95% interval {low:+.3f} to {high:+.3f}, against 0"
    if val is not None:
        described += f"; val gain {val:+.3f} (chose the best)"
    height = _GAIN_AXIS + 22
    parts = [
        f'<svg class="gain-plot" role="img" aria-label="{html.escape(described)}" '
        f'width="{_GAIN_WIDTH}" height="{height}" viewBox="0 0 {_GAIN_WIDTH} {height}">',
        f"<title>{html.escape(described)}</title>",
    ]
    ticks, decimals = _ticks(lo, hi)
    axis = _GAIN_AXIS
    parts.append(
        f'<line x1="{_GAIN_LABELS}" y1="{axis}" x2="{_GAIN_RIGHT}" y2="{axis}" stroke="{_GREY}"/>'
    )
    for t in ticks:
        tx = x(t)
        parts.append(f'<line x1="{tx}" y1="{axis}" x2="{tx}" y2="{axis + 4}" stroke="{_GREY}"/>')
        label = "0" if t == 0 else f"{t:+.{decimals}f}"
        parts.append(text(tx, axis + 16, label, anchor="middle"))
    zero = x(0.0)
    parts.append(
        f'<line class="zero" x1="{zero}" y1="6" x2="{zero}" y2="{axis}" stroke="{_GREY}" '
        'stroke-dasharray="4 3"/>'
    )
    # Row 1: the test estimate and its interval (caps at both ends).
    y1 = _GAIN_ROW - 6
    parts.append(text(4, y1 + 4, test_label, cls="test"))
    if high > low:
        parts.append(
            f'<line class="interval" x1="{x(low)}" y1="{y1}" x2="{x(high)}" y2="{y1}" '
            f'stroke="{_BLUE}" stroke-width="3"/>'
        )
        for end in (low, high):
            parts.append(
                f'<line x1="{x(end)}" y1="{y1 - 6}" x2="{x(end)}" y2="{y1 + 6}" '
                f'stroke="{_BLUE}" stroke-width="2"/>'
            )
    parts.append(f'<circle class="estimate" cx="{x(est)}" cy="{y1}" r="5" fill="{_BLUE}"/>')
    # Row 2: the val gain, which chose the best (an open diamond: a figure, not a confirmation).
    if val is not None:
        y2 = y1 + _GAIN_ROW
        vx = x(val)
        parts.append(text(4, y2 + 4, f"val (chose the best) {val:+.3f}", cls="val"))
        parts.append(
            f'<path class="val-marker" d="M{vx} {y2 - 6} L{vx + 6} {y2} L{vx} {y2 + 6} '
            f'L{vx - 6} {y2} Z" fill="#fff" stroke="{_ORANGE}" stroke-width="2"/>'
        )
    parts.append("</svg>")
    return "".join(parts)
