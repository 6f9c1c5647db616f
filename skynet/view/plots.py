"""The report's plots, drawn by matplotlib as inline SVG: no script, no font or file fetched, so
a saved page stays self-contained and offline. Text stays text (searchable, small).

Every function returns one `<svg>` element (no XML prolog), or a short `<p>` when there is
nothing to draw yet.
"""

from __future__ import annotations

import html
import io
import re
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["cost_svg", "curve_svg", "pareto_svg"]

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
