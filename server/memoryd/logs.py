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
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from memoryd.log_events import Event

# Attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def _utc_stamp(when: float) -> str:
    moment = dt.datetime.fromtimestamp(when, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, the process's own fields (a worker's
    index), then the extra fields."""

    def __init__(self, fields: dict[str, Any] | None = None) -> None:
        super().__init__()
        self._fields = dict(fields or {})

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "ts": _utc_stamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **self._fields,
        }
        document.update(
            (name, value) for name, value in vars(record).items() if name not in _STANDARD
        )
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=False, default=str)


class _DeferredQueueHandler(logging.handlers.QueueHandler):
    """Enqueue the record as it is: formatting (and traceback rendering) is the writer's job.

    The stock QueueHandler formats in the caller's thread, which is the event loop here.
    """

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


_STOP = None
MAX_BATCH = 512
LINGER_SECONDS = 0.01


def _skip_unused_record_fields() -> None:
    """Stop the logging module computing what memoryd's lines never show.

    The logging HOWTO's "Optimization" section: without these, every record walks the call
    stack to find its source line and looks up thread and process names, on the event loop.
    """
    logging._srcfile = None  # a documented switch, despite the underscore
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


# A per-RPC line as queued by LogPipeline.rpc: (time, level, method, status, duration_ms).
RpcLine = tuple[float, int, str, str, float, str]


class LogPipeline:
    """Records go on a queue; one thread formats them and writes them out in batches.

    Under load a burst of RPC lines becomes one write and one flush, not one syscall per line:
    the writing thread shares the interpreter (and its lock) with the event loop, so every
    wake-up it saves is time the event loop gets back. RPC lines skip the logging module
    entirely (`rpc`): a tuple on the queue, formatted by the thread into the same shape as any
    other record. stop() writes out what is queued.
    """

    def __init__(
        self,
        level: str,
        style: str,
        stream: TextIO | None = None,
        fields: dict[str, int | str] | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        """`fields` are written in every JSON line (a worker's index: memoryd.supervisor), and
        before the message in text. `redact` masks the settings' secrets in every line a
        record makes (memoryd.config.secrets.Redactor): what a library's error quotes too."""
        self._stream = stream or sys.stderr
        self._redact = redact
        self._json = style == "json"
        prefix = "".join(f"[{name} {value}] " for name, value in (fields or {}).items())
        self._formatter = (
            JsonFormatter(fields)
            if self._json
            else logging.Formatter(f"%(asctime)s %(levelname)s %(name)s: {prefix}%(message)s")
        )
        # The RPC lines' template takes the same fields (names and values need no escaping:
        # identifiers and numbers).
        self._rpc_fields = "".join(
            f', "{name}": {json.dumps(value)}' for name, value in (fields or {}).items()
        )
        self._rpc_prefix = prefix
        self._level: int = logging.getLevelNamesMapping()[level.upper()]
        _skip_unused_record_fields()
        self._records: queue.SimpleQueue[logging.LogRecord | RpcLine | None] = queue.SimpleQueue()
        self._handler = _DeferredQueueHandler(self._records)
        self._logger = logging.getLogger("memoryd")
        self._logger.setLevel(level.upper())
        self._logger.addHandler(self._handler)
        self._logger.propagate = False
        # Other libraries' records (OpenTelemetry's exporter, grpc, psycopg), warnings and worse,
        # take the same way: formatted as memoryd's, and masked. Python's last-resort handler
        # wrote them raw: the exporter printed its endpoint's password.
        self._root = logging.getLogger()
        self._root_handler = _DeferredQueueHandler(self._records)
        self._root_handler.setLevel(max(logging.WARNING, self._level))
        self._root.addHandler(self._root_handler)
        self._thread = threading.Thread(target=self._write, name="memoryd-logs", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        while True:
            batch = [self._records.get()]
            # Let a burst gather: each wake-up of this thread costs the event loop the
            # interpreter lock, so fewer, larger batches are cheaper for everyone.
            time.sleep(LINGER_SECONDS)
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._records.get_nowait())
                except queue.Empty:
                    break
            stop = _STOP in batch
            lines = [self._format(record) for record in batch if record is not _STOP]
            if lines:
                self._stream.write("\n".join(lines) + "\n")
                self._stream.flush()
            if stop:
                return

    def rpc(
        self, level: int, method: str, status: str, duration_ms: float, caller: str = ""
    ) -> None:
        """The RPC log (memoryd.api.status.RpcLog): one line per call, at `level`."""
        if level >= self._level:
            self._records.put((time.time(), level, method, status, duration_ms, caller))

    def _format(self, record: logging.LogRecord | RpcLine) -> str:
        try:
            if isinstance(record, tuple):
                return self._format_rpc(record)  # names, codes and numbers: nothing secret
            line = self._formatter.format(record)
            return self._redact(line) if self._redact is not None else line
        except Exception:  # noqa: BLE001 - a bad log call must not kill the log thread
            if isinstance(record, tuple):
                return f"unformattable RPC log line: {record!r}"
            return f"unformattable log record from {record.name}: {record.msg!r}"

    def _format_rpc(self, line: RpcLine) -> str:
        when, level, method, status, duration_ms, caller = line
        message = f"{method} {status} {duration_ms:.3f}ms"
        if not self._json:
            # The same stamp as logging.Formatter's asctime, milliseconds included.
            seconds = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
            stamp = f"{seconds},{_millis(when):03d}"
            who = f" (token {caller})" if caller else ""
            return (
                f"{stamp} {logging.getLevelName(level)} memoryd.rpc: "
                f"{self._rpc_prefix}{message}{who}"
            )
        # A fingerprint is 8 hex digits: nothing to escape either.
        token = f', "token": "{caller}"' if caller else ""
        # Method and status names are plain ASCII identifiers: nothing to escape, so a template
        # is exact and several times cheaper than json.dumps for the busiest line there is.
        return (
            f'{{"ts": "{_utc_stamp(when)}", "level": "{logging.getLevelName(level).lower()}", '
            f'"logger": "memoryd.rpc", "msg": "{message}", "event": "{Event.RPC}", '
            f'"method": "{method}", "status": "{status}", "duration_ms": {duration_ms}{token}'
            f"{self._rpc_fields}}}"
        )

    def stop(self) -> None:
        """Write out every queued record and detach."""
        self._logger.removeHandler(self._handler)
        self._root.removeHandler(self._root_handler)
        self._records.put(_STOP)
        self._thread.join()


def _millis(when: float) -> int:
    return int(when * 1000) % 1000
