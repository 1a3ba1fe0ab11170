"""What the Vercel AI SDK's memoryd middleware adds to a turn, against the same RPCs called
directly from TypeScript (bench/ai_sdk_overhead.mjs).

    python bench/ai_sdk_overhead.py --locomo PATH/TO/locomo10.json [--turns 200] [--rounds 3]

A turn is `generateText` of a LoCoMo user line through the SDK's OpenAI-compatible provider on a
local chat-completions server (memoryd.testing's fake, answering at once): with the model wrapped
in `memorydMiddleware`, or with the application doing what it does (ComposeContext and Recall,
the prompt built from them, the call, CommitTurn of the turn). Each round gives each arm a fresh
conversation, turn by turn, each arm first every other turn; every query is embedded once first
(the server keeps query vectors). The TypeScript client is built first (`tsc`); it needs its
node_modules (`make install`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from framework_overhead import turns_of

import memoryd_client as md
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from memoryd_client.integrations._kept import search_query

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "clients" / "typescript"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    said = [line for line, _ in turns_of(args.locomo, args.turns)]
    subprocess.run(["npx", "tsc", "-p", "tsconfig.json"], cwd=CLIENT, check=True)
    with (
        tempfile.TemporaryDirectory() as scratch,
        FakeModel(default=Reply(content="Noted.")) as model,
    ):
        server = ServerProcess(Path(scratch) / "home").start()
        try:
            with md.connect_sync(server.address) as channel:
                stubs = md.SyncStubs(channel)
                for line in said:  # each query's vector, once
                    stubs.memory.Recall(
                        md.RecallRequest(
                            owner=md.OwnerScope(owner_id="warm-up"),
                            query=search_query(line),
                            scope=md.RECALL_SCOPE_OWNER,
                        )
                    )
            turns_file = Path(scratch) / "turns.json"
            turns_file.write_text(json.dumps(said), encoding="utf-8")
            ran = subprocess.run(
                ["node", str(ROOT / "bench" / "ai_sdk_overhead.mjs")],
                env={
                    **os.environ,
                    "TS_CLIENT": str(CLIENT),
                    "MEMORYD_ADDRESS": server.address,
                    "MODEL_URL": model.base_url,
                    "TURNS_FILE": str(turns_file),
                    "ROUNDS": str(args.rounds),
                },
                capture_output=True,
                text=True,
                check=True,
            )
        finally:
            server.stop()
    figures = json.loads(ran.stdout.strip().splitlines()[-1])
    print(
        json.dumps(
            {
                "benchmark": "ai_sdk_overhead",
                "turns_per_round": len(said),
                "rounds": args.rounds,
                "ai_sdk": figures,
                "target_added_p50_ms": 1.0,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
