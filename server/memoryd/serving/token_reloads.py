"""Reloaded tokens (memoryd.config.reloading), applied in each kind of serving process.

- A server on its own reads its config file again on SIGHUP and swaps its guard's tokens.
- A worker of `serve --workers N` never reads the file itself: it runs the snapshots its
  supervisor writes on its settings pipe (the first before it starts, each later one after a
  reload), and ignores a SIGHUP sent to its process group.
- The supervisor (memoryd.supervisor) reads the file on SIGHUP and writes the snapshot to every
  worker, so all of them answer with the same tokens.

A reload that is refused (the file unreadable, a setting refused, authentication turned on or
off) changes nothing and says why in the log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from memoryd import hangups
from memoryd.api.auth import Authorizer
from memoryd.config.reloading import Running, Snapshot
from memoryd.config.settings import Settings
from memoryd.errors import StartupError
from memoryd.log_events import Event

log = logging.getLogger("memoryd.reload")


def applied(guard: Authorizer | None, settings: Settings, waiting: tuple[str, ...] = ()) -> None:
    """Swap the guard's tokens for those of `settings`, and say so."""
    if guard is not None:
        guard.replace_tokens(settings.auth.tokens)
    fingerprints = [token.fingerprint for token in settings.auth.tokens]
    log.info(
        "tokens reloaded: %d (%s)%s",
        len(fingerprints),
        ", ".join(fingerprints) or "none",
        f"; changed in the file, applied at the next start: {', '.join(waiting)}"
        if waiting
        else "",
        extra={"event": Event.TOKENS_RELOADED, "tokens": fingerprints, "waiting": list(waiting)},
    )


def refused(error: StartupError) -> None:
    """A reload that changes nothing."""
    log.error(
        "reload refused, the tokens stay as they were: %s",
        error,
        extra={"event": Event.RELOAD_REFUSED},
    )


def reload_on_hangup(running: Running, guard: Authorizer | None) -> None:
    """A server on its own: SIGHUP reads the config file again."""

    def reload() -> None:
        try:
            reloaded = running.reload()
        except StartupError as error:
            refused(error)
            return
        applied(guard, reloaded.settings, reloaded.waiting)

    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)
    if hangups.held():  # one came while the server started: it is applied now
        reload()


class SettingsPipe:
    """A worker's end of its supervisor's settings pipe: one snapshot per line."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()

    def first(self) -> Snapshot:
        """The snapshot the worker starts with, read before its event loop runs: a byte at a
        time, so that a later line stays in the pipe for `follow` (a config is a few KiB)."""
        line = bytearray()
        while not line.endswith(b"\n"):
            byte = os.read(self._fd, 1)
            if not byte:
                raise StartupError("the supervisor closed the settings pipe before a snapshot")
            line.extend(byte)
        return Snapshot.parse(bytes(line))

    def follow(self, running: Running, guard: Authorizer | None) -> None:
        """Run each later snapshot as it comes; SIGHUP is the supervisor's to handle."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, lambda: None)
        hangups.held()  # one that came while it started was its supervisor's too

        def readable() -> None:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            if not data:  # the supervisor is gone; it stops this worker too (PR_SET_PDEATHSIG)
                loop.remove_reader(self._fd)
                return
            self._pending.extend(data)
            run()

        def run() -> None:
            while b"\n" in self._pending:
                try:
                    settings = running.take(self._next())
                except StartupError as error:
                    refused(error)
                    continue
                applied(guard, settings)

        os.set_blocking(self._fd, False)
        loop.add_reader(self._fd, readable)
        run()  # a reload that came with the first snapshot

    def _next(self) -> Snapshot:
        line, _, rest = bytes(self._pending).partition(b"\n")
        self._pending[:] = rest
        return Snapshot.parse(line)
