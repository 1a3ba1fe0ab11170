"""Words' counts of rows kept between searches (memoryd.storage.fts5_words.KeptCounts): a count
holds until its table has grown by COUNT_GROWTH of the rows it had, never once it is smaller;
and through a real database (SQLite: PostgreSQL's counts are its statistics'), a search after a
write or an erasure counts again."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.domain.conversation import conversation_key
from memoryd.domain.messages import Trust
from memoryd.storage.fts5_words import COUNT_GROWTH, KeptCounts
from memoryd.storage.terms import counts
from tests.in_process import use_cases
from tests.memory.test_backfill import said

PLACE = ("/data/memory.db", "messages")


def test_a_count_holds_while_its_table_grows_by_less_than_the_share() -> None:
    kept = KeptCounts()
    kept.keep(PLACE, 10_000, {"violin": 40, "what": 9_000})
    grown = 10_000 + int(10_000 * COUNT_GROWTH)
    assert kept.held(PLACE, 10_000, ["violin", "what", "cello"]) == {"violin": 40, "what": 9_000}
    assert kept.held(PLACE, grown, ["violin"]) == {"violin": 40}
    assert kept.held(PLACE, grown + 1, ["violin"]) == {}
    assert kept.held(PLACE, 9_999, ["violin"]) == {}  # rows gone: counted again
    assert kept.held(("/data/other.db", "messages"), 10_000, ["violin"]) == {}
    assert kept.held(("/data/memory.db", "memories"), 10_000, ["violin"]) == {}


def test_a_small_table_counts_again_after_any_new_row() -> None:
    kept = KeptCounts()
    kept.keep(PLACE, 10, {"violin": 2})
    assert kept.held(PLACE, 10, ["violin"]) == {"violin": 2}
    assert kept.held(PLACE, 11, ["violin"]) == {}


def test_the_least_recently_asked_leave_first() -> None:
    kept = KeptCounts(most=2)
    kept.keep(PLACE, 100, {"a": 1, "b": 2})
    assert kept.held(PLACE, 100, ["a"]) == {"a": 1}  # "b" is now the least recently asked
    kept.keep(PLACE, 100, {"c": 3})
    assert kept.held(PLACE, 100, ["a", "b", "c"]) == {"a": 1, "c": 3}


@pytest.mark.sqlite_only("the counts kept are SQLite's; PostgreSQL reads its statistics")
async def test_a_search_after_a_write_counts_again(tmp_path: Path) -> None:
    chat = conversation_key(
        agent_id="main", owner_id="ada", channel="counts", chat_id="c", thread_scope=""
    )
    async with use_cases(tmp_path / "home") as runtime:
        history = runtime.services.history

        async def counted() -> tuple[float, list[float]]:
            return await runtime.readers.read(
                lambda connection: counts(connection, "messages", ["violin", "cello"])
            )

        await history.append(chat, [said("the violin case"), said("a cello")])
        assert await counted() == (2.0, [1.0, 1.0])
        assert await counted() == (2.0, [1.0, 1.0])  # kept
        await history.append(chat, [said("violin lessons")])
        assert await counted() == (3.0, [2.0, 1.0])


@pytest.mark.sqlite_only("the counts kept are SQLite's; PostgreSQL reads its statistics")
async def test_an_erasure_counts_again(tmp_path: Path) -> None:
    chat = conversation_key(
        agent_id="main", owner_id="ada", channel="counts", chat_id="c", thread_scope=""
    )
    async with use_cases(tmp_path / "home") as runtime:

        async def counted() -> tuple[float, list[float]]:
            return await runtime.readers.read(
                lambda connection: counts(connection, "messages", ["violin", "cello"])
            )

        appended = await runtime.services.history.append(
            chat, [said("the violin case"), said("violin lessons"), said("a cello")]
        )
        assert await counted() == (3.0, [2.0, 1.0])
        first = appended.stored[0].id
        await runtime.services.erasure.purge_messages(chat, [first], Trust.OPERATOR)
        # The newest row stays, so the table's rows read the same: the count is read again.
        assert await counted() == (3.0, [1.0, 1.0])
