"""The `memoryd` command (and `python -m memoryd`): SIGHUP held first (memoryd.hangups), then
the command line, whose imports take a second on a loaded machine; at the end, the process
leaves without the interpreter's finalization (`leave`)."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

from memoryd import hangups

# What Python exits with when it cannot flush stdout at exit (a reader that went away).
EXIT_UNFLUSHED = 120


def main() -> int:
    """Run `memoryd` with this process's arguments; the exit code."""
    hangups.hold()
    from memoryd.cli.main import main as run  # noqa: PLC0415 - after hold(): imports take time

    code = run()
    if _only_thread():
        leave(code)
    return code


def leave(code: int) -> NoReturn:
    """End the process once the command has finished: the exit handlers run (logging's last
    flush, the tracer's), stdout and stderr are flushed, and the process exits without tearing
    down every module's objects one by one. That teardown took 0.16 s of a server's stop after
    its `stopped` line (a supervisor, a worker restarting, every test's server): every file and
    the database are closed by then, and nothing in that teardown writes anything."""
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # as Python's own exit: the output was not all written
        code = code or EXIT_UNFLUSHED
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


def _only_thread() -> bool:
    """Whether no thread is left that the interpreter's exit would wait for: one still running
    (not expected once a command returns) is joined by the ordinary exit instead."""
    main_thread = threading.main_thread()
    return all(thread.daemon for thread in threading.enumerate() if thread is not main_thread)
