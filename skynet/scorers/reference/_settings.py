"""The scorer's options read and refused: strictness -> cosine threshold, field-path lists."""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Mapping
from typing import Any

from skynet.errors import ConfigError

# -- strictness -> cosine threshold ---------------------------------------------------------------
STRICTNESS_LEVELS = {"lenient": 0.25, "normal": 0.5, "strict": 0.75}
# (strictness, threshold) anchors, joined by straight lines. Calibrated with all-MiniLM-L6-v2 on
# 22 name variants and 20 near-miss non-matches (benchmarks/reference_calibration.py, table in
# docs/scorers.md): at 0 every variant counts as equal (the lowest variant cosine is 0.556), at
# 0.5 the set is split with the fewest errors, at 1 no non-match does (the highest is 0.953).
CALIBRATION = ((0.0, 0.55), (0.5, 0.75), (1.0, 0.96))


def _strictness(value: float | str) -> float:
    if isinstance(value, str):
        level = STRICTNESS_LEVELS.get(value.strip().lower())
        if level is None:
            raise ConfigError(
                f"scorer 'reference': strictness {value!r} is not a level "
                f"({', '.join(STRICTNESS_LEVELS)}) nor a number in [0, 1]"
            )
        return level
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(
            f"scorer 'reference': strictness must be a number in [0, 1] or one of "
            f"{', '.join(STRICTNESS_LEVELS)}, not {value!r}"
        )
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise ConfigError(
            f"scorer 'reference': strictness {value!r} is outside [0, 1]; 0 accepts the most "
            "spelling variants, 1 the fewest (0.5 is 'normal')"
        )
    return number


def threshold_for(strictness: float | str) -> float:
    """The cosine at or above which two texts count as equal, for a strictness.

    Args:
        strictness: a number in [0, 1] or a level ("lenient" 0.25, "normal" 0.5, "strict" 0.75).

    Raises:
        ConfigError: the strictness is not one of those.
    """
    s = _strictness(strictness)
    for (s0, t0), (s1, t1) in zip(CALIBRATION, CALIBRATION[1:], strict=False):
        if s <= s1:
            return round(t0 + (t1 - t0) * (s - s0) / (s1 - s0), 4)
    return CALIBRATION[-1][1]


# -- options --------------------------------------------------------------------------------------

_PATH = re.compile(r"[^.\[\]]+(?:\[\])*(?:\.[^.\[\]]+(?:\[\])*)*")


def _paths(option: str, value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Iterable) or isinstance(items, Mapping):
        raise ConfigError(
            f"scorer 'reference': {option} must be a list of field paths such as "
            f'["summary", "cast[].name"], not {value!r}'
        )
    out = set()
    for path in items:
        if not isinstance(path, str) or not _PATH.fullmatch(path.strip()):
            raise ConfigError(
                f"scorer 'reference': {option} has {path!r}, not a field path; write keys joined "
                'by dots, a list\'s items as "[]": "summary", "cast[].name", "tags[]"'
            )
        out.add(path.strip())
    return frozenset(out)
