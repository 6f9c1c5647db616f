"""xlam-tool-call version 1: the reason ladder, JSON equality, strict reading, ordering, tools."""

from __future__ import annotations

import json

import pytest

from skynet import DatasetError, Item
from skynet.scorers import Call, Reply, get, selftest
from skynet.scorers.xlam import REASONS, XlamToolCall, tool_schemas

WEATHER = {"name": "weather", "arguments": {"city": "Paris", "days": 3}}
TIME = {"name": "time", "arguments": {"zone": "UTC"}}


def item(answers: object, item_id: str = "r1") -> Item:
    return Item(item_id, {"query": "q"}, {"answers": answers})


def reply(*calls: tuple[str, str], text: str = "", truncated: bool = False) -> Reply:
    return Reply(text=text, calls=tuple(Call(n, a) for n, a in calls), truncated=truncated)


TWO = json.dumps([WEATHER, TIME])
ONE = json.dumps([WEATHER])
NONE = "[]"
W = ("weather", '{"city": "Paris", "days": 3}')
T = ("time", '{"zone": "UTC"}')

# -- the reason ladder: every reason, the first that applies ---------------------------------

LADDER = [
    # (case, answers, reply, correct, reason)
    ("truncated beats a right call", ONE, reply(W, truncated=True), False, "truncated"),
    ("truncated on a no-call answer", NONE, reply(text="hi", truncated=True), False, "truncated"),
    (
        "marker, no calls",
        ONE,
        reply(text='<tool_call>{"name": "weather", "arguments": {</tool_call>'),
        False,
        "unparsed-call",
    ),
    ("marker on a no-call answer", NONE, reply(text="<tool_call>oops"), False, "unparsed-call"),
    ("arguments not JSON", ONE, reply(("weather", "{city: Paris}")), False, "malformed-arguments"),
    ("arguments an array", ONE, reply(("weather", "[1]")), False, "malformed-arguments"),
    ("arguments empty", ONE, reply(("weather", "")), False, "malformed-arguments"),
    (
        "malformed beats call-count",
        ONE,
        reply(W, ("time", "{")),
        False,
        "malformed-arguments",
    ),
    ("no call, answer has one", ONE, reply(text="It is sunny."), False, "no-call"),
    ("too many calls", ONE, reply(W, T), False, "call-count"),
    ("too few calls", TWO, reply(W), False, "call-count"),
    ("calls where the answer has none", NONE, reply(W), False, "call-count"),
    ("unknown tool", ONE, reply(("forecast", '{"city": "Paris", "days": 3}')), False, "name"),
    ("wrong value", ONE, reply(("weather", '{"city": "Lyon", "days": 3}')), False, "arguments"),
    ("missing argument", ONE, reply(("weather", '{"city": "Paris"}')), False, "arguments"),
    (
        "extra argument",
        ONE,
        reply(("weather", '{"city": "Paris", "days": 3, "unit": "C"}')),
        False,
        "arguments",
    ),
    ("right call", ONE, reply(W), True, "match"),
    ("no-call answer, text reply", NONE, reply(text="I cannot help."), True, "match"),
    ("no-call answer, empty reply", NONE, reply(), True, "match"),
]


@pytest.mark.parametrize(
    ("answers", "given", "correct", "reason"),
    [case[1:] for case in LADDER],
    ids=[case[0] for case in LADDER],
)
def test_reason_ladder(answers: str, given: Reply, correct: bool, reason: str) -> None:
    verdict = XlamToolCall().score(item(answers), given)
    assert (verdict.correct, verdict.reason) == (correct, reason)
    assert verdict.detail


def test_every_declared_reason_has_a_row() -> None:
    assert {case[4] for case in LADDER} == set(REASONS)


# -- equality as JSON values --------------------------------------------------------------------

EQUALITY = [
    # (answer arguments as JSON text, reply arguments text, equal?)
    ('{"a": 1, "b": 2}', '{"b": 2, "a": 1}', True),  # object keys in any order
    ('{"a": [1, 2]}', '{"a": [2, 1]}', False),  # arrays in order
    ('{"a": 5}', '{"a": 5.0}', True),  # exact decimals
    ('{"a": 5}', '{"a": 5e0}', True),
    ('{"a": 0.5}', '{"a": 5E-1}', True),
    ('{"a": 0.1}', '{"a": 0.10000000000000001}', False),  # equal as floats, not as decimals
    ('{"a": 12345678901234567890}', '{"a": 12345678901234567891}', False),
    ('{"a": "5"}', '{"a": 5}', False),  # a string never equals a number
    ('{"a": true}', '{"a": 1}', False),  # a bool never equals 1
    ('{"a": false}', '{"a": 0}', False),
    ('{"a": null}', '{"a": false}', False),
    ('{"a": null}', '{"a": null}', True),
    ('{"a": "é"}', '{"a": "e\\u0301"}', False),  # code points, no normalisation
    ('{"a": "é"}', '{"a": "\\u00e9"}', True),  # an escape is the same code point
    ('{"a": "Paris"}', '{"a": "paris"}', False),
    ('{"a": {"x": [1, {"y": 2}]}}', '{"a": {"x": [1.0, {"y": 2e0}]}}', True),
    ('{"a": 1}', '{"a": 1, "b": null}', False),  # present on one side only
    ('{"a": []}', '{"a": {}}', False),
    ("{}", "{}", True),
]


@pytest.mark.parametrize(("want", "got", "equal"), EQUALITY)
def test_equality_as_json_values(want: str, got: str, equal: bool) -> None:
    answers = f'[{{"name": "f", "arguments": {want}}}]'
    verdict = XlamToolCall().score(item(answers), reply(("f", got)))
    assert verdict.reason == ("match" if equal else "arguments")
    assert verdict.correct is equal


def test_answers_given_as_a_list_compare_the_same() -> None:
    scorer = XlamToolCall()
    listed = item([{"name": "f", "arguments": {"x": 5, "y": 0.1, "z": True, "w": [1.5e300]}}])
    right = '{"x": 5.0, "y": 1e-1, "z": true, "w": [15e299]}'
    assert scorer.score(listed, reply(("f", right))).correct
    assert scorer.score(listed, scorer.key(listed)).correct
    assert scorer.score(listed, reply(("f", '{"x": 5, "y": 0.5, "z": 1}'))).reason == "arguments"


# -- strict reading -----------------------------------------------------------------------------

STRICT_READING = [
    ("duplicate key", '{"city": "Paris", "city": "Paris", "days": 3}'),
    ("nested duplicate key", '{"city": "Paris", "days": 3, "o": {"k": 1, "k": 1}}'),
    ("NaN", '{"city": "Paris", "days": NaN}'),
    ("Infinity", '{"city": "Paris", "days": Infinity}'),
    ("-Infinity", '{"city": "Paris", "days": -Infinity}'),
    ("lone surrogate escape", '{"city": "Paris\\ud800", "days": 3}'),
    ("lone low surrogate escape", '{"city": "\\udc00", "days": 3}'),
    ("lone surrogate in a key", '{"city": "Paris", "days": 3, "\\ud83d": 1}'),
    ("raw lone surrogate", '{"city": "Paris\ud800", "days": 3}'),
    ("text after the object", '{"city": "Paris", "days": 3} and more'),
    ("a second object", '{"city": "Paris", "days": 3}{}'),
    ("a JSON string", '"{\\"city\\": \\"Paris\\"}"'),
    ("null", "null"),
]


@pytest.mark.parametrize(
    "arguments", [c[1] for c in STRICT_READING], ids=[c[0] for c in STRICT_READING]
)
def test_strict_reading_is_malformed_arguments(arguments: str) -> None:
    verdict = XlamToolCall().score(item(ONE), reply(("weather", arguments)))
    assert (verdict.correct, verdict.reason) == (False, "malformed-arguments")


def test_a_surrogate_pair_is_one_code_point_and_reads_fine() -> None:
    answers = json.dumps([{"name": "f", "arguments": {"s": "😀"}}])
    verdict = XlamToolCall().score(item(answers), reply(("f", '{"s": "\\ud83d\\ude00"}')))
    assert verdict.reason == "match"


def test_whitespace_around_the_object_is_not_text_after_it() -> None:
    assert (
        XlamToolCall()
        .score(item(ONE), reply(("weather", ' \n{"city": "Paris", "days": 3}\n')))
        .correct
    )


# -- ordering -----------------------------------------------------------------------------------

DUP = json.dumps([WEATHER, WEATHER, TIME])

ORDERING = [
    # (ordering, answers, reply, reason)
    ("any", TWO, reply(T, W), "match"),
    ("strict", TWO, reply(T, W), "name"),
    ("any", TWO, reply(W, T), "match"),
    ("strict", TWO, reply(W, T), "match"),
    ("any", DUP, reply(T, W, W), "match"),  # the same call twice appears twice
    ("any", DUP, reply(W, T, T), "arguments"),  # a multiset: twice is not once
    ("strict", DUP, reply(W, W, T), "match"),
    ("strict", DUP, reply(W, T, W), "name"),
    ("any", json.dumps([WEATHER, TIME]), reply(W, W), "arguments"),  # names all known, counts not
    ("strict", TWO, reply(W, ("time", '{"zone": "CET"}')), "arguments"),
    ("any", TWO, reply(("time", '{"zone": "CET"}'), W), "arguments"),
]


@pytest.mark.parametrize(("ordering", "answers", "given", "reason"), ORDERING)
def test_ordering(ordering: str, answers: str, given: Reply, reason: str) -> None:
    verdict = get("xlam-tool-call", ordering=ordering).score(item(answers), given)
    assert verdict.reason == reason
    assert verdict.correct is (reason == "match")


# -- key and the self-test on real-shaped rows ---------------------------------------------------


@pytest.mark.parametrize(
    "answers", [TWO, ONE, NONE, [WEATHER], '[{"name": "f", "arguments": {"x": 1.50, "y": 1e400}}]']
)
def test_key_is_scored_correct_and_is_text(answers: object) -> None:
    scorer = XlamToolCall()
    key = scorer.key(item(answers))
    assert key.text == "" and not key.truncated
    assert all(isinstance(c.arguments, str) for c in key.calls)
    assert scorer.score(item(answers), key).correct


def test_key_keeps_exact_decimals() -> None:
    key = XlamToolCall().key(item('[{"name": "f", "arguments": {"x": 1.50, "y": 1e400}}]'))
    assert key.calls == (Call("f", '{"x": 1.50, "y": 1E+400}'),)


def test_selftest_passes_on_xlam_items_and_skips_no_call_keys() -> None:
    items = [item(TWO, "a"), item(ONE, "b"), item(NONE, "c"), item(DUP, "d")]
    for ordering in ("any", "strict"):
        report = selftest(get("xlam-tool-call", ordering=ordering), items)
        assert report.ok, report.summary()
        assert report.null_control_skipped == ("c",)


@pytest.mark.parametrize(
    "answers",
    [
        "not json",
        '{"name": "f"}',
        '[{"name": "f"}]',
        '[{"arguments": {}}]',
        '[{"name": "f", "arguments": [1]}]',
        '[{"name": "f", "arguments": {"a": 1, "a": 2}}]',
    ],
)
def test_an_unreadable_answer_raises_naming_the_item(answers: str) -> None:
    with pytest.raises(DatasetError, match="item 'r9'"):
        XlamToolCall().score(item(answers, "r9"), reply(W))


def test_an_item_without_answers_raises() -> None:
    with pytest.raises(DatasetError, match="answers"):
        XlamToolCall().score(Item("r2", {"query": "q"}, {"a": "[]", "b": "[]"}), reply())


# -- tool_schemas: every type word, each refusal -------------------------------------------------

TYPE_WORDS = [
    ("str", {"type": "string"}),
    ("int", {"type": "integer"}),
    ("float", {"type": "number"}),
    ("bool", {"type": "boolean"}),
    ("list", {"type": "array"}),
    ("List", {"type": "array"}),
    ("List[str]", {"type": "array", "items": {"type": "string"}}),
    (
        "List[List[int]]",
        {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
    ),
    (
        "Tuple[int, int]",
        {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
    ),
    (
        "Tuple[float, float, float]",
        {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
    ),
    ("List[Union[int, float]]", {"type": "array", "items": {"type": "number"}}),
    ("Dict", {"type": "object"}),
    ("set", {"type": "array", "uniqueItems": True}),
    ("Callable[[int, int], int]", {"type": "string"}),
    ("Callable[[], bool]", {"type": "string"}),
]


def row(params: dict, row_id: str = "17") -> dict:
    tools = [{"name": "f", "description": "does f", "parameters": params}]
    return {"id": row_id, "query": "q", "tools": json.dumps(tools), "answers": "[]"}


@pytest.mark.parametrize(("words", "schema"), TYPE_WORDS)
def test_type_words(words: str, schema: dict) -> None:
    (tool,) = tool_schemas(row({"p": {"type": words, "description": "the p"}}))
    assert tool["type"] == "function"
    function = tool["function"]
    assert function["name"] == "f" and function["description"] == "does f"
    assert function["parameters"]["properties"]["p"] == {**schema, "description": "the p"}
    assert function["parameters"]["required"] == ["p"]
    assert function["parameters"]["type"] == "object"


REQUIRED = [
    # (parameter spec, required?)
    ({"type": "str"}, True),
    ({"type": "str, optional"}, False),
    ({"type": "int", "default": 5}, False),
    ({"type": "int, optional", "default": 5}, False),
    ({"type": "int, default=5", "default": 5}, False),
    ({"type": "str, default='NY'", "default": "NY"}, False),
    ({"type": "str", "default": ""}, False),
]


@pytest.mark.parametrize(("spec", "required"), REQUIRED)
def test_required_unless_default_or_optional(spec: dict, required: bool) -> None:
    (tool,) = tool_schemas(row({"p": spec}))
    params = tool["function"]["parameters"]
    assert (params["required"] == ["p"]) is required
    if "default" in spec:  # sent as the row wrote it
        assert params["properties"]["p"]["default"] == spec["default"]
        assert type(params["properties"]["p"]["default"]) is type(spec["default"])
    else:
        assert "default" not in params["properties"]["p"]


def test_tools_as_a_list_and_items_are_accepted() -> None:
    params = {"p": {"type": "List[int], optional", "description": "x"}}
    listed = {"id": "3", "tools": [{"name": "f", "description": "d", "parameters": params}]}
    as_text = {"id": "3", "tools": json.dumps(listed["tools"])}
    assert tool_schemas(listed) == tool_schemas(as_text) == tool_schemas(Item("3", as_text))


REFUSALS = [
    # (parameter spec, words in the message)
    ({"type": "string"}, "not a type word"),
    ({"type": "Any"}, "not a type word"),
    ({"type": "dict"}, "not a type word"),
    ({"type": "Dict[str, int]"}, "not a type word"),
    ({"type": "Set"}, "not a type word"),
    ({"type": "Optional[int]"}, "not a type word"),
    ({"type": "List[Any]"}, "not a type word"),
    ({"type": "List[Union[int, str]]"}, "Union"),
    ({"type": "Union[int, float]"}, "not a type word"),
    ({"type": "List[int, str]"}, "one"),
    ({"type": "Tuple[int, str]"}, "not all one type"),
    ({"type": "Tuple[int, ...]"}, "not a type word"),
    ({"type": "Callable[int, int]"}, "Callable"),
    ({"type": "Callable[[int], Any]"}, "not a type word"),
    ({"type": "List[int"}, "'['"),
    ({"type": "int]"}, "']'"),
    ({"type": ""}, "not a type word"),
    ({"type": "int, required"}, "after the type"),
    ({"type": "int, default=5"}, "default"),  # a default only in the type words
    ({"type": "int, default=5", "default": 6}, "default"),  # not the parameter's default
    ({"description": "no type"}, "no type words"),
    ({"type": ["int"]}, "no type words"),
]


@pytest.mark.parametrize(("spec", "words"), REFUSALS)
def test_refusals_name_the_row(spec: dict, words: str) -> None:
    with pytest.raises(DatasetError, match="row '42'") as raised:
        tool_schemas(row({"ok": {"type": "str"}, "p": spec}, row_id="42"))
    assert words in str(raised.value)
    assert "parameter 'p'" in str(raised.value)


@pytest.mark.parametrize(
    ("tools", "words"),
    [
        ("not json", "not valid JSON"),
        ('{"name": "f"}', "not a list"),
        ('[{"description": "x"}]', "str 'name'"),
    ],
)
def test_unreadable_tools_are_refused(tools: str, words: str) -> None:
    with pytest.raises(DatasetError, match=words):
        tool_schemas({"id": "5", "tools": tools})


def test_a_refused_type_is_refused_again_from_the_cache() -> None:
    for _ in range(2):
        with pytest.raises(DatasetError, match="row '8'"):
            tool_schemas(row({"p": {"type": "Tuple[int, str]"}}, row_id="8"))


def test_schemas_are_fresh_dicts_per_row() -> None:
    first = tool_schemas(row({"p": {"type": "List[int]"}}))
    first[0]["function"]["parameters"]["properties"]["p"]["items"]["type"] = "changed"
    second = tool_schemas(row({"p": {"type": "List[int]"}}))
    assert second[0]["function"]["parameters"]["properties"]["p"]["items"] == {"type": "integer"}
