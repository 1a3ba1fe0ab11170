"""One token set at every moment: a server reads its config file's tokens again on SIGHUP (a
refused reload changes nothing); with workers, the supervisor gives every worker the same
snapshot of the file, so a worker started again after a crash answers with its siblings'
tokens, and a reload reaches all of them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess
from memoryd.testing.workers import channels_to_each_worker, children
from tests.review_helpers import eventually

KEPT = "reload-kept-token-0123456789abcdef"
WITHDRAWN = "reload-withdrawn-token-0123456789ab"
WORKERS = 2


def tokens(*values: str) -> str:
    return "".join(
        f'\n[[memoryd.auth.tokens]]\ntoken = "{value}"\nrole = "admin"\nagents = ["*"]\n'
        for value in values
    )


def config_of(server: ServerProcess) -> Path:
    return server.home.parent / f"{server.home.name}-config.toml"


def rewrite(server: ServerProcess, text: str) -> None:
    path = config_of(server)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)


def reloads(server: ServerProcess, count: int, event: str = Event.TOKENS_RELOADED) -> None:
    """Wait until `count` records of `event` are in the log."""
    deadline = time.monotonic() + 60
    while len(server.events(event)) < count:
        assert time.monotonic() < deadline, server.output
        server.wait_for_event(Event.SERVING)  # raises if the server died
        time.sleep(0.05)


async def answers(channel: grpc.aio.Channel, token: str) -> grpc.StatusCode:
    """The status GetConversation answers with `token` (OK or NOT_FOUND: the token was taken;
    UNAUTHENTICATED: it was not)."""
    memory = md.Stubs(channel)
    try:
        await memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=md.Conversation(channel="t", chat_id="x")),
            metadata=(("authorization", f"Bearer {token}"),),
        )
    except grpc.aio.AioRpcError as error:
        if error.code() is grpc.StatusCode.NOT_FOUND:
            return grpc.StatusCode.OK
        return error.code()
    return grpc.StatusCode.OK


def console_session(http: str, token: str) -> tuple[str, str]:
    """A console sign-in: its cookie and its CSRF token."""
    request = urllib.request.Request(
        f"http://{http}/console/session",
        data=json.dumps({"token": token}).encode(),
        headers={"content-type": "application/json", "origin": f"http://{http}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        cookie = str(response.headers["set-cookie"]).split(";")[0]
        return cookie, json.loads(response.read())["csrf"]


def signed_in(http: str, session: tuple[str, str]) -> bool:
    cookie, csrf = session
    request = urllib.request.Request(
        f"http://{http}/console/session", headers={"cookie": cookie, "x-memoryd-csrf": csrf}
    )
    try:
        with urllib.request.urlopen(request, timeout=30):  # noqa: S310
            return True
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == 401
    return False


async def test_sighup_reloads_the_tokens_of_a_server_on_its_own(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    http = '[memoryd.http]\nlisten = "127.0.0.1:0"\n'
    server = start_server(tmp_path / "home", config=http + tokens(KEPT, WITHDRAWN)).start()
    address = str(server.events(Event.SERVING)[-1]["http"])
    cookie = console_session(address, WITHDRAWN)
    assert signed_in(address, cookie)
    async with md.connect(server.address) as channel:
        assert await answers(channel, WITHDRAWN) is grpc.StatusCode.OK
        # A file memoryd would not start with changes nothing.
        rewrite(server, http + tokens(KEPT) + "[memoryd.nonsense]\n")
        server.process.send_signal(signal.SIGHUP)
        reloads(server, 1, Event.RELOAD_REFUSED)
        assert "unknown setting memoryd.nonsense" in server.events(Event.RELOAD_REFUSED)[-1]["msg"]
        assert await answers(channel, WITHDRAWN) is grpc.StatusCode.OK
        # Nor does one that turns authentication off.
        rewrite(server, http)
        server.process.send_signal(signal.SIGHUP)
        reloads(server, 2, Event.RELOAD_REFUSED)
        assert await answers(channel, WITHDRAWN) is grpc.StatusCode.OK
        # The token withdrawn, and a setting that waits for a restart.
        rewrite(server, http + "[memoryd.history]\nmax_conversation_history = 9\n" + tokens(KEPT))
        server.process.send_signal(signal.SIGHUP)
        reloads(server, 1)
        reloaded = server.events(Event.TOKENS_RELOADED)[-1]
        assert len(reloaded["tokens"]) == 1
        assert reloaded["waiting"] == ["memoryd.history"]
        assert await answers(channel, WITHDRAWN) is grpc.StatusCode.UNAUTHENTICATED
        assert await answers(channel, KEPT) is grpc.StatusCode.OK
    assert not signed_in(address, cookie)  # its console session ended with it


async def test_workers_answer_with_one_token_set_through_a_restart_and_a_reload(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(
        tmp_path / "home", config=tokens(KEPT, WITHDRAWN), workers=WORKERS
    ).start()
    async with channels_to_each_worker(server.address, WORKERS) as channels:
        rewrite(server, tokens(KEPT))
        # A worker that dies is started again: it runs the file as its siblings do.
        victim = server.events(Event.SERVING)[-1]["pids"][1]
        os.kill(victim, signal.SIGKILL)
        restarted = await asyncio.to_thread(server.wait_for_event, Event.WORKER_STARTED, 60)
        assert restarted["pid"] != victim
    async with channels_to_each_worker(server.address, WORKERS) as channels:
        for channel in channels:
            assert await answers(channel, WITHDRAWN) is grpc.StatusCode.OK
        # SIGHUP to the supervisor: every worker takes the file's tokens.
        server.process.send_signal(signal.SIGHUP)
        await asyncio.to_thread(reloads, server, 1 + WORKERS)
        for channel in channels:
            assert await answers(channel, WITHDRAWN) is grpc.StatusCode.UNAUTHENTICATED
            assert await answers(channel, KEPT) is grpc.StatusCode.OK
    assert server.stop() == 0, server.output


async def test_a_withdrawn_token_ends_the_streams_it_opened(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home", config=tokens(KEPT, WITHDRAWN)).start()
    chat = md.Conversation(channel="t", chat_id="stream")
    more = asyncio.Event()

    def batch(text: str) -> md.IngestMessagesRequest:
        said = md.NewMessage(role=md.ROLE_USER, sender="ada", content=text)
        return md.IngestMessagesRequest(
            messages=[md.IngestedMessage(conversation=chat, message=said)]
        )

    async def batches() -> AsyncIterator[md.IngestMessagesRequest]:
        yield batch("before the reload")
        await more.wait()
        yield batch("after the reload")

    def bearer(token: str) -> tuple[tuple[str, str]]:
        return (("authorization", f"Bearer {token}"),)

    async with grpc.aio.insecure_channel(server.address) as channel:
        memory = md.Stubs(channel)
        ingest = asyncio.ensure_future(
            memory.conversations.IngestMessages(batches(), metadata=bearer(WITHDRAWN))
        )

        async def stored() -> list[str]:
            listed = await memory.conversations.ListMessages(
                md.ListMessagesRequest(conversation=chat), metadata=bearer(KEPT)
            )
            return [message.content for message in listed.messages]

        await eventually(stored)  # the first batch is in: the stream is open
        rewrite(server, tokens(KEPT))
        server.process.send_signal(signal.SIGHUP)
        await asyncio.to_thread(reloads, server, 1)
        more.set()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await ingest
        assert ended.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "was withdrawn" in (ended.value.details() or "")
        assert await stored() == ["before the reload"]


def catches_sighup(pid: int) -> bool:
    """Whether the process has a handler of SIGHUP (its SigCgt mask in /proc)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGHUP - 1)))
    return False


@pytest.mark.parametrize("workers", [1, WORKERS])
def test_a_sighup_while_memoryd_starts_is_held_and_applied_once_it_serves(
    start_server: type[ServerProcess], tmp_path: Path, workers: int
) -> None:
    # From the moment the process exists until it serves, SIGHUP after SIGHUP (an operator's
    # reload, a unit's): SIGHUP's default action used to end it, which systemd takes for a
    # clean exit.
    server = start_server(tmp_path / "home", config=tokens(KEPT), workers=workers)
    # memoryd's own code holds SIGHUP from its first line (the interpreter's start is before
    # it): once the process catches SIGHUP at all.
    while not catches_sighup(server.process.pid):
        assert server.process.poll() is None, server.output
        time.sleep(0.001)
    sent = 0
    while not server.events(Event.SERVING):
        assert server.process.poll() is None, server.output
        for pid in [server.process.pid, *children(server.process.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGHUP)
        sent += 1
        time.sleep(0.01)
    server.start()
    assert sent > 1
    # What came while it started is applied once, as if it had come just after.
    reloads(server, 1 if workers == 1 else 1 + workers)
    assert server.events(Event.WORKER_EXITED) == []
    assert server.stop() == 0, server.output


async def test_a_reload_while_a_worker_starts_again_reaches_the_others_at_once(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(
        tmp_path / "home", config=tokens(KEPT, WITHDRAWN), workers=WORKERS
    ).start()
    first = server.events(Event.SERVING)[-1]["pids"]
    async with channels_to_each_worker(server.address, WORKERS) as channels:
        assert await answers(channels[1], WITHDRAWN) is grpc.StatusCode.OK
        rewrite(server, tokens(KEPT))
        os.kill(first[0], signal.SIGKILL)

        def replacing() -> bool:  # its replacement is starting
            return bool(set(children(server.process.pid)) - set(first))

        await eventually(replacing)
        server.process.send_signal(signal.SIGHUP)

        async def refused() -> bool:
            return await answers(channels[1], WITHDRAWN) is grpc.StatusCode.UNAUTHENTICATED

        await eventually(refused)
        assert server.events(Event.WORKER_STARTED) == []  # not after the restart: at once
        await asyncio.to_thread(server.wait_for_event, Event.WORKER_STARTED, 60)
    async with channels_to_each_worker(server.address, WORKERS) as channels:
        for channel in channels:  # the one started again too
            assert await answers(channel, WITHDRAWN) is grpc.StatusCode.UNAUTHENTICATED
    assert server.stop() == 0, server.output


@pytest.mark.parametrize("signal_to", ["supervisor", "group"])
async def test_a_sighup_never_stops_a_worker(
    start_server: type[ServerProcess], tmp_path: Path, signal_to: str
) -> None:
    server = start_server(tmp_path / "home", config=tokens(KEPT), workers=WORKERS).start()
    pids = server.events(Event.SERVING)[-1]["pids"]
    for pid in pids if signal_to == "group" else [server.process.pid]:
        os.kill(pid, signal.SIGHUP)
    if signal_to == "group":
        os.kill(server.process.pid, signal.SIGHUP)
    await asyncio.to_thread(reloads, server, 1)
    assert server.events(Event.WORKER_EXITED) == []
    assert server.stop() == 0, server.output


async def test_a_storm_of_sighup_reloads_every_process_and_stops_none(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    # The supervisor's flags were threading.Events: a SIGHUP while its main thread held one's
    # lock (lowering it after a reload) made that thread wait on itself for ever.
    server = start_server(
        tmp_path / "home", config=tokens(KEPT, WITHDRAWN), workers=WORKERS
    ).start()
    pids = [server.process.pid, *server.events(Event.SERVING)[-1]["pids"]]

    def storm() -> None:
        for _ in range(3_000):
            for pid in pids:
                os.kill(pid, signal.SIGHUP)

    await asyncio.to_thread(storm)
    rewrite(server, tokens(KEPT))
    server.process.send_signal(signal.SIGHUP)
    async with channels_to_each_worker(server.address, WORKERS) as channels:
        for channel in channels:

            async def refused(channel: grpc.aio.Channel = channel) -> bool:
                return await answers(channel, WITHDRAWN) is grpc.StatusCode.UNAUTHENTICATED

            await eventually(refused, within=60)
            assert await answers(channel, KEPT) is grpc.StatusCode.OK
    assert server.events(Event.WORKER_EXITED) == []
    assert server.stop() == 0, server.output
