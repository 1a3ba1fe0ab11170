"""HTTP/JSON (the Connect protocol, `[memoryd.http] listen`) beside gRPC, on one server.

    python bench/http_json.py [--calls 2000] [--gateway]

One client at a time, calls one after the other on a kept-alive connection: GetPromptContext
(a read answered from the prompt cache) and AppendMessages (a committed write), over gRPC (the
Python client's synchronous stub), over HTTP with JSON and over HTTP with binary protobuf
(http.client). Rounds alternate the transports; reported are each one's p50 and p99 latency and
the server's CPU time per call, and the ratio of HTTP's to gRPC's.

`--gateway` adds the alternative memoryd did not take: gRPC-JSON transcoding by a grpc-gateway
proxy (bench/grpc_gateway, built here with Go: its protoc plugin and modules come from the Go
module proxy) in front of memoryd's gRPC port, JSON in and out. Its own CPU per call is
reported beside memoryd's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import append_throughput as appends
from google.protobuf import json_format

import memoryd_client as md
from memoryd.api import contract
from memoryd.testing.server_process import ServerProcess

ROUNDS = 3
GATEWAY = appends.ROOT / "bench" / "grpc_gateway"
# The protoc plugin's version: the same as grpc-gateway's in bench/grpc_gateway/go.mod.
GATEWAY_VERSION = "v2.33.0"
CONVERSATION = md.Conversation(channel="bench", chat_id="http", owner_id="ada")


def requests() -> dict[str, tuple[str, Any]]:
    return {
        "GetPromptContext": (
            "/memoryd.v2.ContextService/GetPromptContext",
            md.GetPromptContextRequest(owner_id="ada"),
        ),
        "AppendMessages": (
            "/memoryd.v2.ConversationService/AppendMessages",
            md.AppendMessagesRequest(
                conversation=CONVERSATION,
                messages=[md.NewMessage(role=md.ROLE_USER, sender="ada", content="a bench turn")],
            ),
        ),
    }


def over_http(
    address: str, kind: str, paths: Mapping[str, str] | None = None
) -> Callable[[str, Any], None]:
    """Calls to `address`, each at its path (or the one `paths` maps it to)."""
    connection = http.client.HTTPConnection(address, timeout=60)

    def call(path: str, request: Any) -> None:
        path = (paths or {}).get(path, path)
        body = (
            request.SerializeToString()
            if kind == "application/proto"
            else json_format.MessageToJson(request, indent=None).encode()
        )
        try:
            connection.request("POST", path, body, {"Content-Type": kind})
        except (BrokenPipeError, ConnectionResetError):  # closed while idle (keep-alive timeout)
            connection.close()
            connection.request("POST", path, body, {"Content-Type": kind})
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            sys.exit(f"{path} answered {answer.status}")

    return call


def over_grpc(channel: Any) -> Callable[[str, Any], None]:
    callables: dict[str, Any] = {}

    def call(path: str, request: Any) -> None:
        if path not in callables:
            callables[path] = channel.unary_unary(
                path, request_serializer=type(request).SerializeToString
            )
        callables[path](request)

    return call


def gateway_binary() -> Path:
    """Build the grpc-gateway proxy: its plugin into .tools/bin (once), its handlers generated
    from the protos, then the binary."""
    tools = appends.ROOT / ".tools" / "bin"
    plugin = f"github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@{GATEWAY_VERSION}"
    if not (tools / "protoc-gen-grpc-gateway").exists():
        subprocess.run(
            ["go", "install", plugin], env=os.environ | {"GOBIN": str(tools)}, check=True
        )
    subprocess.run(
        [str(tools / "buf"), "generate", "--template", "buf.gen.yaml"], cwd=GATEWAY, check=True
    )
    binary = tools / "memoryd-grpc-gateway"
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=GATEWAY, check=True)
    return binary


def start_gateway(grpc_address: str) -> tuple[subprocess.Popen[str], str]:
    """The proxy in front of memoryd's gRPC address; returns the process and its HTTP address."""
    process = subprocess.Popen(
        [str(gateway_binary()), grpc_address], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def timed(call: Callable[[str, Any], None], path: str, request: Any, calls: int) -> list[float]:
    latencies = []
    for _ in range(calls):
        start = time.perf_counter()
        call(path, request)
        latencies.append((time.perf_counter() - start) * 1000)
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument(
        "--gateway", action="store_true", help="measure gRPC-JSON transcoding (grpc-gateway) too"
    )
    args = parser.parse_args()
    results: dict[str, Any] = {"benchmark": "http_json", "calls_per_round": args.calls}
    with tempfile.TemporaryDirectory() as scratch:
        server = ServerProcess(
            Path(scratch) / "home", config='[memoryd.http]\nlisten = "127.0.0.1:0"\n'
        ).start()
        http_address = server.events("serving")[-1]["http"]
        gateway = start_gateway(server.address) if args.gateway else None
        try:
            with md.connect_sync(server.address) as channel:
                transports = {
                    "grpc": over_grpc(channel),
                    "http_json": over_http(http_address, "application/json"),
                    "http_proto": over_http(http_address, "application/proto"),
                }
                if gateway is not None:
                    # The gateway is generated from memoryd.v1's protos: it calls v1's paths.
                    legacy = {current: old for old, current in contract.routes().items()}
                    transports["gateway_json"] = over_http(gateway[1], "application/json", legacy)
                for name, (path, request) in requests().items():
                    found: dict[str, dict[str, list[float]]] = {
                        transport: {"ms": [], "cpu_us": [], "proxy_cpu_us": []}
                        for transport in transports
                    }
                    for call in transports.values():  # warm-up
                        timed(call, path, request, 200)
                    for _ in range(ROUNDS):
                        for transport, call in transports.items():
                            proxy = (
                                gateway[0].pid if gateway and transport == "gateway_json" else None
                            )
                            before = appends.cpu_seconds(server.process.pid)
                            proxy_before = appends.cpu_seconds(proxy) if proxy else 0.0
                            found[transport]["ms"] += timed(call, path, request, args.calls)
                            spent = appends.cpu_seconds(server.process.pid) - before
                            found[transport]["cpu_us"].append(spent / args.calls * 1e6)
                            if proxy:
                                spent = appends.cpu_seconds(proxy) - proxy_before
                                found[transport]["proxy_cpu_us"].append(spent / args.calls * 1e6)
                    results[name] = summary(found)
        finally:
            if gateway is not None:
                gateway[0].terminate()
                gateway[0].wait()
            server.stop()
    print(json.dumps(results, indent=2))
    return 0


def summary(found: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for transport, measured in found.items():
        latencies = sorted(measured["ms"])
        out[transport] = {
            "p50_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)], 3),
            "server_cpu_us_per_call": round(statistics.median(measured["cpu_us"])),
        }
        if measured["proxy_cpu_us"]:
            out[transport]["proxy_cpu_us_per_call"] = round(
                statistics.median(measured["proxy_cpu_us"])
            )
    for transport in ("http_json", "http_proto", "gateway_json"):
        if transport not in out:
            continue
        out[f"{transport}_over_grpc_p50"] = round(
            out[transport]["p50_ms"] / out["grpc"]["p50_ms"], 2
        )
        out[f"{transport}_over_grpc_cpu"] = round(
            out[transport]["server_cpu_us_per_call"] / out["grpc"]["server_cpu_us_per_call"], 2
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
