"""The run's one governor per model and one money budget, served from the driver to its workers.

A worker process makes its own model calls (litellm's CPU cost is spread over the workers), but
each call takes its slot from the driver's governor for that model and its reservation from the
driver's budget, over an authenticated connection (multiprocessing.managers, from the standard
library). So `max_concurrent` and `rpm` are one limit for the whole run, and calls in flight on
every worker together cannot pass `max_cost_usd`. The driver's own calls (reflection) use the
same objects directly: one limit, whoever calls.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from multiprocessing.managers import BaseManager
from typing import TYPE_CHECKING, Any, cast

from skynet.errors import BudgetExhausted
from skynet.models.budget import Budget, Reservation
from skynet.models.governor import Governor

if TYPE_CHECKING:
    from skynet.models import Models

__all__ = [
    "Coordinator",
    "RemoteBudget",
    "RemoteGovernor",
    "connect",
    "proxy",
    "serve",
    "share",
]


class Coordinator:
    """What a worker asks the driver for: a governor slot, a budget reservation."""

    def __init__(self, models: Models) -> None:
        self.models = models

    def acquire(self, model: str) -> float:
        return self.models.governor(model).acquire()

    def release(self, model: str) -> None:
        self.models.governor(model).release()

    def limited(self) -> bool:
        return self.models.budget.limited

    def reserve(self, usd: float, role: str, model: str, detail: str) -> Reservation:
        return self.models.budget.reserve(usd, role=role, model=model, detail=detail)

    def settle(self, reservation: Reservation, cost_usd: float | None) -> None:
        self.models.budget.settle(reservation, cost_usd)

    def release_reservation(self, reservation: Reservation) -> None:
        self.models.budget.release(reservation)


def serve(
    models: Models, host: str = "127.0.0.1"
) -> tuple[tuple[str, int], bytes, Callable[[], None]]:
    """Serve `models`' governors and budget on `host` (a free port), in daemon threads.

    Returns:
        (the address, the authkey, a function that stops serving).
    """
    return share(Coordinator(models), "coordinator", host)


def share(
    obj: Any, typeid: str, host: str = "127.0.0.1"
) -> tuple[tuple[str, int], bytes, Callable[[], None]]:
    """Serve `obj`'s methods as `typeid` on `host` (a free port), behind a random authkey, one
    daemon thread per connection; `proxy` reaches it. The driver's Coordinator and a worker
    process's Worker are both served so.

    Returns:
        (the address, the authkey, a function that stops serving).
    """

    class Serving(BaseManager):
        pass

    Serving.register(typeid, callable=lambda: obj)
    authkey = secrets.token_bytes(32)
    server: Any = Serving(address=(host, 0), authkey=authkey).get_server()
    stopped = threading.Event()
    server.stop_event = stopped  # what each connection's thread watches
    threading.Thread(
        target=_accept, args=(server, stopped), name=f"skynet-{typeid}", daemon=True
    ).start()

    def stop() -> None:
        stopped.set()
        server.listener.close()

    host, port = cast(tuple[str, int], server.address)
    return (host, port), authkey, stop


def _accept(server: Any, stopped: threading.Event) -> None:
    # Server.serve_forever would do this, then reset sys.stdout and sys.stderr to the process's
    # originals when it ends (it expects a process of its own): in a notebook, that would send
    # the driver's output away from the notebook.
    while not stopped.is_set():
        try:
            connection = server.listener.accept()
        except OSError:
            continue
        threading.Thread(target=server.handle_request, args=(connection,), daemon=True).start()


def proxy(address: tuple[str, int], authkey: bytes, typeid: str) -> Any:
    """A proxy of the object `share` serves as `typeid` (each thread gets its own connection)."""

    class Client(BaseManager):
        pass

    Client.register(typeid)
    manager = Client(address=address, authkey=authkey)
    manager.connect()
    return getattr(manager, typeid)()


def connect(address: tuple[str, int], authkey: bytes) -> Any:
    """A worker's proxy of the driver's Coordinator."""
    return proxy(address, authkey, "coordinator")


class RemoteGovernor(Governor):
    """A model's governor whose slots are the driver's."""

    def __init__(self, coordinator: Any, model: str) -> None:
        super().__init__()
        self.coordinator = coordinator
        self.model = model

    def acquire(self) -> float:
        return float(self.coordinator.acquire(self.model))

    def release(self) -> None:
        self.coordinator.release(self.model)


class RemoteBudget(Budget):
    """The run's budget, held by the driver: every reservation is taken there."""

    def __init__(self, coordinator: Any) -> None:
        super().__init__(None)
        self.coordinator = coordinator
        self._limited = bool(coordinator.limited())

    @property
    def limited(self) -> bool:
        return self._limited

    def reserve(self, usd: float, *, role: str, model: str, detail: str = "") -> Reservation:
        from skynet.models.budget import _note

        try:
            return self.coordinator.reserve(usd, role, model, detail)
        except BudgetExhausted as exc:
            _note(exc)  # this worker's evaluation learns of the refusal, as a local one would
            raise

    def settle(self, reservation: Reservation, cost_usd: float | None) -> None:
        self.coordinator.settle(reservation, cost_usd)

    def release(self, reservation: Reservation) -> None:
        self.coordinator.release_reservation(reservation)
