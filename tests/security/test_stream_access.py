"""Client streams are checked by what they opened: every later message of StreamTranscript and
ImportData is admitted as part of the agent its first message named, so a token bound to an
agent other than main (or to two agents) can use both streams, and can not reach past them."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from tests.helpers import run_memoryd

ALL = "streams-admin-every-agent-0123456789"
VOICE = "streams-adapter-voice-0123456789abc"
TWO = "streams-adapter-voice-desk-01234567"
ADMIN_VOICE = "streams-admin-voice-0123456789abcde"
ADMIN_TWO = "streams-admin-voice-desk-0123456789"
CONFIG = """
[memoryd.realtime]
persist_transcripts = true
""" + "".join(
    f"""
[[memoryd.auth.tokens]]
token = "{token}"
role = "{role}"
agents = {agents}
"""
    for token, role, agents in (
        (ALL, "admin", '["*"]'),
        (VOICE, "adapter", '["voice"]'),
        (TWO, "adapter", '["voice", "desk"]'),
        (ADMIN_VOICE, "admin", '["voice"]'),
        (ADMIN_TWO, "admin", '["voice", "desk"]'),
    )
)


def start(folder: object) -> ServerProcess:
    return ServerProcess(folder, config=CONFIG).start()  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start(tmp_path_factory.mktemp("streams") / "home")
    yield server
    assert server.stop() == 0, server.output


def talk(server: ServerProcess, token: str, agent: str, device: str) -> list[int]:
    """open, two finals, end, on `agent`: the committed seq of each answer."""
    requests = [
        md.StreamTranscriptRequest(
            open=md.TranscriptOpen(device_id=device, session_id="s", agent_id=agent)
        ),
        *(
            md.StreamTranscriptRequest(
                segment=md.TranscriptSegment(seq=seq, speaker=md.SPEAKER_USER, text=f"line {seq}")
            )
            for seq in (1, 2)
        ),
        md.StreamTranscriptRequest(end=md.TranscriptEnd()),
    ]
    with md.connect_sync(server.address, token=token) as channel:
        answers = md.SyncStubs(channel).conversations.StreamTranscript(iter(requests), timeout=30)
        return [answer.committed_seq for answer in answers]


def said(server: ServerProcess, agent: str, device: str) -> list[str]:
    with md.connect_sync(server.address, token=ALL) as channel:
        listed = md.SyncStubs(channel).conversations.ListMessages(
            md.ListMessagesRequest(
                conversation=md.Conversation(
                    agent_id=agent, channel="realtime", chat_id=f"local:{device}"
                )
            )
        )
    return [message.content for message in listed.messages]


@pytest.mark.parametrize(("token", "agent"), [(VOICE, "voice"), (TWO, "voice"), (TWO, "desk")])
def test_a_transcript_stream_of_a_bound_token_is_checked_as_its_agent(
    served: ServerProcess, token: str, agent: str
) -> None:
    device = f"{agent}-{token[-6:]}"
    assert talk(served, token, agent, device)[-1] == 2
    assert said(served, agent, device) == ["line 1", "line 2"]


@pytest.mark.parametrize(("token", "agent"), [(VOICE, "desk"), (VOICE, ""), (TWO, "other")])
def test_a_transcript_stream_of_another_agent_is_refused(
    served: ServerProcess, token: str, agent: str
) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        talk(served, token, agent, "refused")
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "may not touch agent" in (refused.value.details() or "")


def export_lines(server: ServerProcess, agent: str) -> list[str]:
    with md.connect_sync(server.address, token=ALL) as channel:
        chunks = md.SyncStubs(channel).admin.ExportData(
            md.ExportDataRequest(agent_id=agent), timeout=60
        )
        return [line for chunk in chunks for line in chunk.lines]


def import_lines(
    server: ServerProcess, token: str, lines: list[str], agents: list[str]
) -> md.ImportDataResponse:
    """The lines two at a time, the i-th request naming agents[i] (or none past the list)."""
    requests = [
        md.ImportDataRequest(
            lines=lines[start : start + 2],
            agent_id=agents[start // 2] if start // 2 < len(agents) else "",
        )
        for start in range(0, len(lines), 2)
    ]
    with md.connect_sync(server.address, token=token) as channel:
        answer: md.ImportDataResponse = md.SyncStubs(channel).admin.ImportData(
            iter(requests), timeout=60
        )
        return answer


def test_an_import_held_to_one_agent_runs_with_that_agents_admin_token(
    served: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    talk(served, VOICE, "voice", "exported")
    lines = export_lines(served, "voice")
    assert len(lines) > 6  # several requests of two lines
    fresh = start(tmp_path_factory.mktemp("imported") / "home")
    try:
        for token in (ADMIN_VOICE, ADMIN_TWO):
            done = import_lines(fresh, token, lines, ["voice"])
            assert done.lines == len(lines)
        assert export_lines(fresh, "voice") == lines
        # Repeating the agent in a later request is the same import.
        assert import_lines(fresh, ADMIN_VOICE, lines, ["voice", "voice"]).present > 0
    finally:
        assert fresh.stop() == 0, fresh.output


@pytest.mark.parametrize(
    ("token", "agents", "code", "said"),
    [
        (ADMIN_VOICE, [], grpc.StatusCode.PERMISSION_DENIED, "needs a token for every agent"),
        (ADMIN_VOICE, ["desk"], grpc.StatusCode.PERMISSION_DENIED, "may not touch agent 'desk'"),
        (ADMIN_VOICE, ["voice", "desk"], grpc.StatusCode.PERMISSION_DENIED, "agent 'desk'"),
        (VOICE, ["voice"], grpc.StatusCode.PERMISSION_DENIED, "an admin's call"),
        (ADMIN_TWO, ["desk"], grpc.StatusCode.INVALID_ARGUMENT, "line 2: a conversation record"),
        (
            ADMIN_TWO,
            ["voice", "desk"],
            grpc.StatusCode.INVALID_ARGUMENT,
            "the first request names the import's agent",
        ),
    ],
)
def test_an_import_is_refused_past_its_agent(
    served: ServerProcess, token: str, agents: list[str], code: grpc.StatusCode, said: str
) -> None:
    talk(served, VOICE, "voice", "refusals")
    lines = export_lines(served, "voice")
    with pytest.raises(grpc.RpcError) as refused:
        import_lines(served, token, lines, agents)
    assert refused.value.code() == code
    assert said in (refused.value.details() or "")


def test_memoryd_import_takes_the_agent(served: ServerProcess, tmp_path: object) -> None:
    talk(served, VOICE, "voice", "cli")
    export = tmp_path / "voice.jsonl"  # type: ignore[operator]
    export.write_text("\n".join(export_lines(served, "voice")) + "\n", encoding="utf-8")
    env = {"MEMORYD_ADDRESS": served.address, "MEMORYD_TOKEN": ADMIN_VOICE}
    done = run_memoryd("import", "--agent", "voice", str(export), env=env)
    assert done.returncode == 0, done.stderr
    assert "already present" in done.stdout
    refused = run_memoryd("import", str(export), env=env)
    assert refused.returncode != 0
    assert "needs a token for every agent" in refused.stderr
