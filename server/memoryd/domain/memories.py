"""Memory rows: categories, scopes, prompt targets and the admission rules for writes.

    category -> bucket:  identity, preference, interest, goal  -> user bucket   (USER.md)
                         context, directive                    -> memory bucket (MEMORY.md)
                         fact, job_run_summary                 -> never rendered

Every row belongs to one (agent, owner); its scope says who reads it within that pair:
owner (scope_id = owner_id), agent (agent_id), conversation (`<channel>:<chat>:<thread>`) or
job (`job:<job_id>`). Rows are never visible to another agent or owner.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
import re
import secrets

from memoryd.domain import json_text
from memoryd.domain.conversation import ConversationKey, OwnerKey, check_identifier
from memoryd.domain.messages import Trust
from memoryd.errors import FailedPrecondition, InvalidArgument, PermissionDenied, Reason

MAX_VALUE_CHARS = 200
MAX_KEY_CHARS = 256
MAX_REASON_CHARS = 1024
MAX_METADATA_BYTES = 64 * 1024
PREVIEW_CHARS = 120


class Category(enum.Enum):
    """What a row is about."""

    IDENTITY = "identity"
    PREFERENCE = "preference"
    INTEREST = "interest"
    GOAL = "goal"
    CONTEXT = "context"
    DIRECTIVE = "directive"
    FACT = "fact"
    JOB_RUN_SUMMARY = "job_run_summary"


class ScopeType(enum.Enum):
    """Which readers a row belongs to, within its agent and owner."""

    OWNER = "owner"
    AGENT = "agent"
    CONVERSATION = "conversation"
    JOB = "job"


class PromptTarget(enum.Enum):
    """The prompt file a row renders into."""

    NONE = "none"
    USER_MD = "user_md"
    MEMORY_MD = "memory_md"


USER_BUCKET = frozenset({Category.IDENTITY, Category.PREFERENCE, Category.INTEREST, Category.GOAL})
MEMORY_BUCKET = frozenset({Category.CONTEXT, Category.DIRECTIVE})


def prompt_target(category: Category, scope_type: ScopeType) -> PromptTarget:
    """The reference's prompt_target(category, scope_type)."""
    if scope_type is ScopeType.OWNER:
        if category in USER_BUCKET:
            return PromptTarget.USER_MD
        if category in MEMORY_BUCKET:
            return PromptTarget.MEMORY_MD
        return PromptTarget.NONE
    if scope_type is ScopeType.AGENT:
        return PromptTarget.MEMORY_MD if category in MEMORY_BUCKET else PromptTarget.NONE
    if scope_type is ScopeType.CONVERSATION:
        return PromptTarget.MEMORY_MD if category is Category.CONTEXT else PromptTarget.NONE
    return PromptTarget.NONE


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    """Who reads or writes: an agent and owner, maybe in a conversation, maybe inside a job."""

    owner: OwnerKey
    conversation: ConversationKey | None = None
    job_id: str | None = None

    def scope_id(self, scope_type: ScopeType, field: str = "scope_type") -> str:
        """The id of the caller's scope of that type."""
        if scope_type is ScopeType.OWNER:
            return self.owner.owner_id
        if scope_type is ScopeType.AGENT:
            return self.owner.agent_id
        if scope_type is ScopeType.CONVERSATION:
            if self.conversation is None:
                raise InvalidArgument(
                    f"{field} is conversation, so the caller must be a conversation", field=field
                )
            return self.conversation.scope_id
        if self.job_id is None:
            raise InvalidArgument(
                f"{field} is job, so job_id is required", reason=Reason.REQUIRED, field=field
            )
        return job_scope_id(self.job_id)


def job_scope_id(job_id: str) -> str:
    """A job's scope id and memory source id."""
    return f"job:{job_id}"


def check_job_id(job_id: str, field: str = "job_id") -> str | None:
    """A job id as given, or None when empty."""
    return check_identifier(job_id, field) or None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where a row came from."""

    source_id: str | None = None
    source_type: str | None = None
    source_name: str | None = None
    source_description: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    source_message_id: int | None = None
    details_json: str = "{}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecord:
    """A stored memory row."""

    id: int
    agent_id: str
    owner_id: str
    scope_type: ScopeType
    scope_id: str
    category: Category
    key: str
    value: str
    confidence: float
    prompt_target: PromptTarget
    metadata_json: str
    trust: Trust
    provenance: Provenance
    created_at: dt.datetime
    updated_at: dt.datetime
    archived_at: dt.datetime | None
    archived_by: str | None
    archive_reason: str | None

    @property
    def archived(self) -> bool:
        """Whether the row is archived."""
        return self.archived_at is not None

    def belongs_to(self, owner: OwnerKey) -> bool:
        """Whether `owner` may see the row."""
        return self.agent_id == owner.agent_id and self.owner_id == owner.owner_id


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NewFact:
    """An admitted write by key: store or upsert this row."""

    owner: OwnerKey
    scope_type: ScopeType
    scope_id: str
    category: Category
    key: str
    value: str
    confidence: float
    metadata_json: str | None  # None keeps the stored metadata ("{}" for a new row)
    trust: Trust
    provenance: Provenance

    @property
    def prompt_target(self) -> PromptTarget:
        """Where the row renders."""
        return prompt_target(self.category, self.scope_type)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoreRequest:
    """A StoreMemory call, translated from the wire."""

    caller: Caller
    trust: Trust
    category: Category | None
    key: str
    value: str
    id: int
    scope_type: ScopeType | None
    metadata_json: str
    confidence: float
    session_id: str
    run_id: str
    source_message_id: int


def check_value(value: str, field: str = "value") -> str:
    """A value, trimmed; blank or over 200 characters is refused."""
    trimmed = value.strip()
    if not trimmed:
        raise InvalidArgument(f"{field} must not be blank", reason=Reason.BLANK, field=field)
    if len(trimmed) > MAX_VALUE_CHARS:
        raise InvalidArgument(
            f"{field} is {len(trimmed)} characters; the limit is {MAX_VALUE_CHARS}",
            reason=Reason.VALUE_TOO_LONG,
            field=field,
        )
    return trimmed


def check_key(key: str, field: str = "key") -> str:
    """A key, trimmed; blank, over-long or with control characters is refused."""
    trimmed = key.strip()
    if not trimmed:
        raise InvalidArgument(f"{field} must not be blank", reason=Reason.BLANK, field=field)
    return check_identifier(trimmed, field)


def generated_key() -> str:
    """OpenHermit's key for an entry added without one."""
    return f"mem-{secrets.token_hex(4)}"


# A fact's key: its first words, then a short digest of the whole value.
FACT_KEY_SLUG_CHARS = 40
FACT_KEY_DIGEST_HEX = 4
_WORD = re.compile(r"[^\W_]+")


def fact_key(value: str) -> str:
    """The key of a fact stored without one (by the review, or StoreMemory with a category and
    no key), read off the fact: "Lives in Lisbon" is `lives-in-lisbon-7ad6`. Its words, case
    folded, in any script, up to 40 characters, then 4 hex of the value's SHA-256: the same
    value always gets the same key (a retried review updates its rows in place), and two facts
    that begin alike still get two keys."""
    slug = ""
    for word in _WORD.findall(value.casefold()):
        joined = f"{slug}-{word}" if slug else word
        if len(joined) > FACT_KEY_SLUG_CHARS:
            slug = slug or word[:FACT_KEY_SLUG_CHARS]
            break
        slug = joined
    digest = hashlib.sha256(value.strip().encode("utf-8")).hexdigest()[:FACT_KEY_DIGEST_HEX]
    return f"{slug or 'fact'}-{digest}"


def check_metadata(text: str, field: str = "metadata") -> str | None:
    """A JSON object's text (memoryd.domain.json_text), normalised; empty means "not given"."""
    if text == "":
        return None
    return json_text.dump(json_text.parse_object(text, field, MAX_METADATA_BYTES))


def merge_metadata(stored_json: str, update_json: str | None) -> str:
    """Shallow merge: the update's top-level keys replace the stored ones."""
    if update_json is None:
        return stored_json
    return json_text.dump(json.loads(stored_json) | json.loads(update_json))


def check_confidence(confidence: float) -> float:
    """0 means 1.0 (proto3's unset); otherwise within (0, 1]."""
    if confidence == 0:
        return 1.0
    if not 0 < confidence <= 1:
        raise InvalidArgument(
            f"confidence must be between 0 and 1, got {confidence}",
            reason=Reason.OUT_OF_RANGE,
            field="confidence",
        )
    return confidence


def check_reason(reason: str) -> str | None:
    """An archive reason, trimmed; empty means none."""
    trimmed = reason.strip()
    if len(trimmed) > MAX_REASON_CHARS:
        raise InvalidArgument(
            f"reason is {len(trimmed)} characters; the limit is {MAX_REASON_CHARS}",
            reason=Reason.VALUE_TOO_LONG,
            field="reason",
        )
    return trimmed or None


def check_directive_trust(category: Category, trust: Trust, action: str) -> None:
    """Guests never write, replace, archive, restore or delete a directive."""
    if category is Category.DIRECTIVE and trust is Trust.GUEST:
        raise PermissionDenied(
            f"guests cannot {action} a directive: standing rules are set by the operator"
        )


def check_guest_may_change(record: MemoryRecord, trust: Trust, action: str) -> None:
    """A guest changes only rows a guest wrote: never a directive, never an operator's row (the
    reviewer's guest admission, memoryd.domain.review_admission, applies the same rule)."""
    if trust is not Trust.GUEST:
        return
    check_directive_trust(record.category, trust, action)
    if record.trust is not Trust.GUEST:
        raise PermissionDenied(
            f"guests cannot {action} memory {record.id}: an operator wrote it, and a guest "
            "changes only what a guest wrote"
        )


def check_editable(record: MemoryRecord) -> None:
    """Job run summaries are the job's record of what it did: never edited through the API."""
    if record.category is Category.JOB_RUN_SUMMARY:
        raise FailedPrecondition(f"memory {record.id} is a job run summary and cannot be edited")


def preview(value: str) -> str:
    """OpenHermit's list preview: 120 characters, then "..."."""
    return value if len(value) <= PREVIEW_CHARS else value[:PREVIEW_CHARS] + "..."
