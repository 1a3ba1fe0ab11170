"""Activity by bucket (GetActivity): sums of the tables the triggers of migration 0019
(PostgreSQL's 0006) keep by UTC hour: activity_hours by conversation, agent_activity_hours by
agent.

A conversation or an owner is a prefix of activity_hours' key (one row per conversation and
active hour of the range); an agent, or the whole server, reads agent_activity_hours (one row per
agent and active hour, however many conversations). No read touches the messages.
"""

from __future__ import annotations

from memoryd.domain.activity import COUNTS, Counts, Span
from memoryd.domain.conversation import AgentKey, ConversationKey, HistoryScope, OwnerKey
from memoryd.storage.sql import CONVERSATION_MATCH, rows
from memoryd.storage.transaction import Transaction

_SUMS = ", ".join(f"sum({name})" for name in COUNTS)


def _scope(scope: HistoryScope | None) -> tuple[str, str, tuple[str, ...]]:
    """The table a scope reads, and the key prefix it matches as SQL and its parameters."""
    if isinstance(scope, ConversationKey):
        return "activity_hours", f"{CONVERSATION_MATCH} AND ", scope.as_row()
    if isinstance(scope, OwnerKey):
        return (
            "activity_hours",
            "agent_id = ? AND owner_id = ? AND ",
            (scope.agent_id, scope.owner_id),
        )
    if isinstance(scope, AgentKey):
        return "agent_activity_hours", "agent_id = ? AND ", (scope.agent_id,)
    return "agent_activity_hours", "", ()


def by_bucket(connection: Transaction, scope: HistoryScope | None, span: Span) -> dict[str, Counts]:
    """The counts of the scope's conversations (None: every agent's) in the span, by bucket
    name: the first span.bucket.prefix characters of the stored hour."""
    table, where, params = _scope(scope)
    width = span.bucket.prefix
    found = rows(
        connection,
        f"SELECT substr(hour, 1, {width}) AS bucket, {_SUMS} FROM {table} "
        f"WHERE {where}hour >= ? AND hour < ? GROUP BY substr(hour, 1, {width})",
        (*params, span.first_hour, span.end_hour),
    )
    return {str(row[0]): Counts(*(int(value or 0) for value in row[1:])) for row in found}
