"""Every model call: litellm, prices, the call cache, retries, the governor, the ledgers, and the
embedded default model. See client.Models.complete for the path a call takes."""

from skynet.models.client import (
    METRIC_MODEL_ENV,
    Models,
    ModelsConfig,
    ModelSettings,
    Reply,
    RetryPolicy,
    configure,
    current,
    using,
)
from skynet.models.ledger import ROLES, CallRecord, Ledger, LedgerTotals
from skynet.models.local import EMBEDDED_MODEL
from skynet.models.pricing import Price

__all__ = [
    "EMBEDDED_MODEL",
    "METRIC_MODEL_ENV",
    "ROLES",
    "CallRecord",
    "Ledger",
    "LedgerTotals",
    "Models",
    "ModelSettings",
    "ModelsConfig",
    "Price",
    "Reply",
    "RetryPolicy",
    "configure",
    "current",
    "using",
]
