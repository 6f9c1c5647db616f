"""One registry for artifact kinds, engines, scorers and scorer packages: the built-ins by name,
and third-party plugins found through Python entry points, so a plugin needs no edit to Skynet.

A plugin package declares, in its pyproject.toml:

    [project.entry-points."skynet.artifacts"]
    my-kind = "my_package.kind:from_project"      # (project_dir, config, dataset) -> an Artifact

    [project.entry-points."skynet.engines"]
    my-engine = "my_package.engine:MyEngine"      # a class implementing skynet.engine.Engine

    [project.entry-points."skynet.planners"]
    my-planner = "my_package.plan:plan"           # a skynet.engine.Planner: PlanRequest -> Planned,
                                                  # named in [engine] name like an engine

    [project.entry-points."skynet.scorers"]
    my-scorer = "my_package.scorer:MyScorer"      # a class implementing the Scorer protocol

    [project.entry-points."skynet.packages"]
    my-scorer = "my_package.project:PACKAGE"      # a skynet.packages.ScorerPackage: the scorer's
                                                  # own skynet.toml section, commands, report

Once it is installed, `[artifact] kind = "my-kind"`, `[engine] name = "my-engine"` and `metric = "my-scorer"` find it (also
`skynet.optimize(engine="my-engine", metric="my-scorer")`). A built-in name cannot be taken by a
plugin; an unknown name lists every known one.

Entry points are read when a name is looked up, not at import, so `import skynet` stays fast and a
package installed in a running notebook is found.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any

from skynet.errors import ConfigError

__all__ = [
    "GROUPS",
    "BUILTIN",
    "names",
    "load",
    "is_known",
    "engine_names",
    "runs_a_project",
    "is_planner",
]

# kind -> entry-point group
GROUPS = {
    "artifact": "skynet.artifacts",
    "engine": "skynet.engines",
    "planner": "skynet.planners",
    "scorer": "skynet.scorers",
    "package": "skynet.packages",
}

# kind -> name -> "module:attribute"; a new built-in adds one line here.
BUILTIN: dict[str, dict[str, str]] = {
    # An artifact kind's loader: from_project(project_dir, config, dataset) -> Artifact
    # (skynet.artifacts.base).
    "artifact": {
        "prompt": "skynet.artifacts.prompt:from_project",
        "dspy": "skynet.artifacts.dspy_program:from_project",
        "code": "skynet.artifacts.code:from_project",
    },
    "engine": {
        "gepa": "engines.gepa:GepaEngine",
        "dspy-gepa": "engines.dspy_gepa:DspyGepaEngine",
        "gepa-async": "engines.async_gepa:AsyncGepaEngine",
    },
    # A planner chooses the engine that runs, its budget and options (skynet.engine.Planner);
    # [engine] name takes it like an engine's name.
    "planner": {
        "auto": "engines.auto:planner",
    },
    "scorer": {
        "contains": "skynet.scorers.contains:Contains",
        "exact": "skynet.scorers.exact:Exact",
        "reference": "skynet.scorers.reference:ReferenceScorer",
        "xlam-tool-call": "skynet.scorers.xlam:XlamToolCall",
    },
    # A scorer that needs a project folder (skynet.packages.ScorerPackage), by its metric name.
    "package": {
        "judge": "skynet.judge:PACKAGE",
        "reference": "skynet.reference:PACKAGE",
    },
}

# Where each kind's name is set, for the messages.
_SET_BY = {
    "artifact": "[artifact] kind in skynet.toml",
    "engine": "[engine] name in skynet.toml, --engine, or engine= in skynet.optimize()",
    "planner": "[engine] name in skynet.toml, --engine, or engine= in skynet.optimize()",
    "scorer": "metric = NAME in skynet.toml, or metric= in skynet.optimize()",
    "package": "metric = NAME in skynet.toml",
}


def _plugins(kind: str) -> dict[str, metadata.EntryPoint]:
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=GROUPS[kind]):
        if ep.name not in BUILTIN[kind]:  # a built-in name stays the built-in's
            found.setdefault(ep.name, ep)
    return found


def names(kind: str) -> list[str]:
    """Every name of `kind` (a key of GROUPS): the built-ins, then the plugins, sorted."""
    return sorted(BUILTIN[kind]) + sorted(_plugins(kind))


def is_known(kind: str, name: str) -> bool:
    return name in BUILTIN[kind] or name in _plugins(kind)


def engine_names() -> list[str]:
    """What [engine] name takes: the planners (Auto), then the engines."""
    return names("planner") + names("engine")


def runs_a_project(name: str) -> bool:
    """Whether [engine] name = `name` names a planner or an engine."""
    return name in BUILTIN["engine"] or is_planner(name) or is_known("engine", name)


def is_planner(name: str) -> bool:
    """Whether [engine] name = `name` names a planner (Auto) rather than an engine. A built-in
    name answers without reading the entry points (a few ms each time)."""
    if name in BUILTIN["planner"]:
        return True
    return name not in BUILTIN["engine"] and name in _plugins("planner")


def load(kind: str, name: str) -> Any:
    """The object registered as `name` (a class or factory), imported on demand.

    Raises:
        ConfigError: no such name (the message lists the known ones and how plugins register),
            or a plugin's entry point fails to import (named, with the package's error).
    """
    target = BUILTIN[kind].get(name)
    if target is not None:
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)
    ep = _plugins(kind).get(name)
    if ep is None:
        raise ConfigError(unknown(kind, name))
    try:
        return ep.load()
    except Exception as exc:
        dist = getattr(ep, "dist", None)
        package = f" (package {dist.name})" if dist is not None else ""
        raise ConfigError(
            f"the {kind} plugin '{name}'{package} failed to load from {ep.value}: "
            f"{type(exc).__name__}: {exc}; fix or reinstall that package"
        ) from exc


def unknown(kind: str, name: str) -> str:
    """The message for a name of `kind` no one registered."""
    return (
        f"unknown {kind} '{name}'; known {kind}s: {', '.join(names(kind))} ({_SET_BY[kind]}; a "
        f'plugin registers more under the entry-point group "{GROUPS[kind]}")'
    )
