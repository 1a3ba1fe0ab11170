"""Activity over time (GetActivity, the console's charts): what memoryd stored and what its
background did, counted by UTC hour or day over a range.

The store keeps the counts by UTC hour, by conversation and by agent (activity_hours and
agent_activity_hours, kept by triggers); the rules here choose the range and its buckets, and
lay the stored counts out as one bucket each, oldest first, empty ones included, so a chart is
drawn without gaps to guess.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from memoryd.errors import InvalidArgument, Reason

# A range of at most this many buckets: 90 days by the hour, about 5 years by the day.
MAX_BUCKETS = 2160
# The range when none is given: the last 48 hours, or the last 30 days.
DEFAULT_HOURS = 48
DEFAULT_DAYS = 30


class Bucket(enum.Enum):
    """How long one bucket is."""

    HOUR = dt.timedelta(hours=1)
    DAY = dt.timedelta(days=1)

    @property
    def prefix(self) -> int:
        """How many characters of a stored hour ('YYYY-MM-DDTHH') name its bucket."""
        return 13 if self is Bucket.HOUR else 10


COUNTS = (
    "messages",
    "compactions",
    "review_runs",
    "review_failures",
    "facts_added",
    "facts_replaced",
    "facts_archived",
    "facts_refused",
    "model_tokens",
    "model_errors",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Counts:
    """What happened in one bucket (or a whole range): messages stored (checkpoint summaries
    not counted), compactions, review runs and the failed ones, facts the reviews added,
    replaced, archived or refused, and their model calls' tokens and errors."""

    messages: int = 0
    compactions: int = 0
    review_runs: int = 0
    review_failures: int = 0
    facts_added: int = 0
    facts_replaced: int = 0
    facts_archived: int = 0
    facts_refused: int = 0
    model_tokens: int = 0
    model_errors: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, name) + getattr(other, name) for name in COUNTS))


@dataclasses.dataclass(frozen=True, slots=True)
class Span:
    """The buckets asked for: [start, end), both on a bucket's edge."""

    bucket: Bucket
    start: dt.datetime
    end: dt.datetime

    @property
    def first_hour(self) -> str:
        """The first stored hour inside the span."""
        return hour_text(self.start)

    @property
    def end_hour(self) -> str:
        """The first stored hour after it."""
        return hour_text(self.end)

    def starts(self) -> list[dt.datetime]:
        """Every bucket's start, oldest first."""
        count = (self.end - self.start) // self.bucket.value
        return [self.start + self.bucket.value * index for index in range(count)]


def span(
    bucket: Bucket, start: dt.datetime | None, end: dt.datetime | None, now: dt.datetime
) -> Span:
    """The span of a request: `end` (default now) rounded up to a bucket's edge, `start`
    (default 48 hours or 30 days before it) rounded down; refused when `start` is not before
    `end` (checked before rounding, which would widen a reversed range within one bucket into
    that bucket), or when it is longer than MAX_BUCKETS."""
    if start is not None and start >= (end if end is not None else now):
        raise InvalidArgument(
            f"start_time must be before end_time (got {start.isoformat()} and "
            f"{'now' if end is None else end.isoformat()})",
            reason=Reason.OUT_OF_RANGE,
            field="start_time",
        )
    try:
        last = _ceil(end if end is not None else now, bucket)
        if start is None:
            default = DEFAULT_HOURS if bucket is Bucket.HOUR else DEFAULT_DAYS
            first = last - bucket.value * default
        else:
            first = _floor(start, bucket)
    except OverflowError:
        raise InvalidArgument(
            "the range reaches past the years 1 to 9999 once rounded to whole buckets",
            reason=Reason.OUT_OF_RANGE,
            field="end_time" if end is not None else "start_time",
        ) from None
    buckets = (last - first) // bucket.value
    if buckets > MAX_BUCKETS:
        raise InvalidArgument(
            f"the range holds {buckets} buckets of a {bucket.name.lower()}; at most "
            f"{MAX_BUCKETS} (90 days by the hour, about 5 years by the day)",
            reason=Reason.OUT_OF_RANGE,
            field="start_time",
        )
    return Span(bucket, first, last)


def hour_text(moment: dt.datetime) -> str:
    """A moment's stored hour, 'YYYY-MM-DDTHH' in UTC (as storage's to_text begins)."""
    moment = moment.astimezone(dt.UTC)
    return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}"


def laid_out(found: dict[str, Counts], span: Span) -> list[tuple[dt.datetime, Counts]]:
    """The stored counts by bucket name (the first bucket.prefix characters of an hour), as one
    bucket per step of the span, empty ones included."""
    width = span.bucket.prefix
    return [(start, found.get(hour_text(start)[:width], Counts())) for start in span.starts()]


def _floor(moment: dt.datetime, bucket: Bucket) -> dt.datetime:
    moment = moment.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if bucket is Bucket.DAY else moment


def _ceil(moment: dt.datetime, bucket: Bucket) -> dt.datetime:
    floor = _floor(moment, bucket)
    return floor if floor == moment else floor + bucket.value
