"""Reading skynet.toml (or the tables skynet.optimize is given), applying --set overrides over
it, and validating the result into a Config; every problem one ConfigError (_errors.py)."""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skynet.config._errors import BARE, config_error, dotted
from skynet.config._schema import CONFIG_FILE, Config
from skynet.config._sections import config_model
from skynet.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# A dotted key's segments: "quoted" (may hold dots) or bare.
_SEGMENT = re.compile(r'"([^"]*)"|([^."]+)')


class Overrides(dict[str, Any]):
    """Overrides for load_config that remember how each was given, e.g. {"engine.seed":
    "--set engine.seed=3"}, so a message names the flag the user typed rather than skynet.toml.

    A key with no entry in `given` is named "override 'KEY'".
    """

    def __init__(
        self, values: Mapping[str, Any] | None = None, *, given: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(values or {})
        self.given: dict[str, str] = dict(given or {})


def load_config(project_dir: Path | str, overrides: Mapping[str, Any] | None = None) -> Config:
    """Read, override and validate project_dir/skynet.toml.

    Args:
        project_dir: the folder holding skynet.toml.
        overrides: dotted keys to values, applied over the file before validation, e.g.
            {"budget.max_metric_calls": 20, "engine.name": "gepa"}. Quote a segment that
            holds a dot: 'models.prices."openai/gpt-4.1".input_per_mtok'.

    Returns:
        The validated Config, with project_dir set.

    Raises:
        ConfigError: the file is missing, is not valid TOML, or a setting is unknown or wrong.
            The message names the file (or override), the dotted key and the fix.
    """
    folder = Path(project_dir).absolute()
    file = folder / CONFIG_FILE
    raw = _read_toml(file)
    if isinstance(raw.get("metric"), str):
        # `metric = "xlam-tool-call"`: shorthand for [metric] name = "xlam-tool-call".
        raw["metric"] = {"name": raw["metric"]}
    given = overrides.given if isinstance(overrides, Overrides) else {}
    applied: list[tuple[tuple[str, ...], str]] = []
    for key, value in (overrides or {}).items():
        source = given.get(key) or f"override '{key}'"
        applied.append((_apply_override(raw, key, value, source), source))
    _override_call_budget(raw, [key for key, _ in applied])
    model = config_model(raw)
    try:
        config = model.model_validate(raw)
    except ValidationError as exc:
        raise config_error(exc, file, applied, model) from None
    config._project_dir = folder
    return config


def config_from_tables(
    tables: Mapping[str, Any], project_dir: Path, *, source: str, rows_given: bool = False
) -> Config:
    """Validate skynet.toml's tables given as Python dicts (skynet.optimize's models=, engine=,
    budget=, ...): the same keys, the same checks and the same messages, naming `source`
    (e.g. "skynet.optimize()") where a file's would name skynet.toml.

    Args:
        tables: table name -> dict, e.g. {"engine": {"name": "auto"}, "budget": {...}}.
        project_dir: the folder relative paths resolve against.
        source: what the message names as the place of the error.
        rows_given: the data comes with the call: [data] needs no file.

    Raises:
        ConfigError: an unknown key (with the nearest known one) or a bad value.
    """
    raw = copy.deepcopy(dict(tables))
    if isinstance(raw.get("metric"), str):
        raw["metric"] = {"name": raw["metric"]}
    model = config_model(raw)
    try:
        config = model.model_validate(raw, context={"rows_given": rows_given})
    except ValidationError as exc:
        raise config_error(exc, Path(source), [], model) from None
    config._project_dir = Path(project_dir).absolute()
    return config


def flat_keys(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A table (a recorded config, a budget) as dotted keys to values, as `--set` names them:
    {"engine": {"seed": 0}} → {"engine.seed": 0}; an empty table stays one key, {}."""
    found: dict[str, Any] = {}
    for name, value in table.items():
        key = f"{prefix}.{name}" if prefix else str(name)
        if isinstance(value, Mapping) and value:
            found |= flat_keys(value, key)
        else:
            found[key] = value
    return found


# -- reading and overriding ---------------------------------------------------------------------


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{file}: no {CONFIG_FILE} here; run `skynet init` in {file.parent} to write one"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read it ({exc.strerror}); check the path") from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (some Windows editors) is dropped
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data[:start].count(b"\n") + 1
        raise ConfigError(f"{file}:{line}: not UTF-8 text; save the file as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"\(at line (\d+), column (\d+)\)", message)
        if found:
            what = message[: found.start()].strip()
            raise ConfigError(
                f"{file}:{found.group(1)}: TOML syntax error at column {found.group(2)}: {what}; "
                "fix that line (strings need quotes, tables are [section], keys are key = value)"
            ) from None
        raise ConfigError(f"{file}: TOML syntax error: {message}; fix the file") from None


def _split_key(key: str, source: str) -> tuple[str, ...]:
    parts = tuple(
        m.group(1) if m.group(1) is not None else m.group(2).strip() for m in _SEGMENT.finditer(key)
    )
    rebuilt = ".".join(f'"{p}"' if not BARE.fullmatch(p) else p for p in parts)
    if not parts or any(p == "" for p in parts) or _normal(rebuilt) != _normal(key):
        raise ConfigError(
            f"{source}: '{key}' is not a dotted key; write it like 'budget.max_metric_calls', "
            "quoting a segment that holds a dot"
        )
    return parts


def _normal(key: str) -> str:
    return key.replace('"', "").replace(" ", "")


def _apply_override(raw: dict[str, Any], key: str, value: Any, source: str) -> tuple[str, ...]:
    parts = _split_key(key, source)
    table = raw
    for depth, part in enumerate(parts[:-1]):
        nested = table.setdefault(part, {})
        if not isinstance(nested, dict):
            raise ConfigError(
                f"{source}: {dotted(parts[: depth + 1])} is a value, not a table, so it "
                f"has no key '{parts[depth + 1]}'; override {dotted(parts[: depth + 1])} itself"
            )
        table = nested
    table[parts[-1]] = copy.deepcopy(value)
    return parts


_CALL_BUDGETS = (("budget", "max_metric_calls"), ("budget", "max_full_evals"))


def _override_call_budget(raw: dict[str, Any], overridden: list[tuple[str, ...]]) -> None:
    """An override of one metric-call budget (--max-metric-calls 20) replaces the file's other
    one (max_full_evals = 2), as it replaces the file's own value; both overridden still clash."""
    given = [key for key in _CALL_BUDGETS if key in overridden]
    budget = raw.get("budget")
    if len(given) == 1 and isinstance(budget, dict):
        (other,) = (key for key in _CALL_BUDGETS if key not in given)
        budget.pop(other[1], None)
