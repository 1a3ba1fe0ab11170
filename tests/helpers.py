"""Small helpers for calling the real server through the generated client."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import importlib.util
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import grpc
import pytest
from grpc_health.v1 import health_pb2_grpc

import memoryd_client as md
from memoryd.cli.main import main
from memoryd.data_directory import PROMPT_FILES_LOCK
from memoryd.testing import postgres


def user(content: str, **fields: Any) -> md.NewMessage:
    """A user message."""
    fields.setdefault("sender", "ada")
    return md.NewMessage(role=md.ROLE_USER, content=content, **fields)


def assistant(content: str, **fields: Any) -> md.NewMessage:
    """An assistant message."""
    fields.setdefault("sender", "assistant")
    return md.NewMessage(role=md.ROLE_ASSISTANT, content=content, **fields)


def said(chat: Sequence[tuple[str, str]], person: str) -> list[md.NewMessage]:
    """A chat of (sender, text) turns as messages: `person`'s from the user, the rest from the
    assistant; each with its index as client id."""
    return [
        (user if sender == person else assistant)(text, sender=sender, client_message_id=str(index))
        for index, (sender, text) in enumerate(chat)
    ]


async def append(
    memory: md.Stubs,
    conversation: md.Conversation,
    *messages: md.NewMessage,
    echo: bool = False,
) -> md.AppendMessagesResponse:
    """Append messages and return the response (with the stored rows when `echo`)."""
    return await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=conversation, messages=list(messages), echo_messages=echo
        )
    )


async def rpc_error(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    """Await a call that must fail, and return its error."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


def fresh_conversation(**fields: str) -> md.Conversation:
    """A conversation of an agent no other test uses (so its prompt files are its own)."""
    fields.setdefault("agent_id", f"agent-{uuid.uuid4().hex[:10]}")
    fields.setdefault("channel", "telegram")
    fields.setdefault("chat_id", f"chat-{uuid.uuid4().hex[:8]}")
    return md.Conversation(**fields)


def owner_of(conversation: md.Conversation) -> md.OwnerScope:
    """The agent and owner of a conversation, as an OwnerScope."""
    return md.OwnerScope(agent_id=conversation.agent_id, owner_id=conversation.owner_id)


async def store(
    memory: md.Stubs,
    conversation: md.Conversation,
    key: str,
    value: str,
    category: md.Category.ValueType = md.CATEGORY_UNSPECIFIED,
    **fields: Any,
) -> md.Memory:
    """StoreMemory from a conversation; returns the stored row."""
    response = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=conversation,
            key=key,
            value=value,
            category=category,
            **fields,
        )
    )
    return response.memory


def client_stream(
    address: str,
    path: str,
    requests: list[bytes],
    *,
    server_streaming: bool,
    metadata: tuple[tuple[str, str], ...] | None = None,
    timeout: float = 15,
) -> tuple[grpc.StatusCode, str, bytes]:
    """A client-streaming call through the synchronous client: (status, details, the first
    answer). The asyncio client reports INTERNAL ("Internal error from Core") instead of the
    server's status when one of its writes lands after the server ended the call, as a refusal
    does before reading anything (grpc/grpc#36066); a test of the server's status uses this."""
    with grpc.insecure_channel(address) as channel:
        try:
            if server_streaming:
                streaming: grpc.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(
                    path
                )
                rpc = streaming(iter(requests), metadata=metadata, timeout=timeout)
                answer = next(iter(rpc), b"")
                rpc.cancel()
            else:
                unary: grpc.StreamUnaryMultiCallable[bytes, bytes] = channel.stream_unary(path)
                answer = unary(iter(requests), metadata=metadata, timeout=timeout)
        except grpc.RpcError as error:
            return error.code(), error.details() or "", b""
    return grpc.StatusCode.OK, "", answer


class Serving(Protocol):
    """A memoryd answering at an address: a server in a subprocess (ServerProcess) or the
    services in this process (tests/in_process.py's ServedInProcess)."""

    @property
    def address(self) -> str: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Ran:
    """What a CLI command did: its exit code and what it wrote."""

    returncode: int
    stdout: str
    stderr: str


def run_memoryd(*argv: str, env: Mapping[str, str] | None = None, stdin: str = "") -> Ran:
    """`memoryd ARGV` in this process: memoryd.cli.main.main with `env` (default os.environ),
    stdin, stdout and stderr swapped for the call. It runs in a thread of its own, so a
    command's own event loop (setup checks an endpoint with asyncio.run) never meets the test's;
    the entry point itself is tested as a subprocess in tests/server/test_first_hour.py."""

    if "--home" in argv:
        home = Path(argv[argv.index("--home") + 1])
        # A test's own storage settings win over the suite's backend.
        env = {**postgres.environment_for(home), **(os.environ if env is None else env)}

    def call() -> Ran:
        out, err = io.StringIO(), io.StringIO()
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
        try:
            code = main(list(argv), env, out)
        except SystemExit as exit:  # argparse: --help, or a usage error
            code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 2
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
        return Ran(code, out.getvalue(), err.getvalue())

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result(timeout=120)


def raw_exchange(address: str, data: bytes, *, wait: float = 30.0) -> bytes:
    """Send `data` on a new TCP connection to HOST:PORT and read until the server closes it:
    for HTTP requests exactly as written (any Host, half a request)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=wait) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@contextlib.contextmanager
def prompt_files_lock(home: Path) -> Iterator[None]:
    """The data directory's prompt-file lock, held by the test: a process that commits a
    change of a prompt file then waits to write it."""
    descriptor = os.open(home / PROMPT_FILES_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def curl(address: str, path: str, body: Any, *headers: str) -> tuple[int, dict[str, Any]]:
    """POST `body` as JSON with the real curl; (HTTP status, the JSON answer)."""
    command = [
        shutil.which("curl") or "curl",
        "-sS",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "-H",
        "Content-Type: application/json",
        *(item for header in headers for item in ("-H", header)),
        "--data-binary",
        json.dumps(body),
        f"http://{address}{path}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    text, _, status = result.stdout.rpartition("\n")
    return int(status), json.loads(text) if text else {}


def health_stub(channel: grpc.Channel | grpc.aio.Channel) -> Any:
    """grpc.health.v1's stub on a channel. grpcio-health-checking's stub sets its methods on
    each instance, so its type names none of them: typed Any here, once."""
    return health_pb2_grpc.HealthStub(channel)


async def acked(call: Any) -> md.StreamTranscriptResponse:
    """A transcript stream's next answer; the test fails when the stream ended instead."""
    answer = await call.read()
    assert isinstance(answer, md.StreamTranscriptResponse), answer
    return answer


EXAMPLES = Path(__file__).resolve().parents[1] / "clients" / "python" / "examples"


def load_example(name: str) -> ModuleType:
    """One of the Python client's examples (clients/python/examples/NAME.py), imported."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def sent_text(request: dict[str, Any]) -> str:
    """Everything a chat-completions request sent the model, as text."""
    return json.dumps(request["messages"], ensure_ascii=False)
