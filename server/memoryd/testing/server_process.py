"""A real memoryd server in a subprocess, on a free port, for tests and benchmarks (memoryd's own,
and an adapter's: `from memoryd.testing.server_process import ServerProcess`).

The server is started exactly as a user starts it (`python -m memoryd serve`), with its own data
directory (and, when tests run on PostgreSQL, a database of its own: memoryd.testing.postgres).
Its stderr (JSON log lines) is collected by a thread, so tests can wait for events and assert on
what was logged; with $MEMORYD_TEST_LOGS set, each server's log is also kept in that folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memoryd.log_events import Event
from memoryd.testing import postgres

STARTUP_TIMEOUT = 30.0


def _with_open_file_limit(limit: int, command: list[str]) -> list[str]:
    """`command` run with an open-file limit (soft and hard), as `ulimit -n` sets it: through
    the shell rather than a preexec_fn, which is unsafe in a test process with threads."""
    return ["sh", "-c", 'ulimit -n "$0" && exec "$@"', str(limit), *command]


class ServerProcess:
    """One running `memoryd serve`."""

    def __init__(
        self,
        home: Path,
        *,
        config: str | None = None,
        env: dict[str, str] | None = None,
        listen: str = "127.0.0.1:0",
        create_home: bool = True,
        umask: int | None = None,
        workers: int = 1,
        arguments: tuple[str, ...] = (),
        python: str | None = None,
        open_files: int | None = None,
    ) -> None:
        """`workers` above 1 starts `memoryd serve --workers N`: a supervisor, whose `serving`
        event comes once every worker serves. `arguments` are added to the command line.
        `python` is another interpreter whose installed memoryd runs (a fresh virtualenv's):
        then $PYTHONPATH is not passed on, and it runs beside the data directory.
        `open_files` sets the process's open-file limit (soft and hard), as `ulimit -n` would."""
        self.home = home
        if create_home:
            self.home.mkdir(parents=True, exist_ok=True)
        command = [
            python or sys.executable,
            "-m",
            "memoryd",
            "serve",
            "--home",
            str(home),
            "--listen",
            listen,
            *(("--workers", str(workers)) if workers > 1 else ()),
            *arguments,
        ]
        if config is not None:
            home.parent.mkdir(parents=True, exist_ok=True)
            config_path = home.parent / f"{home.name}-config.toml"
            config_path.write_text(config, encoding="utf-8")
            config_path.chmod(0o600)  # a config holding tokens must be private to be served
            command += ["--config", str(config_path)]
        if open_files is not None:
            command = _with_open_file_limit(open_files, command)
        process_env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        process_env.update(postgres.environment_for(home))
        process_env.update(env or {})
        if python is not None:
            process_env.pop("PYTHONPATH", None)
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter running memoryd
            command,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=process_env,
            umask=-1 if umask is None else umask,
            cwd=home.parent if python is not None else None,
        )
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()
        self.address = ""

    def _collect(self) -> None:
        if self.process.stderr is None:  # pragma: no cover - started with stderr=PIPE
            return
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The JSON log records so far (optionally only those with this `event`)."""
        records = []
        for line in list(self.lines):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if name is None or record.get("event") == name:
                records.append(record)
        return records

    def wait_for_event(self, name: str, timeout: float = STARTUP_TIMEOUT) -> dict[str, Any]:
        """Block until a log record with this event appears (or the process exits)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = self.events(name)
                if found:
                    return found[-1]
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise RuntimeError(
                        f"memoryd exited with {self.process.returncode} before {name!r}:\n"
                        + "\n".join(self.lines)
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"no {name!r} event within {timeout}s:\n" + "\n".join(self.lines)
                    )
                self._changed.wait(min(remaining, 0.2))

    def start(self) -> ServerProcess:
        """Wait until the server serves; returns self."""
        self.address = self.wait_for_event(Event.SERVING)["address"]
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait for exit; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._reader.join(5)
        self._keep_log()
        return code

    def _keep_log(self) -> None:
        """With $MEMORYD_TEST_LOGS, the server's log is kept there (one file per process)."""
        folder = os.environ.get("MEMORYD_TEST_LOGS")
        if folder:
            path = Path(folder) / f"{self.home.name}-{self.process.pid}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")

    def wait_exit(self, timeout: float = STARTUP_TIMEOUT) -> int:
        """Wait for the process to exit on its own (a refused start)."""
        code = self.process.wait(timeout)
        self._reader.join(5)
        return code

    @property
    def output(self) -> str:
        """Everything the server wrote to stderr."""
        return "\n".join(self.lines)
