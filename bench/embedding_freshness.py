"""How soon a message appended at a chat's pace has its vector, alone and during a bulk load,
and how fast the bulk load is embedded: the embedded model, a real server, real chat text.

    python bench/embedding_freshness.py --locomo PATH/TO/locomo10.json [--conversations 4]
        [--rate 2] [--seconds 30]

Live chats: `--conversations` chats each append one turn (LoCoMo's, in order) so that all
together append `--rate` a second. After each append the script asks SearchHistory of that
chat every 20 ms until the chat has no message without a vector (the answer's `unembedded`):
the time from the append's answer to that is the message's freshness. First for `--seconds`
with nothing else going on; then while LoCoMo's 5,882 turns are appended to another
conversation, 100 a call as fast as the server takes them (a bulk import), until the embedder
has caught up with them: the live messages are embedded first (the live queue), the bulk load
with what is left, at the rate reported. Target: freshness p99 within 2 s in both.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import real_chat

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

POLL_SECONDS = 0.02


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Live:
    """Chats appending at a chat's pace, each message timed until its vector exists."""

    def __init__(
        self, memory: md.SyncStubs, corpus: real_chat.Corpus, args: argparse.Namespace
    ) -> None:
        self.memory = memory
        self.turns = corpus.texts(1_000_000, offset=3_000)
        self.chats = [
            md.Conversation(agent_id="bench", owner_id=f"o{n}", channel="live", chat_id=f"c{n}")
            for n in range(args.conversations)
        ]
        self.interval = 1 / args.rate
        self.turn = 0

    def embedded(self, chat: md.Conversation) -> bool:
        answer = self.memory.conversations.SearchHistory(
            md.SearchHistoryRequest(query="news", conversation=chat, limit=1)
        )
        return answer.unembedded == 0

    def run(self, keep_going: threading.Event | None, seconds: float) -> list[float]:
        """Append and time until `seconds` pass (or, with `keep_going`, while it is set)."""
        latencies: list[float] = []
        until = time.perf_counter() + seconds
        while keep_going.is_set() if keep_going else time.perf_counter() < until:
            began = time.perf_counter()
            chat = self.chats[self.turn % len(self.chats)]
            sender, text = next(self.turns)
            self.memory.conversations.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=chat,
                    messages=[md.NewMessage(role=md.ROLE_USER, sender=sender, content=text)],
                )
            )
            answered = time.perf_counter()
            while not self.embedded(chat):
                time.sleep(POLL_SECONDS)
            latencies.append((time.perf_counter() - answered) * 1000)
            self.turn += 1
            time.sleep(max(0.0, self.interval - (time.perf_counter() - began)))
        return latencies


def figures(latencies: list[float]) -> dict[str, object]:
    return {
        "messages": len(latencies),
        "freshness_ms": {
            "p50": round(percentile(latencies, 0.5), 1),
            "p99": round(percentile(latencies, 0.99), 1),
            "max": round(max(latencies), 1),
        },
    }


def bulk_load(memory: md.SyncStubs, corpus: real_chat.Corpus, done: threading.Event) -> None:
    """LoCoMo's turns into one conversation, 100 a call, then the embedder's catching up."""
    chat = md.Conversation(agent_id="bench", owner_id="import", channel="import", chat_id="bulk")
    turns = list(corpus.texts(len(corpus.turns)))
    for start in range(0, len(turns), real_chat.PER_CALL):
        memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=chat,
                messages=[
                    md.NewMessage(role=md.ROLE_USER, sender=sender, content=text)
                    for sender, text in turns[start : start + real_chat.PER_CALL]
                ],
            )
        )
    while memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest()).pending_messages:
        time.sleep(0.2)
    done.set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo's locomo10.json")
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--rate", type=float, default=2.0, help="messages a second, all chats")
    parser.add_argument("--seconds", type=float, default=30.0, help="of live chats alone")
    args = parser.parse_args()
    corpus = real_chat.Corpus.read(args.locomo)
    with tempfile.TemporaryDirectory() as scratch:
        server = ServerProcess(Path(scratch) / "home").start()
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.SyncStubs(channel)
                live = Live(memory, corpus, args)
                found: dict[str, object] = {"benchmark": "embedding_freshness"}
                found["live alone"] = figures(live.run(None, args.seconds))
                loading, done = threading.Event(), threading.Event()
                loading.set()
                loader = threading.Thread(target=bulk_load, args=(memory, corpus, done))
                began = time.perf_counter()
                loader.start()

                def watch() -> None:
                    done.wait()
                    loading.clear()

                watcher = threading.Thread(target=watch)
                watcher.start()
                during = live.run(loading, 0.0)
                seconds = time.perf_counter() - began
                loader.join()
                watcher.join()
                found["live during a bulk load"] = figures(during)
                found["bulk load"] = {
                    "messages": len(corpus.turns),
                    "seconds_until_embedded": round(seconds, 1),
                    "per_second": round(len(corpus.turns) / seconds, 1),
                }
        finally:
            code = server.stop()
    if code != 0:
        sys.exit(f"memoryd exited with {code}")
    found["target_ms"] = {"freshness p99": 2000}
    print(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
