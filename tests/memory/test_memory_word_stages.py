"""Recall of memory rows leaves out the every-word search when a term of the query is held by no
row the caller may see (memoryd.services.recall): through a real database, whenever
held_in_view finds a term absent, the every-word search finds nothing, on both engines; and the
rows recalled are those the stages give with it."""

from __future__ import annotations

import random
from pathlib import Path

from memoryd.domain.conversation import OwnerKey, conversation_key, owner_key
from memoryd.domain.memories import Caller, Category, ScopeType, StoreRequest
from memoryd.domain.messages import Trust
from memoryd.domain.recall import RecallScope
from memoryd.domain.search_query import plan_search
from memoryd.services.evidence import TermCounts
from memoryd.services.recall import lexical_memories, memory_terms, recall_visibility
from memoryd.storage import memory_reads as reads
from memoryd.storage.transaction import Transaction
from tests.in_process import use_cases

COMMON = ["violin", "practice", "lesson", "teacher"]
RARE = ["cello", "harp", "oboe", "bassoon"]
OTHER_OWNER = ["tuba", "banjo"]


def owner_note(owner: OwnerKey, key: str, value: str) -> StoreRequest:
    """StoreMemory of an owner's preference, as the owner's operator stores it."""
    return StoreRequest(
        caller=Caller(owner),
        trust=Trust.OPERATOR,
        category=Category.PREFERENCE,
        key=key,
        value=value,
        id=0,
        scope_type=ScopeType.OWNER,
        metadata_json="",
        confidence=0.0,
        session_id="",
        run_id="",
        source_message_id=0,
    )


async def test_a_term_no_visible_row_holds_means_no_row_holds_every_word(tmp_path: Path) -> None:
    rng = random.Random(4)
    ada = owner_key(agent_id="main", owner_id="ada")
    bob = owner_key(agent_id="main", owner_id="bob")
    chat = conversation_key(
        agent_id="main", owner_id="ada", channel="stages", chat_id="c", thread_scope=""
    )
    queries = [
        " ".join(rng.sample(COMMON + RARE + OTHER_OWNER, k=rng.randint(2, 4))) for _ in range(120)
    ]
    async with use_cases(tmp_path / "home") as runtime:
        for owner, words in ((ada, COMMON + RARE), (bob, COMMON + OTHER_OWNER)):
            for number in range(40):
                value = " ".join(rng.sample(words, k=rng.randint(1, 3)))
                await runtime.services.memory.store(owner_note(owner, f"note_{number}", value))
        visible = recall_visibility(Caller(ada, chat), RecallScope.OWNER, Trust.OPERATOR)

        def check(connection: Transaction) -> tuple[int, int]:
            absent_queries = every_word_found = 0
            for query in queries:
                plan = plan_search(query)
                counted = TermCounts.read(connection, "memories", plan)
                terms = memory_terms(connection, visible, plan, counted)
                assert plan.word_expression is not None
                every = reads.search_words(connection, visible, plan.word_expression, 50)
                every_word_found += bool(every)
                if any(terms.absent):
                    absent_queries += 1
                    assert every == [], query
                    words = tuple(plan.words)
                    assert lexical_memories(
                        connection, visible, plan, words, 50, every_word=False
                    ) == lexical_memories(connection, visible, plan, words, 50)
            return absent_queries, every_word_found

        absent_queries, every_word_found = await runtime.readers.read(check)
    # Not vacuous: terms found absent (the other owner's words), and every-word hits.
    assert absent_queries > 10
    assert every_word_found > 5
