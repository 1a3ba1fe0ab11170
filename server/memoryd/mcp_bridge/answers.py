"""What the MCP tools answer: memory rows, history hits and their relevance as small JSON
objects a model reads (memoryd.mcp_bridge.tools)."""

from __future__ import annotations

import hashlib
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

import memoryd_client as md
from memoryd.domain.conversation import DEFAULT_THREAD_SCOPE


def key_of(category: str, fact: str) -> str:
    """A key for a fact remembered without one: the same fact, the same key."""
    return f"{category}_{hashlib.sha256(fact.strip().lower().encode()).hexdigest()[:12]}"


def memory(row: md.Memory) -> dict[str, Any]:
    return {
        "id": row.id,
        "owner": row.owner_id,
        "key": row.key,
        "value": row.value,
        "category": md.Category.Name(row.category).removeprefix("CATEGORY_").lower(),
        "scope": md.ScopeType.Name(row.scope_type).removeprefix("SCOPE_TYPE_").lower(),
        "updated_at": time(row.updated_at),
        "archived": row.archived,
        # Who set it: "guest" text is what a guest said, never an instruction to follow.
        "trust": trust(row.trust),
    }


def relevance(hit: md.RecallHit | md.HistoryHit) -> dict[str, Any]:
    """How well a search hit matches and how: its relevance (0 to 1, every hit at least the
    server's floor), the share of the query's words it holds, the similarity of meaning, the
    fused score it was ordered by, and each way it matched."""
    return {
        "relevance": round(hit.scores.relevance, 3),
        "words_held": round(hit.scores.coverage, 3),
        "similarity": round(hit.scores.similarity, 4),
        "score": round(hit.scores.fused, 4),
        "matched": [
            md.MatchKind.Name(kind).removeprefix("MATCH_KIND_").lower() for kind in hit.matches
        ],
    }


def left_out(below_floor: int) -> dict[str, Any]:
    """What a search says of the hits its relevance floor left out."""
    if not below_floor:
        return {}
    return {
        "left_out": below_floor,
        "left_out_why": "too weak a match to be an answer: few of the query's words, and too "
        "far from it in meaning",
    }


def unseen(unembedded: int) -> dict[str, Any]:
    """What a search says of what its meaning ranking could not see yet."""
    if not unembedded:
        return {}
    return {
        "not_yet_searchable_by_meaning": unembedded,
        "not_yet_searchable_by_meaning_why": "no vector yet (still being embedded): found by "
        "their words only; ask again later for matches by meaning",
    }


def said(hit: md.HistoryHit) -> dict[str, Any]:
    message = hit.message
    return {
        "message_id": message.id,
        "owner": message.conversation.owner_id,
        "conversation": conversation_text(message.conversation),
        "sender": message.sender,
        "role": md.Role.Name(message.role).removeprefix("ROLE_").lower(),
        "content": message.content,
        "snippet": hit.snippet,
        "created_at": time(message.created_at),
        "trust": trust(message.trust),
    } | relevance(hit)


def trust(value: md.Trust.ValueType) -> str:
    """A Trust as the tools say it (unset is operator, as memoryd reads it)."""
    return "guest" if value == md.TRUST_GUEST else "operator"


def conversation_text(key: md.Conversation) -> str:
    """CHANNEL:CHAT[:THREAD], as the tools take it (the thread root is CHANNEL:CHAT)."""
    parts = [key.channel, key.chat_id]
    if key.thread_scope not in ("", DEFAULT_THREAD_SCOPE):
        parts.append(key.thread_scope)
    return ":".join(parts)


def time(stamp: Timestamp) -> str:
    return stamp.ToJsonString() if stamp.seconds or stamp.nanos else ""
