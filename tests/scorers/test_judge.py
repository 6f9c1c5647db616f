"""The validated LLM judge: configuration, validation records, the judge scorer against a scripted
judge on the loopback server (every outcome, cache, cost, governor), and the exact scorer."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, recall_score

import skynet
from skynet import ConfigError, DatasetError, Item, JudgeUnvalidated, MetricError, scorers
from skynet.contract import Metric
from skynet.evaluation import Evaluation
from skynet.models.governor import Governor
from skynet.scorers import Reply, judge_config, judge_scorer, judge_valid, judge_validate
from skynet.scorers.judge import (
    JUDGE_FAILED,
    JUDGE_UNRESOLVED,
    RIGHT,
    WRONG,
    JudgeThresholds,
    JudgeValidation,
    judge_problems,
    parse_grade,
)
from skynet.testing import MODEL, ScriptedServer, fail, reply

CONFIG = judge_config(MODEL, "Is the output the same city as the reference?")
# A record the default thresholds accept: 40 items, 36 agreements, both classes on both sides.
GOOD_PAIRS = [(True, True)] * 18 + [(False, False)] * 18 + [(True, False)] * 2 + [(False, True)] * 2


def good_record(config=CONFIG):
    return judge_validate(config, GOOD_PAIRS)


def item(answer, id="i1", country="France"):
    return Item(id, {"country": country}, {"capital": answer})


# -- the scripted judge ----------------------------------------------------------------------------

_OUTPUT = re.compile(r"Output to grade:\n<<<OUTPUT-(\w+)>>>\n(.*?)\n<<<END-\1>>>", re.S)
_REFERENCE = re.compile(r"Reference answer\(s\):\n((?:- .*\n?)+)")


def judge_responder(body):
    """A judge that decides from the request: pass when the output names a reference.

    Outputs holding "garbled" get a reply with no grade; "flip" gets pass when the reference
    comes first and fail when the output does; "boom" gets a 500 every time.
    """
    messages = body["messages"]
    user = messages[-1]["content"]
    output = _OUTPUT.search(user).group(2)
    references = [line[2:].strip() for line in _REFERENCE.search(user).group(1).splitlines()]
    if "boom" in output:
        return fail(500)
    if "garbled" in output:
        return reply("Hmm, hard to say. Maybe.")
    if "flip" in output:
        first = user.index("Reference") < user.index("Output to grade")
        return reply(f"GRADE: {'pass' if first else 'fail'}")
    named = any(r.lower() in output.lower() for r in references)
    return reply(
        f"The output {'names' if named else 'misses'} it.\nGRADE: {'pass' if named else 'fail'}"
    )


@pytest.fixture
def judge_server():
    with ScriptedServer(responder=judge_responder) as server:
        yield server


# -- configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": ""}, "model is empty"),
        ({"instructions": "  "}, "instructions are empty"),
        ({"mode": "compare"}, "mode 'compare'"),
        ({"grades": ("pass",)}, "at least two"),
        ({"grades": ("pass", "pass")}, "distinct single words"),
        ({"grades": ("pass", "not ok")}, "distinct single words"),
        ({"positive": "yes"}, "positive 'yes' is not one of the grades"),
        ({"orders": ()}, "orders"),
        ({"orders": ("sideways",)}, "orders"),
        ({"orders": ("output-first", "output-first")}, "names one order twice"),
        ({"temperature": -1}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_judge_config_refuses_bad_settings(kwargs, message):
    settings = {"model": MODEL, "instructions": "check", **kwargs}
    with pytest.raises(ConfigError, match=re.escape(message)):
        judge_config(**settings)


def test_the_config_hash_covers_everything_that_changes_a_verdict():
    base = judge_config(MODEL, "check")
    assert judge_config(MODEL, "check").config_hash == base.config_hash
    changed = [
        judge_config("openai/other", "check"),
        judge_config(MODEL, "check again"),
        judge_config(MODEL, "check", positive="fail"),
        judge_config(MODEL, "check", orders=("output-first",)),
        judge_config(MODEL, "check", orders=("output-first", "reference-first")),
        judge_config(MODEL, "check", grades=("pass", "fail", "unsure")),
        judge_config(MODEL, "check", temperature=0.5),
        judge_config(MODEL, "check", max_tokens=65),
    ]
    hashes = {c.config_hash for c in changed} | {base.config_hash}
    assert len(hashes) == len(changed) + 1
    with pytest.raises(AttributeError):
        base.model = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "grade"),
    [
        ("GRADE: pass", "pass"),
        ("reasoning...\nGrade: FAIL.", "fail"),
        ("**GRADE: pass**", "pass"),
        ("grade = 'fail'", "fail"),
        ("GRADE: fail\nwait, no\nGRADE: pass", "pass"),
        ("It matches.\npass", "pass"),
        ("pass\nbut I am not sure", None),
        ("GRADE: passable", None),
        ("GRADE: maybe", None),
        ("", None),
        ("The output should pass.", None),
    ],
)
def test_parse_grade_reads_the_last_grade_line_or_a_bare_last_line(text, grade):
    assert parse_grade(text, ("pass", "fail")) == grade


# -- validation records ----------------------------------------------------------------------------


def test_validation_statistics_agree_with_sklearn():
    rng = np.random.default_rng(3)
    human = rng.random(60) < 0.55
    judge = np.where(rng.random(60) < 0.85, human, ~human)
    record = judge_validate(CONFIG, list(zip(judge.tolist(), human.tolist(), strict=True)), B=300)
    assert record.n == 60
    assert record.accuracy == pytest.approx(float((judge == human).mean()))
    assert record.kappa == pytest.approx(cohen_kappa_score(human, judge))
    assert record.tpr == pytest.approx(recall_score(human, judge))
    assert record.tnr == pytest.approx(recall_score(~human, ~judge))
    assert record.balanced_accuracy == pytest.approx(balanced_accuracy_score(human, judge))
    for name in ("accuracy", "kappa", "tpr", "tnr", "balanced_accuracy"):
        value = getattr(record, name)
        assert value.low <= float(value) <= value.high
        assert value.low < value.high
    assert record.config_hash == CONFIG.config_hash
    assert record.thresholds == scorers.DEFAULT_THRESHOLDS
    assert record.accuracy >= 0.8 and json.dumps(record.accuracy) == repr(float(record.accuracy))


def test_the_bootstrap_is_seeded_and_uses_b_resamples():
    a = judge_validate(CONFIG, GOOD_PAIRS, B=50, seed=1)
    b = judge_validate(CONFIG, GOOD_PAIRS, B=50, seed=1)
    c = judge_validate(CONFIG, GOOD_PAIRS, B=50, seed=2)
    assert (a.accuracy.low, a.accuracy.high) == (b.accuracy.low, b.accuracy.high)
    assert (a.kappa.low, a.kappa.high) != (c.kappa.low, c.kappa.high)
    # Recomputed by hand: percentiles of the accuracy over the same 50 resamples.
    j = np.array([p[0] for p in GOOD_PAIRS])
    h = np.array([p[1] for p in GOOD_PAIRS])
    index = np.random.default_rng(1).integers(0, len(j), size=(50, len(j)))
    draws = (j[index] == h[index]).mean(1)
    assert (a.accuracy.low, a.accuracy.high) == tuple(np.percentile(draws, [2.5, 97.5]))


def test_a_mapping_of_judge_and_human_sequences_is_accepted():
    judge = [p[0] for p in GOOD_PAIRS]
    human = [p[1] for p in GOOD_PAIRS]
    made = judge_validate(CONFIG, {"judge": judge, "human": human})
    assert made.pairs == tuple(GOOD_PAIRS)
    assert made.hash == good_record().hash  # the same record, whichever shape the labels took


@pytest.mark.parametrize(
    ("pairs", "undefined"),
    [
        ([(True, True)] * 20 + [(False, True)] * 20, {"kappa", "tnr", "balanced_accuracy"}),
        ([(True, False)] * 5 + [(False, False)] * 35, {"kappa", "tpr", "balanced_accuracy"}),
        ([(True, True)] * 30 + [(True, False)] * 10, {"kappa"}),
    ],
    ids=["humans-all-right", "humans-all-wrong", "judge-always-right"],
)
def test_one_class_makes_statistics_undefined_and_said_never_nan(pairs, undefined):
    record = judge_validate(CONFIG, pairs)
    for name in ("accuracy", "kappa", "tpr", "tnr", "balanced_accuracy"):
        value = getattr(record, name)
        if name in undefined:
            assert value is None
            assert any(note.startswith(f"{name} is undefined") for note in record.notes)
        else:
            assert value is not None and not np.isnan(value)
    assert not judge_valid(record, CONFIG)
    assert any("kappa is undefined" in p for p in judge_problems(record, CONFIG))


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([], "no labelled pairs"),
        ([(True, 1)], "each decision is a bool"),
        ([(True,)], "each entry is a (judge, human) pair"),
        ({"judge": [True]}, "has no 'human'"),
        ({"judge": [True], "human": [True, False]}, "1 judge decisions but 2 human labels"),
        ("tt", "labels is a str"),
    ],
)
def test_judge_validate_refuses_bad_labels(labels, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        judge_validate(CONFIG, labels)


def test_judge_valid_holds_the_thresholds_and_the_exact_config():
    record = good_record()
    assert judge_valid(record, CONFIG) and record.passes
    other = judge_config(MODEL, "Is it the same city?")
    assert not judge_valid(record, other)
    assert "made for judge config" in judge_problems(record, other)[0]
    strict = JudgeThresholds(min_kappa=0.95)
    assert not judge_valid(record, CONFIG, strict)
    assert judge_problems(record, CONFIG, strict) == [
        f"kappa {float(record.kappa):.3f} is below 0.95"
    ]
    assert not judge_valid(record, CONFIG, JudgeThresholds(bound="low", min_accuracy=0.88))
    assert judge_valid(record, CONFIG, JudgeThresholds(min_n=40))
    assert not judge_valid(record, CONFIG, JudgeThresholds(min_n=41))
    small = judge_validate(CONFIG, GOOD_PAIRS[:10] + GOOD_PAIRS[-10:])
    assert "fewer than the 30 required" in judge_problems(small, CONFIG)[0]


def test_a_record_round_trips_through_json_and_refuses_edits(tmp_path):
    record = good_record()
    path = record.save(tmp_path / "judge-validation.json")
    loaded = JudgeValidation.load(path)
    assert loaded == record and loaded.hash == record.hash
    assert loaded.accuracy.low == record.accuracy.low
    data = json.loads(path.read_text())
    data["pairs"][0] = [False, True]
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="does not follow from the record's pairs"):
        JudgeValidation.load(path)
    data["version"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="version 2 is newer"):
        JudgeValidation.load(path)
    path.write_text("{}")
    with pytest.raises(ConfigError, match="not a judge validation record"):
        JudgeValidation.load(path)
    with pytest.raises(ConfigError, match="no judge validation record here"):
        JudgeValidation.load(tmp_path / "missing.json")


# -- the judge scorer ------------------------------------------------------------------------------


def test_no_judge_scores_without_a_record_or_with_another_configs(judge_server, tmp_path):
    models = judge_server.models(tmp_path)
    with pytest.raises(JudgeUnvalidated, match="no validation record.*skynet judge validate"):
        judge_scorer(CONFIG, None, models=models)
    other = judge_config(MODEL, "Something else entirely")
    with pytest.raises(JudgeUnvalidated, match="made for judge config .*skynet judge collect"):
        judge_scorer(CONFIG, good_record(other), models=models)
    weak = judge_validate(CONFIG, [(True, True)] * 20 + [(True, False)] * 20)
    with pytest.raises(JudgeUnvalidated, match="accuracy 0.500 is below 0.8"):
        judge_scorer(CONFIG, weak, models=models)
    assert judge_server.request_count == 0
    assert skynet.JudgeUnvalidated is JudgeUnvalidated is scorers.JudgeUnvalidated


@pytest.mark.parametrize(
    ("output", "correct", "outcome", "calls"),
    [
        ("The capital is Paris.", True, RIGHT, 2),
        ("It is Lyon.", False, WRONG, 2),
        ("garbled answer", False, JUDGE_UNRESOLVED, 1),
        ("flip: Paris?", False, JUDGE_UNRESOLVED, 2),
        ("", False, "no-answer", 0),
        ("   \n", False, "no-answer", 0),
        (None, False, "no-answer", 0),
        ({"error": "the artifact gave up"}, False, "failed", 0),
        (Reply(text="Paris is", truncated=True), False, "failed", 0),
        ({"text": "Paris", "truncated": True}, False, "failed", 0),
    ],
)
def test_every_outcome(judge_server, tmp_path, output, correct, outcome, calls):
    scorer = judge_scorer(CONFIG, good_record(), models=judge_server.models(tmp_path))
    verdict = scorer.score_output(item(["Paris", "Paris, France"]), output)
    assert (verdict.correct, verdict.reason) == (correct, outcome)
    assert verdict.reason in scorer.reasons
    assert judge_server.request_count == calls == len(scorer.trace)
    if calls:
        sent = judge_server.requests[0]["messages"][-1]["content"]
        assert "- Paris\n- Paris, France" in sent  # every accepted answer listed
        assert judge_server.requests[0]["model"] == "skynet-test"


def test_both_orders_are_asked_and_traced(judge_server, tmp_path):
    scorer = judge_scorer(CONFIG, good_record(), models=judge_server.models(tmp_path))
    scorer.score(item("Paris"), Reply(text="Paris"))
    first, second = (r["messages"][-1]["content"] for r in judge_server.requests)
    assert first.index("Reference") < first.index("Output to grade")
    assert second.index("Output to grade") < second.index("Reference")
    assert [(c.order, c.grade, c.item_id, c.cached) for c in scorer.trace] == [
        ("reference-first", "pass", "i1", False),
        ("output-first", "pass", "i1", False),
    ]
    assert all(c.cost_usd is not None and c.cost_usd > 0 for c in scorer.trace)


def test_a_failed_judge_call_is_an_error_not_a_wrong_answer(judge_server, tmp_path):
    models = judge_server.models(tmp_path, max_attempts=2)
    scorer = judge_scorer(CONFIG, good_record(), models=models)
    with pytest.raises(scorers.JudgeFailed, match="judge call .* failed") as caught:
        scorer.score(item("Paris"), Reply(text="boom Paris"))
    assert caught.value.outcome == JUDGE_FAILED
    assert isinstance(caught.value, MetricError)
    assert judge_server.request_count == 2  # retried once, then gave up
    assert scorer.trace[-1].error and scorer.ledger.totals().failed_calls == 1
    metric = scorers.judge_metric(scorer)
    with pytest.raises(MetricError, match="judge_failed|judge call"):
        metric({"country": "France"}, "boom Paris", {"capital": "Paris"})


def test_a_fixed_draw_index_reuses_the_cached_verdict_another_draws_afresh(judge_server, tmp_path):
    models = judge_server.models(tmp_path)
    record = good_record()
    scorer = judge_scorer(CONFIG, record, models=models)
    scorer.score(item("Paris"), Reply(text="Paris"))
    assert judge_server.request_count == 2
    again = scorer.score(item("Paris", id="i2"), Reply(text="Paris"))
    assert again.correct and judge_server.request_count == 2
    assert [c.cached for c in scorer.trace[2:]] == [True, True]
    other_draw = judge_scorer(CONFIG, record, draw_index=1, models=models)
    other_draw.score(item("Paris"), Reply(text="Paris"))
    assert judge_server.request_count == 4
    assert [c.cached for c in other_draw.trace] == [False, False]
    scorer.score(item("Paris"), Reply(text="It is Paris"))  # another output: a new verdict
    assert judge_server.request_count == 6


def test_judge_cost_is_in_the_judge_ledger_never_in_service_cost(judge_server, tmp_path):
    models = judge_server.models(tmp_path)
    scorer = judge_scorer(CONFIG, good_record(), models=models)
    judged = scorers.judge_metric(scorer)
    seen = {}

    def score(input, output, expected=None):
        value, info = judged.fn(input, output, expected)
        seen["service_cost"] = skynet.service_cost()
        return value, info

    metric = Metric(score, key_fn=judged.key_fn, source_hash="test")

    def task(candidate, input):
        # The task model is the same scripted server; its reply names the capital.
        judge_server.script(reply("Paris, of course", prompt_tokens=100, completion_tokens=10))
        return models.complete("task", [{"role": "user", "content": input["country"]}]).text

    result = Evaluation(metric, task)({"prompt": "x"}, item("Paris"))
    assert result.ok and result.score == 1.0 and result.extra["outcome"] == RIGHT
    task_cost = models.ledgers["task"].totals().cost_usd
    assert task_cost == pytest.approx((100 * 1.0 + 10 * 2.0) / 1e6)
    assert seen["service_cost"] == pytest.approx(task_cost)
    assert result.observation.cost_usd == pytest.approx(task_cost)
    judge_cost = models.ledgers["metric"].totals()
    assert judge_cost.calls == 2 and judge_cost.cost_usd > 0
    assert scorer.ledger.totals().cost_usd == pytest.approx(judge_cost.cost_usd)
    assert sum(c.cost_usd for c in scorer.trace) == pytest.approx(judge_cost.cost_usd)


@pytest.mark.slow
def test_the_governor_caps_judge_calls_under_concurrent_scoring(tmp_path):
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def slow_judge(body):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return judge_responder(body)

    with ScriptedServer(responder=slow_judge) as server:
        governor = Governor(max_concurrent=2)
        scorer = judge_scorer(
            CONFIG, good_record(), governor=governor, models=server.models(tmp_path)
        )
        items = [item("Paris", id=f"i{k}") for k in range(12)]
        with ThreadPoolExecutor(8) as pool:
            verdicts = list(pool.map(lambda i: scorer.score(i, Reply(text=f"Paris {i.id}")), items))
        assert all(v.correct for v in verdicts)
        assert server.request_count == 24
    assert state["peak"] == 2  # held to the governor's limit, and reached it
    assert governor.peak_in_flight == 2


def test_the_judge_metric_returns_the_outcome_and_hashes_config_and_record(judge_server, tmp_path):
    models = judge_server.models(tmp_path)
    scorer = judge_scorer(CONFIG, good_record(), models=models)
    metric = scorers.judge_metric(scorer)
    got = metric({"country": "France"}, "Paris", {"capital": "Paris"}, item_id="i1")
    assert (got.score, got.extra["outcome"]) == (1.0, RIGHT)
    assert got.feedback.startswith("right: ")
    wrong = metric({"country": "France"}, "Lyon", {"capital": "Paris"})
    assert (wrong.score, wrong.extra["outcome"]) == (0.0, WRONG)
    assert metric.answer_key(item(["Paris", "Paname"])) == "Paris"
    other_record = judge_validate(CONFIG, GOOD_PAIRS + [(True, True)])
    other = scorers.judge_metric(judge_scorer(CONFIG, other_record, models=models))
    assert other.source_hash != metric.source_hash
    report = skynet.check_metric(metric, [item("Paris"), item("Tokyo", id="i2", country="Japan")])
    assert report.ok, report.summary()


def test_the_judge_metric_is_a_scorer_metric_and_sees_the_runs_item(judge_server, tmp_path):
    """The judge becomes a run's metric through metric_of, as every scorer: it is handed the
    run's item id (never one hashed from the input), and its source hash is the one runs
    recorded before, so their results are not marked stale."""
    models = judge_server.models(tmp_path)
    record = good_record()
    scorer = judge_scorer(CONFIG, record, models=models)
    metric = scorers.judge_metric(scorer)
    assert metric.rules == scorers.metric_of(scorer).rules
    metric({"country": "France"}, "Paris", {"capital": "Paris"}, item_id="r17")
    metric({"country": "France"}, "Lyon", {"capital": "Paris"})  # outside a run: "item"
    assert [c.item_id for c in scorer.trace] == ["r17", "r17", "item", "item"]
    identity = json.dumps(["judge", 1, CONFIG.config_hash, record.hash, None])
    assert metric.source_hash == hashlib.sha256(identity.encode()).hexdigest()


def test_the_scorers_ledger_is_its_trace_as_the_session_recorded_it(judge_server, tmp_path):
    models = judge_server.models(tmp_path, max_attempts=1)
    scorer = judge_scorer(CONFIG, good_record(), models=models)
    scorer.score(item("Paris"), Reply(text="Paris"))
    scorer.score(item("Paris", id="i2"), Reply(text="Paris"))  # cached
    with pytest.raises(scorers.JudgeFailed):
        scorer.score(item("Paris", id="i3"), Reply(text="boom"))
    mine, session = scorer.ledger.totals(), models.ledgers["metric"].totals()
    assert (mine.calls, mine.cached_calls, mine.failed_calls) == (5, 2, 1)
    assert (mine.calls, mine.cached_calls, mine.failed_calls) == (
        session.calls,
        session.cached_calls,
        session.failed_calls,
    )
    assert (mine.input_tokens, mine.output_tokens) == (session.input_tokens, session.output_tokens)
    assert mine.input_tokens > 0 and mine.cost_usd == pytest.approx(session.cost_usd)
    assert [c.item_id for c in scorer.ledger.calls] == ["i1", "i1", "i2", "i2", "i3"]


def test_an_item_without_a_label_cannot_be_judged(judge_server, tmp_path):
    scorer = judge_scorer(CONFIG, good_record(), models=judge_server.models(tmp_path))
    two = Item("i9", {}, {"capital": "Paris", "country": "France"})
    with pytest.raises(DatasetError, match="name the one that holds the answer"):
        scorer.score(two, Reply(text="Paris"))
    labelled = judge_scorer(
        CONFIG, good_record(), label="capital", models=judge_server.models(tmp_path)
    )
    assert labelled.score(two, Reply(text="Paris")).correct


# -- the exact scorer ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "output", "reason"),
    [
        ("Paris", "paris", "match"),
        ("New  York", "  new york\n", "match"),
        (["Paris", "Paname"], "PANAME", "match"),
        ("Paris", "Paris.", "mismatch"),
        ("Paris", "", "no-answer"),
        ("Paris", None, "no-answer"),
        ("Paris", {"error": "timed out"}, "failed"),
        ("Paris", {"text": "Paris", "truncated": True}, "failed"),
        ("Paris", Reply(text="Paris"), "match"),
        (42, "42", "match"),
    ],
)
def test_exact_compares_after_case_and_whitespace(label, output, reason):
    scorer = scorers.get("exact")
    verdict = scorer.score_output(Item("e", {}, {"answer": label}), output)
    assert verdict.reason == reason and verdict.correct == (reason == "match")
    metric = scorers.as_metric(scorer)
    assert metric({}, output, {"answer": label})[1]["reason"] == reason


def test_exact_passes_its_self_test_and_refuses_unreadable_labels():
    items = [Item("a", {}, {"answer": "yes"}), Item("b", {}, {"answer": ["no", "nope"]})]
    assert scorers.selftest(scorers.get("exact"), items).ok
    with pytest.raises(DatasetError, match="an empty list"):
        scorers.get("exact").key(Item("c", {}, {"answer": []}))
    with pytest.raises(DatasetError, match="no output column 'label'"):
        scorers.get("exact", label="label").key(Item("c", {}, {"answer": "x"}))
    assert "exact" in scorers.names()


def test_a_labels_file_is_read_like_a_dataset_line_by_line(tmp_path):
    # A line separator (U+2028) inside an output is JSON text, not a line break; a bad line is
    # named by file and line as in a dataset.
    from skynet.scorers.judge import read_labels

    labels = tmp_path / "labels.jsonl"
    row = {
        "id": "a",
        "input": {},
        "output": "Paris\u2028is it",
        "reference": "Paris",
        "human": True,
    }
    labels.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    [read] = read_labels(labels)
    assert (read.where, read.output, read.human) == (f"{labels}:1", "Paris\u2028is it", True)
    labels.write_text(json.dumps(row) + "\n[1]\n", encoding="utf-8")
    with pytest.raises(
        DatasetError, match=r"labels.jsonl:2: the row is a JSON list, not an object"
    ):
        read_labels(labels)
