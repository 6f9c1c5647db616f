"""Scorer packages: a scorer that needs a project folder brings its own skynet.toml section, its own
`skynet` subcommands and its own section of the run report, so that neither skynet.config, cli.py,
the runner nor the report names it.

The built-in judge (skynet.judge: [judge], `skynet judge collect / validate`, the judge-accuracy
table) and reference (skynet.reference: `skynet reference verify / show`, the verified reference
set) are two. A plugin declares one under the entry-point group skynet.packages, by the metric
name it answers to:

    [project.entry-points."skynet.packages"]
    my-scorer = "my_package.project:PACKAGE"

and a project with `metric = "my-scorer"` builds its metric through PACKAGE.metric, accepts a
[my-scorer] section validated by PACKAGE.section, and `skynet show` adds PACKAGE.report's section.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pydantic import BaseModel

    from skynet.config import Config
    from skynet.contract import Metric
    from skynet.data import Dataset
    from skynet.gain import Gain
    from skynet.runs.store import EvaluationRow, RunRow

__all__ = [
    "ReportSection",
    "ReportView",
    "ScorerPackage",
    "add_commands",
    "package_for",
    "package_gain",
]


@dataclass(frozen=True, kw_only=True)
class ReportView:
    """What a package's report section is computed from.

    Attributes:
        run: the run reported.
        project_dir: the project folder (where the package's own files are), or None when the
            run was made from Python with no folder.
        evaluations: the evaluations the report counts (under the metric hash it shows).
        shown: (role, candidate id) of the candidates the report holds side by side:
            ("baseline", seed) and ("best", best), either id None when there is none.
        items: split -> the ids of the items each candidate's score on that split is over.
    """

    run: RunRow
    project_dir: Path | None
    evaluations: list[EvaluationRow]
    shown: list[tuple[str, str | None]]
    items: dict[str, set[str]]


@dataclass(frozen=True, kw_only=True)
class ReportSection:
    """A section of the report, rendered as text and as HTML by skynet.runs.report.

    Attributes:
        title: the heading.
        header: the table's column names (no table when there are no rows).
        rows: the table's rows, as text.
        text_columns: how many leading columns are text (left-aligned); the rest are figures.
        notes: sentences shown under the table, each on its own line.
    """

    title: str
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    text_columns: int = 1
    notes: tuple[str, ...] = field(default=())


class ScorerPackage(Protocol):
    """A scorer joined to a project folder.

    Attributes:
        name: the metric name it answers to (`metric = NAME`); its section is [NAME].
        section: the pydantic model of its skynet.toml section, or None for no section. It is
            validated with the rest of the file: the same messages, naming the dotted key.
    """

    name: str
    section: type[BaseModel] | None

    def metric(
        self, project_dir: Path, config: Config, dataset: Dataset, *, verified: bool
    ) -> Metric:
        """The run's metric. `verified=False` asks for the metric as the files are, without
        refusing what a run would refuse (skynet show uses it to say what is stale).

        Raises:
            SkynetError: what is missing or wrong in the project, and the fix.
        """
        ...

    def add_commands(self, commands: argparse._SubParsersAction[Any]) -> None:
        """Adds the package's `skynet` subcommands; each sets `func` (args -> exit code)."""
        ...

    def report(self, view: ReportView) -> ReportSection | None:
        """The package's section of the run report, or None for none."""
        ...


def package_gain(
    config: Mapping[str, Any],
    project_dir: Path | None,
    a: list[float],
    b: list[float],
    *,
    split: str,
    val_estimate: float | None,
) -> Gain | None:
    """The gain of b over a (one item's scores at each index) as the run's scorer package
    measures it, or None for the plain paired one (skynet.gain.paired_gain).

    A package whose scores carry a known error (the judge: its validation record) corrects
    the gain for it through an optional method `gain(config, project_dir, a, b, *, split,
    val_estimate)` (config: the run's config as recorded); packages without one are left to
    the plain figure.
    """
    from skynet.errors import ConfigError

    name = (config.get("metric") or {}).get("name")
    try:
        package = package_for(name if isinstance(name, str) else None)
    except ConfigError:  # said in the package's report section
        return None
    measure = getattr(package, "gain", None)
    if measure is None:
        return None
    return measure(config, project_dir, a, b, split=split, val_estimate=val_estimate)


def package_for(metric_name: str | None) -> ScorerPackage | None:
    """The scorer package a metric name belongs to, or None (a plain scorer, or metric.py).

    Raises:
        ConfigError: a plugin package of that name fails to import.
    """
    from skynet import registry

    if not metric_name or not registry.is_known("package", metric_name):
        return None
    return registry.load("package", metric_name)


def add_commands(commands: argparse._SubParsersAction[Any]) -> list[str]:
    """Adds every package's subcommands; returns one line for each plugin that failed to load
    (its commands are missing; the rest of the CLI works)."""
    from skynet import registry
    from skynet.errors import ConfigError

    problems: list[str] = []
    for name in registry.names("package"):
        try:
            registry.load("package", name).add_commands(commands)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems
