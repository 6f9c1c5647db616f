"""A pydantic ValidationError as one ConfigError: the file (or the override), the dotted key,
what was wrong and the fix; an unknown key with the nearest known one."""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import re
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from skynet.errors import ConfigError

# A key segment written bare in a dotted key; any other is quoted.
BARE = re.compile(r"[A-Za-z0-9_-]+")


def dotted(loc: tuple[Any, ...]) -> str:
    """A key's location as a message writes it: models.prices."openai/gpt-4.1".input_per_mtok,
    data.inputs[0]."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if BARE.fullmatch(part) else f'"{part}"'
        out += f".{text}" if out else text
    return out


def _submodel(annotation: Any) -> tuple[bool, type[BaseModel]] | None:
    """(is a dict of models, the model class) for a field that holds a section, else None."""
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        if len(inner) != 1:
            return None
        annotation = inner[0]
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return False, annotation
    if get_origin(annotation) is dict:
        args = get_args(annotation)
        if len(args) == 2 and inspect.isclass(args[1]) and issubclass(args[1], BaseModel):
            return True, args[1]
    return None


def _walk(
    model: type[BaseModel], prefix: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], FieldInfo]]:
    for name, info in model.model_fields.items():
        key = (*prefix, name)
        yield key, info
        sub = _submodel(info.annotation)
        if sub is not None:
            is_dict, cls = sub
            yield from _walk(cls, (*key, "*") if is_dict else key)


@functools.cache
def _known(model: type[BaseModel]) -> dict[tuple[str, ...], FieldInfo]:
    """Every key `model` knows, "*" standing for a model name under prices/endpoints."""
    return dict(_walk(model, ()))


def _fits(pattern: tuple[str, ...], loc: tuple[Any, ...]) -> bool:
    return len(pattern) == len(loc) and all(
        p in ("*", str(q)) for p, q in zip(pattern, loc, strict=True)
    )


def _field(loc: tuple[Any, ...], known: Mapping[tuple[str, ...], FieldInfo]) -> FieldInfo | None:
    return next((info for pattern, info in known.items() if _fits(pattern, loc)), None)


def _suggest(loc: tuple[Any, ...], known: Mapping[tuple[str, ...], FieldInfo]) -> str | None:
    wanted = dotted(loc)
    candidates = []
    for pattern in known:
        concrete = tuple(
            str(loc[i]) if part == "*" and i < len(loc) else ("NAME" if part == "*" else part)
            for i, part in enumerate(pattern)
        )
        candidates.append(dotted(concrete))
    found = difflib.get_close_matches(wanted, [c for c in candidates if c != wanted], n=1)
    return found[0] if found else None


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(error: Any, known: Mapping[tuple[str, ...], FieldInfo]) -> str:
    loc = tuple(error["loc"])
    key = dotted(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        suggestion = _suggest(loc, known)
        if suggestion:
            return f"unknown key '{key}'; did you mean '{suggestion}'?"
        return f"unknown key '{key}'; remove it (see the skynet.toml reference in docs/)"
    info = _field(loc, known)
    wanted = info.description if info is not None and info.description else None
    if kind == "missing":
        if len(loc) == 1:
            return f"the [{key}] section is missing; add {wanted or 'it'}"
        parent = dotted(loc[:-1])
        return f"{key} is missing; add {loc[-1]} = ... under [{parent}]: {wanted or 'a value'}"
    message = str(error["msg"])
    if kind == "value_error":
        # Our own validators already say what and how to fix it.
        message = message.removeprefix("Value error, ")
        if isinstance(error.get("input"), Mapping):
            # A section-level check: its message names the keys involved.
            return message if not key or f"{key}." in message else f"{key}: {message}"
        return f"{key} = {_shown(error.get('input'))}: {message}" + (
            f"; set it to {wanted}" if wanted else ""
        )
    message = message[:1].lower() + message[1:]
    fix = f"; set it to {wanted}" if wanted else ""
    return f"{key} = {_shown(error.get('input'))} is invalid ({message}){fix}"


def config_error(
    exc: ValidationError,
    file: Path,
    overridden: list[tuple[tuple[str, ...], str]],
    model: type[BaseModel],
) -> ConfigError:
    """`exc` as one ConfigError: its first problem (an unknown key first), named at `file` or at
    the override (`overridden`: key, how it was given) that set the key."""
    # An unknown key explains the errors it causes (a misspelt required key is also "missing").
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = tuple(str(p) for p in first["loc"])
    source = str(file)
    # A section's own check names the keys it refuses ([artifact.options], both call budgets):
    # the overrides that set them are where it was set.
    named = [
        given
        for key, given in overridden
        if first["type"] == "value_error"
        and len(key) > len(loc)
        and key[: len(loc)] == loc
        and dotted(key[: len(loc) + 1]) in str(first.get("msg", ""))
    ]
    if named:
        source = " and ".join(dict.fromkeys(named))
    for key, given in [] if named else overridden:
        if loc[: len(key)] == key:
            source = given
            break
        if first["type"] == "extra_forbidden" and key[: len(loc)] == loc:
            # The override made the unknown table (--set limits.time_s=1 makes [limits]): the
            # unknown key is the whole one given, and the nearest known key is sought for it.
            source, first = given, {**first, "loc": key}
            break
    message = f"{source}: {_describe(first, _known(model))}"
    if len(errors) > 1:
        more = len(errors) - 1
        message += f" ({more} more problem{'s' if more > 1 else ''} after this one)"
    return ConfigError(message)
