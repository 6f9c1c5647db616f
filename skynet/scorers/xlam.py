"""xlam-tool-call: is a reply's set of tool calls the dataset's answer? And a row's tools as sent.

A reply is correct when the tool calls it makes are the answer's: the same tools, each with equal
arguments, compared as JSON values (numbers as exact decimals, strings by code point, a bool never
equal to a number). The reasons, the first that applies is given:

    truncated · unparsed-call · malformed-arguments · no-call · call-count · name · arguments · match

`tool_schemas(row)` (skynet.tool_schemas, re-exported here) turns an xLAM row's tools (type words
such as "List[int], optional") into the OpenAI `tools` list, and refuses type words outside the
grammar rather than send an untyped parameter.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from skynet.data import Item
from skynet.errors import ConfigError, DatasetError
from skynet.scorers.base import Call, Reply, Verdict
from skynet.tool_schemas import tool_schemas

__all__ = [
    "ANY",
    "STRICT",
    "REASONS",
    "TOOL_CALL_MARKER",
    "XlamToolCall",
    "tool_schemas",
]

ANY = "any"
STRICT = "strict"

TRUNCATED = "truncated"
UNPARSED_CALL = "unparsed-call"
MALFORMED_ARGUMENTS = "malformed-arguments"
NO_CALL = "no-call"
CALL_COUNT = "call-count"
NAME = "name"
ARGUMENTS = "arguments"
MATCH = "match"
REASONS = (
    TRUNCATED,
    UNPARSED_CALL,
    MALFORMED_ARGUMENTS,
    NO_CALL,
    CALL_COUNT,
    NAME,
    ARGUMENTS,
    MATCH,
)

# The hermes parser's marker: text holding it, with no calls parsed, is a call the server's parser
# could not decode. hermes is the only parser known.
TOOL_CALL_MARKER = "<tool_call>"

_SURROGATE = re.compile("[\ud800-\udfff]")


# -- strict JSON ---------------------------------------------------------------------------------


class _Malformed(ValueError):
    """Arguments text that is not one strictly-read JSON object; the message says why."""


class _Number(Decimal):
    """A JSON number: its exact decimal value (5, 5.0 and 5e0 are equal), never equal to a bool.

    Decimal alone would call Decimal(1) == True; JSON equality does not.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is bool:
            return False
        return Decimal.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = Decimal.__hash__


def _refuse_constant(word: str) -> Any:
    raise _Malformed(f"{word} is not a JSON number")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Malformed(f"key {key!r} appears twice")
            seen.add(key)
    return value


# Parsed this way, == between two values is JSON equality: dicts ignore key order, lists keep it,
# numbers compare as exact decimals and never equal a bool, a str never equals a number. NaN and
# Infinity, which Python's json accepts, are refused; so is a key given twice.
_DECODER = json.JSONDecoder(
    parse_float=_Number,
    parse_int=_Number,
    parse_constant=_refuse_constant,
    object_pairs_hook=_unique_pairs,
)


def _no_surrogates(value: Any) -> None:
    kind = type(value)
    if kind is str:
        if _SURROGATE.search(value):
            raise _Malformed("a string holds a lone surrogate")
    elif kind is dict:
        for key, item in value.items():
            if _SURROGATE.search(key):
                raise _Malformed("a key holds a lone surrogate")
            _no_surrogates(item)
    elif kind is list:
        for item in value:
            _no_surrogates(item)


def _from_python(value: Any) -> Any:
    """A value parsed by someone else's json (answers stored as lists) in the _DECODER's terms."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise _Malformed("a string holds a lone surrogate")
        return value
    if value is None or value is True or value is False:
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise _Malformed(f"{value} is not a JSON number")
        return _Number(value)
    if isinstance(value, int):
        return _Number(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Malformed(f"{value!r} is not a JSON number")
        return _Number(repr(value))  # the shortest text that reads back as this float
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str) or _SURROGATE.search(key):
                raise _Malformed(f"key {key!r} is not a JSON string")
        return {key: _from_python(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_from_python(item) for item in value]
    raise _Malformed(f"a {type(value).__name__} is not a JSON value")


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _read_object(text: Any) -> dict[str, Any]:
    """Read arguments text strictly as one JSON object."""
    if type(text) is not str:
        raise _Malformed(f"a {type(text).__name__}, not JSON text")
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        what = "text after the object" if exc.msg == "Extra data" else exc.msg
        raise _Malformed(f"{what} at column {exc.colno}") from None
    except RecursionError:
        raise _Malformed("nested too deeply") from None
    if type(value) is not dict:
        raise _Malformed(f"a JSON {_kind(value)}, not an object")
    # A lone surrogate reaches a str only through a \u escape or the raw text itself.
    if "\\u" in text or _SURROGATE.search(text) is not None:
        _no_surrogates(value)
    return value


def _dump(value: Any) -> str:
    """JSON text for a parsed value, numbers written as their exact decimal text."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{json.dumps(k, ensure_ascii=False)}: {_dump(v)}" for k, v in value.items()
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _show(value: Any, limit: int = 60) -> str:
    """A value as JSON text for a verdict's detail, cut short."""
    shown = _dump(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


# -- the scorer ----------------------------------------------------------------------------------

_AnswerCall = tuple[str, dict[str, Any]]  # (tool name, parsed arguments)


class _Answer:
    __slots__ = ("calls", "names", "_key")

    def __init__(self, calls: tuple[_AnswerCall, ...]) -> None:
        self.calls = calls
        self.names = frozenset(name for name, _ in calls)
        self._key: Reply | None = None

    @property
    def key(self) -> Reply:
        if self._key is None:  # built on first use: scoring never needs it
            calls = tuple(Call(name, _dump(arguments)) for name, arguments in self.calls)
            self._key = Reply(text="", calls=calls, truncated=False)
        return self._key


class XlamToolCall:
    """The xlam-tool-call scorer, version 1.

    Args:
        ordering: "any" (the reply's calls are the answer's as a multiset, in any order) or
            "strict" (position by position).

    The answer is the item's "answers" output column (or its only output column): a JSON string
    or a list of {"name", "arguments"}.
    """

    name = "xlam-tool-call"
    version = 1
    reasons = REASONS

    def __init__(self, *, ordering: str = ANY) -> None:
        if ordering not in (ANY, STRICT):
            raise ConfigError(
                f"scorer 'xlam-tool-call': ordering {ordering!r} is not one of 'any', 'strict'"
            )
        self.ordering = ordering
        self._cache: dict[str, _Answer] = {}

    def __repr__(self) -> str:
        return f"XlamToolCall(ordering={self.ordering!r})"

    # The answer --------------------------------------------------------------------------------

    def _answer(self, item: Item) -> _Answer:
        expected = item.expected
        if expected and "answers" in expected:
            raw = expected["answers"]
        elif expected and len(expected) == 1:
            raw = next(iter(expected.values()))
        else:
            have = ", ".join(map(repr, expected or {})) or "none"
            raise DatasetError(
                f"item '{item.id}' has no 'answers' output column (its outputs: {have}); "
                'xlam-tool-call reads the answer from outputs = ["answers"]'
            )
        if isinstance(raw, str):
            cached = self._cache.get(raw)
            if cached is not None:
                return cached
            answer = self._parse_answer(item, raw)
            if len(self._cache) >= 4096:
                self._cache.clear()
            self._cache[raw] = answer
            return answer
        return self._parse_answer(item, raw)

    def _parse_answer(self, item: Item, raw: Any) -> _Answer:
        def refuse(why: str) -> DatasetError:
            return DatasetError(
                f"item '{item.id}': the answers column {why}; it must be a JSON list of "
                '{"name": ..., "arguments": {...}} (as a string or a list)'
            )

        entries = raw
        if isinstance(raw, str):
            try:
                entries = _DECODER.decode(raw)
                if "\\u" in raw or _SURROGATE.search(raw) is not None:
                    _no_surrogates(entries)
            except (json.JSONDecodeError, _Malformed) as exc:
                raise refuse(f"is not strict JSON ({exc})") from None
        if not isinstance(entries, (list, tuple)):
            raise refuse(f"is a {type(entries).__name__}, not a list")
        calls: list[_AnswerCall] = []
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise refuse(f"entry {index} is not an object with a str name")
            if "arguments" not in entry:
                raise refuse(f"entry {index} ({entry['name']}) has no arguments")
            given = entry["arguments"]
            arguments: dict[str, Any]
            try:
                if isinstance(given, str):
                    arguments = _read_object(given)
                elif type(given) is dict and entries is not raw:
                    arguments = given  # read by _DECODER along with the answers text
                elif isinstance(given, Mapping):
                    arguments = _from_python(
                        given
                    )  # a list in the row: numbers as Python read them
                else:
                    raise _Malformed(f"a {type(given).__name__}, not an object")
            except _Malformed as exc:
                raise refuse(
                    f"entry {index} ({entry['name']}): arguments are not a strict JSON object "
                    f"({exc})"
                ) from None
            calls.append((entry["name"], arguments))
        return _Answer(tuple(calls))

    def key(self, item: Item) -> Reply:
        """The reply a model that got `item` right would return: the answer's calls, no text."""
        return self._answer(item).key

    # Scoring -----------------------------------------------------------------------------------

    def score(self, item: Item, reply: Reply) -> Verdict:
        """Judge `reply` against the item's answer; the first reason that applies is given.

        Raises:
            DatasetError: the item's answer cannot be read (the item cannot be judged).
        """
        answer = self._answer(item)
        if reply.truncated:
            return Verdict(
                False, TRUNCATED, "the reply stopped at the token limit before it finished"
            )
        calls = reply.calls
        if not calls and TOOL_CALL_MARKER in (reply.text or ""):
            return Verdict(
                False,
                UNPARSED_CALL,
                f"the reply holds {TOOL_CALL_MARKER} but no call could be parsed from it; write "
                'each call as <tool_call>{"name": ..., "arguments": {...}}</tool_call> with '
                "valid JSON",
            )
        got: list[_AnswerCall] = []
        for index, call in enumerate(calls, start=1):
            try:
                got.append((call.name, _read_object(call.arguments)))
            except _Malformed as exc:
                return Verdict(
                    False,
                    MALFORMED_ARGUMENTS,
                    f"call {index} ({call.name}): the arguments are not one strict JSON object "
                    f"({exc}); give one JSON object, each key once, finite numbers, nothing "
                    "after it",
                )
        want = answer.calls
        if not got:
            if want:
                return Verdict(
                    False, NO_CALL, f"the reply makes no tool call; the answer calls {_names(want)}"
                )
            return Verdict(True, MATCH, "the answer makes no call, and neither does the reply")
        if len(got) != len(want):
            return Verdict(
                False,
                CALL_COUNT,
                f"the reply makes {len(got)} call(s) ({_names(got)}); the answer makes "
                f"{len(want)}" + (f" ({_names(want)})" if want else ""),
            )
        if self.ordering == STRICT:
            return _strict(got, want)
        return _any(got, want, answer.names)


def _strict(got: list[_AnswerCall], want: tuple[_AnswerCall, ...]) -> Verdict:
    for index, ((name, _), (tool, _)) in enumerate(zip(got, want, strict=True), start=1):
        if name != tool:
            return Verdict(
                False, NAME, f"call {index} names {name!r}; the answer calls {tool!r} there"
            )
    for index, ((name, args), (_, wanted)) in enumerate(zip(got, want, strict=True), start=1):
        if args != wanted:
            return Verdict(
                False, ARGUMENTS, f"call {index} ({name}): {_argument_difference(args, wanted)}"
            )
    return Verdict(True, MATCH, f"all {len(got)} call(s) match the answer, in order")


def _any(got: list[_AnswerCall], want: tuple[_AnswerCall, ...], names: frozenset[str]) -> Verdict:
    for index, (name, _) in enumerate(got, start=1):
        if name not in names:
            return Verdict(
                False,
                NAME,
                f"call {index} names {name!r}, a tool the answer does not call (it calls "
                f"{_names(want)})",
            )
    # A multiset match: each reply call takes one equal answer call not yet taken. Calls are few,
    # and parsed arguments are not hashable, so a scan beats hashing a canonical form.
    left = list(want)
    unmatched: list[_AnswerCall] = []
    for call in got:
        for position, candidate in enumerate(left):
            if candidate == call:
                del left[position]
                break
        else:
            unmatched.append(call)
    if not unmatched:
        return Verdict(True, MATCH, f"all {len(got)} call(s) match the answer")
    name, args = unmatched[0]
    same_tool = [wanted for tool, wanted in left if tool == name]
    if same_tool:
        why = _argument_difference(args, same_tool[0])
    else:
        why = f"the answer calls {name!r} fewer times; it also calls {_names(left)}"
    return Verdict(
        False, ARGUMENTS, f"{len(unmatched)} call(s) match no call of the answer; {name}: {why}"
    )


def _names(calls: Sequence[_AnswerCall]) -> str:
    return ", ".join(name for name, _ in calls)


def _argument_difference(mine: dict[str, Any], theirs: dict[str, Any]) -> str:
    for key in sorted(theirs):
        if key not in mine:
            return f"argument {key!r} is missing (the answer gives {_show(theirs[key])})"
    for key in sorted(mine):
        if key not in theirs:
            return f"argument {key!r} is not in the answer"
    for key in sorted(mine):
        if mine[key] != theirs[key]:
            return f"argument {key!r} is {_show(mine[key])}; the answer has {_show(theirs[key])}"
    return "the arguments differ"  # not reached: equal keys and values are equal objects
