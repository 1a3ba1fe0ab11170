"""Dates in text: what a question asks about, and what a message speaks of.

A question may name a time ("on 13 October, 2023", "in June", "in May 2023", "in 2022");
`asked_span` reads it as a span of days (a month or day without a year: that month or day of any
year). A message speaks of the day it was said, and of the days its relative words point at, read
against that time: "yesterday", "last Friday", "two weekends ago", "last month", "three days
ago", "next week". `spoken_spans` gives them, loosely bounded, since people say "last week" of
anything from two to fourteen days before. Search ranks a message whose days meet the question's
higher (memoryd.domain.fusion). Only English words and the Gregorian dates people type are read;
a phrase not understood adds no span, and a question naming no date is ranked as before.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime
import re
from collections.abc import Callable, Iterator

_MONTH_NUMBERS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTH_NUMBERS |= {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
_MONTH_NUMBERS["sept"] = 9
_WEEKDAY_NUMBERS = {name.lower(): number for number, name in enumerate(calendar.day_name)}
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_COUNTS |= {"seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3, "several": 3}

_MONTH = "(" + "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_COUNT = r"(\d{1,2}|" + "|".join(_COUNTS) + ")"
_UNIT = r"(day|night|week|weekend|month|year)s?"
_WEEKDAY = "(" + "|".join(_WEEKDAY_NUMBERS) + ")"
_YEAR = r"((?:19|20)\d\d)"
# A leap year, for a day named without its year (29 February is a valid question).
_ANY_YEAR = 2000
# A spoken span at most this many days wide points at a day as well as one day would.
PRECISE_DAYS = 7
# The most spans one message speaks of (its own day first).
MAX_SPANS = 8


@dataclasses.dataclass(frozen=True, slots=True)
class Span:
    """The days from `first` to `last`, both included. `any_year`: those days of every year (a
    question's "in June"); then `first` and `last` are in _ANY_YEAR."""

    first: datetime.date
    last: datetime.date
    any_year: bool = False

    def meets(self, other: Span) -> bool:
        """Whether the two spans share a day."""
        if self.any_year and other.any_year:
            return _same_days(self, other)
        if self.any_year or other.any_year:
            loose, fixed = (self, other) if self.any_year else (other, self)
            return any(
                _in_year(loose, year).meets(fixed)
                for year in range(fixed.first.year - 1, fixed.last.year + 1)
            )
        return self.first <= other.last and other.first <= self.last

    @property
    def days(self) -> int:
        """How many days the span holds."""
        return (self.last - self.first).days + 1

    def precision(self, spoken: Span) -> float:
        """How closely a spoken span that meets this asked one points at it: 1 when it is no
        wider than the question's span (or a week), less the wider it is ("last month" for a
        question naming a day: 7/31)."""
        return min(1.0, max(self.days, PRECISE_DAYS) / spoken.days)


def _same_days(one: Span, other: Span) -> bool:
    return one.first <= other.last and other.first <= one.last


def _in_year(span: Span, year: int) -> Span:
    """A span of any year as it falls in `year` (a span over New Year ends in the next)."""
    first = _day(year, span.first.month, span.first.day)
    last = _day(year + span.last.year - span.first.year, span.last.month, span.last.day)
    return Span(first, last)


def _day(year: int, month: int, day: int) -> datetime.date:
    return datetime.date(year, month, min(day, calendar.monthrange(year, month)[1]))


def _month(year: int, month: int, *, any_year: bool = False) -> Span:
    return Span(_day(year, month, 1), _day(year, month, 31), any_year)


def _year(year: int) -> Span:
    return Span(datetime.date(year, 1, 1), datetime.date(year, 12, 31))


_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}?", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b,?\s*{_YEAR}?", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)
_IN_MONTH = re.compile(rf"\b(?:in|during|of|since|early|late|mid-?)\s+{_MONTH}(?!\w)", re.I)
_IN_YEAR = re.compile(rf"\b(?:in|during|of|since)\s+{_YEAR}\b", re.I)


def asked_span(question: str) -> Span | None:
    """The narrowest span of days the question names; None when it names none."""
    found = asked_time(question)
    return None if found is None else found.span


@dataclasses.dataclass(frozen=True, slots=True)
class AskedTime:
    """The span of days a question names, and the words that name it ("16 June, 2023")."""

    span: Span
    words: str


def asked_time(question: str) -> AskedTime | None:
    """The narrowest span of days the question names and the words naming it; None when it
    names none."""
    for pattern, day_at, month_at in ((_DAY_MONTH, 1, 2), (_MONTH_DAY, 2, 1)):
        for dated in pattern.finditer(question):
            found = _named_day(dated.group(day_at), dated.group(month_at), dated.group(3))
            if found is not None:
                return AskedTime(found, dated.group(0))
    if month_and_year := _MONTH_YEAR.search(question):
        month = _MONTH_NUMBERS[month_and_year.group(1).lower()]
        return AskedTime(_month(int(month_and_year.group(2)), month), month_and_year.group(0))
    if month_alone := _IN_MONTH.search(question):
        month = _MONTH_NUMBERS[month_alone.group(1).lower()]
        return AskedTime(_month(_ANY_YEAR, month, any_year=True), month_alone.group(0))
    if year_alone := _IN_YEAR.search(question):
        return AskedTime(_year(int(year_alone.group(1))), year_alone.group(0))
    return None


def _named_day(day: str, month: str, year: str | None) -> Span | None:
    try:
        date = datetime.date(
            int(year) if year else _ANY_YEAR, _MONTH_NUMBERS[month.lower()], int(day)
        )
    except ValueError:
        return None
    return Span(date, date, any_year=not year)


_DAY_WORDS = {
    "yesterday": (1, 1),
    "last night": (1, 1),
    "the other day": (6, 2),
    "today": (0, 0),
    "tonight": (0, 0),
    "this morning": (0, 0),
    "this afternoon": (0, 0),
    "this evening": (0, 0),
    "tomorrow": (-1, -1),
}
_DAY_WORD = re.compile(r"\b(" + "|".join(map(re.escape, _DAY_WORDS)) + r")\b", re.I)
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+(?:ago|back|before)\b", re.I)
_LAST = re.compile(rf"\b(?:last|past|previous)\s+{_UNIT}\b", re.I)
_NEXT = re.compile(rf"\b(?:next|coming)\s+{_UNIT}\b", re.I)
_THIS = re.compile(r"\bthis\s+(week|weekend|month|year)\b", re.I)
_LAST_WEEKDAY = re.compile(rf"\b(last|past|on)\s+{_WEEKDAY}\b", re.I)
_NEXT_WEEKDAY = re.compile(rf"\b(?:next|coming)\s+{_WEEKDAY}\b", re.I)
# How many days a unit is, for "two weeks ago" (then read a quarter either side).
_UNIT_DAYS = {"day": 1, "night": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}


def spoken_spans(text: str, said: datetime.datetime, *, timed: bool | None = None) -> list[Span]:
    """The day the text was said, and the days its relative words point at (MAX_SPANS).
    `timed`: what speaks_of_time(text) answered, when the caller asked already."""
    today = said.date()
    spans = [Span(today, today)]
    if not (_time_words(text) if timed is None else timed):
        return spans
    for reader in _READERS:
        spans.extend(reader(text, today))
        if len(spans) >= MAX_SPANS:
            break
    return spans[:MAX_SPANS]


def _day_words(text: str, today: datetime.date) -> Iterator[Span]:
    for match in _DAY_WORD.finditer(text):
        most, least = _DAY_WORDS[match.group(1).lower()]
        yield _before(today, most, least)


def _ago(text: str, today: datetime.date) -> Iterator[Span]:
    for match in _AGO.finditer(text):
        word, unit = match.group(1).lower(), match.group(2).lower()
        count = int(word) if word.isdigit() else _COUNTS[word]
        if unit == "month":
            yield _month(*_months_back(today, count))
        elif unit == "year":
            yield _year(today.year - count)
        else:
            days = count * _UNIT_DAYS[unit]
            slack = max(1, days // 4)
            yield _before(today, days + slack, max(0, days - slack))


def _last(text: str, today: datetime.date) -> Iterator[Span]:
    for match in _LAST.finditer(text):
        unit = match.group(1).lower()
        if unit == "month":
            yield _month(*_months_back(today, 1))
        elif unit == "year":
            yield _year(today.year - 1)
        elif unit in ("week", "weekend"):
            yield _before(today, 14, 2)
        else:
            yield _before(today, 1, 1)


def _next(text: str, today: datetime.date) -> Iterator[Span]:
    for match in _NEXT.finditer(text):
        unit = match.group(1).lower()
        if unit == "month":
            yield _month(*_months_back(today, -1))
        elif unit == "year":
            yield _year(today.year + 1)
        else:
            yield _before(today, -1, -14 if unit != "day" else -1)


def _this(text: str, today: datetime.date) -> Iterator[Span]:
    for match in _THIS.finditer(text):
        unit = match.group(1).lower()
        if unit == "month":
            yield _month(today.year, today.month)
        elif unit == "year":
            yield _year(today.year)
        else:
            yield _before(today, 7, -7)


def _weekdays(text: str, today: datetime.date) -> Iterator[Span]:
    for match in _LAST_WEEKDAY.finditer(text):
        back = (today.weekday() - _WEEKDAY_NUMBERS[match.group(2).lower()]) % 7 or 7
        extra = 7 if match.group(1).lower() != "on" else 0
        yield _before(today, back + extra, back)
    for match in _NEXT_WEEKDAY.finditer(text):
        ahead = (_WEEKDAY_NUMBERS[match.group(1).lower()] - today.weekday()) % 7 or 7
        yield _before(today, -ahead, -ahead - 7)


_READERS: tuple[Callable[[str, datetime.date], Iterator[Span]], ...] = (
    _day_words,
    _ago,
    _last,
    _next,
    _this,
    _weekdays,
)


def _before(today: datetime.date, most: int, least: int) -> Span:
    """The days from `most` to `least` days before `today` (negative: after), either order."""
    one = today - datetime.timedelta(days=most)
    other = today - datetime.timedelta(days=least)
    return Span(min(one, other), max(one, other))


def _months_back(today: datetime.date, count: int) -> tuple[int, int]:
    """(year, month) `count` months before today's month (negative: after)."""
    index = today.year * 12 + today.month - 1 - count
    return index // 12, index % 12 + 1


# Words without which a text says nothing of when (a year of four digits aside): a text holding
# none is not read further (most are not; reading every pattern costs 100 times as much).
TIME_WORDS = frozenset(
    {
        *_DAY_WORDS,
        "yesterday",
        "today",
        "tonight",
        "tomorrow",
        "night",
        "last",
        "next",
        "ago",
        "back",
        "past",
        "previous",
        "coming",
        "recently",
        "this",
        "week",
        "weeks",
        "weekend",
        "weekends",
        "month",
        "months",
        "year",
        "years",
        *_WEEKDAY_NUMBERS,
        *(name.lower() for name in calendar.month_name if name),
    }
)
_TEXT_WORDS = re.compile(r"\w+")


def _time_words(text: str) -> bool:
    return any(
        word in TIME_WORDS or (len(word) == 4 and word[:2] in ("19", "20") and word.isdigit())
        for word in _TEXT_WORDS.findall(text.casefold())
    )


_ASKS_WHEN = re.compile(r"\s*when\b", re.I)


def speaks_of_time(text: str) -> bool:
    """Whether the text says when something happened (a day, a month, a year, "ago",
    "last")."""
    return _time_words(text)


def asks_when(question: str) -> bool:
    """Whether the question asks when ("When did she move?")."""
    return _ASKS_WHEN.match(question) is not None
