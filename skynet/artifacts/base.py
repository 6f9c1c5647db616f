"""The Artifact protocol: what every kind of optimized thing (prompt, DSPy program, code, or a
plugin's kind) gives the run, so the runner, the CLI and the Python API never ask which kind
they hold.

A kind registers a loader under its name (skynet.registry, group "skynet.artifacts"):

    def from_project(project_dir: Path, config: Config, dataset: Dataset) -> Artifact

called once per run with the checked config and data; it raises ConfigError (naming the file,
the key and the fix) for anything wrong, before any model call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from skynet.models import Models

__all__ = ["Artifact", "Candidate", "TaskRunner"]

Candidate = dict[str, str]
# Runs one candidate on one item's input and returns its output (for the metric).
TaskRunner = Callable[[Candidate, dict[str, Any]], Any]


@runtime_checkable
class Artifact(Protocol):
    """One loaded artifact.

    Attributes:
        kind: its [artifact] kind, e.g. "prompt".
        label: what `skynet check` calls it ("prompt", "program", "code").
        best_file: the file a run writes its best candidate to, e.g. "best_prompt.md".
        uses_task_model: whether its runs call the task model (Auto sizes concurrency by it).
        isolation: how its candidates are isolated, recorded with the run (None: they run no
            code of their own).
        unsandboxed: its candidates run code with the user's own rights (warned and reported).

    Optional: `output_fields`, the field names its outputs carry when it knows them (a DSPy
    program's predictors' output fields): the self-test then knows when the data's labels are
    not an output it could give.
    """

    kind: ClassVar[str]
    label: ClassVar[str]
    best_file: ClassVar[str]
    uses_task_model: ClassVar[bool]

    @property
    def components(self) -> dict[str, str]:
        """The seed candidate: component name -> text."""
        ...

    @property
    def isolation(self) -> str | None: ...

    @property
    def unsandboxed(self) -> bool: ...

    def fingerprint(self, settings: Any, task_model: str | None) -> str:
        """What, besides a candidate's texts, decides its outputs (part of each candidate id)."""
        ...

    def task(self, models: Models, settings: Any) -> TaskRunner:
        """The function that runs a candidate on one item, with `settings` ([artifact])."""
        ...

    def save(self, candidate: Candidate, path: Path) -> None:
        """Write `candidate` as the artifact's own file (a run's best)."""
        ...

    def read_candidate(self, path: Path, *, inputs: list[str], key: str, missing: str) -> Candidate:
        """A candidate from a file written in the artifact's own format (`--candidate FILE`).

        Raises:
            ConfigError: the file is missing (`missing`), unreadable or not this artifact's.
        """
        ...
