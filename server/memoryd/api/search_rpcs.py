"""SearchHistory, GetEmbeddingStatus and ReindexEmbeddings: handlers that translate and delegate."""

from __future__ import annotations

from memoryd.api import convert
from memoryd.api.context import Context
from memoryd.api.enum_tables import SEARCH_MODE
from memoryd.api.history_convert import fill_hit, search_scope_in
from memoryd.domain.answers import fitting, hit_bytes
from memoryd.services.embedding import EmbeddingService
from memoryd.services.search import HistorySearch
from memoryd_client.v1 import memory_service_pb2 as service_pb


class SearchRpcs:
    """SearchHistory, GetEmbeddingStatus, ReindexEmbeddings."""

    def __init__(self, search: HistorySearch, embedding: EmbeddingService) -> None:
        self._search = search
        self._embedding = embedding

    async def SearchHistory(
        self, request: service_pb.SearchHistoryRequest, context: Context
    ) -> service_pb.SearchHistoryResponse:
        scope = search_scope_in(request)
        found = await self._search.search(
            scope,
            request.query,
            kinds=list(request.kinds),
            requested_limit=request.limit,
            trust=convert.trust_in(request.trust),
            mode=SEARCH_MODE.value(request.mode, "mode"),
        )
        fit = fitting(found.hits, hit_bytes)
        response = service_pb.SearchHistoryResponse(
            truncated=fit < len(found.hits),
            below_floor=found.below_floor,
            unembedded=found.unembedded,
        )
        for hit in found.hits[:fit]:
            fill_hit(response.hits.add(), hit)
        return response

    async def GetEmbeddingStatus(
        self, request: service_pb.GetEmbeddingStatusRequest, context: Context
    ) -> service_pb.GetEmbeddingStatusResponse:
        status = await self._embedding.status()
        response = service_pb.GetEmbeddingStatusResponse(
            enabled=status.enabled,
            provider=status.provider,
            model=status.model,
            dimension=status.dimension,
            last_error=status.last_error,
        )
        if status.counts is not None:
            response.embedded_messages = status.counts.embedded_messages
            response.embedded_memories = status.counts.embedded_memories
            response.pending_messages = status.counts.pending_messages
            response.pending_memories = status.counts.pending_memories
            response.live_messages = status.counts.live_messages
            response.other_model_vectors = status.counts.other_model_vectors
        return response

    async def ReindexEmbeddings(
        self, request: service_pb.ReindexEmbeddingsRequest, context: Context
    ) -> service_pb.ReindexEmbeddingsResponse:
        messages, memories = await self._embedding.reindex()
        return service_pb.ReindexEmbeddingsResponse(
            queued_messages=messages, queued_memories=memories
        )
