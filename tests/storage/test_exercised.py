"""The record of which storage functions a run calls (memoryd.testing.exercised), on which make
test's PostgreSQL run relies to show it still exercises all of storage, records what was called
and nothing else, in a process it did not start itself; and the check fails on a function never
called."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from memoryd.testing import exercised

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
from memoryd.storage import errors
assert errors.constraint_violated(Exception("UNIQUE constraint failed: t.c")) == "unique"
"""


def _script() -> ModuleType:
    path = ROOT / "scripts" / "storage_exercised.py"
    spec = importlib.util.spec_from_file_location("storage_exercised", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_process_records_the_storage_functions_it_called_and_no_other(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    environment = {
        **os.environ,
        exercised.VARIABLE: str(calls),
        "PYTHONPATH": str(ROOT / "tests" / "exercised"),
    }
    for _ in range(2):  # two processes append to one file
        subprocess.run([sys.executable, "-c", PROGRAM], env=environment, check=True)
    recorded = calls.read_text(encoding="utf-8").splitlines()
    assert recorded == ["memoryd.storage.errors:constraint_violated"] * 2
    every = exercised.every_function()
    assert "memoryd.storage.errors:broken_check" in every
    assert "memoryd.storage.writer:Writer.submit" in every  # methods are listed too
    # What dataclasses write and what a Protocol only declares are not storage's functions.
    assert "memoryd.storage.writer:WriterStats.__eq__" not in every
    assert not [name for name in every if name.startswith("memoryd.storage.transaction:")]


def test_without_the_variable_nothing_is_recorded_or_wrapped(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != exercised.VARIABLE}
    environment["PYTHONPATH"] = str(ROOT / "tests" / "exercised")
    program = PROGRAM + (
        "import sys\nfrom memoryd.testing.exercised import _Finder\n"
        "assert not any(isinstance(f, _Finder) for f in sys.meta_path)\n"
    )
    subprocess.run([sys.executable, "-c", program], env=environment, check=True, cwd=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_check_fails_on_an_uncalled_function_and_notes_an_exemption_called() -> None:
    script = _script()
    every = [
        "memoryd.storage.history_writes:append",
        "memoryd.storage.history_writes:forgotten",
        "memoryd.storage.maintenance:backup",
    ]
    missing, stale = script.check(every, {"memoryd.storage.history_writes:append"})
    assert missing == ["memoryd.storage.history_writes:forgotten"]
    assert stale == []
    missing, stale = script.check(every, set(every))
    assert missing == []
    assert stale == ["memoryd.storage.maintenance:backup"]
