"""An OpenAI Agents SDK agent whose long-term memory is memoryd, through `memoryd mcp`: the SDK
starts `memoryd mcp` over stdio, lists its tools (remember, recall, note, search_history,
compose_context...) and the model calls them. Each line of stdin is a user turn.

    pip install openai-agents memoryd
    OPENAI_API_KEY=... python clients/python/examples/openai_agents_mcp.py --owner ada

Any OpenAI-compatible endpoint works too: OPENAI_BASE_URL (with OPENAI_API_KEY if it needs one)
and OPENAI_MODEL. The agent reaches memoryd at --address (default $MEMORYD_ADDRESS or
127.0.0.1:50051); its token, when the server has tokens, comes from $MEMORYD_TOKEN.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI

INSTRUCTIONS = (
    "You are a helpful assistant with a long-term memory. When the user tells you something "
    "lasting about themselves (who they are, what they prefer, what they are working towards), "
    "remember it. Before answering a question about them or about earlier conversations, "
    "recall what you know."
)


def memory_server(
    address: str, owner: str, agent: str = "main", conversation: str = ""
) -> MCPServerStdio:
    """`memoryd mcp` over stdio for one user: every tool call works on that owner, in
    `conversation` (CHANNEL:CHAT; default `openai-agents:<owner>`) unless the call names one."""
    return MCPServerStdio(
        name="memoryd",
        params={
            "command": sys.executable,
            "args": [
                *("-m", "memoryd", "mcp", "--address", address),
                *("--agent", agent, "--owner", owner, "--pin-owner"),
                *("--conversation", conversation or f"openai-agents:{owner}"),
            ],
            "env": dict(os.environ),
        },
        client_session_timeout_seconds=30,
    )


def assistant(memory: MCPServerStdio, model: OpenAIChatCompletionsModel) -> Agent:
    """The agent, with memoryd's tools."""
    return Agent(name="assistant", instructions=INSTRUCTIONS, mcp_servers=[memory], model=model)


def chat_model(client: AsyncOpenAI, name: str) -> OpenAIChatCompletionsModel:
    """A model spoken to through chat completions (what every OpenAI-compatible server has)."""
    return OpenAIChatCompletionsModel(model=name, openai_client=client)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", "127.0.0.1:50051"))
    parser.add_argument("--owner", default="default", help="the user this agent talks to")
    args = parser.parse_args()
    set_tracing_disabled(True)  # the SDK would send its traces to OpenAI
    client = AsyncOpenAI(base_url=os.environ.get("OPENAI_BASE_URL"))
    model = chat_model(client, os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"))
    async with memory_server(args.address, args.owner) as memory:
        agent = assistant(memory, model)
        for line in sys.stdin:
            if line.strip():
                result = await Runner.run(agent, line.strip())
                print(result.final_output, flush=True)  # noqa: T201 - the example's output
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
