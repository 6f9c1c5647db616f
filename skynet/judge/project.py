"""The project's judge: its [judge] section as a judge and as the run's metric, and a blind sample
of a run's outputs to label. The judge itself (skynet.scorers.judge) knows no project, run store
or config file; this module joins it to them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skynet.config import Config
from skynet.contract import Metric
from skynet.errors import ConfigError, DatasetError, JudgeUnvalidated
from skynet.judge.section import JudgeSection
from skynet.scorers.exact import output_text, sort_output
from skynet.scorers.judge import (
    HOW_TO_VALIDATE,
    JudgeConfig,
    JudgeThresholds,
    JudgeValidation,
    judge_config,
    judge_metric,
    judge_problems,
    judge_scorer,
)

__all__ = [
    "collect_labels",
    "judge_section",
    "label_column",
    "project_judge",
    "project_judge_metric",
]


def judge_section(config: Config) -> JudgeSection | None:
    """The [judge] section, or None when the file has none."""
    section = config.section("judge")
    assert section is None or isinstance(section, JudgeSection)
    return section


def project_judge(config: Config) -> tuple[JudgeConfig, JudgeThresholds, Path]:
    """The [judge] section as (JudgeConfig, thresholds, validation record path).

    The model defaults to the project's metric model (else its reflection model).

    Raises:
        ConfigError: skynet.toml has no [judge] section, or it is refused by judge_config.
    """
    section = judge_section(config)
    if section is None:
        raise ConfigError(
            f'{config.project_dir / "skynet.toml"}: metric = "judge" needs a [judge] section '
            'with at least instructions = "..." (and model, grades, positive, orders, label, '
            'validation; from Python: sections={"judge": {...}}); see docs/scorers.md'
        )
    model = section.model or config.models.metric or config.models.reflection
    try:
        judge = judge_config(
            model,
            section.instructions,
            section.mode,
            section.positive,
            tuple(section.orders),
            grades=tuple(section.grades),
            temperature=section.temperature,
            max_tokens=section.max_tokens,
        )
    except ConfigError as exc:
        raise ConfigError(
            f"{config.project_dir / 'skynet.toml'}: [judge]: {str(exc).removeprefix('judge_config: ')}"
        ) from None
    thresholds = JudgeThresholds(**section.thresholds.model_dump())
    path = Path(section.validation)
    if not path.is_absolute():
        path = config.project_dir / path
    return judge, thresholds, path


def project_judge_metric(config: Config) -> Metric:
    """The metric `metric = "judge"` names: the [judge] section's judge, if its record accepts it.

    Raises:
        ConfigError: no [judge] section, or a bad one; a record that cannot be read.
        JudgeUnvalidated: no record at the validation path, or one that does not accept this
            judge (another config_hash, thresholds not met); the message says how to validate.
    """
    judge, thresholds, path = project_judge(config)
    if not path.exists():
        raise JudgeUnvalidated(
            f"{path}: no judge validation record, so the judge may not score; {HOW_TO_VALIDATE}"
        )
    record = JudgeValidation.load(path)
    problems = judge_problems(record, judge, thresholds)
    if problems:
        raise JudgeUnvalidated(
            f"{path}: the judge is not validated: {'; '.join(problems)}; {HOW_TO_VALIDATE}"
        )
    section = judge_section(config)
    scorer = judge_scorer(
        judge, record, label=section.label if section else None, thresholds=thresholds
    )
    return judge_metric(scorer)


# -- labelling: collect a blind sample, validate against it --------------------------------------


def label_column(config: Config) -> str:
    section = judge_section(config)
    if section is not None and section.label:
        return section.label
    outputs = config.data.outputs
    if len(outputs) != 1:
        raise ConfigError(
            f"{config.project_dir / 'skynet.toml'}: data.outputs has {len(outputs)} columns; "
            'name the one holding the label with [judge] label = "..."'
        )
    return outputs[0]


def collect_labels(
    config: Config, run_id: str | None = None, *, n: int = 50, seed: int = 0
) -> tuple[str, list[dict[str, Any]]]:
    """A seeded blind sample of a run's recorded outputs for a person to label.

    Each row: {"id", "input", "output", "reference", "human": null}; no judge verdict. Outputs
    the judge never sees (no text, or reporting their own failure) are left out, and each
    (item, output) appears once.

    Returns:
        (the run's id, the rows).

    Raises:
        ConfigError: no runs, an unknown run, n < 1, or no output to label.
    """
    import random

    from skynet.data import load_dataset
    from skynet.runs.store import RunStore, runs_db_path

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"--n {n!r}: give how many outputs to draw, an int >= 1")
    path = runs_db_path(config.project_dir)
    if not path.exists():
        raise ConfigError(
            f"{path.parent}: no runs recorded here; `skynet run` one first (with metric.py or "
            'metric = "exact"), then collect its outputs'
        )
    store = RunStore(path)
    try:
        if run_id is None:
            latest = store.latest_run()
            if latest is None:
                raise ConfigError("no runs recorded yet; `skynet run` one first")
            run_id = latest.id
        store.get_run(run_id)
        rows = store.evaluations(run_id)
    finally:
        store.close()
    dataset = load_dataset(config)
    items = {i.id: i for split in (dataset.train, dataset.val, dataset.test) for i in split}
    label = label_column(config)
    seen: set[tuple[str, str]] = set()
    pool: list[dict[str, Any]] = []
    for row in rows:
        item = items.get(row.item_id)
        if item is None or row.error_kind == "task" or row.output_is_repr:
            continue
        if sort_output(row.output) is not None:
            continue
        key = (row.item_id, json.dumps(row.output, sort_keys=True, ensure_ascii=False))
        if key in seen:
            continue
        seen.add(key)
        reference = (item.expected or {}).get(label)
        if reference is None:
            raise DatasetError(
                f"item '{item.id}' has no output column {label!r}; set [judge] label to the "
                "column holding the answer"
            )
        pool.append(
            {
                "id": item.id,
                "input": item.input,
                "output": output_text(row.output),
                "reference": reference,
                "human": None,
            }
        )
    if not pool:
        raise ConfigError(f"run {run_id} recorded no output with text to label; run the task first")
    chosen = random.Random(seed).sample(range(len(pool)), min(n, len(pool)))
    return run_id, [pool[i] for i in sorted(chosen)]
