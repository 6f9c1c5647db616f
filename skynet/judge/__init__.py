"""The LLM judge joined to a project; the judge itself is skynet.scorers.judge, which knows no
project.

`metric = "judge"` scores with the judge the [judge] section describes, once its validation
record accepts it; `skynet judge collect / validate` make that record from blind human labels;
the report shows the judge's raw and PPI-corrected accuracy.

This is a scorer package (skynet.packages): skynet.config, the CLI and the report learn of it
through the registry only.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skynet.judge.section import JudgeSection, JudgeThresholdsConfig

if TYPE_CHECKING:
    from skynet.config import Config
    from skynet.contract import Metric
    from skynet.data import Dataset
    from skynet.gain import Gain
    from skynet.packages import ReportSection, ReportView

__all__ = ["PACKAGE", "JudgePackage", "JudgeSection", "JudgeThresholdsConfig"]


class JudgePackage:
    name = "judge"
    section = JudgeSection

    def metric(
        self, project_dir: Path, config: Config, dataset: Dataset, *, verified: bool
    ) -> Metric:
        # The judge scores only when its validation record accepts it: JudgeUnvalidated
        # otherwise (verified or not: an unvalidated judge's hash says nothing stale).
        from skynet.judge.project import project_judge_metric

        return project_judge_metric(config)

    def add_commands(self, commands: argparse._SubParsersAction[Any]) -> None:
        from skynet.judge.commands import add_commands

        add_commands(commands)

    def report(self, view: ReportView) -> ReportSection | None:
        from skynet.judge.report import judge_section

        return judge_section(view)

    def gain(
        self,
        config: Mapping[str, Any],
        project_dir: Path | None,
        a: list[float],
        b: list[float],
        *,
        split: str,
        val_estimate: float | None,
    ) -> Gain:
        """The gain in true accuracy: the judge's paired gain corrected for the error its
        validation record measured (skynet.gain.judge_gain)."""
        from skynet.judge.report import judge_gain_section

        return judge_gain_section(config, project_dir, a, b, split=split, val_estimate=val_estimate)


PACKAGE = JudgePackage()
