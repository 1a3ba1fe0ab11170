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
from memoryd_client.v2 import context_service_pb2 as context_pb
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import memory_service_pb2 as memory_pb
from memoryd_client.v2 import overview_service_pb2 as overview_pb
from memoryd_client.v2 import records_pb2 as records_pb

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
    records_pb.Role,
    {
        records_pb.ROLE_USER: Role.USER,
        records_pb.ROLE_ASSISTANT: Role.ASSISTANT,
        records_pb.ROLE_SYSTEM: Role.SYSTEM,
        records_pb.ROLE_TOOL: Role.TOOL,
    },
    domain=Role,
)
TRUST = EnumTable(
    records_pb.Trust,
    {
        records_pb.TRUST_UNSPECIFIED: Trust.OPERATOR,
        records_pb.TRUST_OPERATOR: Trust.OPERATOR,
        records_pb.TRUST_GUEST: Trust.GUEST,
    },
    domain=Trust,
)
# A message's trust: unset means "the use case decides" (operator, or the turn's speaker).
MESSAGE_TRUST = EnumTable(
    records_pb.Trust,
    {
        records_pb.TRUST_UNSPECIFIED: None,
        records_pb.TRUST_OPERATOR: Trust.OPERATOR,
        records_pb.TRUST_GUEST: Trust.GUEST,
    },
    domain=Trust,
)
CATEGORY = EnumTable(
    records_pb.Category,
    {
        records_pb.CATEGORY_IDENTITY: Category.IDENTITY,
        records_pb.CATEGORY_PREFERENCE: Category.PREFERENCE,
        records_pb.CATEGORY_INTEREST: Category.INTEREST,
        records_pb.CATEGORY_GOAL: Category.GOAL,
        records_pb.CATEGORY_CONTEXT: Category.CONTEXT,
        records_pb.CATEGORY_DIRECTIVE: Category.DIRECTIVE,
        records_pb.CATEGORY_FACT: Category.FACT,
        records_pb.CATEGORY_JOB_RUN_SUMMARY: Category.JOB_RUN_SUMMARY,
    },
    domain=Category,
    hint="use identity, preference, interest, goal, context or directive",
)
SCOPE_TYPE = EnumTable(
    records_pb.ScopeType,
    {
        records_pb.SCOPE_TYPE_OWNER: ScopeType.OWNER,
        records_pb.SCOPE_TYPE_AGENT: ScopeType.AGENT,
        records_pb.SCOPE_TYPE_CONVERSATION: ScopeType.CONVERSATION,
        records_pb.SCOPE_TYPE_JOB: ScopeType.JOB,
    },
    domain=ScopeType,
)
PROMPT_TARGET = EnumTable(
    records_pb.PromptTarget,
    {
        records_pb.PROMPT_TARGET_NONE: PromptTarget.NONE,
        records_pb.PROMPT_TARGET_USER_MD: PromptTarget.USER_MD,
        records_pb.PROMPT_TARGET_MEMORY_MD: PromptTarget.MEMORY_MD,
    },
    domain=PromptTarget,
)
RESOURCE_TYPE = EnumTable(
    records_pb.ResourceType,
    {
        records_pb.RESOURCE_TYPE_USER_MD: ResourceType.USER_MD,
        records_pb.RESOURCE_TYPE_MEMORY_MD: ResourceType.MEMORY_MD,
        records_pb.RESOURCE_TYPE_CHECKPOINT: ResourceType.CHECKPOINT,
    },
    domain=ResourceType,
)
APPEND_OUTCOME = EnumTable(
    conversation_pb.AppendOutcome,
    {
        conversation_pb.APPEND_OUTCOME_STORED: AppendOutcome.STORED,
        conversation_pb.APPEND_OUTCOME_DUPLICATE: AppendOutcome.DUPLICATE,
        conversation_pb.APPEND_OUTCOME_SKIPPED_BLANK: AppendOutcome.SKIPPED_BLANK,
    },
    domain=AppendOutcome,
)
# Word matches rank by relevance; substring matches (partial words, other scripts) by time;
# semantic matches by the nearness of their vectors.
MATCH_KIND = EnumTable(
    records_pb.MatchKind,
    {
        records_pb.MATCH_KIND_WORD: MatchKind.WORD,
        records_pb.MATCH_KIND_SUBSTRING: MatchKind.SUBSTRING,
        records_pb.MATCH_KIND_SEMANTIC: MatchKind.SEMANTIC,
        records_pb.MATCH_KIND_NEIGHBOUR: MatchKind.NEIGHBOUR,
    },
    domain=MatchKind,
)
SEARCH_MODE = EnumTable(
    records_pb.SearchMode,
    {
        records_pb.SEARCH_MODE_UNSPECIFIED: SearchMode.DEFAULT,
        records_pb.SEARCH_MODE_LEXICAL: SearchMode.LEXICAL,
        records_pb.SEARCH_MODE_SEMANTIC: SearchMode.SEMANTIC,
        records_pb.SEARCH_MODE_HYBRID: SearchMode.HYBRID,
    },
    # SearchMode.DEFAULT has no number of its own: leaving the field unset means it.
    domain=None,
)
ARCHIVED_FILTER: EnumTable[memory_pb.ArchivedFilter.ValueType, bool | None] = EnumTable(
    memory_pb.ArchivedFilter,
    {
        memory_pb.ARCHIVED_FILTER_UNSPECIFIED: False,
        memory_pb.ARCHIVED_FILTER_ACTIVE: False,
        memory_pb.ARCHIVED_FILTER_ARCHIVED: True,
        memory_pb.ARCHIVED_FILTER_ALL: None,
    },
    domain=None,
)
RECALL_SCOPE = EnumTable(
    memory_pb.RecallScope,
    {
        memory_pb.RECALL_SCOPE_UNSPECIFIED: RecallScope.CURRENT,
        memory_pb.RECALL_SCOPE_CURRENT: RecallScope.CURRENT,
        memory_pb.RECALL_SCOPE_OWNER: RecallScope.OWNER,
        memory_pb.RECALL_SCOPE_ALL: RecallScope.ALL,
    },
    domain=RecallScope,
)
RECALL_SOURCE = EnumTable(
    memory_pb.RecallSource,
    {
        memory_pb.RECALL_SOURCE_UNSPECIFIED: RecallSource.MEMORIES,
        memory_pb.RECALL_SOURCE_MEMORIES: RecallSource.MEMORIES,
        memory_pb.RECALL_SOURCE_HISTORY: RecallSource.HISTORY,
        memory_pb.RECALL_SOURCE_ALL: RecallSource.ALL,
    },
    domain=RecallSource,
)
JOB_STATUS = EnumTable(
    memory_pb.JobStatus,
    {
        memory_pb.JOB_STATUS_ACTIVE: JobStatus.ACTIVE,
        memory_pb.JOB_STATUS_PAUSED: JobStatus.PAUSED,
        memory_pb.JOB_STATUS_DELETED: JobStatus.DELETED,
    },
    domain=JobStatus,
    list_names=True,
)
SOURCE_TYPE = EnumTable(
    records_pb.SourceType,
    {
        records_pb.SOURCE_TYPE_CONVERSATION: SourceType.CONVERSATION,
        records_pb.SOURCE_TYPE_API: SourceType.API,
        records_pb.SOURCE_TYPE_SCHEDULED_JOB: SourceType.SCHEDULED_JOB,
        records_pb.SOURCE_TYPE_MEMORY_REVIEWER: SourceType.MEMORY_REVIEWER,
    },
    domain=SourceType,
)
# A memory source's state: the same values as a job's status (only jobs are ever paused).
SOURCE_STATE = EnumTable(
    records_pb.SourceState,
    {
        records_pb.SOURCE_STATE_ACTIVE: JobStatus.ACTIVE,
        records_pb.SOURCE_STATE_PAUSED: JobStatus.PAUSED,
        records_pb.SOURCE_STATE_DELETED: JobStatus.DELETED,
    },
    domain=JobStatus,
)
JOB_RUN_OUTCOME = EnumTable(
    memory_pb.JobRunOutcome,
    {
        memory_pb.JOB_RUN_OUTCOME_SUCCEEDED: RunOutcome.SUCCEEDED,
        memory_pb.JOB_RUN_OUTCOME_FAILED: RunOutcome.FAILED,
    },
    domain=RunOutcome,
    list_names=True,
)
REVIEW_STATUS = EnumTable(
    records_pb.ReviewStatus,
    {
        records_pb.REVIEW_STATUS_OK: ReviewStatus.OK,
        records_pb.REVIEW_STATUS_NOTHING_TO_SAVE: ReviewStatus.NOTHING_TO_SAVE,
        records_pb.REVIEW_STATUS_NOTHING_TO_SAVE_PROSE: ReviewStatus.NOTHING_TO_SAVE_PROSE,
        records_pb.REVIEW_STATUS_SKIPPED: ReviewStatus.SKIPPED,
        records_pb.REVIEW_STATUS_FAILED: ReviewStatus.FAILED,
    },
    domain=ReviewStatus,
)
CONTEXT_PART_KIND = EnumTable(
    context_pb.ContextPartKind,
    {
        context_pb.CONTEXT_PART_KIND_MEMORY_CONTEXT: PartKind.MEMORY_CONTEXT,
        context_pb.CONTEXT_PART_KIND_WORKING_MEMORY: PartKind.WORKING_MEMORY,
        context_pb.CONTEXT_PART_KIND_RECENT_ENTRIES: PartKind.RECENT_ENTRIES,
        context_pb.CONTEXT_PART_KIND_CHECKPOINT_SUMMARY: PartKind.CHECKPOINT_SUMMARY,
        context_pb.CONTEXT_PART_KIND_MESSAGE: PartKind.MESSAGE,
        context_pb.CONTEXT_PART_KIND_RECALLED: PartKind.RECALLED,
    },
    domain=PartKind,
)
COMPACTION_OUTCOME = EnumTable(
    context_pb.CompactionOutcome,
    {
        context_pb.COMPACTION_OUTCOME_COMPACTED: Outcome.COMPACTED,
        context_pb.COMPACTION_OUTCOME_NOTHING_TO_COMPACT: Outcome.NOTHING_TO_COMPACT,
        context_pb.COMPACTION_OUTCOME_CONVERSATION_CHANGED: Outcome.CONVERSATION_CHANGED,
        context_pb.COMPACTION_OUTCOME_FAILED: Outcome.FAILED,
        context_pb.COMPACTION_OUTCOME_SKIPPED: Outcome.SKIPPED,
    },
    domain=Outcome,
)
SPEAKER = EnumTable(
    conversation_pb.Speaker,
    {
        conversation_pb.SPEAKER_USER: Speaker.USER,
        conversation_pb.SPEAKER_ASSISTANT: Speaker.ASSISTANT,
    },
    domain=Speaker,
)
ACTIVITY_BUCKET = EnumTable(
    overview_pb.ActivityBucket,
    {
        overview_pb.ACTIVITY_BUCKET_UNSPECIFIED: Bucket.DAY,
        overview_pb.ACTIVITY_BUCKET_HOUR: Bucket.HOUR,
        overview_pb.ACTIVITY_BUCKET_DAY: Bucket.DAY,
    },
    domain=Bucket,
)
TABLES: dict[str, EnumTable[Any, Any]] = {
    name: table for name, table in dict(globals()).items() if isinstance(table, EnumTable)
}
