"""skynet.toml's tables as pydantic models: each key's type, default, bounds and the fix its
description offers, and the checks across keys of one table.

Runtime settings are built from a Config by _runtime.py; the sections scorer packages add are
in _sections.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
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
    ValidationInfo,
    field_validator,
    model_validator,
)

from skynet.data import DEFAULT_SPLIT
from skynet.python_objects import is_python_object_text, recordable
from skynet.side_info import DEFAULT_MAX_SIDE_INFO_CHARS

if TYPE_CHECKING:
    from skynet.models import ModelsConfig

CONFIG_FILE = "skynet.toml"

# Fractions are compared with this slack: 0.7 + 0.2 + 0.1 is not exactly 1.0 in binary.
_SUM_TOLERANCE = 1e-6
_DEFAULT_SPLIT = {
    "train": DEFAULT_SPLIT.train,
    "val": DEFAULT_SPLIT.val,
    "test": DEFAULT_SPLIT.test,
}
_ARTIFACT_PATHS = {"prompt": "prompt.md", "dspy": "program.py", "code": "code.py"}


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
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="a table of a plugin kind's own settings, which the kind checks "
        "([artifact.options]; the built-in kinds take none)",
    )

    @model_validator(mode="after")
    def _options_for_plugins(self) -> ArtifactConfig:
        from skynet import registry

        if self.options and self.kind in registry.BUILTIN["artifact"]:
            raise ValueError(
                f"[artifact.options] is for a plugin kind's own settings; kind '{self.kind}' "
                "takes none: set its keys in [artifact] itself"
            )
        return self

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

    if isinstance(value, str) and not registry.runs_a_project(value):
        raise ValueError(f"no engine has this name; known: {', '.join(registry.engine_names())}")
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
    max_concurrent: Int | None = Field(
        default=None,
        ge=1,
        description="an integer >= 1 (calls in flight at once; unset: [engine] concurrency)",
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
        # Its class may hold scorer packages' sections: made again from their names. Imported
        # here: _sections builds its models on this class.
        from skynet.config._sections import SECTIONS, unpickled

        return (unpickled, (SECTIONS.get(type(self), ()), self.__getstate__()))

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
        # Imported here, as _runtime imports this module.
        from skynet.config._runtime import models_config

        return models_config(self)
