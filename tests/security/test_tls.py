"""TLS and mutual TLS through the real server, with a throwaway CA: the Python client and grpcurl
connect over TLS; a plain-text client is refused; under mutual TLS a client without a certificate,
or with one another CA signed, is refused; bad TLS settings stop the start with a reason."""

from __future__ import annotations

import asyncio
import http.client
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from tests.certificates import Authority, Pair
from tests.security.test_auth import cli_with
from tests.server.test_first_hour import TOKENS, free_address, memoryd


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair | Path]:
    folder = tmp_path_factory.mktemp("pki")
    authority = Authority(folder)
    rogue = Authority(folder, name="rogue CA")
    return {
        "ca": authority.pem,
        "server": authority.issue("server", server=True),
        "client": authority.issue("client", server=False),
        "rogue": rogue.issue("rogue-client", server=False),
    }


def tls_config(pki: dict[str, Pair | Path], *, mutual: bool) -> str:
    server = pki["server"]
    assert isinstance(server, Pair)
    lines = ["[memoryd.server]", f'tls_cert = "{server.cert}"', f'tls_key = "{server.key}"']
    if mutual:
        lines.append(f'tls_client_ca = "{pki["ca"]}"')
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def tls_server(
    tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Pair | Path]
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("tls") / "home"
    server = ServerProcess(home, config=tls_config(pki, mutual=False)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mutual_server(
    tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Pair | Path]
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("mtls") / "home"
    server = ServerProcess(home, config=tls_config(pki, mutual=True)).start()
    yield server
    server.stop()


def credentials(pki: dict[str, Pair | Path], client: str | None) -> grpc.ChannelCredentials:
    ca = Path(str(pki["ca"])).read_bytes()
    if client is None:
        return grpc.ssl_channel_credentials(root_certificates=ca)
    pair = pki[client]
    assert isinstance(pair, Pair)
    return grpc.ssl_channel_credentials(
        root_certificates=ca,
        private_key=pair.key.read_bytes(),
        certificate_chain=pair.cert.read_bytes(),
    )


async def health_of(address: str, creds: grpc.ChannelCredentials | None) -> grpc.StatusCode:
    async with md.connect(address, credentials=creds, timeout=5) as channel:
        try:
            await md.Stubs(channel).conversations.ListMessages(
                md.ListMessagesRequest(conversation=md.Conversation(channel="t", chat_id="c"))
            )
        except grpc.aio.AioRpcError as error:
            return error.code()
    return grpc.StatusCode.OK


async def test_tls_serves_the_python_client_and_refuses_plain_text(
    tls_server: ServerProcess, pki: dict[str, Pair | Path]
) -> None:
    assert tls_server.events("serving")[-1]["tls"] == "on"
    assert await health_of(tls_server.address, credentials(pki, None)) == grpc.StatusCode.OK
    assert await health_of(tls_server.address, None) == grpc.StatusCode.UNAVAILABLE


# A connection the server refuses at the handshake is tried again until grpcurl's connect
# timeout (10 s by default) ends it: the refusal is the same after 2 s.
REFUSED_WITHIN = ("-connect-timeout", "2")


def test_grpcurl_over_tls(
    tls_server: ServerProcess, pki: dict[str, Pair | Path], grpcurl: str
) -> None:
    listed = subprocess.run(
        [grpcurl, "-cacert", str(pki["ca"]), tls_server.address, "list"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert listed.returncode == 0, listed.stderr
    assert "memoryd.v2.ConversationService" in listed.stdout.splitlines()
    plain = subprocess.run(
        [grpcurl, *REFUSED_WITHIN, "-plaintext", tls_server.address, "list"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert plain.returncode != 0


async def test_mutual_tls_needs_a_client_certificate_from_the_ca(
    mutual_server: ServerProcess, pki: dict[str, Pair | Path], grpcurl: str
) -> None:
    assert mutual_server.events("serving")[-1]["tls"] == "mutual"
    address = mutual_server.address
    assert await health_of(address, credentials(pki, "client")) == grpc.StatusCode.OK
    assert await health_of(address, credentials(pki, None)) == grpc.StatusCode.UNAVAILABLE
    assert await health_of(address, credentials(pki, "rogue")) == grpc.StatusCode.UNAVAILABLE
    client = pki["client"]
    assert isinstance(client, Pair)
    base = [grpcurl, "-cacert", str(pki["ca"])]
    with_cert = [*base, "-cert", str(client.cert), "-key", str(client.key)]
    ok = await asyncio.to_thread(run, [*with_cert, address, "list"])
    assert ok.returncode == 0, ok.stderr
    refused = await asyncio.to_thread(run, [*base, *REFUSED_WITHIN, address, "list"])
    assert refused.returncode != 0


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('tls_cert = "{cert}"\n', "tls_cert and tls_key go together"),
        ('tls_client_ca = "{ca}"\n', "tls_client_ca needs tls_cert and tls_key"),
        (
            'tls_cert = "/nonexistent.pem"\ntls_key = "{key}"\n',
            "/nonexistent.pem is not a readable",
        ),
        ('tls_cert = "{key}"\ntls_key = "{key}"\n', "the TLS certificate or key cannot be used"),
    ],
)
def test_bad_tls_settings_stop_the_start(
    start_server: type[ServerProcess],
    tmp_path: Path,
    pki: dict[str, Pair | Path],
    config: str,
    expected: str,
) -> None:
    server_pair = pki["server"]
    assert isinstance(server_pair, Pair)
    text = config.format(cert=server_pair.cert, key=server_pair.key, ca=pki["ca"])
    server = start_server(tmp_path / "home", config="[memoryd.server]\n" + text)
    assert server.wait_exit() != 0
    assert expected in server.output


def test_the_cli_speaks_mutual_tls(
    mutual_server: ServerProcess, pki: dict[str, Pair | Path]
) -> None:
    client = pki["client"]
    assert isinstance(client, Pair)
    env = {
        "MEMORYD_TLS_CA": str(pki["ca"]),
        "MEMORYD_TLS_CERT": str(client.cert),
        "MEMORYD_TLS_KEY": str(client.key),
    }
    done = cli_with(mutual_server, env, "resource", "list")
    assert done.returncode == 0, done.stderr
    refused = cli_with(mutual_server, {"MEMORYD_TLS_CA": str(pki["ca"])}, "resource", "list")
    assert refused.returncode == 1
    assert "memoryd: UNAVAILABLE" in refused.stderr


def test_the_console_s_session_cookie_is_secure_over_tls(
    tmp_path: Path, pki: dict[str, Pair | Path]
) -> None:
    config = tls_config(pki, mutual=False) + '\n[memoryd.http]\nlisten = "127.0.0.1:0"\n'
    server = ServerProcess(tmp_path / "home", config=config).start()
    try:
        host, port = str(server.events("serving")[-1]["http"]).rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(pki["ca"]))
        connection = http.client.HTTPSConnection("localhost", int(port), context=context)
        connection.request(
            "POST",
            "/console/session",
            body=b'{"token": ""}',
            headers={"content-type": "application/json"},
        )
        response = connection.getresponse()
        assert response.status == 200
        cookie = response.getheader("set-cookie") or ""
        assert {"HttpOnly", "SameSite=Strict", "Secure", "Path=/"} <= {
            part.strip() for part in cookie.split(";")
        }
        response.read()
        connection.request("GET", "/console/")
        page = connection.getresponse()
        assert page.status == 200
        assert "frame-ancestors 'none'" in (page.getheader("content-security-policy") or "")
        connection.close()
        assert host == "127.0.0.1"
    finally:
        server.stop()


def test_the_health_port_answers_probes_without_tls_or_a_token_and_serves_nothing_else(
    tmp_path: Path, pki: dict[str, Pair | Path], grpcurl: str
) -> None:
    """Kubernetes' gRPC probes and a container's HEALTHCHECK present neither TLS nor a token:
    `health_listen` (set here through the environment, as a container sets it) answers them
    with the main port's statuses, and refuses everything but health."""
    config = tls_config(pki, mutual=False) + TOKENS
    env = {"MEMORYD_SERVER_HEALTH_LISTEN": "127.0.0.1:0"}
    server = ServerProcess(tmp_path / "home", config=config, env=env).start()
    health = str(server.events("serving")[-1]["health"])
    assert health.startswith("127.0.0.1:")
    assert health != server.address
    serving = memoryd("health", "--address", health)
    assert (serving.returncode, serving.stdout) == (0, "SERVING\n"), serving.stderr
    named = memoryd("health", "--address", health, "--service", "memoryd.v2.AdminService")
    assert (named.returncode, named.stdout) == (0, "SERVING\n"), named.stderr
    # No reflection, no memoryd service: the plaintext port carries no data and no token.
    listed = run([grpcurl, "-plaintext", health, "list"])
    assert listed.returncode != 0
    assert "server does not support the reflection API" in listed.stderr, listed.stderr
    with grpc.insecure_channel(health) as channel, pytest.raises(grpc.RpcError) as refused:
        md.SyncStubs(channel).conversations.ListMessages(
            md.ListMessagesRequest(conversation=md.Conversation(channel="t", chat_id="c")),
            timeout=10,
        )
    assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED
    # The main port still needs TLS.
    assert run([grpcurl, *REFUSED_WITHIN, "-plaintext", server.address, "list"]).returncode != 0
    assert server.stop() == 0, server.output
    gone = memoryd("health", "--address", health, "--timeout", "1")
    assert (gone.returncode, gone.stdout) == (1, "UNAVAILABLE\n")


@pytest.mark.parametrize(
    ("health_listen", "expected"),
    [
        ("nowhere", "memoryd.server.health_listen must be HOST:PORT"),
        ("{listen}", "cannot listen on {listen} (memoryd.server.health_listen): address already"),
    ],
)
def test_a_bad_health_port_stops_the_start(
    start_server: type[ServerProcess], tmp_path: Path, health_listen: str, expected: str
) -> None:
    listen = free_address()
    config = f'[memoryd.server]\nhealth_listen = "{health_listen.format(listen=listen)}"\n'
    server = start_server(tmp_path / "home", config=config, listen=listen)
    assert server.wait_exit() != 0
    assert expected.format(listen=listen) in server.output


def test_a_health_port_in_use_stops_the_start_saying_so(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        config = f'[memoryd.server]\nhealth_listen = "{address}"\n'
        server = start_server(tmp_path / "home", config=config)
        assert server.wait_exit() != 0
    assert f"cannot listen on {address} (memoryd.server.health_listen): address already in use" in (
        server.output
    )
