"""Agent frameworks that speak MCP natively, connected to `memoryd mcp`: the OpenAI Agents SDK's
own `Runner` runs the example agent (clients/python/examples/openai_agents_mcp.py) against a real
memoryd, the model being a local chat-completions server with scripted answers; Pydantic AI's
agent, and the Claude Agent SDK's (its own program, speaking Anthropic's Messages protocol to the
same fake), likewise. What the model
does through the tools lands in memoryd, and one user's agent never reaches another's facts."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents import Runner, set_tracing_disabled
from openai import AsyncOpenAI

import memoryd_client as md
from memoryd.testing.fake_model import FakeModel, ToolCall
from memoryd.testing.server_process import ServerProcess
from tests.helpers import load_example

# On both backends: the tools read and write memory rows. Slow: the SDK starts `memoryd mcp`.
pytestmark = [pytest.mark.slow, pytest.mark.storage]

example = load_example("openai_agents_mcp")


@pytest.fixture(autouse=True)
def no_tracing() -> None:
    """The SDK sends its traces to OpenAI unless told not to: nothing leaves loopback."""
    set_tracing_disabled(True)


async def run(server: ServerProcess, model: FakeModel, owner: str, text: str) -> str:
    """One turn of the example's agent for `owner`, through the SDK's Runner."""
    client = AsyncOpenAI(base_url=model.base_url, api_key="unused")
    async with example.memory_server(server.address, owner) as memory:
        agent = example.assistant(memory, example.chat_model(client, "fake-model"))
        result = await Runner.run(agent, text)
    return str(result.final_output)


def tool_text(request: dict[str, Any]) -> str:
    """What the last tool call answered, as the SDK gave it back to the model (a string, or
    a list of text parts)."""
    answered = [message for message in request["messages"] if message["role"] == "tool"]
    content = answered[-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content)


def tool_result(request: dict[str, Any]) -> dict[str, Any]:
    """The structured answer of the last tool call."""
    return dict(json.loads(tool_text(request)))


def calls_remember_then_says(model: FakeModel, fact: str, category: str, key: str) -> None:
    """The model's next turn: it calls `remember` with the fact, then answers "Noted."."""
    arguments = {"fact": fact, "category": category, "key": key}
    model.reply(tool_calls=[ToolCall(name="remember", arguments=arguments)])
    model.reply("Noted.")


async def test_an_agent_remembers_through_memoryd_and_recalls_it_in_a_later_run(
    server: ServerProcess,
) -> None:
    owner = f"ada-{uuid.uuid4().hex[:8]}"
    with FakeModel() as model:
        calls_remember_then_says(model, "Is vegetarian", "preference", "diet")
        assert await run(server, model, owner, "I'm vegetarian, by the way.") == "Noted."
        tools = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
        assert {"remember", "recall", "note", "search_history", "compose_context"} <= tools
        assert "I'm vegetarian" in json.dumps(model.requests[0]["messages"])

        # A later run (a new MCP session) recalls it, and the model sees the fact.
        model.reply(tool_calls=[ToolCall(name="recall", arguments={"query": "diet"})])
        model.reply("You are vegetarian.")
        assert await run(server, model, owner, "What do I eat?") == "You are vegetarian."
        recalled = tool_result(model.requests[-1])
        assert [hit["value"] for hit in recalled["hits"]] == ["Is vegetarian"]

    async with md.connect(server.address) as channel:
        listed = await md.Stubs(channel).memory.ListMemories(
            md.ListMemoriesRequest(owner=md.OwnerScope(owner_id=owner))
        )
    assert [(row.memory.key, row.memory.value) for row in listed.memories] == [
        ("diet", "Is vegetarian")
    ]


async def test_one_users_agent_never_reaches_another_users_facts(server: ServerProcess) -> None:
    ada, ben = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("ada", "ben"))
    with FakeModel() as model:
        calls_remember_then_says(model, "Lives in Porto", "identity", "city")
        await run(server, model, ada, "I live in Porto.")
        # Ben's agent asks for everything, and for Ada by name: it is pinned to Ben.
        model.reply(tool_calls=[ToolCall(name="recall", arguments={"query": "Porto"})])
        model.reply("I don't know.")
        await run(server, model, ben, "Where does Ada live?")
        assert tool_result(model.requests[-1])["hits"] == []
        model.reply(
            tool_calls=[ToolCall(name="recall", arguments={"query": "Porto", "owner": ada})]
        )
        model.reply("I cannot see that.")
        await run(server, model, ben, "Where does Ada live?")
        # Refused (the owner is pinned): the SDK tells the model the tool failed.
        answered = tool_text(model.requests[-1])
        assert "hits" not in answered
        assert "error" in answered.lower()
        assert "Porto" not in answered


# --- Pydantic AI -------------------------------------------------------------------------------

pydantic_example = load_example("pydantic_ai_mcp")


async def run_pydantic(server: ServerProcess, model: FakeModel, owner: str, text: str) -> str:
    """One turn of the Pydantic AI example's agent for `owner` (a new MCP session each time)."""
    agent = pydantic_example.assistant(
        pydantic_example.memory_toolset(server.address, owner),
        pydantic_example.chat_model(model.base_url, "fake-model", "unused"),
    )
    async with agent:
        result = await agent.run(text)
    return str(result.output)


async def test_a_pydantic_ai_agent_remembers_and_recalls_through_memoryd_mcp(
    server: ServerProcess,
) -> None:
    owner = f"ada-{uuid.uuid4().hex[:8]}"
    with FakeModel() as model:
        calls_remember_then_says(model, "Is vegetarian", "preference", "diet")
        assert await run_pydantic(server, model, owner, "I'm vegetarian.") == "Noted."
        tools = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
        assert {"remember", "recall", "note", "search_history", "compose_context"} <= tools
        model.reply(tool_calls=[ToolCall(name="recall", arguments={"query": "diet"})])
        model.reply("You are vegetarian.")
        assert await run_pydantic(server, model, owner, "What do I eat?") == "You are vegetarian."
        assert [hit["value"] for hit in tool_result(model.requests[-1])["hits"]] == [
            "Is vegetarian"
        ]
        # Another user's agent, pinned to them, finds nothing of it.
        model.reply(tool_calls=[ToolCall(name="recall", arguments={"query": "diet"})])
        model.reply("I don't know.")
        await run_pydantic(server, model, f"ben-{uuid.uuid4().hex[:8]}", "What do I eat?")
        assert tool_result(model.requests[-1])["hits"] == []


# --- The Claude Agent SDK ----------------------------------------------------------------------

claude_example = load_example("claude_agent_sdk_mcp")


async def run_claude(
    server: ServerProcess, model: FakeModel, home: Path, owner: str, text: str
) -> str:
    """One turn of the Claude Agent SDK example's agent for `owner`: the SDK's own agent
    program, speaking Anthropic's Messages protocol to the fake, starts `memoryd mcp`."""
    env = {
        "ANTHROPIC_BASE_URL": model.anthropic_base_url,
        "ANTHROPIC_API_KEY": "unused",
        # Its own home (its settings and sessions), and nothing beyond loopback.
        "HOME": str(home),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    options = claude_example.memory_options(
        server.address, owner, env=env, model="claude-sonnet-4-5"
    )
    return str(await claude_example.ask(options, text))


def claude_tool_result(request: dict[str, Any]) -> str:
    """What the last tool call answered, as the agent gave it back to the model."""
    for message in reversed(request["messages"]):
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block["content"]
                if isinstance(content, str):
                    return content
                return "".join(str(part.get("text", "")) for part in content)
    return ""


async def test_a_claude_agent_remembers_and_recalls_through_memoryd_mcp(
    server: ServerProcess, tmp_path: Path
) -> None:
    ada, ben = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("ada", "ben"))
    arguments = {"fact": "Is vegetarian", "category": "preference", "key": "diet"}
    with FakeModel() as model:
        model.reply(tool_calls=[ToolCall(name="mcp__memoryd__remember", arguments=arguments)])
        model.reply("Noted.")
        assert await run_claude(server, model, tmp_path, ada, "I'm vegetarian.") == "Noted."
        tools = {tool["name"] for tool in model.requests[0]["tools"]}
        assert {"mcp__memoryd__remember", "mcp__memoryd__recall"} <= tools
        # memoryd's tools only: none of the agent's own (a shell, file edits).
        assert sorted(name for name in tools if not name.startswith("mcp__memoryd__")) == []
        assert '"created":true' in claude_tool_result(model.requests[-1])

        # A later run (a new agent, a new MCP session) recalls it.
        model.reply(tool_calls=[ToolCall(name="mcp__memoryd__recall", arguments={"query": "diet"})])
        model.reply("You are vegetarian.")
        assert await run_claude(server, model, tmp_path, ada, "What do I eat?") == (
            "You are vegetarian."
        )
        # The agent's program appends its own notes to a tool's result: the JSON comes first.
        recalled, _ = json.JSONDecoder().raw_decode(claude_tool_result(model.requests[-1]))
        assert [hit["value"] for hit in recalled["hits"]] == ["Is vegetarian"]

        # Ben's agent, asking for Ada by name, is pinned to Ben.
        model.reply(
            tool_calls=[
                ToolCall(name="mcp__memoryd__recall", arguments={"query": "diet", "owner": ada})
            ]
        )
        model.reply("I cannot see that.")
        await run_claude(server, model, tmp_path, ben, "What does Ada eat?")
        answered = claude_tool_result(model.requests[-1])
        assert f"serves the owner '{ben}' only" in answered
        assert "vegetarian" not in answered.lower()
        assert "hits" not in answered

    async with md.connect(server.address) as channel:
        listed = await md.Stubs(channel).memory.ListMemories(
            md.ListMemoriesRequest(owner=md.OwnerScope(owner_id=ada))
        )
    assert [(row.memory.key, row.memory.value) for row in listed.memories] == [
        ("diet", "Is vegetarian")
    ]
