"""Model prices: declared in config, else litellm's offline price table, else unknown (None)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from skynet.errors import ConfigError

__all__ = ["Price", "lookup_price"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"price {name} must be a number (USD per million tokens)")
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"price {name} must be >= 0 USD per million tokens, got {value}")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


def lookup_price(model: str) -> Price | None:
    """The price litellm's offline table gives for `model`, or None when it has none."""
    from skynet.models._litellm import litellm

    info = litellm.model_cost.get(model)
    if info is None and "/" in model:
        info = litellm.model_cost.get(model.split("/", 1)[1])
    if not info:
        return None
    inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if inp is None or out is None:
        return None
    return Price(input_per_mtok=float(inp) * 1e6, output_per_mtok=float(out) * 1e6)
