"""An OpenAI Agents SDK agent whose conversation and long-term memory are memoryd's, through the
client (no MCP process): each user's session is a memoryd conversation, and the agent has
`remember` and `recall` over that user's facts. Each line of stdin is a user turn.

    pip install "memoryd-client[openai-agents]"
    OPENAI_API_KEY=... python clients/python/examples/openai_agents_session.py --owner ada

Any OpenAI-compatible endpoint works too: OPENAI_BASE_URL (with OPENAI_API_KEY if it needs one)
and OPENAI_MODEL. memoryd is at --address (default $MEMORYD_ADDRESS or 127.0.0.1:50051); its
token, when the server has tokens, comes from $MEMORYD_TOKEN.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

import memoryd_client as md
from memoryd_client.integrations.openai_agents import MemorydSession, memory_tools

INSTRUCTIONS = (
    "You are a helpful assistant with a long-term memory. When the user tells you something "
    "lasting about themselves (who they are, what they prefer, what they are working towards), "
    "remember it. Before answering a question about them, recall what you know."
)


def assistant(session: MemorydSession, model: OpenAIChatCompletionsModel) -> Agent:
    """The agent, with memory tools bound to the session's user."""
    return Agent(
        name="assistant", instructions=INSTRUCTIONS, tools=memory_tools(session), model=model
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", md.DEFAULT_ADDRESS))
    parser.add_argument("--owner", default="default", help="the user this agent talks to")
    parser.add_argument("--session", default="", help="the conversation (default: the owner's)")
    args = parser.parse_args()
    set_tracing_disabled(True)  # the SDK would send its traces to OpenAI
    client = AsyncOpenAI(base_url=os.environ.get("OPENAI_BASE_URL"))
    model = OpenAIChatCompletionsModel(
        model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"), openai_client=client
    )
    async with md.connect(args.address, token=os.environ.get("MEMORYD_TOKEN")) as channel:
        session = MemorydSession(channel, args.session or args.owner, owner_id=args.owner)
        agent = assistant(session, model)
        for line in sys.stdin:
            if line.strip():
                result = await Runner.run(agent, line.strip(), session=session)
                print(result.final_output, flush=True)  # noqa: T201 - the example's output
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
