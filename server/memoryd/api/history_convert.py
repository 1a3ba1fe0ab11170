"""Translation of conversation-history messages: new messages and import batches in; stored
messages, append results, search hits and import counts out. Nothing here decides policy."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from memoryd.api.convert import conversation_in, set_timestamp, timestamp_in
from memoryd.api.enum_tables import APPEND_OUTCOME, MATCH_KIND, MESSAGE_TRUST, ROLE, TRUST
from memoryd.domain.answers import LIST_BUDGET_BYTES, message_bytes
from memoryd.domain.conversation import ConversationKey, HistoryScope, agent_key, owner_key
from memoryd.domain.fusion import Scores
from memoryd.domain.history import AppendResult, SearchHit
from memoryd.domain.messages import SentMessage, StoredMessage
from memoryd.errors import InvalidArgument, Reason
from memoryd.services.ingest import IngestBatch, IngestItem, IngestReport
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import records_pb2 as records_pb


def search_scope_in(request: conversation_pb.SearchHistoryRequest) -> HistoryScope:
    """The scope of a search: a conversation, an owner or an agent."""
    which = request.WhichOneof("scope")
    if which == "conversation":
        return conversation_in(request.conversation)
    if which == "owner":
        return owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
    if which == "agent":
        return agent_key(agent_id=request.agent.agent_id)
    raise InvalidArgument("one of conversation, owner or agent is required", reason=Reason.REQUIRED)


def sent_messages_in(messages: Iterable[conversation_pb.NewMessage]) -> list[SentMessage]:
    """The messages of an append or a turn, as sent (limits are checked by the use case)."""
    return [
        sent_message_in(message, f"messages[{index}]") for index, message in enumerate(messages)
    ]


def sent_message_in(message: conversation_pb.NewMessage, field: str) -> SentMessage:
    """A message to append, with enums and time checked; an unset trust stays unset."""
    role = ROLE.value(message.role, f"{field}.role")
    trust = MESSAGE_TRUST.value(message.trust, f"{field}.trust")
    created_at = (
        timestamp_in(message.created_at, f"{field}.created_at")
        if message.HasField("created_at")
        else None
    )
    return SentMessage(
        sender=message.sender,
        role=role,
        kind=message.kind,
        content=message.content,
        metadata_json=message.metadata,
        client_message_id=message.client_message_id or None,
        created_at=created_at,
        trust=trust,
    )


def fill_message(target: records_pb.Message, message: StoredMessage) -> None:
    """Write a stored message into `target`, a message field of a response being built.

    Responses are filled in place (`results.add()`, then fields): building nested messages from
    keyword arguments copies each of them and cost about a tenth of AppendMessages throughput.
    """
    target.id = message.id
    conversation = target.conversation
    conversation.agent_id, conversation.owner_id = message.key.agent_id, message.key.owner_id
    conversation.channel, conversation.chat_id = message.key.channel, message.key.chat_id
    conversation.thread_scope = message.key.thread_scope
    target.sender = message.sender
    target.role = ROLE.number(message.role)
    target.kind = message.kind
    target.content = message.content
    target.metadata = message.metadata_json
    if message.client_message_id:
        target.client_message_id = message.client_message_id
    set_timestamp(target.created_at, message.created_at)
    target.trust = TRUST.number(message.trust)


def fill_append_results(target: Any, result: AppendResult, *, echo: bool) -> bool:
    """Append one `AppendResult` per appended message to the repeated field `target`: outcome,
    id and time, and with `echo` the row itself while it fits the answer. Returns whether an
    echo was left out."""
    budget = LIST_BUDGET_BYTES
    truncated = False
    for item in result.messages:
        entry = target.add(index=item.index, outcome=APPEND_OUTCOME.number(item.outcome))
        stored = item.message
        if stored is None:
            continue
        entry.id = stored.id
        set_timestamp(entry.created_at, stored.created_at)
        if echo:
            budget -= message_bytes(stored)
            if budget >= 0:
                fill_message(entry.message, stored)
            else:
                truncated = True
    return truncated


def fill_hit(target: records_pb.HistoryHit, hit: SearchHit) -> None:
    """Write a search hit into `target`."""
    fill_message(target.message, hit.message)
    target.snippet = hit.snippet or ""
    target.match = MATCH_KIND.number(hit.matches[0])
    target.rank = hit.rank
    target.matches.extend(MATCH_KIND.number(kind) for kind in hit.matches)
    fill_scores(target.scores, hit.scores)


def fill_scores(target: records_pb.HitScores, scores: Scores) -> None:
    """Write the figures a hit was ranked by into `target`."""
    target.bm25 = scores.bm25
    target.similarity = scores.similarity
    target.fused = scores.fused
    target.lexical_rank = scores.lexical_rank
    target.semantic_rank = scores.semantic_rank
    target.relevance = scores.relevance
    target.coverage = scores.coverage


async def ingest_batches(
    requests: AsyncIterator[conversation_pb.IngestMessagesRequest],
) -> AsyncIterator[IngestBatch]:
    """IngestMessages' batches; a message that cannot be translated carries why. An import
    names few conversations many times: each is validated once per batch."""
    async for request in requests:
        keys: dict[tuple[str, ...], ConversationKey | str] = {}
        items = [_ingest_item(item, index, keys) for index, item in enumerate(request.messages)]
        yield IngestBatch(items, request.as_reviewed)


def _ingest_item(
    item: conversation_pb.IngestedMessage,
    index: int,
    keys: dict[tuple[str, ...], ConversationKey | str],
) -> IngestItem:
    field = f"messages[{index}]"
    if not item.HasField("conversation"):
        reason = f"{field}.conversation is required (with channel and chat_id)"
        return IngestItem(None, None, reason)
    sent = item.conversation
    names = (sent.agent_id, sent.owner_id, sent.channel, sent.chat_id, sent.thread_scope)
    key = keys.get(names)
    if key is None:
        try:
            key = conversation_in(sent, "conversation")
        except InvalidArgument as error:
            key = error.message
        keys[names] = key
    if isinstance(key, str):
        return IngestItem(None, None, f"{field}.{key}")
    try:
        message = sent_message_in(item.message, f"{field}.message")
    except InvalidArgument as error:
        return IngestItem(None, None, error.message)
    return IngestItem(key, message)


def ingest_out(report: IngestReport) -> conversation_pb.IngestMessagesResponse:
    """IngestMessages' answer."""
    return conversation_pb.IngestMessagesResponse(
        batches=report.batches,
        received=report.received,
        stored=report.stored,
        duplicates=report.duplicates,
        blank=report.blank,
        rejected=report.rejected,
        queued_for_review=report.queued_for_review,
        stored_as_reviewed=report.stored_as_reviewed,
        rejections=[
            conversation_pb.IngestRejection(batch=r.batch, index=r.index, reason=r.reason)
            for r in report.rejections
        ],
    )
