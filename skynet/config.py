"""skynet.toml: read it, apply command-line overrides, validate it, build runtime settings.

Every problem is a ConfigError naming the file (or the override), the dotted key, what was wrong
and the fix. A pydantic ValidationError never leaves this module.
"""

from __future__ import annotations

import copy
import difflib
import functools
import inspect
import json
import math
import os
import re
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    Strict,
    StrictBool,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from skynet.data import DEFAULT_SPLIT
from skynet.errors import ConfigError
from skynet.python_objects import is_python_object_text, recordable
from skynet.side_info import DEFAULT_MAX_SIDE_INFO_CHARS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

if TYPE_CHECKING:
    from skynet.models import ModelsConfig

__all__ = [
    "CONFIG_FILE",
    "ArtifactConfig",
    "BudgetConfig",
    "Config",
    "DataConfig",
    "EndpointConfig",
    "EngineConfig",
    "Float",
    "Int",
    "MetricConfig",
    "ModelsSection",
    "Overrides",
    "config_from_tables",
    "config_model",
    "PriceConfig",
    "Section",
    "SplitConfig",
    "TrackingConfig",
    "flat_keys",
    "FromPython",
    "load_config",
]

CONFIG_FILE = "skynet.toml"

# Fractions are compared with this slack: 0.7 + 0.2 + 0.1 is not exactly 1.0 in binary.
_SUM_TOLERANCE = 1e-6
_DEFAULT_SPLIT = {
    "train": DEFAULT_SPLIT.train,
    "val": DEFAULT_SPLIT.val,
    "test": DEFAULT_SPLIT.test,
}
_ARTIFACT_PATHS = {"prompt": "prompt.md", "dspy": "program.py", "code": "code.py"}
# A dotted key's segments: "quoted" (may hold dots) or bare.
_SEGMENT = re.compile(r'"([^"]*)"|([^."]+)')
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _not_bool(value: Any) -> Any:
    # pydantic's lax mode reads True as 1; in a config file that is always a mistake.
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


# Strict: "8" where a number belongs is refused, naming the key, not read as 8 (a quoted number
# is a slip in the file, and lax parsing hides which key holds it). An integer is still a Float.
Int = Annotated[int, BeforeValidator(_not_bool), Strict()]
Float = Annotated[float, BeforeValidator(_not_bool), Strict(), Field(allow_inf_nan=False)]


# A value that may be a Python object given from Python: recorded as python_object_text.
FromPython = Annotated[Any, PlainSerializer(recordable, when_used="json")]


class Section(BaseModel):
    """A table of skynet.toml: unknown keys refused, values frozen. A scorer package's own
    section (skynet.packages) is one too, so its errors read like every other key's."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SplitConfig(Section):
    """Seeded split by fractions. Fractions left out count as 0 once any fraction is given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    train: Float = Field(
        default=DEFAULT_SPLIT.train, ge=0, description="a fraction between 0 and 1, e.g. 0.5"
    )
    val: Float = Field(
        default=DEFAULT_SPLIT.val, ge=0, description="a fraction between 0 and 1, e.g. 0.3"
    )
    test: Float = Field(
        default=DEFAULT_SPLIT.test, ge=0, description="a fraction between 0 and 1, e.g. 0.2"
    )
    seed: Int = Field(
        default=DEFAULT_SPLIT.seed,
        description="an integer; it decides which items land in which split",
    )

    @model_validator(mode="before")
    @classmethod
    def _fractions_left_out(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and any(name in data for name in _DEFAULT_SPLIT):
            return {**{name: 0.0 for name in _DEFAULT_SPLIT}, **data}
        return data

    @model_validator(mode="after")
    def _sums_to_one(self) -> SplitConfig:
        total = self.train + self.val + self.test
        if not math.isclose(total, 1.0, rel_tol=0.0, abs_tol=_SUM_TOLERANCE):
            raise ValueError(
                f"fractions train {self.train:g} + val {self.val:g} + test {self.test:g} sum to "
                f"{total:g}; change them so they sum to 1 (a fraction left out counts as 0)"
            )
        return self


class DataConfig(Section):
    """[data]: where the items are, which columns are inputs and outputs, how to split."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | None = Field(
        default=None,
        description='one data file, e.g. "data.jsonl" (.jsonl, .ndjson, .csv or .json)',
    )
    train: str | None = Field(default=None, description='the train file, e.g. "train.jsonl"')
    val: str | None = Field(default=None, description='the validation file, e.g. "val.jsonl"')
    test: str | None = Field(default=None, description='the test file, e.g. "test.jsonl"')
    inputs: list[str] = Field(
        min_length=1, description='a non-empty list of input column names, e.g. ["text"]'
    )
    outputs: list[str] = Field(
        default_factory=list,
        description='a list of output column names (the expected answers), e.g. ["label"]; '
        "none for a reference-free metric",
    )
    id_column: str | None = Field(
        default=None, description='the name of a column holding a unique id per row, e.g. "id"'
    )
    split: SplitConfig | None = Field(
        default=None, description="a table like { train = 0.5, val = 0.3, test = 0.2, seed = 0 }"
    )
    split_column: str | None = Field(
        default=None, description='the name of a column whose values are "train", "val" or "test"'
    )

    @model_validator(mode="before")
    @classmethod
    def _default_split(cls, data: Any) -> Any:
        # One data file with no split column is split by fractions; record the ones used.
        if (
            isinstance(data, Mapping)
            and data.get("path")
            and not data.get("split_column")
            and "split" not in data
        ):
            return {**data, "split": dict(_DEFAULT_SPLIT)}
        return data

    @model_validator(mode="after")
    def _one_source(self, info: ValidationInfo) -> DataConfig:
        if info.context and info.context.get("rows_given"):
            # skynet.optimize(train=rows, ...): the rows come with the call, not from files.
            return self
        files = [name for name in ("train", "val", "test") if getattr(self, name)]
        if self.path and files:
            raise ValueError(
                "set either data.path (one file, split by fractions or a split column) or "
                "data.train + data.val (+ data.test) as separate files, not both; "
                f"remove data.path or data.{files[0]}"
            )
        if not self.path:
            if not files:
                raise ValueError(
                    'no data file; set data.path = "data.jsonl", or data.train and data.val'
                )
            for needed in ("train", "val"):
                if needed not in files:
                    raise ValueError(
                        f"data.{needed} is missing; with separate files set both data.train "
                        "and data.val (data.test is optional), or use data.path for one file"
                    )
            if self.split_column:
                raise ValueError(
                    "data.split_column only applies with data.path; with separate files each "
                    "file is its own split, so remove data.split_column"
                )
            if self.split is not None:
                raise ValueError(
                    "data.split only applies with data.path; with separate files each file is "
                    "its own split, so remove data.split"
                )
        elif self.split_column and self.split is not None:
            raise ValueError(
                "set data.split (fractions) or data.split_column (a column naming each row's "
                "split), not both; remove one"
            )
        return self


class ArtifactConfig(Section):
    """[artifact]: what is being optimized."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(
        default="prompt",
        description='a known kind: "prompt", "dspy" or "code" (a plugin adds kinds under the '
        'entry-point group "skynet.artifacts")',
    )
    path: str = Field(
        default="prompt.md",
        description='the artifact file, e.g. "prompt.md", "program.py" (dspy) or "code.py" (code)',
    )
    max_tokens: Int = Field(
        default=256, ge=1, description="an integer >= 1 (the reply's token limit)"
    )
    temperature: Float = Field(default=0.0, ge=0, description="a number >= 0, e.g. 0.0")
    tools: Literal["row"] | None = Field(
        default=None,
        description='"row" (prompt: send each item\'s "tools" input column as OpenAI tools)',
    )
    tool_choice: str = Field(
        default="auto",
        pattern=r"^(auto|none|required|[A-Za-z0-9_.-]{1,64})$",
        description='"auto", "none", "required", or a function name the model must call '
        "(sent with the tools)",
    )
    timeout_s: Float = Field(
        default=10.0, gt=0, description="a number > 0 (code: seconds one run may take)"
    )
    memory_mb: Int = Field(
        default=1024,
        ge=64,
        description="an integer >= 64 (code: memory per process and for the whole sandbox, MB)",
    )
    sandbox: Literal["bwrap", "none"] = Field(
        default="bwrap",
        description='"bwrap" (code: each evaluation in a bubblewrap sandbox) or "none" '
        "(unsandboxed: the candidate can read your files and keys; recorded and reported)",
    )
    cpu_s: Float | None = Field(
        default=None, gt=0, description="a number > 0 (code: CPU seconds per process)"
    )
    max_processes: Int = Field(
        default=64, ge=1, description="an integer >= 1 (code: processes in the sandbox)"
    )
    max_file_mb: Int = Field(
        default=64, ge=1, description="an integer >= 1 (code: the largest file written, MB)"
    )
    tmpfs_mb: Int = Field(
        default=64, ge=1, description="an integer >= 1 (code: size of the private /tmp, MB)"
    )
    max_output_bytes: Int = Field(
        default=1_000_000, ge=16, description="an integer >= 16 (code: the largest output read)"
    )
    stderr_tail_bytes: Int = Field(
        default=8192, ge=0, description="an integer >= 0 (code: how much of stderr is kept)"
    )
    max_model_calls: Int = Field(
        default=64, ge=0, description="an integer >= 0 (code: model calls per evaluation)"
    )
    packages: list[str] | None = Field(
        default=None,
        description='a list of top-level import names, e.g. ["numpy"] (code: the installed '
        "packages a candidate may import besides the standard library; unset: all of them)",
    )

    best_example_evals_k: Int = Field(
        default=30,
        ge=1,
        description="an integer >= 1 (code: the best evaluations per item a candidate's "
        "opt_state holds, as gepa's EngineConfig.best_example_evals_k)",
    )

    @field_validator("packages")
    @classmethod
    def _import_names(cls, value: list[str] | None) -> list[str] | None:
        bad = [name for name in value or () if not name.isidentifier()]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a top-level import name (numpy, not numpy.linalg)")
        return value

    repeat: Int = Field(
        default=1,
        ge=1,
        description="an integer >= 1 (runs of the artifact per item, each scored separately)",
    )

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        from skynet import registry

        if not registry.is_known("artifact", value):
            known = ", ".join(f'"{name}"' for name in registry.names("artifact"))
            raise ValueError(f"no artifact kind has this name; known: {known}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _path_for_kind(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "path" not in data:
            kind = data.get("kind", "prompt")
            if isinstance(kind, str) and kind in _ARTIFACT_PATHS:
                return {**data, "path": _ARTIFACT_PATHS[kind]}
        return data


class MetricConfig(Section):
    """[metric]: the user's metric.py, or a built-in scorer by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(default="metric.py", description='the metric file, e.g. "metric.py"')
    name: str | None = Field(
        default=None, min_length=1, description='a built-in scorer name, e.g. "xlam-tool-call"'
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="a table of options for the built-in scorer"
    )
    time_s: Float = Field(
        default=60.0, gt=0, description="a number > 0 (seconds one metric call may take)"
    )
    import_time_s: Float = Field(
        default=60.0, gt=0, description="a number > 0 (seconds importing metric.py may take)"
    )
    self_test: Literal["full", "contract", "off"] = Field(
        default="full",
        description='"full" (every train and val item: the contract, the answer key and the '
        'null control), "contract" (one item\'s return value) or "off"',
    )

    @model_validator(mode="after")
    def _path_or_name(self) -> MetricConfig:
        if self.name is not None and "path" in self.model_fields_set:
            raise ValueError(
                "set metric.path (your metric.py) or metric.name (a built-in scorer), not both; "
                "remove one"
            )
        return self


class EngineConfig(Section):
    """[engine]: which optimizer runs, and its knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        default="auto",
        description='a known engine, e.g. "auto" (a plugin adds engines under the entry-point '
        'group "skynet.engines")',
    )
    seed: Int = Field(default=0, description="an integer")
    objective: str = Field(
        default="", description="a sentence saying what the artifact should achieve"
    )
    background: str = Field(default="", description="text the reflection model should know")
    concurrency: Int = Field(
        default=4, ge=1, description="an integer >= 1 (items evaluated at once)"
    )
    executor: Literal["threads", "processes", "ray"] = Field(
        default="threads",
        description='"threads" (this process), "processes" (worker processes on this machine) '
        'or "ray" (a Ray cluster)',
    )
    workers: Int | None = Field(
        default=None,
        ge=1,
        description="an integer >= 1 (worker processes; empty: one per core)",
    )
    ray_address: str = Field(
        default="",
        description='a Ray cluster\'s address, e.g. "127.0.0.1:6379"; empty: start a local Ray',
    )
    reflection_minibatch_size: Int = Field(
        default=3, ge=1, description="an integer >= 1 (items shown per reflection)"
    )
    max_error_share: Float = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "a number in (0, 1]: the share of failed evaluations at which the run stops, and "
            "how much more of its val items than the seed's a candidate may have left out and "
            "still be named best"
        ),
    )
    auto: Literal["light", "medium", "heavy"] = Field(
        default="light", description='one of "light", "medium" or "heavy"'
    )
    select: Literal["val", "holdout"] = Field(
        default="val",
        description='"val" (the best is the engine\'s choice on val, as gepa does) or '
        '"holdout" (the top candidates are scored on a selection split carved from val, and '
        "the best is chosen there)",
    )
    select_top: Int = Field(
        default=4,
        ge=1,
        description='an integer >= 1 (with select = "holdout": candidates scored on the '
        "selection split, besides the seed)",
    )
    max_side_info_chars: Int = Field(
        default=DEFAULT_MAX_SIDE_INFO_CHARS,
        ge=100,
        description=(
            "an integer >= 100 (characters of each value shown to the reflection model, per "
            "example; longer is cut with a note)"
        ),
    )
    reflection_template: str = Field(
        default="",
        description='"gepa" (gepa\'s own template), "small" (the short one for tiny models) or '
        "the path of a template file; empty: chosen by the reflection model",
    )
    reflection_shows: list[Literal["inputs", "output", "feedback", "expected"]] | None = Field(
        default=None,
        min_length=1,
        description='a list of "inputs", "output", "feedback" and "expected" (what each '
        "example in a reflection prompt shows; gepa engine; empty: all four)",
    )
    options: dict[str, FromPython] = Field(
        default_factory=dict,
        description="a table of the engine's own options, by the engine's own names "
        "(gepa: GEPAConfig section fields; dspy-gepa: dspy.GEPA arguments; from Python, "
        "an option that takes an object also takes yours, e.g. a callable)",
    )

    @field_validator("name")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return _engine_name(value)


def _engine_name(value: Any) -> Any:
    from skynet import registry

    if isinstance(value, str) and not registry.is_known("engine", value):
        raise ValueError(f"no engine has this name; known: {', '.join(registry.names('engine'))}")
    return value


class BudgetConfig(Section):
    """[budget]: the run stops cleanly at the first limit reached.

    max_cost_usd is kept by reservation: every model call holds its worst-case cost before it
    is sent, and a call that would pass the limit is not sent (skynet.models.budget).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_metric_calls: Int | None = Field(
        default=150,
        ge=1,
        description="an integer >= 1 (metric calls of the search; the confirmation's apart)",
    )
    max_full_evals: Int | None = Field(
        default=None,
        ge=1,
        description="an integer >= 1 (the budget as dspy.GEPA's max_full_evals: N x (train + "
        "val) metric calls, in place of max_metric_calls)",
    )
    max_cost_usd: Float | None = Field(
        default=None, gt=0, description="a number > 0 (USD, task + reflection + judge)"
    )
    max_minutes: Float | None = Field(
        default=None, gt=0, description="a number > 0 (wall-clock minutes)"
    )
    confirm: StrictBool = Field(
        default=True,
        description=(
            "true or false (after the search, score the seed and the best on every test item: "
            "the run's held-out gain)"
        ),
    )

    @model_validator(mode="after")
    def _one_call_budget(self) -> BudgetConfig:
        # Two budgets in metric calls would say two things; neither is silently preferred.
        if self.max_full_evals is not None and "max_metric_calls" in self.model_fields_set:
            raise ValueError(
                f"budget.max_metric_calls = {self.max_metric_calls} and budget.max_full_evals = "
                f"{self.max_full_evals} both set the metric-call budget; keep one (max_full_evals "
                "= N is N x (train + val) metric calls)"
            )
        return self


class PriceConfig(Section):
    """[models.prices."NAME"]: a declared price, USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: Float = Field(ge=0, description="a number >= 0 (USD per million input tokens)")
    output_per_mtok: Float = Field(
        ge=0, description="a number >= 0 (USD per million output tokens)"
    )


class EndpointConfig(Section):
    """[models.endpoints."NAME"]: how to reach one model and how hard to push it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_base: str | None = Field(
        default=None, description='the server\'s base URL, e.g. "http://127.0.0.1:8000/v1"'
    )
    api_key_env: str | None = Field(
        default=None,
        min_length=1,
        description='the name of an environment variable, e.g. "MY_API_KEY"',
    )
    timeout_s: Float = Field(default=120.0, gt=0, description="a number of seconds > 0")
    max_concurrent: Int = Field(
        default=8, ge=1, description="an integer >= 1 (calls in flight at once)"
    )
    rpm: Float | None = Field(default=None, gt=0, description="a number > 0 (requests per minute)")

    @field_validator("api_base")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        # Refused here, not after a model call's retries spent on a URL that cannot connect.
        if value is None:
            return value
        try:
            parts = urlsplit(value)
            usable = parts.scheme in ("http", "https") and bool(parts.hostname)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            usable = False
        if not usable:
            raise ValueError("not an http:// or https:// URL with a host")
        return value


class ModelsSection(Section):
    """[models]: the model for each role, declared prices and endpoints, the call cache."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str = Field(
        default="local/smollm2",
        min_length=1,
        description='a litellm model name, e.g. "openai/gpt-4o"',
    )
    reflection: FromPython = Field(
        default="local/smollm2",
        description='a litellm model name, e.g. "openai/gpt-4o" (from Python, also a callable '
        "prompt -> reply, as gepa's reflection_lm takes)",
    )
    reflection_temperature: Float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="a number in [0, 2] (the reflection calls' temperature; empty: 0, and 0.8 "
        "for a redraw)",
    )
    reflection_max_tokens: Int | None = Field(
        default=None,
        ge=1,
        description="an integer >= 1 (the reflection reply's cap; empty: 512 for the short "
        "template, else the model's own)",
    )
    metric: str = Field(
        default="", description='a litellm model name, or "" to judge with the reflection model'
    )
    cache: str = Field(
        default=".skynet/cache.db",
        description='a file path for the call cache, or "" to keep it in memory',
    )
    prices: dict[str, PriceConfig] = Field(
        default_factory=dict,
        description='tables like [models.prices."NAME"] with input_per_mtok and output_per_mtok',
    )
    endpoints: dict[str, EndpointConfig] = Field(
        default_factory=dict,
        description='tables like [models.endpoints."NAME"] with api_base, api_key_env, ...',
    )

    @field_validator("reflection")
    @classmethod
    def _model_or_callable(cls, value: Any) -> Any:
        if is_python_object_text(value):
            raise ValueError(
                "the run recorded a Python callable here, which a file cannot hold; give it "
                'again from Python: skynet.optimize(..., resume=RUN, models={"reflection": fn})'
            )
        if isinstance(value, str) and value:
            return value
        if callable(value) and not isinstance(value, str):
            return value  # from Python: gepa's reflection_lm, a callable prompt -> reply
        raise ValueError("not a model name")


class TrackingConfig(Section):
    """[tracking]: where runs are logged as they go (skynet.tracking)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mlflow: str = Field(
        default="",
        description='an MLflow tracking URI, e.g. "http://127.0.0.1:5000"; empty: no live logging',
    )
    experiment: str = Field(
        default="",
        description='an MLflow experiment name, e.g. "capitals"; empty: the project folder\'s name',
    )


class Config(Section):
    """The whole of skynet.toml, validated. Build it with load_config().

    `project_dir` (the folder holding skynet.toml) is not part of the file; relative paths in
    the file are relative to it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: DataConfig = Field(description="a [data] section with inputs, outputs and path")
    artifact: ArtifactConfig = Field(
        default_factory=ArtifactConfig, description="an [artifact] section"
    )
    metric: MetricConfig = Field(default_factory=MetricConfig, description="a [metric] section")
    engine: EngineConfig = Field(default_factory=EngineConfig, description="an [engine] section")
    budget: BudgetConfig = Field(default_factory=BudgetConfig, description="a [budget] section")
    models: ModelsSection = Field(default_factory=ModelsSection, description="a [models] section")
    tracking: TrackingConfig = Field(
        default_factory=TrackingConfig, description="a [tracking] section"
    )

    _project_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @property
    def project_dir(self) -> Path:
        """The folder holding skynet.toml; relative paths in the file resolve against it."""
        return self._project_dir

    def __reduce__(self) -> tuple[Any, ...]:
        # Its class may hold scorer packages' sections: made again from their names.
        return (_unpickled, (_SECTIONS.get(type(self), ()), self.__getstate__()))

    def section(self, name: str) -> Any:
        """A scorer package's section, e.g. [judge], validated by the package's own model
        (skynet.packages); None when the file has none."""
        return None if name in Config.model_fields else getattr(self, name, None)

    def as_dict(self) -> dict[str, Any]:
        """The settings as a plain JSON-able dict (recorded with each run), defaults filled in."""
        return self.model_dump(mode="json")

    def models_config(self) -> ModelsConfig:
        """Build the runtime models configuration from [models].

        Returns:
            A skynet.models.ModelsConfig with one ModelSettings per model named under
            [models.endpoints] or [models.prices], and the cache path resolved against
            project_dir ("" keeps the cache in memory).

        Raises:
            ConfigError: an endpoint's api_key_env names an environment variable that is not set.
        """
        from skynet.models import ModelsConfig, ModelSettings, Price

        section = self.models
        settings: dict[str, ModelSettings] = {}
        for name in sorted(set(section.endpoints) | set(section.prices)):
            declared = section.prices.get(name)
            price = (
                Price(
                    input_per_mtok=declared.input_per_mtok, output_per_mtok=declared.output_per_mtok
                )
                if declared is not None
                else None
            )
            embedded = name.startswith("local/")
            if price is None and embedded:
                # The embedded model costs nothing; its cost is known, not unmeasured.
                price = Price(input_per_mtok=0, output_per_mtok=0)
            endpoint = section.endpoints.get(name)
            if endpoint is None:
                # One llama.cpp context per process: embedded calls queue one at a time.
                settings[name] = ModelSettings(max_concurrent=1 if embedded else 8, price=price)
                continue
            settings[name] = ModelSettings(
                api_base=endpoint.api_base,
                api_key=_api_key(name, endpoint),
                timeout_s=endpoint.timeout_s,
                max_concurrent=endpoint.max_concurrent,
                rpm=endpoint.rpm,
                price=price,
            )
        cache: Path | None = None
        if section.cache:
            cache = Path(section.cache)
            if not cache.is_absolute():
                cache = self.project_dir / cache
        return ModelsConfig(
            task=section.task,
            # A callable reflection model is called by the engine itself (EngineSettings.
            # reflection_lm): no model serves the role, so a call for it is refused by name.
            reflection=section.reflection if isinstance(section.reflection, str) else "",
            metric=section.metric,
            settings=settings,
            cache_path=cache,
        )


def _api_key(model: str, endpoint: EndpointConfig) -> str | None:
    if endpoint.api_key_env is None:
        return None
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise ConfigError(
            f"{CONFIG_FILE}: {_dotted(('models', 'endpoints', model, 'api_key_env'))} names the "
            f"environment variable '{endpoint.api_key_env}', which is not set; export "
            f"{endpoint.api_key_env}=<your key> before running, or remove api_key_env"
        )
    return key


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
        raise _config_error(exc, file, applied, model) from None
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
        raise _config_error(exc, Path(source), [], model) from None
    config._project_dir = Path(project_dir).absolute()
    return config


# -- the sections scorer packages own ---------------------------------------------------------


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


def config_model(raw: Mapping[str, Any]) -> type[Config]:
    """The Config model for `raw` (a file's tables, or a run's recorded config): Config with the
    sections of the scorer packages (skynet.packages) it may hold: every built-in package's, and
    a plugin package's when `raw` has its section or names it as the metric (a plugin is
    imported only when asked for)."""
    from skynet import registry

    wanted = set(registry.BUILTIN["package"])
    metric = raw.get("metric")
    named = metric.get("name") if isinstance(metric, Mapping) else None
    for key in [*raw, named]:
        if (
            isinstance(key, str)
            and key not in Config.model_fields
            and registry.is_known("package", key)
        ):
            wanted.add(key)
    return _with_sections(tuple(sorted(wanted)))


@functools.cache
def _with_sections(names: tuple[str, ...]) -> type[Config]:
    from skynet import registry

    fields: dict[str, Any] = {}
    for name in names:
        section = registry.load("package", name).section
        if section is not None and name not in Config.model_fields:
            fields[name] = (
                section | None,
                Field(default=None, description=f'a [{name}] section (for metric = "{name}")'),
            )
    if not fields:
        return Config
    model = create_model("Config", __base__=Config, __module__=__name__, **fields)
    _SECTIONS[model] = names
    return model


# A Config model with package sections -> the names it was made from (to make it again when a
# Config is unpickled in another process: a worker).
_SECTIONS: dict[type, tuple[str, ...]] = {}


def _unpickled(names: tuple[str, ...], state: Any) -> Config:
    model = _with_sections(names)
    config = model.__new__(model)
    config.__setstate__(state)
    return config


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
    rebuilt = ".".join(f'"{p}"' if not _BARE.fullmatch(p) else p for p in parts)
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
                f"{source}: {_dotted(parts[: depth + 1])} is a value, not a table, so it "
                f"has no key '{parts[depth + 1]}'; override {_dotted(parts[: depth + 1])} itself"
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


# -- turning a ValidationError into one ConfigError ---------------------------------------------


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE.fullmatch(part) else f'"{part}"'
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
    wanted = _dotted(loc)
    candidates = []
    for pattern in known:
        concrete = tuple(
            str(loc[i]) if part == "*" and i < len(loc) else ("NAME" if part == "*" else part)
            for i, part in enumerate(pattern)
        )
        candidates.append(_dotted(concrete))
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
    key = _dotted(loc)
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
        parent = _dotted(loc[:-1])
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


def _config_error(
    exc: ValidationError,
    file: Path,
    overridden: list[tuple[tuple[str, ...], str]],
    model: type[BaseModel],
) -> ConfigError:
    # An unknown key explains the errors it causes (a misspelt required key is also "missing").
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = tuple(str(p) for p in first["loc"])
    source = str(file)
    for key, given in overridden:
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
