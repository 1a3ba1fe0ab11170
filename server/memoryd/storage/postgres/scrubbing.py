"""What an erasure leaves for PostgreSQL to scrub, done on a connection of its own: VACUUM of the
tables erasures delete from, their planner statistics rebuilt, the word indexes rebuilt without
the erased words (memoryd.storage.database.scrub_erased calls `vacuum`)."""

from __future__ import annotations

import logging
import threading

import psycopg

from memoryd.log_events import Event
from memoryd.storage.postgres.database import connect
from memoryd.storage.postgres.settings import PostgresSettings
from memoryd.storage.postgres.transaction import PostgresTransaction
from memoryd.storage.scrub import Scrubbed

log = logging.getLogger("memoryd.erasure")
# PostgreSQL 18: pg_clear_attribute_stats, for a table's owner.
CLEARABLE_STATISTICS_VERSION = 180000
# The tables an erasure deletes from; VACUUM removes their dead rows and index entries.
ERASED_TABLES = (
    "messages",
    "compaction_claims",
    "memories",
    "conversations",
    "ended_sessions",
    "memory_review_state",
    "review_runs",
    "model_calls",
    "resources",
    "resource_revisions",
    "memory_sources",
    "scheduled_jobs",
    "job_runs",
    "transcript_sessions",
    "message_vectors",
    "memory_vectors",
    "review_exchanges",
    "review_operations",
    "activity_hours",
)


# The GIN indexes of words and trigrams keep an erased word as a key, with no row left under it,
# until they are rebuilt: VACUUM only empties its posting list (as an FTS5 index keeps a deleted
# term until a merge, which memoryd's SQLite erasure forces). The HNSW index overwrites a vacuumed
# vector itself.
REBUILT_INDEXES = ("messages_words", "messages_trigrams", "memories_words")


# How long the rebuild waits for a transaction that started before it (a reader's, a writer
# group's) before it gives up for now.
REBUILD_WAIT = "10s"


_vacuum_lock = threading.Lock()


def vacuum(settings: PostgresSettings) -> Scrubbed:
    """Scrub what erasures deleted, on a connection of its own: VACUUM the tables they delete
    from (their dead rows, and the HNSW and B-tree entries pointing at them, are removed;
    PostgreSQL keeps both until a VACUUM), rebuild those tables' planner statistics
    (`_rebuild_statistics`), then rebuild the word indexes without the erased words (REINDEX
    CONCURRENTLY: reads and writes go on meanwhile). Not scrubbed when another transaction
    still sees the erased rows (no VACUUM can remove what a running snapshot may read), or a
    rebuild could not finish: try again later."""
    with _vacuum_lock:
        connection = connect(settings)
        try:
            connection.execute(f"SET statement_timeout = 0; SET lock_timeout = '{REBUILD_WAIT}'")
            oldest = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL"
            ).fetchall()[0][0]
            connection.execute(f"VACUUM (SKIP_LOCKED) {', '.join(ERASED_TABLES)}")
            alone = int(oldest) == 0
            statistics = _rebuild_statistics(connection) and alone
            return Scrubbed(
                wal_truncated=alone and _rebuild_word_indexes(connection),
                statistics_rebuilt=statistics,
            )
        finally:
            connection.close()


def _rebuild_statistics(connection: PostgresTransaction) -> bool:
    """The planner's statistics of the erased tables, made again without the erased rows:
    pg_statistic keeps sampled values (words, chat ids, a vector) of every analyzed column
    until the next ANALYZE, and ANALYZE samples live rows only. ANALYZE leaves an empty
    table's old statistics as they were, so those are cleared (`_clear_statistics`); then
    pg_statistic itself is vacuumed, since the replaced rows stay in its pages until then.
    False when a step was not allowed (not the tables' owner, or a PostgreSQL 17 without
    superuser for an emptied table): the log says which."""
    connection.execute(f"ANALYZE {', '.join(ERASED_TABLES)}")
    done = True
    for table in ERASED_TABLES:
        empty = connection.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {table})").fetchall()
        if empty[0][0]:
            done = _clear_statistics(connection, table) and done
    refused: list[str] = []

    def warned(notice: psycopg.errors.Diagnostic) -> None:
        if notice.severity_nonlocalized == "WARNING":  # "permission denied ..., skipping it"
            refused.append(str(notice.message_primary))

    raw = connection.connection
    raw.add_notice_handler(warned)
    try:
        connection.execute("VACUUM pg_statistic")
    finally:
        raw.remove_notice_handler(warned)
    if refused:
        log.warning(
            "pg_statistic was not vacuumed after an erasure (%s): rows of its older statistics "
            "stay in its pages until autovacuum reaches it; a superuser or the database's "
            "owner can run VACUUM pg_statistic",
            refused[0],
            extra={"event": Event.STATISTICS_NOT_SCRUBBED},
        )
    return done and not refused


def _clear_statistics(connection: PostgresTransaction, table: str) -> bool:
    """Drop the statistics of an empty table and of its indexes' expressions."""
    found = connection.execute(
        "SELECT s.tablename, s.attname, s.inherited FROM pg_stats AS s "
        "WHERE s.schemaname = current_schema() AND (s.tablename = ? OR s.tablename IN "
        "(SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = to_regclass(?)))",
        (table, table),
    ).fetchall()
    if not found:
        return True
    if connection.connection.info.server_version >= CLEARABLE_STATISTICS_VERSION:
        for relation, column, inherited in found:
            connection.execute(
                "SELECT pg_clear_attribute_stats(current_schema(), CAST(? AS name), "
                "CAST(? AS name), ? <> 0)",
                (relation, column, inherited),
            )
        return True
    try:  # PostgreSQL 17: only a superuser may change pg_statistic
        connection.execute(
            "DELETE FROM pg_statistic WHERE starelid = to_regclass(?) OR starelid IN "
            "(SELECT indexrelid FROM pg_index WHERE indrelid = to_regclass(?))",
            (table, table),
        )
    except psycopg.errors.InsufficientPrivilege:
        log.warning(
            "the statistics of %s, emptied by an erasure, still hold sampled values of its "
            "rows: PostgreSQL 17 lets only a superuser clear them (18 lets the table's owner); "
            "they go when the table is analyzed with rows in it",
            table,
            extra={"event": Event.STATISTICS_NOT_SCRUBBED},
        )
        return False
    return True


def _rebuild_word_indexes(connection: PostgresTransaction) -> bool:
    """REINDEX CONCURRENTLY each of REBUILT_INDEXES; False when one had to give up (it waited
    REBUILD_WAIT for older transactions), after dropping the half-built copy it leaves."""
    for index in REBUILT_INDEXES:
        try:
            connection.execute(f"REINDEX INDEX CONCURRENTLY {index}")
        except psycopg.errors.LockNotAvailable:
            connection.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}_ccnew")
            return False
    return True
