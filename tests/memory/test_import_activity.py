"""While an import writes, the background embedder waits; the import's vectors follow it
(memoryd.services.import_activity)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memoryd.domain.conversation import conversation_key
from memoryd.services.import_activity import QUIET_SECONDS, ImportActivity
from memoryd.services.ingest import IngestBatch, IngestItem
from memoryd.testing.configs import embedding_config
from memoryd.testing.fake_embeddings import FakeEmbeddings
from tests.in_process import use_cases
from tests.memory.test_backfill import said
from tests.review_helpers import eventually

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

KEY = conversation_key(
    agent_id="main", owner_id="ada", channel="import", chat_id="archive", thread_scope=""
)


def batch(*texts: str) -> IngestBatch:
    return IngestBatch([IngestItem(KEY, said(text)) for text in texts])


async def test_the_embedder_waits_while_an_import_writes_and_embeds_it_after(
    tmp_path: Path, endpoint: FakeEmbeddings
) -> None:
    async with use_cases(tmp_path / "home", config=embedding_config(endpoint)) as runtime:
        services = runtime.services
        sent: asyncio.Queue[IngestBatch | None] = asyncio.Queue()

        async def stream() -> AsyncIterator[IngestBatch]:
            while (item := await sent.get()) is not None:
                yield item

        async def pending_at_least(count: int) -> bool:
            counts = (await services.embedding.status()).counts
            assert counts is not None
            return counts.pending_messages >= count

        importing = asyncio.ensure_future(services.ingest.ingest(stream()))
        await sent.put(batch("the old project's kickoff", "budget approved in March"))
        await sent.put(batch("the vendor changed in May"))  # read once the first has committed
        await eventually(lambda: pending_at_least(2))

        # The stream is open and has just sent: the embedder takes nothing.
        assert await services.embedding.step() is False
        assert endpoint.requests == []

        await sent.put(None)
        report = await importing
        assert report.stored == 3
        while await services.embedding.step():
            pass
        embedded = [text for request in endpoint.requests for text in request["input"]]
        assert len(embedded) == 3
        status = await services.embedding.status()
        assert status.counts is not None
        assert (status.counts.pending_messages, status.counts.embedded_messages) == (0, 3)


def test_an_open_stream_that_sends_nothing_holds_the_embedder_back_only_briefly() -> None:
    now = [100.0]
    activity = ImportActivity(clock=lambda: now[0])
    assert not activity.writing
    with activity.importing():
        assert activity.writing
        now[0] += QUIET_SECONDS - 0.5
        assert activity.writing
        activity.batch()
        now[0] += QUIET_SECONDS - 0.5
        assert activity.writing  # a batch came since
        now[0] += 1.0
        assert not activity.writing  # open, but quiet
        activity.batch()
        assert activity.writing
        with activity.importing():  # a second stream
            pass
        assert activity.writing  # the first is still open
    assert not activity.writing
