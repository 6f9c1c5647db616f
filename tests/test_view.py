"""The viewer's pages, the comparison of two runs and the viewer's server, on real runs made
with the CLI against the loopback scripted server (the browser drives them in
test_viewer_browser.py)."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from projects import BETTER, COUNTRIES, make_project, task_responder

from skynet.cli import main
from skynet.runs import RunStore, runs_db_path, summarize
from skynet.view.compare import compare, render_compare_text
from skynet.view.pages import item_views, pareto_front, render_document
from skynet.view.server import Viewer, serve

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, scripted_server_module):
    """One project with two finished runs (seeds 0 and 1)."""
    scripted_server_module.responder = task_responder
    project = make_project(tmp_path_factory.mktemp("view") / "p", scripted_server_module.url)
    assert main(["-C", str(project), "run"]) == 0
    assert main(["-C", str(project), "run", "--seed", "1", "--max-metric-calls", "30"]) == 0
    with RunStore(runs_db_path(project)) as store:
        ids = [r.id for r in sorted(store.list_runs(), key=lambda r: r.created)]
    return project, ids


@pytest.fixture(scope="module")
def scripted_server_module():
    from skynet.testing.server import ScriptedServer

    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_a_run_records_its_items_and_each_calls_request_and_reply(runs):
    project, (run_id, _) = runs
    with RunStore(runs_db_path(project)) as store:
        items = store.items(run_id)
        rows = store.call_rows(run_id)
        task = next(r for r in rows if r.call.role == "task")
        reflection = next(r for r in rows if r.call.role == "reflection")
        task_call, reflection_call = (
            store.call(run_id, task.seq),
            store.call(run_id, reflection.seq),
        )
    assert len(items) == len(COUNTRIES)
    assert items["c1"].split == "val" and items["c1"].input == {"country": COUNTRIES[1][0]}
    assert items["c1"].expected == {"capital": COUNTRIES[1][1]}
    # The listing leaves the text out; one call read on its own has it.
    assert task.call.prompt == "" and task_call is not None and reflection_call is not None
    messages = json.loads(task_call.call.prompt)
    assert messages[-1]["content"].startswith("Country: ")
    assert "text" in json.loads(task_call.call.reply)
    assert BETTER in json.loads(reflection_call.call.reply)["text"]


def test_the_document_shows_every_item_with_baseline_and_best(runs):
    project, (run_id, _) = runs
    with RunStore(runs_db_path(project)) as store:
        s = summarize(store, run_id)
        views = item_views(store, s, s.seed.id, s.best.id)
        page = render_document(store, s)
    val = [v for v in views if v.split == "val"]
    assert len(val) == len(COUNTRIES) // 2
    # The seed names no capital, the best names every one: each val item is fixed.
    assert {v.status for v in val} == {"fixed"}
    assert all(v.item is not None and v.a is not None and v.b is not None for v in val)
    assert page.count('<tr class="item"') == len(views)
    assert 'data-filter="fixed">fixed <span class="count">8</span>' in page
    assert 'data-filter="broken">broken <span class="count">0</span>' in page
    # Inputs, expected outputs, both outputs and the feedback are on the page.
    assert "Japan" in page and "Tokyo" in page and "name the capital: Tokyo" in page
    assert "The capital of Japan is Tokyo." in page
    # Every candidate with its full text; the lineage; the cost plot; nothing fetched.
    for c in s.candidates:
        assert f'id="cand-{c.id}"' in page and f'href="#cand-{c.id}"' in page
    assert BETTER in page and page.count("<svg") >= 2
    assert "default-src 'none'" in page and "connect-src" not in page
    # The file carries the request and reply of the calls it lists with text.
    assert "Country: Japan" in page


def test_show_html_writes_the_document(runs, tmp_path, capsys):
    project, (run_id, _) = runs
    target = tmp_path / "run.html"
    assert main(["-C", str(project), "show", run_id, "--html", str(target)]) == 0
    assert f"wrote {target}" in capsys.readouterr().out
    page = target.read_text()
    assert 'id="items"' in page and 'id="candidates"' in page and 'id="cost"' in page


def test_show_two_runs_compares_them(runs, tmp_path, capsys):
    project, (a, b) = runs
    target = tmp_path / "compare.html"
    assert main(["-C", str(project), "show", a, b, "--html", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"A: run {a}" in out and f"B: run {b}" in out
    diff = re.search(r"Config differences\n(.*?)\n\n", out, re.S)
    assert diff is not None
    assert re.search(r"seed\s+0\s+1", diff.group(1))
    assert re.search(r"budget\.max_metric_calls\s+40\s+30", diff.group(1))
    assert "Items (A's" in out and "same on" in out
    page = target.read_text()
    assert f"Runs {a} and {b}" in page and "budget.max_metric_calls" in page

    with RunStore(runs_db_path(project)) as store:
        comparison = compare(store, summarize(store, a), summarize(store, b))
    assert comparison.shown_a is not None and comparison.shown_b is not None
    assert {d.split for d in comparison.items} == {"val"}
    assert len(comparison.items) == len(COUNTRIES) // 2
    assert "Config differences" in render_compare_text(comparison)


def test_show_bad_runs_is_one_line(runs, capsys):
    project, (a, b) = runs
    assert main(["-C", str(project), "show", a, b, a]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"skynet: error: skynet show takes one run, or two to compare, not 3: skynet show {a} {b}"]  # fmt: skip
    assert main(["-C", str(project), "show", a, "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run 'nope'" in err[0]


def test_the_text_report_wraps_prose_to_the_terminal(runs, monkeypatch, capsys):
    project, (run_id, _) = runs
    with RunStore(runs_db_path(project)) as store:
        store.set_note(run_id, "long", "word " * 60)
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["-C", str(project), "show", run_id]) == 0
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("  long:"))
    assert all(len(line) <= 60 for line in out[start : start + 6])
    assert out[start + 1].startswith("    word")  # continued lines hang under the note
    # To a pipe (no COLUMNS), a note stays on one line for grep.
    monkeypatch.delenv("COLUMNS")
    assert main(["-C", str(project), "show", run_id]) == 0
    assert any(line.startswith("  long:") and len(line) > 200 for line in capsys.readouterr().out.splitlines())  # fmt: skip


def test_pareto_front():
    points = [("a", 0.9, 0.1), ("b", 0.5, 0.5), ("c", 0.4, 0.4), ("d", 0.1, 0.9), ("e", 0.5, 0.5)]
    assert pareto_front(points) == {"a", "b", "d", "e"}


def test_an_old_run_without_items_renders(tmp_path):
    path = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs_v1.db", path)
    with RunStore(path) as store:
        s = summarize(store, "20260101-120000-0a1b")
        page = render_document(store, s)
    assert "recorded before runs kept their items" in page
    assert page.count('<tr class="item"') >= 1


# --------------------------------------------------------------------------------------------
# The server, over real HTTP on loopback.


def _get(url: str, host: str | None = None, cookie: str = "") -> tuple[int, str]:
    headers = {"Host": host} if host else {}
    if cookie:
        headers["Cookie"] = cookie
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Served:
    """A viewer on a free port: its origin, the secret its URL carried, and a GET that passes."""

    def __init__(self, url: str, token: str, project: Path, ids: list[str]) -> None:
        self.url, self.token, self.project, self.ids = url, token, project, ids
        port = url.rsplit(":", 1)[1]
        self.cookie = f"skynet-view-{port}={token}"

    def get(self, path: str, host: str | None = None) -> tuple[int, str]:
        return _get(self.url + path, host=host, cookie=self.cookie)


@pytest.fixture
def viewer(runs):
    import io
    import threading

    project, ids = runs
    store = RunStore(runs_db_path(project))
    out = io.StringIO()
    server = serve(Viewer(store, project_dir=project), port=0, out=out)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    printed = re.match(rf"Skynet viewer: {re.escape(url)}/\?token=([\w-]{{40,}})  ", out.getvalue())
    assert printed is not None, out.getvalue()
    yield Served(url, printed.group(1), project, ids)
    server.shutdown()
    server.server_close()
    thread.join()
    store.close()


def test_the_viewer_serves_every_page(viewer):
    url, (a, b) = viewer.url, viewer.ids
    status, index = viewer.get("/")
    assert status == 200 and f'href="/run/{a}"' in index and f'href="/run/{b}"' in index
    status, page = viewer.get(f"/run/{a}")
    assert (
        status == 200
        and "connect-src 'self'" in page
        and f'data-stamp-url="/run/{a}/stamp"' in page
    )
    assert 'form class="picker"' in page  # any two candidates can be picked
    call = int(re.search(rf'data-src="/run/{a}/call/(\d+)"', page).group(1))
    status, body = viewer.get(f"/run/{a}/call/{call}")
    assert status == 200 and "request" in body and "reply" in body
    status, body = viewer.get(f"/compare/{a}/{b}")
    assert status == 200 and f"Runs {a} and {b}" in body
    # The index's compare form is a GET that lands on the compare page.
    status, body = viewer.get(f"/compare?a={a}&b={b}")
    assert status == 200 and f"Runs {a} and {b}" in body
    assert url.startswith("http://127.0.0.1:")


def test_the_viewer_picks_two_candidates(viewer):
    project, (a, _) = viewer.project, viewer.ids
    with RunStore(runs_db_path(project)) as store:
        s = summarize(store, a)
    best, seed = s.best.id, s.seed.id
    status, page = viewer.get(f"/run/{a}?a={best}&b={seed}")
    assert status == 200
    assert f"<th>A: {best} (best)</th><th>B: {seed} (seed)</th>" in page
    assert 'data-filter="broken">broken <span class="count">8</span>' in page


def test_the_stamp_changes_when_the_run_records(viewer):
    project, (a, _) = viewer.project, viewer.ids
    _, before = viewer.get(f"/run/{a}/stamp")
    with RunStore(runs_db_path(project)) as store:
        store.add_candidate(a, "late", {"instructions": "late text"})
    _, after = viewer.get(f"/run/{a}/stamp")
    assert before != after and len(after) == 16
    _, page = viewer.get(f"/run/{a}")
    assert 'id="cand-late"' in page and "late text" in page


def test_the_viewer_says_what_is_missing_and_answers_loopback_only(viewer):
    a = viewer.ids[0]
    status, body = viewer.get("/run/nope")
    assert status == 404 and "no run &#x27;nope&#x27;" in body
    status, body = viewer.get(f"/run/{a}/call/999999")
    assert status == 404 and "has no call 999999" in body
    status, _ = viewer.get("/elsewhere")
    assert status == 404
    # A page on another origin that rebinds its name to 127.0.0.1 is refused.
    status, body = viewer.get(f"/run/{a}", host="evil.example:80")
    assert status == 403


@pytest.mark.slow
def test_skynet_view_runs_until_interrupted(runs):
    project, (a, _) = runs
    proc = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", "-C", str(project), "view", a, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        found = re.match(r"Skynet viewer: (http://127\.0\.0\.1:\d+)(/run/\S+)\?token=(\S+)", line)
        assert found is not None, line
        assert found.group(2) == f"/run/{a}"
        conn = http.client.HTTPConnection(found.group(1).removeprefix("http://"), timeout=10)
        conn.request("GET", f"{found.group(2)}?token={found.group(3)}")
        entered = conn.getresponse()
        entered.read()
        # The printed URL sets the cookie and leads to the page without the secret.
        assert entered.status == 303 and entered.getheader("Location") == f"/run/{a}"
        cookie = entered.getheader("Set-Cookie").split(";")[0]
        conn.request("GET", found.group(2), headers={"Cookie": cookie})
        assert conn.getresponse().status == 200
        proc.send_signal(2)  # Ctrl-C
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err
    assert "skynet view: stopped" in out


def test_skynet_view_on_a_taken_port_is_one_line(runs, capsys):
    import socket

    project, _ = runs
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["-C", str(project), "view", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot listen on 127.0.0.1:{port}" in err[0] and "--port" in err[0]


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_skynet_view_on_a_port_that_is_none_is_one_line(runs, capsys, port):
    project, _ = runs
    assert main(["-C", str(project), "view", "--port", port]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"skynet: error: --port {port} is not a port; give one from 1 to 65535, or 0 for any free one"
    ]


def test_skynet_view_without_runs_is_one_line(tmp_path, capsys):
    assert main(["-C", str(tmp_path), "view"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no runs recorded here" in err[0]


# --------------------------------------------------------------------------------------------
# Statuses, errors and repetitions, on rows written straight into a store.


def test_items_are_fixed_broken_unchanged_or_errors(tmp_path):
    from skynet import Result
    from skynet.data import Item
    from skynet.evaluation import aggregate

    store = RunStore(runs_db_path(tmp_path))
    run_id = store.create_run(
        config={}, dataset_hash="d", metric_hash="m", seed=0, engine="gepa", budget={}, versions={}
    )
    names = ["up", "down", "same", "crash", "fault", "reps"]
    store.record_items(run_id, [("val", Item(id=n, input={"q": f"<b>{n}</b>"})) for n in names])
    store.add_candidate(run_id, "s", {"p": "seed"})
    store.set_seed_candidate(run_id, "s")
    store.add_candidate(run_id, "b", {"p": "best"}, parents=["s"])
    store.set_best(run_id, "b")

    def ok(item: str, score: float) -> Result:
        return Result(item_id=item, output=f"out {score}", score=score)

    for item, seed, best in [("up", 0.0, 1.0), ("down", 1.0, 0.5), ("same", 0.5, 0.5)]:
        store.record_evaluation(run_id, "s", "val", ok(item, seed), "m")
        store.record_evaluation(run_id, "b", "val", ok(item, best), "m")
    # The best crashed where the seed scored: its failure is 0, so the item is broken.
    store.record_evaluation(run_id, "s", "val", ok("crash", 1.0), "m")
    crash = Result(item_id="crash", error="ZeroDivisionError", error_kind="candidate")
    store.record_evaluation(run_id, "b", "val", crash, "m")
    # A metric fault is not compared: the item is in errors only.
    store.record_evaluation(run_id, "s", "val", ok("fault", 0.0), "m")
    fault = Result(item_id="fault", error="metric.py raised KeyError", error_kind="metric")
    store.record_evaluation(run_id, "b", "val", fault, "m")
    store.record_evaluation(run_id, "s", "val", ok("reps", 0.0), "m")
    runs = [ok("reps", 1.0), ok("reps", 0.0), ok("reps", 1.0)]
    store.record_evaluation(run_id, "b", "val", aggregate("reps", runs), "m")

    s = summarize(store, run_id)
    views = {v.item_id: v for v in item_views(store, s, "s", "b")}
    statuses = {name: (views[name].status, views[name].errored) for name in names}
    assert statuses == {
        "up": ("fixed", False),
        "down": ("broken", False),
        "same": ("unchanged", False),
        "crash": ("broken", True),
        "fault": ("", True),
        "reps": ("fixed", False),
    }
    page = render_document(store, s)
    store.close()
    for name, count in [("all", 6), ("fixed", 2), ("broken", 2), ("unchanged", 1), ("errors", 2)]:
        assert f'data-filter="{name}">{name} <span class="count">{count}</span>' in page
    assert 'data-status="none" data-error="1"' in page  # the metric fault
    assert "candidate: ZeroDivisionError" in page
    assert "3 runs: 1.000, 0.000, 1.000 (spread 0.000–1.000)" in page
    # An item's input is shown as text, escaped.
    assert "&lt;b&gt;up&lt;/b&gt;" in page and "<b>up</b>" not in page
