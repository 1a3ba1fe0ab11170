"""Flags that signal handlers raise, and a wait that a raised one ends.

A Python signal handler runs in the main thread between two of its bytecodes: inside whatever
that thread was doing, another handler included. `threading.Event` cannot be what a handler
sets: `set()` takes a lock that `set()`, `clear()` and `wait()` hold for a moment, in that same
thread. A signal in that moment made the thread wait on itself for ever, and each signal after
it nested one more handler in that wait, until RecursionError (a storm of SIGHUP while memoryd
started: a worker died of it, and a supervisor could hang in its loop). A `Flag` is a count the
handler adds one to; nothing here takes a lock. Nothing here imports more than
`contextlib`, `os` and `select`: memoryd.hangups uses it before the rest of memoryd is imported.
"""

from __future__ import annotations

import contextlib
import os
import select


class Flag:
    """Raised by a signal handler, read by the main thread. `take()` lowers it and says
    whether it was raised; one raised meanwhile stays raised."""

    __slots__ = ("_raised", "_taken", "_wakeup_fd")

    def __init__(self, wakeup_fd: int | None = None) -> None:
        self._raised = 0
        self._taken = 0
        self._wakeup_fd = wakeup_fd

    def set(self) -> None:
        """Raise it: all a handler does (a handler nested in this one at worst loses its own
        count, never the flag)."""
        self._raised += 1
        if self._wakeup_fd is not None:
            with contextlib.suppress(BlockingIOError):  # full: a wait is woken already
                os.write(self._wakeup_fd, b"\0")

    def is_set(self) -> bool:
        return self._raised != self._taken

    def stop_waking(self) -> None:
        """From now on, raising it writes to no pipe."""
        self._wakeup_fd = None

    def take(self) -> bool:
        """Whether it was raised since the last take (and lower it)."""
        raised = self._raised
        came = raised != self._taken
        self._taken = raised
        return came


class Wakeup:
    """A pipe that the flags it makes write to when raised: `wait()` ends at once when one is
    raised, or was since the last wait, instead of at its timeout."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._flags: list[Flag] = []

    def flag(self) -> Flag:
        flag = Flag(self._write)
        self._flags.append(flag)
        return flag

    def wait(self, seconds: float) -> None:
        """Until a flag of this wakeup is raised, or `seconds` pass."""
        readable, _, _ = select.select([self._read], [], [], seconds)
        if readable:
            with contextlib.suppress(BlockingIOError):  # drained
                while os.read(self._read, 4096):
                    pass

    def close(self) -> None:
        """Close the pipe; its flags still rise, and write nowhere (not to whatever file
        takes the pipe's number next)."""
        for flag in self._flags:
            flag.stop_waking()
        os.close(self._read)
        os.close(self._write)
