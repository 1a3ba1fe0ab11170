"""No test depends on the environment it runs in: a sample of the suite, across its areas and
including the tests that look at niceness and at hashing, runs again under `nice -n 5` and with
a PYTHONHASHSEED other than the one this run has. (`make test-environment` runs the whole suite
that way.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A test of each kind: the shared server's (history, memory, search), a server of its own (its
# threads' niceness, relative to its own), the domain's rules (property tests: sets and dicts
# whose order a hash seed changes) and the layer and parity checks.
SAMPLE = (
    "tests/history/test_append.py",
    "tests/history/test_search.py",
    "tests/memory/test_memory_store.py",
    (
        "tests/memory/test_retrieval.py::"
        "test_the_background_embedder_runs_at_the_lowest_priority_and_searches_do_not"
    ),
    "tests/review/test_review_gate.py",
    "tests/server/test_domain_rules.py",
    "tests/server/test_layers.py",
)
NICENESS = 5


def test_a_sample_of_the_suite_passes_under_nice_and_another_hash_seed(tmp_path: Path) -> None:
    seed = "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "1717"
    environment = {**os.environ, "PYTHONHASHSEED": seed}
    environment.pop("PYTEST_XDIST_WORKER", None)
    command = [
        "nice",
        "-n",
        str(NICENESS),
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        f"--basetemp={tmp_path / 'inner'}",
        *SAMPLE,
    ]
    result = subprocess.run(
        command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary
    assert "failed" not in summary
    assert "skipped" not in summary, summary
