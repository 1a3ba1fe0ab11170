"""A LlamaIndex chat whose long-term memory is memoryd's: LlamaIndex's Memory keeps the recent
turns, and a memoryd block gives the model what memoryd knows of the user (the prompt files and
the facts that match what was just said) and hands memoryd the turns Memory lets go of, for its
review to learn from. Each line of stdin is a user turn.

    pip install "memoryd-client[llama-index]" llama-index-llms-openai
    OPENAI_API_KEY=... python clients/python/examples/llama_index_memory.py --user ada

memoryd is at --address (default $MEMORYD_ADDRESS or 127.0.0.1:50051), with $MEMORYD_TOKEN when
it has tokens.
"""

from __future__ import annotations

import argparse
import os
import sys

import grpc
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import LLM
from llama_index.core.memory import Memory

import memoryd_client as md
from memoryd_client.integrations.llama_index import MemorydMemoryBlock


def chat_engine(
    llm: LLM,
    channel: grpc.Channel,
    *,
    user: str,
    session: str,
    agent: str = "main",
    token_limit: int = 30_000,
) -> SimpleChatEngine:
    """A chat engine for one user's session, its memory's long-term block memoryd's."""
    block = MemorydMemoryBlock(channel=channel, owner_id=user, agent_id=agent)
    memory = Memory.from_defaults(
        session_id=session, token_limit=token_limit, memory_blocks=[block]
    )
    return SimpleChatEngine.from_defaults(llm=llm, memory=memory)


def main() -> int:
    # Its own package (llama-index-llms-openai), which pins openai below memoryd's version: it is
    # the example's model, not a dependency of the integration or of the tests.
    from llama_index.llms.openai import OpenAI  # type: ignore[import-not-found]  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", md.DEFAULT_ADDRESS))
    parser.add_argument("--user", default="default", help="whose memory it is")
    parser.add_argument("--session", default="main", help="the conversation of that user")
    args = parser.parse_args()
    llm = OpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"))
    with md.connect_sync(args.address, token=os.environ.get("MEMORYD_TOKEN")) as channel:
        engine = chat_engine(llm, channel, user=args.user, session=args.session)
        for line in sys.stdin:
            if line.strip():
                print(engine.chat(line.strip()), flush=True)  # noqa: T201 - the example's output
    return 0


if __name__ == "__main__":
    sys.exit(main())
