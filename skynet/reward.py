"""REWARD_SPEC validation and the reward() helper: accuracy, speed and cost in one score.

Speed and cost come from the framework's Observation of the item being scored, never from an
argument, so the code under optimization cannot improve its reward by reporting better figures.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skynet.errors import ConfigError
from skynet.measure import current_observation

__all__ = ["RewardSpec", "validate_spec", "reward"]

_COMPONENTS = ("accuracy", "speed", "cost")
_TOP_KEYS = ("weights", *_COMPONENTS)


@dataclass(frozen=True, slots=True, kw_only=True)
class RewardSpec:
    """A validated REWARD_SPEC. Weights are normalised to sum to 1."""

    accuracy_weight: float
    speed_weight: float
    cost_weight: float
    accuracy_reference: float | None  # set: accuracy is an error, lower is better
    speed_reference_ms: float
    cost_reference_usd: float


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _positive_reference(spec: Mapping[str, Any], part: str, where: str, unit: str) -> float | None:
    section = spec.get(part, {})
    if not isinstance(section, Mapping):
        raise ConfigError(
            f"{where}['{part}'] must be a dict such as {{'reference': ...}}, got {section!r}"
        )
    extra = sorted(set(section) - {"reference"})
    if extra:
        raise ConfigError(
            f"{where}['{part}'] has unknown key '{extra[0]}'; the only key is 'reference'"
        )
    if "reference" not in section:
        return None
    ref = section["reference"]
    if not _number(ref) or not math.isfinite(ref) or ref <= 0:
        raise ConfigError(
            f"{where}['{part}']['reference'] must be a number > 0 ({unit}), got {ref!r}"
        )
    return float(ref)


def validate_spec(spec: Any, where: str = "REWARD_SPEC") -> RewardSpec:
    """Check a REWARD_SPEC and return it normalised.

    Args:
        spec: the dict, shaped as in docs/metric.md.
        where: how to name the spec in messages (e.g. "metric.py: REWARD_SPEC").

    Raises:
        ConfigError: naming the key at fault and the fix.
    """
    if isinstance(spec, RewardSpec):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where} must be a dict with 'weights', got {type(spec).__name__}")
    extra = sorted(set(spec) - set(_TOP_KEYS))
    if extra:
        raise ConfigError(
            f"{where} has unknown key '{extra[0]}'; known keys: {', '.join(_TOP_KEYS)}"
        )
    weights = spec.get("weights")
    if not isinstance(weights, Mapping):
        raise ConfigError(
            f"{where}['weights'] is missing or not a dict; write "
            "'weights': {'accuracy': 0.7, 'speed': 0.2, 'cost': 0.1}"
        )
    for name in _COMPONENTS:
        if name not in weights:
            raise ConfigError(
                f"{where}['weights'] is missing '{name}'; weights must have exactly "
                "accuracy, speed and cost (use 0 to ignore one)"
            )
    extra_w = sorted(set(weights) - set(_COMPONENTS))
    if extra_w:
        raise ConfigError(
            f"{where}['weights'] has unknown key '{extra_w[0]}'; weights must have exactly "
            "accuracy, speed and cost"
        )
    for name in _COMPONENTS:
        w = weights[name]
        if not _number(w) or not math.isfinite(w) or w < 0:
            raise ConfigError(f"{where}['weights']['{name}'] must be a number >= 0, got {w!r}")
    total = float(sum(weights[name] for name in _COMPONENTS))
    if total <= 0:
        raise ConfigError(f"{where}['weights'] are all 0; give at least one a positive weight")
    accuracy_ref = _positive_reference(
        spec, "accuracy", where, "the error at which accuracy is 0.5"
    )
    speed_ref = _positive_reference(spec, "speed", where, "milliseconds")
    cost_ref = _positive_reference(spec, "cost", where, "USD")
    if speed_ref is None and weights["speed"] > 0:
        raise ConfigError(
            f"{where}['speed']['reference'] is missing; give the time in ms that scores 0.5, "
            "e.g. 'speed': {'reference': 2000}"
        )
    if cost_ref is None and weights["cost"] > 0:
        raise ConfigError(
            f"{where}['cost']['reference'] is missing; give the cost in USD that scores 0.5, "
            "e.g. 'cost': {'reference': 0.01}"
        )
    return RewardSpec(
        accuracy_weight=weights["accuracy"] / total,
        speed_weight=weights["speed"] / total,
        cost_weight=weights["cost"] / total,
        accuracy_reference=accuracy_ref,
        speed_reference_ms=speed_ref if speed_ref is not None else 1.0,
        cost_reference_usd=cost_ref if cost_ref is not None else 1.0,
    )


def reward(spec: Any, accuracy: float, feedback: str = "") -> tuple[float, dict[str, Any]]:
    """Weigh accuracy, speed and cost into one score, in the metric contract's shape.

    Speed and cost are read from the Observation of the item being scored. When one cannot be
    measured (outside an evaluation, or a model with no known price) its component is 0 and the
    feedback says which and why.

    Args:
        spec: a REWARD_SPEC dict (validated here) or a RewardSpec.
        accuracy: a score (clamped to [0, 1]), or an error when the spec sets
            accuracy.reference (component = ref / (ref + error)).
        feedback: your feedback text; the measured figures are appended to it.

    Returns:
        (weighted sum, {"feedback": ..., "scores": {"accuracy", "speed", "cost"}}).

    Raises:
        ConfigError: for a bad spec or a non-numeric accuracy.
    """
    rs = validate_spec(spec)
    if not _number(accuracy) or not math.isfinite(accuracy):
        raise ConfigError(f"reward(): accuracy must be a finite number, got {accuracy!r}")
    if rs.accuracy_reference is None:
        acc = min(1.0, max(0.0, float(accuracy)))
    else:
        error = max(0.0, float(accuracy))
        acc = rs.accuracy_reference / (rs.accuracy_reference + error)

    notes: list[str] = []
    obs = current_observation()
    if obs is None:
        speed = cost = 0.0
        notes.append(
            "speed and cost not measurable: reward() was called outside a metered evaluation "
            "(components set to 0)"
        )
    else:
        speed = rs.speed_reference_ms / (rs.speed_reference_ms + max(0.0, obs.elapsed_ms))
        reference = f" (reference {rs.speed_reference_ms:g} ms)" if rs.speed_weight else ""
        notes.append(f"time {obs.elapsed_ms:.0f} ms{reference}")
        if obs.cost_usd is None:
            cost = 0.0
            notes.append(f"cost not measurable (component set to 0): {obs.cost_note}")
        else:
            cost = rs.cost_reference_usd / (rs.cost_reference_usd + max(0.0, obs.cost_usd))
            reference = f" (reference ${rs.cost_reference_usd:g})" if rs.cost_weight else ""
            notes.append(f"cost ${obs.cost_usd:.6f}{reference}")

    value = rs.accuracy_weight * acc + rs.speed_weight * speed + rs.cost_weight * cost
    text = feedback.rstrip()
    measured = "; ".join(notes)
    full = f"{text}\n[{measured}]" if text else f"[{measured}]"
    return value, {"feedback": full, "scores": {"accuracy": acc, "speed": speed, "cost": cost}}
