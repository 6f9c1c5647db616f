"""The one place litellm is imported: its price table is read from the packaged copy, never fetched."""

from __future__ import annotations

import os

# Before the import: litellm would otherwise download its price table at import time.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402

litellm.telemetry = False
litellm.suppress_debug_info = True
litellm.drop_params = True

__all__ = ["litellm"]
