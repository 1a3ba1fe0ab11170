"""Moving between backends: `memoryd migrate --to postgres` copies a SQLite data directory into
an empty PostgreSQL, and an export of either imports into the other; each way, the export
afterwards is byte-for-byte the export before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.postgres import database_dsn
from memoryd.testing.server_process import ServerProcess
from tests.data.test_export_import import QUIET, REALTIME, compacted, fill, run_cli
from tests.helpers import run_memoryd

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

# A server of this test on SQLite, whatever backend the suite runs on.
SQLITE = {"MEMORYD_STORAGE_BACKEND": "sqlite", "MEMORYD_STORAGE_DSN": ""}


def on_postgres(dsn: str) -> dict[str, str]:
    """A server of this test on the PostgreSQL database `dsn`."""
    return {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_DSN": dsn}


async def test_sqlite_migrates_into_postgres_and_exports_back_byte_for_byte(
    start_server: type[ServerProcess], tmp_path: Path, postgres_base: str
) -> None:
    with FakeModel() as model:
        source = start_server(
            tmp_path / "source", config=review_config(model, enabled=False) + REALTIME, env=SQLITE
        ).start()
        async with md.connect(source.address) as channel:
            memory = md.Stubs(channel)
            await fill(memory, model)
            await compacted(memory, model, channel)
    before = tmp_path / "before.jsonl"
    run_cli(source, "export", str(before))
    records = len(before.read_text(encoding="utf-8").splitlines()) - 1

    dsn = database_dsn(postgres_base, tmp_path / "postgres")
    home = ["--home", str(source.home)]
    busy = run_memoryd("migrate", "--to", "postgres", "--dsn", dsn, *home, env=SQLITE)
    assert busy.returncode == 1
    assert "is serving" in busy.stderr
    assert "stop it before migrating" in busy.stderr
    source.stop()

    moved = run_memoryd("migrate", "--to", "postgres", "--dsn", dsn, *home, "--json", env=SQLITE)
    assert moved.returncode == 0, moved.stderr
    summary = json.loads(moved.stdout)
    assert summary["lines"] == records + 1
    assert sum(summary["records"].values()) == records
    assert "migrate: " in moved.stderr  # progress, on stderr
    assert "password" not in moved.stdout

    # Served from PostgreSQL, everything exports as it did from SQLite.
    target = start_server(tmp_path / "served", config=QUIET, env=on_postgres(dsn)).start()
    after = tmp_path / "after.jsonl"
    run_cli(target, "export", str(after))
    assert after.read_bytes() == before.read_bytes()

    # And back: PostgreSQL's export, imported into a SQLite home, exports the same again.
    back = start_server(tmp_path / "back", config=QUIET, env=SQLITE).start()
    run_cli(back, "import", str(after))
    again = tmp_path / "again.jsonl"
    run_cli(back, "export", str(again))
    assert again.read_bytes() == before.read_bytes()

    # A database that holds anything is never a migration's target.
    target.stop()
    refused = run_memoryd("migrate", "--to", "postgres", "--dsn", dsn, *home, env=SQLITE)
    assert refused.returncode == 1
    assert "the target database is not empty" in refused.stderr
    assert "migrate into a new, empty database" in refused.stderr


async def test_migrate_refuses_a_home_already_on_postgres_and_names_no_password(
    tmp_path: Path, postgres_base: str
) -> None:
    dsn = database_dsn(postgres_base, tmp_path / "postgres")
    (tmp_path / "home").mkdir()
    with_password = dsn + " password=hunter2-secret"
    done = run_memoryd(
        "migrate",
        "--to",
        "postgres",
        "--dsn",
        with_password,
        "--home",
        str(tmp_path / "home"),
        env=on_postgres(dsn),
    )
    assert done.returncode == 1
    assert "keeps its data in PostgreSQL database" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
