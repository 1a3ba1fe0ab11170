"""Choosing the HTTP server of memoryd's HTTP listeners: speed, and what a hostile client does.

    python bench/http_servers.py [--calls 2000] [--held 150] [--skip-hostile]

Four servers, each in a process of its own, serving the same small ASGI application (it reads
the request's body and answers a JSON object, as a Connect call does):

- `uvicorn`: uvicorn 0.5x as memoryd ran it before (its own accept loop, h11, keep-alive 30 s);
- `uvicorn+limit`: the same with uvicorn's own cap, `limit_concurrency` (it answers 503 over the
  cap, after accepting);
- `hypercorn`: Hypercorn with its timeouts (`read_timeout` 10 s, `keep_alive_timeout` 30 s);
- `memoryd`: memoryd.web.listener (uvicorn's h11 protocol on memoryd's own accept loop, with
  header, body and idle deadlines and a cap below the open-file limit).

For each:
1. latency: `--calls` POSTs one after the other on one kept-alive connection (p50, p99) and the
   server's CPU time per call;
2. held open: `--held` connections that never finish a request (half send nothing, half half a
   request line and a header), and one that drips a header line each second: how many are still
   open 15 s later (the timeouts are 10 s);
3. starved: the server started with an open-file limit of 1,024, beside a second listener in the
   same process standing for gRPC; 1,100 idle HTTP connections are opened, then the second
   listener is called: does it answer, and how many log lines did the server write.

Timing belongs here, not in the tests: the tests check the behaviours themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

VARIANTS = ("uvicorn", "uvicorn+limit", "hypercorn", "memoryd")
TIMEOUT = 10.0
LIMIT = 1024
STARVING = 1100
BODY = json.dumps({"conversation": {"channel": "bench", "chatId": "1"}, "limit": 5}).encode()


# --- the server side (this script run with --serve) -------------------------------------------


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A Connect-like call: read the body, answer a small JSON object."""
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    answer = json.dumps({"messages": [], "read": len(body)}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": answer})


async def sibling(port: int) -> asyncio.Server:
    """The stand-in for gRPC in the same process: answers "pong" to a line."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(b"pong\n")
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", port)


def bound(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # As memoryd's listener does: without it every answer waits out the delayed ACK (40 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def serve(variant: str, port: int, sibling_port: int) -> None:
    await sibling(sibling_port)
    if variant.startswith("uvicorn"):
        import uvicorn  # noqa: PLC0415

        limit = (LIMIT - 64) // 2 if variant == "uvicorn+limit" else None
        settings = uvicorn.Config(
            app,
            http="h11",
            lifespan="off",
            log_level="warning",
            timeout_keep_alive=30,
            limit_concurrency=limit,
        )
        server = uvicorn.Server(settings)
        settings.load()
        server.lifespan = settings.lifespan_class(settings)
        await server.startup(sockets=[bound(port)])
    elif variant == "hypercorn":
        from hypercorn.asyncio import serve as hypercorn_serve  # noqa: PLC0415
        from hypercorn.config import Config  # noqa: PLC0415

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.read_timeout = int(TIMEOUT)
        config.keep_alive_timeout = 30
        config.loglevel = "WARNING"
        served = cast("Any", app)  # an ASGI app; hypercorn's types name its scopes precisely
        asyncio.get_running_loop().create_task(hypercorn_serve(served, config))
        while True:  # it binds in its task: ready once it accepts
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            break
    else:
        from memoryd.web.budget import ConnectionBudget, HttpLimits  # noqa: PLC0415
        from memoryd.web.listener import HttpListener  # noqa: PLC0415

        await HttpListener.start(
            app,
            f"127.0.0.1:{port}",
            limits=HttpLimits(header_seconds=TIMEOUT),
            budget=ConnectionBudget.for_process(),
            setting="bench",
        )
    print("ready", flush=True)
    await asyncio.Event().wait()


# --- the client side ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def started(variant: str, *, open_files: int | None = None) -> Any:
    port, other = free_port(), free_port()
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed below, after the server

    def limited() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", variant, str(port), str(other)],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        preexec_fn=limited,  # noqa: PLW1509 - an rlimit for the child only
    )
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            log.seek(0)
            raise RuntimeError(f"{variant} did not start: {log.read()[-2000:]}")
        yield process, port, other, log
    finally:
        process.kill()
        process.wait()
        log.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latency(variant: str, calls: int) -> dict[str, float]:
    with started(variant) as (process, port, _other, _log):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"content-type": "application/json"}
        for _ in range(200):  # warm up
            connection.request(
                "POST", "/memoryd.v2.ConversationService/ListMessages", BODY, headers
            )
            connection.getresponse().read()
        before = cpu_seconds(process.pid)
        took = []
        for _ in range(calls):
            start = time.perf_counter()
            connection.request(
                "POST", "/memoryd.v2.ConversationService/ListMessages", BODY, headers
            )
            connection.getresponse().read()
            took.append((time.perf_counter() - start) * 1000)
        cpu = cpu_seconds(process.pid) - before
        connection.close()
    took.sort()
    return {
        "p50_ms": round(statistics.median(took), 3),
        "p99_ms": round(took[int(len(took) * 0.99) - 1], 3),
        "server_cpu_us_per_call": round(cpu / calls * 1e6, 1),
    }


def held_open(variant: str, held: int) -> dict[str, int]:
    with started(variant) as (_process, port, _other, _log):
        sockets = []
        for index in range(held):
            sock = socket.create_connection(("127.0.0.1", port))
            if index % 2:
                sock.sendall(
                    b"POST /memoryd.v2.ConversationService/ListMessages HTTP/1.1\r\nHost: x\r\n"
                )
            sockets.append(sock)
        drip = socket.create_connection(("127.0.0.1", port))
        drip.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")
        for _ in range(int(TIMEOUT + 5)):
            time.sleep(1)
            with contextlib.suppress(OSError):
                drip.sendall(b"X-Drip: 1\r\n")
        left = sum(_open(sock) for sock in sockets)
        dripping = _open(drip)
        for sock in (*sockets, drip):
            sock.close()
    return {"held": held, "still_open": left, "drip_still_open": int(dripping)}


def _open(sock: socket.socket) -> bool:
    """Whether the server has not closed `sock` (it may have sent a 408 first)."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def starved(variant: str) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), hard))
    with started(variant, open_files=LIMIT) as (_process, port, other, log):
        sockets = []
        for _ in range(STARVING):
            try:
                sockets.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break
        time.sleep(2)
        answered = False
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", other), timeout=5) as sock,
        ):
            sock.settimeout(5)
            sock.sendall(b"ping\n")
            answered = sock.recv(16) == b"pong\n"
        time.sleep(8)
        log.seek(0)
        lines = len(log.read().splitlines())
        for sock in sockets:
            sock.close()
    return {"connections": len(sockets), "other_listener_answered": answered, "log_lines": lines}


def _available(variant: str, found: dict[str, Any]) -> bool:
    if variant != "hypercorn":
        return True
    try:
        import hypercorn  # noqa: F401, PLC0415
    except ImportError:
        found[variant] = "not installed (pip install hypercorn)"
        return False
    return True


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        asyncio.run(serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--held", type=int, default=150)
    parser.add_argument("--skip-hostile", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds, interleaved")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args()
    found: dict[str, Any] = {}
    variants = [variant for variant in args.variants if _available(variant, found)]
    rounds: dict[str, list[dict[str, float]]] = {variant: [] for variant in variants}
    for _ in range(args.rounds):  # interleaved: the machine's noise falls on every variant
        for variant in variants:
            rounds[variant].append(latency(variant, args.calls))
            print(variant, json.dumps(rounds[variant][-1]), file=sys.stderr)
    for variant in variants:
        found[variant] = {
            "latency": {
                name: statistics.median(item[name] for item in rounds[variant])
                for name in rounds[variant][0]
            }
        }
        if not args.skip_hostile:
            found[variant]["held_open"] = held_open(variant, args.held)
            found[variant]["starved"] = starved(variant)
            print(variant, json.dumps(found[variant]), file=sys.stderr)
    print(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
