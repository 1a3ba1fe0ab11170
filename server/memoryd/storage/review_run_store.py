"""Review runs: a run's record, its skipped and applied operations and its model calls.

Every function runs inside a transaction given by the caller (the writer's, for the review's
own transaction; a reader's for last_run).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Sequence

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.model_calls import Attempt
from memoryd.domain.review_runs import (
    MAX_SKIPPED_RECORDED,
    AnswerKind,
    AppliedOperation,
    Exchange,
    ReviewStatus,
    RunRecord,
    SkippedOperation,
    StoredRun,
)
from memoryd.domain.timestamps import from_text, to_text
from memoryd.storage.sql import Columns, Row, rows
from memoryd.storage.transaction import Transaction

_RUN = Columns(
    "r",
    (
        "id",
        "status",
        "max_message_id",
        "ops_added",
        "ops_replaced",
        "ops_archived",
        "ops_skipped",
        "tokens_in",
        "provider",
        "model",
        "error",
        "started_at",
        "completed_at",
        "answer_kind",
        "ops_deferred",
        "skipped_json",
    ),
)


def start_run(
    connection: Transaction, key: ConversationKey, record: RunRecord, started: dt.datetime
) -> int:
    """Insert the run's row (counts are filled in by finish_run); returns its id."""
    found = rows(
        connection,
        "INSERT INTO review_runs (agent_id, owner_id, channel, chat_id, thread_scope, status, "
        "max_message_id, provider, model, error, started_at, completed_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            *key.as_row(),
            stored_status(record.status),
            record.max_message_id,
            record.provider,
            record.model,
            record.error,
            to_text(started),
            to_text(started),
        ),
    )
    return int(found[0][0])


def finish_run(
    connection: Transaction,
    run_id: int,
    record: RunRecord,
    attempts: list[Attempt],
    now: dt.datetime,
    *,
    answer_kind: AnswerKind | None = None,
) -> None:
    """The run's counts, status and skipped operations, and its model calls."""
    connection.execute(
        "UPDATE review_runs SET status = ?, ops_added = ?, ops_replaced = ?, ops_archived = ?, "
        "ops_skipped = ?, tokens_in = ?, error = ?, completed_at = ?, answer_kind = ?, "
        "ops_deferred = ?, skipped_json = ? WHERE id = ?",
        (
            stored_status(record.status),
            record.added,
            record.replaced,
            record.archived,
            record.skipped,
            record.tokens_in,
            record.error,
            to_text(now),
            answer_kind.value if answer_kind is not None else "",
            record.deferred,
            json.dumps(
                [
                    {
                        "index": op.index,
                        "action": op.action,
                        "reason": op.reason,
                        "value": op.value,
                        "message_id": op.message_id,
                    }
                    for op in record.skipped_ops[:MAX_SKIPPED_RECORDED]
                ],
                ensure_ascii=False,
            ),
            run_id,
        ),
    )
    connection.executemany(
        "INSERT INTO model_calls (agent, session_id, provider, model, latency_ms, prompt_tokens, "
        "completion_tokens, error, review_run_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                a.agent,
                a.session_id,
                a.provider,
                a.model,
                a.latency_ms,
                a.prompt_tokens,
                a.completion_tokens,
                a.error,
                run_id,
                to_text(now),
            )
            for a in attempts
        ],
    )


def stored_status(status: ReviewStatus) -> str:
    """A prose answer is stored as nothing_to_save; review_runs.answer_kind tells it apart."""
    if status is ReviewStatus.NOTHING_TO_SAVE_PROSE:
        return ReviewStatus.NOTHING_TO_SAVE.value
    return status.value


def last_run(connection: Transaction, key: ConversationKey) -> StoredRun | None:
    """The latest run of a conversation."""
    found = runs(connection, key, before_id=None, limit=1)
    return found[0] if found else None


def runs(
    connection: Transaction,
    key: ConversationKey,
    *,
    before_id: int | None,
    limit: int,
    failed_only: bool = False,
) -> list[StoredRun]:
    """A conversation's runs with ids below `before_id` (None: every run), newest first; only
    the failed ones with `failed_only`."""
    failed = " AND r.status = 'failed'" if failed_only else ""
    found = rows(
        connection,
        f"SELECT {_RUN.select}, "
        "(SELECT count(*) FROM model_calls AS c WHERE c.review_run_id = r.id), "
        "(SELECT count(*) FROM review_exchanges AS e WHERE e.run_id = r.id) "
        "FROM review_runs AS r WHERE (r.agent_id, r.owner_id, r.channel, r.chat_id, "
        f"r.thread_scope) = (?, ?, ?, ?, ?) AND r.id < ?{failed} ORDER BY r.id DESC LIMIT ?",
        (*key.as_row(), (1 << 62) if before_id is None else before_id, limit),
    )
    stored = [_stored(row) for row in found]
    applied = operations(connection, [run.id for run in stored])
    return [dataclasses.replace(run, applied=applied.get(run.id, ())) for run in stored]


def record_operations(
    connection: Transaction, run_id: int, applied: Sequence[AppliedOperation]
) -> None:
    """The rows a run changed, with their values before and after."""
    connection.executemany(
        "INSERT INTO review_operations (run_id, position, memory_id, action, value_before, "
        "value_after) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (run_id, op.index, op.memory_id, op.action, op.value_before, op.value_after)
            for op in applied
        ],
    )


def operations(
    connection: Transaction, run_ids: Sequence[int]
) -> dict[int, tuple[AppliedOperation, ...]]:
    """The recorded operations of these runs, by run, each in the answer's order."""
    if not run_ids:
        return {}
    marks = ", ".join("?" * len(run_ids))
    found = rows(
        connection,
        "SELECT run_id, position, action, memory_id, value_before, value_after "
        f"FROM review_operations WHERE run_id IN ({marks}) ORDER BY run_id, position",
        tuple(run_ids),
    )
    by_run: dict[int, list[AppliedOperation]] = {}
    for run_id, *fields in found:
        by_run.setdefault(int(run_id), []).append(
            AppliedOperation(int(fields[0]), str(fields[1]), int(fields[2]), fields[3], fields[4])
        )
    return {run_id: tuple(ops) for run_id, ops in by_run.items()}


def _stored(row: Row) -> StoredRun:
    column = _RUN.named(row)
    status = ReviewStatus(column["status"])
    if status is ReviewStatus.NOTHING_TO_SAVE and column["answer_kind"] == AnswerKind.PROSE:
        status = ReviewStatus.NOTHING_TO_SAVE_PROSE
    skipped = tuple(
        SkippedOperation(
            item["index"],
            item["action"],
            item["reason"],
            item.get("value", ""),  # runs recorded before refusals kept their values
            item.get("message_id", 0),
        )
        for item in json.loads(column["skipped_json"])
    )
    return StoredRun(
        id=column["id"],
        record=RunRecord(
            status=status,
            max_message_id=column["max_message_id"],
            added=column["ops_added"],
            replaced=column["ops_replaced"],
            archived=column["ops_archived"],
            skipped=column["ops_skipped"],
            tokens_in=column["tokens_in"],
            provider=column["provider"],
            model=column["model"],
            error=column["error"],
            deferred=column["ops_deferred"],
            skipped_ops=skipped,
        ),
        model_calls=_RUN.after(row, 0),
        started_at=from_text(column["started_at"]),
        completed_at=from_text(column["completed_at"]),
        exchange_kept=bool(_RUN.after(row, 1)),
    )


def keep_exchange(connection: Transaction, run_id: int, exchange: Exchange) -> None:
    """Keep a run's exchange with the model."""
    connection.execute(
        "INSERT INTO review_exchanges (run_id, prompt_json, answer) VALUES (?, ?, ?)",
        (
            run_id,
            json.dumps([{"role": role, "content": content} for role, content in exchange.prompt]),
            exchange.answer,
        ),
    )


def exchange(connection: Transaction, key: ConversationKey, run_id: int) -> Exchange | None:
    """The kept exchange of the conversation's run `run_id`, or None."""
    found = rows(
        connection,
        "SELECT e.prompt_json, e.answer FROM review_exchanges AS e "
        "JOIN review_runs AS r ON r.id = e.run_id WHERE e.run_id = ? AND (r.agent_id, "
        "r.owner_id, r.channel, r.chat_id, r.thread_scope) = (?, ?, ?, ?, ?)",
        (run_id, *key.as_row()),
    )
    if not found:
        return None
    prompt_json, answer = found[0]
    prompt = tuple((str(m["role"]), str(m["content"])) for m in json.loads(prompt_json))
    return Exchange(prompt=prompt, answer=str(answer))
