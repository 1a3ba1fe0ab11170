"""Timestamps: timezone-aware UTC datetimes in code, ISO-8601 text with milliseconds in SQLite.

The stored form (`2026-11-30T09:15:02.123Z`) sorts as text in time order, matching the
reference schema's `%Y-%m-%dT%H:%M:%fZ`.
"""

from __future__ import annotations

import datetime as dt
import time

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def utc_now() -> dt.datetime:
    """The current time, in UTC, truncated to what is stored (milliseconds)."""
    return EPOCH + dt.timedelta(milliseconds=time.time_ns() // 1_000_000)


def to_text(moment: dt.datetime) -> str:
    """The stored text of an aware datetime (sub-millisecond digits are dropped)."""
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"


def from_text(text: str) -> dt.datetime:
    """Parse the stored text back into an aware datetime."""
    return dt.datetime.fromisoformat(text)
