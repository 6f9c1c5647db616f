"""reference: grade one JSON record against a verified reference, field by field, and say why.

Every value of the reference is compared with the candidate's value at the same path, up a ladder
of rungs, cheapest and most certain first; the first rung that can decide does:

    exact       equal after case, surrounding whitespace and numeric precision ("ACME" = "Acme",
                4.0 = 4); booleans are all-or-nothing; fields listed in `exact` stop here
    date        both values read as calendar dates: compared as dates, never by similarity
    similarity  text: embedded and compared by cosine; at or above the threshold it is equal
    judge       free-text fields and every non-equal number: a judge model grades 0-100

Lists are sets: their items are matched one to one by an optimal assignment (not greedily) on a
score matrix built with the same ladder, and the result reports matched, missed and
hallucinated items. The sub-scores count the reference's leaf values and the candidate's:

    completeness = credit / reference values       correctness = credit / values given
    quality      = 2 * credit / (reference values + values given)   (their harmonic mean, F1)

where credit sums each compared value's credit (1 right, 0 wrong, fractional for a similarity or
a judge's grade where the rung gives partial credit). docs/scorers.md ("reference") has the
details: which strings count as dates, the strictness -> threshold mapping and its calibration.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from skynet.data import Item
from skynet.errors import ConfigError, DatasetError, MetricError
from skynet.scorers.embed import _DEFAULT_ALIASES, DEFAULT_EMBEDDER, Embedder, get_embedder

__all__ = [
    "CALIBRATION",
    "DATE",
    "EXACT",
    "EXTRA",
    "JUDGE",
    "JUDGE_NUMBER_EXACT",
    "JUDGE_NUMBER_PARTIAL",
    "JUDGE_TEXT",
    "MISSING",
    "RUNGS",
    "SHAPE",
    "SIMILARITY",
    "STRICTNESS_LEVELS",
    "FieldResult",
    "ListResult",
    "Match",
    "ReferenceResult",
    "ReferenceScorer",
    "Unmatched",
    "parse_grade",
    "threshold_for",
]

# -- rungs: which step of the ladder decided a field ----------------------------------------------
EXACT = "exact"
DATE = "date"
SIMILARITY = "similarity"
JUDGE = "judge"
MISSING = "missing"  # the reference has a value here, the candidate none
EXTRA = "extra"  # the candidate has a value here, the reference none
SHAPE = "shape"  # one side is a record or a list where the other is a plain value
RUNGS = (EXACT, DATE, SIMILARITY, JUDGE, MISSING, EXTRA, SHAPE)

# -- strictness -> cosine threshold ---------------------------------------------------------------
STRICTNESS_LEVELS = {"lenient": 0.25, "normal": 0.5, "strict": 0.75}
# (strictness, threshold) anchors, joined by straight lines. Calibrated with all-MiniLM-L6-v2 on
# 22 name variants and 20 near-miss non-matches (benchmarks/reference_calibration.py, table in
# docs/scorers.md): at 0 every variant counts as equal (the lowest variant cosine is 0.556), at
# 0.5 the set is split with the fewest errors, at 1 no non-match does (the highest is 0.953).
CALIBRATION = ((0.0, 0.55), (0.5, 0.75), (1.0, 0.96))

_MEMO_LIMIT = 100_000  # embedded texts kept in memory per scorer before the memo starts afresh


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


# -- results --------------------------------------------------------------------------------------


class FieldResult(NamedTuple):
    """How one value was compared.

    A NamedTuple, so immutable: built about three times faster than a frozen dataclass, and the
    exact path builds one per value, 20,000 and more a second.

    Attributes:
        path: where the value sits, e.g. "director" or "cast[2].name" (list items by their index
            in the reference; a hallucinated item is in its ListResult, not here).
        candidate: the candidate's value (None when missing).
        reference: the reference's value (None when the candidate's value is extra).
        rung: which rung decided: exact, date, similarity, judge, missing, extra or shape.
        equal: whether the value counts as right; None when the judge's reply could not be read.
        credit: what the value adds to the sub-scores, in [0, 1]; None: left out of them (a judge
            reply that could not be read).
        similarity: the cosine, when the similarity rung ran.
        grade: the judge's grade 0-100, when the judge rung ran.
        note: plain words on anything unusual (e.g. the judge's unreadable reply).
    """

    path: str
    candidate: Any
    reference: Any
    rung: str
    equal: bool | None
    credit: float | None
    similarity: float | None = None
    grade: int | None = None
    note: str = ""


class Match(NamedTuple):
    """A reference list item paired with a candidate item.

    Attributes:
        reference_index, candidate_index: the items' positions in their lists.
        reference, candidate: the items.
        score: the pair's quality (for records, the F1 of their fields; for values, the credit).
        fields: the pair's per-field detail.
    """

    reference_index: int
    candidate_index: int
    reference: Any
    candidate: Any
    score: float
    fields: tuple[FieldResult, ...]


class Unmatched(NamedTuple):
    """A list item left without a partner: missed (reference) or hallucinated (candidate)."""

    index: int
    value: Any


@dataclass(frozen=True, slots=True)
class ListResult:
    """One list field, matched as a set.

    Attributes:
        path: the list's path, e.g. "cast" (or "seasons[0].episodes" for a nested list).
        matched: the pairs the optimal assignment kept (each at or above the match bar).
        missed: reference items no candidate item matched.
        hallucinated: candidate items that match no reference item.
    """

    path: str
    matched: tuple[Match, ...]
    missed: tuple[Unmatched, ...]
    hallucinated: tuple[Unmatched, ...]


@dataclass(frozen=True, slots=True)
class ReferenceResult:
    """The reference scorer's grade of one candidate record.

    Attributes:
        quality: the F1 of completeness and correctness, in [0, 1]; a run sorts by it.
        completeness: credit / reference values (how much of the reference was found).
        correctness: credit / values given (how much of what was given is right).
        fields: every compared value outside lists, and every value of matched list items.
        lists: each list field's ListResult, by path.
        notes: what ran degraded (no embedder, no judge), an unreadable output, judge errors.
        credit: the summed credit.
        reference_values: how many leaf values the reference holds (judge errors left out).
        given_values: how many leaf values the candidate gave (judge errors left out).
        threshold: the cosine threshold in force; None when no embedder ran.
    """

    quality: float
    completeness: float
    correctness: float
    fields: tuple[FieldResult, ...]
    lists: Mapping[str, ListResult]
    notes: tuple[str, ...]
    credit: float
    reference_values: int
    given_values: int
    threshold: float | None = None

    @property
    def scores(self) -> dict[str, float]:
        """The named sub-scores a run records and the reflection model reads."""
        return {
            "quality": self.quality,
            "completeness": self.completeness,
            "correctness": self.correctness,
        }

    def field(self, path: str) -> FieldResult:
        """The FieldResult at `path`.

        Raises:
            KeyError: no compared value sits there (the message lists the paths).
        """
        for found in self.fields:
            if found.path == path:
                return found
        raise KeyError(f"no field {path!r}; fields: {', '.join(f.path for f in self.fields)}")

    @property
    def feedback(self) -> str:
        """Plain words for the reflection model: the sub-scores, then what is wrong and why."""
        return _feedback(self)


# -- values ---------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _absent(value: Any) -> bool:
    """None, blank text, or an empty record or list: no value."""
    if value is None:
        return True
    kind = type(value)
    if kind is str:
        return not value.strip()
    return (kind is dict or kind is list) and not value


def _has_value(value: Any) -> bool:
    kind = type(value)
    if kind is dict or kind is list:
        return _leaves(value) > 0
    return not _absent(value)


def _leaves(value: Any) -> int:
    """How many values a record, list or value holds (absent ones not counted)."""
    kind = type(value)
    if kind is dict:
        return sum(_leaves(v) for v in value.values())
    if kind is list:
        return sum(_leaves(v) for v in value)
    return 0 if _absent(value) else 1


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_NUMBER_START = frozenset("0123456789+-.")


def _number(value: Any) -> int | float | None:
    """A value as a number: ints and floats, numeric text ("4.0", "1,234.5"); never a bool."""
    kind = type(value)
    if kind is int or kind is float:
        return value
    if kind is str:
        text = value.strip()
        if text[:1] not in _NUMBER_START:
            return None
        if _NUMBER.fullmatch(text):
            return int(text) if text.lstrip("+-").isdigit() else float(text)
        if _GROUPED.fullmatch(text):
            return float(text.replace(",", ""))
        return None
    if kind is bool or not isinstance(value, numbers.Real):
        return None
    return float(value)


def _same_number(a: int | float, b: int | float) -> bool:
    if type(a) is int and type(b) is int:
        return a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


_BOOLS = {"true": True, "false": False, "yes": True, "no": False}


def _boolean(value: Any) -> bool | None:
    if type(value) is bool:
        return value
    if type(value) is str:
        return _BOOLS.get(value.strip().lower())
    return None


def _scalar_key(value: Any) -> tuple[str, Any]:
    """A list item's identity for the all-equal fast path: equal keys are exactly equal values."""
    kind = type(value)
    if kind is bool:
        return ("b", value)
    number = _number(value)
    if number is not None:
        return ("n", float(number))
    return ("s", _norm(value) if kind is str else repr(value))


def _shown(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- dates ----------------------------------------------------------------------------------------

_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12,
}  # fmt: skip
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINAL = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_ISO_DATE = re.compile(r"(?P<year>\d{4})[-/](?P<month>\d{1,2})[-/](?P<day>\d{1,2})")
_ISO_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
_DAY_MONTH_YEAR = re.compile(rf"{_ORDINAL}\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})", re.I)
_MONTH_DAY_YEAR = re.compile(rf"{_MONTH}\s+{_ORDINAL},?\s+(?P<year>\d{{4}})", re.I)
_WORDS = re.compile(r"[^\W\d_]+")
_DATE_WORDS = frozenset(_MONTHS) | {
    "monday", "mon", "tuesday", "tue", "tues", "wednesday", "wed", "thursday", "thu", "thurs",
    "friday", "fri", "saturday", "sat", "sunday", "sun", "st", "nd", "rd", "th", "of", "the",
    "at", "on", "t", "z", "am", "pm", "a", "p", "m", "utc", "gmt",
}  # fmt: skip
_DEFAULT_A = datetime(2000, 1, 1)
_DEFAULT_B = datetime(2001, 2, 2)


def _fixed_date(text: str) -> date | datetime | None:
    """A date in one of the unambiguous forms auto-detected (docs/scorers.md lists them)."""
    text = text.strip()
    if not text or not text[0].isalnum() or len(text) > 40:
        return None
    found = _ISO_DATE.fullmatch(text)
    if found:
        month = int(found["month"])
    elif _ISO_TIME.fullmatch(text):
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            return None
    else:
        found = _DAY_MONTH_YEAR.fullmatch(text) or _MONTH_DAY_YEAR.fullmatch(text)
        if not found:
            return None
        month = _MONTHS[found["month"].lower()]
    try:
        return date(int(found["year"]), month, int(found["day"]))
    except ValueError:
        return None  # 31 February and the like


def _loose_date(text: str, *, forced: bool) -> date | datetime | None:
    """A date in any form python-dateutil reads, with year, month and day all given.

    Unless `forced` (a `dates` field), a reading that changes with day-first order ("03/04/1972")
    is ambiguous and not a date; forced, it is read month first.
    """
    words = _WORDS.findall(text)
    if not any(c.isdigit() for c in text) or any(w.lower() not in _DATE_WORDS for w in words):
        return None  # dateutil would fail, slowly: every word must be a date's
    from dateutil import parser

    try:
        a = parser.parse(text, default=_DEFAULT_A)
        b = parser.parse(text, default=_DEFAULT_B)
        if a.date() != b.date():
            return None  # a year, month or day was filled in from the default
        if not forced and parser.parse(text, default=_DEFAULT_A, dayfirst=True) != a:
            return None
    except (ValueError, OverflowError, TypeError):
        return None
    if a.tzinfo is None and (a.hour, a.minute, a.second, a.microsecond) == (0, 0, 0, 0):
        return a.date()
    return a


def _same_date(a: date | datetime, b: date | datetime) -> bool:
    a_time, b_time = isinstance(a, datetime), isinstance(b, datetime)
    if a_time and b_time:
        assert isinstance(a, datetime) and isinstance(b, datetime)
        if (a.tzinfo is None) != (b.tzinfo is None):
            return a.replace(tzinfo=None) == b.replace(tzinfo=None)
        return a == b
    day_a = a.date() if isinstance(a, datetime) else a
    day_b = b.date() if isinstance(b, datetime) else b
    return day_a == day_b


# -- the judge ------------------------------------------------------------------------------------

_JUDGE_COMMON = (
    "You grade one field of a structured answer against a verified reference. The user message "
    'is JSON: "field" (the field\'s name), "reference" (the verified value) and "answer" (the '
    "value to grade). Reply with one integer from 0 to 100 and nothing else. "
)
JUDGE_TEXT = _JUDGE_COMMON + (
    "Grade how well the answer keeps the reference's meaning: 100 the same meaning however "
    "worded; 0 a different or contradicting meaning, or nothing of substance; in between, part of "
    "the meaning kept and nothing contradicted."
)
JUDGE_NUMBER_PARTIAL = _JUDGE_COMMON + (
    "The field is a measured or estimated quantity where a close value earns partial credit. "
    "100: the same quantity (in any notation or unit); less the further the answer is from the "
    "reference, relative to its size and to the precision the reference is given to; 0 when it "
    "is far off or not a quantity."
)
JUDGE_NUMBER_EXACT = _JUDGE_COMMON + (
    "Precision matters in this field (a year, a count, an identifier): 100 only if the answer is "
    "the same quantity written differently (another notation or unit); otherwise 0."
)

_GRADE = re.compile(r"(?:(?:score|grade)\s*[:=]?\s*)?(\d{1,3})\s*(?:/\s*100|%)?\s*\.?", re.I)


def parse_grade(text: str) -> int | None:
    """A judge's reply as a grade 0-100, read strictly; None when it is anything else.

    Accepted: one integer, optionally after "score" or "grade" (and a colon) and before "/100",
    "%" or a full stop, with surrounding whitespace: "85", "Score: 85", "85/100". Not accepted:
    text around it ("I'd say 85"), a decimal, two numbers, a number above 100.
    """
    found = _GRADE.fullmatch(text.strip())
    if not found:
        return None
    grade = int(found[1])
    return grade if grade <= 100 else None


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


# -- one scoring pass -----------------------------------------------------------------------------


class _Tally:
    """What a comparison found: summed credit, counts, detail, and what a judge would have graded."""

    __slots__ = ("credit", "reference", "given", "fields", "lists", "unjudged", "deferred")

    def __init__(self) -> None:
        self.credit = 0.0
        self.reference = 0
        self.given = 0
        self.fields: list[FieldResult] = []
        self.lists: dict[str, ListResult] = {}
        self.unjudged: list[str] = []  # paths a judge would have graded, had there been one
        self.deferred = 0  # judge-able values scored without the judge while matching lists

    def add(self, result: FieldResult, reference: int = 1, given: int = 1) -> None:
        self.fields.append(result)
        if result.credit is None:
            return  # a judge error: left out of the scores
        self.credit += result.credit
        self.reference += reference
        self.given += given

    def merge(self, other: _Tally) -> None:
        self.credit += other.credit
        self.reference += other.reference
        self.given += other.given
        self.fields.extend(other.fields)
        self.lists.update(other.lists)
        self.unjudged.extend(other.unjudged)
        self.deferred += other.deferred

    def scores(self) -> tuple[float, float, float]:
        """(quality, completeness, correctness); see the module docstring for the formulas."""
        if self.reference == 0 and self.given == 0:
            return 1.0, 1.0, 1.0
        completeness = self.credit / self.reference if self.reference else 1.0
        correctness = self.credit / self.given if self.given else 0.0
        quality = 2.0 * self.credit / (self.reference + self.given)
        return quality, completeness, correctness


class _Pass:
    """Scoring one candidate against one reference with a scorer's settings."""

    __slots__ = ("s", "item_id", "embedder", "memo")

    def __init__(self, scorer: ReferenceScorer, item_id: str, embedder: Embedder | None) -> None:
        self.s = scorer
        self.item_id = item_id
        self.embedder = embedder
        self.memo = scorer._memo

    # The walk ------------------------------------------------------------------------------------

    def value(
        self, t: _Tally, path: str, pattern: str, ref: Any, cand: Any, judge_ok: bool
    ) -> None:
        ref_kind = type(ref)
        if ref_kind is dict:
            if _absent(cand):
                cand = {}
            elif type(cand) is not dict:
                t.add(FieldResult(path, cand, ref, SHAPE, False, 0.0), _leaves(ref), _leaves(cand))
                return
            self.record(t, path, pattern, ref, cand, judge_ok)
        elif ref_kind is list:
            if _absent(cand):
                cand = []
            elif type(cand) is not list:
                t.add(FieldResult(path, cand, ref, SHAPE, False, 0.0), _leaves(ref), _leaves(cand))
                return
            self.list_field(t, path, pattern, ref, cand, judge_ok)
        elif _absent(ref):
            given = _leaves(cand)
            if given:
                t.add(FieldResult(path, cand, None, EXTRA, False, 0.0), 0, given)
        elif _absent(cand):
            t.add(FieldResult(path, None, ref, MISSING, False, 0.0), 1, 0)
        elif type(cand) is dict or type(cand) is list:
            t.add(FieldResult(path, cand, ref, SHAPE, False, 0.0), 1, _leaves(cand))
        else:
            t.add(self.leaf(t, path, pattern, ref, cand, judge_ok))

    def record(
        self, t: _Tally, path: str, pattern: str, ref: dict, cand: dict, judge_ok: bool
    ) -> None:
        fields = t.fields
        same = 0
        for key, rv in ref.items():
            cv = cand.get(key)
            sub = f"{path}.{key}" if path else str(key)
            # The common cases inline: two equal texts, two equal numbers or booleans of one type
            # (the exact rung's fast path).
            kind = type(rv)
            if (
                kind is str
                and type(cv) is str
                and (rv == cv or _norm(rv) == _norm(cv))
                and rv.strip()
            ) or ((kind is int or kind is float or kind is bool) and type(cv) is kind and rv == cv):
                fields.append(FieldResult(sub, cv, rv, EXACT, True, 1.0))
                same += 1
            else:
                sub_pattern = f"{pattern}.{key}" if pattern else str(key)
                self.value(t, sub, sub_pattern, rv, cv, judge_ok)
        t.credit += same
        t.reference += same
        t.given += same
        for key, cv in cand.items():
            if key not in ref:
                given = _leaves(cv)
                if given:
                    sub = f"{path}.{key}" if path else str(key)
                    t.add(FieldResult(sub, cv, None, EXTRA, False, 0.0), 0, given)

    # One value -----------------------------------------------------------------------------------

    def leaf(
        self, t: _Tally, path: str, pattern: str, ref: Any, cand: Any, judge_ok: bool
    ) -> FieldResult:
        s = self.s
        ref_kind, cand_kind = type(ref), type(cand)
        if ref_kind is cand_kind and ref == cand:
            return FieldResult(path, cand, ref, EXACT, True, 1.0)
        if ref_kind is str and cand_kind is str and _norm(ref) == _norm(cand):
            return FieldResult(path, cand, ref, EXACT, True, 1.0)
        # Booleans: all or nothing, never a number, never embedded.
        if ref_kind is bool or cand_kind is bool:
            equal = _boolean(ref) is not None and _boolean(ref) == _boolean(cand)
            return FieldResult(path, cand, ref, EXACT, equal, 1.0 if equal else 0.0)
        ref_number, cand_number = _number(ref), _number(cand)
        # Dates: a reference date (or any value of a `dates` field) is compared as a calendar
        # value, whatever the answer looks like; never by similarity, never as a number.
        if ref_kind is str and ref_number is None and pattern not in s.exact:
            forced = pattern in s.dates
            ref_date = _fixed_date(ref)
            if ref_date is None and forced:
                ref_date = _loose_date(ref, forced=True)
                if ref_date is None:
                    raise DatasetError(
                        f"item '{self.item_id}': field '{path}' is listed in `dates`, but its "
                        f"reference {_shown(ref)} is not a date; fix the reference or the option"
                    )
            if ref_date is not None:
                cand_text = cand if cand_kind is str else str(cand)
                cand_date = _fixed_date(cand_text) or _loose_date(cand_text, forced=forced)
                if cand_date is None:
                    return FieldResult(
                        path, cand, ref, DATE, False, 0.0, note="the answer is not a date read here"
                    )
                equal = _same_date(ref_date, cand_date)
                return FieldResult(path, cand, ref, DATE, equal, 1.0 if equal else 0.0)
        # Numbers: equal, else the judge (or a mismatch); never embedded.
        if (
            ref_number is not None
            and cand_number is not None
            and _same_number(ref_number, cand_number)
        ):
            return FieldResult(path, cand, ref, EXACT, True, 1.0)
        if pattern in s.exact:
            return FieldResult(path, cand, ref, EXACT, False, 0.0)
        if ref_number is not None or cand_number is not None:
            return self.judged(t, path, pattern, ref, cand, "number", judge_ok)
        ref_text = ref if ref_kind is str else str(ref)
        cand_text = cand if cand_kind is str else str(cand)
        if pattern in s.free_text:
            return self.judged(t, path, pattern, ref_text, cand_text, "text", judge_ok)
        if self.embedder is None:
            return FieldResult(path, cand, ref, EXACT, False, 0.0)
        similarity = self.similarity(ref_text, cand_text)
        equal = similarity >= s.threshold
        return FieldResult(path, cand, ref, SIMILARITY, equal, 1.0 if equal else 0.0, similarity)

    def judged(
        self, t: _Tally, path: str, pattern: str, ref: Any, cand: Any, kind: str, judge_ok: bool
    ) -> FieldResult:
        """A free-text value or a non-equal number: the judge, or what stands in for it."""
        s = self.s
        if s.judge is not None and judge_ok:
            return self.ask_judge(path, pattern, ref, cand, kind)
        if s.judge is None:
            t.unjudged.append(path)
        else:
            t.deferred += 1
        if kind == "text" and self.embedder is not None:
            similarity = self.similarity(ref, cand)
            credit = min(1.0, max(0.0, similarity))
            return FieldResult(
                path, cand, ref, SIMILARITY, similarity >= s.threshold, credit, similarity
            )
        return FieldResult(path, cand, ref, EXACT, False, 0.0)

    def ask_judge(self, path: str, pattern: str, ref: Any, cand: Any, kind: str) -> FieldResult:
        from skynet.models.client import current

        s = self.s
        if kind == "text":
            instructions = JUDGE_TEXT
        elif pattern in s.partial_numeric:
            instructions = JUDGE_NUMBER_PARTIAL
        else:
            instructions = JUDGE_NUMBER_EXACT
        # The field's name without list indices: the same pair of values in any list position
        # is one cached call.
        payload = json.dumps(
            {"field": pattern, "reference": ref, "answer": cand}, ensure_ascii=False, default=str
        )
        messages = [
            {"role": "system", "content": instructions},
            {"role": "user", "content": payload},
        ]
        reply = current(for_metric=True).complete(
            "metric", messages, model=s.judge, draw=0, temperature=0.0, max_tokens=16
        )
        grade = parse_grade(reply.text)
        if grade is None:
            return FieldResult(
                path,
                cand,
                ref,
                JUDGE,
                None,
                None,
                note=(
                    f"the judge '{s.judge}' replied {_shown(reply.text, 60)}, not an integer "
                    "0-100; the field is left out of the scores"
                ),
            )
        return FieldResult(path, cand, ref, JUDGE, grade >= 50, grade / 100.0, grade=grade)

    # Similarity ----------------------------------------------------------------------------------

    def similarity(self, a: str, b: str) -> float:
        va, vb = self.vector(a), self.vector(b)
        return float(np.dot(va, vb))

    def vector(self, text: str) -> np.ndarray:
        key = text.strip()
        found = self.memo.get(key)
        if found is None:
            assert self.embedder is not None
            found = self.embedder.embed([key])[0]
            with self.s._lock:
                if len(self.memo) >= _MEMO_LIMIT:
                    self.memo.clear()
                self.memo[key] = found
        return found

    def prefetch(self, texts: Iterable[str]) -> None:
        """Embed, in one batch, those texts the memo lacks."""
        assert self.embedder is not None
        missing = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if not missing:
            return
        rows = self.embedder.embed(missing)
        with self.s._lock:
            if len(self.memo) + len(missing) > _MEMO_LIMIT:
                self.memo.clear()
            for text, row in zip(missing, rows, strict=True):
                self.memo[text] = row

    # Lists ---------------------------------------------------------------------------------------

    def list_field(
        self, t: _Tally, path: str, pattern: str, ref: list, cand: list, judge_ok: bool
    ) -> None:
        refs = [(i, v) for i, v in enumerate(ref) if _has_value(v)]
        cands = [(j, v) for j, v in enumerate(cand) if _has_value(v)]
        equal: dict[int, int] = {}  # reference position -> candidate position, exactly equal
        if refs and cands and _scalars(refs) and _scalars(cands):
            # Pair exactly equal items by value first. Optimal when every pair scores 0 or 1 by
            # a transitive equality (no embedder), or when every item finds its equal (the best
            # total there is); otherwise a similarity could beat it, and the assignment decides.
            keys = [_scalar_key(v) for _, v in refs]
            cand_keys = [_scalar_key(v) for _, v in cands]
            if self.embedder is None or sorted(keys) == sorted(cand_keys):
                waiting: dict[tuple[str, Any], list[int]] = {}
                for b, key in enumerate(cand_keys):
                    waiting.setdefault(key, []).append(b)
                for a, key in enumerate(keys):
                    free = waiting.get(key)
                    if free:
                        equal[a] = free.pop(0)
        found: dict[int, tuple[int, _Tally]] = {}  # the other pairs, with their detail
        if len(equal) < len(refs) and len(equal) < len(cands):
            taken = set(equal.values())
            rest_refs = [a for a in range(len(refs)) if a not in equal]
            rest_cands = [b for b in range(len(cands)) if b not in taken]
            self.assign(found, refs, cands, rest_refs, rest_cands, path, pattern + "[]", judge_ok)
        matched: list[Match] = []
        for a in sorted(equal.keys() | found.keys()):
            i, rv = refs[a]
            if a in equal:
                j, cv = cands[equal[a]]
                same = FieldResult(f"{path}[{i}]", cv, rv, EXACT, True, 1.0)
                t.add(same)
                matched.append(Match(i, j, rv, cv, 1.0, (same,)))
            else:
                b, pair = found[a]
                j, cv = cands[b]
                t.merge(pair)
                matched.append(Match(i, j, rv, cv, pair.scores()[0], tuple(pair.fields)))
        taken = set(equal.values()) | {b for b, _ in found.values()}
        missed = tuple(
            Unmatched(i, v) for a, (i, v) in enumerate(refs) if a not in equal and a not in found
        )
        hallucinated = tuple(Unmatched(j, v) for b, (j, v) in enumerate(cands) if b not in taken)
        if missed:
            t.reference += sum(_leaves(u.value) for u in missed)
        if hallucinated:
            t.given += sum(_leaves(u.value) for u in hallucinated)
        t.lists[path] = ListResult(path, tuple(matched), missed, hallucinated)

    def assign(
        self,
        found: dict[int, tuple[int, _Tally]],
        refs: list[tuple[int, Any]],
        cands: list[tuple[int, Any]],
        rest_refs: list[int],
        rest_cands: list[int],
        path: str,
        item_pattern: str,
        judge_ok: bool,
    ) -> None:
        """Match the remaining items one to one by an optimal assignment on their pair scores."""
        trials: dict[tuple[int, int], _Tally] = {}
        scores = np.zeros((len(rest_refs), len(rest_cands)))
        for x, a in enumerate(rest_refs):
            i, rv = refs[a]
            for y, b in enumerate(rest_cands):
                # Every rung but the judge: n x m judge calls would be paid for pairs that are
                # then thrown away. The matched pairs are judged below.
                trial = _Tally()
                self.value(trial, f"{path}[{i}]", item_pattern, rv, cands[b][1], False)
                trials[x, y] = trial
                scores[x, y] = trial.scores()[0]
        bar = self.s.match_bar
        if len(rest_refs) == 1 or len(rest_cands) == 1:
            # One side has one item: the best pair is the optimal assignment.
            x, y = np.unravel_index(int(np.argmax(scores)), scores.shape)
            chosen = [(int(x), int(y))]
        else:
            from scipy.optimize import linear_sum_assignment

            rows, cols = linear_sum_assignment(np.where(scores >= bar, scores, 0.0), maximize=True)
            chosen = list(zip(rows.tolist(), cols.tolist(), strict=True))
        for x, y in chosen:
            if scores[x, y] < bar:
                continue
            a, b = rest_refs[x], rest_cands[y]
            pair = trials[x, y]
            if pair.deferred and judge_ok and self.s.judge is not None:
                pair = _Tally()
                self.value(
                    pair, f"{path}[{refs[a][0]}]", item_pattern, refs[a][1], cands[b][1], True
                )
            found[a] = (b, pair)


def _scalars(items: list[tuple[int, Any]]) -> bool:
    return all(type(v) is not dict and type(v) is not list for _, v in items)


def _strings(value: Any, pattern: str, skip: frozenset[str], out: dict[str, str]) -> None:
    """The text values of a record that may reach the embedder, by their normalised form.

    Left out: numbers, dates (in a form read without dateutil), and fields in `skip` (exact and
    dates fields), none of which is ever embedded.
    """
    kind = type(value)
    if kind is str:
        text = value.strip()
        if text and pattern not in skip and _number(text) is None and _fixed_date(text) is None:
            out.setdefault(_norm(text), text)
    elif kind is dict:
        for key, v in value.items():
            _strings(v, f"{pattern}.{key}" if pattern else key, skip, out)
    elif kind is list:
        for v in value:
            _strings(v, pattern + "[]", skip, out)


# -- reading outputs ------------------------------------------------------------------------------

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n(.*?)\n?\s*```", re.S)


def _candidate(output: Any) -> tuple[dict | None, str]:
    """The candidate record and, when there is none, why."""
    if output is None:
        return {}, "the output is empty"
    if type(output) is dict:
        return output, ""
    if isinstance(output, Mapping):
        return dict(output), ""
    dump = getattr(output, "model_dump", None)
    if callable(dump):  # a pydantic model, as a DSPy program may return
        value = dump()
        if isinstance(value, dict):
            return value, ""
    text = getattr(output, "text", output)  # a skynet.scorers.Reply: its text
    if not isinstance(text, str):
        return None, f"the output is a {type(output).__name__}, not a JSON object"
    text = text.strip()
    if not text:
        return {}, "the output is empty"
    fenced = _FENCE.fullmatch(text)
    if fenced:
        text = fenced[1].strip()
    try:
        value = json.loads(text)
    except ValueError as exc:
        return None, f"the output is not JSON ({exc.args[0] if exc.args else exc}): {_shown(text)}"
    if not isinstance(value, dict):
        return None, f"the output is JSON but a {type(value).__name__}, not an object"
    return value, ""


# -- the scorer -----------------------------------------------------------------------------------


class ReferenceScorer:
    """The reference scorer, version 1: a JSON record graded field by field against a reference.

    Args:
        strictness: a number in [0, 1] or "lenient" (0.25), "normal" (0.5), "strict" (0.75):
            how similar two texts must be to count as equal (see threshold_for).
        embedder: "all-MiniLM-L6-v2" (the bundled model, the default), a litellm embedding model
            name, an Embedder, or None for exact matching only.
        judge: the judge model (a litellm name, called through skynet.models as the metric
            role), or None: free text is then graded by similarity and a non-equal number is a
            mismatch.
        free_text: field paths (e.g. "summary", "cast[].bio") whose text the judge grades, or,
            without a judge, the cosine gives partial credit.
        partial_numeric: number fields where the judge may give partial credit (273.37 for
            273.35); elsewhere it is told precision matters.
        dates: field paths always read as dates, in any form python-dateutil reads (month first
            when ambiguous); other fields are dates when both values are in an unambiguous form.
        exact: field paths compared by the exact rung only (identifiers, codes).
        match_bar: the least pair score at which two list items are matched, in (0, 1].
        column: the expected column holding the reference record (a JSON object, or its JSON
            text); None: the only expected column, or, when there are several, the expected
            columns themselves are the record's fields.
        cache_dir: the project's cache folder (.skynet): embeddings are kept there.

    Raises:
        ConfigError: an option's value is refused (the message says which and why).
    """

    name = "reference"
    version = 1

    def __init__(
        self,
        *,
        strictness: float | str = "normal",
        embedder: str | Embedder | None = DEFAULT_EMBEDDER,
        judge: str | None = None,
        free_text: Iterable[str] = (),
        partial_numeric: Iterable[str] = (),
        dates: Iterable[str] = (),
        exact: Iterable[str] = (),
        match_bar: float = 0.5,
        column: str | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.strictness = _strictness(strictness)
        self.threshold = threshold_for(self.strictness)
        if embedder is not None and not isinstance(embedder, str):
            if not isinstance(embedder, Embedder):
                raise ConfigError(
                    f"scorer 'reference': embedder {embedder!r} is not an embedder; give a model "
                    f"name ('{DEFAULT_EMBEDDER}' or a litellm embedding model), an object with "
                    ".name and .embed(texts), or None for exact matching only"
                )
        elif isinstance(embedder, str) and not embedder.strip():
            raise ConfigError(
                f"scorer 'reference': embedder is empty; give '{DEFAULT_EMBEDDER}', a litellm "
                "embedding model name, or None for exact matching only"
            )
        if isinstance(embedder, str) and embedder.strip().lower() == "none":
            embedder = None
        self.embedder_spec = embedder
        if judge is not None and (not isinstance(judge, str) or not judge.strip()):
            raise ConfigError(
                f"scorer 'reference': judge must be a model name (e.g. 'openai/gpt-4o-mini') or "
                f"None, not {judge!r}"
            )
        self.judge = judge.strip() if judge else None
        self.free_text = _paths("free_text", free_text)
        self.partial_numeric = _paths("partial_numeric", partial_numeric)
        self.dates = _paths("dates", dates)
        self.exact = _paths("exact", exact)
        for a, b in (("dates", "free_text"), ("exact", "free_text"), ("exact", "dates")):
            both = getattr(self, a) & getattr(self, b)
            if both:
                raise ConfigError(
                    f"scorer 'reference': {', '.join(sorted(both))} is in both {a} and {b}; a "
                    "field has one kind, list it in one"
                )
        if (
            isinstance(match_bar, bool)
            or not isinstance(match_bar, numbers.Real)
            or not 0.0 < float(match_bar) <= 1.0
        ):
            raise ConfigError(
                f"scorer 'reference': match_bar {match_bar!r} must be a number in (0, 1]"
            )
        self.match_bar = float(match_bar)
        if column is not None and (not isinstance(column, str) or not column):
            raise ConfigError(
                f"scorer 'reference': column must be an output column's name, not {column!r}"
            )
        self.column = column
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._embedder: Embedder | None = None
        self._resolved = False
        self._lock = threading.Lock()
        self._memo: dict[str, np.ndarray] = {}
        self._config_hash: str | None = None

    def __repr__(self) -> str:
        return (
            f"ReferenceScorer(strictness={self.strictness:g}, embedder={self.embedder_name!r}, "
            f"judge={self.judge!r})"
        )

    # Identity -----------------------------------------------------------------------------------

    @property
    def embedder_name(self) -> str | None:
        """The embedder's identity (None for exact matching only), without loading it."""
        spec = self.embedder_spec
        if spec is None:
            return None
        if isinstance(spec, str):
            name = spec.strip()
            return DEFAULT_EMBEDDER if name.lower() in _DEFAULT_ALIASES else name
        return spec.name

    @property
    def settings(self) -> dict[str, Any]:
        """Everything that decides a grade, as plain data (what config_hash covers)."""
        return {
            "scorer": self.name,
            "version": self.version,
            "strictness": self.strictness,
            "threshold": self.threshold,
            "embedder": self.embedder_name,
            "judge": self.judge,
            "free_text": sorted(self.free_text),
            "partial_numeric": sorted(self.partial_numeric),
            "dates": sorted(self.dates),
            "exact": sorted(self.exact),
            "match_bar": self.match_bar,
            "column": self.column,
        }

    @property
    def config_hash(self) -> str:
        """sha256 of `settings`: results graded under another hash are stale."""
        if self._config_hash is None:
            canonical = json.dumps(self.settings, sort_keys=True, separators=(",", ":"))
            self._config_hash = hashlib.sha256(canonical.encode()).hexdigest()
        return self._config_hash

    def embedder(self) -> Embedder | None:
        """The embedder, loaded on first use (thread-safe); None for exact matching only."""
        if not self._resolved:
            with self._lock:
                if not self._resolved:
                    self._embedder = get_embedder(self.embedder_spec, cache_dir=self.cache_dir)
                    self._resolved = True
        return self._embedder

    # The reference ------------------------------------------------------------------------------

    def reference(self, item: Item) -> dict[str, Any]:
        """The item's reference record.

        Raises:
            DatasetError: the item has no expected output, the named column is missing, or the
                reference is not a JSON object (it cannot be judged).
        """
        expected = item.expected
        if not expected:
            raise DatasetError(
                f"item '{item.id}' has no expected output; the reference scorer grades against "
                "the item's reference record: give the item its output column(s)"
            )
        if self.column is not None:
            if self.column not in expected:
                raise DatasetError(
                    f"item '{item.id}' has no output column '{self.column}' (its outputs: "
                    f"{', '.join(map(repr, expected))}); fix the data or the scorer's column"
                )
            raw, where = expected[self.column], f"column '{self.column}'"
        elif len(expected) == 1:
            column, raw = next(iter(expected.items()))
            where = f"column '{column}'"
        else:
            raw, where = expected, "expected columns"
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError as exc:
                raise DatasetError(
                    f"item '{item.id}': the reference ({where}) is not valid JSON ({exc}); it "
                    "must be one JSON object"
                ) from None
        if not isinstance(raw, dict):
            raise DatasetError(
                f"item '{item.id}': the reference ({where}) is a {type(raw).__name__}, not a "
                "JSON object; the reference scorer grades records: make it an object"
            )
        return raw

    def key(self, item: Item) -> dict[str, Any]:
        """The output that scores 1.0: the item's reference record itself."""
        return self.reference(item)

    # Scoring ------------------------------------------------------------------------------------

    def score(self, item: Item, output: Any) -> ReferenceResult:
        """Grade `output` (a dict, JSON text, a fenced JSON block, or None) against the reference.

        A malformed output is a wrong answer (quality 0, with a note), never an exception.

        Raises:
            DatasetError: the item's reference cannot be read (the item cannot be judged).
            ConfigError, ModelError: the embedder or the judge cannot be reached (systemic).
        """
        reference = self.reference(item)
        candidate, problem = _candidate(output)
        notes: list[str] = []
        unreadable = candidate is None
        if candidate is None:
            notes.append(f"{problem}; it scores 0: answer with one JSON object")
            candidate = {}
        elif problem:
            notes.append(problem)
        embedder = self.embedder()
        run = _Pass(self, item.id, embedder)
        if embedder is not None:
            ref_texts: dict[str, str] = {}
            cand_texts: dict[str, str] = {}
            skip = self.exact | self.dates
            _strings(reference, "", skip, ref_texts)
            _strings(candidate, "", skip, cand_texts)
            # Only texts without an exactly equal counterpart can reach the similarity rung.
            run.prefetch(
                [t for n, t in ref_texts.items() if n not in cand_texts]
                + [t for n, t in cand_texts.items() if n not in ref_texts]
            )
        tally = _Tally()
        run.record(tally, "", "", reference, candidate, True)
        errors = [f for f in tally.fields if f.credit is None]
        if errors and tally.reference == 0 and tally.given == 0:
            # Nothing left to grade would read as a perfect score: this item cannot be judged.
            raise MetricError(
                f"item '{item.id}': the judge '{self.judge}' gave no readable grade for any value "
                f"({errors[0].note}); check the judge model, or score without a judge",
                item_id=item.id,
            )
        quality, completeness, correctness = tally.scores()
        if unreadable:
            quality = correctness = 0.0
        if embedder is None:
            notes.append(
                "no embedder: exact matching only, so alternative spellings count as mismatches"
            )
        if tally.unjudged:
            shown = ", ".join(dict.fromkeys(tally.unjudged))
            notes.append(
                "no judge: free text scored by similarity (or exact matching without an "
                f"embedder) and non-equal numbers as mismatches: {shown}"
            )
        if errors:
            notes.append(
                f"judge errors on {', '.join(f.path for f in errors)}: left out of the scores"
            )
        return ReferenceResult(
            quality=quality,
            completeness=completeness,
            correctness=correctness,
            fields=tuple(tally.fields),
            lists=tally.lists,
            notes=tuple(notes),
            credit=tally.credit,
            reference_values=tally.reference,
            given_values=tally.given,
            threshold=self.threshold if embedder is not None else None,
        )

    def metric_result(self, item: Item, output: Any) -> tuple[float, dict[str, Any]]:
        """The grade as a metric's return value: (quality, {"feedback", "scores"})."""
        result = self.score(item, output)
        return result.quality, {"feedback": result.feedback, "scores": result.scores}


# -- feedback -------------------------------------------------------------------------------------

_SECTION_LIMIT = 12


def _count(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


def _why(f: FieldResult, threshold: float | None) -> str:
    if f.rung == JUDGE:
        return f"judge {f.grade}/100" if f.grade is not None else f.note
    if f.rung == SIMILARITY and f.similarity is not None:
        need = f", needs {threshold:g}" if threshold is not None and not f.equal else ""
        return f"similarity {f.similarity:.2f}{need}"
    if f.rung == DATE:
        return f.note or "a different date"
    if f.rung == SHAPE:
        return "a different shape (a record, a list or a plain value)"
    return "not equal"


def _section(title: str, lines: list[str]) -> list[str]:
    if not lines:
        return []
    shown = lines[:_SECTION_LIMIT]
    if len(lines) > _SECTION_LIMIT:
        shown.append(f"- … and {len(lines) - _SECTION_LIMIT} more")
    return [title, *shown]


def _feedback(r: ReferenceResult) -> str:
    head = (
        f"quality {r.quality:.2f}: completeness {r.completeness:.2f} ({_count(r.credit)} of "
        f"{r.reference_values} reference values found), correctness {r.correctness:.2f} "
        f"({_count(r.credit)} of {r.given_values} given values right)"
    )
    wrong, partial, missing, extra, errors = [], [], [], [], []
    for f in r.fields:
        if f.rung == MISSING:
            missing.append(f"- {f.path}: the reference has {_shown(f.reference)}")
        elif f.rung == EXTRA:
            extra.append(f"- {f.path}: {_shown(f.candidate)}")
        elif f.credit is None:
            errors.append(f"- {f.path}: {f.note}")
        elif f.credit == 0.0:
            wrong.append(
                f"- {f.path}: gave {_shown(f.candidate)}; the reference has "
                f"{_shown(f.reference)} ({_why(f, r.threshold)})"
            )
        elif f.credit < 1.0:
            partial.append(
                f"- {f.path}: gave {_shown(f.candidate)}; the reference has "
                f"{_shown(f.reference)} (credit {f.credit:.2f}, {_why(f, r.threshold)})"
            )
    for lst in r.lists.values():
        missing += [f"- {lst.path}[{u.index}]: {_shown(u.value)}" for u in lst.missed]
        extra += [f"- {lst.path}: {_shown(u.value)}" for u in lst.hallucinated]
    lines = [head]
    lines += _section("Wrong:", wrong)
    lines += _section("Partly right:", partial)
    lines += _section("Missing (in the reference, not in the answer):", missing)
    lines += _section("Not in the reference:", extra)
    lines += _section("Not graded:", errors)
    if r.notes:
        lines.append("Notes: " + "; ".join(r.notes))
    if len(lines) == 1:
        lines.append("Every value matches the reference.")
    return "\n".join(lines)
