"""The `reference` scorer joined to a project: it grades against the project's expected outputs
only once a person has reviewed them (`skynet reference verify` writes reference.verified.json);
`skynet reference show` says whether they still are; the report names the reviewed set. The
scorer itself is skynet.scorers.reference, which knows no project.

This is a scorer package (skynet.packages): the runner, the CLI and the report learn of it
through the registry only. Its options live in [metric.options]; it has no section of its own.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skynet.config import Config
    from skynet.contract import Metric
    from skynet.data import Dataset
    from skynet.packages import ReportSection, ReportView

__all__ = ["PACKAGE", "ReferencePackage"]


class ReferencePackage:
    name = "reference"
    section = None

    def metric(
        self, project_dir: Path, config: Config, dataset: Dataset, *, verified: bool
    ) -> Metric:
        """The `reference` scorer as the run's metric: embeddings cached in the project's
        .skynet, and a hash that covers the scoring config and the reference set, so results
        graded under an older reference or config are stale. Refused before anything else is
        loaded when the set is not verified (a grade against unreviewed references is noise);
        `verified=False` hashes the references as they are."""
        from skynet.reference.verified import check_verified, reference_hash
        from skynet.scorers import scorer_metric

        ref_hash = check_verified(project_dir, dataset) if verified else reference_hash(dataset)
        options = {"cache_dir": project_dir / ".skynet", **config.metric.options}
        return scorer_metric("reference", options, depends_on=(ref_hash,))

    def add_commands(self, commands: argparse._SubParsersAction[Any]) -> None:
        from skynet.reference.commands import add_commands

        add_commands(commands)

    def report(self, view: ReportView) -> ReportSection | None:
        """The reviewed reference set the project's mark names, or that it has none."""
        from skynet.errors import SkynetError
        from skynet.packages import ReportSection
        from skynet.reference.verified import MARK_FILE, read_mark

        if view.project_dir is None:
            return None
        try:
            mark = read_mark(view.project_dir)
        except SkynetError as exc:
            return ReportSection(title="Reference set", notes=(f"note: {exc}",))
        if mark is None:
            said = f"not verified: no {MARK_FILE} (`skynet reference verify` writes it)"
        else:
            said = (
                f"verified {mark.verified}: {mark.items} item(s) from {mark.data}, hash "
                f"{mark.hash[:12]} ({MARK_FILE}); `skynet reference show` says if it changed since"
            )
        return ReportSection(title="Reference set", notes=(said,))


PACKAGE = ReferencePackage()
