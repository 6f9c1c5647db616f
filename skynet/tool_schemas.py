"""A row's tools as sent: `tool_schemas(row)` turns an xLAM row's tools (type words such as
"List[int], optional") into the OpenAI `tools` list, and refuses type words outside the grammar
rather than send an untyped parameter.

It is the data's job, not a scorer's: the prompt artifact sends each row's tools with
`[artifact] tools = "row"`, and the xlam-tool-call scorer reads the same rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from skynet.data import Item
from skynet.errors import DatasetError

__all__ = ["tool_schemas"]

_BASIC = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_GRAMMAR = (
    "str, int, float, bool, list, List, List[T], Tuple[T, …, T], List[Union[int, float]], Dict, "
    "set, Callable[[…], T], each optionally followed by ', optional' or ', default=…'"
)
_HEAD = re.compile(r"(\w+)\s*(?:\[(.*)\])?", re.S)
_DEFAULT = re.compile(r"default\s*(?:=|:|\s)\s*(.*)", re.S)


class _Refused(ValueError):
    """Type words outside the grammar; the message says what."""


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and quotes; refuse unbalanced brackets."""
    parts: list[str] = []
    depth = 0
    quote = ""
    start = 0
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise _Refused("has a ']' with no '['")
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    if depth:
        raise _Refused("has a '[' with no ']'")
    parts.append(text[start:])
    return parts


def _type_expr(text: str) -> dict[str, Any]:
    match = _HEAD.fullmatch(text.strip())
    if match is None:
        raise _Refused(f"has {text.strip()!r}, which is not a type word")
    head, inner = match.group(1), match.group(2)
    if inner is None:
        if head in _BASIC:
            return {"type": _BASIC[head]}
        if head in ("list", "List"):
            return {"type": "array"}
        if head == "Dict":
            return {"type": "object"}
        if head == "set":
            return {"type": "array", "uniqueItems": True}
        raise _Refused(f"has {head!r}, which is not a type word")
    members = [m.strip() for m in _split_top(inner)]
    if any(not m for m in members):
        raise _Refused(f"has an empty member in {text.strip()!r}")
    if head == "List":
        if len(members) != 1:
            raise _Refused(f"gives List {len(members)} members; List[T] takes one")
        union = _HEAD.fullmatch(members[0])
        if union is not None and union.group(1) == "Union":
            options = sorted(m.strip() for m in _split_top(union.group(2) or ""))
            if options != ["float", "int"]:
                raise _Refused(f"has {members[0]!r}; the only Union known is Union[int, float]")
            return {"type": "array", "items": {"type": "number"}}
        return {"type": "array", "items": _type_expr(members[0])}
    if head == "Tuple":
        schemas = [_type_expr(m) for m in members]
        if any(s != schemas[0] for s in schemas[1:]):
            raise _Refused(f"has {text.strip()!r}, whose members are not all one type")
        return {
            "type": "array",
            "items": schemas[0],
            "minItems": len(schemas),
            "maxItems": len(schemas),
        }
    if head == "Callable":
        if len(members) != 2 or not (members[0].startswith("[") and members[0].endswith("]")):
            raise _Refused(f"has {text.strip()!r}; Callable is written Callable[[…], T]")
        for argument in _split_top(members[0][1:-1]):
            if argument.strip():
                _type_expr(argument)
        _type_expr(members[1])
        return {"type": "string"}
    raise _Refused(f"has {head}[…], which is not a type word")


# type words -> (schema, optional, default text or None); refusals cached as the _Refused.
_TYPE_CACHE: dict[str, tuple[dict[str, Any], bool, str | None] | _Refused] = {}


def _type_words(text: str) -> tuple[dict[str, Any], bool, str | None]:
    cached = _TYPE_CACHE.get(text)
    if cached is None:
        try:
            parts = _split_top(text)
            schema = _type_expr(parts[0])
            optional = False
            default: str | None = None
            for part in parts[1:]:
                word = part.strip()
                found = _DEFAULT.fullmatch(word)
                if word == "optional":
                    optional = True
                elif found is not None:
                    default = found.group(1).strip()
                else:
                    raise _Refused(f"has {word!r} after the type, not 'optional' or 'default=…'")
            cached = (schema, optional, default)
        except _Refused as exc:
            cached = exc
        if len(_TYPE_CACHE) < 65536:
            _TYPE_CACHE[text] = cached
    if isinstance(cached, _Refused):
        raise cached
    return cached


def _copy(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in schema.items()}


def _same_default(text: str, default: Any) -> bool:
    written = {text}
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        written.add(text[1:-1])
    forms = {str(default), repr(default)}
    try:
        forms.add(json.dumps(default, ensure_ascii=False))
    except (TypeError, ValueError):
        pass
    return bool(written & forms)


def tool_schemas(row: Mapping[str, Any] | Item, *, row_name: str | None = None) -> list[dict]:
    """The row's tools as the OpenAI `tools` list.

    Each tool keeps its name and description as written; its parameters become a JSON Schema
    object whose property types come from the row's type words (see the module docstring). A
    parameter is required unless it has a default or its type words say ", optional".

    Args:
        row: an xLAM row (a dict with "tools") or an Item whose input holds "tools".
        row_name: how messages name the row (default: its id, e.g. "row '17'").

    Raises:
        DatasetError: the tools cannot be read, or a parameter's type words are outside the
            grammar, a Tuple's members differ, or a default in the type words is not the
            parameter's default. The message names the row: the dataset is refused, not sent
            with an untyped parameter.
    """
    if isinstance(row, Item):
        values: Mapping[str, Any] = row.input
        where = row_name or f"item '{row.id}'"
    else:
        values = row
        where = row_name or (f"row '{row['id']}'" if "id" in row else "row (no id)")

    def refuse(why: str) -> DatasetError:
        return DatasetError(f"{where}: {why}")

    if "tools" not in values:
        raise refuse("has no 'tools' column; xLAM rows carry their tools in 'tools'")
    tools = values["tools"]
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise refuse(f"'tools' is not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(tools, list):
        raise refuse(f"'tools' is a {type(tools).__name__}, not a list of tools")
    sent: list[dict] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            raise refuse(f"tool {index} is not an object with a str 'name'")
        name = tool["name"]
        parameters = tool.get("parameters") or {}
        if not isinstance(parameters, Mapping):
            raise refuse(
                f"tool '{name}': 'parameters' is a {type(parameters).__name__}, not an object"
            )
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param, spec in parameters.items():
            if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
                raise refuse(
                    f"tool '{name}' parameter '{param}' has no type words; give it a \"type\" "
                    f"({_GRAMMAR})"
                )
            words = spec["type"]
            try:
                schema, optional, written_default = _type_words(words)
            except _Refused as exc:
                raise refuse(
                    f"tool '{name}' parameter '{param}': type words {words!r} {exc}; the "
                    f"dataset is refused rather than send a parameter with no type ({_GRAMMAR})"
                ) from None
            has_default = "default" in spec
            if written_default is not None and not (
                has_default and _same_default(written_default, spec["default"])
            ):
                theirs = repr(spec["default"]) if has_default else "none"
                raise refuse(
                    f"tool '{name}' parameter '{param}': type words {words!r} give the default "
                    f"{written_default}, but the parameter's default is {theirs}; make them agree"
                )
            prop = _copy(schema)
            if "description" in spec:
                prop["description"] = spec["description"]
            if has_default:
                prop["default"] = spec["default"]
            properties[param] = prop
            if not has_default and not optional:
                required.append(param)
        function: dict[str, Any] = {"name": name}
        if "description" in tool:
            function["description"] = tool["description"]
        function["parameters"] = {"type": "object", "properties": properties, "required": required}
        sent.append({"type": "function", "function": function})
    return sent
