"""Validation: a judge's agreement with blind human labels (bootstrap intervals), the record
that keeps it (versioned JSON), and the thresholds a record must meet before its judge scores."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from skynet.errors import ConfigError
from skynet.scorers.judge._config import JudgeConfig

__all__ = [
    "DEFAULT_THRESHOLDS",
    "HOW_TO_VALIDATE",
    "Estimate",
    "JudgeThresholds",
    "JudgeValidation",
    "judge_problems",
    "judge_valid",
    "judge_validate",
]

_RECORD_FORMAT = "skynet-judge-validation"
_RECORD_VERSION = 1

HOW_TO_VALIDATE = (
    "validate the judge: `skynet judge collect` writes a blind sample of outputs to label, set "
    '"human" to true or false on each line, then `skynet judge validate --labels FILE` writes '
    "the record (in Python: judge_validate(config, labels).save(path))"
)


class Estimate(float):
    """A statistic with its percentile bootstrap interval: a float carrying `.low` and `.high`."""

    __slots__ = ("low", "high")
    low: float
    high: float

    def __new__(cls, value: float, low: float, high: float) -> Estimate:
        made = super().__new__(cls, value)
        made.low = float(low)
        made.high = float(high)
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        return (Estimate, (float(self), self.low, self.high))

    def __repr__(self) -> str:
        return f"Estimate({float(self)!r}, low={self.low!r}, high={self.high!r})"

    def __str__(self) -> str:
        return f"{float(self):.3f} [{self.low:.3f}, {self.high:.3f}]"


_STATISTICS = ("accuracy", "kappa", "tpr", "tnr", "balanced_accuracy")


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeThresholds:
    """What a validation record must show before its judge may score.

    Defaults: at least 30 labelled items; accuracy >= 0.8; Cohen's kappa >= 0.6. A threshold set
    to None is not held. `bound` = "estimate" holds the point estimates, "low" the lower ends of
    their bootstrap intervals (stricter). See docs/scorers.md for why these defaults.
    """

    min_n: int = 30
    min_accuracy: float | None = 0.8
    min_kappa: float | None = 0.6
    min_tpr: float | None = None
    min_tnr: float | None = None
    min_balanced_accuracy: float | None = None
    bound: Literal["estimate", "low"] = "estimate"

    def __post_init__(self) -> None:
        if isinstance(self.min_n, bool) or not isinstance(self.min_n, int) or self.min_n < 1:
            raise ConfigError(f"thresholds: min_n {self.min_n!r}; give an int >= 1")
        for name in _STATISTICS:
            value = getattr(self, f"min_{name}")
            low = -1.0 if name == "kappa" else 0.0
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not low <= value <= 1
            ):
                raise ConfigError(
                    f"thresholds: min_{name} {value!r}; give a number in [{low:g}, 1] or None"
                )
        if self.bound not in ("estimate", "low"):
            raise ConfigError(f"thresholds: bound {self.bound!r}; give 'estimate' or 'low'")

    def describe(self) -> str:
        held = [f"n >= {self.min_n}"]
        for name in _STATISTICS:
            value = getattr(self, f"min_{name}")
            if value is not None:
                held.append(
                    f"{name}{' (interval low)' if self.bound == 'low' else ''} >= {value:g}"
                )
        return ", ".join(held)


DEFAULT_THRESHOLDS = JudgeThresholds()


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeValidation:
    """How well a judge agrees with blind human labels on the same items.

    Attributes:
        config_hash: the judge configuration the record was made for.
        n: labelled items.
        accuracy, kappa, tpr, tnr, balanced_accuracy: Estimates (a float with .low and .high, a
            percentile bootstrap interval at `level` over B resamples), or None when undefined.
            tpr is P(judge right | human right); tnr is P(judge wrong | human wrong).
        thresholds: the thresholds the record was held to when made.
        pairs: the (judge, human) decisions, one per item, in order (PPI's labelled set).
        ids: the items' ids, when known ("" each otherwise).
        B, seed, level: the bootstrap's resamples, seed and interval level.
        notes: which statistics are undefined and why, and other caveats.
        created: when the record was made (ISO-8601 UTC).
    """

    config_hash: str
    n: int
    accuracy: Estimate
    kappa: Estimate | None
    tpr: Estimate | None
    tnr: Estimate | None
    balanced_accuracy: Estimate | None
    thresholds: JudgeThresholds
    pairs: tuple[tuple[bool, bool], ...]
    ids: tuple[str, ...] = ()
    B: int = 200
    seed: int = 0
    level: float = 0.95
    notes: tuple[str, ...] = ()
    created: str = ""

    @property
    def judge_decisions(self) -> list[bool]:
        return [j for j, _ in self.pairs]

    @property
    def human_labels(self) -> list[bool]:
        return [h for _, h in self.pairs]

    @property
    def passes(self) -> bool:
        """Whether the record meets its own thresholds (judge_valid also checks the config)."""
        return not _threshold_problems(self, self.thresholds)

    @property
    def hash(self) -> str:
        """sha256 of the record's content (what a metric's source hash includes)."""
        return hashlib.sha256(self.to_json(created=False).encode()).hexdigest()

    def _as_dict(self, *, created: bool = True) -> dict[str, Any]:
        def stat(value: Estimate | None) -> dict[str, float] | None:
            if value is None:
                return None
            return {"value": float(value), "low": value.low, "high": value.high}

        out: dict[str, Any] = {
            "format": _RECORD_FORMAT,
            "version": _RECORD_VERSION,
            "config_hash": self.config_hash,
            "n": self.n,
            **{name: stat(getattr(self, name)) for name in _STATISTICS},
            "thresholds": asdict(self.thresholds),
            "B": self.B,
            "seed": self.seed,
            "level": self.level,
            "notes": list(self.notes),
            "pairs": [[j, h] for j, h in self.pairs],
            "ids": list(self.ids),
        }
        if created:
            out["created"] = self.created
        return out

    def to_json(self, *, created: bool = True) -> str:
        """The record as JSON text (what save() writes)."""
        return json.dumps(self._as_dict(created=created), indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, *, where: str = "validation record") -> JudgeValidation:
        """Read a record written by to_json(); the statistics are recomputed from the pairs and
        must agree with the ones written.

        Raises:
            ConfigError: not JSON, not a judge validation record, a newer version, a bad field,
                or statistics that do not follow from its pairs (the file was edited).
        """
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{where}:{exc.lineno}: not JSON ({exc.msg}); write it again with "
                "`skynet judge validate`"
            ) from None
        if not isinstance(raw, dict) or raw.get("format") != _RECORD_FORMAT:
            raise ConfigError(
                f'{where}: not a judge validation record (no "format": "{_RECORD_FORMAT}"); '
                "write one with `skynet judge validate`"
            )
        version = raw.get("version")
        if isinstance(version, int) and version > _RECORD_VERSION:
            raise ConfigError(
                f"{where}: judge validation record version {version} is newer than this Skynet "
                f"reads ({_RECORD_VERSION}); upgrade skynet"
            )
        try:
            data = _RecordFile.model_validate_json(text)  # strict, as JSON: arrays as pairs
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            raise ConfigError(
                f"{where}: field '{key}': {first['msg']}; write the record again with "
                "`skynet judge validate`"
            ) from None
        record = judge_validate(
            data.config_hash,
            {"judge": [p[0] for p in data.pairs], "human": [p[1] for p in data.pairs]},
            B=data.B,
            seed=data.seed,
            level=data.level,
            thresholds=JudgeThresholds(**data.thresholds.model_dump()),
            ids=data.ids or None,
        )
        for name in _STATISTICS:
            written, computed = getattr(data, name), getattr(record, name)
            same = (written is None and computed is None) or (
                written is not None
                and computed is not None
                and all(
                    math.isclose(a, b, abs_tol=1e-9)
                    for a, b in (
                        (written.value, float(computed)),
                        (written.low, computed.low),
                        (written.high, computed.high),
                    )
                )
            )
            if not same:
                raise ConfigError(
                    f"{where}: {name} does not follow from the record's pairs (the file was "
                    "edited); write it again with `skynet judge validate`"
                )
        return replace(record, created=data.created)

    def save(self, path: str | Path) -> Path:
        """Write the record as JSON to `path` (its folder must exist). Returns the path."""
        target = Path(path)
        target.write_text(self.to_json(), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> JudgeValidation:
        """Read a record saved with save().

        Raises:
            ConfigError: the file is missing or unreadable, or from_json refuses it.
        """
        target = Path(path)
        try:
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(
                f"{target}: no judge validation record here; {HOW_TO_VALIDATE}"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{target}: cannot read it ({exc}); check the path") from None
        return cls.from_json(text, where=str(target))


class _EstimateFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float
    low: float
    high: float


class _ThresholdsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min_n: int
    min_accuracy: float | None
    min_kappa: float | None
    min_tpr: float | None
    min_tnr: float | None
    min_balanced_accuracy: float | None
    bound: Literal["estimate", "low"]


class _RecordFile(BaseModel):
    """The record's file format, version 1."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    format: Literal["skynet-judge-validation"]
    version: Literal[1]
    config_hash: str
    n: int
    accuracy: _EstimateFile
    kappa: _EstimateFile | None
    tpr: _EstimateFile | None
    tnr: _EstimateFile | None
    balanced_accuracy: _EstimateFile | None
    thresholds: _ThresholdsFile
    B: int
    seed: int
    level: float
    notes: list[str]
    pairs: list[tuple[bool, bool]]
    ids: list[str]
    created: str = ""


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ConfigError(f"judge_validate: {where} is {value!r}; each decision is a bool")


def _pairs_of(labels: Any) -> list[tuple[bool, bool]]:
    if isinstance(labels, Mapping):
        missing = [k for k in ("judge", "human") if k not in labels]
        if missing:
            raise ConfigError(
                f"judge_validate: the labels mapping has no {', '.join(map(repr, missing))}; "
                'give {"judge": [...], "human": [...]}'
            )
        judge, human = list(labels["judge"]), list(labels["human"])
        if len(judge) != len(human):
            raise ConfigError(
                f"judge_validate: {len(judge)} judge decisions but {len(human)} human labels; "
                "give one of each per item, in the same order"
            )
        return [
            (_as_bool(j, f"judge[{i}]"), _as_bool(h, f"human[{i}]"))
            for i, (j, h) in enumerate(zip(judge, human, strict=True))
        ]
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence):
        raise ConfigError(
            f"judge_validate: labels is a {type(labels).__name__}; give a sequence of (judge, "
            'human) bool pairs or {"judge": [...], "human": [...]}'
        )
    pairs = []
    for i, pair in enumerate(labels):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ConfigError(
                f"judge_validate: labels[{i}] is {pair!r}; each entry is a (judge, human) pair"
            )
        pairs.append((_as_bool(pair[0], f"labels[{i}][0]"), _as_bool(pair[1], f"labels[{i}][1]")))
    return pairs


def _statistics(j: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]:
    """Each statistic over the last axis; NaN where it is undefined."""
    n = j.shape[-1]
    agree = (j == h).mean(-1)
    positives = h.sum(-1)
    negatives = n - positives
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = np.where(positives > 0, (j & h).sum(-1) / positives, np.nan)
        tnr = np.where(negatives > 0, (~j & ~h).sum(-1) / negatives, np.nan)
        pj, ph = j.mean(-1), h.mean(-1)
        chance = pj * ph + (1 - pj) * (1 - ph)
        defined = (pj > 0) & (pj < 1) & (ph > 0) & (ph < 1)
        kappa = np.where(defined, (agree - chance) / (1 - chance), np.nan)
    return {
        "accuracy": agree,
        "kappa": kappa,
        "tpr": tpr,
        "tnr": tnr,
        "balanced_accuracy": (tpr + tnr) / 2,
    }


def judge_validate(
    config: JudgeConfig | str,
    labels: Any,
    B: int = 200,
    seed: int = 0,
    *,
    level: float = 0.95,
    thresholds: JudgeThresholds | None = None,
    ids: Sequence[str] | None = None,
) -> JudgeValidation:
    """Measure a judge's agreement with blind human labels on the same items.

    Args:
        config: the judge configuration the decisions came from (or its config_hash).
        labels: (judge, human) bool pairs, one per item, or {"judge": [...], "human": [...]}.
        B: bootstrap resamples for the intervals.
        seed: the bootstrap's seed (same pairs and seed, same record).
        level: the intervals' level.
        thresholds: what judge_valid holds the record to (default DEFAULT_THRESHOLDS).
        ids: the items' ids, kept in the record.

    Returns:
        A JudgeValidation. kappa is None when the human labels or the judge's decisions are all
        one class; tpr with no human positives; tnr with no human negatives; balanced_accuracy
        when either is. `notes` says which and why.

    Raises:
        ConfigError: no pairs, a decision that is not a bool, B < 1, a level outside (0, 1).
    """
    config_hash = config.config_hash if isinstance(config, JudgeConfig) else config
    if not isinstance(config_hash, str) or not config_hash:
        raise ConfigError("judge_validate: give the JudgeConfig the decisions came from")
    pairs = _pairs_of(labels)
    if not pairs:
        raise ConfigError(
            "judge_validate: no labelled pairs; label outputs with `skynet judge collect` first"
        )
    if isinstance(B, bool) or not isinstance(B, int) or B < 1:
        raise ConfigError(f"judge_validate: B = {B!r}; give an int >= 1 (e.g. 200)")
    if not 0 < level < 1:
        raise ConfigError(f"judge_validate: level = {level!r}; give a number in (0, 1)")
    if ids is not None and len(ids) != len(pairs):
        raise ConfigError(f"judge_validate: {len(ids)} ids for {len(pairs)} pairs; give one each")
    thresholds = thresholds or DEFAULT_THRESHOLDS
    n = len(pairs)
    j = np.array([p[0] for p in pairs], dtype=bool)
    h = np.array([p[1] for p in pairs], dtype=bool)
    point = _statistics(j, h)
    rng = np.random.default_rng(seed)
    index = rng.integers(0, n, size=(B, n))
    resampled = _statistics(j[index], h[index])
    tail = (1 - level) / 2 * 100
    notes: list[str] = []
    why = {
        "kappa": "the human labels or the judge's decisions are all one class, so agreement "
        "beyond chance cannot be measured",
        "tpr": "no item is labelled right by the human",
        "tnr": "no item is labelled wrong by the human",
        "balanced_accuracy": "it needs both tpr and tnr",
    }
    found: dict[str, Estimate | None] = {}
    for name in _STATISTICS:
        value = float(point[name])
        if math.isnan(value):
            found[name] = None
            notes.append(f"{name} is undefined: {why[name]}")
            continue
        draws = resampled[name][~np.isnan(resampled[name])]
        if len(draws) < B:
            notes.append(
                f"{name}: {B - len(draws)} of {B} resamples left it undefined (one class only) "
                "and are left out of its interval"
            )
        if len(draws) == 0:
            found[name] = Estimate(value, value, value)
            continue
        low, high = np.percentile(draws, [tail, 100 - tail])
        found[name] = Estimate(value, float(low), float(high))
    if n < thresholds.min_n:
        notes.append(f"only {n} labelled item(s); the thresholds ask for {thresholds.min_n}")
    accuracy = found["accuracy"]
    assert accuracy is not None  # defined whenever there is a pair
    return JudgeValidation(
        config_hash=config_hash,
        n=n,
        accuracy=accuracy,
        kappa=found["kappa"],
        tpr=found["tpr"],
        tnr=found["tnr"],
        balanced_accuracy=found["balanced_accuracy"],
        thresholds=thresholds,
        pairs=tuple(pairs),
        ids=tuple(str(i) for i in ids) if ids is not None else (),
        B=B,
        seed=seed,
        level=level,
        notes=tuple(notes),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def _threshold_problems(record: JudgeValidation, thresholds: JudgeThresholds) -> list[str]:
    problems: list[str] = []
    if record.n < thresholds.min_n:
        problems.append(
            f"n = {record.n} labelled items, fewer than the {thresholds.min_n} required"
        )
    for name in _STATISTICS:
        wanted = getattr(thresholds, f"min_{name}")
        if wanted is None:
            continue
        value = getattr(record, name)
        if value is None:
            reason = next((note for note in record.notes if note.startswith(f"{name} is")), "")
            problems.append(
                f"{name} is undefined ({reason.removeprefix(f'{name} is undefined: ')}), so it "
                f"cannot be held to >= {wanted:g}; label items of both classes"
            )
            continue
        shown = value.low if thresholds.bound == "low" else float(value)
        if shown < wanted:
            what = f"{name} interval low" if thresholds.bound == "low" else name
            problems.append(f"{what} {shown:.3f} is below {wanted:g}")
    return problems


def judge_problems(
    record: JudgeValidation | None, config: JudgeConfig, thresholds: JudgeThresholds | None = None
) -> list[str]:
    """Why `record` does not accept the judge `config` (empty: it does).

    Args:
        record: the validation record.
        config: the judge configuration that wants to score.
        thresholds: what to hold the record to (default: the thresholds it was made with).
    """
    if record is None:
        return ["there is no validation record"]
    if record.config_hash != config.config_hash:
        return [
            f"the validation record was made for judge config {record.config_hash[:12]}, not "
            f"this one ({config.config_hash[:12]}): the model, instructions, grades, orders or "
            "parameters changed since it was made"
        ]
    return _threshold_problems(record, thresholds or record.thresholds)


def judge_valid(
    record: JudgeValidation | None, config: JudgeConfig, thresholds: JudgeThresholds | None = None
) -> bool:
    """True when `record` was made for exactly this config and meets the thresholds (default:
    the record's own; judge_problems says why not)."""
    return not judge_problems(record, config, thresholds)
