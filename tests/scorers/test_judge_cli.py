"""The judge from the command line: collect a blind sample of a run's outputs, label it, validate
the judge, run with metric = "judge", and show its raw and PPI-corrected accuracy."""

from __future__ import annotations

import json
import re

import pytest
from projects import CAPITAL, make_project, task_responder
from test_judge import judge_responder

from skynet.cli import main
from skynet.runs import RunStore
from skynet.runs.report import summarize
from skynet.scorers import judge_ppi
from skynet.scorers.judge import JudgeValidation

JUDGE = """
[judge]
instructions = "Does the output name the same capital city as the reference?"
validation = "judge-validation.json"

[judge.thresholds]
min_n = 10
"""


def responder(body):
    system = body["messages"][0]["content"] if body["messages"] else ""
    if "GRADE: <grade>" in system:  # a judge call
        return judge_responder(body)
    return task_responder(body)


@pytest.fixture
def project(tmp_path, scripted_server):
    scripted_server.responder = responder
    root = make_project(tmp_path / "p", scripted_server.url, budget=40)
    with open(root / "skynet.toml", "a") as f:
        f.write(JUDGE)
    return root


def use_judge(root):
    """Score runs with the judge: `metric = "judge"` goes before the first table."""
    text = (root / "skynet.toml").read_text()
    (root / "skynet.toml").write_text('metric = "judge"\n' + text)


def label(path):
    """A person's labels: right when the output names the item's capital."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        assert row["human"] is None
        row["human"] = CAPITAL[row["input"]["country"]].lower() in row["output"].lower()
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


@pytest.mark.slow
def test_collect_label_validate_run_and_show(project, capsys):
    assert main(["-C", str(project), "run"]) == 0  # scored by metric.py
    capsys.readouterr()
    assert main(["-C", str(project), "judge", "collect", "--n", "50", "--seed", "1"]) == 0
    said = capsys.readouterr().out
    labels = project / "labels.jsonl"
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert 10 <= len(rows) <= 50 and f"wrote {len(rows)} output(s)" in said
    for row in rows:
        assert set(row) == {"id", "input", "output", "reference", "human"}  # no judge verdict
        assert row["reference"] == CAPITAL[row["input"]["country"]]
    assert len({(r["id"], r["output"]) for r in rows}) == len(rows)
    assert main(["-C", str(project), "judge", "collect"]) == 2  # it would overwrite labels
    assert "already exists" in capsys.readouterr().err

    labelled = label(labels)
    assert {r["human"] for r in labelled} == {True, False}
    assert main(["-C", str(project), "judge", "validate", "--labels", "labels.jsonl"]) == 0
    said = capsys.readouterr().out
    assert "passes (n >= 10, accuracy >= 0.8, kappa >= 0.6)" in said
    record = JudgeValidation.load(project / "judge-validation.json")
    assert record.n == len(rows) and record.accuracy == 1.0 and record.kappa == 1.0
    assert [h for _, h in record.pairs] == [r["human"] for r in labelled]
    assert f"accuracy           {record.accuracy}" in said

    use_judge(project)
    assert main(["-C", str(project), "check"]) == 0
    assert "self-test passed" in capsys.readouterr().out
    assert main(["-C", str(project), "run"]) == 0
    capsys.readouterr()
    assert main(["-C", str(project), "show"]) == 0
    shown = capsys.readouterr().out
    assert "Judge accuracy" in shown

    store = RunStore(project / ".skynet" / "runs.db")
    run = store.latest_run()
    assert run.config["metric"]["name"] == "judge"
    judged = [e for e in store.evaluations(run.id) if e.error is None]
    assert judged and {e.extra["outcome"] for e in judged} <= {"right", "wrong"}
    cost = store.cost_by_role(run.id)
    # Judging is recorded on its own role. `validate` and `check` already paid for these
    # verdicts, so the run reuses them from the call cache: each is recorded, and its tokens,
    # which were not sent again, count nothing (the report's tokens are what was sent).
    judge_calls = [c for c in store.calls(run.id) if c.role == "metric"]
    assert judge_calls and len(judge_calls) == cost["metric"].calls and cost["task"].calls > 0
    sent = [c for c in judge_calls if c.ok and not c.cached]
    assert cost["metric"].cached_calls == len(judge_calls) - len(sent) > 0
    assert cost["metric"].input_tokens == sum(c.input_tokens for c in sent)
    summary = summarize(store, run.id, project_dir=project)
    best = summary.best
    decisions = [e.score == 1.0 for e in judged if e.candidate_id == best.id and e.split == "val"]
    want = judge_ppi(decisions, record.judge_decisions, record.human_labels)
    line = next(
        text for text in shown.splitlines() if text.strip().startswith("best") and " val " in text
    )
    assert f"{want.judge_raw:.3f}" in line and f"{want.estimate:.3f}" in line
    assert f"[{want.low:.3f}, {want.high:.3f}]" in line
    assert best.val_score == pytest.approx(want.judge_raw)


def test_without_a_valid_record_the_project_refuses_with_exit_2_and_one_line(project, capsys):
    use_judge(project)
    assert main(["-C", str(project), "check"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("skynet: error: ") and "judge-validation.json: no judge validation" in err
    assert "skynet judge collect" in err and "skynet judge validate --labels FILE" in err

    # A record made for another judge configuration is refused too.
    from skynet.scorers import judge_config, judge_validate

    other = judge_config("openai/skynet-test", "Something else")
    judge_validate(other, [(True, True), (False, False)] * 20).save(
        project / "judge-validation.json"
    )
    assert main(["-C", str(project), "run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(r"made for judge config [0-9a-f]{12}, not this one", err)


def test_validate_names_the_line_of_an_unlabelled_row(project, capsys):
    lines = [
        {"id": "c0", "input": {"country": "France"}, "output": "Paris", "reference": "Paris",
         "human": True},
        {"id": "c1", "input": {"country": "Japan"}, "output": "Kyoto", "reference": "Tokyo",
         "human": None},
    ]  # fmt: skip
    (project / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert main(["-C", str(project), "judge", "validate", "--labels", "labels.jsonl"]) == 2
    err = capsys.readouterr().err
    assert 'labels.jsonl:2: "human" is null' in err and "item 'c1'" in err
    assert not (project / "judge-validation.json").exists()


@pytest.mark.slow
def test_a_judge_that_disagrees_with_people_does_not_pass(project, capsys):
    assert main(["-C", str(project), "run"]) == 0
    assert main(["-C", str(project), "judge", "collect"]) == 0
    labels = project / "labels.jsonl"
    rows = label(labels)
    for row in rows:
        row["human"] = not row["human"]  # people who disagree with the judge on every item
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows))
    capsys.readouterr()
    assert main(["-C", str(project), "judge", "validate", "--labels", str(labels)]) == 2
    out = capsys.readouterr().out
    assert "does not pass" in out and "accuracy 0.000 is below 0.8" in out
    use_judge(project)
    assert main(["-C", str(project), "check"]) == 2
    assert "accuracy 0.000 is below 0.8" in capsys.readouterr().err


@pytest.mark.slow
def test_a_judge_scored_run_headlines_the_gain_corrected_for_the_judges_error(project, capsys):
    """With metric = "judge", the run's test gain is in true accuracy: the judge's paired gain
    divided by its tpr + tnr - 1 on the validation record's labels, the interval widened for
    that measure's own error (skynet.gain.judge_gain); the judge's own figure stands beside it."""
    from skynet.gain import judge_gain, paired_gain
    from skynet.mean import paired_scores

    rows = [json.loads(line) for line in (project / "data.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):  # 6 train, 5 val, 5 test items
        row["split"] = ("train", "val", "test")[i % 3]
    (project / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["-C", str(project), "run"]) == 0
    assert main(["-C", str(project), "judge", "collect", "--n", "50", "--seed", "1"]) == 0
    labels = project / "labels.jsonl"
    rows = label(labels)
    # The person disagrees with the (always right) judge on one right and one wrong output: the
    # judge then errs on the record (tpr, tnr < 1) and still passes its thresholds.
    flip = [next(i for i, r in enumerate(rows) if r["human"] is want) for want in (True, False)]
    for i in flip:
        rows[i]["human"] = not rows[i]["human"]
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["-C", str(project), "judge", "validate", "--labels", "labels.jsonl"]) == 0
    record = JudgeValidation.load(project / "judge-validation.json")
    assert 0 < record.accuracy < 1
    use_judge(project)
    capsys.readouterr()
    assert main(["-C", str(project), "run"]) == 0
    shown = capsys.readouterr().out

    store = RunStore(project / ".skynet" / "runs.db")
    summary = summarize(store, store.latest_run().id, project_dir=project)
    gain = summary.gain
    assert gain is not None and gain.n > 0 and summary.best.id != summary.seed.id
    evals = [e for e in store.evaluations(summary.run.id) if e.split == "test"]

    def outcomes(cid):
        return {
            e.item_id: (e.score, e.error_kind, e.error is None)
            for e in evals
            if e.candidate_id == cid
        }

    _, a, b = paired_scores(outcomes(summary.seed.id), outcomes(summary.best.id))
    raw = paired_gain(a, b, split="test")
    want = judge_gain(a, b, record.pairs, split="test", val_estimate=gain.val_estimate)
    assert gain == want and gain.raw_estimate == raw.estimate
    judge, human = record.judge_decisions, record.human_labels
    tpr = sum(j and h for j, h in zip(judge, human, strict=True)) / sum(human)
    tnr = sum(not j and not h for j, h in zip(judge, human, strict=True)) / (
        len(human) - sum(human)
    )
    assert tpr < 1 and tnr < 1
    assert gain.estimate == pytest.approx(min(1.0, raw.estimate / (tpr + tnr - 1)))
    assert gain.p_value == raw.p_value  # McNemar on the judge's decisions: exact as it is
    assert gain.high - gain.low > raw.high - raw.low  # the judge's error widens it
    assert "the judge's error corrected: the judge's own figure" in shown
    assert f"{raw.estimate:+.3f}" in shown
    store.close()
    capsys.readouterr()
    assert main(["-C", str(project), "show", "--json"]) == 0
    shown_json = json.loads(capsys.readouterr().out)
    assert shown_json["gain"]["raw_estimate"] == raw.estimate
    # `skynet eval --against` measures the same way: the two sides scored again (cached) on
    # test, the judge's error corrected.
    assert main(["-C", str(project), "eval", "--candidate", "best", "--against", "seed"]) == 0
    said = capsys.readouterr().out
    assert f"minus seed ({summary.seed.id}) on test: {gain.describe()}" in said
    assert "tpr + tnr - 1 = " in said
