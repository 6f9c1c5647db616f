"""skynet.optimize(train=...) with no val= (issue 28): as gepa.optimize and dspy.GEPA.compile
take valset=None, the train rows serve as val too. Each val item is a copy of a train item
under the id "val:" + its id (an item id names one split in the run records); one line at the
start and one in the report say that the val figure is then a train figure, not held out."""

from __future__ import annotations

import io
import json

import pytest
from artifacts.test_dspy_runs import CAPITAL, responder
from projects import BETTER, task_responder
from test_python_api import SEED, TRAIN, VAL, _evaluations, _tables, score

import skynet
from skynet.api import TRAIN_AS_VAL
from skynet.cli import main
from skynet.data import are_val_copies
from skynet.runs.report import NO_TEST_SPLIT, VAL_FROM_TRAIN
from skynet.runs.store import RunStore

PROMPT = dict(inputs=["country"], outputs=["capital"], user="Country: {country}")


def _records(db) -> tuple[dict[str, tuple], set[str], str]:
    """The run's items (id -> split, input, expected), the items the seed was scored on in
    val, and the seed's id."""
    with RunStore(db, readonly=True) as store:
        run = store.list_runs()[-1]  # the first recorded
        items = {
            row.item_id: (row.split, row.input, row.expected)
            for row in store.items(run.id).values()
        }
        seed = run.seed_candidate_id
        scored = {e.item_id for e in store.evaluations(run.id, candidate_id=seed, split="val")}
    return items, scored, seed


def _split(items: dict[str, tuple], name: str) -> set[str]:
    return {item for item, (split, *_) in items.items() if split == name}


def test_train_alone_serves_as_val_and_the_run_and_report_say_so(
    tmp_path, scripted_server, monkeypatch, capsys
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    progress = io.StringIO()
    result = skynet.optimize(
        SEED, metric=score, train=TRAIN, out=progress, **PROMPT, **_tables(scripted_server.url)
    )
    assert (result.status, result.best) == ("finished", BETTER)
    assert (result.baseline_score, result.best_score) == (0.0, 1.0)
    assert progress.getvalue().count(TRAIN_AS_VAL) == 1

    # Val is the train rows again: each a copy under "val:" + its id, with the same input and
    # expected answer; the seed was scored on every copy, as gepa scores its valset.
    items, scored, _ = _records(result.store / "runs.db")
    train = {row["id"] for row in TRAIN}
    assert _split(items, "train") == train and _split(items, "test") == set()
    assert _split(items, "val") == {f"val:{i}" for i in train} == scored
    assert all(items[f"val:{i}"][1:] == items[i][1:] for i in train)

    # The report says it once, beside the existing "no test split" wording (nothing held out).
    report = result.report()
    assert report.count(VAL_FROM_TRAIN.strip()) == 1, report
    assert NO_TEST_SPLIT in report
    capsys.readouterr()
    assert main(["-C", str(tmp_path), "show", result.run_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["val_from_train"] is True
    assert shown["items"] == {"val": len(TRAIN), "test": 0}
    assert shown["gain"] is None and shown["confirmation"]["state"] == "no test split"

    # A new metric rescores the val copies from the train rows given: no item is gone.
    def strict(input, output, expected=None):
        short = len(output) <= 20
        return float(short and score(input, output, expected)[0]), {"feedback": "be short"}

    done = skynet.rescore(result.run_id, metric=strict, data=TRAIN)
    assert (done.items_gone, done.metric_errors) == (0, 0)
    assert done.rescored == len(_evaluations(result.store / "runs.db")) - done.rescored


def test_a_run_given_val_says_nothing_of_it(tmp_path, scripted_server):
    scripted_server.responder = task_responder
    progress = io.StringIO()
    result = skynet.optimize(
        SEED,
        metric=score,
        train=TRAIN,
        val=VAL,
        out=progress,
        store=tmp_path / "s",
        **PROMPT,
        **_tables(scripted_server.url),
    )
    assert result.best == BETTER
    assert TRAIN_AS_VAL not in progress.getvalue()
    assert VAL_FROM_TRAIN.strip() not in result.report()
    assert skynet.runs.report.summary_json(result._summary())["val_from_train"] is False


@pytest.mark.slow
def test_with_test_rows_the_gain_is_on_test_and_the_val_line_stays(tmp_path, scripted_server):
    scripted_server.responder = task_responder
    result = skynet.optimize(
        SEED,
        metric=score,
        train=TRAIN,
        test=VAL,
        out=io.StringIO(),
        store=tmp_path / "s",
        **PROMPT,
        **_tables(scripted_server.url),
    )
    report = result.report()
    assert "Gain on held-out test items (best - seed, paired): +1.000" in report, report
    assert VAL_FROM_TRAIN.strip() in report and NO_TEST_SPLIT not in report
    items, _, _ = _records(result.store / "runs.db")
    assert _split(items, "test") == {row["id"] for row in VAL}
    assert len(_split(items, "val")) == len(TRAIN)


@pytest.mark.slow
def test_a_run_made_without_val_resumes(tmp_path, scripted_server, monkeypatch):
    from runs.test_resume_outage import Outage

    # The val copies' prompts are the train items' (cached): the outage comes late enough to
    # fall inside the search all the same.
    outage = Outage(after=10)
    scripted_server.responder = outage
    monkeypatch.chdir(tmp_path)
    common = dict(metric=score, train=TRAIN, **PROMPT)
    with pytest.raises(skynet.RunAborted, match="evaluations failed"):
        skynet.optimize(SEED, out=io.StringIO(), **common, **_tables(scripted_server.url))
    before, _, _ = _records(tmp_path / ".skynet" / "runs.db")
    outage.down = False
    paid = scripted_server.request_count
    progress = io.StringIO()
    result = skynet.resume(_run_id(tmp_path), SEED, out=progress, **common)
    assert (result.status, result.best) == ("finished", BETTER), result.report()
    assert scripted_server.request_count > paid
    assert progress.getvalue().count(TRAIN_AS_VAL) == 1
    assert "resuming run" in progress.getvalue()  # the same data: the same val copies
    after, scored, _ = _records(result.store / "runs.db")
    assert after == before and scored == _split(after, "val")
    assert VAL_FROM_TRAIN.strip() in result.report()


def _run_id(folder) -> str:
    with RunStore(folder / ".skynet" / "runs.db", readonly=True) as store:
        (run,) = [r.id for r in store.list_runs()]
    return run


@pytest.mark.parametrize("engine", ["gepa", "dspy-gepa"])
def test_a_dspy_program_with_a_trainset_only(tmp_path, scripted_server, engine):
    import dspy

    scripted_server.responder = responder
    examples = [
        dspy.Example(country=country, answer=capital).with_inputs("country")
        for country, capital in CAPITAL.items()
    ]

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        right = pred.answer == gold.answer
        return dspy.Prediction(score=float(right), feedback="right" if right else "say it")

    progress = io.StringIO()
    tables = _tables(scripted_server.url, budget=40)
    result = skynet.optimize(
        dspy.Predict("country -> answer"),
        metric=metric,
        train=examples,
        out=progress,
        store=tmp_path / "s",
        **{**tables, "engine": {"name": engine}},
    )
    assert isinstance(result.best, dspy.Module)
    assert result.best.signature.instructions == BETTER
    assert (result.baseline_score, result.best_score) == (0.0, 1.0)
    assert progress.getvalue().count(TRAIN_AS_VAL) == 1
    items, scored, _ = _records(result.store / "runs.db")
    # No id column: each train item's id is its content's; its val copy is "val:" + that.
    assert _split(items, "val") == {f"val:{i}" for i in _split(items, "train")} == scored
    assert len(scored) == len(examples)


def test_a_train_id_that_a_val_copy_would_take_is_refused(tmp_path, scripted_server):
    rows = [*TRAIN, {**TRAIN[0], "id": f"val:{TRAIN[0]['id']}", "country": "Atlantis"}]
    with pytest.raises(skynet.DatasetError) as raised:
        skynet.optimize(
            SEED, metric=score, train=rows, store=tmp_path / "s", **PROMPT,
            **_tables(scripted_server.url),
        )  # fmt: skip
    message = str(raised.value)
    assert f"item id 'val:{TRAIN[0]['id']}'" in message and "give val= rows" in message
    assert "\n" not in message and scripted_server.request_count == 0


def test_val_copies_are_recognised_only_as_exact_copies():
    train = {"a": ({"q": 1}, {"x": 1}), "b": ({"q": 2}, {"x": 2})}
    copies = {f"val:{k}": v for k, v in train.items()}
    assert are_val_copies(train, copies)
    assert not are_val_copies(train, {})  # no val at all
    assert not are_val_copies(train, {"val:a": train["a"]})  # not every train item
    assert not are_val_copies(train, {**copies, "val:b": ({"q": 3}, {"x": 2})})  # other content
    assert not are_val_copies(train, {"a2": train["a"], "b2": train["b"]})  # other ids
