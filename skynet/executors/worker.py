"""A worker: evaluates candidates on items in a process of its own, for the driver.

The worker loads the project's metric and artifact itself (from the project folder, or, for a
project made in Python, from the driver's pickled objects), makes its model calls itself under
the driver's governors and budget (skynet.executors.coordinator), and measures each evaluation
where the candidate ran. It returns the Result and the model calls made, and records nothing:
the driver alone writes the run store.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from skynet.config import Config
    from skynet.data import Dataset, Item
    from skynet.evaluation import Result
    from skynet.models import ModelsConfig
    from skynet.models.ledger import CallRecord

__all__ = ["Recipe", "Worker", "serve"]

_CALLS: contextvars.ContextVar[list[CallRecord] | None] = contextvars.ContextVar(
    "skynet_worker_calls", default=None
)


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """What a worker needs to evaluate as the driver would.

    Attributes:
        dir: the project folder, on the driver's machine.
        config: the project's validated config (overrides applied).
        dataset: the project's items (the artifact's and the metric's loaders may read them).
        parts: for a project made in Python, cloudpickle's bytes of (metric, artifact); None:
            the worker loads them from the folder.
        models: the driver's model settings, resolved there (API keys read from the driver's
            environment), its call-cache file included: workers on the driver's machine share
            it (a twin request in flight on another worker is waited for, not paid twice);
            elsewhere each worker keeps a memory cache.
        coordinator: the address and authkey of the driver's governors and budget.
        working_dir: True under Ray: the project's files are the worker's working directory.
    """

    dir: Path
    config: Config
    dataset: Dataset
    parts: bytes | None
    models: ModelsConfig
    coordinator: tuple[tuple[str, int], bytes]
    working_dir: bool = False


class Worker:
    """One worker process's evaluation: thread-safe, as several evaluations run at once."""

    def __init__(self, recipe: Recipe) -> None:
        import cloudpickle

        from skynet.executors.coordinator import RemoteBudget, RemoteGovernor, connect
        from skynet.models import Models
        from skynet.project import Project, load_parts

        coordinator = connect(*recipe.coordinator)
        folder = Path.cwd() if recipe.working_dir else recipe.dir
        config = recipe.config
        if recipe.parts is not None:
            metric, artifact = cloudpickle.loads(recipe.parts)
        else:
            metric, artifact = load_parts(folder, config, recipe.dataset)
        cache = recipe.models.cache_path
        if cache is not None and not Path(cache).parent.is_dir():
            cache = None  # another machine than the driver's: a cache of its own, in memory
        governors: dict[str, RemoteGovernor] = {}
        lock = threading.Lock()

        def governor(model: str) -> RemoteGovernor:
            with lock:
                if model not in governors:
                    governors[model] = RemoteGovernor(coordinator, model)
                return governors[model]

        self.models = Models(
            dataclasses.replace(recipe.models, cache_path=cache),
            base_dir=folder,
            budget=RemoteBudget(coordinator),
            governor=governor,
        )
        self.models.subscribe(_heard)
        # The driver's project, with the metric and artifact this process holds.
        project = Project(
            dir=folder, config=config, dataset=recipe.dataset, metric=metric, artifact=artifact
        )
        self.evaluation = project.evaluation(self.models)

    def evaluate(self, candidate: dict[str, str], item: Item) -> tuple[Result, list[CallRecord]]:
        """The candidate's result on the item, and the model calls it made (for the driver's
        ledgers and store). BudgetExhausted passes through: a refused call records nothing."""
        from skynet.models import using

        calls: list[CallRecord] = []
        token = _CALLS.set(calls)
        try:
            with using(self.models):
                result = self.evaluation(candidate, item)
        finally:
            _CALLS.reset(token)
        return result, calls

    def pid(self) -> int:
        return os.getpid()


def _heard(record: CallRecord) -> None:
    calls = _CALLS.get()
    if calls is not None:
        calls.append(record)


def serve(recipe_bytes: bytes, conn: Connection) -> None:
    """A worker process's main: build the Worker, serve it on loopback, say where on `conn`,
    and exit when the driver goes (its end of `conn` closes)."""
    import cloudpickle

    from skynet.errors import SkynetError
    from skynet.executors.coordinator import share

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        worker = Worker(cloudpickle.loads(recipe_bytes))
    except SkynetError as exc:
        conn.send(("failed", str(exc)))
        return
    except Exception as exc:  # reported by the driver as the worker's failure to start
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return

    address, authkey, _ = share(worker, "worker")
    conn.send(("ready", address, authkey))
    try:
        conn.recv()  # nothing is sent: this returns when the driver's end closes
    except (EOFError, OSError):
        pass
    os._exit(0)  # the driver is gone: so is its work
