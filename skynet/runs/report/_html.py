"""The report as HTML: the overview page (of the file and of the viewer), the page every
Skynet document is laid out in (inline style and script, nothing fetched), and the check that
writing a page to a path destroys nothing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skynet.errors import ConfigError
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
from skynet.terminal import printable
from skynet.view.plots import curve_svg, gain_svg

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


def html_escape(value: Any) -> str:
    # HTML-escaped, and control characters escaped too: they are not text in a page, and the
    # file may well be printed to a terminal.
    return html.escape(printable(value, multiline=True), quote=True)


def html_table(header: list[str], rows: list[list[str]], mono_first: bool = False) -> str:
    head = "".join(f"<th>{html_escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="mono"' if mono_first and i == 0 else ""
            cells.append(f"<td{cls}>{html_escape(cell)}</td>")
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
        lines.append(f'<span class="{cls}">{html_escape(line) or " "}</span>')
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
        f"status <b>{html_escape(run.status)}</b>",
        "evaluation only (skynet eval)"
        if evaluation_only(s)
        else f"engine {html_escape(run.engine)} · seed {html_escape(run.seed)}",
        f"started {html_escape(run.created)}",
        f"finished {html_escape(run.finished or '-')}",
        f"wall time {html_escape(duration_text(s.wall_seconds))}"
        + (f" ({html_escape(s.wall_note)})" if s.wall_note else ""),
        f'dataset <span class="mono">{html_escape(run.dataset_hash[:12])}</span>',
        f'metric <span class="mono">{html_escape(s.metric_hash[:12])}</span>',
    ]
    body = [
        f"<h1>Skynet run {html_escape(run.id)}</h1>",
        f'<p class="meta">{" · ".join(meta)}</p>',
    ]
    if run.error:
        body.append(f'<p class="err">error: {html_escape(run.error)}</p>')
    if is_unsandboxed(s):
        body.append(f'<p class="err">{html_escape(UNSANDBOXED)}</p>')
    notes = [[k, json.dumps(v)] for k, v in shown_notes(s)]
    if notes:
        body.append(html_table(["note", "value"], notes))
    headline = gain_lines(s)
    if headline:
        body.append('<p class="gain"><b>' + html_escape(headline[0]) + "</b></p>")
        body += [f"<p>{html_escape(line.strip())}</p>" for line in headline[1:]]
        kept_seed = s.seed is not None and s.best is not None and s.best.id == s.seed.id
        if s.gain is not None and s.gain.estimate is not None and not kept_seed:
            body.append(gain_svg(s.gain))

    if evaluation_only(s):
        body.append(f"<h2>{html_escape(scores_title(s))}</h2>")
        body.append(html_table(EVALUATED_HEADER, evaluated_rows(s), mono_first=True))
    else:
        body.append(
            f"<h2>Baseline vs best (val: {s.val_items} items, test: {s.test_items} items)</h2>"
        )
        body.append(html_table(["", "candidate", "val", "test"], score_rows(s)))
    for section in s.sections:
        body.append(f"<h2>{html_escape(section.title)}</h2>")
        if section.rows:
            body.append(html_table(list(section.header), [list(r) for r in section.rows]))
        body += [f"<p>{html_escape(note)}</p>" for note in section.notes]
    objectives = objective_rows(s)
    if objectives:
        body.append("<h2>Objectives (val means)</h2>")
        body.append(html_table(["objective", "baseline", "best", "change"], objectives))

    if not evaluation_only(s):
        body.append("<h2>Best val score against metric calls used</h2>")
        body.append(curve_svg(s.curve, s.metric_calls))

    body.append("<h2>Cost and time by role</h2>")
    body.append(html_table(COST_HEADER, cost_rows(s)))
    facts = fact_lines(s)
    if s.stale:
        facts.append(
            f"Stale: {s.stale} evaluation(s) were scored under another metric; "
            "rescore the run to count them"
        )
    if s.outdated:
        facts.append(outdated_text(s))
    body.append("<ul>" + "".join(f"<li>{html_escape(f)}</li>" for f in facts) + "</ul>")
    if evaluation_only(s):
        return body

    body.append("<h2>Best candidate against the seed</h2>")
    if not s.diff:
        body.append("<p>No change: the best candidate is the seed.</p>")
    for text in s.diff.values():
        body.append(_html_diff(text))
    body += item_by_item

    pooled = candidate_rows(s)
    body.append(f"<h2>Candidates ({len(pooled)}: the seed and those scored on val)</h2>")
    body.append(html_table(CANDIDATE_HEADER, pooled, mono_first=True))
    rejected = candidate_rows(s, pool=False)
    if rejected:
        body.append(f"<h2>Proposals rejected on their minibatch ({len(rejected)})</h2>")
        body.append(html_table(CANDIDATE_HEADER, rejected, mono_first=True))
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
        f"<title>{html_escape(title)}</title><style>{CSS}{css}</style></head>"
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
