"""The committed Python client matches protos/, and its public surface is pinned."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import memoryd_client
from tests.conftest import ROOT


def test_generated_code_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_notices_edited_missing_and_extra_files(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_protos  # noqa: PLC0415 - a script, imported for its functions
    finally:
        sys.path.pop(0)
    committed = ROOT / "clients" / "python" / "memoryd_client" / "v1"
    copy = tmp_path / "v1"
    shutil.copytree(committed, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with tempfile.TemporaryDirectory() as scratch:
        fresh = gen_protos.generate(Path(scratch))
    assert gen_protos.stale_files(fresh, copy) == []
    edited = copy / "records_pb2.py"
    edited.write_text(edited.read_text() + "# edited\n")
    (copy / "memory_service_pb2.pyi").unlink()
    (copy / "leftover_pb2.py").write_text("")
    assert gen_protos.stale_files(fresh, copy) == [
        "leftover_pb2.py",
        "memory_service_pb2.pyi",
        "records_pb2.py",
    ]


def test_public_surface() -> None:
    assert sorted(memoryd_client.__all__) == [
        "APPEND_OUTCOME_DUPLICATE",
        "APPEND_OUTCOME_SKIPPED_BLANK",
        "APPEND_OUTCOME_STORED",
        "APPEND_OUTCOME_UNSPECIFIED",
        "ARCHIVED_FILTER_ACTIVE",
        "ARCHIVED_FILTER_ALL",
        "ARCHIVED_FILTER_ARCHIVED",
        "ARCHIVED_FILTER_UNSPECIFIED",
        "AgentScope",
        "AppendMessagesRequest",
        "AppendMessagesResponse",
        "AppendOutcome",
        "AppendResult",
        "ArchiveMemoryRequest",
        "ArchiveMemoryResponse",
        "ArchivedFilter",
        "CATEGORY_CONTEXT",
        "CATEGORY_DIRECTIVE",
        "CATEGORY_FACT",
        "CATEGORY_GOAL",
        "CATEGORY_IDENTITY",
        "CATEGORY_INTEREST",
        "CATEGORY_JOB_RUN_SUMMARY",
        "CATEGORY_PREFERENCE",
        "CATEGORY_UNSPECIFIED",
        "COMPACTION_OUTCOME_COMPACTED",
        "COMPACTION_OUTCOME_CONVERSATION_CHANGED",
        "COMPACTION_OUTCOME_FAILED",
        "COMPACTION_OUTCOME_NOTHING_TO_COMPACT",
        "COMPACTION_OUTCOME_SKIPPED",
        "COMPACTION_OUTCOME_UNSPECIFIED",
        "CONTEXT_PART_KIND_CHECKPOINT_SUMMARY",
        "CONTEXT_PART_KIND_MEMORY_CONTEXT",
        "CONTEXT_PART_KIND_MESSAGE",
        "CONTEXT_PART_KIND_RECENT_ENTRIES",
        "CONTEXT_PART_KIND_UNSPECIFIED",
        "CONTEXT_PART_KIND_WORKING_MEMORY",
        "Category",
        "Checkpoint",
        "ClearConversationRequest",
        "ClearConversationResponse",
        "CommitTurnRequest",
        "CommitTurnResponse",
        "CompactRequest",
        "CompactResponse",
        "CompactionOutcome",
        "CompactionServiceStub",
        "ComposeContextRequest",
        "ComposeContextResponse",
        "ContextPart",
        "ContextPartKind",
        "Conversation",
        "ConversationReview",
        "DEFAULT_ADDRESS",
        "DeleteMemoryRequest",
        "DeleteMemoryResponse",
        "DiffRevisionsRequest",
        "DiffRevisionsResponse",
        "ExportDataRequest",
        "ExportDataResponse",
        "FinishJobRunRequest",
        "FinishJobRunResponse",
        "GetCompactionStateRequest",
        "GetCompactionStateResponse",
        "GetConversationRequest",
        "GetConversationResponse",
        "GetMemoryRequest",
        "GetMemoryResponse",
        "GetPromptContextRequest",
        "GetPromptContextResponse",
        "GetReviewStateRequest",
        "GetReviewStateResponse",
        "GetRevisionRequest",
        "GetRevisionResponse",
        "HistoryHit",
        "ImportDataRequest",
        "ImportDataResponse",
        "ImportedRecords",
        "IngestMessagesRequest",
        "IngestMessagesResponse",
        "IngestRejection",
        "IngestedMessage",
        "JOB_RUN_OUTCOME_FAILED",
        "JOB_RUN_OUTCOME_SUCCEEDED",
        "JOB_RUN_OUTCOME_UNSPECIFIED",
        "JOB_STATUS_ACTIVE",
        "JOB_STATUS_DELETED",
        "JOB_STATUS_PAUSED",
        "JOB_STATUS_UNSPECIFIED",
        "JobRunOutcome",
        "JobStatus",
        "ListMemoriesRequest",
        "ListMemoriesResponse",
        "ListMemorySourcesRequest",
        "ListMemorySourcesResponse",
        "ListMessagesRequest",
        "ListMessagesResponse",
        "ListResourcesRequest",
        "ListResourcesResponse",
        "ListRevisionsRequest",
        "ListRevisionsResponse",
        "ListedMemory",
        "MATCH_KIND_SUBSTRING",
        "MATCH_KIND_UNSPECIFIED",
        "MATCH_KIND_WORD",
        "MatchKind",
        "Memory",
        "MemoryProvenance",
        "MemoryServiceStub",
        "MemorySource",
        "Message",
        "NewMessage",
        "OwnerScope",
        "PROMPT_TARGET_MEMORY_MD",
        "PROMPT_TARGET_NONE",
        "PROMPT_TARGET_UNSPECIFIED",
        "PROMPT_TARGET_USER_MD",
        "PreflightRequest",
        "PreflightResponse",
        "PromptFileUsage",
        "PromptTarget",
        "PurgeConversationRequest",
        "PurgeConversationResponse",
        "RECALL_SCOPE_ALL",
        "RECALL_SCOPE_CURRENT",
        "RECALL_SCOPE_OWNER",
        "RECALL_SCOPE_UNSPECIFIED",
        "RECALL_SOURCE_ALL",
        "RECALL_SOURCE_HISTORY",
        "RECALL_SOURCE_MEMORIES",
        "RECALL_SOURCE_UNSPECIFIED",
        "RESOURCE_TYPE_CHECKPOINT",
        "RESOURCE_TYPE_MEMORY_MD",
        "RESOURCE_TYPE_UNSPECIFIED",
        "RESOURCE_TYPE_USER_MD",
        "REVIEW_STATUS_FAILED",
        "REVIEW_STATUS_NOTHING_TO_SAVE",
        "REVIEW_STATUS_NOTHING_TO_SAVE_PROSE",
        "REVIEW_STATUS_OK",
        "REVIEW_STATUS_SKIPPED",
        "REVIEW_STATUS_UNSPECIFIED",
        "ROLE_ASSISTANT",
        "ROLE_SYSTEM",
        "ROLE_TOOL",
        "ROLE_UNSPECIFIED",
        "ROLE_USER",
        "RecallHit",
        "RecallRequest",
        "RecallResponse",
        "RecallScope",
        "RecallSource",
        "Resource",
        "ResourceRef",
        "ResourceRevision",
        "ResourceType",
        "RestoreMemoryRequest",
        "RestoreMemoryResponse",
        "ReviewNowRequest",
        "ReviewNowResponse",
        "ReviewRun",
        "ReviewStatus",
        "Role",
        "RollbackResourceRequest",
        "RollbackResourceResponse",
        "SCOPE_TYPE_AGENT",
        "SCOPE_TYPE_CONVERSATION",
        "SCOPE_TYPE_JOB",
        "SCOPE_TYPE_OWNER",
        "SCOPE_TYPE_UNSPECIFIED",
        "SPEAKER_ASSISTANT",
        "SPEAKER_UNSPECIFIED",
        "SPEAKER_USER",
        "ScopeType",
        "SearchHistoryRequest",
        "SearchHistoryResponse",
        "SetJobStatusRequest",
        "SetJobStatusResponse",
        "SkippedOperation",
        "Speaker",
        "StoreMemoryRequest",
        "StoreMemoryResponse",
        "StreamTranscriptRequest",
        "StreamTranscriptResponse",
        "TRUST_GUEST",
        "TRUST_OPERATOR",
        "TRUST_UNSPECIFIED",
        "TranscriptEnd",
        "TranscriptOpen",
        "TranscriptSegment",
        "TranscriptTotals",
        "Trust",
        "TurnUsage",
        "UpdateMemoryRequest",
        "UpdateMemoryResponse",
        "connect",
    ]
    for name in memoryd_client.__all__:
        assert hasattr(memoryd_client, name), name


def test_wire_names_are_the_proto_package() -> None:
    # The Python modules were moved to memoryd_client.v1; the wire contract stays memoryd.v1.
    descriptor = memoryd_client.MemoryServiceStub.__module__
    assert descriptor == "memoryd_client.v1.memory_service_pb2_grpc"
    assert memoryd_client.Conversation.DESCRIPTOR.full_name == "memoryd.v1.Conversation"
    service = memoryd_client.AppendMessagesRequest.DESCRIPTOR.file.services_by_name["MemoryService"]
    assert service.full_name == "memoryd.v1.MemoryService"
