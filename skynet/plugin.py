"""Everything a plugin needs, from one module: `from skynet.plugin import Artifact, Engine, ...`.

A plugin (an artifact kind, an engine, a scorer or a scorer package, found by name through its
entry point: skynet.registry) imports what it builds on from here, not from Skynet's modules,
which may move (docs/architecture.md). Each name is imported when first used, so a plugin that
needs the engine interface does not load the scorers.

| to write             | names                                                            |
|----------------------|------------------------------------------------------------------|
| an artifact kind     | Artifact, Candidate, TaskRunner, Config, Dataset, Item           |
| an engine            | Engine, EngineContext, EngineOutcome, EngineSettings, Result,    |
|                      | ProgramRun, engine_context (a context with no run, for tests)    |
| a planner            | PlanRequest, Planned                                             |
| a scorer             | Scorer, GradedScorer, Verdict, Reply, Call, metric_of            |
| a scorer package     | ScorerPackage, ReportSection, ReportView, Section, load_config,  |
|                      | EXIT_OK, EXIT_USER, folder_of, with_dir                          |
| every one            | ConfigError, ContractError                                       |
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skynet.artifacts.base import Artifact, Candidate, TaskRunner
    from skynet.commands import EXIT_OK, EXIT_USER, folder_of, with_dir
    from skynet.config import Config, Section, load_config
    from skynet.data import Dataset, Item
    from skynet.engine import (
        Engine,
        EngineContext,
        EngineOutcome,
        EngineSettings,
        Planned,
        PlanRequest,
        ProgramRun,
    )
    from skynet.errors import ConfigError, ContractError
    from skynet.evaluation import Result
    from skynet.packages import ReportSection, ReportView, ScorerPackage
    from skynet.scorers.base import Call, GradedScorer, Reply, Scorer, Verdict
    from skynet.scorers.registry import metric_of
    from skynet.testing.engine import engine_context

# name -> the module that holds it
_HOMES = {
    "Artifact": "skynet.artifacts.base",
    "Candidate": "skynet.artifacts.base",
    "TaskRunner": "skynet.artifacts.base",
    "Config": "skynet.config",
    "Section": "skynet.config",
    "load_config": "skynet.config",
    "Dataset": "skynet.data",
    "Item": "skynet.data",
    "Engine": "skynet.engine",
    "EngineContext": "skynet.engine",
    "EngineOutcome": "skynet.engine",
    "EngineSettings": "skynet.engine",
    "ProgramRun": "skynet.engine",
    "PlanRequest": "skynet.engine",
    "Planned": "skynet.engine",
    "engine_context": "skynet.testing.engine",
    "Result": "skynet.evaluation",
    "Scorer": "skynet.scorers.base",
    "GradedScorer": "skynet.scorers.base",
    "Verdict": "skynet.scorers.base",
    "Reply": "skynet.scorers.base",
    "Call": "skynet.scorers.base",
    "metric_of": "skynet.scorers.registry",
    "ScorerPackage": "skynet.packages",
    "ReportSection": "skynet.packages",
    "ReportView": "skynet.packages",
    "EXIT_OK": "skynet.commands",
    "EXIT_USER": "skynet.commands",
    "folder_of": "skynet.commands",
    "with_dir": "skynet.commands",
    "ConfigError": "skynet.errors",
    "ContractError": "skynet.errors",
}

__all__ = [
    "Artifact",
    "Call",
    "Candidate",
    "Config",
    "ConfigError",
    "ContractError",
    "Dataset",
    "EXIT_OK",
    "EXIT_USER",
    "Engine",
    "EngineContext",
    "EngineOutcome",
    "EngineSettings",
    "PlanRequest",
    "Planned",
    "ProgramRun",
    "engine_context",
    "GradedScorer",
    "Item",
    "Reply",
    "ReportSection",
    "ReportView",
    "Result",
    "Scorer",
    "ScorerPackage",
    "Section",
    "TaskRunner",
    "Verdict",
    "folder_of",
    "load_config",
    "metric_of",
    "with_dir",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'skynet.plugin' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return __all__
