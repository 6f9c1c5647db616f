"""The run viewer in a real browser: Playwright driving Debian's Chromium (issue 17).

Two real runs of a scripted capitals project (`skynet run` against the loopback model server):
under the seed prompt the model names Japan's capital by accident; the reflection's prompt
makes it name the others but gets Japan wrong (a broken item) and Mali wrong under both (an
unchanged one). The viewer (`skynet view`, a real subprocess) and the self-contained files
(`skynet show RUN --html F`, `skynet show A B --html F`) are opened in headless Chromium, driven
(tabs, filters, the candidate picker, a model call, the compare form) and held to what the run
store recorded. Every page's requests go to the viewer on 127.0.0.1 or are the file itself.

Screenshots land in $SKYNET_TEST_ARTIFACTS/screenshots (default: test-results/screenshots).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from projects import CAPITAL, make_project

from skynet.runs import RunStore, runs_db_path
from skynet.testing import is_reflection, reply
from skynet.testing.server import ScriptedServer

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
VIEWPORT = {"width": 1280, "height": 900}
REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = Path(os.environ.get("SKYNET_TEST_ARTIFACTS", REPO / "test-results")) / "screenshots"

# Markup a candidate wrote, as text: it must show as itself and never run.
HOSTILE = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
PROPOSAL = "Name the capital city of the country (proposal {k})."
SKYNET = [sys.executable, "-m", "skynet.cli"]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


# --------------------------------------------------------------------------------------------
# The runs.


def make_responder():
    """The scripted model. Seed prompt: a sentence about the country, except Japan's (names
    Tokyo by accident) and Peru's (hostile markup). A prompt that asks for the capital: the
    capital, except Japan (Kyoto: broken) and Mali (Timbuktu: unchanged). Each reflection
    proposes a new text (so the run has several candidates), carrying hostile markup too."""
    lock = threading.Lock()
    proposals = itertools.count(1)

    def responder(body):
        messages = body["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = messages[-1]["content"]
        if is_reflection(user):
            with lock:
                k = next(proposals)
            return reply(f"```\n{PROPOSAL.format(k=k)} {HOSTILE}\n```")
        country = user.removeprefix("Country: ").strip()
        if "capital" in system.lower():
            wrong = {"Japan": "Kyoto", "Mali": "Timbuktu"}
            capital = wrong.get(country, CAPITAL.get(country, "?"))
            return reply(f"The capital of {country} is {capital}.", latency_s=0.01)
        if country == "Japan":
            return reply("Japan: Tokyo is its largest city.", latency_s=0.01)
        if country == "Peru":
            return reply(f"Peru {HOSTILE}", latency_s=0.01)
        return reply(f"{country} is a country with a long history.", latency_s=0.01)

    return responder


@dataclass
class Run:
    """One recorded run, as the run store has it: what the pages must show."""

    id: str
    seed_id: str
    best_id: str
    texts: dict[str, str]  # candidate id → its instructions
    parents: dict[str, list[str]]
    statuses: dict[str, str]  # val/test item id → fixed, broken, unchanged, none (best vs seed)
    proposals: int
    calls: list[tuple[int, str, str | None]]  # (seq, role, item id)

    def of(self, status: str) -> list[str]:
        return sorted(i for i, s in self.statuses.items() if s == status)


@dataclass
class Runs:
    project: Path
    a: Run  # engine seed 0, budget 40
    b: Run  # engine seed 1, budget 30
    store: RunStore = field(repr=False)


def item_statuses(store: RunStore, run_id: str, a: str, b: str) -> dict[str, str]:
    """Every val/test item of the run → how candidate b did against a on it, computed here
    from the recorded evaluations (not by the viewer's own code)."""
    scores: dict[tuple[str, str], float | None] = {}
    for e in store.evaluations(run_id):
        if e.split in ("val", "test"):
            scores[(e.candidate_id, e.item_id)] = None if e.error is not None else e.score
    items = {i for i, row in store.items(run_id).items() if row.split in ("val", "test")}
    out = {}
    for item in items:
        sa, sb = scores.get((a, item)), scores.get((b, item))
        if sa is None or sb is None:
            out[item] = "none"
        else:
            out[item] = "fixed" if sb > sa else "broken" if sb < sa else "unchanged"
    return out


def read_run(store: RunStore, run_id: str) -> Run:
    run = store.get_run(run_id)
    assert run.status == "finished", run
    assert run.best_candidate_id and run.best_candidate_id != run.seed_candidate_id
    cands = store.candidates(run_id)
    assert not [e for e in store.evaluations(run_id) if e.error is not None]
    return Run(
        id=run_id,
        seed_id=run.seed_candidate_id,
        best_id=run.best_candidate_id,
        texts={c.id: c.content["instructions"] for c in cands},
        parents={c.id: c.parents for c in cands},
        statuses=item_statuses(store, run_id, run.seed_candidate_id, run.best_candidate_id),
        proposals=len(store.proposals(run_id)),
        calls=[(r.seq, r.call.role, r.call.item_id) for r in store.call_rows(run_id)],
    )


def skynet(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*SKYNET, *args], env=ENV, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"skynet {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Iterator[Runs]:
    server = ScriptedServer().start()
    server.responder = make_responder()
    try:
        project = make_project(tmp_path_factory.mktemp("viewer") / "p", server.url, budget=40)
        skynet("-C", str(project), "run")
        skynet("-C", str(project), "run", "--seed", "1", "--max-metric-calls", "30")
    finally:
        server.stop()
    store = RunStore(runs_db_path(project))
    by_seed = {r.seed: r.id for r in store.list_runs()}
    a, b = read_run(store, by_seed[0]), read_run(store, by_seed[1])
    # The run this file needs: the best fixes some val items, breaks one, leaves one.
    assert a.of("fixed") and a.of("broken") and a.of("unchanged"), a.statuses
    try:
        yield Runs(project=project, a=a, b=b, store=store)
    finally:
        store.close()


def copy_project(src: Path, dst: Path) -> Path:
    """A copy of a project and its run store (through SQLite's backup, so nothing half-written
    in the WAL is missed)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".skynet"))
    db = runs_db_path(dst)
    db.parent.mkdir(parents=True)
    with sqlite3.connect(runs_db_path(src)) as source, sqlite3.connect(db) as target:
        source.backup(target)
    return dst


# --------------------------------------------------------------------------------------------
# The viewer, a real `skynet view` process.

VIEWERS: list[str] = []  # every viewer's origin this module started: the pages may ask those
FIRST_LINE = re.compile(
    r"Skynet viewer: (http://127\.0\.0\.1:\d+)(/\S*?)\?token=([\w-]+)  \(Ctrl-C stops it\)$"
)


def enter(origin: str, token: str, path: str) -> str:
    path, hashed, fragment = path.partition("#")
    sep = "&" if "?" in path else "?"
    return f"{origin}{path}{sep}token={token}{hashed}{fragment}"


class ViewerProcess:
    def __init__(self, project: Path, *args: str) -> None:
        cmd = [*SKYNET, "-C", str(project), "view", *args, "--port", "0"]
        self.proc = subprocess.Popen(
            cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.out: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout, True)),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr, False)),
        ]
        for t in self.readers:
            t.daemon = True
            t.start()
        first = self.out.get(timeout=30)
        if first is None:
            self.proc.wait(timeout=10)
            raise AssertionError(
                f"skynet view exited ({self.proc.returncode}) before saying its URL: "
                f"{''.join(self.stderr)}"
            )
        found = FIRST_LINE.match(first.rstrip("\n"))
        assert found, f"the viewer's first line is not its URL: {first!r}"
        self.origin, self.first_path, self.token = found.group(1), found.group(2), found.group(3)
        VIEWERS.append(self.origin)

    def _read(self, stream, lines: list[str], tell: bool) -> None:
        for line in stream:
            lines.append(line)
            if tell:
                self.out.put(line)
        if tell:
            self.out.put(None)

    def url(self, path: str) -> str:
        return self.origin + path

    def enter(self, path: str) -> str:
        """`path` as the printed URL gives it: with the start's secret, which sets the cookie
        and redirects to `path` (a fresh browser context has no cookie yet)."""
        return enter(self.origin, self.token, path)

    def stop(self) -> None:
        """Ctrl-C: the viewer says it stopped and exits 0, with no traceback."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("skynet view did not stop within 10 s of Ctrl-C") from None
        for t in self.readers:
            t.join(timeout=5)
        err = "".join(self.stderr)
        assert code == 0, f"skynet view exited {code}: {err}"
        assert "Traceback" not in err and "skynet view:" not in err, err
        assert "skynet view: stopped" in "".join(self.stdout)


@pytest.fixture(scope="module")
def viewer(runs: Runs) -> Iterator[ViewerProcess]:
    v = ViewerProcess(runs.project)
    assert v.first_path == "/"
    try:
        yield v
    finally:
        v.stop()


# --------------------------------------------------------------------------------------------
# The browser.


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the viewer's browser tests drive Debian's Chromium; "
            "`bash scripts/install.sh` (as root) installs it",
            pytrace=False,
        )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Tab:
    """One page in a fresh browser context, recording every request it makes and every script
    error it raises; `shot` saves a full-page screenshot as a test artifact."""

    def __init__(self, browser: Browser, test_name: str) -> None:
        self.context = browser.new_context(viewport=VIEWPORT)
        self.context.set_default_timeout(10_000)
        self.page: Page = self.context.new_page()
        self.test_name = test_name
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.shots: list[Path] = []

    def shot(self, step: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.evaluate("window.scrollTo(0, 0)")  # the sticky nav at the top of the shot
        path = SCREENSHOTS / f"{self.test_name}-{step}.png"
        self.page.screenshot(path=str(path), full_page=True)
        assert path.is_file() and path.stat().st_size > 0, path
        self.shots.append(path)
        return path

    def check(self) -> None:
        stray = [
            u
            for u in self.requests
            if not (
                u.startswith(("file:", "data:"))
                or any(u == o or u.startswith(o + "/") for o in VIEWERS)
            )
        ]
        assert not stray, f"the page asked for something other than the viewer or its file: {stray}"
        assert not self.errors, f"script errors on the page: {self.errors}"


@pytest.fixture
def tab(chromium: Browser, request) -> Iterator[Tab]:
    t = Tab(chromium, request.node.name)
    try:
        yield t
        t.check()
    finally:
        t.context.close()


# --------------------------------------------------------------------------------------------
# What is on the page.


def show(page: Page, name: str) -> None:
    """Click the nav's link to a page; only that page's section is then visible."""
    page.click(f'nav a[href="#{name}"]')
    # Waits poll from Playwright's side: a predicate evaluated in the page is a string eval,
    # which the pages' Content-Security-Policy forbids.
    expect(page).to_have_url(re.compile(f"#{name}$"))
    expect(page.locator(f"section.page#{name}")).to_be_visible()
    for section in ("overview", "items", "candidates", "cost"):
        if page.locator(f"section.page#{section}").count():
            assert page.locator(f"section.page#{section}").is_visible() == (section == name)
    assert "on" in (page.get_attribute(f'nav a[href="#{name}"]', "class") or "")


def visible_items(page: Page) -> list[str]:
    """The ids of the item table's rows that are shown (the first text of each row)."""
    return sorted(
        page.eval_on_selector_all(
            "#item-table tr.item",
            "rows => rows.filter(r => getComputedStyle(r).display !== 'none')"
            ".map(r => r.querySelector('td').firstChild.textContent.trim())",
        )
    )


def count(page: Page, name: str) -> int:
    return int(page.inner_text(f"button[data-filter={name}] .count"))


def check_filters(page: Page, statuses: dict[str, str]) -> None:
    """The counts on the filter buttons, and clicking each filter shows exactly its items."""
    names = page.eval_on_selector_all("button[data-filter]", "bs => bs.map(b => b.dataset.filter)")
    assert {"all", "fixed", "broken", "unchanged"} <= set(names), names
    assert count(page, "all") == len(statuses)
    if "errors" in names:  # the compare page has no errors filter
        assert count(page, "errors") == 0
    for name in ("fixed", "broken", "unchanged"):
        assert count(page, name) == sum(s == name for s in statuses.values()), name
    assert visible_items(page) == sorted(statuses)
    for name in ["broken", "fixed", "unchanged", "errors", "all"]:
        if name not in names:
            continue
        page.click(f"button[data-filter={name}]")
        want = sorted(i for i, s in statuses.items() if name == "all" or s == name)
        assert visible_items(page) == want, name
        assert "on" in (page.get_attribute(f"button[data-filter={name}]", "class") or "")


def row(page: Page, item_id: str):
    return page.locator(f'#item-table tr.item[id="item-{quote(item_id, safe="")}"]')


def check_item_row(page: Page, store: RunStore, run: Run, item_id: str, a: str, b: str) -> None:
    """One row shows the item's input and expected output, and both candidates' output, score
    and feedback as recorded."""
    tr = row(page, item_id)
    assert tr.get_attribute("data-status") == run.statuses[item_id]
    item = store.items(run.id)[item_id]
    cells = tr.locator("td")
    assert cells.nth(0).inner_text().startswith(item_id)
    assert item.input["country"] in cells.nth(1).inner_text()
    assert item.expected["capital"] in cells.nth(2).inner_text()
    for cell, cand in ((cells.nth(3), a), (cells.nth(4), b)):
        (e,) = [x for x in store.evaluations(run.id, candidate_id=cand) if x.item_id == item_id]
        assert cell.locator(".score b").inner_text() == f"{e.score:.3f}"
        assert cell.locator("pre.output").text_content() == e.output
        assert cell.locator(".feedback").text_content() == e.feedback


def headers(page: Page) -> list[str]:
    return [h.strip() for h in page.locator("#item-table thead th").all_inner_texts()]


def check_candidate(page: Page, run: Run, cand: str) -> None:
    """Clicking a candidate's link in the lineage tree opens its details, showing its text."""
    details = page.locator(f'details.candidate[id="cand-{cand}"]')
    assert details.count() == 1
    assert not details.evaluate("d => d.open")
    page.click(f'ul.tree a[href="#cand-{cand}"]')
    expect(details).to_have_attribute("open", "")
    text = details.locator("pre.candidate-text")
    assert text.is_visible()
    assert text.text_content() == run.texts[cand]
    # The tree has every candidate, each child under its parent.
    for cid in run.texts:
        assert page.locator(f'ul.tree a[href="#cand-{cid}"]').count() == 1, cid
    for cid, parents in run.parents.items():
        if parents:
            under = page.locator(f'ul.tree li:has(> a[href="#cand-{parents[0]}"]) ul')
            assert under.locator(f'a[href="#cand-{cid}"]').count() == 1, (cid, parents)
    assert page.locator("table.proposals tbody tr").count() == run.proposals


def call_in_file(page: Page, seq: int):
    """A call of the file's list, by its number (the file's calls have no data-src)."""
    call = page.locator(f'.calls > details.call:has(summary span.mono:text-is("#{seq}"))')
    assert call.count() == 1, seq
    assert call.get_attribute("data-src") is None
    return call


def assert_not_run(page: Page) -> None:
    """Hostile markup a candidate wrote did not become markup: no script ran, no image."""
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img[src=x], [onerror]").count() == 0
    scripts = page.eval_on_selector_all("script", "ss => ss.map(s => s.textContent)")
    assert not [t for t in scripts if "__pwned" in t]


# --------------------------------------------------------------------------------------------
# The viewer.


def test_viewer_items_filter_fixed_and_broken(viewer, runs, tab):
    run, page = runs.a, tab.page
    page.goto(viewer.enter(f"/run/{run.id}"))
    assert page.locator("section.page#overview").is_visible()
    assert page.locator('nav a[href="/"]').inner_text() == "All runs"
    show(page, "items")
    assert headers(page)[3:] == [f"A: {run.seed_id} (seed)", f"B: {run.best_id} (best)"]
    check_filters(page, run.statuses)

    page.click("button[data-filter=broken]")
    assert visible_items(page) == run.of("broken")
    for item_id in run.of("broken"):
        check_item_row(page, runs.store, run, item_id, run.seed_id, run.best_id)
        assert "broken" in row(page, item_id).locator("td .status").inner_text()
    tab.shot("broken")

    page.click("button[data-filter=fixed]")
    assert visible_items(page) == run.of("fixed")
    check_item_row(page, runs.store, run, run.of("fixed")[0], run.seed_id, run.best_id)
    tab.shot("fixed")


def _pool(store: RunStore, run_id: str) -> set[str]:
    """The run's candidates in the pool (the seed and those scored on val)."""
    from skynet.runs.report import in_pool, summarize

    s = summarize(store, run_id)
    return {c.id for c in s.candidates if in_pool(s, c)}


def test_viewer_candidate_text(viewer, runs, tab):
    run, page = runs.a, tab.page
    page.goto(viewer.enter(f"/run/{run.id}"))
    show(page, "candidates")
    pooled = _pool(runs.store, run.id)
    assert page.inner_text('nav a[href="#candidates"]') == f"Candidates ({len(pooled)})"
    check_candidate(page, run, run.best_id)
    # Only the one clicked is open.
    opened = page.eval_on_selector_all("details.candidate", "ds => ds.filter(d => d.open)")
    assert len(opened) == 1
    tab.shot("best")


def test_viewer_picker_compares_any_two_candidates(viewer, runs, tab):
    run, page = runs.a, tab.page
    page.goto(viewer.enter(f"/run/{run.id}#items"))
    assert page.locator("section.page#items").is_visible()
    # Swapped: what the best fixed, the seed breaks.
    page.select_option("form.picker select[name=a]", run.best_id)
    page.select_option("form.picker select[name=b]", run.seed_id)
    with page.expect_navigation():
        page.click("form.picker button[type=submit]")
    assert f"a={run.best_id}" in page.url and f"b={run.seed_id}" in page.url
    assert page.locator("section.page#items").is_visible()
    assert headers(page)[3:] == [f"A: {run.best_id} (best)", f"B: {run.seed_id} (seed)"]
    swapped = item_statuses(runs.store, run.id, run.best_id, run.seed_id)
    assert count(page, "broken") == len(run.of("fixed"))
    assert count(page, "fixed") == len(run.of("broken"))
    check_filters(page, swapped)

    others = [c for c in run.texts if c not in (run.seed_id, run.best_id)]
    assert len(others) >= 2, "the run has too few candidates to pick two others"
    x, y = others[:2]
    page.select_option("form.picker select[name=a]", x)
    page.select_option("form.picker select[name=b]", y)
    with page.expect_navigation():
        page.click("form.picker button[type=submit]")
    pooled = _pool(runs.store, run.id)  # the others not in the pool are badged rejected
    shown = [c if c in pooled else f"{c} (rejected)" for c in (x, y)]
    assert headers(page)[3:] == [f"A: {shown[0]}", f"B: {shown[1]}"]
    assert page.locator("form.picker select[name=a]").input_value() == x
    assert page.locator("form.picker select[name=b]").input_value() == y
    check_filters(page, item_statuses(runs.store, run.id, x, y))
    tab.shot("two-others")


def test_viewer_call_request_and_reply_fetched_when_opened(viewer, runs, tab):
    run, page = runs.a, tab.page
    page.goto(viewer.enter(f"/run/{run.id}#cost"))
    assert page.locator("section.page#cost").is_visible()
    assert page.locator("section#cost svg").count() >= 1
    assert "task" in page.locator("section#cost table").first.inner_text()
    assert page.locator(".calls > details.call").count() == len(run.calls)

    # A task call on an item other than Peru's (whose reply is the hostile one).
    seq = next(s for s, role, item in run.calls if role == "task" and item != "c3")
    recorded = runs.store.call(run.id, seq).call
    src = f"/run/{run.id}/call/{seq}"
    call = page.locator(f'.calls > details.call[data-src="{src}"]')
    assert call.locator(".call-body").text_content() == "loading…"
    assert not any(u.endswith(src) for u in tab.requests)
    call.locator("summary").click()
    expect(call.locator(".call-body")).not_to_have_text("loading…")
    body = call.locator(".call-body")
    assert any(u == viewer.url(src) for u in tab.requests), "the call's text was not fetched"
    messages = json.loads(recorded.prompt)
    assert len(messages) == 2
    for m in messages:
        assert m["content"] in body.inner_text()
    assert body.locator(".msg-role").all_inner_texts() == [m["role"] for m in messages]
    assert json.loads(recorded.reply)["text"] in body.inner_text()
    assert "Country: " in body.inner_text()
    tab.shot("call")


def test_viewer_compares_two_runs_from_the_index(viewer, runs, tab):
    a, b, page = runs.a, runs.b, tab.page
    page.goto(viewer.enter("/"))
    listed = page.locator("table#runs tbody tr a").all_inner_texts()
    assert sorted(listed) == sorted([a.id, b.id])
    page.select_option("form.picker select[name=a]", a.id)
    page.select_option("form.picker select[name=b]", b.id)
    with page.expect_navigation():
        page.click("form.picker button[type=submit]")
    assert page.url == viewer.url(f"/compare/{a.id}/{b.id}")
    assert page.inner_text("h1") == f"Runs {a.id} and {b.id}"
    config = page.locator("h2:has-text('Config differences') + table tbody tr")
    rows = {tuple(c.strip() for c in r.locator("td").all_inner_texts()) for r in config.all()}
    assert ("engine.seed", "0", "1") in rows, rows
    assert ("budget.max_metric_calls", "40", "30") in rows, rows
    scores = page.locator("h2:has-text('Scores') + table").inner_text()
    assert "best val" in scores
    assert page.locator(f'a[href="/run/{a.id}"]').count() >= 1
    assert page.locator(f'a[href="/run/{b.id}"]').count() >= 1
    assert headers(page)[3:] == [f"A: {a.id}", f"B: {b.id}"]
    tab.shot("compare")


def test_viewer_reloads_when_the_run_records_something(chromium, runs, tab, tmp_path):
    project = copy_project(runs.project, tmp_path / "p")
    run = runs.a
    v = ViewerProcess(project)
    try:
        page = tab.page
        page.goto(v.enter(f"/run/{run.id}#candidates"))
        n = len(_pool(runs.store, run.id))
        assert page.inner_text('nav a[href="#candidates"]') == f"Candidates ({n})"
        page.evaluate("window.__before_reload = 1")
        new_id, text = "feedc0ffee00", "A candidate recorded while the page was open."
        with RunStore(runs_db_path(project)) as store:
            store.add_candidate(run.id, new_id, {"instructions": text}, parents=[run.best_id])
        started = time.monotonic()
        page.wait_for_selector(f'details.candidate[id="cand-{new_id}"]', timeout=10_000)
        assert time.monotonic() - started < 10
        assert page.evaluate("typeof window.__before_reload") == "undefined"  # it reloaded
        # Recorded with no val score, it is a proposal, not in the pool: listed, not counted.
        assert page.inner_text('nav a[href="#candidates"]') == f"Candidates ({n})"
        assert page.locator("section.page#candidates").is_visible()  # the same page, still
        under = page.locator(f'ul.tree li:has(> a[href="#cand-{run.best_id}"]) ul')
        assert under.locator(f'a[href="#cand-{new_id}"]').count() == 1
        page.click(f'ul.tree a[href="#cand-{new_id}"]')
        new_text = page.locator(f'details.candidate[id="cand-{new_id}"] pre.candidate-text')
        assert new_text.text_content() == text
        assert any(u == v.url(f"/run/{run.id}/stamp") for u in tab.requests)
        tab.shot("new-candidate")
    finally:
        v.stop()


def test_viewer_opens_the_named_run_first(runs):
    # `skynet view RUN` (issue 17: `skynet view [RUN]`) says the run's page as its first URL.
    v = ViewerProcess(runs.project, runs.a.id)
    try:
        assert v.first_path == f"/run/{runs.a.id}"
    finally:
        v.stop()


# --------------------------------------------------------------------------------------------
# The self-contained files.


@pytest.fixture(scope="module")
def report_file(runs, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("files") / "report.html"
    done = skynet("-C", str(runs.project), "show", runs.a.id, "--html", str(target))
    assert f"wrote {target}" in done.stdout
    return target


def test_file_items_filters_and_candidate_text(runs, report_file, tab):
    run, page = runs.a, tab.page
    uri = report_file.as_uri()
    page.goto(uri)
    assert page.locator('nav a[href="/"]').count() == 0  # no viewer behind a file
    show(page, "items")
    assert page.locator("form.picker").count() == 0
    assert headers(page)[3:] == [f"A: {run.seed_id} (seed)", f"B: {run.best_id} (best)"]
    check_filters(page, run.statuses)
    page.click("button[data-filter=broken]")
    for item_id in run.of("broken"):
        check_item_row(page, runs.store, run, item_id, run.seed_id, run.best_id)
    tab.shot("broken")

    show(page, "candidates")
    check_candidate(page, run, run.best_id)
    tab.shot("best")

    # A call's request and reply are in the file: opened, nothing is fetched.
    show(page, "cost")
    seq, _, _ = next(c for c in run.calls if c[1] == "reflection")
    recorded = runs.store.call(run.id, seq).call
    call = call_in_file(page, seq)
    call.locator("summary").click()
    body = call.locator(".call-body")
    assert json.loads(recorded.prompt)[0]["content"][:200] in body.text_content()
    assert json.loads(recorded.reply)["text"] in body.text_content()
    tab.shot("call")
    assert set(tab.requests) == {uri}, tab.requests


def test_file_compares_two_runs(runs, tab, tmp_path):
    a, b, page = runs.a, runs.b, tab.page
    target = tmp_path / "compare.html"
    skynet("-C", str(runs.project), "show", a.id, b.id, "--html", str(target))
    page.goto(target.as_uri())
    assert page.inner_text("h1") == f"Runs {a.id} and {b.id}"
    meta = page.locator("h1 + p.meta").inner_text()
    assert a.id in meta and b.id in meta
    rows = page.locator("h2:has-text('Config differences') + table").inner_text()
    assert "engine.seed" in rows and "budget.max_metric_calls" in rows
    assert headers(page)[3:] == [f"A: {a.id}", f"B: {b.id}"]
    statuses = item_statuses_between(runs.store, a, b)
    check_filters(page, statuses)
    tab.shot("compare")
    assert set(tab.requests) == {target.as_uri()}, tab.requests


def item_statuses_between(store: RunStore, a: Run, b: Run) -> dict[str, str]:
    """Each val/test item either run's best was evaluated on → how B's best did against A's."""

    def scores(run: Run) -> dict[str, float]:
        return {
            e.item_id: e.score
            for e in store.evaluations(run.id, candidate_id=run.best_id)
            if e.split in ("val", "test")
        }

    sa, sb = scores(a), scores(b)
    out = {}
    for item in set(sa) | set(sb):
        if item not in sa or item not in sb:
            out[item] = "none"
        else:
            x, y = sa[item], sb[item]
            out[item] = "fixed" if y > x else "broken" if y < x else "unchanged"
    return out


# --------------------------------------------------------------------------------------------
# Hostile text.


def test_hostile_text_shows_as_text(viewer, runs, report_file, tab):
    run, page = runs.a, tab.page
    (peru,) = [i for i, row in runs.store.items(run.id).items() if row.input["country"] == "Peru"]
    seed_output = next(
        e.output
        for e in runs.store.evaluations(run.id, candidate_id=run.seed_id)
        if e.item_id == peru
    )
    assert HOSTILE in seed_output and HOSTILE in run.texts[run.best_id]
    reflection = next(s for s, role, _ in run.calls if role == "reflection")
    peru_call = next(s for s, role, item in run.calls if role == "task" and item == peru)

    for where in ("viewer", "file"):
        if where == "viewer":
            page.goto(viewer.enter(f"/run/{run.id}"))
        else:
            page.goto(report_file.as_uri())
        show(page, "items")
        output = row(page, peru).locator("td").nth(3).locator("pre.output")
        assert output.text_content() == seed_output
        assert HOSTILE in output.inner_text()  # shown, as the characters it is
        show(page, "candidates")
        page.click(f'ul.tree a[href="#cand-{run.best_id}"]')
        best = page.locator(f'details.candidate[id="cand-{run.best_id}"] pre.candidate-text')
        expect(best).to_be_visible()  # the link's hashchange opens the details
        assert HOSTILE in best.inner_text()
        proposals = page.locator("table.proposals").text_content()
        assert HOSTILE in proposals
        show(page, "cost")
        if where == "viewer":  # the call's text is set as HTML when fetched: still text
            for seq in (reflection, peru_call):
                call = page.locator(f'details.call[data-src="/run/{run.id}/call/{seq}"]')
                call.locator("summary").click()
                expect(call.locator(".call-body")).to_contain_text("__pwned")
                assert HOSTILE in call.locator(".call-body").inner_text()
        else:
            call = call_in_file(page, reflection)
            call.locator("summary").click()
            assert HOSTILE in call.locator(".call-body").inner_text()
        page.wait_for_timeout(200)  # an onerror would have fired by now
        assert_not_run(page)
        tab.shot(where)


# --------------------------------------------------------------------------------------------
# The pages' Content-Security-Policy (issue 25): only the page's own script runs. Markup that
# slipped through escaping (an injected <script>, an inline onerror=) is refused by the browser,
# so it cannot navigate to a listener; under the old policy ('unsafe-inline') it did.


class Listener:
    """A loopback HTTP listener that records every path asked of it."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        paths = self.paths = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"got it")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    ear = Listener()
    try:
        yield ear
    finally:
        ear.close()


PAYLOADS = {
    "script": "<script>location.href='{origin}/script'</script>",
    "onerror": "<img src=x onerror=\"location.href='{origin}/onerror'\">",
}


def hostile_store(root: Path, markup: str) -> tuple[RunStore, str]:
    """A run written straight into a store: the best's output on item q1 is `markup`."""
    from skynet import Result
    from skynet.data import Item

    store = RunStore(runs_db_path(root))
    run_id = store.create_run(
        config={}, dataset_hash="d", metric_hash="m", seed=0, engine="gepa", budget={}, versions={}
    )
    store.record_items(run_id, [("val", Item(id=n, input={"q": n})) for n in ("q1", "q2")])
    store.add_candidate(run_id, "s", {"p": "seed"})
    store.set_seed_candidate(run_id, "s")
    store.add_candidate(run_id, "b", {"p": f"best {markup}"}, parents=["s"])
    store.set_best(run_id, "b")
    for item, seed, best in [("q1", 0.0, 1.0), ("q2", 1.0, 0.0)]:
        store.record_evaluation(
            run_id, "s", "val", Result(item_id=item, output="x", score=seed), "m"
        )
        out = markup if item == "q1" else "y"
        store.record_evaluation(
            run_id, "b", "val", Result(item_id=item, output=out, score=best), "m"
        )
    return store, run_id


def unescaped(monkeypatch) -> None:
    """What escaping that failed would give: outputs go onto the page as markup."""
    from skynet.view import pages

    monkeypatch.setattr(pages, "_pre", lambda value, cls="": f"<pre>{pages._shown(value)}</pre>")


def old_policy(html: str) -> str:
    """The page under the policy before issue 25: inline scripts and handlers allowed."""
    return re.sub(r"script-src '(nonce|sha256)-[^']+'", "script-src 'unsafe-inline'", html)


def open_and_wait(chromium: Browser, url: str, listener: Listener, *, token: str = "") -> Page:
    context = chromium.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(url)
    try:
        page.click('nav a[href="#items"]', timeout=2000)  # the output's page, shown
    except Exception:  # noqa: BLE001 — the page navigated away (the control)
        pass
    deadline = time.monotonic() + 3
    while not listener.paths and time.monotonic() < deadline:
        time.sleep(0.05)
    return page


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_injected_markup_in_the_file_is_refused_by_its_policy(
    chromium, listener, tmp_path, monkeypatch, kind
):
    from skynet.runs import summarize
    from skynet.view.pages import render_document

    markup = PAYLOADS[kind].format(origin=listener.origin)
    store, run_id = hostile_store(tmp_path, markup)
    unescaped(monkeypatch)
    html = render_document(store, summarize(store, run_id))
    store.close()
    assert markup in html  # escaping is off: the markup is on the page
    assert "'unsafe-inline'" not in re.search(r"script-src [^;\"]+", html).group(0)

    control = tmp_path / "old.html"
    control.write_text(old_policy(html))
    open_and_wait(chromium, control.as_uri(), listener).context.close()
    assert f"/{kind}" in listener.paths, "control: the old policy let the markup run"

    listener.paths.clear()
    defended = tmp_path / "new.html"
    defended.write_text(html)
    page = open_and_wait(chromium, defended.as_uri(), listener)
    try:
        assert listener.paths == []
        assert page.url == defended.as_uri() + "#items"
        # The page's own script still runs: the tab shows, a filter filters.
        assert page.locator("section.page#items").is_visible()
        page.click("button[data-filter=fixed]")
        expect(page.locator("#item-table")).to_have_attribute("data-show", "fixed")
    finally:
        page.context.close()


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_injected_markup_in_the_viewer_is_refused_by_its_policy(
    chromium, listener, tmp_path, monkeypatch, kind
):
    import io

    from skynet.view import pages
    from skynet.view.server import Viewer, serve

    markup = PAYLOADS[kind].format(origin=listener.origin)
    store, run_id = hostile_store(tmp_path, markup)
    unescaped(monkeypatch)
    out = io.StringIO()
    server = serve(Viewer(store), port=0, out=out)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    found = re.match(r"Skynet viewer: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", out.getvalue())
    origin, token = found.group(1), found.group(2)
    try:
        page = open_and_wait(chromium, enter(origin, token, f"/run/{run_id}"), listener)
        try:
            assert listener.paths == []
            assert page.url == f"{origin}/run/{run_id}#items"
            # On the page, as markup, and refused.
            assert page.locator("pre img[onerror]" if kind == "onerror" else "pre script").count()
            page.click("button[data-filter=broken]")
            expect(page.locator("#item-table")).to_have_attribute("data-show", "broken")
            page.click('nav a[href="#cost"]')
            # The tab shows on hashchange, an event after the click: waited for, not polled once.
            expect(page.locator("section.page#cost")).to_be_visible()
        finally:
            page.context.close()
        # Control: the same served page under the old policy runs the markup.
        monkeypatch.setattr(pages, "VIEWER_CSP", "script-src 'unsafe-inline'; " + pages.VIEWER_CSP)
        store.add_candidate(run_id, "late", {"p": "late"})  # a new stamp: drawn again
        open_and_wait(chromium, enter(origin, token, f"/run/{run_id}"), listener).context.close()
        assert f"/{kind}" in listener.paths, "control: the old policy let the markup run"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        store.close()
