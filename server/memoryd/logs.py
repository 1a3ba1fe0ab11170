"""Structured logs on stderr: one JSON object per line (or plain text), written off the event loop.

Handlers on the event loop only enqueue the record; a listener thread formats and writes it, so a
slow terminal or pipe never stalls RPCs. Fields passed in `extra` (event, method, status,
duration_ms, ...) become keys of the JSON object.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import logging.handlers
import queue
import sys
from typing import Any, TextIO

# Attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, then the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        document.update(
            (name, value) for name, value in vars(record).items() if name not in _STANDARD
        )
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=False, default=str)


class _DeferredQueueHandler(logging.handlers.QueueHandler):
    """Enqueue the record as it is: formatting (and traceback rendering) is the listener's job.

    The stock QueueHandler formats in the caller's thread, which is the event loop here.
    """

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


class LogPipeline:
    """The queue handler and its listener thread; stop() flushes what is queued."""

    def __init__(self, level: str, style: str, stream: TextIO | None = None) -> None:
        target = logging.StreamHandler(stream or sys.stderr)
        target.setFormatter(
            JsonFormatter()
            if style == "json"
            else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        )
        records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        self._listener = logging.handlers.QueueListener(records, target)
        self._handler = _DeferredQueueHandler(records)
        self._logger = logging.getLogger("memoryd")
        self._logger.setLevel(level.upper())
        self._logger.addHandler(self._handler)
        self._logger.propagate = False
        self._listener.start()

    def stop(self) -> None:
        """Write out every queued record and detach."""
        self._listener.stop()
        self._logger.removeHandler(self._handler)
