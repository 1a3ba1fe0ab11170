"""`make image-test`: build memoryd's image and use it as a user would (root, podman; minutes).

    python scripts/image_test.py [--keep]

1. Builds the Debian base with mmdebstrap (once: an image already imported is reused) and the
   image from the Containerfile, the machine's CA bundle given as a build secret.
2. Starts memoryd alone (a named volume, a published loopback port), waits for its health
   check, appends and searches through grpcurl.
3. Restarts the container and finds the data again.
4. Stops it: exit code 0, and the log says it drained (`stopping`, then `stopped`).
5. Removes the container and the volume (`--keep` leaves them).

Not part of `make test`: it needs root and podman (`apt-get install podman buildah mmdebstrap
runc`). Prints one line a step; exits non-zero at the first that fails, saying why.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "localhost/memoryd-base:bookworm"
IMAGE = "localhost/memoryd:dev"
NAME = "memoryd-image-test"
VOLUME = "memoryd-image-test-data"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PACKAGES = "python3,python3-venv,ca-certificates,tini"
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy" / "containers.conf")}


class Failed(Exception):
    """A step failed; the message says how."""


def run(*command: str, check: bool = True, stdin: str | None = None) -> str:
    result = subprocess.run(
        command, capture_output=True, text=True, env=ENV, input=stdin, check=False
    )
    if check and result.returncode != 0:
        raise Failed(f"{' '.join(command)}: exit {result.returncode}\n{result.stderr[-3000:]}")
    return result.stdout


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build() -> None:
    if _exists(BASE):
        step(f"base {BASE}: already imported")
    else:
        step(f"base {BASE}: mmdebstrap bookworm ({PACKAGES})")
        with tempfile.TemporaryDirectory() as folder:
            tarball = Path(folder) / "base.tar"
            run(
                "mmdebstrap", "--variant=minbase", f"--include={PACKAGES}", "bookworm", str(tarball)
            )
            run("podman", "import", str(tarball), BASE)
    step(f"image {IMAGE}: podman build")
    secret = [f"--secret=id=ca,src={CA_BUNDLE}"] if CA_BUNDLE.is_file() else []
    run(
        "podman", "build", "--format", "docker", *secret, "--build-arg", f"BASE={BASE}",
        "-t", IMAGE, "-f", str(ROOT / "Containerfile"), str(ROOT),
    )  # fmt: skip
    size = int(run("podman", "image", "inspect", IMAGE, "--format", "{{.Size}}"))
    step(f"image size {size / 1e6:.0f} MB")


def _exists(image: str) -> bool:
    return (
        subprocess.run(("podman", "image", "exists", image), env=ENV, check=False).returncode == 0
    )


def healthy(seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if subprocess.run(("podman", "healthcheck", "run", NAME), env=ENV, capture_output=True,
                          check=False).returncode == 0:  # fmt: skip
            return
        time.sleep(0.5)
    raise Failed(f"not healthy within {seconds:.0f} s:\n{logs()[-3000:]}")


def grpcurl(address: str, method: str, body: dict[str, object]) -> dict[str, object]:
    tool = shutil.which("grpcurl") or str(ROOT / ".tools" / "bin" / "grpcurl")
    found = run(tool, "-plaintext", "-d", json.dumps(body), address, f"memoryd.v1.{method}")
    return json.loads(found) if found.strip() else {}


def search(address: str) -> list[str]:
    answer = grpcurl(
        address,
        "MemoryService/SearchHistory",
        {"query": "checklist", "conversation": {"channel": "telegram", "chat_id": "42"}},
    )
    hits = answer.get("hits", [])
    if not isinstance(hits, list):
        raise Failed(f"SearchHistory answered {answer}")
    return [str(hit["message"]["content"]) for hit in hits]


def start(port: int) -> None:
    run(
        "podman", "run", "--detach", "--name", NAME, "--publish", f"127.0.0.1:{port}:50051",
        "--volume", f"{VOLUME}:/var/lib/memoryd",
        # A loopback-only port of a test: no tokens or TLS (anywhere else, configure them).
        "--env", "MEMORYD_SERVER_INSECURE=true", IMAGE,
    )  # fmt: skip


def cleanup() -> None:
    run("podman", "rm", "--force", "--ignore", NAME, check=False)
    run("podman", "volume", "rm", "--force", VOLUME, check=False)


def exercise() -> None:
    """Steps 2 to 4 of the module docstring."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    start(port)
    healthy()
    user = run("podman", "exec", NAME, "id", "-u").strip()
    if user == "0":
        raise Failed("memoryd runs as root in the container")
    step(f"serving on {address} as uid {user}")
    text = "Please e-mail me the deploy checklist before Friday"
    grpcurl(
        address,
        "MemoryService/AppendMessages",
        {
            "conversation": {"channel": "telegram", "chat_id": "42"},
            "messages": [{"sender": "ada", "role": "ROLE_USER", "content": text}],
        },
    )
    if search(address) != [text]:
        raise Failed(f"the search did not find the message: {search(address)}")
    step("appended and found through grpcurl")
    run("podman", "restart", "--time", "30", NAME)
    healthy()
    if search(address) != [text]:
        raise Failed("the message is gone after a restart")
    step("restarted: the message is still there")
    run("podman", "stop", "--time", "30", NAME)
    code = run("podman", "inspect", NAME, "--format", "{{.State.ExitCode}}").strip()
    events = [json.loads(line).get("event") for line in _json_lines(logs())]
    if code != "0" or "stopping" not in events or "stopped" not in events:
        raise Failed(f"stop: exit {code}, events {events[-5:]}")
    step("stopped: exit 0 after draining")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the container and volume")
    args = parser.parse_args()
    started = time.monotonic()
    cleanup()
    try:
        build()
        exercise()
    except Failed as error:
        print(f"image-test failed: {error}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            cleanup()
    step(f"passed in {time.monotonic() - started:.0f} s")
    return 0


def logs() -> str:
    """The container's log (memoryd writes it on stderr)."""
    found = subprocess.run(
        ("podman", "logs", NAME), env=ENV, capture_output=True, text=True, check=False
    )
    return found.stdout + found.stderr


def _json_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("{")]


if __name__ == "__main__":
    sys.exit(main())
