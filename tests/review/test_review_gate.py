"""Python rules and the SQL that applies them agree: the review gate and the scheduler's query
(review_store.due) on every state, so a conversation the scheduler picks is one the gate lets
through, and no other; and the review-input rule (is_review_input) and REVIEWABLE."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.messages import Role
from memoryd.domain.review_gate import Thresholds, gate
from memoryd.domain.review_prompt import is_review_input
from memoryd.domain.review_runs import ReviewState
from memoryd.domain.timestamps import to_text
from memoryd.storage import history_writes, review_input, review_store
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.migrations import bundled_migrations, migrate

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
KEY = ConversationKey("main", "ada", "telegram", "42", "root")
# Moments around the thresholds, so that equalities are tried too.
moments = st.sampled_from([None, *(NOW - dt.timedelta(minutes=m) for m in (0, 5, 10, 60, 1440))])
cutoffs = st.sampled_from([NOW - dt.timedelta(minutes=m) for m in (5, 10, 60)])
counts = st.integers(min_value=0, max_value=25)
limits = st.sampled_from([None, 1, 5, 20])

CONNECTION = SqliteConnection(":memory:")
migrate(CONNECTION, bundled_migrations())
history_writes.ensure_conversation(CONNECTION, KEY, NOW)


@settings(max_examples=400, deadline=None)
@given(
    last_reviewed_at=moments,
    last_input_at=moments,
    failed_at=moments,
    failures=st.integers(min_value=0, max_value=2),
    turns=counts,
    passive=counts,
    backlog=st.booleans(),
    interval_before=st.one_of(st.none(), cutoffs),
    backoff_before=cutoffs,
    idle_before=st.one_of(st.none(), cutoffs),
    turn_interval=limits,
    passive_interval=limits,
)
def test_the_gate_and_the_schedulers_query_agree(  # noqa: PLR0917 - one per state field
    last_reviewed_at: dt.datetime | None,
    last_input_at: dt.datetime | None,
    failed_at: dt.datetime | None,
    failures: int,
    turns: int,
    passive: int,
    backlog: bool,
    interval_before: dt.datetime | None,
    backoff_before: dt.datetime,
    idle_before: dt.datetime | None,
    turn_interval: int | None,
    passive_interval: int | None,
) -> None:
    state = ReviewState(
        last_reviewed_at=last_reviewed_at,
        last_input_at=last_input_at,
        last_review_failed_at=failed_at,
        failure_count=failures,
        turns_since_review=turns,
        passive_since_review=passive,
        backlog=backlog,
        pending_input=True,
    )
    at = Thresholds(
        interval_before=interval_before,
        backoff_before=backoff_before,
        stale_before=NOW,
        idle_before=idle_before,
        turn_interval=turn_interval,
        passive_interval=passive_interval,
    )
    CONNECTION.execute("DELETE FROM memory_review_state")
    CONNECTION.execute(
        "INSERT INTO memory_review_state (agent_id, owner_id, channel, chat_id, thread_scope, "
        "last_reviewed_at, last_input_at, last_review_failed_at, failure_count, "
        "turns_since_review, passive_since_review, backlog, pending_input) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
        (
            *KEY.as_row(),
            *(
                to_text(moment) if moment else None
                for moment in (last_reviewed_at, last_input_at, failed_at)
            ),
            failures,
            turns,
            passive,
            int(backlog),
        ),
    )
    assert review_store.state(CONNECTION, KEY) == state  # the row reads back as the state
    due = review_store.due(
        CONNECTION,
        interval_before=at.interval_before,
        backoff_before=at.backoff_before,
        stale_before=at.stale_before,
        turn_interval=at.turn_interval,
        passive_interval=at.passive_interval,
        idle_before=at.idle_before,
        limit=10,
    )
    assert (KEY in due) == (gate(state, at) is None)


SPOKEN: st.SearchStrategy[object] = st.sampled_from(
    [True, False, 1, 0, 1.0, 2, "true", "True", "1", "yes", None, [], {}]
)


@settings(max_examples=200, deadline=None)
@given(
    role=st.sampled_from(["user", "assistant", "system", "tool"]),
    spoken=st.one_of(st.just("absent"), SPOKEN),
    guest=st.booleans(),
)
def test_the_review_input_rule_and_its_sql_agree(role: str, spoken: object, guest: bool) -> None:
    """is_review_input (Python, for appends) and REVIEWABLE (SQL, for the reviewer's reads)."""
    metadata: dict[str, Any] = {} if spoken == "absent" else {"spoken": spoken}
    if guest:
        metadata["guest"] = True
    text = json.dumps(metadata)
    CONNECTION.execute("DELETE FROM messages")
    CONNECTION.execute(
        "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, role, "
        "kind, content, metadata_json, trust, created_at) "
        "VALUES (?, ?, ?, ?, ?, 'ada', ?, 'chat_message', 'hello', ?, 'operator', ?)",
        (*KEY.as_row(), role, text, to_text(NOW)),
    )
    read = review_input.reviewable_after(CONNECTION, KEY, 0, 10)
    assert bool(read) == is_review_input(Role(role), text)
