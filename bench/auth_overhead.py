"""(i) What authentication adds to a call: the token check and the request walk of api/auth.py.

    python bench/auth_overhead.py [--rounds 20000]

In-process, no server: the cost per call of finding the caller's token among three (SHA-256 and
a constant-time comparison with each) and of admitting an AppendMessages request of 1 and of 100
messages by its declared access (memoryd.api.access), every agent_id, Trust and guest_ignored
field visited, unset trust filled in, for a guest-capped token. Compare with the
server's CPU time per acknowledged append that bench/append_throughput.py reports (~800 us).
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from collections.abc import Callable

import memoryd_client as md
from memoryd.api import contract
from memoryd.api.access import declarations
from memoryd.api.auth import Authorizer
from memoryd.config import TokenSettings, token_digest
from memoryd_client.v2 import conversation_service_pb2

APPEND = "/memoryd.v2.ConversationService/AppendMessages"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    args = parser.parse_args()
    tokens = tuple(
        TokenSettings(
            digest=token_digest(f"token-{n}-0123456789abcdef"),
            role="adapter",
            agents=frozenset({"main"}),
            max_trust="guest",
        )
        for n in range(3)
    )
    guard = Authorizer(tokens, declarations(contract.methods()))
    metadata = (("authorization", "Bearer token-2-0123456789abcdef"),)
    chat = md.Conversation(channel="telegram", chat_id="42")

    def request(count: int) -> conversation_service_pb2.AppendMessagesRequest:
        """The request as the server reads it: a memoryd.v2 message."""
        sent = md.AppendMessagesRequest(
            conversation=chat, messages=[md.user("ada", "hello there")] * count
        )
        return conversation_service_pb2.AppendMessagesRequest.FromString(sent.SerializeToString())

    one, hundred = request(1), request(100)
    rounds = args.rounds

    def per_call_us(run: Callable[[], object], number: int) -> float:
        return round(timeit.timeit(run, number=number) / number * 1e6, 2)

    result = {
        "benchmark": "auth_overhead",
        "authenticate_us": per_call_us(lambda: guard.caller(metadata), rounds),
        "admit_1_message_us": per_call_us(lambda: guard.admit(tokens[2], APPEND, one), rounds),
        "admit_100_messages_us": per_call_us(
            lambda: guard.admit(tokens[2], APPEND, hundred), max(rounds // 10, 1)
        ),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
