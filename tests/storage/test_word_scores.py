"""bm25 of a small scope's word search with the counts the search read (memoryd.storage.
fts5_scores): through a real SQLite database of messages and memory rows, the same rows in the
same order with the same scores as FTS5's bm25(), from the counts given (not counted again);
a phrase of several words counted as bm25 counts it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from memoryd.domain.conversation import (
    conversation_key,
    owner_key,
    owner_scope_token,
    scope_token,
)
from memoryd.domain.search_query import plan_search
from memoryd.storage import fts5_scores, search_reads
from memoryd.storage.fts5_words import MEMORY_WEIGHTS, MESSAGE_WEIGHTS
from memoryd.storage.sql import rows
from memoryd.storage.terms import counts, phrase_words
from memoryd.storage.transaction import Transaction
from tests.in_process import use_cases
from tests.memory.test_backfill import said
from tests.memory.test_memory_word_stages import owner_note

pytestmark = pytest.mark.sqlite_only("memoryd_bm25 is an FTS5 function: SQLite's")

WORDS = [
    "violin",
    "cello",
    "piano",
    "lesson",
    "teacher",
    "concert",
    "tuesday",
    "friday",
    "practice",
    "scales",
    "bow",
]


def _chat(name: str) -> Any:
    return conversation_key(
        agent_id="main", owner_id="ada", channel="scores", chat_id=name, thread_scope=""
    )


def _sentences(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=rng.randint(2, 12))) for _ in range(count)]


def _word_counts(connection: Transaction, table: str, query: str) -> dict[str, float]:
    terms = list(plan_search(query).terms)
    _, found = counts(connection, table, terms)  # type: ignore[arg-type]
    return {phrase_words(term)[0]: count for term, count in zip(terms, found, strict=True)}


def _scored(connection: Transaction, index: str, weights: str, score: str, match: str) -> list[Any]:
    return list(
        rows(
            connection,
            f"SELECT rowid, {score}({index}, {weights}) AS s FROM {index} "
            f"WHERE {index} MATCH ? ORDER BY s, rowid DESC",
            (match,),
        )
    )


def _counted(
    connection: Transaction, index: str, weights: str, given: str, match: str
) -> list[Any]:
    return list(
        rows(
            connection,
            f"SELECT rowid, {fts5_scores.FUNCTION}({index}, ?, {weights}) AS s FROM {index} "
            f"WHERE {index} MATCH ? ORDER BY s, rowid DESC",
            (given, match),
        )
    )


async def test_a_scopes_messages_score_as_bm25_scores_them(tmp_path: Path) -> None:
    rng = random.Random(7)
    async with use_cases(tmp_path / "home") as runtime:
        for name in ("a", "b", "c"):
            await runtime.services.history.append(
                _chat(name), [said(text) for text in _sentences(rng, 60)]
            )
        token = scope_token(_chat("b"))
        index, weights = MESSAGE_WEIGHTS

        def check(connection: Transaction) -> None:
            for query in ("violin", "cello OR friday", "violin teacher scales", "bow OR piano"):
                plan = plan_search(query)
                expression = plan.any_word_expression or plan.word_expression
                assert expression is not None
                match = f'{{content sender}} : ({expression}) AND scope : "{token}"'
                given = fts5_scores.encoded(_word_counts(connection, "messages", query))
                expected = _scored(connection, index, weights, "bm25", match)
                assert expected, query
                # The same rows, in the same order, with the same scores to the last bit.
                assert _counted(connection, index, weights, given, match) == expected
                # Through the search's own read: the ids and scores of rank_words.
                counted = _word_counts(connection, "messages", query)
                ranked = search_reads.rank_words(
                    connection, _chat("b"), expression, (), 25, narrow=True, counted=counted
                )
                plain = search_reads.rank_words(connection, _chat("b"), expression, (), 25)
                assert ranked == plain

        await runtime.readers.read(check)


async def test_the_counts_given_are_the_ones_used(tmp_path: Path) -> None:
    async with use_cases(tmp_path / "home") as runtime:
        await runtime.services.history.append(
            _chat("a"), [said("violin lesson"), said("cello lesson"), said("violin concert")]
        )
        token = scope_token(_chat("a"))
        index, weights = MESSAGE_WEIGHTS
        match = f'{{content sender}} : ("violin" OR "cello") AND scope : "{token}"'

        def scores(connection: Transaction) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
            true = fts5_scores.encoded({"violin": 2, "cello": 1})
            # Told violin is rare and cello common, the cello turn falls below the violins.
            told = fts5_scores.encoded({"violin": 0, "cello": 3})
            # A count past the rows there are (kept from before rows were deleted) weighs as
            # a word every row holds, bm25's floor.
            past = fts5_scores.encoded({"violin": 10**6, "cello": 1})
            return (
                _scored(connection, index, weights, "bm25", match),
                _counted(connection, index, weights, true, match),
                _counted(connection, index, weights, told, match),
                _counted(connection, index, weights, past, match),
            )

        bm25, true, told, past = await runtime.readers.read(scores)
        assert true == bm25
        assert bm25[0][0] == 2  # the cello turn: its word is the rarer
        assert told[-1][0] == 2
        assert told != bm25
        assert [item for item, _ in past] == [2, 3, 1]
        assert past[1][1] == past[2][1] == pytest.approx(-1e-6, rel=0.5)


async def test_a_phrase_or_a_word_not_given_is_counted_as_bm25_counts_it(tmp_path: Path) -> None:
    rng = random.Random(11)
    async with use_cases(tmp_path / "home") as runtime:
        texts = [*_sentences(rng, 40), "violin lesson on friday", "the violin lesson"]
        await runtime.services.history.append(_chat("a"), [said(text) for text in texts])
        token = scope_token(_chat("a"))
        index, weights = MESSAGE_WEIGHTS
        match = (
            f'{{content sender}} : ("violin lesson" OR "friday" OR "cello") AND scope : "{token}"'
        )

        def check(connection: Transaction) -> None:
            expected = _scored(connection, index, weights, "bm25", match)
            # Only friday's count is given: the phrase and cello are counted.
            given = fts5_scores.encoded(_word_counts(connection, "messages", "friday"))
            assert _counted(connection, index, weights, given, match) == expected
            assert _counted(connection, index, weights, "", match) == expected

        await runtime.readers.read(check)


async def test_an_owners_memory_rows_score_as_bm25_scores_them(tmp_path: Path) -> None:
    rng = random.Random(5)
    async with use_cases(tmp_path / "home") as runtime:
        owner = owner_key(agent_id="main", owner_id="ada")
        for number, value in enumerate(_sentences(rng, 40)):
            await runtime.services.memory.store(owner_note(owner, f"note_{number}", value))
        token = owner_scope_token(owner)
        index, weights = MEMORY_WEIGHTS

        def check(connection: Transaction) -> None:
            for query in ("violin", "cello OR friday OR note"):
                plan = plan_search(query)
                expression = plan.any_word_expression or plan.word_expression
                match = f'{{category key value}} : ({expression}) AND search_scope : "{token}"'
                given = fts5_scores.encoded(_word_counts(connection, "memories", query))
                expected = _scored(connection, index, weights, "bm25", match)
                assert expected, query
                assert _counted(connection, index, weights, given, match) == expected

        await runtime.readers.read(check)
