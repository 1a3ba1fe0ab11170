"""`memoryd serve --workers N`: one supervisor, N worker processes on one port and one store.

One process is bounded by one interpreter lock (grpc.aio's own callbacks hold most of it under
load), so a machine's cores are used by several processes. The supervisor:

- takes the data directory's lock, opens the database once (migrations, and the recovery of what
  the last stop left: memoryd.runtime.prepare), and closes it again;
- checks that nothing listens on the address, then holds the port with SO_REUSEPORT (bound,
  never listening: no connection reaches it) for the whole run. The workers listen on it with
  SO_REUSEPORT too, and the kernel spreads new connections over them. Another `memoryd serve`
  on that port is still refused: it does not set SO_REUSEPORT, or, with workers, its own
  supervisor finds the address in use;
- starts the workers (`python -m memoryd serve ... --worker-of ...`). Each inherits the open
  lock file (memoryd.data_directory.inherited_lock): it proves the worker was started by the
  process that holds the directory, and no other process gets in. Each reports ready on a pipe;
  the supervisor logs `serving` once every worker is. Each also reads its settings' snapshot
  from a pipe: the config file as the supervisor read it (memoryd.config.reloading), so that a
  worker started again runs what its siblings run;
- restarts a worker that dies (one that keeps dying within seconds of its start stops the
  whole server, with the reason in the log), and on SIGTERM or SIGINT passes the signal on and
  waits for every worker to drain within the grace period, then kills what is left;
- on SIGHUP reads the config file again and writes its tokens to every worker's pipe at once.

The workers share the store: on SQLite each has its own group-committing writer (SQLite's write
lock serialises them), on PostgreSQL each has its own pool. Work that must happen once (the
embedding of new messages, scheduled reviews' picks, a review's claim) is decided by the
database (memoryd.storage.background_lock, the claims).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from memoryd import hangups
from memoryd.config import check_exposure, check_private_settings
from memoryd.config.reloading import Running
from memoryd.errors import StartupError
from memoryd.log_events import Event
from memoryd.runtime import prepare
from memoryd.serving import token_reloads
from memoryd.serving.binding import HeldPort, hold_port
from memoryd.signal_flags import Flag, Wakeup

log = logging.getLogger("memoryd.supervisor")

# How long a worker gets to report ready (it opens the database and the model clients).
READY_TIMEOUT_SECONDS = 60.0
# A worker that dies this soon after its start, this many times in a row, stops the server:
# restarting it would only repeat the failure.
EARLY_DEATH_SECONDS = 10.0
EARLY_DEATHS = 3
POLL_SECONDS = 0.2
# Beyond the grace period, how long the workers get to commit what is queued and close.
CLOSE_MARGIN_SECONDS = 15.0


@dataclasses.dataclass(slots=True)
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    started: float
    # The write end of its settings pipe.
    settings_fd: int
    ready: bool = False
    early_deaths: int = 0


def supervise(running: Running, argv: Sequence[str]) -> int:
    """Run `server.workers` workers until SIGTERM or SIGINT; the exit code. SIGHUP reads the
    config file again and gives every worker its tokens (memoryd.config.reloading)."""
    settings = running.settings
    check_exposure(settings)
    check_private_settings(settings)
    # Flags, not threading.Event: a handler runs inside the main thread (memoryd.signal_flags).
    wakeup = Wakeup()
    stop = wakeup.flag()
    reload = wakeup.flag()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: reload.set())
    if hangups.held():  # one came while it started: its workers get the file's tokens at once
        reload.set()
    try:
        lock_fd = prepare(settings, running.env)
        try:
            held = hold_port(settings.server.listen)
            try:
                return _Supervisor(
                    running, argv, held, lock_fd, wakeup=wakeup, stop=stop, reload=reload
                ).run()
            finally:
                for sock in held.sockets:
                    sock.close()
        finally:
            os.close(lock_fd)
    finally:
        wakeup.close()


class _Supervisor:
    def __init__(
        self,
        running: Running,
        argv: Sequence[str],
        held: HeldPort,
        lock_fd: int,
        *,
        wakeup: Wakeup,
        stop: Flag,
        reload: Flag,
    ) -> None:
        self._running = running
        self._settings = running.settings
        self._argv = list(argv)
        self._held = held
        self._lock_fd = lock_fd
        self._wakeup = wakeup
        self._stop = stop
        self._reload = reload
        self._workers: dict[int, _Worker] = {}
        self._ready_pipes: dict[int, int] = {}

    def run(self) -> int:
        count = self._settings.server.workers
        for index in range(count):
            self._start(index)
        if not self._wait_ready(list(range(count))):
            self._stop_all()
            return 0 if self._stop.is_set() else 1  # a stop asked for while starting is no failure
        log.info(
            "memoryd serving on %s with %d workers (data in %s)",
            self._held.address,
            count,
            self._settings.home,
            extra={
                "event": Event.SERVING,
                "address": self._held.address,
                "home": str(self._settings.home),
                "workers": count,
                "pids": [worker.process.pid for worker in self._workers.values()],
            },
        )
        failed = False
        while True:
            self._wakeup.wait(POLL_SECONDS)
            if self._stop.is_set():
                break
            if self._reload.take():
                self._reload_tokens()
            failed = not self._replace_dead()
            if failed:
                break
        self._stop_all()
        return 1 if failed else 0

    def _start(self, index: int) -> None:
        read_end, write_end = os.pipe()
        settings_read, settings_write = os.pipe()
        command = [
            sys.executable,
            "-m",
            "memoryd",
            *self._argv,
            "--listen",
            self._held.address,
            # Where the lock is, before the worker reads anything (memoryd.cli.main).
            "--home",
            str(self._settings.home),
            "--worker-of",
            f"{index}:{self._lock_fd}:{write_end}:{settings_read}",
        ]
        try:
            # It starts with SIGHUP blocked, until its own code holds it (memoryd.hangups).
            with hangups.blocked():
                process = subprocess.Popen(  # noqa: S603 - this interpreter running memoryd
                    command, pass_fds=(self._lock_fd, write_end, settings_read)
                )
        finally:
            os.close(write_end)
            os.close(settings_read)
        previous = self._workers.get(index)
        if previous is not None:
            os.close(previous.settings_fd)
        self._workers[index] = _Worker(
            index,
            process,
            time.monotonic(),
            settings_fd=settings_write,
            early_deaths=previous.early_deaths if previous else 0,
        )
        self._ready_pipes[index] = read_end
        # What its siblings run, whatever the file says now.
        self._send(self._workers[index], self._running.snapshot.line())

    def _send(self, worker: _Worker, line: bytes) -> None:
        """Write a snapshot line to a worker (one that died meanwhile is started again)."""
        with contextlib.suppress(BrokenPipeError):
            os.write(worker.settings_fd, line)

    def _reload_tokens(self) -> None:
        """SIGHUP: the config file's tokens, to every worker at once."""
        try:
            reloaded = self._running.reload()
        except StartupError as error:
            token_reloads.refused(error)
            return
        line = reloaded.snapshot.line()
        for worker in self._workers.values():
            self._send(worker, line)
        token_reloads.applied(None, reloaded.settings, reloaded.waiting)

    def _wait_ready(self, indexes: list[int]) -> bool:
        """Whether every worker of `indexes` reported ready (False: one exited, or the timeout
        passed, or a stop was asked for meanwhile). A SIGHUP meanwhile is applied at once: the
        workers serving refuse a withdrawn token while another starts again."""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        for index in indexes:
            pipe = self._ready_pipes.pop(index)
            try:
                os.set_blocking(pipe, False)
                while True:
                    with contextlib.suppress(BlockingIOError):
                        if os.read(pipe, 16):
                            break
                        # The write end closed with nothing written: the worker exited.
                        log.error(
                            "worker %d exited before serving (code %s)",
                            index,
                            self._workers[index].process.wait(),
                            extra={"event": Event.WORKER_FAILED, "worker": index},
                        )
                        return False
                    if self._reload.take():  # a reload does not wait for a (re)start
                        self._reload_tokens()
                    if self._stop.is_set() or time.monotonic() > deadline:
                        if not self._stop.is_set():
                            log.error(
                                "worker %d did not serve within %.0fs",
                                index,
                                READY_TIMEOUT_SECONDS,
                                extra={"event": Event.WORKER_FAILED, "worker": index},
                            )
                        return False
                    time.sleep(0.02)
            finally:
                os.close(pipe)
            self._workers[index].ready = True
        return True

    def _replace_dead(self) -> bool:
        """Start again every worker that exited; False when one keeps dying at start
        (EARLY_DEATHS times in a row within EARLY_DEATH_SECONDS of its start, a replacement
        that dies before it serves included)."""
        for worker in list(self._workers.values()):
            code = worker.process.poll()
            if code is None:
                continue
            lived = time.monotonic() - worker.started
            # Exit 0 is a worker that was told to stop (SIGTERM: a rolling restart) and drained.
            stopped = code == 0
            early = lived < EARLY_DEATH_SECONDS and not stopped
            worker.early_deaths = worker.early_deaths + 1 if early else 0
            log.log(
                logging.INFO if stopped else logging.ERROR,
                "worker %d (pid %d) %s after %.1fs; starting it again",
                worker.index,
                worker.process.pid,
                "stopped, its calls drained," if stopped else f"exited with {_exit_text(code)}",
                lived,
                extra={
                    "event": Event.WORKER_EXITED,
                    "worker": worker.index,
                    "pid": worker.process.pid,
                    "code": code,
                },
            )
            if worker.early_deaths >= EARLY_DEATHS:
                log.error(
                    "worker %d died %d times within %.0fs of its start: stopping memoryd",
                    worker.index,
                    worker.early_deaths,
                    EARLY_DEATH_SECONDS,
                    extra={"event": Event.WORKER_FAILED, "worker": worker.index},
                )
                return False
            self._start(worker.index)
            if not self._wait_ready([worker.index]):
                if self._stop.is_set():
                    return True
                # It died (or hung) before serving: one more early death, which the next pass
                # counts and answers with another start, until EARLY_DEATHS in a row.
                replacement = self._workers[worker.index].process
                if replacement.poll() is None:
                    replacement.kill()
                    replacement.wait()
                continue
            log.info(
                "worker %d serving again (pid %d)",
                worker.index,
                self._workers[worker.index].process.pid,
                extra={
                    "event": Event.WORKER_STARTED,
                    "worker": worker.index,
                    "pid": self._workers[worker.index].process.pid,
                },
            )
        return True

    def _stop_all(self) -> None:
        """SIGTERM every worker (each drains its calls within the grace period, then commits
        and closes); SIGKILL what is left after the grace period and a margin."""
        grace = self._settings.server.grace_period_seconds
        log.info(
            "stopping %d workers: %.1fs for calls in flight",
            len(self._workers),
            grace,
            extra={"event": Event.STOPPING},
        )
        for worker in self._workers.values():
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace + CLOSE_MARGIN_SECONDS
        for worker in self._workers.values():
            if not _exits(worker.process, deadline - time.monotonic()):
                log.error(
                    "worker %d did not stop in time: killed",
                    worker.index,
                    extra={"event": Event.WORKER_KILLED, "worker": worker.index},
                )
                worker.process.kill()
                worker.process.wait()
        for pipe in self._ready_pipes.values():
            os.close(pipe)
        self._ready_pipes.clear()
        for worker in self._workers.values():
            os.close(worker.settings_fd)
        log.info(
            "stopped",
            extra={
                "event": Event.STOPPED,
                "workers": {w.index: w.process.returncode for w in self._workers.values()},
            },
        )


def _exits(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Whether `process` exits within `seconds`."""
    try:
        process.wait(max(seconds, 0.0))
    except subprocess.TimeoutExpired:
        return False
    return True


def _exit_text(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"code {code}"
