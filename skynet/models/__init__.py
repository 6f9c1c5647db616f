"""Every model call: litellm, prices, budget reservations, the call cache, retries, the governor,
the ledgers, and the embedded default model. See client.Models.complete for the path a call
takes."""

from skynet.models.budget import DEFAULT_MAX_TOKENS, Budget
from skynet.models.client import (
    METRIC_MODEL_ENV,
    Embeddings,
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
    "DEFAULT_MAX_TOKENS",
    "EMBEDDED_MODEL",
    "METRIC_MODEL_ENV",
    "ROLES",
    "Budget",
    "CallRecord",
    "Embeddings",
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
