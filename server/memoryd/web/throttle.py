"""Log lines that a flood cannot multiply: one kind of line is written at most once per interval,
the first at once and the rest as one line with their count.

A client (or the kernel, out of descriptors) can make the same thing happen thousands of times
a second: a line each time would fill the disk and take the interpreter from the calls being
served. Throttled, an operator still sees that it happens, how often, and the latest detail.
"""

from __future__ import annotations

import asyncio
import logging
import time

INTERVAL_SECONDS = 10.0


class Throttle:
    """One kind of line on `logger`: at most one per `interval` seconds, with a count."""

    def __init__(
        self,
        logger: logging.Logger,
        message: str,
        *,
        event: str,
        level: int = logging.WARNING,
        interval: float = INTERVAL_SECONDS,
    ) -> None:
        self._logger = logger
        self._message = message
        self._event = event
        self._level = level
        self._interval = interval
        self._since = 0.0
        self._written_at: float | None = None
        self._pending = 0
        self._detail = ""
        self._timer: asyncio.TimerHandle | None = None
        self.total = 0

    def note(self, detail: str = "") -> None:
        """It happened once more (`detail`: what this time says, e.g. the error)."""
        self.total += 1
        self._pending += 1
        self._detail = detail
        now = time.monotonic()
        if self._written_at is None or now - self._written_at >= self._interval:
            self._write(now)
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: the next note (or flush) writes the count
                return
            wait = self._written_at + self._interval - now
            self._timer = loop.call_later(wait, self._write_pending)

    def flush(self) -> None:
        """Write what is counted and not written yet (at stop)."""
        if self._timer is not None:
            self._timer.cancel()
        self._write_pending()

    def _write_pending(self) -> None:
        self._timer = None
        if self._pending:
            self._write(time.monotonic())

    def _write(self, now: float) -> None:
        text = f"{self._message}: {self._detail}" if self._detail else self._message
        if self._written_at is not None and self._pending > 1:
            text += f" ({self._pending:,} times in the last {now - self._since:.0f}s)"
        self._logger.log(
            self._level, "%s", text, extra={"event": self._event, "count": self._pending}
        )
        self._written_at = self._since = now
        self._pending = 0


class RepeatFilter(logging.Filter):
    """For a library's logger (uvicorn's "Invalid HTTP request received."): a message repeated
    within the interval is counted instead of written; the next one written says how many were
    left out."""

    MAX_KINDS = 1000

    def __init__(self, interval: float = INTERVAL_SECONDS) -> None:
        super().__init__()
        self._interval = interval
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = f"{record.name}\0{record.msg}"
        now = time.monotonic()
        since, left_out = self._seen.get(key, (0.0, 0))
        if key in self._seen and now - since < self._interval:
            self._seen[key] = (since, left_out + 1)
            return False
        if len(self._seen) >= self.MAX_KINDS:
            self._seen.clear()
        self._seen[key] = (now, 0)
        if left_out:
            record.msg = f"{record.getMessage()} ({left_out:,} more like it were left out)"
            record.args = None
        return True


def throttle_library_logger(name: str) -> None:
    """Put a RepeatFilter on the logger `name` (once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(item, RepeatFilter) for item in logger.filters):
        logger.addFilter(RepeatFilter())
