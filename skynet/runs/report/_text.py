"""The report as plain text for a terminal (`skynet show RUN`).

Every text a candidate wrote reaches the terminal through skynet.terminal.printable: control
characters are escaped.
"""

from __future__ import annotations

import json

from skynet.runs.report._format import (
    CANDIDATE_HEADER,
    COST_HEADER,
    EVALUATED_HEADER,
    UNSANDBOXED,
    candidate_rows,
    cost_rows,
    duration_text,
    evaluated_rows,
    evaluation_only,
    fact_lines,
    gain_lines,
    is_unsandboxed,
    objective_rows,
    outdated_text,
    score_rows,
    scores_title,
    shown_notes,
)
from skynet.runs.report._summary import RunSummary
from skynet.terminal import printable, wrap


def text_table(
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


_REPEATS_HEADER = ["item", "split", "mean", "spread", "scored", "shown"]


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
        if evaluation_only(s)
        else f"engine {run.engine}  seed {run.seed}"
    )
    out = [
        f"Run {run.id}  {run.status}  {engine}",
        *prose(
            f"started {run.created}  finished {run.finished or '-'}  "
            f"wall time {duration_text(s.wall_seconds)}"
            + (f" ({s.wall_note})" if s.wall_note else ""),
            "  ",
        ),
        f"  dataset {run.dataset_hash[:12]}  metric {s.metric_hash[:12]}",
    ]
    if run.error:
        out += prose(f"error: {run.error}", "  ")
    if is_unsandboxed(s):
        out += prose(UNSANDBOXED, "  ")
    for key, value in shown_notes(s):
        out += prose(f"{key}: {json.dumps(value)}", "  ")
    out.append("")
    headline = gain_lines(s)
    if headline:
        out += [line for text in headline for line in prose(text, "  ")] + [""]

    out.append(scores_title(s))
    if evaluation_only(s):
        out += text_table(EVALUATED_HEADER, evaluated_rows(s), text_columns=2)
    else:
        out += text_table(["", "candidate", "val", "test"], score_rows(s), text_columns=2)
    for section in s.sections:
        out += ["", section.title]
        if section.rows:
            rows = [list(r) for r in section.rows]
            out += text_table(list(section.header), rows, text_columns=section.text_columns)
        for note in section.notes:
            out += prose(note, "  ")
    objectives = objective_rows(s)
    if objectives:
        out += ["", "Objectives (val means)"]
        out += text_table(["objective", "baseline", "best", "change"], objectives)
    out += ["", "Cost and time by role"]
    out += text_table(COST_HEADER, cost_rows(s))
    out.append("")
    for fact in fact_lines(s):
        out += prose(fact)
    if s.stale:
        out += prose(
            f"Stale: {s.stale} evaluation(s) were scored under another metric; "
            "rescore the run to count them"
        )
    if s.outdated:
        out += prose(outdated_text(s))
    if s.repeats:
        out += ["", *prose(_repeats_title(s))]
        out += text_table(_REPEATS_HEADER, _repeat_rows(s), text_columns=2)
    if evaluation_only(s):
        return printable("\n".join(out) + "\n", multiline=True)
    if s.candidates:
        pooled = candidate_rows(s)
        out += ["", f"Candidates ({len(pooled)}: the seed and those scored on val, the pool)"]
        out += text_table(CANDIDATE_HEADER, pooled, text_columns=2)
        rejected = candidate_rows(s, pool=False)
        if rejected:
            out += ["", f"Proposals rejected on their minibatch ({len(rejected)}, not in the pool)"]
            out += text_table(CANDIDATE_HEADER, rejected, text_columns=2)
    out += ["", "Best candidate against the seed"]
    if not s.diff:
        out.append("  (no change: the best candidate is the seed)")
    for text in s.diff.values():
        out.append(text.rstrip("\n"))
    # Escaped last, as a whole: nothing a candidate wrote reaches the terminal raw.
    return printable("\n".join(out) + "\n", multiline=True)
