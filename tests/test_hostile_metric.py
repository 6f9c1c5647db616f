"""A metric.py that exits, raises KeyboardInterrupt or prints: one line naming metric.py and what
it did at import and self-test time (exit 2), the item's metric error during a run (which goes
on), prints kept in the item's record and off the report's stdout; a real Ctrl-C still stops."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from projects import COUNTRIES, make_project, task_responder

from skynet.cli import main
from skynet.runs import RunStore
from skynet.runs.store import runs_db_path

# The scripted model answers "Peru is a country with a long history." to the seed prompt: no
# self-test output looks like that, so a metric keyed on it passes the self-test and misbehaves
# on one item of the run only.
GOOD = """
def score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    return float(named), {"feedback": "right" if named else "name the capital"}
"""


def _metric(body: str, *, head: str = "") -> str:
    """A metric.py that runs `body` first in score(), then scores like GOOD."""
    return textwrap.dedent(head) + textwrap.dedent(GOOD).replace(
        "    named =", textwrap.indent(textwrap.dedent(body), "    ") + "    named =", 1
    )


COUNTRY = {f"c{i}": country for i, (country, _) in enumerate(COUNTRIES)}  # make_project's ids


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def _runs(project: Path) -> list:
    path = runs_db_path(project)
    if not path.exists():
        return []
    with RunStore(path) as store:
        return store.list_runs()


@pytest.fixture
def project(tmp_path, scripted_server):
    """A project with one finished run (with the good metric)."""
    scripted_server.responder = task_responder
    root = make_project(tmp_path / "p", scripted_server.url, budget=20)
    assert main(["-C", str(root), "run"]) == 0
    return root


# (case, metric.py, what the one line names)
REFUSED = [
    (
        "sys.exit(0) at import",
        _metric("", head="import sys\nsys.exit(0)\n"),
        ("metric.py:2: importing the metric called sys.exit(0)", "must import cleanly"),
    ),
    (
        "sys.exit(3) in score()",
        _metric("import sys\nsys.exit(3)\n"),
        ("metric.py: score() called sys.exit(3) on item 'c", "(line ", "return a score instead"),
    ),
    (
        "sys.exit() in score()",
        _metric("raise SystemExit\n"),
        ("metric.py: score() called sys.exit() on item", "return a score instead"),
    ),
    (
        "KeyboardInterrupt in score()",
        _metric("raise KeyboardInterrupt\n"),
        ("metric.py: score() raised KeyboardInterrupt on item", "return a score instead"),
    ),
    (
        "sys.exit in key()",
        GOOD + "\n\ndef key(expected):\n    import sys\n    sys.exit('no key')\n",
        ("metric.py: key() called sys.exit('no key') for item", "key(expected) must return"),
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize(("case", "source", "names"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_metric_that_exits_is_one_line_before_anything_runs(
    project, capsys, command, case, source, names
):
    before = _runs(project)
    (project / "metric.py").write_text(source)
    capsys.readouterr()
    assert main(["-C", str(project), command]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    lines = _lines(err)
    assert len(lines) == 1, err
    assert lines[0].startswith("skynet: error: "), lines[0]
    for needle in names:
        assert needle in lines[0], (needle, lines[0])
    assert _runs(project) == before  # no new run, none left "running"; the old one as it was


# (case, what score() does on Peru's seed output, the recorded error names)
DURING_A_RUN = [
    ("sys.exit(3)", "import sys\nsys.exit(3)\n", "score() called sys.exit(3) on item 'c3'"),
    ("KeyboardInterrupt", "raise KeyboardInterrupt\n", "score() raised KeyboardInterrupt"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "act", "recorded"), DURING_A_RUN, ids=[r[0] for r in DURING_A_RUN]
)
def test_a_metric_that_exits_on_one_item_of_a_run_is_that_items_error(
    project, capsys, case, act, recorded
):
    before = _runs(project)
    body = 'print("scoring", input["country"])\nif output.startswith("Peru is a country"):\n'
    (project / "metric.py").write_text(_metric(body + textwrap.indent(act, "    ")))
    capsys.readouterr()
    assert main(["-C", str(project), "run"]) == 0  # the run goes on
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "scoring" not in err
    assert not [line for line in out.splitlines() if line.startswith("scoring")], out
    runs = _runs(project)
    assert runs[1:] == before and runs[0].status == "finished"
    with RunStore(runs_db_path(project)) as store:
        errors = [e for e in store.evaluations(runs[0].id) if e.error is not None]
    assert [(e.item_id, e.error_kind) for e in errors] == [("c3", "metric")], errors
    assert recorded in (errors[0].error or "") and "metric.py" in (errors[0].error or "")
    assert errors[0].extra.get("metric_stdout") == "scoring Peru\n"  # printed, then exited


@pytest.mark.slow
def test_what_score_prints_is_kept_per_item_and_not_in_the_report(project, capsys):
    before = _runs(project)
    (project / "metric.py").write_text(_metric('print("DEBUG", input["country"], output[:12])\n'))
    capsys.readouterr()
    assert main(["-C", str(project), "check"]) == 0
    out, err = capsys.readouterr()
    assert "DEBUG" not in out and "DEBUG" not in err
    assert main(["-C", str(project), "run"]) == 0
    out, err = capsys.readouterr()
    # The report quotes the first print on its "Metric output" line; no print is a line of its own.
    assert not [line for line in out.splitlines() if line.startswith("DEBUG")], out
    assert "DEBUG" not in err
    runs = _runs(project)
    assert runs[1:] == before
    with RunStore(runs_db_path(project)) as store:
        evaluations = store.evaluations(runs[0].id)
    assert evaluations
    for e in evaluations:
        # Each item's own print, never another thread's (the run scores 2 at a time).
        country = COUNTRY[e.item_id]
        assert e.extra["metric_stdout"] == f"DEBUG {country} {str(e.output)[:12]}\n", e
    assert main(["-C", str(project), "show"]) == 0
    shown = capsys.readouterr().out
    assert "Metric output: score() printed on" in shown
    assert "extra.metric_stdout" in shown


@pytest.mark.slow
def test_what_score_writes_to_stderr_is_kept_with_its_prints(project):
    # A print to stderr, and a warning (shown through sys.stderr), are the item's record too,
    # in the order written; neither reaches the terminal.
    body = (
        'import sys, warnings\nprint("OUT", input["country"])\n'
        'print("ERR", input["country"], file=sys.stderr)\n'
        'warnings.warn("WARNED " + input["country"], stacklevel=1)\n'
    )
    (project / "metric.py").write_text(_metric(body))
    # A process of its own: pytest records warnings itself instead of showing them on stderr.
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-m", "skynet.cli", "-C", str(project), "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    for word in ("OUT ", "ERR ", "WARNED"):
        assert not [line for line in out.splitlines() if line.startswith(word)], out
        assert word not in err, err
    with RunStore(runs_db_path(project)) as store:
        evaluations = store.evaluations(_runs(project)[0].id)
    warned = 0
    for e in evaluations:
        kept = e.extra["metric_stdout"]
        country = COUNTRY[e.item_id]
        assert kept.startswith(f"OUT {country}\nERR {country}\n"), kept
        warned += f"WARNED {country}" in kept  # shown once per country, as Python's filter does
    assert warned >= 1


@pytest.mark.slow
def test_a_long_print_is_cut_with_a_note(project, capsys):
    (project / "metric.py").write_text(_metric('print("x" * 10000)\n'))
    assert main(["-C", str(project), "run"]) == 0
    with RunStore(runs_db_path(project)) as store:
        kept = store.evaluations(_runs(project)[0].id)[0].extra["metric_stdout"]
    assert kept.startswith("x" * 4000) and "[cut: 6001 more character(s) printed]" in kept


@pytest.mark.slow
def test_a_real_ctrl_c_while_score_runs_still_stops_the_run(tmp_path, scripted_server):
    scripted_server.responder = task_responder
    root = make_project(tmp_path / "p", scripted_server.url, budget=40, concurrency=1)
    # Slow only on the run's outputs (not the self-test's): Ctrl-C lands while score() runs.
    (root / "metric.py").write_text(
        _metric('if "long history" in output:\n    import time\n    time.sleep(0.3)\n')
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", "-C", str(root), "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline, recorded = time.monotonic() + 90, 0
    while time.monotonic() < deadline and recorded < 2:
        time.sleep(0.1)
        try:
            with sqlite3.connect(runs_db_path(root)) as db:
                recorded = db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
        except sqlite3.OperationalError:
            pass
    time.sleep(0.1)  # inside the next score()'s sleep
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    with RunStore(runs_db_path(root)) as store:
        (run,) = store.list_runs()
        errors = [e for e in store.evaluations(run.id) if e.error is not None]
    assert run.status == "stopped" and run.error == "interrupted"
    assert errors == []  # the interrupt was not taken for the metric's
