"""An evaluation's error type is recorded as data (issue 29): what a resume asks again is decided
on the exception's type, never on a traceback's text; errors recorded before m006 get their type
from their traceback's last line once, when the store migrates. A real outage and its resume:
tests/runs/test_resume_outage.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from test_store import new_run

from skynet import Result
from skynet.errors import ModelError, type_name
from skynet.evaluation import CANDIDATE_ERROR, METRIC_ERROR, TASK_ERROR
from skynet.runs import RunStore, runs_db_path
from skynet.session import transient

MODEL_ERROR_TB = (
    'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
    "skynet.errors.ModelError: model 'openai/x' failed after 3 attempts\n"
)


def test_the_traceback_text_decides_nothing():
    """A metric error whose traceback ends in words that read as a ModelError (an exception's
    text is anyone's to write) is not the model's failure: it stands."""
    written = Result(
        item_id="i1",
        error="score() raised ValueError",
        error_kind=METRIC_ERROR,
        traceback=MODEL_ERROR_TB,
        error_type="builtins.ValueError",
    )
    assert not transient(written)
    judge = Result(
        item_id="i1",
        error="a judge's model failed",
        error_kind=METRIC_ERROR,
        error_type=type_name(ModelError),
    )
    assert transient(judge)  # a judge inside the metric whose model call failed: asked again
    assert not transient(
        Result(
            item_id="i1", error="x", error_kind=CANDIDATE_ERROR, error_type=type_name(ModelError)
        )
    )


def test_the_type_round_trips_through_the_store_with_its_repetitions(tmp_path: Path):
    with RunStore(runs_db_path(tmp_path)) as store:
        run_id = new_run(store)
        store.add_candidate(run_id, "c0", {"instructions": "x"})
        failed = Result(
            item_id="i1",
            error="the artifact failed",
            error_kind=TASK_ERROR,
            traceback=MODEL_ERROR_TB,
            error_type=type_name(ModelError),
            repetitions=(
                Result(
                    item_id="i1", error="e", error_kind=TASK_ERROR, error_type="builtins.OSError"
                ),
            ),
        )
        store.record_evaluation(run_id, "c0", "val", failed, "m1")
        [row] = store.evaluations(run_id)
    back = row.result()
    assert back.error_type == type_name(ModelError) and transient(back)
    assert [r.error_type for r in back.repetitions] == ["builtins.OSError"]


def test_errors_recorded_before_m006_get_their_type_from_their_traceback(tmp_path: Path):
    path = runs_db_path(tmp_path)
    with RunStore(path) as store:
        run_id = new_run(store)
        store.add_candidate(run_id, "c0", {"instructions": "x"})
        for item_id, tb in (("i1", MODEL_ERROR_TB), ("i2", "")):
            store.record_evaluation(
                run_id,
                "c0",
                "val",
                Result(item_id=item_id, error="failed", error_kind=TASK_ERROR, traceback=tb),
                "m1",
            )
    # The store as a version before m006 left it: no error_type column, m006 not applied.
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE evaluations DROP COLUMN error_type")
        db.execute("DELETE FROM skynet_migrations WHERE name = 'm006_error_type'")
    with RunStore(path) as store:
        rows = {e.item_id: e for e in store.evaluations(run_id)}
    assert rows["i1"].error_type == "skynet.errors.ModelError" and transient(rows["i1"].result())
    assert rows["i2"].error_type is None and not transient(rows["i2"].result())
