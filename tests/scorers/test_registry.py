"""The scorer registry, the self-test, and a scorer used as a metric."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from skynet import ConfigError, DatasetError, Item, scorers
from skynet.contract import validate_return
from skynet.scorers import Call, Reply, Verdict
from skynet.scorers.registry import _unregister
from skynet.scorers.xlam import XlamToolCall


class Exact:
    """A small honest scorer: correct when the reply's text is the item's label."""

    version = 1
    reasons = ("match", "mismatch")

    def __init__(self, name: str = "exact-text") -> None:
        self.name = name

    def key(self, item: Item) -> Reply:
        return Reply(text=(item.expected or {}).get("label", ""))

    def score(self, item: Item, reply: Reply) -> Verdict:
        if reply.text == (item.expected or {}).get("label", ""):
            return Verdict(True, "match", "the text is the label")
        return Verdict(False, "mismatch", f"expected {item.expected}")


class Yes(Exact):
    """Marks everything correct: the null control must catch it."""

    def score(self, item: Item, reply: Reply) -> Verdict:
        return Verdict(True, "match", "looks fine")


class Undeclared(Exact):
    """Gives a reason it never declared when the reply is wrong."""

    def score(self, item: Item, reply: Reply) -> Verdict:
        verdict = super().score(item, reply)
        return verdict if verdict.correct else Verdict(False, "bad-vibes", "no")


class Raises(Exact):
    """Cannot judge item 'b' (its label is "no")."""

    def score(self, item: Item, reply: Reply) -> Verdict:
        if (item.expected or {}).get("label") == "no":
            raise ValueError("no label to judge by")
        return super().score(item, reply)


ITEMS = [Item("a", {"text": "x"}, {"label": "yes"}), Item("b", {"text": "y"}, {"label": "no"})]


@pytest.fixture
def clean() -> Iterator[list[str]]:
    added: list[str] = []
    yield added
    for name in added:
        _unregister(name)


# -- register / get / names ---------------------------------------------------------------------


def test_register_then_get_and_names(clean: list[str]) -> None:
    scorer = Exact("exact-text-1")
    assert scorers.register(scorer) is scorer
    clean.append("exact-text-1")
    assert scorers.get("exact-text-1") is scorer
    assert "exact-text-1" in scorers.names()
    assert "xlam-tool-call" in scorers.names()


class Named:
    version = 1
    reasons = ("match",)

    def __init__(self, name: object) -> None:
        self.name = name

    def key(self, item: Item) -> Reply:
        return Reply()

    def score(self, item: Item, reply: Reply) -> Verdict:
        return Verdict(True, "match", "")


REFUSED = [
    ("None", None, "None"),
    ("empty name", Named(""), "non-empty"),
    ("blank name", Named("   "), "non-empty"),
    ("no name", object(), "non-empty"),
    ("a built-in name", Named("xlam-tool-call"), "built-in"),
]


@pytest.mark.parametrize(("scorer", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_register_refuses(scorer: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        scorers.register(scorer)  # type: ignore[arg-type]


def test_register_refuses_a_name_already_registered(clean: list[str]) -> None:
    scorers.register(Exact("twice"))
    clean.append("twice")
    with pytest.raises(ConfigError, match="already registered"):
        scorers.register(Exact("twice"))


def test_get_unknown_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="xlam-tool-call") as raised:
        scorers.get("xlam-tool-cal")
    assert "'xlam-tool-cal'" in str(raised.value)


def test_get_builds_a_builtin_with_its_options() -> None:
    strict = scorers.get("xlam-tool-call", ordering="strict")
    assert isinstance(strict, XlamToolCall) and strict.ordering == "strict"
    assert scorers.get("xlam-tool-call").ordering == "any"  # type: ignore[attr-defined]
    assert strict.version == 1


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"order": "any"}, "no option 'order'.*ordering"),
        ({"ordering": "sorted"}, "'any', 'strict'"),
    ],
)
def test_get_refuses_bad_options(options: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        scorers.get("xlam-tool-call", **options)


def test_a_registered_scorer_takes_no_options(clean: list[str]) -> None:
    scorers.register(Exact("no-options"))
    clean.append("no-options")
    with pytest.raises(ConfigError, match="no options"):
        scorers.get("no-options", ordering="any")


# -- selftest -------------------------------------------------------------------------------------


def test_selftest_passes_an_honest_scorer() -> None:
    report = scorers.selftest(Exact(), ITEMS)
    assert report.ok and report.failures == () and report.items_checked == 2


def test_selftest_null_control_catches_a_scorer_that_marks_everything_correct() -> None:
    report = scorers.selftest(Yes(), ITEMS)
    assert not report.ok
    assert [(f.check, f.item_id) for f in report.failures] == [
        ("null control", "a"),
        ("null control", "b"),
    ]


def test_selftest_catches_an_undeclared_reason() -> None:
    report = scorers.selftest(Undeclared(), ITEMS)
    assert [(f.check, f.item_id) for f in report.failures] == [
        ("undeclared reason", "a"),
        ("undeclared reason", "b"),
    ]
    assert "bad-vibes" in report.failures[0].message


def test_selftest_answer_key_check_catches_a_key_scored_wrong() -> None:
    class WrongKey(Exact):
        def key(self, item: Item) -> Reply:
            return Reply(text="definitely not the label")

    report = scorers.selftest(WrongKey(), ITEMS[:1])
    assert [(f.check, f.item_id) for f in report.failures] == [("answer key", "a")]


def test_selftest_reports_an_exception_as_its_own_kind_not_a_wrong_answer() -> None:
    report = scorers.selftest(Raises(), ITEMS)
    checks = [(f.check, f.item_id) for f in report.failures]
    assert ("scorer error", "b") in checks
    assert not any(check in ("answer key", "null control") for check, _ in checks)
    assert "ValueError" in report.failures[0].message


def test_selftest_skips_the_null_control_when_the_key_is_empty() -> None:
    report = scorers.selftest(Yes(), [Item("e", {}, {"label": ""})])
    assert report.ok and report.null_control_skipped == ("e",)


def test_selftest_of_xlam_reports_an_unreadable_answer_as_a_scorer_error() -> None:
    report = scorers.selftest(XlamToolCall(), [Item("z", {}, {"answers": "[oops"})])
    assert [(f.check, f.item_id) for f in report.failures] == [("scorer error", "z")]


def test_a_run_holds_a_scorer_metric_to_the_same_self_test(clean, scripted_server, tmp_path):
    # One self-test: the scorer's (selftest) is the metric's (check_metric) of the scorer seen as
    # a metric, so a run that names the scorer stops on the same failures, before any model call.
    import skynet
    from skynet.contract import check_metric

    assert check_metric(scorers.metric_of(Undeclared()), ITEMS) == scorers.selftest(
        Undeclared(), ITEMS
    )
    scorers.register(Undeclared("undeclared-text"))
    clean.append("undeclared-text")
    rows = [{"id": i.id, "text": i.input["text"], "label": i.expected["label"]} for i in ITEMS]
    with pytest.raises(skynet.ContractError, match="bad-vibes") as raised:
        skynet.optimize(
            "Label it.",
            metric="undeclared-text",
            train=rows[:1],
            val=rows[1:],
            user="{text}",
            models={
                "task": "openai/t",
                "endpoints": {"openai/t": {"api_base": scripted_server.url}},
            },
            store=tmp_path / "store",
        )
    assert raised.value.check == "undeclared reason"
    assert "scorer 'undeclared-text' self-test failed" in str(raised.value)
    assert scripted_server.request_count == 0


# -- as_metric ----------------------------------------------------------------------------------

ANSWERS = json.dumps([{"name": "weather", "arguments": {"city": "Paris"}}])
EXPECTED = {"answers": ANSWERS}

OUTPUTS = [
    # (output, score, feedback starts with)
    (Reply(calls=(Call("weather", '{"city": "Paris"}'),)), 1.0, "match: "),
    (
        {
            "text": "",
            "calls": [{"name": "weather", "arguments": '{"city": "Paris"}'}],
            "truncated": False,
        },
        1.0,
        "match: ",
    ),
    ({"text": "", "calls": [{"name": "weather", "arguments": {"city": "Paris"}}]}, 1.0, "match: "),
    (
        {"calls": [{"function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
        1.0,
        "match: ",
    ),
    ({"text": "sunny", "calls": [], "truncated": False}, 0.0, "no-call: "),
    (
        {
            "text": "",
            "calls": [{"name": "weather", "arguments": '{"city": "Paris"}'}],
            "truncated": True,
        },
        0.0,
        "truncated: ",
    ),
    ("<tool_call>{bad</tool_call>", 0.0, "unparsed-call: "),
    (None, 0.0, "no-call: "),
]


@pytest.mark.parametrize(("output", "value", "feedback"), OUTPUTS)
def test_as_metric_scores_one_or_zero_with_reason_and_detail(
    output: object, value: float, feedback: str
) -> None:
    score = scorers.as_metric(scorers.get("xlam-tool-call"))
    returned = score({"query": "weather in Paris?"}, output, EXPECTED)
    result = validate_return(returned)  # the metric contract's own check
    assert result.score == value
    assert result.feedback.startswith(feedback) and len(result.feedback) > len(feedback)


def test_as_metric_lets_an_unjudgeable_item_raise() -> None:
    score = scorers.as_metric(scorers.get("xlam-tool-call"))
    with pytest.raises(DatasetError):
        score({"query": "q"}, Reply(), {"answers": "not json"})


def test_a_scorer_behind_the_metric_contract_sees_the_runs_item_id() -> None:
    """The one adapter (metric_of) hands a scorer the item the run scores, under its id, not
    one made up from the input ("item")."""
    seen: list[str] = []

    class Sees:
        name, version, reasons = "sees-ids", "1", ("match", "miss")

        def key(self, item: Item) -> Reply:
            return Reply(text=item.expected["label"])

        def score(self, item: Item, reply: Reply) -> Verdict:
            seen.append(item.id)
            right = reply.text == item.expected["label"]
            return Verdict(right, "match" if right else "miss")

    metric = scorers.metric_of(Sees())
    metric({"text": "x"}, "yes", {"label": "yes"}, item_id="r17")
    metric({"text": "x", "id": "own"}, "no", {"label": "yes"})  # outside a run: the input's
    assert seen == ["r17", "own"]
