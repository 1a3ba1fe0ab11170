"""Every benchmark still runs: each once with tiny sizes (`bench/run_all.py --quick`), so a
benchmark gone stale against the code it measures fails here, not in the next `make bench`. And
`run_all.py` keeps every figure it got when one benchmark fails, says which, and exits non-zero
only at the end. Figures are not checked: timing belongs to the benchmarks themselves."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run_all() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "bench" / "run_all.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_all"] = module
    spec.loader.exec_module(module)
    return module


run_all = _run_all()


def tiny_locomo(folder: Path) -> Path:
    """A dataset in LoCoMo's shape (made here, not LoCoMo's text): one conversation of each half
    (the development half's first, and one of the other), two sessions, three questions."""
    samples = [
        {
            "sample_id": sample,
            "conversation": {
                "speaker_a": "Ada",
                "speaker_b": "Ben",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ada", "dia_id": "D1:1", "text": "I adopted a grey cat."},
                    {"speaker": "Ben", "dia_id": "D1:2", "text": "What is the cat called?"},
                    {"speaker": "Ada", "dia_id": "D1:3", "text": "Her name is Pixel."},
                ],
                "session_2_date_time": "10:37 am on 27 June, 2023",
                "session_2": [
                    {"speaker": "Ben", "dia_id": "D2:1", "text": "I ran a marathon in Oslo."},
                    {"speaker": "Ada", "dia_id": "D2:2", "text": "How long did it take?"},
                    {"speaker": "Ben", "dia_id": "D2:3", "text": "Four hours and ten."},
                ],
            },
            "qa": [
                {"question": "What is Ada's cat called?", "evidence": ["D1:3"], "category": 4},
                {"question": "Where was the marathon?", "evidence": ["D2:1"], "category": 4},
                {
                    "question": "What pet did Ada adopt and what is its name?",
                    "evidence": ["D1:1", "D1:3"],
                    "category": 1,
                },
            ],
        }
        for sample in ("conv-26", "conv-44")
    ]
    path = folder / "locomo-shaped.json"
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


@pytest.mark.parametrize("benchmark", run_all.BENCHMARKS, ids=lambda item: item.name)
def test_every_benchmark_runs_with_tiny_sizes(benchmark: Any, tmp_path: Path) -> None:
    """`benchmark` is one of run_all's, a module loaded from its file."""
    locomo = str(tiny_locomo(tmp_path))
    command = benchmark.command(quick=True, locomo=locomo)
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    assert document


FAILING = """import sys\nprint("half a document", flush=True)\nsys.exit("the fixture is stale")\n"""
SUCCEEDING = """import json\nprint(json.dumps({"benchmark": "fine", "figure": 42}))\n"""


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two benchmarks in place of the real ones, one stale (it fails) and one fine, run with
    --quick; the file their results are recorded in."""
    (tmp_path / "stale.py").write_text(FAILING)
    (tmp_path / "fine.py").write_text(SUCCEEDING)
    benchmarks = (
        run_all.Benchmark("transfer_throughput", str(tmp_path / "stale.py")),
        run_all.Benchmark("auth_overhead", str(tmp_path / "fine.py")),
    )
    monkeypatch.setattr(run_all, "BENCHMARKS", benchmarks)
    recorded = tmp_path / "record.json"
    monkeypatch.setattr(sys, "argv", ["run_all.py", "--quick", "--record", str(recorded)])
    return recorded


def test_a_failed_benchmark_is_marked_and_the_others_figures_are_kept(
    record: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_all.main() == 1
    printed = capsys.readouterr()
    document = json.loads(printed.out[: printed.out.index("\nmachine:")])
    assert document["auth_overhead"] == {"benchmark": "fine", "figure": 42}
    assert document["transfer_throughput"]["failed"] == "exit status 1"
    assert "the fixture is stale" in document["transfer_throughput"]["stderr"]
    assert "| memoryd import / export | **FAILED** (transfer_throughput) | |" in printed.out
    assert "| AppendMessages | not run | |" in printed.out
    assert "ran: 1 of 2; failed: transfer_throughput" in printed.out
    assert "FAILED: transfer_throughput: exit status 1" in printed.err


def test_a_resumed_run_keeps_the_recorded_figures_and_runs_only_what_failed(
    record: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run cut off or failed part-way is finished with --resume: what the record holds is not
    measured again (the script it came from is gone here), what failed is run again."""
    assert run_all.main() == 1
    assert json.loads(record.read_text())["auth_overhead"] == {"benchmark": "fine", "figure": 42}
    (tmp_path / "fine.py").unlink()
    (tmp_path / "stale.py").write_text(SUCCEEDING)
    monkeypatch.setattr(sys, "argv", ["run_all.py", "--resume", "--record", str(record)])
    assert run_all.main() == 0
    printed = capsys.readouterr()
    assert "ran: 2 of 2; failed: none" in printed.out
    assert json.loads(record.read_text())["transfer_throughput"]["figure"] == 42
