"""What a worker of `memoryd serve --workers N` is told by its supervisor, and what it does with
it: its index and health name, the data directory's lock, reporting ready, and stopping with
the supervisor (memoryd.supervisor starts the workers)."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import signal

from memoryd.errors import StartupError

# prctl(2)'s request: a signal when the parent dies.
PR_SET_PDEATHSIG = 1


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerRole:
    """What a worker process was given by its supervisor
    (`--worker-of INDEX:LOCK_FD:READY_FD:SETTINGS_FD`): its index, the data directory's lock,
    the pipe it reports ready on, and the pipe it reads its settings' snapshots from
    (memoryd.serving.token_reloads.SettingsPipe)."""

    index: int
    lock_fd: int
    ready_fd: int
    settings_fd: int

    @classmethod
    def parse(cls, text: str) -> WorkerRole:
        """From the hidden command-line value; StartupError when it is not one."""
        try:
            index, lock_fd, ready_fd, settings_fd = (int(part) for part in text.split(":"))
        except ValueError:
            raise StartupError(
                "--worker-of is given by `memoryd serve --workers N` to its own workers"
            ) from None
        return cls(index, lock_fd, ready_fd, settings_fd)

    @property
    def health_name(self) -> str:
        """The health service name only this worker reports SERVING for: a health check of it
        says which worker a connection reached."""
        return f"memoryd.worker.{self.index}"

    def stop_with_supervisor(self) -> None:
        """Have the kernel send this process SIGTERM when its supervisor dies (Linux), so that
        no worker outlives it holding the port and the data directory."""
        parent = os.getppid()
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it died before the request was in place
            os.kill(os.getpid(), signal.SIGTERM)

    def report_ready(self) -> None:
        """Tell the supervisor this worker serves (once)."""
        with contextlib.suppress(OSError):
            os.write(self.ready_fd, b"ready\n")
            os.close(self.ready_fd)
