"""memoryd.v2 and memoryd.v1: every v1 RPC placed in a v2 service, their messages identical field
for field, and both answering every RPC the same way through gRPC, HTTP/JSON and grpcurl."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, EnumDescriptor, MethodDescriptor

from memoryd.api import contract
from memoryd.testing.server_process import ServerProcess
from memoryd_client.v1 import access_pb2 as v1_access_pb2
from memoryd_client.v2 import access_pb2 as v2_access_pb2
from tests.helpers import curl
from tests.review_helpers import eventually

HTTP_ON = '[memoryd.http]\nlisten = "127.0.0.1:0"\n'
CURRENT = {method.name: method for method in contract.methods()}
LEGACY = {method.name: method for method in contract.legacy_methods()}


# --- the contract --------------------------------------------------------------------------------


def test_every_v1_rpc_is_placed_in_one_v2_service() -> None:
    assert len(CURRENT) == len(list(contract.methods())) == 46, "an RPC name is in two services"
    # memoryd.v1 serves every RPC but those added after it froze.
    assert set(CURRENT) - set(LEGACY) == {"PurgeMessages"}
    routes = contract.routes()
    assert len(routes) == len(LEGACY) == 45
    for legacy, current in routes.items():
        assert legacy.startswith("/memoryd.v1.")
        assert current.startswith("/memoryd.v2.")
        assert legacy.rpartition("/")[2] == current.rpartition("/")[2]


def test_each_service_is_its_own_file_named_after_it() -> None:
    for service in contract.SERVICES:
        file = service.messages.DESCRIPTOR
        stem = service.descriptor.name.removesuffix("Service").lower()
        assert file.name == f"memoryd/v2/{stem}_service.proto", file.name
        assert list(file.services_by_name) == [service.descriptor.name]


def _shape(descriptor: Descriptor | EnumDescriptor) -> descriptor_pb2.DescriptorProto | Any:
    """A message's or enum's descriptor with its package taken out and its options cleared (the
    options' extensions are numbered per package; guest_ignored is compared on its own)."""
    proto: Any = (
        descriptor_pb2.DescriptorProto()
        if isinstance(descriptor, Descriptor)
        else descriptor_pb2.EnumDescriptorProto()
    )
    descriptor.CopyToProto(proto)
    text = proto.SerializeToString().replace(b".memoryd.v1.", b".memoryd.v2.")
    proto = type(proto).FromString(text)
    for field in getattr(proto, "field", ()):
        field.ClearField("options")
    stack = list(getattr(proto, "nested_type", ()))
    while stack:
        nested = stack.pop()
        for field in nested.field:
            field.ClearField("options")
        stack.extend(nested.nested_type)
    return proto


def _reachable(root: Descriptor) -> Iterator[Descriptor | EnumDescriptor]:
    """`root` and every message and enum of memoryd its fields reach."""
    seen: set[str] = set()
    stack: list[Descriptor | EnumDescriptor] = [root]
    while stack:
        item = stack.pop()
        if item.full_name in seen:
            continue
        seen.add(item.full_name)
        yield item
        if isinstance(item, Descriptor):
            for field in item.fields:
                found = field.message_type or field.enum_type
                if found is not None and found.full_name.startswith("memoryd."):
                    stack.append(found)


def _guest_ignored(descriptor: Descriptor, extension: Any) -> list[str]:
    return [field.name for field in descriptor.fields if field.GetOptions().Extensions[extension]]


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_v2_messages_are_v1_field_for_field(name: str) -> None:
    old, new = LEGACY[name], CURRENT[name]
    assert (old.client_streaming, old.server_streaming) == (
        new.client_streaming,
        new.server_streaming,
    )
    assert old.GetOptions().idempotency_level == new.GetOptions().idempotency_level
    for old_root, new_root in (
        (old.input_type, new.input_type),
        (old.output_type, new.output_type),
    ):
        assert old_root.name == new_root.name
        olds = {item.name: item for item in _reachable(old_root) if item.containing_type is None}
        news = {item.name: item for item in _reachable(new_root) if item.containing_type is None}
        assert set(olds) == set(news), name
        for type_name, item in olds.items():
            assert _shape(item) == _shape(news[type_name]), type_name
            counterpart = news[type_name]
            if isinstance(item, Descriptor) and isinstance(counterpart, Descriptor):
                assert _guest_ignored(item, v1_access_pb2.guest_ignored) == _guest_ignored(
                    counterpart, v2_access_pb2.guest_ignored
                ), type_name


def _copied(message: Descriptor, change: Callable[[descriptor_pb2.DescriptorProto], None]) -> Any:
    """`message` copied into a pool of its own (as memoryd.v1 is beside memoryd.v2), after
    `change` to its descriptor."""
    file = descriptor_pb2.FileDescriptorProto(
        name="probe.proto", package="memoryd.v1", syntax="proto3"
    )
    copy = file.message_type.add()
    message.CopyToProto(copy)
    change(copy)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool.FindMessageTypeByName(f"memoryd.v1.{message.name}")


def test_the_comparison_tells_a_copy_from_a_changed_copy() -> None:
    """The comparison can fail: a copy in another package compares equal, and a copy with a
    field renumbered, renamed or retyped does not."""
    message = CURRENT["ListOwners"].input_type

    def renumbered(proto: descriptor_pb2.DescriptorProto) -> None:
        proto.field[1].number += 100

    def renamed(proto: descriptor_pb2.DescriptorProto) -> None:
        proto.field[0].name = "agent"
        proto.field[0].json_name = "agent"

    def retyped(proto: descriptor_pb2.DescriptorProto) -> None:
        proto.field[1].type = descriptor_pb2.FieldDescriptorProto.TYPE_INT64

    assert _shape(_copied(message, lambda _proto: None)) == _shape(message)
    for change in (renumbered, renamed, retyped):
        assert _shape(_copied(message, change)) != _shape(message), change.__name__


# --- both versions through the real server --------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("v2") / "home", config=HTTP_ON).start()
    yield server
    assert server.stop() == 0, server.output


def _unary(method: MethodDescriptor) -> bool:
    return not (method.client_streaming or method.server_streaming)


def _request_json(name: str, chat: dict[str, str]) -> dict[str, Any]:
    """A request every RPC reads: its conversation where it has one, else nothing."""
    fields = {field.name for field in CURRENT[name].input_type.fields}
    return {"conversation": chat} if "conversation" in fields else {}


def _path(method: MethodDescriptor) -> str:
    return contract.path(method)


def _grpcurl(grpcurl: str, address: str, path: str, body: str) -> tuple[int, str, str]:
    result = subprocess.run(
        [grpcurl, "-plaintext", "-d", body, address, path.lstrip("/")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return result.returncode, result.stdout, result.stderr


def _status_line(stderr: str) -> str:
    """grpcurl's `Code: ...` and `Message: ...` lines (the reference id of an INTERNAL aside)."""
    lines = (line.strip() for line in stderr.splitlines())
    return "\n".join(line for line in lines if line.startswith(("Code:", "Message:")))


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs from call to call (times, ids, versions)."""
    volatile = ("At", "Time", "Id", "Version", "version", "_at", "Token", "Ms", "Seconds", "Uptime")
    return {
        key: _comparable(value) if isinstance(value, dict) else value
        for key, value in answer.items()
        if not any(part in key for part in volatile)
    }


def test_every_unary_rpc_answers_alike_on_both_versions_over_http(served: ServerProcess) -> None:
    address = str(served.events("serving")[-1]["http"])
    chat = {"channel": "v2", "chatId": uuid.uuid4().hex[:8]}
    for name, legacy in LEGACY.items():
        if not _unary(legacy) or name in ("ReindexEmbeddings", "PurgeConversation"):
            continue
        body = _request_json(name, chat)
        new_status, new = curl(address, _path(CURRENT[name]), body)
        old_status, old = curl(address, _path(legacy), body)
        assert new_status not in (404, 501), name
        assert "unimplemented" not in json.dumps(new), name
        assert (old_status, _comparable(old)) == (new_status, _comparable(new)), name


def test_every_rpc_answers_alike_on_both_versions_through_grpcurl(
    grpcurl: str, served: ServerProcess
) -> None:
    chat = {"channel": "v2", "chat_id": uuid.uuid4().hex[:8]}
    seen: set[str] = set()
    for name, legacy in LEGACY.items():
        if name in ("ReindexEmbeddings", "PurgeConversation", "StreamTranscript", "ImportData"):
            continue  # they change what the next call sees; their own checks are below
        body = json.dumps(_request_json(name, chat))
        new = _grpcurl(grpcurl, served.address, _path(CURRENT[name]), body)
        old = _grpcurl(grpcurl, served.address, _path(legacy), body)
        for _code, _out, err in (new, old):
            assert "Unimplemented" not in err, (name, err)
            assert "not found" not in err.lower(), (name, err)
        if new[0] == 0:
            assert old[0] == 0, (name, old)
            seen.add("OK")
        else:
            assert _status_line(new[2]), (name, new)
            assert _status_line(old[2]) == _status_line(new[2]), name
            seen.add(_status_line(new[2]).splitlines()[0])
    assert {"OK", "Code: InvalidArgument"} <= seen, seen


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_writes_that_change_the_next_answer_run_on_both_versions(
    grpcurl: str, served: ServerProcess, version: str
) -> None:
    """PurgeConversation, ReindexEmbeddings, StreamTranscript and ImportData, each once per
    version, through grpcurl (streams too)."""
    chat = {"channel": "v2", "chat_id": f"{version}-{uuid.uuid4().hex[:8]}"}
    methods = LEGACY if version == "v1" else CURRENT
    session = f"{version}-{uuid.uuid4().hex[:8]}"
    code, out, err = _grpcurl(
        grpcurl,
        served.address,
        _path(methods["StreamTranscript"]),
        json.dumps({"open": {"device_id": "kiosk", "session_id": session}})
        + json.dumps({"segment": {"seq": 1, "speaker": "SPEAKER_USER", "text": "spoken"}})
        + json.dumps({"end": {}}),
    )
    assert code == 0, err
    assert '"committed_seq": "1"' in out, out
    code, out, err = _grpcurl(
        grpcurl,
        served.address,
        _path(methods["AppendMessages"]),
        json.dumps({"conversation": chat, "messages": [{"role": "ROLE_USER", "content": "hi"}]}),
    )
    assert code == 0, err
    code, out, err = _grpcurl(
        grpcurl,
        served.address,
        _path(methods["PurgeConversation"]),
        json.dumps({"conversation": chat}),
    )
    assert code == 0, err
    assert '"conversation_deleted": true' in out, out
    code, out, err = _grpcurl(
        grpcurl, served.address, _path(methods["ImportData"]), json.dumps({"lines": []})
    )
    assert "Message: the import is empty" in err, err  # the handler read the stream
    code, out, err = _grpcurl(grpcurl, served.address, _path(methods["ReindexEmbeddings"]), "{}")
    assert code == 0, err


def test_reflection_describes_both_versions(grpcurl: str, served: ServerProcess) -> None:
    listed = subprocess.run(
        [grpcurl, "-plaintext", served.address, "list"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert set(contract.service_names()) <= set(listed), listed
    described = subprocess.run(
        [grpcurl, "-plaintext", served.address, "describe", "memoryd.v2.AdminService"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "AdminService is the operator's" in described
    assert "rpc PurgeOwner" in described


def test_metrics_count_each_version_under_its_service(served: ServerProcess) -> None:
    address = str(served.events("serving")[-1]["http"])
    for path in (_path(CURRENT["GetConversation"]), _path(LEGACY["GetConversation"])):
        curl(address, path, {"conversation": {"channel": "v2", "chatId": "metrics"}})
    result = subprocess.run(
        [shutil.which("curl") or "curl", "-sS", f"http://{address}/metrics"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = [line for line in result.stdout.splitlines() if "GetConversation" in line]
    assert any('service="memoryd.v1.MemoryService"' in line for line in lines), lines
    assert any('service="memoryd.v2.ConversationService"' in line for line in lines), lines


async def test_a_v1_call_is_logged_under_its_own_path(served: ServerProcess) -> None:
    with grpc.insecure_channel(served.address) as channel:
        for method in (CURRENT["ListOwners"], LEGACY["ListOwners"]):
            unary: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(_path(method))
            unary(b"", timeout=30)
    wanted = {_path(CURRENT["ListOwners"]), _path(LEGACY["ListOwners"])}
    # The server's log is written by a thread of its own: wait for the lines.
    await eventually(lambda: wanted <= {event["method"] for event in served.events("rpc")})
