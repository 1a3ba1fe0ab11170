"""SIGHUP while memoryd starts: held, never fatal.

SIGHUP's default action ends a process, and memoryd takes it over only once it serves (a server
on its own reloads its tokens, a supervisor gives its workers theirs, a worker leaves it to its
supervisor: memoryd.serving.token_reloads). Before that, while the interpreter imports, the
settings are read and the database opens, one SIGHUP (an operator's reload, a supervisor's
signal to its process group) killed it, and systemd counts a death by SIGHUP as a clean exit, so
the shipped unit did not restart it. `hold()`, the first thing `memoryd` does, makes an early
SIGHUP a note instead; whoever takes SIGHUP over then asks `held()` whether one came, and a
server applies it as if it had come a moment later. Nothing here imports more than `signal` and
memoryd.signal_flags: it runs before the rest of memoryd is imported. The note is a
`signal_flags.Flag`, which takes no lock: a storm of SIGHUP nests one handler in another.

What comes before any code of memoryd runs (the interpreter's own start) cannot be held by it:
a supervisor starts its workers with SIGHUP blocked (`blocked()`), which they inherit, so that
one sent then waits for `hold()`, which unblocks it.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

from memoryd.signal_flags import Flag

_came = Flag()


def hold() -> None:
    """From now until SIGHUP is taken over, a SIGHUP is noted, not fatal (one that waited,
    blocked since the process started, too)."""
    signal.signal(signal.SIGHUP, _note)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """SIGHUP blocked in this thread for the block: a process started in it begins with SIGHUP
    blocked, until its `hold()`."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def held() -> bool:
    """Whether a SIGHUP came while it was held (and forget it)."""
    return _came.take()


def _note(_signum: int, _frame: FrameType | None) -> None:
    _came.set()
