"""A project: the folder's config, data, metric and artifact, loaded and checked before any model
call, and what a run, an evaluation and a worker build from it (the model session, the
Evaluation).

The runner, the run session and the executors' workers all start from a Project; this module
imports none of them (an import-linter contract holds that), so a worker process loads a project
without the orchestrator.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skynet import registry
from skynet.artifacts.base import Artifact
from skynet.config import Config, load_config
from skynet.contract import CheckReport, Metric, check_metric, load_metric, metric_file_hash
from skynet.data import Dataset, load_dataset
from skynet.dspy_metric import fit_to_artifact
from skynet.errors import SkynetError
from skynet.evaluation import Evaluation
from skynet.models import Models, configure
from skynet.runs.store import RunStore

__all__ = [
    "Project",
    "current_metric_hash",
    "load_parts",
    "open_project",
    "self_test",
]


@dataclass(frozen=True, kw_only=True)
class Project:
    """A loaded project folder: config, data, metric and artifact, all checked."""

    dir: Path
    config: Config
    dataset: Dataset
    metric: Metric
    artifact: Artifact
    # Where runs.db, the run folders and the writer's lock go: the project's .skynet, or the
    # store a Python caller named (skynet.optimize(store=...)). None: dir / ".skynet".
    store: Path | None = None
    # What made the project: "" for a project folder, else the Python call ("skynet.optimize()"),
    # recorded with its runs so the CLI can say where a run's metric and rows live.
    made_in: str = ""
    # dspy.LMs a Python call gave as models (models={"reflection": dspy.LM(...)}): their models
    # are reached as they say (api_base and key, in memory, never recorded).
    lms: tuple[Any, ...] = ()

    @property
    def fingerprint(self) -> str:
        """What, besides a candidate's texts, decides its outputs (task model, settings)."""
        return self.artifact.fingerprint(self.config.artifact, self.config.models.task)

    @property
    def store_dir(self) -> Path:
        """The folder holding runs.db, the run folders and the writer's lock."""
        return self.store if self.store is not None else self.dir / ".skynet"

    @property
    def store_path(self) -> Path:
        return self.store_dir / "runs.db"

    def open_store(self) -> RunStore:
        return RunStore(self.store_path)

    def models(self) -> Models:
        """The model session a run or an evaluation makes its calls through, set as the
        process's (skynet.models.configure); a relative call-cache path is the project's.

        [budget] max_cost_usd holds it: every call reserves its worst case first. Refused here,
        before any call (a judge metric's self-test calls models): a role whose model has no
        known price under a money budget, and a model name no provider litellm knows.

        Raises:
            ConfigError: a role's model has no known price under a money budget, or an unknown
                model name.
        """
        models = configure(
            dataclasses.replace(
                self.config.models_config(), max_cost_usd=self.config.budget.max_cost_usd
            ),
            base_dir=self.dir,
        )
        models.check_budget_prices()
        models.check_names()
        return models

    def evaluation(self, models: Models, *, repeat: int | None = None) -> Evaluation:
        """The project's metric scoring its artifact's task, run through `models`.

        `repeat`: how many times each item is run (None: [artifact] repeat; a dry run's sample
        runs each item once).
        """
        return Evaluation(
            self.metric,
            self.artifact.task(models, self.config.artifact),
            repeat=self.config.artifact.repeat if repeat is None else repeat,
        )


def open_project(project_dir: Path, overrides: dict[str, Any] | None = None) -> Project:
    """Load and check everything a run needs, before any model call.

    Raises:
        ConfigError, DatasetError, ContractError: what is wrong, where, and the fix.
        JudgeUnvalidated: metric = "judge" and no validation record accepts the judge.
    """
    project_dir = project_dir.absolute()  # keep a symlinked folder as the user named it
    config = load_config(project_dir, overrides)
    dataset = load_dataset(config)
    metric, artifact = load_parts(project_dir, config, dataset, probe=True)
    return Project(
        dir=project_dir, config=config, dataset=dataset, metric=metric, artifact=artifact
    )


def load_parts(
    project_dir: Path, config: Config, dataset: Dataset, *, probe: bool = False
) -> tuple[Metric, Artifact]:
    """A project folder's metric and artifact, checked (a worker process loads its own).

    `probe`: import metric.py in a child process first, held to metric.import_time_s, so one
    that hangs or ends the process at import is an error (a worker loads what was probed).

    Raises:
        ConfigError, ContractError: what is wrong, where, and the fix.
    """
    metric = _project_metric(project_dir, config, dataset, probe=probe)
    # metric.time_s holds every metric to its time per call, metric.py or a built-in scorer.
    metric.limits = dataclasses.replace(metric.limits, time_s=config.metric.time_s)
    # The kind's loader (skynet.registry, group "skynet.artifacts") checks its own files.
    artifact = registry.load("artifact", config.artifact.kind)(project_dir, config, dataset)
    fit_to_artifact(metric, artifact)
    return metric, artifact


def _project_metric(
    project_dir: Path,
    config: Config,
    dataset: Dataset,
    *,
    verified: bool = True,
    probe: bool = False,
) -> Metric:
    """The project's metric: metric.py, a built-in scorer by name, or a scorer package's
    (skynet.packages: the judge, reference, or a plugin's), which builds it from the project.

    `verified=False` asks a package for its metric without refusing what a run would refuse
    (an unverified reference set), for reporting what is stale.
    """
    from skynet.packages import package_for

    package = package_for(config.metric.name)
    if package is not None:
        return package.metric(project_dir, config, dataset, verified=verified)
    if config.metric.name:
        from skynet.scorers import scorer_metric

        return scorer_metric(config.metric.name, config.metric.options)
    return load_metric(
        project_dir / config.metric.path,
        import_time_s=config.metric.import_time_s if probe else None,
        outputs=config.data.outputs,
    )


def current_metric_hash(project_dir: Path) -> str | None:
    """The hash results would be graded under now, or None when the project cannot say.

    For `reference` the reference set is hashed as it is, verified or not, so `skynet show` can
    say that results are stale after a reference was edited (before it is verified again).

    Reading runs (show, view, export) asks this: it never imports the project's metric.py (a
    downloaded project's code would run when someone looks at its runs); the file's bytes are
    hashed, as load_metric hashes them. A built-in scorer or a scorer package is installed code,
    built from skynet.toml's options.
    """
    try:
        config = load_config(project_dir)
        if not config.metric.name:
            return metric_file_hash(project_dir / config.metric.path)
        return _project_metric(
            project_dir, config, load_dataset(config), verified=False
        ).source_hash
    except SkynetError:
        return None


def self_test(project: Project) -> CheckReport:
    """The metric's self-test on the items a run will use (train and val), as far as
    [metric] self_test asks."""
    return check_metric(
        project.metric,
        [*project.dataset.train, *project.dataset.val],
        mode=project.config.metric.self_test,
        made=getattr(project.artifact, "output_fields", None),
    )
