"""Transcript sessions in SQLite: the committed seq of each session, advanced in the same
transaction as the finals it covers."""

from __future__ import annotations

import datetime as dt

import apsw

from memoryd.domain.timestamps import to_text
from memoryd.domain.transcripts import Session
from memoryd.storage.sql import rows

_SESSION_MATCH = "agent_id = ? AND owner_id = ? AND device_id = ? AND session_id = ?"


def _params(session: Session) -> tuple[str, str, str, str]:
    key, opening = session.key, session.opening
    return (key.agent_id, key.owner_id, opening.device_id, opening.session_id)


def committed_seq(connection: apsw.Connection, session: Session) -> int | None:
    """The session's committed seq, or None when the session is new."""
    found = rows(
        connection,
        f"SELECT committed_seq FROM transcript_sessions WHERE {_SESSION_MATCH}",
        _params(session),
    )
    return int(found[0][0]) if found else None


def advance(connection: apsw.Connection, session: Session, seq: int, now: dt.datetime) -> None:
    """Every utterance up to `seq` has its final committed (the count never goes down)."""
    stamp = to_text(now)
    connection.execute(
        "INSERT INTO transcript_sessions (agent_id, owner_id, device_id, session_id, "
        "committed_seq, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (agent_id, owner_id, device_id, session_id) DO UPDATE SET "
        "committed_seq = max(committed_seq, excluded.committed_seq), updated_at = ?",
        (*_params(session), seq, stamp, stamp, stamp),
    )
