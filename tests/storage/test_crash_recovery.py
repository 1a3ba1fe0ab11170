"""SIGKILL at random moments under mixed load (tests/crash_harness.py): nothing acknowledged is
lost or duplicated, the database and its indexes stay intact, and the prompt files follow the
database. 5 rounds here; `python -m scripts.crash_rounds` runs 20 or more."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from memoryd.testing import postgres
from memoryd.testing.fake_model import FakeModel
from tests.crash_harness import CrashHarness, review_answer

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

# Three rounds a test; `make probes` runs 20 (scripts/crash_rounds.py), on each backend.
ROUNDS = 3


def on_postgres_backend() -> bool:
    return bool(os.environ.get(postgres.TEST_POSTGRES))


async def test_nothing_acknowledged_is_lost_across_sigkills(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    with FakeModel(responder=review_answer) as model:
        harness = CrashHarness(tmp_path / "home", model, seed)
        for _ in range(ROUNDS):
            await harness.round()
        await harness.finish()
    ledger = harness.ledger
    acknowledged = sum(len(acked) for acked in ledger.appended.values())
    assert acknowledged > 0, f"seed {seed}: no append was acknowledged"
    assert ledger.ingested, f"seed {seed}: no import was answered"
    assert ledger.spoken, f"seed {seed}: no transcript final was acknowledged"
    assert ledger.acked_values, f"seed {seed}: no store was acknowledged"
    assert model.requests, f"seed {seed}: no review ran"


async def test_nothing_acknowledged_is_lost_when_one_of_two_workers_is_killed(
    tmp_path: Path,
) -> None:
    """`serve --workers 2`: each round kills one worker under load, then the rest (on
    PostgreSQL, after PostgreSQL ended every connection of memoryd once)."""
    seed = random.randrange(2**32)
    with FakeModel(responder=review_answer) as model:
        harness = CrashHarness(
            tmp_path / "home", model, seed, workers=2, cut_connections=on_postgres_backend()
        )
        for _ in range(3):
            await harness.round()
        await harness.finish()
    acknowledged = sum(len(acked) for acked in harness.ledger.appended.values())
    assert acknowledged > 0, f"seed {seed}: no append was acknowledged"
