"""Transcript sessions in SQLite: the committed seq of each session, advanced in the same
transaction as the finals it covers."""

from __future__ import annotations

import datetime as dt
import json

from memoryd.domain.timestamps import to_text
from memoryd.domain.transcripts import Session
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction

_SESSION_MATCH = "agent_id = ? AND owner_id = ? AND device_id = ? AND session_id = ?"


def _params(session: Session) -> tuple[str, str, str, str]:
    key, opening = session.key, session.opening
    return (key.agent_id, key.owner_id, opening.device_id, opening.session_id)


def committed_seq(connection: Transaction, session: Session) -> int | None:
    """The session's committed seq, or None when the session is new."""
    found = rows(
        connection,
        f"SELECT committed_seq FROM transcript_sessions WHERE {_SESSION_MATCH}",
        _params(session),
    )
    return int(found[0][0]) if found else None


def advance(connection: Transaction, moves: list[tuple[Session, int, dt.datetime]]) -> None:
    """Every utterance up to its seq has its final committed, for each (session, seq, now); one
    statement for all of them (the count never goes down)."""
    payload = json.dumps(
        [[*_params(session), seq, to_text(now)] for session, seq, now in moves], ensure_ascii=False
    )
    engine = engine_of(connection)
    connection.execute(
        "INSERT INTO transcript_sessions (agent_id, owner_id, device_id, session_id, "
        "committed_seq, created_at, updated_at) "
        "SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, "
        "CAST(j.value ->> 4 AS BIGINT), "
        f"j.value ->> 5, j.value ->> 5 FROM {engine.json_rows('?', 'j')} WHERE true ORDER BY j.key "
        "ON CONFLICT (agent_id, owner_id, device_id, session_id) DO UPDATE SET "
        "committed_seq = "
        f"{engine.greatest('transcript_sessions.committed_seq', 'excluded.committed_seq')}, "
        "updated_at = excluded.updated_at",
        (payload,),
    )
