"""The committed Python client matches protos/, and its public surface is pinned."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import memoryd_client
from memoryd_client.client import APPEND_METHOD, keyed_append
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
    from scripts import gen_protos  # noqa: PLC0415 - a script, imported for its functions

    committed = ROOT / "clients" / "python" / "memoryd_client"
    copy = tmp_path / "memoryd_client"
    for package in gen_protos.PACKAGES:
        shutil.copytree(
            committed / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    with tempfile.TemporaryDirectory() as scratch:
        fresh = gen_protos.generate(Path(scratch))
    assert gen_protos.stale_files(fresh, copy) == []
    edited = copy / "v2" / "records_pb2.py"
    edited.write_text(edited.read_text() + "# edited\n")
    (copy / "v1" / "memory_service_pb2.pyi").unlink()
    (copy / "v2" / "leftover_pb2.py").write_text("")
    assert gen_protos.stale_files(fresh, copy) == [
        "v1/memory_service_pb2.pyi",
        "v2/leftover_pb2.py",
        "v2/records_pb2.py",
    ]


def test_public_surface() -> None:
    """Every message, enum, enum value and stub of the contract, and the conveniences: nothing
    more, nothing less (the generated part is read from the descriptors, not listed by hand)."""
    from memoryd.api import contract  # noqa: PLC0415
    from memoryd_client.v2 import records_pb2  # noqa: PLC0415

    expected = set()
    for module in (records_pb2, *(service.messages for service in contract.SERVICES)):
        expected |= set(module.DESCRIPTOR.message_types_by_name)
        for enum in module.DESCRIPTOR.enum_types_by_name.values():
            expected |= {enum.name, *(value.name for value in enum.values)}
        expected |= {f"{name}Stub" for name in module.DESCRIPTOR.services_by_name}
    conveniences = {
        "DEFAULT_ADDRESS",
        "DEFAULT_TIMEOUT_SECONDS",
        "ConversationClient",
        "SyncConversationClient",
        "Stubs",
        "SyncStubs",
        "Transcript",
        "TranscriptError",
        "ErrorDetails",
        "error_details",
        "assistant",
        "connect",
        "connect_sync",
        "idempotent_methods",
        "service_config",
        "user",
    }
    assert len(memoryd_client.__all__) == len(set(memoryd_client.__all__))
    assert set(memoryd_client.__all__) == expected | conveniences
    assert {
        "AppendMessagesRequest",
        "ROLE_USER",
        "ConversationServiceStub",
        "AdminServiceStub",
        "ExportDataRequest",
    } <= expected
    for name in memoryd_client.__all__:
        assert hasattr(memoryd_client, name), name


def test_writes_are_retried_only_on_a_cancel_before_the_headers() -> None:
    retried = memoryd_client.idempotent_methods()
    assert ("memoryd.v2.ConversationService", "ListMessages") in retried
    assert ("memoryd.v2.ContextService", "ComposeContext") in retried
    # memoryd.v1's paths, still served, are retried alike.
    assert ("memoryd.v1.MemoryService", "ListMessages") in retried
    assert ("memoryd.v1.CompactionService", "ComposeContext") in retried
    for write in ("AppendMessages", "CommitTurn", "StreamTranscript"):
        assert ("memoryd.v2.ConversationService", write) not in retried
        assert ("memoryd.v1.MemoryService", write) not in retried
    assert ("memoryd.v2.MemoryService", "StoreMemory") not in retried
    assert ("memoryd.v2.AdminService", "ImportData") not in retried
    config = json.loads(memoryd_client.service_config())
    by_path = {
        (name["service"], name["method"]): entry["retryPolicy"]["retryableStatusCodes"]
        for entry in config["methodConfig"]
        for name in entry["name"]
    }
    assert sum(code == ["UNAVAILABLE", "CANCELLED"] for code in by_path.values()) == len(retried)
    codes = {method: code for (_, method), code in by_path.items()}
    assert codes["ListMessages"] == ["UNAVAILABLE", "CANCELLED"]
    # Every other unary call only on a CANCELLED before the server's headers: one that never
    # ran (the server sends them before a stop could cut such a call: memoryd.api.commitment).
    for write in ("AppendMessages", "CommitTurn", "StoreMemory", "ClearConversation"):
        assert codes[write] == ["CANCELLED"], write
    assert "StreamTranscript" not in codes
    assert "ImportData" not in codes


def test_an_append_is_retried_only_when_every_message_has_a_client_message_id() -> None:
    def request(*keys: str) -> memoryd_client.AppendMessagesRequest:
        return memoryd_client.AppendMessagesRequest(
            messages=[memoryd_client.NewMessage(content="hi", client_message_id=k) for k in keys]
        )

    assert keyed_append(APPEND_METHOD, request("a", "b"))
    assert not keyed_append(APPEND_METHOD, request("a", ""))
    assert not keyed_append(APPEND_METHOD, request())
    assert not keyed_append("/memoryd.v2.ConversationService/CommitTurn", request("a"))
    assert not keyed_append(APPEND_METHOD, request("a").SerializeToString())  # raw bytes: unread


def test_wire_names_are_the_proto_package() -> None:
    # The Python modules live in memoryd_client.v2; the wire contract stays memoryd.v2.
    descriptor = memoryd_client.ConversationServiceStub.__module__
    assert descriptor == "memoryd_client.v2.conversation_service_pb2_grpc"
    assert memoryd_client.Conversation.DESCRIPTOR.full_name == "memoryd.v2.Conversation"
    file = memoryd_client.AppendMessagesRequest.DESCRIPTOR.file
    assert file.services_by_name["ConversationService"].full_name == (
        "memoryd.v2.ConversationService"
    )
