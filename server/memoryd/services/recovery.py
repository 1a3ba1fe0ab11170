"""What the last stop left undone, finished at start-up before the writer thread owns the
connection: prompt files rewritten from their current revision, interrupted reviews released,
erasures' WAL truncated, old checkpoint resources split, stored messages' tokens counted."""

from __future__ import annotations

import logging

from memoryd.domain import tokens
from memoryd.errors import FailedPrecondition
from memoryd.log_events import Event
from memoryd.services.prompt_files import PromptFiles
from memoryd.storage import compaction_store, review_store, scrub, transfer_store
from memoryd.storage import database as databases
from memoryd.storage.database import OpenedDatabase

log = logging.getLogger("memoryd.runtime")


def recover(database: OpenedDatabase, prompts: PromptFiles) -> None:
    """What the last stop left undone, before the writer thread owns the connection."""
    resync_prompt_files(prompts, database)
    _clear_review_claims(database)
    _finish_scrubs(database)
    _split_old_checkpoints(database)
    _count_stored_tokens(database)


def _split_old_checkpoints(database: OpenedDatabase) -> None:
    """Checkpoint resources of the version 1 format left by an import that stopped before it
    split them (memoryd.storage.transfer_store): split them now."""
    try:
        with database.transaction() as transaction:
            split = transfer_store.split_old_checkpoints(transaction)
    except FailedPrecondition as error:
        log.warning("%s", error.message, extra={"event": Event.CHECKPOINTS_NOT_SPLIT})
        return
    if split:
        log.info(
            "split checkpoint resources of an older format by owner",
            extra={"event": Event.CHECKPOINTS_SPLIT},
        )


def _finish_scrubs(database: OpenedDatabase) -> None:
    """Erasures that ended before their WAL was truncated (readers held it, then the server
    stopped): truncate now, before anything reads, and clear them."""
    through = scrub.newest_pending(database.autocommit)
    if through and databases.scrub_erased(database.settings).wal_truncated:
        with database.transaction() as transaction:
            scrub.clear_pending(transaction, through)
        log.info(
            "truncated the WAL for erasures recorded before the last stop",
            extra={"event": Event.WAL_TRUNCATED},
        )


def resync_prompt_files(prompts: PromptFiles, database: OpenedDatabase) -> None:
    report = prompts.resync(database)
    if report.rewritten or report.moved:
        log.info(
            "rewrote %d prompt file(s) from their current revision (%d moved to a new path)",
            report.rewritten,
            report.moved,
            extra={
                "event": Event.PROMPT_FILES_RESYNCED,
                "files": report.rewritten,
                "moved": report.moved,
            },
        )
    if report.failed:
        log.error(
            "%d prompt file(s) could not be written; GetPromptContext still serves them, and "
            "the next start tries again",
            report.failed,
            extra={"event": Event.PROMPT_FILES_UNWRITTEN, "files": report.failed},
        )


def _clear_review_claims(database: OpenedDatabase) -> None:
    # Alone on the database (no other memoryd is connected to it; on SQLite the data
    # directory's lock says so), a claim left there is a stopped server's: its review is
    # retried. With other processes, claims may be theirs: a dead one's goes stale.
    if not database.alone():
        return
    with database.transaction() as transaction:
        cleared = review_store.clear_claims(transaction)
    if cleared:
        log.info(
            "%d review(s) were interrupted by the last stop; they will run again",
            cleared,
            extra={"event": Event.REVIEW_CLAIMS_CLEARED, "claims": cleared},
        )


def _count_stored_tokens(database: OpenedDatabase) -> None:
    """Count the tokens of messages stored before counts existed (once, after the upgrade)."""
    counted = 0
    while batch := compaction_store.uncounted(database.autocommit, 5000):
        with database.transaction() as transaction:
            compaction_store.set_token_counts(
                transaction, [(message_id, tokens.count_tokens(text)) for message_id, text in batch]
            )
        counted += len(batch)
    if counted:
        log.info(
            "counted the tokens of %d stored messages",
            counted,
            extra={"event": Event.TOKENS_COUNTED, "messages": counted},
        )
