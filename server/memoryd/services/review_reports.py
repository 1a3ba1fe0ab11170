"""What a review reports: the result of one that ran, failed or was skipped, its log line, and
its span's attributes (memoryd.services.review runs the review)."""

from __future__ import annotations

import logging

from memoryd import log_names
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.review_runs import (
    SKIP_TEXT,
    ReviewResult,
    ReviewStatus,
    RunRecord,
    SkipReason,
)
from memoryd.llm.chain import Completion
from memoryd.log_events import Event
from memoryd.services.review_apply import (
    Applied,
)

log = logging.getLogger("memoryd.review")


def failed(key: ConversationKey, session: str, reason: str, tokens_in: int) -> ReviewResult:
    """A review whose model call failed (its messages stay for the next), logged."""
    log.warning(
        "review of %s failed: %s",
        log_names.conversation(key),
        reason,
        extra={
            "event": Event.REVIEW_FAILED,
            "session_id": log_names.name(session),
            "error": reason,
        },
    )
    return ReviewResult(key=key, status=ReviewStatus.FAILED, reason=reason, tokens_in=tokens_in)


def reviewed(
    key: ConversationKey,
    session: str,
    *,
    record: RunRecord,
    applied: Applied,
    completion: Completion,
    own_ms: float,
) -> ReviewResult:
    """A review that ran and was applied, logged."""
    log.info(
        "reviewed %s: %s",
        log_names.conversation(key),
        record.status,
        extra={
            "event": Event.REVIEW,
            "session_id": log_names.name(session),
            "status": record.status,
            "added": record.added,
            "replaced": record.replaced,
            "archived": record.archived,
            "skipped": record.skipped,
            "deferred": record.deferred,
            "more": applied.more,
            "tokens_in": record.tokens_in,
            "provider": completion.provider,
            "own_ms": round(own_ms, 3),
        },
    )
    return ReviewResult(
        key=key,
        status=record.status,
        added=record.added,
        replaced=record.replaced,
        archived=record.archived,
        skipped_ops=record.skipped,
        tokens_in=record.tokens_in,
        run_id=applied.run_id,
        provider=completion.provider,
        model=completion.model,
        own_ms=round(own_ms, 3),
        deferred_ops=record.deferred,
    )


def skipped(key: ConversationKey, reason: SkipReason) -> ReviewResult:
    """A review that did not run, and why."""
    return ReviewResult(key=key, status=ReviewStatus.SKIPPED, reason=SKIP_TEXT[reason], skip=reason)


def span_attributes(result: ReviewResult) -> dict[str, str | int]:
    """What a review's span says of it (counts and names, never what was saved)."""
    attributes: dict[str, str | int] = {"memoryd.review.status": result.status.value}
    if result.skip is not None:
        attributes["memoryd.review.skip"] = result.skip.value
    if result.status is not ReviewStatus.SKIPPED:
        attributes |= {
            "memoryd.review.added": result.added,
            "memoryd.review.replaced": result.replaced,
            "memoryd.review.archived": result.archived,
            "memoryd.review.skipped_operations": result.skipped_ops,
            "memoryd.review.input_tokens": result.tokens_in,
        }
    if result.provider:
        attributes |= {
            "gen_ai.provider.name": result.provider,
            "gen_ai.request.model": result.model,
        }
    return attributes
