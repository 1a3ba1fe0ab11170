"""Activity by bucket (GetActivity): sums of activity_hours, the table the triggers of migration
0019 (PostgreSQL's 0006) keep by conversation and UTC hour.

A conversation, an owner or an agent is a prefix of the table's key; the whole server reads by
hour (activity_hours_by_hour). Either way a read touches one row per conversation and active
hour of the range, never the messages.
"""

from __future__ import annotations

from memoryd.domain.activity import COUNTS, Counts, Span
from memoryd.domain.conversation import AgentKey, ConversationKey, HistoryScope, OwnerKey
from memoryd.storage.sql import CONVERSATION_MATCH, rows
from memoryd.storage.transaction import Transaction

_SUMS = ", ".join(f"sum({name})" for name in COUNTS)


def _scope(scope: HistoryScope | None) -> tuple[str, tuple[str, ...]]:
    """The key prefix a scope matches, as SQL and its parameters."""
    if isinstance(scope, ConversationKey):
        return f"{CONVERSATION_MATCH} AND ", scope.as_row()
    if isinstance(scope, OwnerKey):
        return "agent_id = ? AND owner_id = ? AND ", (scope.agent_id, scope.owner_id)
    if isinstance(scope, AgentKey):
        return "agent_id = ? AND ", (scope.agent_id,)
    return "", ()


def by_bucket(connection: Transaction, scope: HistoryScope | None, span: Span) -> dict[str, Counts]:
    """The counts of the scope's conversations (None: every agent's) in the span, by bucket
    name: the first span.bucket.prefix characters of the stored hour."""
    where, params = _scope(scope)
    width = span.bucket.prefix
    found = rows(
        connection,
        f"SELECT substr(hour, 1, {width}) AS bucket, {_SUMS} FROM activity_hours "
        f"WHERE {where}hour >= ? AND hour < ? GROUP BY substr(hour, 1, {width})",
        (*params, span.first_hour, span.end_hour),
    )
    return {str(row[0]): Counts(*(int(value or 0) for value in row[1:])) for row in found}
