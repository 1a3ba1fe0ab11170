"""A Pydantic AI agent whose long-term memory is memoryd, through `memoryd mcp`: Pydantic AI
starts `memoryd mcp` over stdio as an MCP toolset, lists its tools (remember, recall, note,
search_history, compose_context...) and the model calls them. Each line of stdin is a user turn.

    pip install "pydantic-ai-slim[openai,mcp]" memoryd
    OPENAI_API_KEY=... python clients/python/examples/pydantic_ai_mcp.py --owner ada

Any OpenAI-compatible endpoint works too: OPENAI_BASE_URL (with OPENAI_API_KEY if it needs one)
and OPENAI_MODEL. The agent reaches memoryd at --address (default $MEMORYD_ADDRESS or
127.0.0.1:50051); its token, when the server has tokens, comes from $MEMORYD_TOKEN.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

INSTRUCTIONS = (
    "You are a helpful assistant with a long-term memory. When the user tells you something "
    "lasting about themselves (who they are, what they prefer, what they are working towards), "
    "remember it. Before answering a question about them or about earlier conversations, "
    "recall what you know."
)


def memory_toolset(
    address: str, owner: str, agent: str = "main", conversation: str = ""
) -> MCPToolset[None]:
    """`memoryd mcp` over stdio for one user: every tool call works on that owner, in
    `conversation` (CHANNEL:CHAT; default `pydantic-ai:<owner>`) unless the call names one."""
    command = [
        *("-m", "memoryd", "mcp", "--address", address),
        *("--agent", agent, "--owner", owner, "--pin-owner"),
        *("--conversation", conversation or f"pydantic-ai:{owner}"),
    ]
    transport = StdioTransport(command=sys.executable, args=command, env=dict(os.environ))
    return MCPToolset(transport, id="memoryd", init_timeout=30)


def assistant(memory: MCPToolset[None], model: OpenAIChatModel) -> Agent[None, str]:
    """The agent, with memoryd's tools."""
    return Agent(model, instructions=INSTRUCTIONS, toolsets=[memory])


def chat_model(base_url: str | None, name: str, api_key: str | None = None) -> OpenAIChatModel:
    """A model spoken to through chat completions (what every OpenAI-compatible server has)."""
    return OpenAIChatModel(name, provider=OpenAIProvider(base_url=base_url, api_key=api_key))


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", "127.0.0.1:50051"))
    parser.add_argument("--owner", default="default", help="the user this agent talks to")
    args = parser.parse_args()
    model = chat_model(
        os.environ.get("OPENAI_BASE_URL"),
        os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"),
        os.environ.get("OPENAI_API_KEY"),
    )
    agent = assistant(memory_toolset(args.address, args.owner), model)
    async with agent:
        for line in sys.stdin:
            if line.strip():
                result = await agent.run(line.strip())
                print(result.output, flush=True)  # noqa: T201 - the example's output
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
