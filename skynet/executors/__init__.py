"""Where evaluations run: `[engine] executor = "threads" | "processes" | "ray"`.

An evaluation (run the artifact on one item under the meter, call the metric) runs on the
executor; the driver (the process running the engine) records it. "threads" runs it in the
driver, as the engine's threads call it. "processes" runs it on `workers` worker processes on
this machine, "ray" on the actors of a Ray cluster (skynet.executors.ray). A worker makes its
own model calls under the driver's governors and budget (skynet.executors.coordinator), measures
the evaluation where the candidate ran, and sends back the Result with the calls it made; the
driver serves recorded evaluations itself (nothing recorded is paid twice) and alone writes the
run store.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from skynet.errors import ConfigError

if TYPE_CHECKING:
    from skynet.data import Item
    from skynet.evaluation import Evaluation, Result
    from skynet.models import Models
    from skynet.models.ledger import CallRecord
    from skynet.project import Project

__all__ = ["Executor", "ProcessExecutor", "ThreadExecutor", "open_executor", "recipe_of"]

# A worker that dies this many times on one evaluation: the evaluation is the candidate's error.
MAX_WORKER_DEATHS = 3


class Executor(Protocol):
    """Runs evaluations for the driver; `evaluate` is called from many driver threads at once."""

    name: str

    def evaluate(self, candidate: dict[str, str], item: Item) -> tuple[Result, list[CallRecord]]:
        """The result and the model calls made elsewhere (empty: made in the driver, already
        recorded). Raises BudgetExhausted when a call was refused."""
        ...

    def close(self) -> None: ...


class ThreadExecutor:
    """In the driver, on the calling thread: today's behaviour, and the default."""

    name = "threads"

    def __init__(self, evaluation: Evaluation) -> None:
        self.evaluation = evaluation

    def evaluate(self, candidate: dict[str, str], item: Item) -> tuple[Result, list[CallRecord]]:
        return self.evaluation(candidate, item), []

    def close(self) -> None:
        pass


def recipe_of(project: Project, models: Models, coordinator: tuple[tuple[str, int], bytes]) -> Any:
    """What a worker loads the project from (skynet.executors.worker.Recipe)."""
    import cloudpickle

    from skynet.executors.worker import Recipe

    parts = None
    if project.made_in:  # made in Python: the metric and artifact are the caller's objects
        parts = cloudpickle.dumps((project.metric, project.artifact))
    cache = models.cache.path
    return Recipe(
        dir=project.dir,
        config=project.config,
        dataset=project.dataset,
        parts=parts,
        models=dataclasses.replace(
            models.config, cache_path=None if cache == ":memory:" else str(cache)
        ),
        coordinator=coordinator,
    )


def open_executor(
    project: Project,
    models: Models,
    evaluation: Evaluation,
    say: Callable[[str], None],
    *,
    engine: str | None = None,
) -> Executor:
    """The executor [engine] executor names, started (workers up, the project loaded on each).

    `engine`: the name of an engine that runs the program itself, on its own threads in this
    process (skynet.engine.Capabilities.runs_program, e.g. dspy-gepa): it gets the threads
    executor, and a line saying so.

    Raises:
        ConfigError: "ray" without Ray installed, a Ray cluster that cannot be reached, or a
            worker that could not load the project (its message).
    """
    settings = project.config.engine
    if settings.executor == "threads":
        return ThreadExecutor(evaluation)
    if engine is not None:
        say(
            f'executor "{settings.executor}" is not used by {engine}: it runs the program on its '
            "own threads in this process"
        )
        return ThreadExecutor(evaluation)
    from skynet.executors.coordinator import serve
    from skynet.executors.ray import RayExecutor, ray_host

    workers = settings.workers or os.cpu_count() or 1
    ray = settings.executor == "ray"
    host = ray_host(settings.ray_address) if ray else "127.0.0.1"
    address, authkey, stop_serving = serve(models, host=host)
    recipe = recipe_of(project, models, (address, authkey))
    if ray:
        return RayExecutor(
            recipe, workers, settings.concurrency, settings.ray_address, stop_serving, say
        )
    return ProcessExecutor(recipe, workers, stop_serving, say)


class _Process:
    """One worker process and the driver's proxy of its Worker."""

    def __init__(self, recipe_bytes: bytes, index: int) -> None:
        import multiprocessing

        from skynet.executors.worker import serve

        context = multiprocessing.get_context("spawn")  # no inherited threads or locks
        ours, theirs = context.Pipe()
        self.process = context.Process(
            target=serve, args=(recipe_bytes, theirs), name=f"skynet-worker-{index}", daemon=True
        )
        self.process.start()
        theirs.close()
        self.pipe = ours  # kept open: the worker exits when it closes
        self.in_flight = 0
        self._lock = threading.Lock()
        self._said: tuple[Any, ...] | None = None
        self._proxy: Any = None

    def wait(self) -> Any:
        """The proxy, once the worker has loaded the project (ConfigError if it could not)."""
        with self._lock:
            return self._connect()

    def _connect(self) -> Any:
        if self._said is None:
            try:
                self._said = self.pipe.recv()
            except EOFError:
                self.process.join(timeout=5)
                self._said = ("failed", f"it exited (exit code {self.process.exitcode})")
        said = self._said
        assert said is not None
        if said[0] != "ready":
            raise ConfigError(f"a worker process could not load the project: {said[1]}")
        if self._proxy is None:
            from skynet.executors.coordinator import proxy

            self._proxy = proxy(said[1], said[2], "worker")
        return self._proxy

    def stop(self) -> None:
        self.pipe.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)


class ProcessExecutor:
    """`workers` worker processes on this machine (multiprocessing, spawned). Each evaluation
    goes to the worker with the fewest in flight; a worker that dies is replaced and its
    evaluation sent to another (at most MAX_WORKER_DEATHS times)."""

    name = "processes"

    def __init__(
        self,
        recipe: Any,
        workers: int,
        stop_serving: Callable[[], None],
        say: Callable[[str], None],
    ) -> None:
        import cloudpickle

        self.recipe_bytes = cloudpickle.dumps(recipe)
        self.stop_serving = stop_serving
        self.say = say
        self._lock = threading.Lock()
        self._started = 0
        self.pool = [self._start() for _ in range(workers)]
        try:
            for p in self.pool:
                p.wait()
        except BaseException:
            self.close()
            raise

    def _start(self) -> _Process:
        self._started += 1
        return _Process(self.recipe_bytes, self._started)

    def _pick(self) -> _Process:
        with self._lock:
            chosen = min(self.pool, key=lambda p: p.in_flight)
            chosen.in_flight += 1
            return chosen

    def _replace(self, dead: _Process) -> None:
        with self._lock:
            if dead not in self.pool:
                return  # another thread replaced it already
            index = self.pool.index(dead)
            self.pool[index] = self._start()
        dead.stop()
        self.say(
            f"a worker process died (exit code {dead.process.exitcode}); started another, and "
            "what it was evaluating goes to the others"
        )

    def evaluate(self, candidate: dict[str, str], item: Item) -> tuple[Result, list[CallRecord]]:
        from skynet.evaluation import CANDIDATE_ERROR, Result

        for _ in range(MAX_WORKER_DEATHS):
            worker = self._pick()
            try:
                proxy = worker.wait()
                return proxy.evaluate(candidate, item)
            except (EOFError, ConnectionError, BrokenPipeError):
                # The worker died (or its connection did: it is no use either way).
                self._replace(worker)
            finally:
                with self._lock:
                    worker.in_flight -= 1
        # The evaluation killed every worker it was sent to: the candidate's doing.
        return (
            Result(
                item_id=item.id,
                error=f"the candidate failed on item '{item.id}': the worker process running "
                f"it died {MAX_WORKER_DEATHS} times",
                error_kind=CANDIDATE_ERROR,
            ),
            [],
        )

    def close(self) -> None:
        for p in self.pool:
            p.stop()
        self.stop_serving()
