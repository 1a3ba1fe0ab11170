"""The RPCs of memoryd.v2.ContextService: GetPromptContext, ComposeContext, Preflight,
Compact, GetCompactionState."""

from __future__ import annotations

from memoryd.api import compaction_convert as cc
from memoryd.api import convert
from memoryd.api.context import Context
from memoryd.domain.conversation import owner_key
from memoryd.domain.prompt_files import MEMORY_MD, USER_MD, PromptFile, context_block
from memoryd.services.prompt_state import FileState
from memoryd.services.use_cases import Services
from memoryd_client.v2 import context_service_pb2 as context_pb
from memoryd_client.v2 import context_service_pb2_grpc as context_grpc


class ContextServicer(context_grpc.ContextServiceServicer):
    """memoryd.v2.ContextService."""

    def __init__(self, services: Services) -> None:
        self._compactor = services.compactor
        self._prompts = services.prompts
        self._recalled = services.recalled
        self._answers = cc.ContextAnswers()

    async def GetPromptContext(
        self, request: context_pb.GetPromptContextRequest, context: Context
    ) -> context_pb.GetPromptContextResponse:
        owner = owner_key(agent_id=request.agent_id, owner_id=request.owner_id, field="request")
        state = await self._prompts.context_for(owner, convert.trust_in(request.trust))
        response = context_pb.GetPromptContextResponse()
        if state is None:
            response.withheld = True
            _fill_usage(response.user_usage, USER_MD, None)
            _fill_usage(response.memory_usage, MEMORY_MD, None)
            return response
        response.user_md = state.user_md.text
        response.memory_md = state.memory_md.text
        response.context_block = context_block(state.user_md.text, state.memory_md.text)
        _fill_usage(response.user_usage, USER_MD, state.user_md)
        _fill_usage(response.memory_usage, MEMORY_MD, state.memory_md)
        return response

    async def ComposeContext(
        self, request: context_pb.ComposeContextRequest, context: Context
    ) -> context_pb.ComposeContextResponse:
        key = convert.required_conversation(request)
        trust = convert.trust_in(request.trust)
        composed = await self._recalled.compose(
            key, trust, request.context_window, request.recall_tokens
        )
        return self._answers.answer(key, composed)

    async def Preflight(
        self, request: context_pb.PreflightRequest, context: Context
    ) -> context_pb.PreflightResponse:
        key = convert.required_conversation(request)
        return cc.preflight_out(await self._compactor.preflight(key, request.context_window))

    async def Compact(
        self, request: context_pb.CompactRequest, context: Context
    ) -> context_pb.CompactResponse:
        key = convert.required_conversation(request)
        trust = convert.trust_in(request.trust)
        return cc.compact_out(await self._compactor.compact(key, trust, request.context_window))

    async def GetCompactionState(
        self, request: context_pb.GetCompactionStateRequest, context: Context
    ) -> context_pb.GetCompactionStateResponse:
        key = convert.required_conversation(request)
        return cc.state_out(key, await self._compactor.state(key))


def _fill_usage(
    target: context_pb.PromptFileUsage, file: PromptFile, state: FileState | None
) -> None:
    target.max_chars = file.max_chars
    target.max_tokens = file.max_tokens
    if state is not None:
        target.used_chars = len(state.text)
        target.used_tokens = state.tokens
        target.revision = state.revision
