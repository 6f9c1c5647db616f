"""The judge's configuration: everything that changes a verdict, frozen, with its hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from skynet.errors import ConfigError

__all__ = ["DEFAULT_GRADES", "MODES", "ORDERS", "JudgeConfig", "judge_config"]

MODES = ("grade",)
ORDERS = ("reference-first", "output-first")
DEFAULT_GRADES = ("pass", "fail")

# The judge prompt's wording is part of every verdict: a change to it changes this version, and
# so every config_hash, so old validation records no longer accept the judge.
_PROTOCOL = 2  # 2: the output in a fence it cannot close (skynet.fence)


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeConfig:
    """Everything that changes a judge's verdict. Build it with judge_config().

    Attributes:
        model: the litellm model name of the judge.
        instructions: what the judge is told to check (the system message, before the protocol).
        mode: "grade": the judge answers one word out of `grades`.
        grades: the words the judge may answer.
        positive: the grade that means the output is right.
        orders: the presentation orders asked, each of "reference-first", "output-first".
        temperature, max_tokens: sampling parameters of every judge call.
    """

    model: str
    instructions: str
    mode: str = "grade"
    grades: tuple[str, ...] = DEFAULT_GRADES
    positive: str = "pass"
    orders: tuple[str, ...] = ORDERS
    temperature: float = 0.0
    max_tokens: int = 64

    def __post_init__(self) -> None:
        object.__setattr__(self, "grades", tuple(self.grades))
        object.__setattr__(self, "orders", tuple(self.orders))
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(
                'judge_config: model is empty; name the judge\'s model, e.g. "openai/gpt-4o-mini"'
            )
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise ConfigError(
                "judge_config: instructions are empty; say what the judge must check, e.g. "
                '"Is the output the same city as the reference?"'
            )
        if self.mode not in MODES:
            raise ConfigError(
                f"judge_config: mode {self.mode!r} is not one of {', '.join(map(repr, MODES))}"
            )
        words = [g.strip().casefold() for g in self.grades if isinstance(g, str)]
        if len(words) != len(self.grades) or len(words) < 2 or not all(words):
            raise ConfigError(
                f"judge_config: grades {list(self.grades)!r}; give at least two non-empty words, "
                'e.g. ["pass", "fail"]'
            )
        if len(set(words)) != len(words) or any(len(w.split()) != 1 for w in words):
            raise ConfigError(
                f"judge_config: grades {list(self.grades)!r} must be distinct single words "
                "(the judge answers one of them)"
            )
        if self.positive not in self.grades:
            raise ConfigError(
                f"judge_config: positive {self.positive!r} is not one of the grades "
                f"{list(self.grades)!r}; name the grade that means right"
            )
        if not self.orders or any(o not in ORDERS for o in self.orders):
            raise ConfigError(
                f"judge_config: orders {list(self.orders)!r}; give one or both of "
                f"{', '.join(map(repr, ORDERS))}"
            )
        if len(set(self.orders)) != len(self.orders):
            raise ConfigError(f"judge_config: orders {list(self.orders)!r} names one order twice")
        if isinstance(self.temperature, bool) or not (
            isinstance(self.temperature, (int, float)) and 0 <= self.temperature <= 2
        ):
            raise ConfigError(
                f"judge_config: temperature {self.temperature!r}; give a number in [0, 2]"
            )
        if isinstance(self.max_tokens, bool) or not (
            isinstance(self.max_tokens, int) and self.max_tokens >= 1
        ):
            raise ConfigError(f"judge_config: max_tokens {self.max_tokens!r}; give an int >= 1")

    @property
    def config_hash(self) -> str:
        """sha256 over everything that changes a verdict, and the judge prompt's version."""
        canonical = json.dumps(
            {"protocol": _PROTOCOL, **asdict(self)},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


def judge_config(
    model: str,
    instructions: str,
    mode: str = "grade",
    positive: str = "pass",
    orders: Sequence[str] = ORDERS,
    *,
    grades: Sequence[str] = DEFAULT_GRADES,
    temperature: float = 0.0,
    max_tokens: int = 64,
) -> JudgeConfig:
    """A frozen judge configuration; its `config_hash` ties validation records to it.

    Raises:
        ConfigError: an empty model or instructions, an unknown mode or order, grades that are
            not distinct single words, a positive grade not among them, bad parameters.
    """
    return JudgeConfig(
        model=model,
        instructions=instructions,
        mode=mode,
        grades=tuple(grades),
        positive=positive,
        orders=tuple(orders),
        temperature=temperature,
        max_tokens=max_tokens,
    )
