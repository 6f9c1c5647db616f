"""[engine.options]: gepa's and dspy.GEPA's own options, by their own names.

The known names and their types are read from the libraries themselves: for gepa, the fields of
GEPAConfig's sections (EngineConfig, ReflectionConfig, MergeConfig, RefinerConfig, and GEPAConfig's
own `merge` and `refiner` switches); for dspy-gepa, dspy.GEPA's constructor arguments, with
`gepa_kwargs` checked against `gepa.optimize`'s. A value is checked against the field's type:
its literals, or bool / int / float / str / a table. Strategy objects take a short string form
(STRATEGY_FORMS). Fields Skynet sets from its own keys (OWNED) are refused with the key to use.
A field whose type takes a Python object (a callable such as gepa's ProposalFn or
ReflectionComponentSelector, a strategy object) takes one given from Python as it is, passed to
the library as raw gepa / dspy.GEPA would get it; from skynet.toml, a field that only takes an
object is refused with the Python form to use. gepa's refiner is refused: it
scores a candidate by the best of its per-item rewrites, so a recorded score would not be the
candidate's own.

Every refusal is a ConfigError of one line: the option, what is wrong, and the fix (for an unknown
name, the nearest known ones).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

from skynet.errors import ConfigError
from skynet.python_objects import is_python_object_text

__all__ = [
    "GepaOptions",
    "gepa_options",
    "dspy_gepa_options",
    "parse_strategy",
    "STRATEGY_FORMS",
    "OWNED",
]

_WHERE = "[engine.options]"
_ENGINE_NAMES = {"dspy.GEPA": "dspy-gepa", "gepa.optimize": "dspy-gepa"}

# Set by Skynet from its own keys, so one setting cannot say two things.
OWNED: dict[str, str] = {
    "seed": "[engine] seed",
    "max_metric_calls": "[budget] max_metric_calls",
    "max_full_evals": "[budget] max_full_evals",
    "auto": '[budget] max_metric_calls (or [engine] name = "auto" with [engine] auto)',
    "reflection_lm": "[models] reflection",
    "reflection_lm_kwargs": "[models] reflection_temperature and reflection_max_tokens",
    "reflection_prompt_template": "[engine] reflection_template",
    "reflection_minibatch_size": "[engine] reflection_minibatch_size",
    "parallel": "[engine] concurrency",
    "max_workers": "[engine] concurrency",
    "num_threads": "[engine] concurrency",
    "raise_on_exception": "Skynet records each item's error and aborts by max_error_share",
    "run_dir": "the run's folder is .skynet/runs/RUN",
    "log_dir": "the run's folder is .skynet/runs/RUN",
    "logger": "gepa's log goes to .skynet/runs/RUN/engine.log",
    "display_progress_bar": "Skynet shows its own progress line",
    "capture_stdio": "Skynet measures and records each evaluation itself",
    "use_cloudpickle": "Skynet runs code candidates in its own sandbox",
    "track_stats": "Skynet needs dspy.GEPA's detailed results",
    "track_best_outputs": "Skynet records every output in runs.db",
    "max_reflection_cost": "[budget] max_cost_usd",
    "metric": "metric.py",
    "stop_callbacks": "[budget] (max_metric_calls, max_cost_usd, max_minutes)",
}

STRATEGY_FORMS: dict[str, str] = {
    "sampling_strategy": '"single" | "same-parent:N" | "independent:N" | "pxn:P,N"',
    "selection_strategy": '"all" | "best" | "top-k:K"',
}


def _ints(text: str, count: int, option: str, form: str) -> list[int]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != count or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise ConfigError(
            f"{_WHERE} {option} = '{form}': the numbers must be integers >= 1; "
            f"use {STRATEGY_FORMS[option]}"
        )
    return [int(p) for p in parts]


def parse_strategy(option: str, value: Any) -> Any:
    """The gepa strategy object for a short string form, e.g. "independent:4"."""
    if not isinstance(value, str):
        raise ConfigError(
            f"{_WHERE} {option} = {value!r} is not a string; use {STRATEGY_FORMS[option]}"
        )
    form = value.strip().lower()
    kind, _, args = form.partition(":")
    if option == "sampling_strategy":
        from gepa.strategies.proposal_sampling import (
            IndependentSampling,
            PxNSampling,
            SameParentSampling,
            SingleMutationSampling,
        )

        if form == "single":
            return SingleMutationSampling()
        if kind == "same-parent" and args:
            return SameParentSampling(*_ints(args, 1, option, value))
        if kind == "independent" and args:
            return IndependentSampling(*_ints(args, 1, option, value))
        if kind == "pxn" and args:
            return PxNSampling(*_ints(args, 2, option, value))
    elif option == "selection_strategy":
        from gepa.strategies.proposal_selection import (
            AllImprovements,
            BestImprovement,
            TopKImprovements,
        )

        if form == "all":
            return AllImprovements()
        if form == "best":
            return BestImprovement()
        if kind == "top-k" and args:
            return TopKImprovements(*_ints(args, 1, option, value))
    raise ConfigError(
        f"{_WHERE} {option} = '{value}' is not a known form; use {STRATEGY_FORMS[option]}"
    )


# -- what a field's type accepts ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Accepts:
    literals: tuple[Any, ...]
    kinds: tuple[type, ...]  # bool, int, float, str, dict, list, NoneType
    objects: bool  # also a Python object of some protocol (not expressible in TOML)


def _accepts(annotation: Any) -> _Accepts:
    literals: list[Any] = []
    kinds: list[type] = []
    objects = False

    def walk(tp: Any) -> None:
        nonlocal objects
        origin = typing.get_origin(tp)
        if origin is Literal:
            literals.extend(typing.get_args(tp))
        elif origin in (typing.Union, types.UnionType):
            for arg in typing.get_args(tp):
                walk(arg)
        elif tp is type(None) or tp is None:
            kinds.append(type(None))
        elif tp in (bool, int, float, str):
            kinds.append(tp)
        elif tp is dict or origin is dict or origin is Mapping:
            kinds.append(dict)
        elif tp is list or origin is list:
            kinds.append(list)
        elif tp is Any:
            kinds.extend((bool, int, float, str, dict, list))
        else:
            objects = True

    walk(annotation)
    return _Accepts(tuple(literals), tuple(kinds), objects)


def _fits(value: Any, accepts: _Accepts) -> bool:
    if accepts.literals and value in accepts.literals and isinstance(value, str):
        return True
    for kind in accepts.kinds:
        if kind is bool and isinstance(value, bool):
            return True
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            return True
        if kind is str and isinstance(value, str) and not accepts.literals:
            return True
        if kind is dict and isinstance(value, dict):
            return True
        if kind is list and isinstance(value, list):
            return True
    return False


def _describe(accepts: _Accepts) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    said = [", ".join(f'"{v}"' for v in accepts.literals)] if accepts.literals else []
    said += [names[k] for k in accepts.kinds if k in names and not (k is str and said)]
    said += ["a table" for k in accepts.kinds if k is dict]
    if said and accepts.objects:
        said.append("(from Python) a Python object")
    return " or ".join(s for s in said if s) or "a Python object"


def _from_python(value: Any) -> bool:
    """Whether `value` is a Python object (a callable, a strategy object): given from Python,
    since no skynet.toml value is one."""
    return not isinstance(value, str | bool | int | float | dict | list | type(None))


def _python_form(option: str) -> str:
    """The [engine.options] table holding `option` as Python writes it, e.g.
    {"gepa_kwargs": {"custom_candidate_proposer": your_object}}."""
    form = "your_object"
    for part in reversed(option.split(".")):
        form = f'{{"{part}": {form}}}'
    return form


def _check_one(option: str, value: Any, accepts: _Accepts, engine: str) -> Any:
    """The value gepa / dspy.GEPA should get for one option, or a ConfigError.

    A Python object (given from Python) goes to the library as it is, where its type takes
    one (gepa's ProposalFn, ReflectionComponentSelector, a strategy object...).
    """
    name = option.rpartition(".")[2]
    if is_python_object_text(value):
        raise ConfigError(
            f"{_WHERE} {option}: the run recorded a Python object here ({value}), which a file "
            f"cannot hold; give it again from Python: skynet.optimize(..., resume=RUN, "
            f'engine={{"options": {_python_form(option)}}})'
        )
    if _from_python(value) and (accepts.objects or name in STRATEGY_FORMS):
        return value
    if name in STRATEGY_FORMS:
        return parse_strategy(name, value)
    if not accepts.literals and set(accepts.kinds) <= {type(None)}:
        raise ConfigError(
            f"{_WHERE} {option} takes a Python object in {engine} (e.g. a callable), which "
            f"skynet.toml cannot hold; give it from Python: skynet.optimize(..., "
            f'engine={{"name": "{_ENGINE_NAMES.get(engine, engine)}", "options": '
            f"{_python_form(option)}}})"
        )
    if not _fits(value, accepts):
        raise ConfigError(
            f"{_WHERE} {option} = {value!r}: {engine} takes {_describe(accepts)} there"
        )
    return value


def _unknown(option: str, known: list[str], engine: str) -> ConfigError:
    near = difflib.get_close_matches(option, known, n=3, cutoff=0.6)
    hint = f"nearest: {', '.join(near)}" if near else "docs/engines.md lists them"
    return ConfigError(f"{_WHERE} {option} is not an option of {engine}; {hint}")


def _owned(option: str, name: str = "") -> ConfigError:
    return ConfigError(f"{_WHERE} {name or option} is set by Skynet; {_owner(option)}")


def _owner(option: str) -> str:
    """Where the user sets an option Skynet owns, or why Skynet keeps it."""
    where = OWNED[option]
    return f"use {where} instead" if where.startswith(("[", "metric.py")) else where


# -- gepa --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GepaOptions:
    """[engine.options] for gepa, sorted into GEPAConfig's sections (values ready for gepa)."""

    engine: dict[str, Any] = dataclasses.field(default_factory=dict)
    reflection: dict[str, Any] = dataclasses.field(default_factory=dict)
    merge: dict[str, Any] | None = None  # None: no merge (gepa's default)


def _gepa_fields() -> dict[str, tuple[str, _Accepts]]:
    """option name -> (GEPAConfig section, what its type accepts)."""
    import gepa.optimize_anything as oa

    fields: dict[str, tuple[str, _Accepts]] = {}
    for section, cls in (
        ("engine", oa.EngineConfig),
        ("reflection", oa.ReflectionConfig),
        ("merge", oa.MergeConfig),
        ("refiner", oa.RefinerConfig),
    ):
        hints = typing.get_type_hints(cls, dict(vars(oa)))
        for f in dataclasses.fields(cls):
            fields.setdefault(f.name, (section, _accepts(hints[f.name])))
    fields["merge"] = ("switch", _Accepts((), (bool,), False))
    fields["refiner"] = ("switch", _Accepts((), (bool,), False))
    return fields


def gepa_options(options: Mapping[str, Any]) -> GepaOptions:
    """[engine.options] checked against gepa's GEPAConfig sections.

    Setting a MergeConfig field turns merge on (as does `merge = true`, with gepa's merge
    defaults).

    Raises:
        ConfigError: an unknown option (naming the nearest), one Skynet sets, or a wrong value.
    """
    if not options:
        return GepaOptions()
    fields = _gepa_fields()
    sections: dict[str, dict[str, Any]] = {
        "engine": {},
        "reflection": {},
        "merge": {},
        "refiner": {},
    }
    switches: dict[str, bool] = {}
    for option, value in options.items():
        if option in OWNED:
            raise _owned(option)
        if option not in fields:
            raise _unknown(option, sorted(set(fields) - set(OWNED)), "gepa")
        section, accepts = fields[option]
        checked = _check_one(option, value, accepts, "gepa")
        if section == "switch":
            switches[option] = checked
        else:
            sections[section][option] = checked
    merge: dict[str, Any] | None = None
    if switches.get("merge", bool(sections["merge"])):
        merge = sections["merge"]
    elif sections["merge"]:
        raise ConfigError(
            f"{_WHERE} merge = false with {', '.join(sections['merge'])} set; drop one of them"
        )
    if switches.get("refiner") or sections["refiner"]:
        named = ", ".join(sections["refiner"]) or "refiner"
        raise ConfigError(
            f"{_WHERE} {named}: gepa's refiner is not supported: it scores a candidate by the "
            "best of its per-item rewrites (which are not the candidate) and adds a "
            "refiner_prompt component the artifact does not have; drop it"
        )
    return GepaOptions(
        engine=sections["engine"],
        reflection=sections["reflection"],
        merge=merge,
    )


# -- dspy.GEPA ---------------------------------------------------------------------------------


def _signature_fields(func: Callable[..., Any], skip: set[str]) -> dict[str, _Accepts]:
    module = inspect.getmodule(func)
    namespace = dict(vars(module)) if module else {}
    fields: dict[str, _Accepts] = {}
    for name, param in inspect.signature(func).parameters.items():
        if name in skip or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        annotation = param.annotation
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # noqa: S307 — the library's own text
            except Exception:  # noqa: BLE001 — a name only the type checker knows: an object
                annotation = object
        fields[name] = _accepts(annotation)
    return fields


def dspy_gepa_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """[engine.options] checked against dspy.GEPA's constructor (and `gepa_kwargs` against
    gepa.optimize's own arguments); the keyword arguments for dspy.GEPA.

    Raises:
        ConfigError: an unknown option (naming the nearest), one Skynet sets, or a wrong value.
    """
    if not options:
        return {}
    import dspy
    import gepa.api

    fields = _signature_fields(dspy.GEPA.__init__, {"self"})
    checked: dict[str, Any] = {}
    for option, value in options.items():
        if option in OWNED:
            raise _owned(option)
        if option not in fields:
            raise _unknown(option, sorted(set(fields) - set(OWNED)), "dspy.GEPA")
        if option == "gepa_kwargs":
            checked[option] = _gepa_kwargs(value, fields, gepa.api.optimize)
        else:
            checked[option] = _check_one(option, value, fields[option], "dspy.GEPA")
    return checked


def _gepa_kwargs(
    value: Any, dspy_fields: Mapping[str, _Accepts], optimize: Callable[..., Any]
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"{_WHERE} gepa_kwargs = {value!r} is not a table; write "
            "[engine.options.gepa_kwargs] with gepa.optimize's own argument names"
        )
    # What dspy.GEPA passes to gepa.optimize itself may not come twice.
    passed = {
        "seed_candidate", "trainset", "valset", "adapter", "task_lm", "evaluator",
        "candidate_selection_strategy", "skip_perfect_score", "module_selector", "perfect_score",
        "use_merge", "max_merge_invocations", "use_wandb", "wandb_api_key", "wandb_init_kwargs",
        "use_mlflow",
    }  # fmt: skip
    fields = _signature_fields(optimize, set())
    out: dict[str, Any] = {}
    for option, item in value.items():
        name = f"gepa_kwargs.{option}"
        if option in OWNED:
            raise _owned(option, name)
        if option in passed and option in dspy_fields:
            raise ConfigError(
                f"{_WHERE} {name} is one of dspy.GEPA's own arguments; set {option} directly"
            )
        if option not in fields or option in passed:
            near = difflib.get_close_matches(option, sorted(set(fields) - passed - set(OWNED)))
            hint = f"nearest: {', '.join(near)}" if near else "see gepa.optimize's arguments"
            raise ConfigError(f"{_WHERE} {name} is not an argument of gepa.optimize; {hint}")
        out[option] = _check_one(name, item, fields[option], "gepa.optimize")
    return out


# -- the table in docs/engines.md --------------------------------------------------------------


def _default_text(value: Any) -> str:
    if isinstance(value, str):
        return f'`"{value}"`' if "\n" not in value else "gepa's template (see above)"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"`{value}`"
    return f"`{type(value).__name__}`"


def _row(option: str, default: str, accepts: _Accepts) -> str:
    if option in OWNED:
        takes = f"set by Skynet: {_owner(option)}"
    elif option in STRATEGY_FORMS:
        takes = STRATEGY_FORMS[option].replace("|", "or")
    else:
        takes = (
            _describe(accepts) if (accepts.literals or set(accepts.kinds) - {type(None)}) else ""
        )
        takes = takes or 'a Python object, from Python only (`engine={"options": {...}}`)'
    return f"| `{option}` | {default} | {takes.replace('|', 'or')} |"


def options_table() -> str:
    """The options tables of docs/engines.md, read from the installed gepa and dspy."""
    import dspy
    import gepa.optimize_anything as oa

    lines = [
        "### gepa (GEPAConfig sections)",
        "",
        "| option | gepa's default | takes |",
        "|---|---|---|",
    ]
    fields = _gepa_fields()
    for section, cls in (
        ("engine", oa.EngineConfig),
        ("reflection", oa.ReflectionConfig),
        ("merge", oa.MergeConfig),
        ("refiner", oa.RefinerConfig),
    ):
        lines.append(f"| **{cls.__name__}** | | |")
        for f in dataclasses.fields(cls):
            if f.name == "max_workers":
                default = "cpu count"
            elif f.default is not dataclasses.MISSING:
                default = _default_text(f.default)
            else:
                default = _default_text(f.default_factory())  # type: ignore[misc]
            if section == "refiner":
                lines.append(
                    f"| `{f.name}` | {default} | refused: gepa's refiner is not supported |"
                )
            else:
                lines.append(_row(f.name, default, fields[f.name][1]))
    lines.append("| **GEPAConfig** | | |")
    lines.append("| `merge` | none (off) | true or false (a MergeConfig field set turns it on) |")
    lines.append("| `refiner` | none (off) | refused: gepa's refiner is not supported |")
    lines += [
        "",
        "### dspy-gepa (dspy.GEPA's arguments)",
        "",
        "| option | dspy.GEPA's default | takes |",
        "|---|---|---|",
    ]
    dspy_fields = _signature_fields(dspy.GEPA.__init__, {"self"})
    for name, param in inspect.signature(dspy.GEPA.__init__).parameters.items():
        if name not in dspy_fields:
            continue
        default = (
            "required" if param.default is inspect.Parameter.empty else _default_text(param.default)
        )
        if name == "gepa_kwargs":
            lines.append(
                f"| `{name}` | none | a table of gepa.optimize's own arguments, e.g. `frontier_type`, `sampling_strategy` |"
            )
        else:
            lines.append(_row(name, default, dspy_fields[name]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(options_table(), end="")
