"""How a `memoryd` process ends (memoryd.entry.leave): the exit handlers run and the output is
all written, though the interpreter's teardown of every module is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # each starts an interpreter


def _run(program: str, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """`program` in this interpreter, its stdout buffered whatever this environment says."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        timeout=60,
        env=environment,
    )


def test_leaving_runs_the_exit_handlers_and_writes_all_the_output() -> None:
    result = _run(
        """
        import atexit, logging, sys
        from memoryd.entry import leave
        logging.basicConfig(stream=sys.stderr, format="%(message)s")
        atexit.register(lambda: print("the handler ran", end=""))
        print("x" * 100_000, end="")  # more than the buffer: part of it waits for the flush
        logging.getLogger("t").warning("logged before leaving")
        sys.stdout.write("|")
        leave(3)
        """
    )
    assert result.returncode == 3
    assert result.stdout == "x" * 100_000 + "|the handler ran"
    assert result.stderr == "logged before leaving\n"


def test_leaving_with_output_nobody_reads_ends_as_pythons_own_exit_does() -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the reader went away (`memoryd export | head -0`)
    try:
        result = _run(
            """
            import sys
            from memoryd.entry import leave
            sys.stdout.write("lost")  # buffered: refused only when flushed
            leave(0)
            """,
            stdout=writer,
        )
    finally:
        os.close(writer)
    assert result.returncode == 120
    assert "Traceback" not in result.stderr
