"""The gain on the run's pages (issue 26): the interval drawn under the headline, and the best
against the seed item by item on test, in the self-contained document and the viewer's page.

A real run store built row by row (no model: the figures are known), rendered as the document
`skynet show RUN --html` writes and served by the real viewer over loopback HTTP with its secret.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from skynet import Result
from skynet.data import Item
from skynet.runs import RunStore, render_html, runs_db_path, summarize
from skynet.view.pages import ITEM_BY_ITEM, render_document
from skynet.view.plots import gain_svg
from skynet.view.server import Viewer, serve

# Text from the data and from a candidate: it must show as text, never as markup.
HOSTILE_ID = "<img src=x onerror=alert(1)>"
HOSTILE_OUTPUT = "<script>window.__pwned=1</script>"
HOSTILE_ERROR = "</td><script>alert('err')</script>"
HOSTILE_PROMPT = "Answer.\n<script>alert('prompt')</script>\n"

# (item, seed's score, best's score); None: a metric fault; "crash": the candidate's own
# failure (0); "-": not evaluated.
TEST_ROWS = [
    ("t1", 0.0, 1.0),
    ("t2", 0.25, 0.75),
    ("t3", 1.0, 1.0),
    ("t4", 1.0, 0.0),
    ("t5", 0.5, 0.25),
    ("t6", None, 1.0),
    ("t7", 1.0, "crash"),
    (HOSTILE_ID, 0.0, 1.0),
    ("t9", 0.0, "-"),
]
# The table's rows: largest gain first, then the losses; equal differences in the items' order.
EXPECTED_ROWS = [
    ("t1", "0.000", "1.000", "+1.000"),
    (HOSTILE_ID, "0.000", "1.000", "+1.000"),
    ("t2", "0.250", "0.750", "+0.500"),
    ("t3", "1.000", "1.000", "+0.000"),
    ("t5", "0.500", "0.250", "-0.250"),
    ("t4", "1.000", "0.000", "-1.000"),
    ("t7", "1.000", "0.000 (failed)", "-1.000"),
]
EXPECTED_LEFT_OUT = [("t6", "seed: metric error"), ("t9", "best: not evaluated")]
# Best minus seed on the 7 items both counted: (1 + 1 + 0.5 + 0 - 0.25 - 1 - 1) / 7.
ESTIMATE = 0.25 / 7
VAL_GAIN = 0.5


def _result(item: str, score) -> Result:
    if score is None:
        return Result(item_id=item, error=HOSTILE_ERROR, error_kind="metric")
    if score == "crash":
        return Result(item_id=item, error="ZeroDivisionError", error_kind="candidate")
    return Result(item_id=item, output=f"{HOSTILE_OUTPUT} {item}", score=score)


def make_run(store: RunStore) -> str:
    """Seed s, a middle candidate m, best b; val (b gains 0.5 there) and the test rows above."""
    run_id = store.create_run(
        config={}, dataset_hash="d" * 64, metric_hash="m", seed=0, engine="gepa", budget={},
        versions={},
    )  # fmt: skip
    val = [("v1", 0.0, 1.0), ("v2", 0.0, 1.0), ("v3", 1.0, 1.0), ("v4", 0.0, 0.0)]
    store.record_items(
        run_id,
        [("val", Item(id=i, input={"q": i})) for i, _, _ in val]
        + [("test", Item(id=i, input={"q": i}, expected="yes")) for i, _, _ in TEST_ROWS],
    )
    store.add_candidate(run_id, "s", {"prompt": "Answer.\n"})
    store.set_seed_candidate(run_id, "s")
    store.add_candidate(run_id, "m", {"prompt": "Answer well.\n"}, parents=["s"])
    store.add_candidate(run_id, "b", {"prompt": HOSTILE_PROMPT}, parents=["m"])
    store.set_best(run_id, "b")
    for item, seed, best in val:
        store.record_evaluation(run_id, "s", "val", _result(item, seed), "m")
        store.record_evaluation(run_id, "m", "val", _result(item, seed), "m")
        store.record_evaluation(run_id, "b", "val", _result(item, best), "m")
    for item, seed, best in TEST_ROWS:
        store.record_evaluation(run_id, "s", "test", _result(item, seed), "m")
        if best != "-":
            store.record_evaluation(run_id, "b", "test", _result(item, best), "m")
    store.set_note(run_id, "confirmation", {"state": "done", "items": len(TEST_ROWS)})
    store.set_status(run_id, "finished")
    return run_id


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    with RunStore(runs_db_path(tmp_path)) as store:
        run_id = make_run(store)
    yield tmp_path, run_id


def _document(project: tuple[Path, str]) -> str:
    root, run_id = project
    with RunStore(runs_db_path(root)) as store:
        return render_document(store, summarize(store, run_id))


def _served(project: tuple[Path, str]) -> str:
    """The run's page as `skynet view` serves it: over loopback HTTP, with the start's secret."""
    root, run_id = project
    store = RunStore(runs_db_path(root))
    server = serve(Viewer(store, project_dir=root), port=0, out=io.StringIO(), token="t" * 43)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        port = server.server_address[1]
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/run/{run_id}",
            headers={"Cookie": f"skynet-view-{port}={'t' * 43}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
            return response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        store.close()


def _only_its_own_script(page: str) -> None:
    """One <script> on the page, and the page's Content-Security-Policy allows exactly it (by
    its nonce or its sha256): nothing a candidate wrote became a script."""
    assert page.lower().count("<script") == 1, re.findall(r"<script[^>]*>", page, re.I)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    allowed = re.search(r"script-src ([^;]*)", csp).group(1).split()
    found = re.search(r"<script( nonce=\"([^\"]+)\")?>(.*?)</script>", page, re.S)
    assert found is not None
    if found.group(2):
        assert allowed == [f"'nonce-{found.group(2)}'"]
    else:
        digest = base64.b64encode(hashlib.sha256(found.group(3).encode()).digest()).decode()
        assert allowed == [f"'sha256-{digest}'"]
    assert "'unsafe-inline'" not in " ".join(allowed) and "<img" not in page


def _interval(page: str, low: float, high: float) -> None:
    """The interval's SVG, inline, right under the headline, with the test and val figures."""
    svg = re.search(r'<svg class="gain-plot".*?</svg>', page, re.S)
    assert svg is not None
    text = svg.group(0)
    assert f"test +0.036 [{low:+.3f}, {high:+.3f}], n = 7" in text
    assert "val (chose the best) +0.500" in text
    assert '<circle class="estimate"' in text and '<path class="val-marker"' in text
    assert '<line class="interval"' in text and '<line class="zero"' in text
    # Under the headline's paragraphs, before the scores table.
    assert page.index('<p class="gain">') < svg.start() < page.index("<h2>Baseline vs best")
    assert "http" not in text and "<script" not in text


def _item_by_item(page: str) -> tuple[list[tuple[str, ...]], list[tuple[str, str]]]:
    section = page[page.index(f">{ITEM_BY_ITEM}</h2>") : page.index("<h2>Candidates</h2>")]
    rows = re.findall(
        r'<tr class="pair" data-item="([^"]*)"><td><a class="mono" href="#item-([^"]*)">'
        r"[^<]*</a></td><td>([^<]*)</td><td>([^<]*)</td><td[^>]*>([^<]*)</td></tr>",
        section,
    )
    for item, anchor, *_ in rows:  # each links to its row on the items page
        assert f'<tr class="item" id="item-{anchor}"' in page, item
    left_out = re.findall(
        r'<li class="left-out" data-item="[^"]*"><a[^>]*>([^<]*)</a>: ([^<]*)', section
    )
    shown = [(html.unescape(item), *cells) for item, _, *cells in rows]
    return shown, [(html.unescape(i), html.unescape(why)) for i, why in left_out]


def test_the_document_draws_the_interval_and_lists_the_items(project):
    root, run_id = project
    with RunStore(runs_db_path(root)) as store:
        s = summarize(store, run_id)
    g = s.gain
    assert g is not None and g.n == 7 and g.estimate == pytest.approx(ESTIMATE)
    assert g.val_estimate == pytest.approx(VAL_GAIN) and g.low < 0 < g.high
    page = _document(project)
    _interval(page, g.low, g.high)
    rows, left_out = _item_by_item(page)
    assert rows == EXPECTED_ROWS
    assert left_out == EXPECTED_LEFT_OUT
    assert (
        "7 items both have a counted score for (the gain's n): 3 gained, 3 lost, 1 the same" in page
    )
    _only_its_own_script(page)
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page  # an output, as text
    assert html.escape(HOSTILE_ID) in page


def test_the_viewer_serves_the_same_interval_and_items(project):
    page = _served(project)
    root, run_id = project
    with RunStore(runs_db_path(root)) as store:
        g = summarize(store, run_id).gain
    _interval(page, g.low, g.high)
    rows, left_out = _item_by_item(page)
    assert rows == EXPECTED_ROWS and left_out == EXPECTED_LEFT_OUT
    assert "connect-src 'self'" in page  # the viewer's page, not the file's
    _only_its_own_script(page)


def test_the_overview_report_draws_it_without_any_script(project):
    root, run_id = project
    with RunStore(runs_db_path(root)) as store:
        page = render_html(summarize(store, run_id))
    assert '<svg class="gain-plot"' in page and "test +0.036" in page
    # The report alone reads no store: no item table, and no script at all.
    assert ITEM_BY_ITEM not in page and "<script" not in page.lower()


def test_no_item_by_item_without_test_items_or_when_the_best_is_the_seed(tmp_path):
    with RunStore(runs_db_path(tmp_path)) as store:
        run_id = store.create_run(
            config={}, dataset_hash="d", metric_hash="m", seed=0, engine="gepa", budget={},
            versions={},
        )  # fmt: skip
        store.add_candidate(run_id, "s", {"prompt": "a"})
        store.set_seed_candidate(run_id, "s")
        store.add_candidate(run_id, "b", {"prompt": "b"}, parents=["s"])
        store.set_best(run_id, "b")
        for cand, score in (("s", 0.0), ("b", 1.0)):
            store.record_evaluation(run_id, cand, "val", _result("v1", score), "m")
        page = render_document(store, summarize(store, run_id))
    assert ITEM_BY_ITEM not in page and 'class="gain-plot"' not in page
    assert "no test split" in page


@pytest.mark.parametrize(
    ("estimate", "low", "high", "val", "ticks"),
    [
        (0.231, 0.08, 0.38, 0.429, ["0", "+0.1", "+0.2", "+0.3", "+0.4"]),
        (-0.1, -0.3, 0.1, None, ["-0.3", "-0.2", "-0.1", "0", "+0.1"]),
        (0.0, 0.0, 0.0, None, ["-0.04", "-0.02", "0", "+0.02", "+0.04"]),
    ],
)
def test_the_interval_axis_holds_every_figure_and_0(estimate, low, high, val, ticks):
    from skynet.gain import Gain

    gain = Gain(
        split="test", n=20, estimate=estimate, low=low, high=high, p_value=0.5,
        verdict="no difference detected", detectable=0.3, method="", val_estimate=val,
    )  # fmt: skip
    svg = gain_svg(gain)
    assert re.findall(r'text-anchor="middle" font-size="11" fill="#555">([^<]*)<', svg) == ticks
    xs = {
        name: float(re.search(rf'class="{name}" (?:cx|x1)="([\d.]+)"', svg).group(1))
        for name in ("estimate", "zero")
    }
    assert (xs["estimate"] > xs["zero"]) == (estimate > 0)
    assert ("val (chose the best)" in svg) == (val is not None)
    assert gain_svg(None).startswith("<p") and "<svg" not in gain_svg(None)


@pytest.mark.slow
def test_chromium_draws_the_interval_and_follows_an_item_link(project, tmp_path):
    """In Debian's Chromium (as tests/test_viewer_browser.py drives it): the interval is drawn,
    no script error, nothing fetched, and an item's link opens its row on the items page."""
    from playwright.sync_api import expect, sync_playwright

    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.fail(f"{chromium} is missing: `bash scripts/install.sh` (as root) installs it")
    target = tmp_path / "run.html"
    target.write_text(_document(project))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests, errors = [], []
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(target.as_uri())
            plot = page.locator("svg.gain-plot")
            expect(plot).to_be_visible()
            box = plot.bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 50
            expect(plot.locator("text.test")).to_have_text(re.compile(r"^test \+0\.036 \["))
            page.locator("table.item-by-item a").nth(1).click()
            expect(page.locator("section.page#items")).to_be_visible()
            row = page.locator("#item-table tr.item").filter(has_text=HOSTILE_ID)
            expect(row).to_be_in_viewport()
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert errors == [] and set(requests) == {target.as_uri()}, (errors, requests)
        finally:
            browser.close()
