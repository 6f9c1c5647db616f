"""The one place litellm is imported: its price table is read from the packaged copy, never fetched."""

from __future__ import annotations

import importlib
import os
import threading

# Before the import: litellm would otherwise download its price table at import time.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402

# litellm imports these lazily on its first call; import them now, so the first measured call of a
# run does not pay ~0.4 s of imports that later calls don't.
for _lazy in ("httpcore", "openai", "litellm.proxy.openai_files_endpoints.common_utils"):
    try:
        importlib.import_module(_lazy)
    except Exception:  # noqa: BLE001 — a warm-up only; the call path imports what it needs
        pass

setattr(litellm, "telemetry", False)  # noqa: B010 — not in litellm's type stubs
litellm.suppress_debug_info = True
litellm.drop_params = True

__all__ = ["litellm", "warm"]

_warm_lock = threading.Lock()
_warmed = False


def warm() -> None:
    """Run litellm's call path once with a mock reply (no request), once per process.

    litellm builds pydantic schemas on its first completion (~0.1-0.4 s); doing that here keeps
    it out of the first measured call of a run.
    """
    global _warmed
    if _warmed:
        return
    with _warm_lock:
        if _warmed:
            return
        try:
            litellm.completion(
                model="openai/skynet-warm-up",
                messages=[{"role": "user", "content": "warm up"}],
                mock_response="ok",
                api_key="sk-none",
            )
        except Exception:  # noqa: BLE001 — a warm-up only
            pass
        _warmed = True
