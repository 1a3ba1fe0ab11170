"""Embedding providers: text to L2-normalised vectors, on this machine or at an endpoint.

- `EmbeddedModel`: bge-small-en-v1.5 (int8 ONNX, 384 dimensions) from the memoryd-model-bge-small
  package, run with onnxruntime (the background embedder's batches at the lowest CPU priority);
  loaded on first use, never downloaded.
- `EndpointEmbedder`: any OpenAI-compatible `/embeddings` endpoint (OpenAI, Ollama, vLLM,
  text-embeddings-inference) of a configured provider, with its key from the environment.

Both answer `embed(texts, queries=...)` with one row a text. A provider that fails raises
`EmbeddingUnavailableError` with a reason fit for a log line.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from memoryd.config import ProviderSettings, SearchSettings, Settings, embedding_provider
from memoryd.domain.relevance import CALIBRATION, Calibration
from memoryd.domain.vectors import Floats, normalised
from memoryd.errors import StartupError
from memoryd.llm.wordpiece import WordPiece

MODEL_PACKAGE = "memoryd_model_bge_small"
# Inputs longer than this many tokens are cut: chat messages rarely are, and the cost of a call
# grows with its longest input.
MAX_TOKENS = 256
# Whether search queries get BAAI's retrieval instruction in front. On LoCoMo 1-5 it adds 0.6
# to recall@10 and 2.5 ms to every query's embedding (9.2 against 6.8 ms): left out.
USE_QUERY_INSTRUCTION = False
# One text a model call. The int8 model quantizes its activations with one scale for the whole
# call, so a text batched with others got a vector that depended on them (up to 0.025 of
# similarity, which moved answers across the floor below). One at a time, a text's vector is a
# function of the text alone, wherever and whenever it is embedded; it costs the background
# embedder about a sixth of its throughput (56 texts/s against 67 in batches of 8, context
# texts of the retrieval fixture, one thread, median of 4 interleaved rounds).
# How the embedded model's similarities are judged (memoryd.domain.relevance): fitted for
# bge-small on LoCoMo's conversations 1-5 and half of our own questions about nothing held.
EMBEDDED_CALIBRATION = CALIBRATION


class EmbeddingUnavailableError(Exception):
    """The provider could not embed; the message says why."""


class Embedder(Protocol):
    """Text to vectors."""

    @property
    def provider(self) -> str:
        """ "embedded", or the provider entry's name."""

    @property
    def model(self) -> str:
        """The model's name, stored with each vector."""

    @property
    def calibration(self) -> Calibration | None:
        """How this model's similarities are judged, as measured for it (None: not known)."""

    async def embed(self, texts: Sequence[str], *, queries: bool) -> Floats:
        """One L2-normalised row a text; `queries` when the texts are search queries."""

    async def close(self) -> None:
        """Release what the provider holds."""


def build_embedder(settings: Settings, env: Mapping[str, str]) -> Embedder | None:
    """The configured provider, or None when embeddings are off."""
    search = settings.search
    if search.embeddings == "off":
        return None
    if search.embeddings == "embedded":
        return EmbeddedModel(search, _model_package())
    provider = embedding_provider(settings)
    if provider is None:  # load_settings checked it; a hand-built Settings may not have
        raise StartupError('memoryd.search.embeddings = "provider" names no configured provider')
    return EndpointEmbedder(provider, search.embedding_model, env)


def _model_package() -> ModuleType:
    try:
        package = importlib.import_module(MODEL_PACKAGE)
    except ImportError as error:
        raise StartupError(
            'memoryd.search.embeddings = "embedded" needs the memoryd-model-bge-small package '
            '(`make install` builds and installs it); or set embeddings to "provider" or '
            f'"off" ({error})'
        ) from error
    for path in (package.MODEL, package.VOCABULARY):
        if not path.is_file():
            raise StartupError(
                f"the embedded model's file {path} is missing; reinstall memoryd-model-bge-small"
            )
    return package


class EmbeddedModel:
    """bge-small-en-v1.5 on onnxruntime; see the module docstring.

    Each model call runs on one thread (onnxruntime's own pool is off). A search's query embeds
    on a thread of its own at normal priority: one short text gains nothing from a second core
    (measured 3.9 ms on one thread against 4.4 on two). The background embedder's batches are
    spread over `embedding_threads` threads at the lowest CPU priority, so that they use what
    the calls leave: on a busy machine appends and searches are answered first and the vectors
    catch up when it is quieter (measured under 32 appending callers on 2 workers: 1,292
    appends/s against 1,111 when the embedder ran at normal priority).
    """

    def __init__(self, settings: SearchSettings, package: ModuleType) -> None:
        self._package = package
        self._session: Any = None
        self._tokenizer: WordPiece | None = None
        self._loading = threading.Lock()
        # Two threads: one search's query need not wait for another's.
        self._queries = concurrent.futures.ThreadPoolExecutor(
            2, thread_name_prefix="memoryd-embed-query"
        )
        self._background = concurrent.futures.ThreadPoolExecutor(
            settings.embedding_threads,
            thread_name_prefix="memoryd-embed",
            initializer=lowest_cpu_priority,
        )

    @property
    def provider(self) -> str:
        return "embedded"

    @property
    def model(self) -> str:
        return str(self._package.NAME)

    @property
    def calibration(self) -> Calibration | None:
        return EMBEDDED_CALIBRATION

    async def embed(self, texts: Sequence[str], *, queries: bool) -> Floats:
        loop = asyncio.get_running_loop()
        if queries:
            return await loop.run_in_executor(self._queries, self._embed_here, list(texts), queries)
        if self._session is None:
            # Loaded at normal priority: threads that loading starts inherit the loader's.
            await loop.run_in_executor(self._queries, self._loaded)
        encoded = await loop.run_in_executor(self._background, self._encode, list(texts), queries)
        found = await asyncio.gather(
            *(loop.run_in_executor(self._background, self._run, ids) for ids in encoded)
        )
        return self._stacked(found)

    def _embed_here(self, texts: list[str], queries: bool) -> Floats:  # noqa: FBT001
        """The vectors, computed on the calling thread."""
        return self._stacked([self._run(ids) for ids in self._encode(texts, queries)])

    def _stacked(self, rows: list[Floats]) -> Floats:
        if not rows:
            return np.zeros((0, int(self._package.DIMENSION)), dtype=np.float32)
        return normalised(np.stack(rows))

    def _encode(self, texts: list[str], queries: bool) -> list[list[int]]:  # noqa: FBT001
        _, tokenizer = self._loaded()
        prefix = str(self._package.QUERY_INSTRUCTION) if queries and USE_QUERY_INSTRUCTION else ""
        return [tokenizer.encode(prefix + text, MAX_TOKENS) for text in texts]

    def _run(self, text_ids: list[int]) -> Floats:
        """One model call for one text (see "One text a model call" above): its [CLS] state,
        not normalised."""
        session, _ = self._loaded()
        ids = np.array([text_ids], dtype=np.int64)
        hidden = session.run(
            None,
            {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            },
        )[0]
        row: Floats = hidden[0, 0, :]  # the [CLS] token's state
        return row

    def _loaded(self) -> tuple[Any, WordPiece]:
        with self._loading:
            if self._session is None or self._tokenizer is None:
                import onnxruntime  # noqa: PLC0415 - 0.2 s and 60 MB, paid only when used

                options = onnxruntime.SessionOptions()
                # The calling thread only: calls run side by side instead (see the class).
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                options.log_severity_level = 3
                self._session = onnxruntime.InferenceSession(
                    str(self._package.MODEL), options, providers=["CPUExecutionProvider"]
                )
                self._tokenizer = WordPiece.from_file(self._package.VOCABULARY)
            return self._session, self._tokenizer

    async def close(self) -> None:
        self._queries.shutdown(wait=True)
        self._background.shutdown(wait=True)


def lowest_cpu_priority() -> None:
    """Run the calling thread only on CPU time that others leave (Linux: the thread's nice 19).

    Elsewhere setpriority would lower the whole process, so it is left as it is.
    """
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class EndpointEmbedder:
    """An OpenAI-compatible /embeddings endpoint."""

    def __init__(self, settings: ProviderSettings, model: str, env: Mapping[str, str]) -> None:
        import openai  # noqa: PLC0415 - only servers that use an endpoint pay for it

        self._settings = settings
        self._model = model
        self._openai = openai
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url,
            api_key=env.get(settings.api_key_env, "") if settings.api_key_env else "none",
            timeout=settings.timeout_seconds,
            max_retries=0,
        )

    @property
    def provider(self) -> str:
        return self._settings.name

    @property
    def model(self) -> str:
        return self._model

    @property
    def calibration(self) -> Calibration | None:
        return None  # another model's similarities: never measured here

    async def embed(self, texts: Sequence[str], *, queries: bool) -> Floats:  # noqa: ARG002
        try:
            answer = await self._client.embeddings.create(
                model=self._model, input=list(texts), encoding_format="float"
            )
        except self._openai.APIError as error:
            raise EmbeddingUnavailableError(
                f"provider {self._settings.name!r} ({self._settings.base_url}) could not embed: "
                f"{type(error).__name__}: {error}"
            ) from error
        rows = sorted(answer.data, key=lambda item: item.index)
        if len(rows) != len(texts) or not rows:
            raise EmbeddingUnavailableError(
                f"provider {self._settings.name!r} answered {len(rows)} vectors for "
                f"{len(texts)} texts"
            )
        widths = {len(row.embedding) for row in rows}
        if len(widths) != 1 or 0 in widths:
            raise EmbeddingUnavailableError(
                f"provider {self._settings.name!r} answered vectors of dimensions {sorted(widths)}"
            )
        return normalised(np.asarray([row.embedding for row in rows], dtype=np.float32))

    async def close(self) -> None:
        await self._client.close()
