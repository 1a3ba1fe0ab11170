"""What an operator's overview reads (GetServerInfo, ListOwners): agents and owners with their
counts, and what the background did lately.

Every read here is an indexed count or a scan of a table with one row per conversation (or per
owner's memory row); none reads the messages' table beyond single rows by id, so the overview
costs the same at a million messages as at ten.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.messages import StoredMessage
from memoryd.domain.timestamps import from_text, to_text
from memoryd.storage.message_rows import MESSAGE_COLUMNS, message_from_row
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction


@dataclasses.dataclass(frozen=True, slots=True)
class AgentCount:
    """One agent: its owners (with a conversation) and conversations."""

    agent_id: str
    owners: int
    conversations: int


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerCount:
    """One owner of an agent: conversations, memory rows in use and archived, and when its
    latest conversation began (None: it has none, only memory rows)."""

    owner_id: str
    conversations: int
    active_memories: int
    archived_memories: int
    latest_conversation_at: dt.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class Activity:
    """What the background did since `since`: conversations with a failed review, and
    conversations compacted; and the conversations whose reviews failed last, newest first."""

    review_failures: int
    compacted: int
    failing: list[ConversationKey]


# The agents of each table, one index probe per agent (a loose index scan): the tables' indexes
# lead with agent_id, and a scan of every memory row would grow with them.
_DISTINCT_AGENTS = " UNION ".join(
    f"SELECT * FROM (WITH RECURSIVE found(agent_id) AS (SELECT min(agent_id) FROM {table} "
    f"UNION ALL SELECT (SELECT min(t.agent_id) FROM {table} AS t WHERE t.agent_id > "
    "found.agent_id) FROM found WHERE found.agent_id IS NOT NULL) "
    "SELECT agent_id FROM found WHERE agent_id IS NOT NULL) AS " + table[:1]
    for table in ("conversations", "memories")
)


def agents(connection: Transaction, limit: int) -> list[AgentCount]:
    """The agents with a conversation or a memory row, by id."""
    found = rows(
        connection,
        "SELECT a.agent_id, "
        "(SELECT count(DISTINCT c.owner_id) FROM conversations AS c WHERE c.agent_id = a.agent_id),"
        " (SELECT count(*) FROM conversations AS c WHERE c.agent_id = a.agent_id) "
        f"FROM ({_DISTINCT_AGENTS}) AS a ORDER BY a.agent_id LIMIT ?",
        (limit,),
    )
    return [AgentCount(str(agent), int(owners), int(count)) for agent, owners, count in found]


def owners(connection: Transaction, agent_id: str, after: str, limit: int) -> list[OwnerCount]:
    """The agent's owners (with a conversation or a memory row) after `after`, by id."""
    found = rows(
        connection,
        "SELECT o.owner_id, "
        "(SELECT count(*) FROM conversations AS c "
        " WHERE c.agent_id = ? AND c.owner_id = o.owner_id), "
        "(SELECT max(c.created_at) FROM conversations AS c "
        " WHERE c.agent_id = ? AND c.owner_id = o.owner_id), "
        "(SELECT count(*) FROM memories AS m "
        " WHERE m.agent_id = ? AND m.owner_id = o.owner_id AND m.archived_at IS NULL), "
        "(SELECT count(*) FROM memories AS m "
        " WHERE m.agent_id = ? AND m.owner_id = o.owner_id AND m.archived_at IS NOT NULL) "
        "FROM (SELECT owner_id FROM conversations WHERE agent_id = ? AND owner_id > ? "
        "      UNION SELECT owner_id FROM memories WHERE agent_id = ? AND owner_id > ?) AS o "
        "ORDER BY o.owner_id LIMIT ?",
        (agent_id, agent_id, agent_id, agent_id, agent_id, after, agent_id, after, limit),
    )
    return [
        OwnerCount(
            owner_id=str(owner),
            conversations=int(conversations),
            active_memories=int(active),
            archived_memories=int(archived),
            latest_conversation_at=from_text(latest) if latest else None,
        )
        for owner, conversations, latest, active, archived in found
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class ConversationRow:
    """One conversation of an owner."""

    key: ConversationKey
    created_at: dt.datetime
    window_start_id: int


def conversations(
    connection: Transaction, agent_id: str, owner_id: str, after: tuple[str, str, str], limit: int
) -> list[ConversationRow]:
    """The owner's conversations after `after` (channel, chat_id, thread_scope), in that order."""
    found = rows(
        connection,
        "SELECT channel, chat_id, thread_scope, created_at, window_start_id FROM conversations "
        "WHERE agent_id = ? AND owner_id = ? AND (channel, chat_id, thread_scope) > (?, ?, ?) "
        "ORDER BY channel, chat_id, thread_scope LIMIT ?",
        (agent_id, owner_id, *after, limit),
    )
    return [
        ConversationRow(
            key=ConversationKey(agent_id, owner_id, str(channel), str(chat), str(thread)),
            created_at=from_text(created),
            window_start_id=int(window),
        )
        for channel, chat, thread, created, window in found
    ]


def message(
    connection: Transaction, agent_id: str, owner_id: str, message_id: int
) -> StoredMessage | None:
    """The owner's message of this id, or None."""
    found = rows(
        connection,
        f"SELECT {MESSAGE_COLUMNS} FROM messages AS m "
        "WHERE m.id = ? AND m.agent_id = ? AND m.owner_id = ?",
        (message_id, agent_id, owner_id),
    )
    return message_from_row(found[0], {}) if found else None


def activity(connection: Transaction, since: dt.datetime, failing: int) -> Activity:
    """The background's activity since `since`, and the `failing` conversations whose reviews
    failed last."""
    cutoff = to_text(since)
    failures = rows(
        connection,
        "SELECT count(*) FROM memory_review_state WHERE last_review_failed_at >= ?",
        (cutoff,),
    )
    compacted = rows(
        connection,
        "SELECT count(*) FROM conversations AS c JOIN messages AS m ON m.id = c.checkpoint_id "
        "WHERE c.checkpoint_id > 0 AND m.created_at >= ?",
        (cutoff,),
    )
    last = rows(
        connection,
        "SELECT agent_id, owner_id, channel, chat_id, thread_scope FROM memory_review_state "
        "WHERE last_review_failed_at IS NOT NULL ORDER BY last_review_failed_at DESC LIMIT ?",
        (failing,),
    )
    return Activity(
        review_failures=int(failures[0][0]),
        compacted=int(compacted[0][0]),
        failing=[ConversationKey(*(str(part) for part in row)) for row in last],
    )
