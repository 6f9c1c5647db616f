"""The DSPy program artifact: program.py exposes `program` (a dspy.Module) or `build()`.

A candidate is the instructions of each of the program's predictors, by predictor name. Running
a candidate on an item: a copy of the program with those instructions, called with the item's
input columns as keyword arguments, its model calls through SkynetLM (so the meter sees them).
The output for the metric is the single output field's value, or a dict of the output fields
when there are several. The best candidate is saved in DSPy's own format (`program.save`), which
loads back with dspy alone: `build().load(path)`.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from skynet.errors import ConfigError, ProgramFailed
from skynet.textfile import read_bytes

if TYPE_CHECKING:
    from skynet.artifacts.base import TaskRunner
    from skynet.config import Config
    from skynet.data import Dataset

__all__ = ["DspyArtifact", "from_project", "load_program"]


@dataclass(frozen=True, slots=True)
class DspyArtifact:
    """A DSPy program. `names` maps a predictor's name to the candidate's component name (a
    prompt run as a program keeps its own section name); `prepare` turns an item's input into
    the program's keyword arguments (identity when None). `lm`: the dspy.configure(lm=...) LM
    that is the task model (skynet.optimize), held so the task model is reached as it says (its
    api_base and key, in memory, never recorded), as take_over's LMs are."""

    kind: ClassVar[str] = "dspy"
    label: ClassVar[str] = "program"
    best_file: ClassVar[str] = "best_program.json"
    uses_task_model: ClassVar[bool] = True

    program: Any
    path: Path | None
    max_tokens: int = 256
    temperature: float = 0.0
    names: Mapping[str, str] = field(default_factory=dict)
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    lm: Any = field(default=None, repr=False, compare=False)

    def component(self, predictor_name: str) -> str:
        return self.names.get(predictor_name, predictor_name)

    def candidate_of(
        self, module: Any, rename: Callable[[str], str] = lambda n: n
    ) -> dict[str, str]:
        """The instructions of `module`'s predictors, by component name."""
        return {
            self.component(rename(n)): p.signature.instructions
            for n, p in module.named_predictors()
        }

    @property
    def components(self) -> dict[str, str]:
        return self.candidate_of(self.program)

    @property
    def output_fields(self) -> tuple[str, ...]:
        """Every output field of the program's predictors, in order: the fields its outputs can
        carry (the self-test's answer key is made of these, not of the Example's labels, when
        the two share none)."""
        fields: dict[str, None] = {}
        for _, predictor in self.program.named_predictors():
            fields.update(dict.fromkeys(predictor.signature.output_fields))
        return tuple(fields)

    def with_candidate(self, candidate: dict[str, str]) -> Any:
        """A copy of the program whose predictors carry the candidate's instructions."""
        program = copy.deepcopy(self.program)
        for name, predictor in program.named_predictors():
            component = self.component(name)
            if component in candidate:
                predictor.signature = predictor.signature.with_instructions(candidate[component])
        return program

    def arguments(self, input: dict[str, Any]) -> dict[str, Any]:
        return self.prepare(input) if self.prepare is not None else input

    def run(self, candidate: dict[str, str], input: dict[str, Any], models: Any) -> Any:
        import dspy

        from skynet.models.dspy_lm import SkynetLM, adopt, take_over, watch

        input = self.arguments(input)
        program = self.with_candidate(candidate)
        if self.lm is not None:
            adopt(self.lm, models)  # a worker's own models too (done once per session)
        # The program's own LMs (set_lm, an LM attribute) take Skynet's path too, as task calls;
        # one that cannot (a custom BaseLM) is seen and recorded as unmeasured.
        take_over(program, models, "task")
        lm = SkynetLM(models, max_tokens=self.max_tokens, temperature=self.temperature)
        try:
            with dspy.context(lm=lm), watch(models, "task"):
                prediction = program(**input)
        except Exception as exc:
            from skynet.errors import ModelError

            if isinstance(exc, ModelError):
                raise
            raise ProgramFailed(f"the program raised {type(exc).__name__}: {exc}") from exc
        fields = dict(prediction.toDict()) if hasattr(prediction, "toDict") else prediction
        if isinstance(fields, dict) and len(fields) == 1:
            return next(iter(fields.values()))
        return fields

    def check_models(self, models: Any) -> None:
        """Before any call: the configured LM's model and the program's own LMs are reachable
        through `models` (under a money budget, each has a known price).

        Raises:
            ConfigError: under a money budget, an LM of the program has no known price.
        """
        from skynet.models.dspy_lm import adopt, take_over

        if self.lm is not None:
            adopt(self.lm, models)
        take_over(self.with_candidate({}), models, "task")

    def save(self, candidate: dict[str, str], path: Path) -> None:
        """DSPy's own format: loads back with dspy alone, `build().load(path)`."""
        self.with_candidate(candidate).save(str(path))

    @property
    def isolation(self) -> str | None:
        return None  # the program is the user's own code, imported like metric.py

    @property
    def unsandboxed(self) -> bool:
        return False

    def fingerprint(self, settings: Any, task_model: str | None) -> str:
        return json.dumps(["dspy", task_model, settings.max_tokens, settings.temperature])

    def task(self, models: Any, settings: Any) -> TaskRunner:
        return lambda candidate, input: self.run(candidate, input, models)

    def render(self, candidate: dict[str, str]) -> str:
        return json.dumps(candidate, indent=2, ensure_ascii=False)

    def read_candidate(
        self, path: Path, *, inputs: list[str], key: str, missing: str
    ) -> dict[str, str]:
        """A program saved with DSPy's `save` (e.g. a run's best_program.json)."""
        read_bytes(path, what="candidate", key=key, missing=missing)
        program = self.with_candidate({})
        try:
            program.load(str(path))
        except Exception as exc:
            raise ConfigError(
                f"{path}: not a program saved by DSPy for this program ({exc})"
            ) from exc
        return self.candidate_of(program)


def load_program(path: Path, *, max_tokens: int = 256, temperature: float = 0.0) -> DspyArtifact:
    """Import program.py and take its `program` or `build()`.

    Raises:
        ConfigError: the file is missing, fails to import, or has no dspy.Module.
    """
    import dspy

    key = "artifact.path in skynet.toml"
    # Read first, so a missing, unreadable or directory path says so before the import.
    read_bytes(path, what="program", key=key, missing=f"no such program file; set {key}")
    name = "skynet_user_program_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ConfigError(
            f"{path}: importing the program raised {type(exc).__name__}: {exc}"
        ) from exc
    program = getattr(module, "program", None)
    if program is None and callable(getattr(module, "build", None)):
        program = module.build()
    if not isinstance(program, dspy.Module):
        raise ConfigError(
            f"{path}: expose `program` (a dspy.Module) or `build()` returning one, e.g. "
            "program = dspy.Predict('question -> answer')"
        )
    if not list(program.named_predictors()):
        raise ConfigError(f"{path}: the program has no predictors, so nothing to optimize")
    return DspyArtifact(program=program, path=path, max_tokens=max_tokens, temperature=temperature)


def as_dspy_program(artifact: Any, settings: Any) -> DspyArtifact:
    """An artifact as a DSPy program, for an engine that runs programs itself (dspy-gepa): a
    program is itself; a one-section prompt becomes a dspy.Predict (prompt_as_program) under
    [artifact] `settings` (max_tokens, temperature).

    Raises:
        ConfigError: a kind that cannot run as a DSPy program, or a prompt of several sections.
    """
    if isinstance(artifact, DspyArtifact):
        return artifact
    if hasattr(artifact, "user_template") and hasattr(artifact, "components"):
        return prompt_as_program(
            artifact, max_tokens=settings.max_tokens, temperature=settings.temperature
        )
    raise ConfigError(
        f"engine 'dspy-gepa' runs DSPy programs and prompts, not a {type(artifact).__name__}; "
        "use engine 'gepa' (or 'auto')"
    )


def prompt_as_program(prompt: Any, *, max_tokens: int, temperature: float) -> DspyArtifact:
    """A one-section prompt as a dspy.Predict, so dspy-gepa can optimize it: its section is the
    predictor's instructions, its user template (filled in per item) the one input field.

    Raises:
        ConfigError: the prompt has several sections to optimize.
    """
    import dspy

    if len(prompt.components) != 1:
        # A prompt from Python (skynet.optimize's seed=) has no file to name.
        where, engine = (
            (prompt.path, "engine 'gepa'")
            if prompt.path is not None
            else ("skynet.optimize(): seed=", 'engine={"name": "gepa"}')
        )
        raise ConfigError(
            f"{where}: a prompt with {len(prompt.components)} sections to optimize cannot "
            f"run under dspy-gepa (one predictor, one instruction); use {engine}"
        )
    ((section, text),) = prompt.components.items()
    signature: Any = dspy.Predict("request -> output").signature
    signature = signature.with_instructions(text)
    template = prompt.user_template
    return DspyArtifact(
        program=dspy.Predict(signature),
        path=prompt.path,
        max_tokens=max_tokens,
        temperature=temperature,
        names={"self": section},
        prepare=lambda input: {"request": template.format_map(input)},
    )


def from_project(project_dir: Path, config: Config, dataset: Dataset) -> DspyArtifact:
    """[artifact] kind = "dspy": the project's program.py."""
    art = config.artifact
    return load_program(
        project_dir / art.path, max_tokens=art.max_tokens, temperature=art.temperature
    )
