"""reward(): REWARD_SPEC rules, the components, and the 'cannot be measured' path."""

from __future__ import annotations

import pytest

from skynet import ConfigError, reward, validate_spec
from skynet.testing import observing

SPEC = {
    "weights": {"accuracy": 0.7, "speed": 0.2, "cost": 0.1},
    "accuracy": {},
    "speed": {"reference": 2000},
    "cost": {"reference": 0.01},
}


def spec_with(**changes):
    spec = {k: (dict(v) if isinstance(v, dict) else v) for k, v in SPEC.items()}
    spec["weights"] = dict(SPEC["weights"])
    for path, value in changes.items():
        section, _, key = path.partition("__")
        if value is KeyError:
            del spec[section][key]
        elif key:
            spec[section][key] = value
        else:
            spec[section] = value
    return spec


BAD_SPECS = [
    ("missing weight", spec_with(weights__cost=KeyError), "['weights'] is missing 'cost'"),
    (
        "negative weight",
        spec_with(weights__speed=-0.1),
        "['weights']['speed'] must be a number >= 0",
    ),
    ("bool weight", spec_with(weights__speed=True), "['weights']['speed']"),
    (
        "all zero",
        spec_with(weights={"accuracy": 0, "speed": 0, "cost": 0}),
        "['weights'] are all 0",
    ),
    (
        "zero speed reference",
        spec_with(speed__reference=0),
        "['speed']['reference'] must be a number > 0",
    ),
    (
        "negative cost reference",
        spec_with(cost__reference=-1),
        "['cost']['reference'] must be a number > 0",
    ),
    ("zero accuracy reference", spec_with(accuracy__reference=0), "['accuracy']['reference']"),
    ("extra top-level key", {**SPEC, "latency": {}}, "unknown key 'latency'"),
    ("extra weight", spec_with(weights__tokens=0.1), "['weights'] has unknown key 'tokens'"),
    ("extra key in a section", spec_with(speed__ref=3), "['speed'] has unknown key 'ref'"),
    ("weighted speed without reference", spec_with(speed={}), "['speed']['reference'] is missing"),
    ("not a dict", [1, 2], "must be a dict"),
]


@pytest.mark.parametrize(("case", "spec", "fragment"), BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_bad_spec_names_the_key(case, spec, fragment):
    with pytest.raises(ConfigError) as caught:
        validate_spec(spec)
    assert fragment in str(caught.value)
    # reward() itself checks any spec it is handed, too.
    with pytest.raises(ConfigError):
        reward(spec, 1.0, "")


def test_weights_are_normalised():
    rs = validate_spec(
        {
            "weights": {"accuracy": 2, "speed": 1, "cost": 1},
            "speed": {"reference": 1},
            "cost": {"reference": 1},
        }
    )
    assert (rs.accuracy_weight, rs.speed_weight, rs.cost_weight) == (0.5, 0.25, 0.25)


def test_components_at_the_references_are_one_half():
    with observing(elapsed_ms=2000, cost_usd=0.01):
        value, info = reward(SPEC, 1.0, "right city")
    assert info["scores"] == {"accuracy": 1.0, "speed": 0.5, "cost": 0.5}
    assert value == pytest.approx(0.7 * 1.0 + 0.2 * 0.5 + 0.1 * 0.5)
    assert info["feedback"].startswith("right city")
    assert "2000 ms" in info["feedback"]


def test_zero_time_and_cost_score_one():
    with observing(elapsed_ms=0, cost_usd=0.0):
        _, info = reward(SPEC, 0.5, "")
    assert info["scores"] == {"accuracy": 0.5, "speed": 1.0, "cost": 1.0}


def test_accuracy_is_clamped_without_a_reference():
    with observing(elapsed_ms=0, cost_usd=0.0):
        assert reward(SPEC, 7.0, "")[1]["scores"]["accuracy"] == 1.0
        assert reward(SPEC, -2.0, "")[1]["scores"]["accuracy"] == 0.0


def test_accuracy_with_a_reference_is_an_error_lower_is_better():
    spec = spec_with(accuracy={"reference": 4.0})
    with observing(elapsed_ms=0, cost_usd=0.0):
        assert reward(spec, 4.0, "")[1]["scores"]["accuracy"] == pytest.approx(0.5)
        assert reward(spec, 0.0, "")[1]["scores"]["accuracy"] == 1.0
        assert reward(spec, 12.0, "")[1]["scores"]["accuracy"] == pytest.approx(0.25)


def test_unmeasurable_cost_is_zero_and_the_feedback_says_why():
    with observing(elapsed_ms=1000, cost_usd=None, cost_note="no known price for openai/x"):
        value, info = reward(SPEC, 1.0, "fine")
    assert info["scores"]["cost"] == 0.0
    assert "cost not measurable" in info["feedback"] and "openai/x" in info["feedback"]
    assert value == pytest.approx(0.7 + 0.2 * (2000 / 3000))


def test_outside_an_evaluation_speed_and_cost_are_not_measurable():
    value, info = reward(SPEC, 1.0, "fine")
    assert info["scores"] == {"accuracy": 1.0, "speed": 0.0, "cost": 0.0}
    assert value == pytest.approx(0.7)
    assert "outside a metered evaluation" in info["feedback"]


def test_non_numeric_accuracy_is_an_error():
    with pytest.raises(ConfigError, match="accuracy must be a finite number"):
        reward(SPEC, "high", "")
