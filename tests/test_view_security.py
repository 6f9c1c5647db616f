"""Looking at a run is safe (issue 25): reading runs never runs the project's code, and the viewer
answers only whoever holds the secret its start printed (another local account gets 403).

Real runs (`skynet run` against the loopback scripted server), the real CLI, the real viewer over
loopback HTTP, and a real second account (uid 65534 through setpriv) when the tests run as root.
The viewer's Content-Security-Policy is held in Chromium by tests/test_viewer_browser.py.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from projects import make_project, task_responder

from skynet.cli import main
from skynet.runs import RunStore, runs_db_path
from skynet.view.server import Viewer, serve

SKYNET = [sys.executable, "-m", "skynet.cli"]

# metric.py of a downloaded project: importing it leaves a mark (what its code could do instead).
MARKING = """
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("metric.py ran")

def score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    return float(named), {"feedback": "right" if named else "name the capital"}
"""


@pytest.fixture(scope="module")
def server():
    from skynet.testing.server import ScriptedServer

    s = ScriptedServer().start()
    s.responder = task_responder
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def marked(server, tmp_path_factory):
    """A project whose metric.py marks its import, with one run recorded (mark cleared)."""
    project = make_project(tmp_path_factory.mktemp("marked") / "p", server.url, budget=16)
    (project / "metric.py").write_text(MARKING)
    assert main(["-C", str(project), "run"]) == 0
    assert (project / "IMPORTED").exists()  # the run imports it: the mark works
    (project / "IMPORTED").unlink()
    with RunStore(runs_db_path(project)) as store:
        run = store.latest_run()
    return project, run.id, run.metric_hash


def _viewer_pages(project: Path, run_id: str) -> dict[str, str]:
    """Every page a `skynet view` process serves for the run, fetched with its secret."""
    proc = subprocess.Popen(
        [*SKYNET, "-C", str(project), "view", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        found = re.match(r"Skynet viewer: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
        assert found is not None, line + proc.stderr.read()
        origin, token = found.groups()
        cookie = f"skynet-view-{origin.rsplit(':', 1)[1]}={token}"
        pages = {}
        for path in ("/", f"/run/{run_id}", f"/run/{run_id}/stamp", f"/compare/{run_id}/{run_id}"):
            status, body = _get(origin + path, cookie=cookie)
            assert status == 200, (path, body[:300])
            pages[path] = body
        return pages
    finally:
        proc.send_signal(2)
        proc.communicate(timeout=10)


def _get(url: str, cookie: str = "") -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# --------------------------------------------------------------------------------------------
# Reading never executes the project's code.


@pytest.mark.slow
def test_reading_runs_never_imports_metric_py(marked, tmp_path, capsys):
    project, run_id, recorded = marked
    mark = project / "IMPORTED"
    from skynet.project import current_metric_hash

    # The reader's hash of the unchanged file is the run's: nothing is stale.
    assert current_metric_hash(project) == recorded
    assert main(["-C", str(project), "show", run_id]) == 0
    assert main(["-C", str(project), "show", run_id, "--html", str(tmp_path / "r.html")]) == 0
    assert main(["-C", str(project), "runs"]) == 0
    shown = capsys.readouterr().out
    assert run_id in shown and "Stale" not in shown
    pages = _viewer_pages(project, run_id)
    assert "Stale" not in pages[f"/run/{run_id}"]
    assert not mark.exists(), "reading the runs ran metric.py"

    # Edited: the readers say the results are stale, still without importing it.
    (project / "metric.py").write_text(MARKING + "\n# edited\n")
    try:
        assert current_metric_hash(project) not in (None, recorded)
        assert main(["-C", str(project), "show", run_id]) == 0
        assert "Stale:" in capsys.readouterr().out
        assert "Stale:" in _viewer_pages(project, run_id)[f"/run/{run_id}"]
        assert not mark.exists(), "reading the runs ran metric.py"
    finally:
        (project / "metric.py").write_text(MARKING)


def test_control_the_importing_route_runs_metric_py(marked):
    # The route readers took before: the project's metric, loaded (imported) to ask its hash.
    from skynet.config import load_config
    from skynet.data import load_dataset
    from skynet.project import _project_metric

    project, _, recorded = marked
    config = load_config(project)
    try:
        metric = _project_metric(project, config, load_dataset(config), verified=False)
        assert (project / "IMPORTED").exists()
        assert metric.source_hash == recorded  # the same hash, from the same bytes
    finally:
        (project / "IMPORTED").unlink(missing_ok=True)


@pytest.mark.slow
def test_a_metric_that_exits_on_import_does_not_stop_show(server, tmp_path, capsys):
    project = make_project(tmp_path / "p", server.url, budget=16)
    assert main(["-C", str(project), "run"]) == 0
    metric = project / "metric.py"
    metric.write_text("raise SystemExit(7)\n" + metric.read_text())
    capsys.readouterr()
    assert main(["-C", str(project), "show"]) == 0
    out = capsys.readouterr().out
    assert "Stale:" in out  # the file changed: said, without running it
    with RunStore(runs_db_path(project)) as store:
        run_id = store.latest_run().id
    assert "Stale:" in _viewer_pages(project, run_id)[f"/run/{run_id}"]


# --------------------------------------------------------------------------------------------
# The viewer's secret.


@pytest.fixture(scope="module")
def served(marked):
    project, run_id, _ = marked
    store = RunStore(runs_db_path(project))
    out = io.StringIO()
    server = serve(Viewer(store, project_dir=project), port=0, out=out)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    found = re.match(r"Skynet viewer: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", out.getvalue())
    assert found is not None, out.getvalue()
    with RunStore(runs_db_path(project)) as s:
        seq = s.call_rows(run_id)[0].seq
    routes = [
        "/",
        f"/run/{run_id}",
        f"/run/{run_id}?a=x&b=y",
        f"/run/{run_id}/stamp",
        f"/run/{run_id}/call/{seq}",
        f"/compare/{run_id}/{run_id}",
        f"/compare?a={run_id}&b={run_id}",
    ]
    try:
        yield found.group(1), found.group(2), routes
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        store.close()


def test_every_route_needs_the_secret(served):
    origin, token, routes = served
    cookie = f"skynet-view-{origin.rsplit(':', 1)[1]}={token}"
    for path in [*routes, "/nothing-here", "//evil.example/"]:
        status, body = _get(origin + path)
        assert status == 403, path
        assert "Open the URL skynet view printed" in body
        assert _get(origin + path, cookie=cookie.replace(token, token[:-2] + "xx"))[0] == 403
        sep = "&" if "?" in path else "?"
        assert _get(f"{origin}{path}{sep}token=wrong")[0] == 403
    for path in routes:
        assert _get(origin + path, cookie=cookie)[0] == 200, path
    # Another viewer's cookie (another port's name) does not pass either.
    assert _get(origin + "/", cookie=f"skynet-view-1={token}")[0] == 403


def test_the_printed_url_sets_the_cookie_and_leaves_the_secret_out_of_the_address(served):
    origin, token, _ = served

    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None  # look at the redirect itself

    opener = urllib.request.build_opener(Keep)
    for path, location in [
        (f"/?token={token}", "/"),
        (f"/run/r1?a=1&token={token}&b=2", "/run/r1?a=1&b=2"),
        (f"//evil.example/?token={token}", None),  # never another host
    ]:
        with pytest.raises(urllib.error.HTTPError) as err:
            opener.open(origin + path, timeout=10)
        assert err.value.code == 303
        went = err.value.headers["Location"]
        assert went == location if location else went.startswith("/") and went[1:2] != "/"
        set_cookie = err.value.headers["Set-Cookie"]
        assert set_cookie.startswith(f"skynet-view-{origin.rsplit(':', 1)[1]}={token};")
        assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie


def _as_other_account(script: str, *args: str) -> list[int]:
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-I"]
        + ["-c", script, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


_FETCH_ALL = """
import json, sys, urllib.request, urllib.error
origin, token, paths = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
codes = []
for p in paths:
    url = origin + p + ((("&" if "?" in p else "?") + "token=" + token) if token else "")
    try:
        codes.append(opener.open(url, timeout=10).status)
    except urllib.error.HTTPError as exc:
        codes.append(exc.code)
print(json.dumps(codes))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or not Path("/usr/bin/python3").exists(),
    reason="needs root and setpriv to act as another local account",
)
def test_another_local_account_is_refused_every_route(served):
    origin, token, routes = served
    codes = _as_other_account(_FETCH_ALL, origin, "", json.dumps(routes))
    assert codes == [403] * len(routes)
    # Control: the same account, given the secret, reads every route (so the refusal above is
    # the secret's, not the account's lack of a way to the port).
    codes = _as_other_account(_FETCH_ALL, origin, token, json.dumps(routes))
    assert codes == [200] * len(routes)


# --------------------------------------------------------------------------------------------
# Ray's copy of the project (executor = "ray", a local Ray).


def _ray_copies(roots: list[Path], secret: str) -> list[Path]:
    """Files under Ray's temp folders that hold this project's metric.py (by its secret line)."""
    found = []
    for root in roots:
        for path in root.glob("**/working_dir_files/**/metric.py"):
            try:
                if secret in path.read_text():
                    found.append(path)
            except OSError:
                pass
    return found


def _others_can_read(path: Path) -> bool:
    """Whether an account that is neither owner nor group could read `path`: every folder above
    it enterable by others, and the file readable by them."""
    if not path.stat().st_mode & 0o004:
        return False
    return all(p.stat().st_mode & 0o001 for p in path.parents)


def _ray_roots() -> list[Path]:
    import tempfile

    base = Path(tempfile.gettempdir())
    return [p for p in base.iterdir() if p.name == "ray" or p.name.startswith("skynet-ray-")]


@pytest.mark.slow
@pytest.mark.parametrize("private", [True, False], ids=["defended", "control"])
def test_ray_leaves_no_readable_copy_of_the_project(server, tmp_path, capsys, monkeypatch, private):
    pytest.importorskip("ray")
    import uuid

    from skynet.executors import ray as ray_executor

    monkeypatch.setattr(ray_executor, "_PROTECT_COPIES", private)
    project = make_project(tmp_path / "p", server.url, budget=16)
    toml = (project / "skynet.toml").read_text()
    (project / "skynet.toml").write_text(
        toml.replace("[engine]\n", '[engine]\nexecutor = "ray"\nworkers = 1\n', 1)
    )
    secret = f"# {uuid.uuid4().hex}\n"
    (project / "metric.py").write_text((project / "metric.py").read_text() + secret)
    os.chmod(project, 0o700)
    before = set(_ray_roots())
    seen: dict[str, int] = {}  # during the run: the modes of Ray's copy and its temp folder

    def respond(body):
        if not seen:
            for copy in _ray_copies(_ray_roots(), secret):
                root = next(r for r in _ray_roots() if r in copy.parents)
                seen.update(copy=copy.parent.stat().st_mode & 0o777, root=root.stat().st_mode)
        return task_responder(body)

    server.responder = respond
    try:
        assert main(["-C", str(project), "run"]) == 0
        left = _ray_copies(_ray_roots(), secret)
        if private:
            # While it ran: the copy had the project's mode (each actor sets it, on a cluster
            # too) and sat in a temp folder only this account enters.
            assert seen["copy"] == 0o700 and seen["root"] & 0o777 == 0o700, seen
            assert left == [], f"Ray left the project behind: {left}"
            assert set(_ray_roots()) <= before  # its private temp folder is gone
        else:
            # Control: Ray's own temp folder keeps a copy any account can read.
            assert left and all(_others_can_read(p) for p in left), left
    finally:
        server.responder = task_responder
        for path in _ray_copies(_ray_roots(), secret):  # the control's leftovers: its session
            session = next(p for p in path.parents if p.name.startswith("session_"))
            shutil.rmtree(session, ignore_errors=True)
