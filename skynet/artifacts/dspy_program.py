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
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skynet.errors import CandidateFailed, ConfigError

__all__ = ["DspyArtifact", "load_program"]


class ProgramFailed(CandidateFailed):
    """The program raised on one item (e.g. DSPy could not parse the model's reply)."""


@dataclass(frozen=True, slots=True)
class DspyArtifact:
    program: Any
    path: Path
    max_tokens: int = 256
    temperature: float = 0.0

    @property
    def components(self) -> dict[str, str]:
        return {name: p.signature.instructions for name, p in self.program.named_predictors()}

    def with_candidate(self, candidate: dict[str, str]) -> Any:
        """A copy of the program whose predictors carry the candidate's instructions."""
        program = copy.deepcopy(self.program)
        for name, predictor in program.named_predictors():
            if name in candidate:
                predictor.signature = predictor.signature.with_instructions(candidate[name])
        return program

    def run(self, candidate: dict[str, str], input: dict[str, Any], models: Any) -> Any:
        import dspy

        from skynet.models.dspy_lm import SkynetLM

        program = self.with_candidate(candidate)
        lm = SkynetLM(models, max_tokens=self.max_tokens, temperature=self.temperature)
        try:
            with dspy.context(lm=lm):
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

    def save(self, candidate: dict[str, str], path: Path) -> None:
        self.with_candidate(candidate).save(str(path))


def load_program(path: Path, *, max_tokens: int = 256, temperature: float = 0.0) -> DspyArtifact:
    """Import program.py and take its `program` or `build()`.

    Raises:
        ConfigError: the file is missing, fails to import, or has no dspy.Module.
    """
    import dspy

    if not path.is_file():
        raise ConfigError(f"{path}: no such program file; set [artifact] path in skynet.toml")
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
