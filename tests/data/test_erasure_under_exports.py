"""An erasure while exports hold an old snapshot: the purge never stalls the writer, the receipt
says the WAL is not truncated yet and names it, `memoryd check` reports the wait, and once the
exports let go the WAL is truncated in the background and the erased text is gone from every
file (the red team's case: 20,000 messages, two ExportData streams whose readers stall)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess
from tests.data.test_verified_erasure import every_file

MESSAGES = 20_000
BATCH = 1_000


def check(home: Path) -> dict[str, Any]:
    """`memoryd check --json` on the data directory (while the server serves)."""
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", "check", "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    return report


async def fill(memory: md.Stubs, owner: str, text: str) -> None:
    chat = md.Conversation(owner_id=owner, channel="telegram", chat_id=f"{owner}-chat")

    async def batches() -> AsyncIterator[md.IngestMessagesRequest]:
        for start in range(0, MESSAGES // 2, BATCH):
            yield md.IngestMessagesRequest(
                messages=[
                    md.IngestedMessage(
                        conversation=chat, message=md.user(owner, f"{text} number {start + n}")
                    )
                    for n in range(BATCH)
                ]
            )

    done = await memory.conversations.IngestMessages(batches())
    assert done.stored == MESSAGES // 2


@pytest.mark.sqlite_only("SQLite's WAL file under a stalled export")
async def test_a_purge_under_stalled_exports_never_stalls_the_writer(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home").start()
    marker = f"zq{uuid.uuid4().hex[:10]}gone"
    filler = "x" * 900  # large lines: the stalled exports fill their buffers early
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await fill(memory, "victim", f"{marker} {filler}")
        await fill(memory, "keeper", f"kept {filler}")
        exports = [memory.admin.ExportData(md.ExportDataRequest()) for _ in range(2)]
        for export in exports:
            first = await export.read()  # open, then never read again
            assert isinstance(first, md.ExportDataResponse), first
            assert first.lines
        other = md.Conversation(agent_id="bystander", channel="telegram", chat_id="b")
        appended = 0
        purging = True

        async def appends() -> None:
            nonlocal appended
            while purging or appended < 20:
                await memory.conversations.AppendMessages(
                    md.AppendMessagesRequest(conversation=other, messages=[md.user("bo", "hi")])
                )
                appended += 1
                await asyncio.sleep(0.01)

        # The purge, and the writes beside it, complete while both exports still hold their
        # snapshot: neither waits for a reader (how long each takes is bench/'s to measure:
        # bench/erasure_under_exports.py).
        writer = asyncio.create_task(appends())
        receipt = await memory.admin.PurgeOwner(md.PurgeOwnerRequest(owner_id="victim"))
        purging = False
        await writer
        assert appended >= 20
        assert not receipt.wal_truncated
        assert "memory.db-wal" in receipt.residual_files

        report = check(server.home)
        assert report["healthy"], report
        assert len(report["erasures_waiting"]) == 1
        assert any("wait for the WAL to be truncated" in note for note in report["notes"])
        for export in exports:
            export.cancel()
        await asyncio.to_thread(server.wait_for_event, Event.WAL_TRUNCATED, 30)
        assert marker.encode() not in every_file(server.home)
        assert b"kept" in every_file(server.home)
        report = check(server.home)
        assert report["erasures_waiting"] == []
