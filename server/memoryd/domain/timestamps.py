"""Timestamps: timezone-aware UTC datetimes in code, ISO-8601 text with milliseconds in SQLite.

The stored form (`2026-11-30T09:15:02.123Z`) sorts as text in time order, matching the
reference schema's `%Y-%m-%dT%H:%M:%fZ`.
"""

from __future__ import annotations

import datetime as dt

UTC = dt.UTC


def utc_now() -> dt.datetime:
    """The current time, in UTC, truncated to what is stored (milliseconds)."""
    now = dt.datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def to_text(moment: dt.datetime) -> str:
    """The stored text of an aware datetime."""
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.removesuffix("+00:00") + "Z"


def from_text(text: str) -> dt.datetime:
    """Parse the stored text back into an aware datetime."""
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
