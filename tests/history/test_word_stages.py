"""A small scope's word search leaves out the every-word stage when no message of the scope holds
the query's rarest word (memoryd.services.word_search.WordSearch.rarest): through a real
database, the ranking is the one the stages give with it, whether the rarest word is held or not,
on both engines."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from memoryd.domain.conversation import ConversationKey, conversation_key
from memoryd.domain.search_query import plan_search
from memoryd.services.word_search import WordSearch, rank_lexical
from memoryd.storage import search_reads
from memoryd.storage.transaction import Transaction
from tests.in_process import use_cases
from tests.memory.test_backfill import said

COMMON = ["violin", "practice", "lesson", "teacher", "today"]
RARE = ["cello", "harp", "oboe", "bassoon"]
ELSEWHERE = ["tuba", "banjo"]  # only in another conversation


def _chat(name: str) -> ConversationKey:
    return conversation_key(
        agent_id="main", owner_id="ada", channel="stages", chat_id=name, thread_scope=""
    )


async def test_the_every_word_stage_is_left_out_only_when_it_would_find_nothing(
    tmp_path: Path,
) -> None:
    rng = random.Random(3)
    mine = [
        " ".join(rng.choices(COMMON, k=4) + rng.sample(RARE, k=rng.randint(0, 2)))
        for _ in range(80)
    ]
    other = [" ".join(rng.choices(COMMON + ELSEWHERE, k=5)) for _ in range(80)]
    queries = [
        " ".join(rng.sample(COMMON + RARE + ELSEWHERE, k=rng.randint(2, 4))) for _ in range(120)
    ]
    async with use_cases(tmp_path / "home") as runtime:
        await runtime.services.history.append(_chat("mine"), [said(text) for text in mine])
        await runtime.services.history.append(_chat("other"), [said(text) for text in other])

        def compare(connection: Transaction) -> tuple[int, int, int]:
            skipped = kept = every_word_found = 0
            for query in queries:
                way = WordSearch.prepare(connection, _chat("mine"), plan_search(query))
                assert way.small
                assert way.rarest is not None
                held = search_reads.held_in_scope(connection, _chat("mine"), [way.rarest])[0]
                skipped += not held
                kept += held
                every = dataclasses.replace(way, rarest=None)
                found = rank_lexical(connection, _chat("mine"), way, (), 50, limit=10)
                assert found == rank_lexical(connection, _chat("mine"), every, (), 50, limit=10)
                assert way.plan.word_expression is not None
                every_word_found += bool(
                    search_reads.rank_words(
                        connection, _chat("mine"), way.plan.word_expression, (), 1
                    )
                )
            return skipped, kept, every_word_found

        skipped, kept, every_word_found = await runtime.readers.read(compare)
    # Not vacuous: both ways taken, and some queries' every-word stage finds messages.
    assert skipped > 5, (skipped, kept, every_word_found)
    assert kept > 5, (skipped, kept, every_word_found)
    assert every_word_found > 3
