"""A console channel adapter: each line of stdin is a user message. memoryd composes the context
of the next model call; the reply is an echo, or the answer of an OpenAI-compatible model when
OPENAI_BASE_URL and OPENAI_MODEL are set (OPENAI_API_KEY if it needs one); the turn is
committed; then what memoryd knows about the user is printed.

    python clients/python/examples/adapter.py --address 127.0.0.1:50051 --owner ada
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import urllib.request

import grpc

import memoryd_client as md


def answer(composed: md.ComposeContextResponse | None, text: str) -> str:
    """An echo, or the configured model's answer to the composed context and `text`."""
    base, model = os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_MODEL")
    if not base or not model:
        return f"echo: {text}"
    messages = [
        {"role": md.Role.Name(part.role).removeprefix("ROLE_").lower(), "content": part.content}
        for part in (composed.parts if composed else [])
    ]
    messages.append({"role": "user", "content": text})
    request = urllib.request.Request(  # noqa: S310 - the operator's own endpoint
        base.rstrip("/") + "/chat/completions",
        data=json.dumps({"model": model, "messages": messages}).encode(),
        headers={"content-type": "application/json"}
        | ({"authorization": f"Bearer {key}"} if (key := os.environ.get("OPENAI_API_KEY")) else {}),
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        reply: str = json.load(response)["choices"][0]["message"]["content"]
    return reply


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", md.DEFAULT_ADDRESS))
    parser.add_argument("--owner", default="default")
    parser.add_argument("--chat", default="console")
    args = parser.parse_args()
    key = md.Conversation(owner_id=args.owner, channel="console", chat_id=args.chat)
    async with md.connect(args.address, token=os.environ.get("MEMORYD_TOKEN")) as channel:
        chat = md.ConversationClient(channel, key)
        for line in sys.stdin:
            text = line.strip()
            if not text:
                continue
            try:
                composed: md.ComposeContextResponse | None = await chat.compose(8000)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND:  # a new conversation: no record
                    raise
                composed = None
            reply = await asyncio.to_thread(answer, composed, text)
            print(f"assistant: {reply}")  # noqa: T201 - the adapter's console
            await chat.commit_turn(md.user(args.owner, text), md.assistant("adapter", reply))
            for hit in (await chat.recall(scope=md.RECALL_SCOPE_ALL)).hits:
                print(f"known: {hit.memory.key} = {hit.memory.value}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
