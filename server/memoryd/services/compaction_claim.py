"""A conversation's compaction claim in the database: one compaction at a time per conversation
across every process that shares the store (each process also takes its own lock first)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import secrets
from collections.abc import AsyncIterator, Callable

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.timestamps import to_text
from memoryd.storage import compaction_store as store
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

# A claim is renewed this often while its compaction runs, taken over when this old (its
# process died), and looked at this often by a compaction that waits for it.
CLAIM_RENEW_SECONDS = 5.0
CLAIM_STALE_SECONDS = 20.0
CLAIM_POLL_SECONDS = 0.1


@contextlib.asynccontextmanager
async def claimed(
    writer: Writer, key: ConversationKey, now: Callable[[], dt.datetime]
) -> AsyncIterator[None]:
    """Hold the conversation's claim while the block runs. A claim held elsewhere is waited
    for; its holder renews it every CLAIM_RENEW_SECONDS, so a dead holder's goes stale within
    CLAIM_STALE_SECONDS."""
    token = secrets.token_hex(8)
    while True:
        at = now()

        def claim(transaction: Transaction, at: dt.datetime = at) -> bool:
            stale = at - dt.timedelta(seconds=CLAIM_STALE_SECONDS)
            return store.claim(
                transaction, key, token, now=to_text(at), stale_before=to_text(stale)
            )

        if await writer.run("compaction_claim", claim):
            break
        await asyncio.sleep(CLAIM_POLL_SECONDS)
    renewing = asyncio.create_task(_renew(writer, key, token, now))
    try:
        yield
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        await writer.run(
            "compaction_release", lambda transaction: store.release(transaction, key, token)
        )


async def _renew(
    writer: Writer, key: ConversationKey, token: str, now: Callable[[], dt.datetime]
) -> None:
    while True:
        await asyncio.sleep(CLAIM_RENEW_SECONDS)
        at = to_text(now())

        def renew(transaction: Transaction, at: str = at) -> None:
            store.renew(transaction, key, token, now=at)

        await writer.run("compaction_renew", renew)
