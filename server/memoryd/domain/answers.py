"""How large an answer may grow: never past what every gRPC client accepts by default (4 MiB).

Lists are cut by an upper bound of each item's size on the wire: the UTF-8 bytes of its strings
plus a fixed allowance for field tags, lengths, numbers, enums and timestamps. A listing with
pages hands out a token where the bytes ran out; a list without pages (search hits) says it was
truncated. The api layer checks every answer once more against MAX_ANSWER_BYTES (memoryd.api.
status), so an estimate that ever fell short would be a precise RESOURCE_EXHAUSTED, never an
answer the client cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from memoryd.domain.history import SearchHit
from memoryd.domain.memories import MemoryRecord
from memoryd.domain.memory_queries import SourceRow
from memoryd.domain.messages import StoredMessage
from memoryd.domain.resources import ResourceInfo, Revision

T = TypeVar("T")
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # grpc.max_receive_message_length's default, in every client
# Lists fill at most this much, leaving room for the answer's own fields (tokens, flags).
LIST_BUDGET_BYTES = MAX_ANSWER_BYTES - 64 * 1024
# Tags, lengths, ids, enums, timestamps and nesting of one item: about 60 bytes for a message
# (measured with ByteSize), doubled for a safe bound.
_MESSAGE_FRAMING = 128
_MEMORY_FRAMING = 256
_HIT_FRAMING = 32


def text_bytes(*texts: str | None) -> int:
    """The UTF-8 size of some strings."""
    return sum(len(text) if text.isascii() else len(text.encode("utf-8")) for text in texts if text)


def message_bytes(message: StoredMessage) -> int:
    """An upper bound of a Message on the wire."""
    key = message.key
    return _MESSAGE_FRAMING + text_bytes(
        message.content,
        message.metadata_json,
        message.sender,
        message.kind,
        message.client_message_id,
        key.agent_id,
        key.owner_id,
        key.channel,
        key.chat_id,
        key.thread_scope,
    )


def hit_bytes(hit: SearchHit) -> int:
    """An upper bound of a HistoryHit on the wire."""
    return _HIT_FRAMING + message_bytes(hit.message) + text_bytes(hit.snippet)


def memory_bytes(record: MemoryRecord) -> int:
    """An upper bound of a Memory on the wire (value included, as without a preview)."""
    source = record.provenance
    return _MEMORY_FRAMING + text_bytes(
        record.agent_id,
        record.owner_id,
        record.scope_id,
        record.key,
        record.value,
        record.metadata_json,
        source.source_id,
        source.source_type,
        source.source_name,
        source.source_description,
        source.session_id,
        source.run_id,
        source.details_json,
        record.archived_by,
        record.archive_reason,
    )


def source_bytes(source: SourceRow) -> int:
    """An upper bound of a MemorySource on the wire."""
    info = source.info
    return _HIT_FRAMING * 2 + text_bytes(
        info.id, info.source_type, info.name, info.description, info.memory_scope, source.status
    )


def resource_bytes(resource: ResourceInfo) -> int:
    """An upper bound of a Resource on the wire."""
    return _HIT_FRAMING * 2 + text_bytes(
        resource.key.agent_id, resource.key.scope_id, resource.path
    )


def revision_bytes(revision: Revision) -> int:
    """An upper bound of a ResourceRevision on the wire, without its content."""
    return _MEMORY_FRAMING + text_bytes(
        revision.key.agent_id,
        revision.key.scope_id,
        revision.content_hash,
        revision.mutation_source,
        revision.provenance_json,
    )


def page_of(found: Sequence[T], size: int, item_bytes: Callable[[T], int]) -> tuple[list[T], bool]:
    """A page of a listing read with one item more than `size`: at most `size` items and
    LIST_BUDGET_BYTES, and whether items are left for the next page."""
    kept = list(found[: fitting(found[:size], item_bytes)])
    return kept, len(found) > len(kept)


def fitting(items: Sequence[T], size: Callable[[T], int], budget: int = LIST_BUDGET_BYTES) -> int:
    """How many leading items fit in `budget`; at least one, so a list always moves on."""
    used = 0
    for count, item in enumerate(items):
        used += size(item)
        if used > budget:
            return max(count, 1)
    return len(items)
