"""What a signal handler raises (memoryd.signal_flags): no lock, so that a storm of signals,
each handler nested in the one before, never makes the main thread wait on itself."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from memoryd.signal_flags import Flag, Wakeup


def test_take_lowers_the_flag_and_says_whether_it_was_raised() -> None:
    flag = Flag()
    assert not flag.is_set()
    assert not flag.take()
    flag.set()
    flag.set()
    assert flag.is_set()
    assert flag.take()
    assert not flag.is_set()
    assert not flag.take()


def test_a_wait_ends_for_a_flag_raised_before_it() -> None:
    wakeup = Wakeup()
    try:
        flag = wakeup.flag()
        flag.set()
        waiting = threading.Thread(target=wakeup.wait, args=(3600,), daemon=True)
        waiting.start()
        waiting.join(60)  # a guard against a hang: the wait must end on its own, at once
        assert not waiting.is_alive()
        assert flag.take()
    finally:
        wakeup.close()


def test_a_flag_of_a_closed_wakeup_writes_to_no_file_that_took_its_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Whatever takes the pipe's numbers after close() (the next file opened) must never get the
    # flag's bytes: every write the module makes is seen here.
    written: list[int] = []
    real_write = os.write

    def seen(fd: int, data: bytes) -> int:
        if data == b"\0":  # a flag's byte (os.write is the process's own for the test)
            written.append(fd)
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", seen)
    wakeup = Wakeup()
    flag = wakeup.flag()
    flag.set()
    assert len(written) == 1  # open: the flag wakes the pipe
    wakeup.close()
    flag.set()
    assert flag.is_set()
    assert len(written) == 1


@pytest.mark.slow
def test_a_storm_of_sighup_while_memoryd_starts_is_noted_and_never_hangs_it() -> None:
    # memoryd.hangups' note was a threading.Event: a SIGHUP while the main thread held its lock
    # (in held(), or in the handler before) waited for ever on that thread, and the next ones
    # nested until RecursionError. A worker died of it while its supervisor was reloaded.
    program = """
        import os, signal, threading
        from memoryd import hangups

        hangups.hold()
        sent = threading.Event()

        def storm():
            for _ in range(20_000):
                os.kill(os.getpid(), signal.SIGHUP)
            sent.set()

        threading.Thread(target=storm).start()
        noted = 0
        while not sent.is_set():
            noted += hangups.held()
        print(noted + hangups.held())
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,  # a guard against the hang this is about
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 1
