"""A Claude Agent SDK agent whose long-term memory is memoryd, through `memoryd mcp`: the SDK's
agent starts `memoryd mcp` over stdio as an MCP server, lists its tools (remember, recall, note,
search_history, compose_context...) and the model calls them. The agent gets memoryd's tools and
no others (no shell, no file edits). Each line of stdin is a user turn.

    pip install claude-agent-sdk memoryd
    ANTHROPIC_API_KEY=... python clients/python/examples/claude_agent_sdk_mcp.py --owner ada

The agent reaches memoryd at --address (default $MEMORYD_ADDRESS or 127.0.0.1:50051); its
token, when the server has tokens, comes from $MEMORYD_TOKEN. ANTHROPIC_BASE_URL and
ANTHROPIC_MODEL choose another endpoint or model, as for the SDK itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

INSTRUCTIONS = (
    "You are a helpful assistant with a long-term memory. When the user tells you something "
    "lasting about themselves (who they are, what they prefer, what they are working towards), "
    "remember it. Before answering a question about them or about earlier conversations, "
    "recall what you know."
)
# The MCP server's name: its tools reach the model as mcp__memoryd__<tool>.
SERVER = "memoryd"


def memory_options(
    address: str,
    owner: str,
    *,
    agent: str = "main",
    conversation: str = "",
    env: dict[str, str] | None = None,
    model: str | None = None,
) -> ClaudeAgentOptions:
    """The agent's options for one user: `memoryd mcp` over stdio, every tool call on that
    owner, in `conversation` (CHANNEL:CHAT; default `claude:<owner>`) unless the call names
    one. `env` is the agent process's environment (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY...)."""
    command = [
        *("-m", "memoryd", "mcp", "--address", address),
        *("--agent", agent, "--owner", owner, "--pin-owner"),
        *("--conversation", conversation or f"claude:{owner}"),
    ]
    token = os.environ.get("MEMORYD_TOKEN")
    server: dict[str, object] = {"type": "stdio", "command": sys.executable, "args": command}
    if token:
        server["env"] = {"MEMORYD_TOKEN": token}
    return ClaudeAgentOptions(
        system_prompt=INSTRUCTIONS,
        mcp_servers={SERVER: server},  # type: ignore[dict-item]  # a stdio server's config
        # memoryd's tools, allowed without asking; none of the agent's own.
        tools=[],
        allowed_tools=[f"mcp__{SERVER}"],
        # Nothing from the user's or the project's Claude settings.
        setting_sources=[],
        env=env or {},
        model=model,
        max_turns=8,
    )


async def ask(options: ClaudeAgentOptions, text: str) -> str:
    """One turn: the agent's final answer."""
    answer = ""
    async for message in query(prompt=text, options=options):
        if isinstance(message, ResultMessage):
            answer = message.result or ""
    return answer


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", "127.0.0.1:50051"))
    parser.add_argument("--owner", default="default", help="the user this agent talks to")
    args = parser.parse_args()
    options = memory_options(args.address, args.owner, model=os.environ.get("ANTHROPIC_MODEL"))
    for line in sys.stdin:
        if line.strip():
            print(await ask(options, line.strip()), flush=True)  # noqa: T201 - the example's output
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
