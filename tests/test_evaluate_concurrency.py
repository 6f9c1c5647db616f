"""skynet.evaluate and `skynet eval` score rows [engine] concurrency at once (Python:
`concurrency=`), record exactly what one at a time records, show progress on `out=`, and return
a table (`EvalResult.table()`)."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time

import pytest
from projects import BETTER, COUNTRIES, make_project

import skynet
from skynet.cli import main
from skynet.runs import RunStore
from skynet.testing import reply

MODEL = "openai/skynet-test"
ROWS = [
    {"id": f"c{i}", "country": country, "capital": capital}
    for i, (country, capital) in enumerate(COUNTRIES[:8])
]
# Peru's capital is never named: one row scores 0, so scores differ per item.
WRONG = "Peru"


def score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    return float(named), {"feedback": "right" if named else f"say {expected['capital']}"}


class InFlight:
    """A responder naming the capital after `latency_s`, counting the requests in flight."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.most = 0
        self._now = 0
        self._lock = threading.Lock()

    def __call__(self, body):
        with self._lock:
            self._now += 1
            self.most = max(self.most, self._now)
        try:
            time.sleep(self.latency_s)
            country = body["messages"][-1]["content"].removeprefix("Country: ").strip()
            capital = dict(COUNTRIES).get(country, "?") if country != WRONG else "?"
            return reply(f"The capital of {country} is {capital}.")
        finally:
            with self._lock:
                self._now -= 1


def _models(server, **more) -> dict:
    return {"task": MODEL, "endpoints": {MODEL: {"api_base": server.url, "timeout_s": 10}}, **more}


def _evaluate(server, store, *, models=None, **kwargs):
    return skynet.evaluate(
        BETTER,
        metric=score,
        data=ROWS,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        models=models or _models(server),
        store=store,
        **kwargs,
    )


def _recorded(store_dir, run_id) -> dict[str, tuple]:
    """The run's evaluations by item, read through the run store."""
    store = RunStore(store_dir / "runs.db")
    try:
        rows = store.evaluations(run_id)
        return {r.item_id: (r.score, r.result().feedback, r.result().output) for r in rows}
    finally:
        store.close()


@pytest.mark.slow
def test_rows_are_in_flight_at_once_and_recorded_as_one_at_a_time(tmp_path, scripted_server):
    responder = InFlight(0.3)
    scripted_server.responder = responder
    wide = _evaluate(scripted_server, tmp_path / "wide", concurrency=4, out=io.StringIO())
    assert 1 < responder.most <= 4  # several rows at once, never more than asked
    responder.most = 0
    one = _evaluate(scripted_server, tmp_path / "one", concurrency=1, out=io.StringIO())
    assert responder.most == 1
    # Same results in the data's order, same records (order-independent), same mean.
    assert [r.item_id for r in wide.results] == [row["id"] for row in ROWS]
    assert [(r.item_id, r.score, r.output) for r in wide.results] == [
        (r.item_id, r.score, r.output) for r in one.results
    ]
    recorded = _recorded(tmp_path / "wide", wide.run_id)
    assert recorded == _recorded(tmp_path / "one", one.run_id)
    assert len(recorded) == len(ROWS) and recorded["c3"][0] == 0.0  # Peru
    assert wide.mean == one.mean == 7 / 8


@pytest.mark.slow
def test_the_cli_eval_runs_at_the_projects_concurrency(tmp_path, scripted_server):
    responder = InFlight(0.3)
    scripted_server.responder = responder
    project = make_project(tmp_path / "p", scripted_server.url, concurrency=4)
    assert main(["-C", str(project), "eval", "--candidate", "seed", "--split", "val"]) == 0
    assert 1 < responder.most <= 4


# (case, pandas importable)
TABLES = [("a DataFrame with pandas", True), ("a list of dicts without pandas", False)]


@pytest.mark.parametrize(("case", "pandas"), TABLES, ids=[c[0] for c in TABLES])
def test_the_table_has_one_row_per_item(tmp_path, scripted_server, monkeypatch, case, pandas):
    scripted_server.responder = InFlight(0.0)
    ev = _evaluate(scripted_server, tmp_path / "s", out=io.StringIO())
    if not pandas:
        monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    table = ev.table()
    rows = table.to_dict("records") if pandas else table
    assert type(table).__name__ == ("DataFrame" if pandas else "list")
    assert [row["id"] for row in rows] == [row["id"] for row in ROWS]
    expected = {"id", "split", "input.country", "expected.capital", "output", "score"}
    expected |= {"feedback", "error", "error_kind", "model_calls", "cost_usd", "elapsed_ms"}
    assert set(rows[0]) == expected
    peru = next(row for row in rows if row["input.country"] == WRONG)
    assert (peru["score"], peru["feedback"], peru["split"]) == (0.0, "say Lima", "test")
    assert rows[0]["output"] == "The capital of France is Paris." and rows[0]["model_calls"] == 1


def test_progress_goes_to_out(tmp_path, scripted_server):
    scripted_server.responder = InFlight(0.0)
    out = io.StringIO()
    _evaluate(scripted_server, tmp_path / "s", concurrency=4, out=out)
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("evaluated ") for line in lines)
    # No price given for the model: its cost shows as unknown, as in the report.
    assert lines[-1] == "evaluated 8/8 · mean 0.875 · cost task unpriced metric $0.0000"


@pytest.mark.slow
def test_ctrl_c_keeps_every_finished_row(tmp_path, scripted_server):
    """Ctrl-C while rows are in flight: those in flight finish and are recorded with those done
    before, the rows not started are not, and the run is marked stopped."""
    responder = InFlight(0.3)
    # Ctrl-C while the second pair of rows is in flight, timed from the first request.
    timer = threading.Timer(0.45, os.kill, (os.getpid(), signal.SIGINT))

    first = threading.Lock()

    def respond(body):
        if first.acquire(blocking=False):  # once, however many requests arrive together
            timer.start()
        return responder(body)

    scripted_server.responder = respond
    try:
        with pytest.raises(KeyboardInterrupt):
            _evaluate(scripted_server, tmp_path / "s", concurrency=2, out=io.StringIO())
    finally:
        timer.cancel()
    store = RunStore(tmp_path / "s" / "runs.db")
    try:
        (run,) = store.list_runs()
        rows = store.evaluations(run.id)
        assert run.status == "stopped"
    finally:
        store.close()
    assert 0 < len(rows) < len(ROWS)
    assert len(rows) == scripted_server.request_count  # every row sent (in flight too) recorded
    assert all(r.result().ok for r in rows)


def test_a_budget_stop_keeps_every_finished_row(tmp_path, scripted_server):
    """Each call reserves its most ($0.109 here) first: at most 5 calls fit in $0.2, fewer when
    two are in flight at once. The rows scored are recorded, and the run says why it stopped."""
    scripted_server.responder = InFlight(0.05)
    models = _models(
        scripted_server, prices={MODEL: {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}
    )
    ev = _evaluate(
        scripted_server,
        tmp_path / "s",
        models=models,
        artifact={"max_tokens": 16},
        budget={"max_cost_usd": 0.2},
        concurrency=2,
        out=io.StringIO(),
    )
    assert ev.stopped_by and 0 < len(ev.results) < len(ROWS)
    recorded = _recorded(tmp_path / "s", ev.run_id)
    assert set(recorded) == {r.item_id for r in ev.results}
    store = RunStore(tmp_path / "s" / "runs.db")
    try:
        assert store.get_run(ev.run_id).status == "stopped"
    finally:
        store.close()


# (case, concurrency): refused before anything is recorded, naming concurrency=.
BAD = [("zero", 0), ("negative", -2), ("a float", 1.5), ("a bool", True), ("a string", "4")]


@pytest.mark.parametrize(("case", "concurrency"), BAD, ids=[c[0] for c in BAD])
def test_a_bad_concurrency_is_refused(tmp_path, scripted_server, case, concurrency):
    with pytest.raises(skynet.ConfigError, match=r"skynet\.evaluate\(\): concurrency=.* >= 1"):
        _evaluate(scripted_server, tmp_path / "s", concurrency=concurrency)
    assert scripted_server.request_count == 0 and not (tmp_path / "s" / "runs.db").exists()
