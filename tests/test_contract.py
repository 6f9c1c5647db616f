"""The metric contract: loading, the return-value check, the self-test, limits."""

from __future__ import annotations

import fractions
import math
import textwrap
import time

import numpy as np
import pytest

import skynet
from skynet import ContractError, Item, Limits, MetricError, check_metric, load_metric
from skynet.contract import Metric, validate_return


def write_metric(tmp_path, body: str, name: str = "metric.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


# -- the return-value check: every accepted and rejected case a row ----------------------------

ACCEPTED = [
    ((1.0, {"feedback": "ok"}), 1.0),
    ([0, {"feedback": ""}], 0.0),
    ((1, {"feedback": "x", "scores": {"format": 1, "len": 0.5}}), 1.0),
    ((np.float32(0.25), {"feedback": "numpy scalar"}), 0.25),
    ((np.int64(3), {"feedback": "numpy int"}), 3.0),
    ((fractions.Fraction(1, 4), {"feedback": "fraction"}), 0.25),
    ((0.5, {"feedback": "extra keys kept", "why": [1, 2]}), 0.5),
    ((0.5, {"feedback": "scores None", "scores": None}), 0.5),
    ((0.5, {"feedback": "numpy sub-score", "scores": {"a": np.float64(0.1)}}), 0.5),
]


@pytest.mark.parametrize(("value", "score"), ACCEPTED)
def test_return_value_accepted(value, score):
    result = validate_return(value, item_id="r1")
    assert result.score == pytest.approx(score)
    assert isinstance(result.score, float)
    assert result.feedback == value[1]["feedback"]


def test_return_value_keeps_scores_and_other_keys():
    result = validate_return((1, {"feedback": "f", "scores": {"a": 1}, "why": "x"}))
    assert result.scores == {"a": 1.0}
    assert result.extra == {"why": "x"}


REJECTED = [
    ("not a pair", 1.0, "not a pair"),
    ("3-tuple", (1.0, {"feedback": ""}, 3), "3-tuple"),
    ("1-list", [1.0], "1-list"),
    ("bool score", (True, {"feedback": ""}), "bool is not a score"),
    ("numpy bool score", (np.bool_(True), {"feedback": ""}), "bool is not a score"),
    ("None score", (None, {"feedback": ""}), "None"),
    ("NaN score", (math.nan, {"feedback": ""}), "not finite"),
    ("inf score", (math.inf, {"feedback": ""}), "not finite"),
    ("-inf score", (-math.inf, {"feedback": ""}), "not finite"),
    ("str score", ("1.0", {"feedback": ""}), "str"),
    ("numpy array score", (np.array([1.0]), {"feedback": ""}), "numpy array"),
    ("0-d numpy array", (np.array(1.0), {"feedback": ""}), "numpy array"),
    ("info not a dict", (1.0, "good"), "not a dict"),
    ("no feedback", (1.0, {"scores": {}}), 'no "feedback"'),
    ("feedback not str", (1.0, {"feedback": ["a"]}), "not a str"),
    ("scores not a dict", (1.0, {"feedback": "", "scores": [1]}), '"scores" is a list'),
    ("score key not str", (1.0, {"feedback": "", "scores": {1: 1.0}}), "non-str key"),
    ("sub-score NaN", (1.0, {"feedback": "", "scores": {"a": math.nan}}), '"scores"["a"]'),
    ("sub-score bool", (1.0, {"feedback": "", "scores": {"a": False}}), "bool"),
    ("sub-score str", (1.0, {"feedback": "", "scores": {"a": "1"}}), "str"),
]


@pytest.mark.parametrize(("case", "value", "why"), REJECTED, ids=[r[0] for r in REJECTED])
def test_return_value_rejected(case, value, why):
    with pytest.raises(ContractError) as caught:
        validate_return(value, item_id="r17", where="metric.py")
    err = caught.value
    assert err.check == "Metric return value"
    assert err.item_id == "r17"
    message = str(err)
    assert message.startswith("Metric return value check failed for item 'r17' (metric.py)")
    assert why in message
    assert "Fix:" in message


def test_rejected_value_is_shown_cut_short():
    huge = ("x" * 10_000, {"feedback": "y" * 10_000}, 3)
    with pytest.raises(ContractError) as caught:
        validate_return(huge, item_id="r1")
    shown = str(caught.value).split("got ", 1)[1].split(". Fix:")[0]
    assert len(shown) <= 200


def test_too_many_named_scores_is_an_error():
    value = (1.0, {"feedback": "", "scores": {f"s{i}": 1.0 for i in range(33)}})
    with pytest.raises(ContractError, match="limit is 32"):
        validate_return(value)
    assert validate_return(value, limits=Limits(max_scores=40)).scores["s32"] == 1.0


def test_long_feedback_is_cut_with_a_note():
    result = validate_return((1.0, {"feedback": "z" * 5000}))
    assert len(result.feedback) == 4000
    assert result.notes and "cut from 5000 to 4000" in result.notes[0]


# -- loading metric.py ------------------------------------------------------------------------


def test_three_argument_metric_is_called_with_expected(tmp_path):
    path = write_metric(
        tmp_path,
        """
        def score(input, output, expected=None):
            ok = output == expected["label"]
            return float(ok), {"feedback": f"saw input {input['q']}"}
        """,
    )
    metric = load_metric(path)
    assert metric.arity == 3
    result = metric({"q": "2+2"}, "4", {"label": "4"})
    assert result.score == 1.0 and result.feedback == "saw input 2+2"


def test_two_argument_metric_is_called_without_expected(tmp_path):
    path = write_metric(
        tmp_path,
        """
        def score(input, output):
            return len(output) / 10, {"feedback": "length"}
        """,
    )
    metric = load_metric(path)
    assert metric.arity == 2
    assert metric({"q": 1}, "abcde", {"label": "ignored"}).score == 0.5


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("x = 1\n", "defines no score()"),
        ("score = 3\n", "not a function"),
        ("def score(input):\n    return 1.0, {'feedback': ''}\n", "1 positional"),
        ("def score(a, b, c, d):\n    return 1.0, {'feedback': ''}\n", "requires 4 arguments"),
        ("def score(a, b, *, judge):\n    return 1.0, {'feedback': ''}\n", "keyword-only"),
        ("def score(a, b:\n", "syntax error"),
        ("import no_such_module_xyz\n", "importing the metric raised ModuleNotFoundError"),
    ],
)
def test_unusable_metric_files_are_contract_errors(tmp_path, body, fragment):
    path = write_metric(tmp_path, body)
    with pytest.raises(ContractError) as caught:
        load_metric(path)
    assert fragment in str(caught.value)
    assert str(path) in str(caught.value)


def test_missing_metric_file(tmp_path):
    with pytest.raises(ContractError, match="no such metric file"):
        load_metric(tmp_path / "nope.py")


def test_two_projects_metric_files_never_collide(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_metric(
        tmp_path / "a", "NAME = 'a'\ndef score(i, o):\n    return 1.0, {'feedback': NAME}\n"
    )
    b = write_metric(
        tmp_path / "b", "NAME = 'b'\ndef score(i, o):\n    return 0.0, {'feedback': NAME}\n"
    )
    ma, mb = load_metric(a), load_metric(b)
    assert ma({}, "").feedback == "a"
    assert mb({}, "").feedback == "b"
    assert ma.fn.__module__ != mb.fn.__module__


def test_metric_can_import_a_helper_beside_it(tmp_path):
    (tmp_path / "helpers_for_metric_x.py").write_text("def grade(o):\n    return 0.75\n")
    path = write_metric(
        tmp_path,
        """
        from helpers_for_metric_x import grade
        def score(input, output, expected=None):
            return grade(output), {"feedback": "graded"}
        """,
    )
    assert load_metric(path)({}, "x").score == 0.75


def test_reward_spec_is_validated_at_load(tmp_path):
    path = write_metric(
        tmp_path,
        """
        REWARD_SPEC = {"weights": {"accuracy": 1, "speed": 0}}
        def score(input, output, expected=None):
            return 1.0, {"feedback": ""}
        """,
    )
    with pytest.raises(skynet.ConfigError, match=r"REWARD_SPEC\['weights'\] is missing 'cost'"):
        load_metric(path)


def test_reward_spec_and_key_are_picked_up(tmp_path):
    path = write_metric(
        tmp_path,
        """
        REWARD_SPEC = {"weights": {"accuracy": 2, "speed": 1, "cost": 1},
                       "speed": {"reference": 1000}, "cost": {"reference": 0.01}}
        def key(expected):
            return "The answer is " + expected["city"]
        def score(input, output, expected=None):
            return float(expected["city"] in output), {"feedback": ""}
        """,
    )
    metric = load_metric(path)
    assert metric.reward_spec is not None and metric.reward_spec.accuracy_weight == 0.5
    assert metric.answer_key(Item("i1", {}, {"city": "Paris"})) == "The answer is Paris"


# -- a metric that raises or hangs is an error, not a score ------------------------------------


def test_metric_that_raises_is_a_metric_error_with_traceback(tmp_path):
    path = write_metric(
        tmp_path,
        """
        def score(input, output, expected=None):
            return 1.0 / 0, {"feedback": ""}
        """,
    )
    metric = load_metric(path)
    with pytest.raises(MetricError) as caught:
        metric({}, "x", {"y": 1}, item_id="r3")
    err = caught.value
    assert err.item_id == "r3"
    assert "ZeroDivisionError" in str(err) and "line 3" in str(err)
    assert "ZeroDivisionError" in err.traceback


def test_metric_that_raises_is_recorded_as_an_error_not_zero(tmp_path):
    path = write_metric(
        tmp_path,
        """
        def score(input, output, expected=None):
            raise KeyError("label")
        """,
    )
    evaluation = skynet.Evaluation(load_metric(path), lambda candidate, inp: "out")
    result = evaluation("seed", Item("r9", {"q": 1}, {"label": "x"}))
    assert not result.ok
    assert result.score is None
    assert result.error_kind == "metric"
    assert "KeyError" in result.error and "r9" in result.error
    assert "KeyError" in result.traceback
    assert result.output == "out"


def test_metric_over_its_time_limit_is_abandoned():
    def slow(input, output, expected=None):
        time.sleep(5)
        return 1.0, {"feedback": ""}

    metric = Metric(slow, limits=Limits(time_s=0.2))
    began = time.monotonic()
    with pytest.raises(MetricError, match="longer than 0.2 s"):
        metric({}, "x", item_id="r1")
    assert time.monotonic() - began < 3


def test_bad_return_value_through_evaluation_is_a_contract_error():
    evaluation = skynet.Evaluation(
        Metric(lambda i, o, e=None: (1.0, 2.0, 3.0)), lambda candidate, inp: "out"
    )
    result = evaluation("seed", Item("r1", {}, {"y": "out"}))
    assert result.error_kind == "contract" and result.score is None
    assert "Metric return value" in result.error


# -- the self-test -----------------------------------------------------------------------------

ITEMS = [
    Item("a", {"country": "France"}, {"city": "Paris"}),
    Item("b", {"country": "Japan"}, {"city": "Tokyo"}),
    Item("c", {"country": "Peru"}, {"city": "Lima"}),
]


def test_a_sound_metric_passes_the_self_test():
    def score(input, output, expected=None):
        right = expected["city"].lower() in str(output).lower()
        return float(right), {"feedback": "ok" if right else f"should name {expected['city']}"}

    report = check_metric(Metric(score), ITEMS)
    assert report.ok, report.summary()
    assert report.items_checked == 3


def test_a_constant_metric_fails_the_null_control():
    report = check_metric(Metric(lambda i, o, e=None: (1.0, {"feedback": "great"})), ITEMS)
    assert not report.ok
    null = [f for f in report.failures if f.check == "null control"]
    assert {f.item_id for f in null} == {"a", "b", "c"}
    assert "an empty output scored 1" in null[0].message
    summary = report.summary()  # one fault on many items is shown once
    assert summary.count("null control check failed") == 1
    assert "the same on 2 more item(s): b, c" in summary


def test_a_metric_that_prefers_another_answer_fails_the_answer_key():
    def score(input, output, expected=None):
        return float(output == "Tokyo") + 0.1 * bool(output), {"feedback": ""}

    report = check_metric(Metric(score), ITEMS)
    key_failures = [f for f in report.failures if f.check == "answer key"]
    assert {f.item_id for f in key_failures} == {"a", "c"}
    assert "'Tokyo'" in key_failures[0].message


def test_items_with_an_empty_key_are_left_out_of_the_null_control_only():
    items = [*ITEMS, Item("empty", {"country": "Atlantis"}, {"city": ""})]

    def score(input, output, expected=None):
        return float(output == expected["city"]), {"feedback": ""}

    report = check_metric(Metric(score), items)
    assert report.ok, report.summary()
    assert report.null_control_skipped == ("empty",)


def test_self_test_reports_bad_return_values_and_errors_by_item():
    def score(input, output, expected=None):
        if expected["city"] == "Lima":
            raise ValueError("boom")
        return (True, {"feedback": ""}) if expected["city"] == "Tokyo" else (1.0, {"feedback": ""})

    report = check_metric(Metric(score), ITEMS)
    checks = {(f.check, f.item_id) for f in report.failures}
    assert ("Metric return value", "b") in checks
    assert ("Metric error", "c") in checks


def test_self_test_uses_key_when_there_are_several_columns():
    items = [Item("m", {}, {"city": "Paris", "country": "France"})]
    with_no_key = check_metric(Metric(lambda i, o, e=None: (1.0, {"feedback": ""})), items)
    assert [f.check for f in with_no_key.failures] == ["answer key"]
    assert "define key(expected)" in with_no_key.failures[0].message

    def score(input, output, expected=None):
        return float(output == f"{expected['city']}, {expected['country']}"), {"feedback": ""}

    keyed = Metric(score, key_fn=lambda e: f"{e['city']}, {e['country']}")
    assert check_metric(keyed, items).ok


def test_self_test_lets_a_metric_read_its_observation():
    def score(input, output, expected=None):
        obs = skynet.observation()
        return float(output == expected["city"]), {"feedback": f"{obs.elapsed_ms} ms"}

    assert check_metric(Metric(score), ITEMS).ok


def test_a_metric_that_hangs_forever_does_not_keep_the_process_alive(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "hang.py"
    script.write_text(
        textwrap.dedent(
            """
        import threading
        from skynet.contract import Limits, Metric
        from skynet.errors import MetricError

        def score(input, output, expected=None):
            threading.Event().wait()  # never returns

        try:
            Metric(score, limits=Limits(time_s=0.2))({}, "x")
        except MetricError:
            print("abandoned")
        """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "abandoned", done.stderr
