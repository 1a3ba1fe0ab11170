"""Authentication and authorisation through the real server: every RPC of the contract is called
with no token, a wrong token, another agent's token, a claimed trust above the token's ceiling,
and an adapter's token on an operators' call, and each gets its precise status; health and
reflection stay open; the log names tokens by fingerprint, never in full; without tokens a
non-loopback address is refused; the CLI sends its token."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, MethodDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

import memoryd_client as md
from memoryd.api import contract
from memoryd.config import check_exposure, load_settings, token_digest
from memoryd.errors import StartupError
from memoryd.testing.server_process import ServerProcess
from tests.helpers import Ran, health_stub, run_memoryd
from tests.memory.test_resources import cli
from tests.review_helpers import eventually

ADMIN = "admin-token-0123456789abcdef"
MAIN_GUEST = "main-guest-token-0123456789"
OTHER = "other-agent-token-0123456789"
ENV_TOKEN = "env-held-adapter-token-0123"
MAIN_ADMIN = "main-only-admin-token-012345"
CONFIG = f"""
[memoryd.realtime]
persist_transcripts = true

[[memoryd.auth.tokens]]
token = "{ADMIN}"
role = "admin"
agents = ["*"]

[[memoryd.auth.tokens]]
token = "{MAIN_GUEST}"
role = "adapter"
agents = ["main"]
max_trust = "guest"

[[memoryd.auth.tokens]]
token = "{OTHER}"
role = "adapter"
agents = ["other"]

[[memoryd.auth.tokens]]
token = "{MAIN_ADMIN}"
role = "admin"
agents = ["main"]

[[memoryd.auth.tokens]]
token_env = "TEST_ADAPTER_TOKEN"
role = "adapter"
agents = ["main"]
"""
METHODS: list[MethodDescriptor] = list(contract.methods())
ADMIN_ONLY = {"ExportData", "ImportData", "PurgeOwner"}


def fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:8]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("auth") / "home"
    server = ServerProcess(home, config=CONFIG, env={"TEST_ADAPTER_TOKEN": ENV_TOKEN}).start()
    yield server
    server.stop()


def path_of(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


def request_class(method: MethodDescriptor) -> type[Message]:
    made: type[Message] = message_factory.GetMessageClass(method.input_type)
    return made


def trust_path(descriptor: Descriptor, seen: frozenset[str] = frozenset()) -> list[Any] | None:
    """Field names down to a memoryd.v2.Trust field, or None."""
    for field in descriptor.fields:
        if field.enum_type is not None and field.enum_type.full_name == "memoryd.v2.Trust":
            return [field]
        nested = field.message_type
        if (
            nested is not None
            and nested.full_name.startswith("memoryd.")
            and (nested.full_name not in seen)
        ):
            below = trust_path(nested, seen | {descriptor.full_name})
            if below is not None:
                return [field, *below]
    return None


def claiming_operator(method: MethodDescriptor) -> Message | None:
    """The method's request with a Trust field set to operator (None: it has none)."""
    found = trust_path(method.input_type)
    if found is None:
        return None
    request = request_class(method)()
    target: Any = request
    for field in found[:-1]:
        target = (
            getattr(target, field.name).add() if field.is_repeated else getattr(target, field.name)
        )
    setattr(target, found[-1].name, md.TRUST_OPERATOR)
    return request


@pytest.fixture
async def channel(guarded: ServerProcess) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(guarded.address) as opened:
        yield opened


async def test_refusals_say_why(channel: grpc.aio.Channel, guarded: ServerProcess) -> None:
    memory = md.Stubs(channel)
    chat = md.Conversation(channel="telegram", chat_id="auth")
    request = md.AppendMessagesRequest(conversation=chat, messages=[md.user("ada", "hi")])
    cases = [
        (None, request, "this call needs an `authorization: Bearer <token>` header"),
        ("nope-nope-nope-nope-nope", request, "the bearer token is not valid"),
        (
            OTHER,
            request,
            f"the token {fingerprint(OTHER)} may not touch agent 'main'; it covers other",
        ),
        (
            MAIN_GUEST,
            md.AppendMessagesRequest(
                conversation=chat, messages=[md.user("ada", "hi", trust=md.TRUST_OPERATOR)]
            ),
            f"trust TRUST_OPERATOR is above what the token {fingerprint(MAIN_GUEST)} may claim",
        ),
    ]
    for token, sent, expected in cases:
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await memory.conversations.AppendMessages(sent, metadata=metadata)
        assert expected in (caught.value.details() or ""), caught.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.admin.ExportData(
            md.ExportDataRequest(), metadata=(("authorization", f"Bearer {MAIN_GUEST}"),)
        ).read()
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "ExportData is an admin's call: it needs a token with role admin" in (
        caught.value.details() or ""
    )


async def test_an_admin_of_one_agent_can_not_export_or_import_every_agent(
    channel: grpc.aio.Channel,
) -> None:
    memory = md.Stubs(channel)
    main_admin = (("authorization", f"Bearer {MAIN_ADMIN}"),)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.admin.ExportData(md.ExportDataRequest(), metadata=main_admin).read()
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "ExportData of every agent (an empty agent_id): it needs a token for every agent" in (
        caught.value.details() or ""
    )
    own = memory.admin.ExportData(md.ExportDataRequest(agent_id="main"), metadata=main_admin)
    first = await own.read()
    assert isinstance(first, md.ExportDataResponse), first
    assert first.lines[0].startswith('{"format":"memoryd-export"')
    own.cancel()

    async def lines() -> AsyncIterator[md.ImportDataRequest]:
        yield md.ImportDataRequest(lines=['{"format": "memoryd-export", "version": 1}'])

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.admin.ImportData(lines(), metadata=main_admin)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "ImportData of any agent's records (an empty agent_id): it needs a token for" in (
        caught.value.details() or ""
    )


async def test_an_unset_trust_becomes_the_tokens_ceiling(channel: grpc.aio.Channel) -> None:
    memory = md.Stubs(channel)
    chat = md.Conversation(channel="telegram", chat_id="ceiling")
    guest = (("authorization", f"Bearer {MAIN_GUEST}"),)
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=chat, messages=[md.user("ada", "from a group")]),
        metadata=guest,
    )
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=chat), metadata=guest
    )
    assert [m.trust for m in listed.messages] == [md.TRUST_GUEST]
    # A guest cannot write an operator directive, whatever it sends.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                conversation=chat, category=md.CATEGORY_DIRECTIVE, key="k", value="Obey me"
            ),
            metadata=guest,
        )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_a_token_from_the_environment_and_the_stream_items_are_checked(
    channel: grpc.aio.Channel,
) -> None:
    memory = md.Stubs(channel)
    token = (("authorization", f"Bearer {ENV_TOKEN}"),)

    async def batches() -> AsyncIterator[md.IngestMessagesRequest]:
        item = md.IngestedMessage(
            conversation=md.Conversation(channel="telegram", chat_id="env"),
            message=md.user("ada", "ok"),
        )
        yield md.IngestMessagesRequest(messages=[item])
        other = md.IngestedMessage(
            conversation=md.Conversation(agent_id="other", channel="telegram", chat_id="env"),
            message=md.user("ada", "not mine"),
        )
        yield md.IngestMessagesRequest(messages=[other])

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.conversations.IngestMessages(batches(), metadata=token)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=md.Conversation(channel="telegram", chat_id="env")),
        metadata=token,
    )
    assert [m.content for m in listed.messages] == ["ok"]  # the batch before it was stored


async def test_health_and_reflection_stay_open(channel: grpc.aio.Channel) -> None:
    health = await health_stub(channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING


async def test_the_log_names_tokens_by_fingerprint_only(
    guarded: ServerProcess, channel: grpc.aio.Channel
) -> None:
    memory = md.Stubs(channel)
    for token in (ADMIN, MAIN_GUEST, OTHER, ENV_TOKEN):
        with contextlib.suppress(grpc.aio.AioRpcError):
            await memory.resources.ListResources(
                md.ListResourcesRequest(), metadata=(("authorization", f"Bearer {token}"),)
            )

    def logged() -> set[object]:
        return {event.get("token") for event in guarded.events("rpc")}

    await eventually(lambda: fingerprint(ADMIN) in logged() and fingerprint(OTHER) in logged())
    output = guarded.output
    for token in (ADMIN, MAIN_GUEST, OTHER, ENV_TOKEN):
        assert token not in output


def test_the_cli_sends_its_token(guarded: ServerProcess, tmp_path: Path) -> None:
    refused = cli(guarded, "resource", "list")
    assert refused.returncode == 1
    assert "memoryd: UNAUTHENTICATED: this call needs an `authorization: Bearer" in refused.stderr
    token_file = tmp_path / "cli-token"
    token_file.write_text(ADMIN + "\n", encoding="utf-8")
    config = tmp_path / "cli.toml"
    config.write_text(f'[memoryd.auth]\ncli_token_file = "{token_file}"\n', encoding="utf-8")
    env = {"MEMORYD_CONFIG": str(config)}
    assert cli_with(guarded, env, "resource", "list", "--json").returncode == 0
    assert cli_with(guarded, {"MEMORYD_TOKEN": ADMIN}, "export").returncode == 0
    denied = cli_with(guarded, {"MEMORYD_TOKEN": MAIN_GUEST}, "export")
    assert "memoryd: PERMISSION_DENIED: ExportData is an admin's call" in denied.stderr


def cli_with(server: ServerProcess, env: dict[str, str], *args: str) -> Ran:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    return run_memoryd(*args, "--address", server.address, env={**clean, **env})


@pytest.mark.parametrize("listen", ["0.0.0.0:50051", "[::]:50051", "memoryd.example:50051"])
def test_a_non_loopback_address_without_tokens_is_refused(
    start_server: type[ServerProcess], tmp_path: Path, listen: str
) -> None:
    server = start_server(tmp_path / "home", listen=listen)
    assert server.wait_exit() == 1
    assert f"refusing to serve {listen} without authentication" in server.output
    settings = load_settings({"MEMORYD_HOME": str(tmp_path), "MEMORYD_SERVER_LISTEN": listen})
    with pytest.raises(StartupError):
        check_exposure(settings)
    insecure = load_settings(
        {
            "MEMORYD_HOME": str(tmp_path),
            "MEMORYD_SERVER_LISTEN": listen,
            "MEMORYD_SERVER_INSECURE": "true",
        }
    )
    check_exposure(insecure)  # --insecure: allowed


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        ('token = "short"\nrole = "adapter"\nagents = ["main"]', "at least 16 characters"),
        (
            'token = "0123456789abcdef0"\ntoken_env = "X"\nrole = "admin"\nagents = ["*"]',
            "set exactly one of token, token_env and token_file",
        ),
        (
            'token_file = "/nonexistent/memoryd-token"\nrole = "admin"\nagents = ["*"]',
            "token_file /nonexistent/memoryd-token cannot be read: No such file or directory",
        ),
        ('token_env = "UNSET_VARIABLE"\nrole = "admin"\nagents = ["*"]', "is not set"),
        ('token = "0123456789abcdef0"\nrole = "root"\nagents = ["*"]', "role must be"),
        ('token = "0123456789abcdef0"\nrole = "adapter"\nagents = []', "agents must be a list"),
        (
            'token = "0123456789abcdef0"\nrole = "adapter"\nagents = ["main"]\nmax_trust = "x"',
            "max_trust must be",
        ),
    ],
)
def test_token_settings_are_checked(tmp_path: Path, tokens: str, expected: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[[memoryd.auth.tokens]]\n{tokens}\n", encoding="utf-8")
    with pytest.raises(StartupError) as caught:
        load_settings({"MEMORYD_HOME": str(tmp_path), "MEMORYD_CONFIG": str(config)})
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    ("content", "mode", "expected"),
    [
        (ADMIN + "\n", 0o400, None),
        (ADMIN, 0o600, None),
        (ADMIN + "\n", 0o644, "can be read or written by other users (mode 0644)"),
        ("\n", 0o400, "is empty"),
    ],
)
def test_a_token_file_is_read_once_private(
    tmp_path: Path, content: str, mode: int, expected: str | None
) -> None:
    """A token in a file of its own (a container's mounted secret), one trailing line break
    dropped; a file others can read is refused, as a TLS key is."""
    secret = tmp_path / "admin.token"
    secret.write_text(content, encoding="utf-8")
    secret.chmod(mode)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[memoryd.auth.tokens]]\ntoken_file = "{secret}"\nrole = "admin"\nagents = ["*"]\n',
        encoding="utf-8",
    )
    env = {"MEMORYD_HOME": str(tmp_path), "MEMORYD_CONFIG": str(config)}
    if expected is None:
        (token,) = load_settings(env).auth.tokens
        assert token.digest == token_digest(ADMIN)
        return
    with pytest.raises(StartupError) as caught:
        load_settings(env)
    assert expected in str(caught.value)
    assert ADMIN not in str(caught.value)


def test_the_same_token_twice_is_refused(tmp_path: Path) -> None:
    entry = '[[memoryd.auth.tokens]]\ntoken = "0123456789abcdef0"\nrole = "admin"\nagents = ["*"]\n'
    config = tmp_path / "config.toml"
    config.write_text(entry + entry, encoding="utf-8")
    with pytest.raises(StartupError) as caught:
        load_settings({"MEMORYD_HOME": str(tmp_path), "MEMORYD_CONFIG": str(config)})
    assert "has the same token as memoryd.auth.tokens[0]" in str(caught.value)


def test_config_show_lists_tokens_by_fingerprint(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG, encoding="utf-8")
    done = cli_with_config(tmp_path, config)
    shown = json.loads(done.stdout)["memoryd"]["auth"]["tokens"]
    assert [token["fingerprint"] for token in shown][:3] == [
        fingerprint(ADMIN),
        fingerprint(MAIN_GUEST),
        fingerprint(OTHER),
    ]
    assert ADMIN not in done.stdout


def cli_with_config(home: Path, config: Path) -> Ran:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env |= {
        "MEMORYD_HOME": str(home),
        "MEMORYD_CONFIG": str(config),
        "TEST_ADAPTER_TOKEN": ENV_TOKEN,
    }
    shown = run_memoryd("config", "show", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    return shown
