"""Python objects given from Python where skynet.toml holds values: how a run records them.

`skynet.optimize(models={"reflection": fn}, engine={"options": {"module_selector": pick}})`
hands Skynet a callable or a strategy object that no file can hold. The run records it as text,
"<python callable: my_module.pick>": the report reads that text to say the object's model calls
were made outside Skynet's models (not measured), and a resume refuses it until the object is
given again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "PYTHON_OBJECT",
    "is_python_object_text",
    "proposers_in",
    "python_object_text",
    "recordable",
]

PYTHON_OBJECT = "<python "


def python_object_text(value: Any) -> str:
    """The text a run records for a Python object, e.g. "<python callable: my_module.pick>"."""
    kind = "callable" if callable(value) else "object"
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    module = getattr(value, "__module__", None) or type(value).__module__
    return f"{PYTHON_OBJECT}{kind}: {module}.{name}>"


def is_python_object_text(value: Any) -> bool:
    """Whether `value` is what a run recorded for a Python object (python_object_text)."""
    return isinstance(value, str) and value.startswith(PYTHON_OBJECT) and value.endswith(">")


def recordable(value: Any) -> Any:
    """`value` as a run records it (JSON): TOML's values as they are, a Python object as
    python_object_text, within tables and lists too."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): recordable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [recordable(v) for v in value]
    return python_object_text(value)


# The [engine.options] through which the user's callable writes the proposals: gepa's
# custom_candidate_proposer, dspy.GEPA's instruction_proposer (either also in gepa_kwargs).
_PROPOSERS = ("custom_candidate_proposer", "instruction_proposer")


def proposers_in(
    options: Mapping[str, Any], is_proposer: Callable[[Any], bool]
) -> list[tuple[str, Any]]:
    """(option, value) for each proposer option set in `options` (at its top or in its
    gepa_kwargs) whose value `is_proposer` accepts: a callable in a live run's options, its
    recorded text (is_python_object_text) in a run's record."""
    kwargs = options.get("gepa_kwargs")
    tables = [("", options), ("gepa_kwargs.", kwargs if isinstance(kwargs, Mapping) else {})]
    return [
        (f"{prefix}{name}", table[name])
        for prefix, table in tables
        for name in _PROPOSERS
        if is_proposer(table.get(name))
    ]
