"""The run report: baseline vs best, cost and time by role, the curve and the diff.

`summarize()` computes every figure from the run store; `render_text()` and `render_html()` only
lay them out. A candidate's score on a split is the mean over its evaluations of the items the run
evaluated the seed candidate on, and counts only when every one of those items is present: a
partial minibatch is not a val score. The mean follows skynet.mean: a candidate's own failure
(crash, time-out, bad output) counts as 0; a metric or model fault is left out of the mean and
shown beside it ("0.612 (2 metric errors left out)"). Every text a candidate wrote reaches the
terminal through skynet.terminal.printable: control characters are escaped.

One job a module: `_summary` computes (RunSummary, summarize, summary_json), `_format` says what
the text, the HTML and the viewer say alike (score cells, the gain's lines, the cost rows),
`_text` is the text report, `_html` the HTML report and the page every Skynet document is laid
out in. What the viewer (skynet.view) shares with the report is public here, in `__all__`.
"""

from skynet.runs.report._format import (
    COST_HEADER,
    NO_TEST_SPLIT,
    UNSANDBOXED,
    VAL_FROM_TRAIN,
    cost_rows,
    gain_lines,
    test_text,
    val_text,
)
from skynet.runs.report._html import (
    CSP,
    CSS,
    HTML_HEAD,
    HTML_HEAD_BEFORE,
    check_html_target,
    html_escape,
    html_table,
    overview_html,
    page,
    render_html,
)
from skynet.runs.report._summary import (
    SUMMARY_SCHEMA,
    TEST,
    VAL,
    CandidateSummary,
    ItemRepeats,
    RunSummary,
    in_pool,
    known_in_order,
    parse_time,
    summarize,
    summary_json,
)
from skynet.runs.report._text import render_text, text_table

__all__ = [
    "COST_HEADER",
    "CSP",
    "CSS",
    "HTML_HEAD",
    "HTML_HEAD_BEFORE",
    "NO_TEST_SPLIT",
    "SUMMARY_SCHEMA",
    "TEST",
    "UNSANDBOXED",
    "VAL",
    "VAL_FROM_TRAIN",
    "CandidateSummary",
    "ItemRepeats",
    "RunSummary",
    "check_html_target",
    "cost_rows",
    "gain_lines",
    "html_escape",
    "html_table",
    "in_pool",
    "known_in_order",
    "overview_html",
    "page",
    "parse_time",
    "render_html",
    "render_text",
    "summarize",
    "summary_json",
    "test_text",
    "text_table",
    "val_text",
]
