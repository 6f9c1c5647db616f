"""One error hierarchy for everything Skynet reports to a user.

Every message says what was wrong, where (file, item, key) and how to fix it. Only the CLI turns
these into exit codes and one-line messages.
"""

from __future__ import annotations

__all__ = [
    "SkynetError",
    "ContractError",
    "ConfigError",
    "DatasetError",
    "ModelError",
    "MetricError",
    "JudgeUnvalidated",
    "NotMeasuring",
    "CandidateFailed",
]


class SkynetError(Exception):
    """Root of every error Skynet raises on purpose."""


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


class ModelError(SkynetError):
    """A model call failed for good (after retries). Names the model and the cause.

    Attributes:
        model: the litellm model name.
        attempts: how many attempts were made.
    """

    def __init__(self, message: str, *, model: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.model = model
        self.attempts = attempts


class MetricError(SkynetError):
    """The user's metric raised, or ran past its time limit, on one item.

    This is not a wrong answer: the item is recorded as an error with the traceback.

    Attributes:
        item_id: the item being scored.
        traceback: the formatted traceback of the metric's exception ("" for a time-out).
    """

    def __init__(self, message: str, *, item_id: str | None, traceback: str = "") -> None:
        super().__init__(message)
        self.item_id = item_id
        self.traceback = traceback


class JudgeUnvalidated(SkynetError):
    """A judge was asked to score before a validation record accepted it."""


class NotMeasuring(SkynetError):
    """observation() or service_cost() was called outside a metric call."""


class CandidateFailed(SkynetError):
    """A candidate under optimization failed on one item (crashed, hung, ran out of memory).

    Expected while evolving code: an item error whose text reaches the reflection model, never a
    reason to stop the run.
    """
