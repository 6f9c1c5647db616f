"""The date rung's reading: which strings are calendar dates, and when two are the same day."""

from __future__ import annotations

import re
from datetime import date, datetime

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
