"""`[engine] executor = "ray"`: evaluations on the actors of a Ray cluster.

`ray_address = ""` starts a local Ray (one actor per worker, `workers` CPUs); an address joins
that cluster. Each actor is a Worker (skynet.executors.worker) holding the project, taking up to
`concurrency` evaluations at once (a threaded actor). A project folder reaches the cluster as
Ray's runtime environment (working_dir, without .skynet and .git), so a remote cluster needs
nothing installed but Skynet; a project made in Python travels as the pickled metric and
artifact. An actor that dies is restarted by Ray and its evaluation retried there (Ray's
max_task_retries), and the driver records it once.

Ray unpacks the working dir under its temp folder (session_*/runtime_resources/working_dir_files),
world-readable whatever the project folder's mode, and keeps it after the run. A local Ray that
Skynet starts therefore gets a temp folder of its own (mode 0700, removed when the run ends); on a
cluster each actor gives its unpacked copy the project folder's mode (the cluster's own cleanup
removes it, Skynet cannot).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from skynet.errors import ConfigError

if TYPE_CHECKING:
    from skynet.data import Item
    from skynet.evaluation import Result
    from skynet.executors.worker import Recipe
    from skynet.models.ledger import CallRecord

__all__ = ["INSTALL", "RayExecutor", "ray_host"]

INSTALL = (
    '[engine] executor = "ray" needs Ray, which is not installed; install it with '
    "pip install 'skynet-optimizer[ray]', or set executor = \"processes\""
)


def ray_host(address: str) -> str:
    """The address the driver serves its governors and budget on: loopback for a local Ray,
    else this machine's address on the route to the cluster."""
    host = _host_port(address)[0] if address else ""
    if not host or host in ("localhost", "127.0.0.1", "auto"):
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 6379))  # no packet is sent: this only picks the route
            return str(probe.getsockname()[0])
    except OSError:
        return "0.0.0.0"


class _Actor:
    """The Ray actor: one Worker, loaded once, taking evaluations on Ray's threads."""

    def __init__(self, recipe_bytes: bytes, mode: int | None = None) -> None:
        import cloudpickle

        from skynet.executors.worker import Worker

        if mode is not None:
            # The unpacked project (the actor's cwd) keeps the project folder's permissions:
            # Ray leaves it readable by every account on the node.
            os.chmod(os.getcwd(), mode)
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        self.worker = Worker(cloudpickle.loads(recipe_bytes))

    def evaluate(self, candidate: dict[str, str], item: Item) -> tuple[Result, list[CallRecord]]:
        return self.worker.evaluate(candidate, item)

    def pid(self) -> int:
        return self.worker.pid()


class RayExecutor:
    """Evaluations on Ray actors; the driver's threads each wait on one at a time."""

    name = "ray"

    def __init__(
        self,
        recipe: Recipe,
        workers: int,
        concurrency: int,
        address: str,
        stop_serving: Callable[[], None],
        say: Callable[[str], None],
    ) -> None:
        import dataclasses

        try:
            import ray
        except ImportError:
            stop_serving()
            raise ConfigError(INSTALL) from None
        import cloudpickle

        from skynet.executors import MAX_WORKER_DEATHS

        self.ray, self.stop_serving, self.say = ray, stop_serving, say
        runtime_env: dict[str, Any] = {"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}}
        mode = None
        if recipe.parts is None:  # a project folder: its files go to the cluster
            mode = stat.S_IMODE(os.stat(recipe.dir).st_mode) if _PROTECT_COPIES else None
            runtime_env["working_dir"] = str(recipe.dir)
            runtime_env["excludes"] = [".skynet", ".git", "__pycache__"]
            recipe = dataclasses.replace(recipe, working_dir=True)
        self._started_ray = not ray.is_initialized()
        self._temp_dir: str | None = None
        if self._started_ray and not address and _PROTECT_COPIES:
            # Everything a local Ray writes (the unpacked project, the driver's zip of it, its
            # logs) under a folder only this account can enter (0700), removed by close(). Ray
            # makes its own temp folder 0777, hence the folder around it.
            self._temp_dir = tempfile.mkdtemp(prefix="skynet-ray-")
        if address and self._started_ray:
            _reachable(
                address, stop_serving
            )  # Ray itself would retry an unreachable one for minutes
        # Ray says at start-up that its token authentication is on (the default): not the
        # user's concern on a run's terminal. Its level is restored after.
        quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            if self._started_ray:
                ray.init(
                    address=address or None,
                    num_cpus=None if address else workers,
                    runtime_env=runtime_env,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                    _temp_dir=os.path.join(self._temp_dir, "r") if self._temp_dir else None,
                )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            stop_serving()
            if self._temp_dir:
                shutil.rmtree(self._temp_dir, ignore_errors=True)
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise ConfigError(
                f"[engine] ray_address: cannot reach {where}: {exc}; start it (ray start --head) "
                'or fix ray_address ("" starts a local Ray)'
            ) from None
        finally:
            quiet.setLevel(level)
        actor = ray.remote(_Actor).options(
            max_concurrency=max(1, concurrency),
            max_restarts=-1,
            max_task_retries=MAX_WORKER_DEATHS,
            # A local Ray has `workers` CPUs, one per actor. On a cluster the actors ask for no
            # CPU (so they never wait for one) and are spread over the nodes.
            num_cpus=0 if address else 1,
            scheduling_strategy="SPREAD" if address else "DEFAULT",
        )
        payload = cloudpickle.dumps(recipe)
        self.actors = [actor.remote(payload, mode) for _ in range(workers)]
        self.in_flight = [0] * workers
        self._lock = threading.Lock()
        try:
            ray.get([a.pid.remote() for a in self.actors])  # each loaded the project
        except Exception as exc:
            self.close()
            raise ConfigError(f"a Ray worker could not load the project: {_cause(exc)}") from None

    def _pick(self) -> int:
        with self._lock:
            index = min(range(len(self.actors)), key=lambda i: self.in_flight[i])
            self.in_flight[index] += 1
            return index

    def evaluate(self, candidate: dict[str, str], item: Item) -> tuple[Result, list[CallRecord]]:
        from ray.exceptions import RayActorError

        from skynet.evaluation import CANDIDATE_ERROR, Result

        index = self._pick()
        try:
            return self.ray.get(self.actors[index].evaluate.remote(candidate, item))
        except RayActorError as exc:
            # Ray restarted the actor and retried, and it died again each time.
            return (
                Result(
                    item_id=item.id,
                    error=f"the candidate failed on item '{item.id}': the Ray worker running it "
                    f"died on every retry ({_cause(exc)})",
                    error_kind=CANDIDATE_ERROR,
                ),
                [],
            )
        finally:
            with self._lock:
                self.in_flight[index] -= 1

    def close(self) -> None:
        for a in getattr(self, "actors", []):
            try:
                self.ray.kill(a)
            except Exception:
                pass
        if self._started_ray:
            self.ray.shutdown()
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
        self.stop_serving()


# Off only in the test that shows what Ray leaves behind without it.
_PROTECT_COPIES = True


def _reachable(address: str, stop_serving: Callable[[], None]) -> None:
    host, port = _host_port(address)
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
            pass
    except (OSError, ValueError) as exc:
        stop_serving()
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"[engine] ray_address = {address!r}: no Ray cluster answers there ({why}); start "
            'one (ray start --head) or fix the address ("" starts a local Ray)'
        ) from None


def _host_port(address: str) -> tuple[str, str]:
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    return (host, port) if colon else (port, "")


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__
