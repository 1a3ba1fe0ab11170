"""Every protobuf enum of the contract and the domain value each number stands for, in one table
per enum that translates both ways.

Numbers a request may carry but the contract does not declare (proto3 keeps unknown numbers) are
refused with the field named. tests/test_enum_tables.py checks that every table covers every
number of its protobuf enum and every member of its domain enum.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from memoryd.domain.activity import Bucket
from memoryd.domain.compaction import Outcome, PartKind
from memoryd.domain.fusion import MatchKind, SearchMode
from memoryd.domain.history import AppendOutcome
from memoryd.domain.jobs import JobStatus, RunOutcome
from memoryd.domain.memories import Category, PromptTarget, ScopeType
from memoryd.domain.memory_sources import SourceType
from memoryd.domain.messages import Role, Trust
from memoryd.domain.recall import RecallScope, RecallSource
from memoryd.domain.resources import ResourceType
from memoryd.domain.review_runs import ReviewStatus
from memoryd.domain.transcripts import Speaker
from memoryd.errors import InvalidArgument, Reason
from memoryd_client.v1 import compaction_service_pb2 as compaction_pb
from memoryd_client.v1 import memory_service_pb2 as service_pb
from memoryd_client.v1 import records_pb2 as pb

N = TypeVar("N", bound=int)
V = TypeVar("V")


class EnumTable(Generic[N, V]):
    """One protobuf enum and the domain values of its numbers.

    `pairs` maps each declared number to its value; the UNSPECIFIED number (0) is in it only
    when leaving the field unset means a default. `domain` is the domain enum whose every member
    must have a number (None for values that are not an enum, such as an archived filter).
    """

    def __init__(
        self,
        proto: Any,
        pairs: Mapping[N, V],
        *,
        domain: type[enum.Enum] | None,
        list_names: bool = False,
        hint: str = "",
    ) -> None:
        self.proto = proto
        self.domain = domain
        self.values: dict[int, V] = {int(number): value for number, value in pairs.items()}
        self.numbers: dict[V, N] = {value: number for number, value in pairs.items() if number}
        self._list_names = list_names
        self._hint = hint

    def value(self, number: int, field: str) -> V:
        """The value of a number from a request."""
        if number in self.values:
            return self.values[number]
        if number == 0:
            names = f": one of {self.names()}" if self._list_names else ""
            raise InvalidArgument(
                f"{field} is required{names}", reason=Reason.REQUIRED, field=field
            )
        hint = f"; {self._hint}" if self._hint else ""
        raise InvalidArgument(
            f"{field} has unknown value {number}{hint}",
            reason=Reason.UNKNOWN_ENUM_VALUE,
            field=field,
        )

    def optional(self, number: int, field: str) -> V | None:
        """The value of a number from a request, or None when it was left unset."""
        return None if number == 0 else self.value(number, field)

    def number(self, value: V) -> N:
        """The number of a domain value, for a response."""
        return self.numbers[value]

    def names(self) -> str:
        """The declared names, UNSPECIFIED aside."""
        return ", ".join(name for name, number in self.proto.items() if number)


ROLE = EnumTable(
    pb.Role,
    {
        pb.ROLE_USER: Role.USER,
        pb.ROLE_ASSISTANT: Role.ASSISTANT,
        pb.ROLE_SYSTEM: Role.SYSTEM,
        pb.ROLE_TOOL: Role.TOOL,
    },
    domain=Role,
)
TRUST = EnumTable(
    pb.Trust,
    {
        pb.TRUST_UNSPECIFIED: Trust.OPERATOR,
        pb.TRUST_OPERATOR: Trust.OPERATOR,
        pb.TRUST_GUEST: Trust.GUEST,
    },
    domain=Trust,
)
# A message's trust: unset means "the use case decides" (operator, or the turn's speaker).
MESSAGE_TRUST = EnumTable(
    pb.Trust,
    {pb.TRUST_UNSPECIFIED: None, pb.TRUST_OPERATOR: Trust.OPERATOR, pb.TRUST_GUEST: Trust.GUEST},
    domain=Trust,
)
CATEGORY = EnumTable(
    pb.Category,
    {
        pb.CATEGORY_IDENTITY: Category.IDENTITY,
        pb.CATEGORY_PREFERENCE: Category.PREFERENCE,
        pb.CATEGORY_INTEREST: Category.INTEREST,
        pb.CATEGORY_GOAL: Category.GOAL,
        pb.CATEGORY_CONTEXT: Category.CONTEXT,
        pb.CATEGORY_DIRECTIVE: Category.DIRECTIVE,
        pb.CATEGORY_FACT: Category.FACT,
        pb.CATEGORY_JOB_RUN_SUMMARY: Category.JOB_RUN_SUMMARY,
    },
    domain=Category,
    hint="use identity, preference, interest, goal, context or directive",
)
SCOPE_TYPE = EnumTable(
    pb.ScopeType,
    {
        pb.SCOPE_TYPE_OWNER: ScopeType.OWNER,
        pb.SCOPE_TYPE_AGENT: ScopeType.AGENT,
        pb.SCOPE_TYPE_CONVERSATION: ScopeType.CONVERSATION,
        pb.SCOPE_TYPE_JOB: ScopeType.JOB,
    },
    domain=ScopeType,
)
PROMPT_TARGET = EnumTable(
    pb.PromptTarget,
    {
        pb.PROMPT_TARGET_NONE: PromptTarget.NONE,
        pb.PROMPT_TARGET_USER_MD: PromptTarget.USER_MD,
        pb.PROMPT_TARGET_MEMORY_MD: PromptTarget.MEMORY_MD,
    },
    domain=PromptTarget,
)
RESOURCE_TYPE = EnumTable(
    pb.ResourceType,
    {
        pb.RESOURCE_TYPE_USER_MD: ResourceType.USER_MD,
        pb.RESOURCE_TYPE_MEMORY_MD: ResourceType.MEMORY_MD,
        pb.RESOURCE_TYPE_CHECKPOINT: ResourceType.CHECKPOINT,
    },
    domain=ResourceType,
)
APPEND_OUTCOME = EnumTable(
    service_pb.AppendOutcome,
    {
        service_pb.APPEND_OUTCOME_STORED: AppendOutcome.STORED,
        service_pb.APPEND_OUTCOME_DUPLICATE: AppendOutcome.DUPLICATE,
        service_pb.APPEND_OUTCOME_SKIPPED_BLANK: AppendOutcome.SKIPPED_BLANK,
    },
    domain=AppendOutcome,
)
# Word matches rank by relevance; substring matches (partial words, other scripts) by time;
# semantic matches by the nearness of their vectors.
MATCH_KIND = EnumTable(
    service_pb.MatchKind,
    {
        service_pb.MATCH_KIND_WORD: MatchKind.WORD,
        service_pb.MATCH_KIND_SUBSTRING: MatchKind.SUBSTRING,
        service_pb.MATCH_KIND_SEMANTIC: MatchKind.SEMANTIC,
        service_pb.MATCH_KIND_NEIGHBOUR: MatchKind.NEIGHBOUR,
    },
    domain=MatchKind,
)
SEARCH_MODE = EnumTable(
    service_pb.SearchMode,
    {
        service_pb.SEARCH_MODE_UNSPECIFIED: SearchMode.DEFAULT,
        service_pb.SEARCH_MODE_LEXICAL: SearchMode.LEXICAL,
        service_pb.SEARCH_MODE_SEMANTIC: SearchMode.SEMANTIC,
        service_pb.SEARCH_MODE_HYBRID: SearchMode.HYBRID,
    },
    # SearchMode.DEFAULT has no number of its own: leaving the field unset means it.
    domain=None,
)
ARCHIVED_FILTER: EnumTable[service_pb.ArchivedFilter.ValueType, bool | None] = EnumTable(
    service_pb.ArchivedFilter,
    {
        service_pb.ARCHIVED_FILTER_UNSPECIFIED: False,
        service_pb.ARCHIVED_FILTER_ACTIVE: False,
        service_pb.ARCHIVED_FILTER_ARCHIVED: True,
        service_pb.ARCHIVED_FILTER_ALL: None,
    },
    domain=None,
)
RECALL_SCOPE = EnumTable(
    service_pb.RecallScope,
    {
        service_pb.RECALL_SCOPE_UNSPECIFIED: RecallScope.CURRENT,
        service_pb.RECALL_SCOPE_CURRENT: RecallScope.CURRENT,
        service_pb.RECALL_SCOPE_OWNER: RecallScope.OWNER,
        service_pb.RECALL_SCOPE_ALL: RecallScope.ALL,
    },
    domain=RecallScope,
)
RECALL_SOURCE = EnumTable(
    service_pb.RecallSource,
    {
        service_pb.RECALL_SOURCE_UNSPECIFIED: RecallSource.MEMORIES,
        service_pb.RECALL_SOURCE_MEMORIES: RecallSource.MEMORIES,
        service_pb.RECALL_SOURCE_HISTORY: RecallSource.HISTORY,
        service_pb.RECALL_SOURCE_ALL: RecallSource.ALL,
    },
    domain=RecallSource,
)
JOB_STATUS = EnumTable(
    service_pb.JobStatus,
    {
        service_pb.JOB_STATUS_ACTIVE: JobStatus.ACTIVE,
        service_pb.JOB_STATUS_PAUSED: JobStatus.PAUSED,
        service_pb.JOB_STATUS_DELETED: JobStatus.DELETED,
    },
    domain=JobStatus,
    list_names=True,
)
SOURCE_TYPE = EnumTable(
    pb.SourceType,
    {
        pb.SOURCE_TYPE_CONVERSATION: SourceType.CONVERSATION,
        pb.SOURCE_TYPE_API: SourceType.API,
        pb.SOURCE_TYPE_SCHEDULED_JOB: SourceType.SCHEDULED_JOB,
        pb.SOURCE_TYPE_MEMORY_REVIEWER: SourceType.MEMORY_REVIEWER,
    },
    domain=SourceType,
)
# A memory source's state: the same values as a job's status (only jobs are ever paused).
SOURCE_STATE = EnumTable(
    pb.SourceState,
    {
        pb.SOURCE_STATE_ACTIVE: JobStatus.ACTIVE,
        pb.SOURCE_STATE_PAUSED: JobStatus.PAUSED,
        pb.SOURCE_STATE_DELETED: JobStatus.DELETED,
    },
    domain=JobStatus,
)
JOB_RUN_OUTCOME = EnumTable(
    service_pb.JobRunOutcome,
    {
        service_pb.JOB_RUN_OUTCOME_SUCCEEDED: RunOutcome.SUCCEEDED,
        service_pb.JOB_RUN_OUTCOME_FAILED: RunOutcome.FAILED,
    },
    domain=RunOutcome,
    list_names=True,
)
REVIEW_STATUS = EnumTable(
    service_pb.ReviewStatus,
    {
        service_pb.REVIEW_STATUS_OK: ReviewStatus.OK,
        service_pb.REVIEW_STATUS_NOTHING_TO_SAVE: ReviewStatus.NOTHING_TO_SAVE,
        service_pb.REVIEW_STATUS_NOTHING_TO_SAVE_PROSE: ReviewStatus.NOTHING_TO_SAVE_PROSE,
        service_pb.REVIEW_STATUS_SKIPPED: ReviewStatus.SKIPPED,
        service_pb.REVIEW_STATUS_FAILED: ReviewStatus.FAILED,
    },
    domain=ReviewStatus,
)
CONTEXT_PART_KIND = EnumTable(
    compaction_pb.ContextPartKind,
    {
        compaction_pb.CONTEXT_PART_KIND_MEMORY_CONTEXT: PartKind.MEMORY_CONTEXT,
        compaction_pb.CONTEXT_PART_KIND_WORKING_MEMORY: PartKind.WORKING_MEMORY,
        compaction_pb.CONTEXT_PART_KIND_RECENT_ENTRIES: PartKind.RECENT_ENTRIES,
        compaction_pb.CONTEXT_PART_KIND_CHECKPOINT_SUMMARY: PartKind.CHECKPOINT_SUMMARY,
        compaction_pb.CONTEXT_PART_KIND_MESSAGE: PartKind.MESSAGE,
        compaction_pb.CONTEXT_PART_KIND_RECALLED: PartKind.RECALLED,
    },
    domain=PartKind,
)
COMPACTION_OUTCOME = EnumTable(
    compaction_pb.CompactionOutcome,
    {
        compaction_pb.COMPACTION_OUTCOME_COMPACTED: Outcome.COMPACTED,
        compaction_pb.COMPACTION_OUTCOME_NOTHING_TO_COMPACT: Outcome.NOTHING_TO_COMPACT,
        compaction_pb.COMPACTION_OUTCOME_CONVERSATION_CHANGED: Outcome.CONVERSATION_CHANGED,
        compaction_pb.COMPACTION_OUTCOME_FAILED: Outcome.FAILED,
        compaction_pb.COMPACTION_OUTCOME_SKIPPED: Outcome.SKIPPED,
    },
    domain=Outcome,
)
SPEAKER = EnumTable(
    service_pb.Speaker,
    {service_pb.SPEAKER_USER: Speaker.USER, service_pb.SPEAKER_ASSISTANT: Speaker.ASSISTANT},
    domain=Speaker,
)
ACTIVITY_BUCKET = EnumTable(
    service_pb.ActivityBucket,
    {
        service_pb.ACTIVITY_BUCKET_UNSPECIFIED: Bucket.DAY,
        service_pb.ACTIVITY_BUCKET_HOUR: Bucket.HOUR,
        service_pb.ACTIVITY_BUCKET_DAY: Bucket.DAY,
    },
    domain=Bucket,
)
TABLES: dict[str, EnumTable[Any, Any]] = {
    name: table for name, table in dict(globals()).items() if isinstance(table, EnumTable)
}
