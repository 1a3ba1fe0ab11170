"""IngestMessages: a stream of batches of messages for any conversations, imported.

Each batch is checked message by message (an invalid one is rejected and counted, the rest
stored), grouped by conversation in order, and stored through the writer as one job: a batch
commits in one transaction. The next
batch is read and checked while one is committed, never further ahead: a slow database slows
the sender (HTTP/2 flow control), and memory stays bounded by two batches. Duplicate
client_message_ids are skipped as AppendMessages skips them, so a cut-off import can be sent
again. A batch may be stored as already reviewed (a backfill that should cost no model calls).
While a stream writes, the background embedder waits (memoryd.services.import_activity).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.history import AppendOutcome, AppendResult
from memoryd.domain.messages import NewMessage, SentMessage
from memoryd.errors import InvalidArgument
from memoryd.services.history import HistoryService
from memoryd.services.import_activity import ImportActivity

MAX_BATCH_MESSAGES = 1000
MAX_REJECTIONS_REPORTED = 100


@dataclasses.dataclass(frozen=True, slots=True)
class IngestItem:
    """One message of a batch as translated from the wire: the conversation and message, or why
    it could not be translated."""

    conversation: ConversationKey | None
    message: SentMessage | None
    refused: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class IngestBatch:
    """One request of the stream: its messages, and whether to store them as reviewed."""

    items: list[IngestItem]
    as_reviewed: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Rejection:
    """A message that was not stored, and why."""

    batch: int
    index: int
    reason: str


@dataclasses.dataclass(slots=True)
class IngestReport:
    """What an import did."""

    batches: int = 0
    received: int = 0
    stored: int = 0
    duplicates: int = 0
    blank: int = 0
    rejected: int = 0
    rejections: list[Rejection] = dataclasses.field(default_factory=list)
    queued_for_review: int = 0
    stored_as_reviewed: int = 0

    def reject(self, batch: int, index: int, reason: str) -> None:
        """Count a rejected message (its reason is kept for the first ones)."""
        self.rejected += 1
        if len(self.rejections) < MAX_REJECTIONS_REPORTED:
            self.rejections.append(Rejection(batch, index, reason))


class IngestService:
    """Imports over the history use cases."""

    def __init__(self, history: HistoryService, activity: ImportActivity) -> None:
        self._history = history
        self._activity = activity

    async def ingest(self, batches: AsyncIterator[IngestBatch]) -> IngestReport:
        """Store every batch in turn; returns the counts. While one batch is being committed,
        the next is read and checked (never more than one ahead), so order is kept."""
        with self._activity.importing():
            return await self._ingest(batches)

    async def _ingest(self, batches: AsyncIterator[IngestBatch]) -> IngestReport:
        report = IngestReport()
        in_flight: asyncio.Future[list[AppendResult]] | None = None
        try:
            async for batch in batches:
                self._activity.batch()
                items = batch.items
                if len(items) > MAX_BATCH_MESSAGES:
                    raise InvalidArgument(
                        f"batch {report.batches} has {len(items):,} messages; the limit is "
                        f"{MAX_BATCH_MESSAGES:,} (the {report.batches} batches before it are "
                        "stored)"
                    )
                groups = self._checked(report.batches, items, report)
                if in_flight is not None:
                    _count(await in_flight, report)
                in_flight = asyncio.ensure_future(
                    self._history.append_checked_many(
                        list(groups.items()), as_reviewed=batch.as_reviewed
                    )
                )
                report.batches += 1
            if in_flight is not None:
                _count(await in_flight, report)
                in_flight = None
        finally:
            if in_flight is not None:  # the stream failed: the batch in flight still commits
                await asyncio.gather(in_flight, return_exceptions=True)
        return report

    def _checked(
        self, batch: int, items: list[IngestItem], report: IngestReport
    ) -> dict[ConversationKey, list[NewMessage]]:
        """The batch's valid messages by conversation, in order; the others rejected."""
        report.received += len(items)
        groups: dict[ConversationKey, list[NewMessage]] = {}
        for index, item in enumerate(items):
            if item.conversation is None or item.message is None:
                report.reject(batch, index, item.refused)
                continue
            try:
                checked = self._history.check_message(item.message, f"messages[{index}]")
            except InvalidArgument as error:
                report.reject(batch, index, error.message)
                continue
            groups.setdefault(item.conversation, []).append(checked)
        return groups


def _count(results: list[AppendResult], report: IngestReport) -> None:
    for result in results:
        if result.passed_over:
            report.stored_as_reviewed += result.review_input
        else:
            report.queued_for_review += result.review_input
        for appended in result.messages:
            if appended.outcome is AppendOutcome.STORED:
                report.stored += 1
            elif appended.outcome is AppendOutcome.DUPLICATE:
                report.duplicates += 1
            else:
                report.blank += 1
