"""The RPCs of memoryd.v1.CompactionService: ComposeContext, Preflight, Compact,
GetCompactionState."""

from __future__ import annotations

from memoryd.api import compaction_convert as cc
from memoryd.api import convert
from memoryd.api.context import Context
from memoryd.services.compaction import Compactor
from memoryd.services.recalled_context import RecalledContext
from memoryd_client.v1 import compaction_service_pb2 as pb


class CompactionRpcs:
    """ComposeContext, Preflight, Compact, GetCompactionState."""

    def __init__(self, compactor: Compactor, recalled: RecalledContext) -> None:
        self._compactor = compactor
        self._recalled = recalled

    async def ComposeContext(
        self, request: pb.ComposeContextRequest, context: Context
    ) -> pb.ComposeContextResponse:
        key = convert.required_conversation(request)
        trust = convert.trust_in(request.trust)
        composed = await self._recalled.compose(
            key, trust, request.context_window, request.recall_tokens
        )
        return cc.context_out(key, composed)

    async def Preflight(
        self, request: pb.PreflightRequest, context: Context
    ) -> pb.PreflightResponse:
        key = convert.required_conversation(request)
        return cc.preflight_out(await self._compactor.preflight(key, request.context_window))

    async def Compact(self, request: pb.CompactRequest, context: Context) -> pb.CompactResponse:
        key = convert.required_conversation(request)
        trust = convert.trust_in(request.trust)
        return cc.compact_out(await self._compactor.compact(key, trust, request.context_window))

    async def GetCompactionState(
        self, request: pb.GetCompactionStateRequest, context: Context
    ) -> pb.GetCompactionStateResponse:
        key = convert.required_conversation(request)
        return cc.state_out(key, await self._compactor.state(key))
