"""What is embedded, each embedding call, and what is reported of it: a message's text (with the
end of the message before it) and a memory row's, the provider's call (counted in the metrics
and traced), and GetEmbeddingStatus's answer, read."""

from __future__ import annotations

import dataclasses
import time

from memoryd.domain.vectors import Floats
from memoryd.llm.embeddings import Embedder
from memoryd.observability import metrics, tracing
from memoryd.storage import vector_reads
from memoryd.storage import vector_store as store
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction


def message_text(message: store.MessageText) -> str:
    """What a message's vector is made of: who said it and what, then the end of the message
    before it, which is what an answer is about ("A sunset" after "What did you paint?"). On
    LoCoMo's conversations 1-5, recall@10 of the meaning alone: 57 without the context, 58 with
    it first, 62 with it after the message; fused, 73 without it and 75 with it."""
    said = _said(message.sender, message.content)
    if message.previous_content is None:
        return said
    return f"{said}\n{_said(message.previous_sender or '', message.previous_content)}"


def _said(sender: str, content: str) -> str:
    return f"{sender}: {content}" if sender.strip() else content


def memory_text(key: str, value: str) -> str:
    """What a memory row's vector is made of: its key in words, and its value."""
    return f"{key.replace('_', ' ')}: {value}"


async def embed(embedder: Embedder, texts: list[str], kind: str) -> Floats:
    """`texts`' vectors (a query's, or stored texts' of `kind`), counted in the metrics and
    with tracing on an `embeddings` span."""
    attributes = {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": embedder.provider,
        "gen_ai.request.model": embedder.model,
        "memoryd.embedding.kind": kind,
        "memoryd.embedding.texts": len(texts),
    }
    with tracing.span(f"embeddings {embedder.model}", attributes):
        started = time.perf_counter()
        found = await embedder.embed(texts, queries=kind == "query")
    metrics.EMBEDDING_SECONDS.labels(kind).observe(time.perf_counter() - started)
    metrics.EMBEDDED.labels(kind).inc(len(texts))
    return found


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingStatus:
    """What GetEmbeddingStatus answers."""

    enabled: bool
    provider: str
    model: str
    dimension: int
    counts: vector_reads.VectorCounts | None
    last_error: str


async def status(
    embedder: Embedder | None, readers: ReaderPool, last_error: str
) -> EmbeddingStatus:
    """GetEmbeddingStatus's answer: the provider, the model, and how much is embedded and
    waiting (read now), with the embedder's last failure."""
    if embedder is None:
        return EmbeddingStatus(
            enabled=False, provider="", model="", dimension=0, counts=None, last_error=""
        )

    def read(
        connection: Transaction,
    ) -> tuple[store.EmbeddingModel | None, vector_reads.VectorCounts]:
        model = store.find_model(connection, embedder.provider, embedder.model)
        return model, vector_reads.counts(connection, model)

    model, counts = await readers.read(read)
    return EmbeddingStatus(
        enabled=True,
        provider=embedder.provider,
        model=embedder.model,
        dimension=0 if model is None else model.dimension,
        counts=counts,
        last_error=last_error,
    )
