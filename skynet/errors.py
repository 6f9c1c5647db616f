"""One error hierarchy for everything Skynet reports to a user.

Every message says what was wrong, where (file, item, key) and how to fix it. Only the CLI turns
these into exit codes and one-line messages.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "SkynetError",
    "ContractError",
    "ConfigError",
    "DatasetError",
    "ModelError",
    "MetricError",
    "MetricExited",
    "JudgeFailed",
    "JudgeUnvalidated",
    "NotMeasuring",
    "CandidateFailed",
    "BudgetExhausted",
    "SandboxUnavailable",
    "StorageError",
    "CodeFailed",
    "ProgramFailed",
    "SandboxFailed",
    "RunAborted",
    "ProjectBusy",
    "TrackingError",
    "type_name",
]


def type_name(kind: type) -> str:
    """An exception class's qualified name, as runs.db records an error's type
    (`skynet.errors.ModelError`): data a resume reads, not text to parse."""
    return f"{kind.__module__}.{kind.__qualname__}"


class SkynetError(Exception):
    """Root of every error Skynet raises on purpose.

    Attributes:
        run_id: the recorded run this error ended (set by skynet.runner.run), so that what
            tells the user can say how to resume it; None when no run was recorded.
    """

    run_id: str | None = None


class ContractError(SkynetError):
    """metric.py broke the metric contract.

    Attributes:
        check: the name of the check that failed, e.g. "Metric return value".
        item_id: the dataset item being scored, when there was one.
    """

    def __init__(self, message: str, *, check: str, item_id: str | None = None) -> None:
        super().__init__(message)
        self.check = check
        self.item_id = item_id


class ConfigError(SkynetError):
    """A setting (skynet.toml, REWARD_SPEC, a model name) is missing or wrong."""


class DatasetError(SkynetError):
    """A dataset file or row is unusable; the message names file, line and column."""


# Whose fault a failed model call was (ModelError.fault).
REQUEST_FAULT = "request"  # the request itself was refused (4xx, invalid parameter): the sender's
SERVICE_FAULT = "service"  # outside the sender's control: 5xx, 429, connection, time-out
SETUP_FAULT = "setup"  # the configuration: no key, no access, no such model (401, 403, 404)
FAULTS = (REQUEST_FAULT, SERVICE_FAULT, SETUP_FAULT)


class ModelError(SkynetError):
    """A model call failed for good (after retries). Names the model and the cause.

    Attributes:
        model: the litellm model name.
        attempts: how many attempts were made.
        fault: whose fault it was. REQUEST_FAULT: what was sent was refused (a 4xx, an invalid
            parameter, a refused request): the failure of whoever wrote the request, a
            candidate's own failure when a candidate sent it. SERVICE_FAULT: a fault outside the
            sender's control (5xx, 429, connection refused, time-out of a well-formed request).
            SETUP_FAULT: the configuration (a key, an access right, a model name).
    """

    def __init__(
        self, message: str, *, model: str, attempts: int = 1, fault: str = SERVICE_FAULT
    ) -> None:
        super().__init__(message)
        self.model = model
        self.attempts = attempts
        self.fault = fault

    @property
    def refused_request(self) -> bool:
        """True when the request itself was refused: the sender's failure, not the service's."""
        return self.fault == REQUEST_FAULT

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields survive a trip to and from a worker process.
        return (_model_error, (str(self), self.model, self.attempts, self.fault))


def _model_error(message: str, model: str, attempts: int, fault: str) -> ModelError:
    return ModelError(message, model=model, attempts=attempts, fault=fault)


class MetricError(SkynetError):
    """The user's metric raised, exited, or ran past its time limit, on one item.

    This is not a wrong answer: the item is recorded as an error with the traceback.

    Attributes:
        item_id: the item being scored.
        traceback: the formatted traceback of the metric's exception ("" for a time-out).
        extra: what Skynet kept of the call for the record, e.g. {"metric_stdout": ...}.
        error_type: the type of the exception score() raised (type_name), None when it raised
            none (a time-out, a judge's own verdict).
    """

    def __init__(
        self,
        message: str,
        *,
        item_id: str | None,
        traceback: str = "",
        extra: dict[str, object] | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.item_id = item_id
        self.traceback = traceback
        self.extra: dict[str, object] = dict(extra or {})
        self.error_type = error_type


class MetricExited(MetricError):
    """score() called sys.exit() or raised KeyboardInterrupt itself (not a Ctrl-C).

    During a run it is the item's metric error like any other; the self-test stops on it, since a
    metric that ends the process on one item would end a run.
    """


class JudgeFailed(MetricError):
    """A judge call failed after retries: the item is an error (outcome judge_failed), not wrong."""

    outcome = "judge_failed"


class JudgeUnvalidated(SkynetError):
    """A judge was asked to score before a validation record accepted it."""


class NotMeasuring(SkynetError):
    """observation() or service_cost() was called outside a metric call."""


class CandidateFailed(SkynetError):
    """A candidate under optimization failed on one item (crashed, hung, ran out of memory).

    Expected while evolving code: an item error whose text reaches the reflection model, never a
    reason to stop the run.
    """


class CodeFailed(CandidateFailed):
    """A code candidate failed on one item (crash, time-out, memory, a limit, bad output)."""


class ProgramFailed(CandidateFailed):
    """A DSPy program raised on one item (e.g. DSPy could not parse the model's reply)."""


class SandboxFailed(SkynetError):
    """The sandbox failed to start for one item before any candidate code ran: a fault of the
    machine (or of Skynet), recorded as a task error and counted toward the run's abort."""


class RunAborted(SkynetError):
    """Too many items errored: the metric or the task model is broken; the run stops."""


class ProjectBusy(SkynetError):
    """Another process holds the project's writer lock (one writer per project)."""


class BudgetExhausted(SkynetError):
    """A model call was not sent: its worst-case cost would take the run past max_cost_usd.

    Not a fault of the item or the model: the run stops cleanly, keeping its best so far.

    Attributes:
        limit: the budget key that stopped the call, e.g. "max_cost_usd".
        role: the role of the refused call ("task", "reflection", "metric").
        model: the model it was for.
        max_cost_usd: the limit, in USD.
        spent_usd: what the run had spent when the call was refused.
        reserved_usd: what calls in flight held at that moment.
        needed_usd: the refused call's worst-case cost.
    """

    def __init__(
        self,
        message: str,
        *,
        limit: str = "max_cost_usd",
        role: str = "",
        model: str = "",
        max_cost_usd: float = 0.0,
        spent_usd: float = 0.0,
        reserved_usd: float = 0.0,
        needed_usd: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.role = role
        self.model = model
        self.max_cost_usd = max_cost_usd
        self.spent_usd = spent_usd
        self.reserved_usd = reserved_usd
        self.needed_usd = needed_usd

    def __reduce__(self) -> tuple[Any, ...]:
        # Whole across processes (a worker's refused call reaches the driver with its figures).
        return (_budget_exhausted, (str(self), dict(self.__dict__)))


def _budget_exhausted(message: str, fields: dict[str, Any]) -> BudgetExhausted:
    return BudgetExhausted(message, **fields)


class SandboxUnavailable(ConfigError):
    """Code candidates cannot be isolated here (no bubblewrap, or no namespaces); the message
    names the fix."""


class StorageError(ConfigError):
    """A SQLite file under .skynet (the run store, a cache) cannot be opened, read or written: it
    is damaged, is not a database, sits where a folder should be, or is not writable.

    The message names the file and the fix (move it aside, make it writable). A ConfigError, as
    the run store's refusals were before there was a class of their own.
    """


class TrackingError(SkynetError):
    """The tracking server (MLflow) cannot be reached, refused a call, or mlflow is not
    installed; the message names the URI and the fix."""
