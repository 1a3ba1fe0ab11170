"""The apply transaction of a review, run by the writer: the run record, the admitted
operations (each in a savepoint), the cursor, the model calls and the prompt files' revisions
commit together, or a failure is recorded. services.review calls the model and submits these.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import logging

from memoryd.domain import review_admission as admission
from memoryd.domain import review_answer as answers
from memoryd.domain import review_prompt as prompts
from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import MemoryRecord, NewFact, PromptTarget, Provenance, ScopeType
from memoryd.domain.memory_queries import Locator
from memoryd.domain.memory_sources import reviewer_provenance, reviewer_source
from memoryd.domain.messages import Trust
from memoryd.domain.model_calls import Attempt
from memoryd.domain.resources import MutationSource
from memoryd.domain.review_runs import (
    MAX_REFUSED_VALUE_CHARS,
    AppliedOperation,
    Exchange,
    ReadPart,
    ReviewStatus,
    RunRecord,
    SkippedOperation,
)
from memoryd.domain.timestamps import utc_now
from memoryd.errors import FailedPrecondition, MemorydError
from memoryd.log_events import Event
from memoryd.services import memory_changes
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.prompt_state import CommittedRender
from memoryd.storage import memory_writes, review_input, review_run_store, review_store
from memoryd.storage.sql import savepoint
from memoryd.storage.transaction import Transaction

log = logging.getLogger("memoryd.review")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ApplyJob:
    """A review's answer to apply, with what the review read."""

    key: ConversationKey
    token: str
    packed: prompts.PackedInput
    answer: answers.Answer
    shown_ids: frozenset[int]
    attempts: list[Attempt]
    provider: str
    model: str
    started: dt.datetime
    # The session the review read: a working memory or description it writes belongs to it.
    session_start_id: int
    # The prompt and the answer, to keep (keep_review_exchanges), or None.
    exchange: Exchange | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    """What applying did (claim_lost: another review took the conversation over)."""

    claim_lost: bool
    record: RunRecord | None = None
    run_id: int = 0
    touched: tuple[int, ...] = ()
    render: CommittedRender | None = None
    more: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FailJob:
    """A review that failed, to record."""

    key: ConversationKey
    token: str
    max_message_id: int
    error: str
    attempts: list[Attempt]
    started: dt.datetime
    # The prompt, and what came back if anything did (keep_review_exchanges), or None.
    exchange: Exchange | None = None


def apply_answer(
    connection: Transaction,
    job: ApplyJob,
    *,
    max_operations: int | None,
    prompts: PromptFiles,
) -> Applied:
    """Apply a review's answer in the writer's transaction: the run, its admitted operations
    (at most `max_operations` row changes; the rest deferred), the cursor, the model calls and
    the prompt files' revisions. Nothing when the claim was lost."""
    key = job.key
    if not review_store.holds_claim(connection, key, job.token):
        return Applied(claim_lost=True)
    now = utc_now()
    owner = OwnerKey(key.agent_id, key.owner_id)
    status = admission.status_of(job.answer)
    run_id = review_run_store.start_run(
        connection,
        key,
        RunRecord(
            status=status,
            max_message_id=job.packed.max_message_id,
            provider=job.provider,
            model=job.model,
        ),
        job.started,
    )
    provenance = reviewer_provenance(
        run_id, model=job.model, provider=job.provider, message_ids=job.packed.message_ids
    )
    applying = _Applying(
        connection=connection,
        key=key,
        owner=owner,
        provenance=provenance,
        now=now,
        guest=job.packed.guest,
        ended_session=(
            job.session_start_id
            if review_input.session_start(connection, key) != job.session_start_id
            else None
        ),
    )
    shown = _shown_rows(connection, owner, job.shown_ids, job.answer.operations)
    limit = max_operations
    for index, operation in enumerate(job.answer.operations):
        if limit is not None and operation.changes_rows and applying.row_changes >= limit:
            applying.deferred += 1
            continue
        admitted = admission.admit(operation, shown, index, guest=job.packed.guest)
        if isinstance(admitted, admission.Skipped):
            applying.skip(admission.refused(operation, index, admitted, job.packed), run_id)
            continue
        before = shown.get(operation.named_id) if operation.named_id else None
        changed = applying.apply(admitted, index, operation.action, run_id, before)
        if changed is not None and changed.id in shown:
            shown[changed.id] = None if changed.archived else changed
    # Deferred operations keep the cursor: the same messages are read again at once.
    cursor = review_store.cursor(connection, key)
    part = None
    if not applying.deferred:
        cursor = max(cursor, job.packed.reviewed_through)
        part = job.packed.part or ReadPart()
    # Only whether input is left (one row read): counting the backlog here would rescan it
    # in every batch. ReviewNow and GetReviewState count it on demand.
    more = review_input.has_input_after(connection, key, cursor)
    review_store.record_success(
        connection, key, status=status, cursor=cursor, more_pending=more, now=now, part=part
    )
    record = RunRecord(
        status=status,
        max_message_id=job.packed.max_message_id,
        added=applying.changed_by[admission.Add],
        replaced=applying.changed_by[admission.Replace],
        archived=applying.changed_by[admission.Archive],
        skipped=len(applying.skipped),
        tokens_in=job.packed.tokens,
        provider=job.provider,
        model=job.model,
        deferred=applying.deferred,
        skipped_ops=tuple(applying.skipped),
    )
    review_run_store.finish_run(
        connection, run_id, record, job.attempts, now, answer_kind=job.answer.kind
    )
    review_run_store.record_operations(connection, run_id, applying.applied)
    if job.exchange is not None:
        review_run_store.keep_exchange(connection, run_id, job.exchange)
    render = None
    if applying.rendered:
        render = prompts.render_in_transaction(
            connection,
            owner,
            mutation_source=MutationSource.MEMORY_REVIEW,
            provenance={
                "trigger": "memory_review",
                "memory_ids": applying.touched,
                "run": run_id,
            },
            now=now,
        )
    return Applied(
        claim_lost=False,
        record=record,
        run_id=run_id,
        touched=tuple(applying.touched),
        render=render,
        more=more,
    )


@dataclasses.dataclass(slots=True, kw_only=True)
class _Applying:
    """The operations of one answer being applied inside the review's transaction."""

    connection: Transaction
    key: ConversationKey
    owner: OwnerKey
    provenance: Provenance
    now: dt.datetime
    guest: bool
    # `/new` started another session while the review ran: the session it read (the id it
    # started after), whose texts go to its ended_sessions row, not to the new session.
    ended_session: int | None
    # Rows changed, by the kind of operation (admission.Add, admission.Replace, admission.Archive).
    changed_by: collections.Counter[type] = dataclasses.field(default_factory=collections.Counter)
    skipped: list[SkippedOperation] = dataclasses.field(default_factory=list)
    applied: list[AppliedOperation] = dataclasses.field(default_factory=list)
    touched: list[int] = dataclasses.field(default_factory=list)
    deferred: int = 0
    rendered: bool = False

    @property
    def row_changes(self) -> int:
        """Rows added, replaced or archived so far (what review_max_operations counts)."""
        return sum(self.changed_by.values())

    def skip(self, skipped: SkippedOperation, run_id: int) -> None:
        """Count an operation that is not applied, with its reason (both kept short: the
        action is the model's text)."""
        skipped = dataclasses.replace(
            skipped,
            action=skipped.action[:64],
            reason=skipped.reason[:512],
            value=skipped.value[:MAX_REFUSED_VALUE_CHARS],
        )
        self.skipped.append(skipped)
        log.info(
            "review operation skipped: %s",
            skipped.reason,
            extra={"event": Event.REVIEW_OP_SKIPPED, "run": run_id},
        )

    def apply(
        self,
        admitted: admission.Admitted,
        index: int,
        action: str,
        run_id: int,
        before: MemoryRecord | None,
    ) -> MemoryRecord | None:
        """Apply one admitted operation in a savepoint: one the store refuses after all (a row
        that changed under it) is skipped whole, and the others stand. Returns the row changed,
        and records it with its value `before` (the row as the review was shown it)."""
        try:
            with savepoint(self.connection, "review_op"):
                changed = _apply_one(self, admitted)
        except MemorydError as error:
            self.skip(SkippedOperation(index, action, error.message), run_id)
            return None
        if changed is None:
            return None
        self.changed_by[type(admitted)] += 1
        self.applied.append(
            AppliedOperation(
                index=index,
                action=_ACTIONS[type(admitted)],
                memory_id=changed.id,
                value_before=(
                    before.value
                    if before is not None and not isinstance(admitted, admission.Add)
                    else None
                ),
                value_after=changed.value,
            )
        )
        self.touched.append(changed.id)
        self.rendered = self.rendered or changed.prompt_target is not PromptTarget.NONE
        return changed


# The recorded action of each admitted operation that changes a row.
_ACTIONS: dict[type, str] = {
    admission.Add: "add",
    admission.Replace: "replace",
    admission.Archive: "archive",
}


def _apply_one(applying: _Applying, admitted: admission.Admitted) -> MemoryRecord | None:
    """Apply one admitted operation; returns the row it changed (None when nothing changed: a
    conversation text, or an add whose fact is already an active row)."""
    connection, owner, now = applying.connection, applying.owner, applying.now
    trust = Trust.GUEST if applying.guest else Trust.OPERATOR
    if isinstance(admitted, admission.Add):
        scope_id = owner.owner_id if admitted.scope_type is ScopeType.OWNER else owner.agent_id
        if memory_writes.has_active_value(
            connection, owner, admitted.scope_type, scope_id, admitted.category, admitted.value
        ):
            return None
        fact = NewFact(
            owner=owner,
            scope_type=admitted.scope_type,
            scope_id=scope_id,
            category=admitted.category,
            key=admitted.key,
            value=admitted.value,
            confidence=1.0,
            metadata_json=None,
            trust=trust,
            provenance=applying.provenance,
        )
        return memory_changes.upsert(connection, fact, reviewer_source(owner), now).record
    if isinstance(admitted, admission.Replace):
        stored = memory_changes.set_value(
            connection,
            owner,
            Locator(id=admitted.id),
            value=admitted.value,
            metadata_json=None,
            trust=trust,
            now=now,
        )
        memory_writes.set_provenance(connection, admitted.id, applying.provenance)
        return stored.record
    if isinstance(admitted, admission.Archive):
        return memory_changes.archive(
            connection,
            owner,
            admitted.id,
            reason=admitted.reason,
            archived_by=prompts.REVIEWER_AGENT,
            trust=trust,
            now=now,
        ).record
    working = isinstance(admitted, admission.SetWorkingMemory)
    if applying.ended_session is not None:
        # The session it read has ended: its texts are kept with that session.
        if not review_input.set_ended_session_text(
            connection,
            applying.key,
            applying.ended_session,
            working_memory=admitted.text if working else None,
            description=None if working else admitted.text,
        ):
            raise FailedPrecondition(
                "the session ended (/new) while the review ran and keeps no record; its "
                f"{'working memory' if working else 'description'} is not carried into the new "
                "session"
            )
        return None
    store = review_input.set_working_memory if working else review_input.set_description
    store(connection, applying.key, admitted.text)
    return None


def _shown_rows(
    connection: Transaction,
    owner: OwnerKey,
    shown_ids: frozenset[int],
    operations: list[answers.Operation],
) -> dict[int, MemoryRecord | None]:
    """The rows the review prompt listed; those the operations name, as they stand now (None:
    no longer active). Only named rows are read."""
    shown: dict[int, MemoryRecord | None] = dict.fromkeys(shown_ids)
    for memory_id in {op.named_id for op in operations} & shown_ids:
        record = memory_writes.find(connection, owner, Locator(id=memory_id))
        shown[memory_id] = record if record is not None and not record.archived else None
    return shown


def record_failure(connection: Transaction, job: FailJob) -> None:
    """Record a failed review (its run and model calls), unless the claim was lost."""
    if not review_store.holds_claim(connection, job.key, job.token):
        return
    now = utc_now()
    record = RunRecord(
        status=ReviewStatus.FAILED, max_message_id=job.max_message_id, error=job.error
    )
    run_id = review_run_store.start_run(connection, job.key, record, job.started)
    review_run_store.finish_run(connection, run_id, record, job.attempts, now)
    if job.exchange is not None:
        review_run_store.keep_exchange(connection, run_id, job.exchange)
    review_store.record_failure(connection, job.key, error=job.error, now=now)
