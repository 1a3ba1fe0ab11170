"""Real chat text and real vectors for the latency benchmarks: LoCoMo's turns, repeated to size.

Search costs what the text makes it cost: how many messages hold a question's words, how long
they are, how near their vectors are to the question's. Generated text with random vectors
measured a word search at 2.5 ms where real turns and real questions took 21 ms, and no random
vector ever reached the similarity floor. So these benchmarks load LoCoMo's 5,882 turns
(bench/datasets.py; read from the path given, never committed), in order, as many times as it
takes, ask LoCoMo's own questions, and give every message the vector the server's embedder
gives it: the embedded model, of the text the server embeds (memoryd.services.embedding
.message_text: the message, then the end of the one before). A repeated turn after the same
turn has the same vector, so each distinct pair is embedded once and written for every message
that has it, through memoryd's own storage functions (as the background embedder would have;
its cursor is then past every message). The vectors are kept in a cache file, so that a second
run embeds nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import datasets
import numpy as np

from memoryd.domain.search_query import MAX_QUERY_CHARS, MAX_QUERY_WORDS
from memoryd.domain.vectors import Floats, quantise, to_blob
from memoryd.services.embedded import memory_text, message_text
from memoryd.storage import vector_store
from memoryd.storage.sql import rows, write_transaction
from memoryd.storage.transaction import Transaction
from memoryd.storage.vector_store import CONTEXT_CHARS, MemoryText, MessageText

# Messages stored a call, as an adapter's backfill would.
PER_CALL = 100
# Vectors written a transaction.
WRITE_CHUNK = 5_000

T = TypeVar("T")


def asked(text: str) -> str:
    """A question as a query: its last MAX_QUERY_WORDS words, as ComposeContext's Recalled
    block asks the newest user message."""
    return " ".join(text.split()[-MAX_QUERY_WORDS:])[-MAX_QUERY_CHARS:]


@dataclasses.dataclass(frozen=True, slots=True)
class Corpus:
    """LoCoMo's turns (sender, text) in order, and its questions as typed."""

    turns: list[tuple[str, str]]
    questions: list[str]

    @classmethod
    def read(cls, path: Path) -> Corpus:
        """The turns and questions of LoCoMo's locomo10.json."""
        found = datasets.locomo(path)
        turns = [
            (turn.speaker, turn.text) for turns in found.conversations.values() for turn in turns
        ]
        questions = list(dict.fromkeys(question.text for question in found.questions))
        return cls(turns, questions)

    def texts(self, count: int, offset: int = 0) -> Iterator[tuple[str, str]]:
        """`count` turns in order from `offset`, starting again at the first after the last."""
        for place in range(offset, offset + count):
            yield self.turns[place % len(self.turns)]


class ChatTexts:
    """LoCoMo's turns dealt to many conversations: each goes on in LoCoMo's order from a start
    of its own, so that a turn follows the turn before it, as in a chat, and the texts the
    embedder makes of them (a turn, then the end of the one before) repeat across conversations:
    few enough to embed once (at most twice the turns)."""

    def __init__(self, corpus: Corpus, rng: random.Random) -> None:
        self._turns = corpus.turns
        self._rng = rng
        self._next: dict[int, int] = {}

    def next(self, conversation: int) -> tuple[str, str]:
        """The next turn (sender, text) of `conversation`."""
        at = self._next.get(conversation)
        if at is None:
            at = self._rng.randrange(len(self._turns))
        self._next[conversation] = at + 1
        return self._turns[at % len(self._turns)]

    def turn(self, place: int) -> tuple[str, str]:
        """LoCoMo's turn at `place` (from the first again after the last)."""
        return self._turns[place % len(self._turns)]


def embed_memories(connection: Transaction, cache: Path) -> dict[str, float]:
    """Give every memory row the embedded model's vector of what the server embeds for it
    (memoryd.services.embedded.memory_text), as embed_stored does for messages."""
    texts = {
        MemoryText(int(item), str(key), str(value)): memory_text(str(key), str(value))
        for item, key, value in rows(connection, "SELECT id, key, value FROM memories ORDER BY id")
    }
    began = time.perf_counter()
    vectors = _vectors(sorted(set(texts.values())), cache)
    embedded_seconds = time.perf_counter() - began
    _write(connection, texts, vectors, vector_store.store_memory_vectors)
    return {
        "memory_embedding_seconds": round(embedded_seconds, 1),
        "distinct_memory_texts": len(set(texts.values())),
    }


def embed_stored(connection: Transaction, cache: Path) -> dict[str, float]:
    """Give every message of the database (a connection outside any transaction, on either
    backend: bench/backends.py migrated()) the embedded model's vector of what the server embeds
    for it, through memoryd's own storage functions, as its background embedder would (the
    model's cursor past every message). Distinct texts are embedded once, and kept in `cache`
    (an .npz file) for the next run. Returns the seconds spent embedding and writing."""
    texts = _texts_embedded(connection)
    began = time.perf_counter()
    vectors = _vectors(sorted(set(texts.values())), cache)
    embedded_seconds = time.perf_counter() - began
    began = time.perf_counter()

    def store(
        transaction: Transaction, model_id: int, stored: list[tuple[int, float, bytes]]
    ) -> int:
        return vector_store.store_message_vectors(transaction, model_id, stored, stored[-1][0])

    _write(connection, texts, vectors, store)  # in the order of ids: the cursor follows
    return {
        "embedding_seconds": round(embedded_seconds, 1),
        "distinct_texts": len(set(texts.values())),
        "vector_write_seconds": round(time.perf_counter() - began, 1),
    }


def _write(
    connection: Transaction,
    texts: dict[T, str],
    vectors: dict[str, Floats],
    store: Callable[[Transaction, int, list[tuple[T, float, bytes]]], object],
) -> None:
    """Each item's vector (of its text), WRITE_CHUNK a transaction, in the items' order, through
    `store` (a vector_store function, given the embedded model's row)."""
    import memoryd_model_bge_small as embedded  # noqa: PLC0415

    items = list(texts)
    for start in range(0, len(items), WRITE_CHUNK):
        chunk = items[start : start + WRITE_CHUNK]
        stored = quantise(np.stack([vectors[texts[item]] for item in chunk]))
        with write_transaction(connection) as transaction:
            model = vector_store.model_row(
                transaction, "embedded", str(embedded.NAME), int(embedded.DIMENSION)
            )
            store(
                transaction,
                model.id,
                [
                    (item, float(stored.scales[row]), to_blob(stored.components[row]))
                    for row, item in enumerate(chunk)
                ],
            )


def _texts_embedded(connection: Transaction) -> dict[int, str]:
    """What the embedder would embed for each message (by id): memoryd's own rule."""
    found: dict[int, str] = {}
    previous: dict[tuple[object, ...], tuple[str, str]] = {}
    for row in rows(
        connection,
        "SELECT id, agent_id, owner_id, channel, chat_id, thread_scope, sender, content "
        "FROM messages ORDER BY id",
    ):
        item, *key, sender, content = row
        before = previous.get(tuple(key))
        found[int(item)] = message_text(
            MessageText(
                int(item),
                str(sender),
                str(content),
                None if before is None else before[0],
                None if before is None else before[1][-CONTEXT_CHARS:],
            )
        )
        previous[tuple(key)] = (str(sender), str(content))
    return found


def _vectors(texts: list[str], cache: Path) -> dict[str, Floats]:
    """Each text's vector by the embedded model, from `cache` where it holds it."""
    import asyncio  # noqa: PLC0415

    from memoryd.config.memory_settings import SearchSettings  # noqa: PLC0415
    from memoryd.llm.embeddings import EmbeddedModel, _model_package  # noqa: PLC0415

    known: dict[str, Floats] = {}
    if cache.exists():
        with np.load(cache) as stored:
            keys, vectors = stored["keys"], stored["vectors"]
        known = {str(key): vectors[row] for row, key in enumerate(keys)}
    wanted = [text for text in texts if _key(text) not in known]
    if wanted:
        model = EmbeddedModel(SearchSettings(), _model_package())
        found = asyncio.run(model.embed(wanted, queries=False))
        for text, vector in zip(wanted, found, strict=True):
            known[_key(text)] = vector
        cache.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(known)
        np.savez(cache, keys=np.array(keys), vectors=np.stack([known[key] for key in keys]))
    return {text: known[_key(text)] for text in texts}


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
