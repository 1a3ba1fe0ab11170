"""`make image-test`: build memoryd's images and use them as a user would (root, podman; minutes).

    python scripts/image_test.py [--build-only] [--keep]
    python scripts/image_test.py --inputs-changed  # exit 0 if they differ from the record

1. Builds the Debian bases with mmdebstrap (once: an image already imported is reused), then
   memoryd's image from the Containerfile (the machine's CA bundle given as a build secret) and
   the compose set's PostgreSQL 17 and HAProxy images (deploy/compose/).
2. Starts memoryd alone (a named volume, a published loopback port), waits for its health
   check, appends and searches through grpcurl; restarts the container and finds the data; stops
   it: exit code 0, and the log says it drained (`stopping`, then `stopped`).
3. Brings up deploy/compose/compose.yaml (PostgreSQL and two replicas behind HAProxy) with TLS,
   tokens and a database password made for the run, writes through one replica and reads through
   the other and through the balancer (which reaches both), and is refused without a token.
4. Checks the hardened systemd unit (deploy/systemd/memoryd.service) with `systemd-analyze
   verify`.
5. Tears everything down: containers, volumes, networks, and host nftables chains the run added
   (`--keep` leaves them; `--build-only` stops after step 1: `make image`).

A pass records the digest of the images' inputs (INPUTS) in .ci/image-inputs.sha256; commit it.
`--inputs-changed` says whether they differ from the recorded ones (a change nobody has run
this test on): CI runs the test then (`make image-test-if-changed`).

Not part of `make test`: it needs root and podman (`apt-get install podman buildah mmdebstrap
runc podman-compose`). Prints one line a step; exits non-zero at the first that fails, saying
why.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "deploy" / "compose"
# Debian bases made by mmdebstrap and imported (no registry is reached here): the suite and the
# packages each holds. memoryd's needs Python; the compose images install theirs with apt.
BASES = {
    "localhost/memoryd-base:bookworm": ("bookworm", "python3,python3-venv,ca-certificates,tini"),
    "localhost/memoryd-debian:trixie": ("trixie", ""),
}
# Manuals, documentation (but each package's copyright) and translations are not installed, in
# the bases or by apt in the images built on them.
SLIM = [
    f"--dpkgopt={rule}"
    for rule in (
        "path-exclude=/usr/share/man/*",
        "path-exclude=/usr/share/doc/*",
        "path-include=/usr/share/doc/*/copyright",
        "path-exclude=/usr/share/locale/*",
        "path-exclude=/usr/share/info/*",
    )
]
IMAGE = "localhost/memoryd:dev"
# (image, Containerfile, build context, the Debian packages whose versions are reported: the
# suites are pinned; a package's version is not, as Debian's mirrors keep one per suite)
IMAGES = (
    (IMAGE, ROOT / "Containerfile", ROOT, "python3.11"),
    (
        "localhost/memoryd-postgres:17",
        COMPOSE / "postgres.Containerfile",
        COMPOSE,
        "postgresql-17 postgresql-17-pgvector",
    ),
    ("localhost/memoryd-haproxy:3", COMPOSE / "haproxy.Containerfile", COMPOSE, "haproxy"),
)
NAME = "memoryd-image-test"
VOLUME = "memoryd-image-test-data"
PROJECT = "memoryd-image-test"
UNIT = ROOT / "deploy" / "systemd" / "memoryd.service"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# What the images are made from, besides memoryd's own code: a change here is what CI tests.
INPUTS = (
    "Containerfile", ".containerignore", "pyproject.toml", "constraints.txt", "deploy",
    "scripts/image_test.py", "scripts/build_model_package.py",
    "packages/memoryd-model-bge-small/pyproject.toml",
)  # fmt: skip
RECORDED = ROOT / ".ci" / "image-inputs.sha256"
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy" / "containers.conf")}
MEMORYD_UID = "10001"
# The image's size budget: memoryd, its dependencies, the embedded model and the Debian base.
IMAGE_BUDGET_BYTES = 500_000_000
TEXT = "Please e-mail me the deploy checklist before Friday"
# Written after the backup: the restore takes it away.
LATER = "And the rollback checklist after the backup"


class Failed(Exception):
    """A step failed; the message says how."""


def run(*command: str, check: bool = True, stdin: str | None = None) -> str:
    result = subprocess.run(
        command, capture_output=True, text=True, env=ENV, input=stdin, check=False
    )
    if check and result.returncode != 0:
        # The run's own tokens, but a log is no place for a token.
        shown = re.sub(r"Bearer \S+", "Bearer ...", " ".join(command))
        raise Failed(f"{shown}: exit {result.returncode}\n{result.stderr[-3000:]}")
    return result.stdout


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build() -> None:
    for base, (suite, packages) in BASES.items():
        if _exists(base):
            step(f"base {base}: already imported")
            continue
        step(f"base {base}: mmdebstrap {suite} ({packages or 'minbase'})")
        with tempfile.TemporaryDirectory() as folder:
            tarball = Path(folder) / "base.tar"
            include = [f"--include={packages}"] if packages else []
            run("mmdebstrap", "--variant=minbase", *include, *SLIM, suite, str(tarball))
            run("podman", "import", str(tarball), base)
    secret = [f"--secret=id=ca,src={CA_BUNDLE}"] if CA_BUNDLE.is_file() else []
    for image, containerfile, context, packages in IMAGES:
        step(f"image {image}: podman build")
        run(
            "podman", "build", "--format", "docker", *secret, "-t", image,
            "-f", str(containerfile), str(context),
        )  # fmt: skip
        size = int(run("podman", "image", "inspect", image, "--format", "{{.Size}}"))
        versions = run(
            "podman", "run", "--rm", "--entrypoint", "dpkg-query", image,
            "--showformat=${Package} ${Version}, ", "--show", *packages.split(),
        ).strip(", ")  # fmt: skip
        step(f"image {image}: {size / 1e6:.0f} MB ({versions})")
    size = int(run("podman", "image", "inspect", IMAGE, "--format", "{{.Size}}"))
    if size > IMAGE_BUDGET_BYTES:
        raise Failed(
            f"{IMAGE} is {size / 1e6:.0f} MB: over its {IMAGE_BUDGET_BYTES / 1e6:.0f} MB budget"
        )


def _exists(image: str) -> bool:
    return (
        subprocess.run(("podman", "image", "exists", image), env=ENV, check=False).returncode == 0
    )


def healthy(name: str, seconds: float = 120.0) -> None:
    """Wait for the container's HEALTHCHECK (`memoryd health` on the health port) to pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if subprocess.run(("podman", "healthcheck", "run", name), env=ENV, capture_output=True,
                          check=False).returncode == 0:  # fmt: skip
            return
        time.sleep(0.5)
    raise Failed(f"{name} not healthy within {seconds:.0f} s:\n{logs(name)[-3000:]}")


@dataclasses.dataclass(frozen=True)
class Caller:
    """How grpcurl reaches a server: plaintext, or TLS with a CA and a token."""

    ca: Path | None = None
    token: str = ""

    def call(self, address: str, method: str, body: dict[str, object]) -> dict[str, object]:
        found = run(*self.command(address, method, body))
        return json.loads(found) if found.strip() else {}

    def command(
        self, address: str, method: str, body: dict[str, object], *, seconds: int = 30
    ) -> list[str]:
        tool = shutil.which("grpcurl") or str(ROOT / ".tools" / "bin" / "grpcurl")
        security = ["-max-time", str(seconds)]
        security += ["-cacert", str(self.ca)] if self.ca else ["-plaintext"]
        token = ["-H", f"authorization: Bearer {self.token}"] if self.token else []
        return [tool, *security, *token, "-d", json.dumps(body), address,
                f"memoryd.v2.{method}"]  # fmt: skip

    def append(self, address: str, text: str = "") -> None:
        self.call(
            address,
            "ConversationService/AppendMessages",
            {
                "conversation": CONVERSATION,
                "messages": [{"sender": "ada", "role": "ROLE_USER", "content": text or TEXT}],
            },
        )

    def search(self, address: str) -> list[str]:
        answer = self.call(
            address,
            "ConversationService/SearchHistory",
            {"query": "checklist", "conversation": CONVERSATION},
        )
        hits = answer.get("hits", [])
        if not isinstance(hits, list):
            raise Failed(f"SearchHistory answered {answer}")
        return [str(hit["message"]["content"]) for hit in hits]


CONVERSATION = {"channel": "telegram", "chat_id": "42"}


def start(port: int) -> None:
    run(
        "podman", "run", "--detach", "--name", NAME, "--publish", f"127.0.0.1:{port}:50051",
        "--volume", f"{VOLUME}:/var/lib/memoryd", "--read-only",
        # A loopback-only port of a test: no tokens or TLS (anywhere else, configure them).
        "--env", "MEMORYD_SERVER_INSECURE=true", IMAGE,
    )  # fmt: skip


def alone() -> None:
    """Step 2 of the module docstring."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    plain = Caller()
    start(port)
    healthy(NAME)
    user = run("podman", "exec", NAME, "id", "-u").strip()
    if user == "0":
        raise Failed("memoryd runs as root in the container")
    step(f"alone: serving on {address} as uid {user}")
    plain.append(address)
    if plain.search(address) != [TEXT]:
        raise Failed(f"the search did not find the message: {plain.search(address)}")
    step("alone: appended and found through grpcurl")
    run("podman", "restart", "--time", "30", NAME)
    healthy(NAME)
    if plain.search(address) != [TEXT]:
        raise Failed("the message is gone after a restart")
    step("alone: restarted, the message is still there")
    run("podman", "stop", "--time", "30", NAME)
    code = run("podman", "inspect", NAME, "--format", "{{.State.ExitCode}}").strip()
    events = [json.loads(line).get("event") for line in _json_lines(logs(NAME))]
    if code != "0" or "stopping" not in events or "stopped" not in events:
        raise Failed(f"stop: exit {code}, events {events[-5:]}")
    step("alone: stopped, exit 0 after draining")
    cleanup_alone()


def cleanup_alone() -> None:
    run("podman", "rm", "--force", "--ignore", NAME, check=False)
    run("podman", "volume", "rm", "--force", VOLUME, check=False)


@dataclasses.dataclass(frozen=True, slots=True)
class ComposeSecrets:
    """What compose_secrets made: the CA's certificate, and the secrets the test calls with."""

    ca: Path
    admin: str
    adapter: str
    password: str


# The commands docs/operations.md gives ("Compose: the secrets"), run in the secrets folder.
SECRET_COMMANDS = (
    "openssl req -x509 {ec} -days 2 -subj /CN=memoryd-CA -keyout ca.key -out ca.crt",
    "openssl req {ec} -subj /CN=memoryd -keyout memoryd.key -out memoryd.csr",
    (
        "openssl x509 -req -in memoryd.csr -CA ca.crt -CAkey ca.key -days 2 -extfile memoryd.ext "
        "-out memoryd.crt"
    ),
    "openssl req {ec} -subj /CN=postgres -keyout postgres.key -out postgres.csr",
    (
        "openssl x509 -req -in postgres.csr -CA ca.crt -CAkey ca.key -days 2 -extfile postgres.ext "
        "-out postgres.crt"
    ),
)
# Who reads each secret file: memoryd's uid, or PostgreSQL's (fixed in its image).
POSTGRES_UID = 999
SECRET_OWNERS = {
    "memoryd.key": int(MEMORYD_UID),
    "admin.token": int(MEMORYD_UID),
    "adapter.token": int(MEMORYD_UID),
    "memoryd.password": int(MEMORYD_UID),
    "postgres.key": POSTGRES_UID,
    "postgres.password": POSTGRES_UID,
}


def compose_secrets(folder: Path) -> ComposeSecrets:
    """The compose set's secrets, made as docs/operations.md shows: a CA; memoryd's certificate
    (for the names clients and the balancer use) and PostgreSQL's (for `postgres`); the two
    tokens and the database password; each key, token and password readable by the uid of the
    container that reads it only."""
    folder.mkdir(mode=0o700)
    names = "DNS:localhost,IP:127.0.0.1,DNS:memoryd-1,DNS:memoryd-2"
    (folder / "memoryd.ext").write_text(f"subjectAltName={names}\n")
    (folder / "postgres.ext").write_text("subjectAltName=DNS:postgres\n")
    ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
    for command in SECRET_COMMANDS:
        subprocess.run(command.format(ec=ec).split(), cwd=folder, capture_output=True, check=True)
    made = ComposeSecrets(
        folder / "ca.crt", secrets.token_hex(32), secrets.token_hex(32), secrets.token_hex(32)
    )
    for name, value in (
        ("admin.token", made.admin),
        ("adapter.token", made.adapter),
        ("memoryd.password", made.password),
        ("postgres.password", made.password),
    ):
        (folder / name).write_text(value + "\n")
    for name, uid in SECRET_OWNERS.items():
        os.chown(folder / name, uid, -1)
        (folder / name).chmod(0o400)
    return made


def hardened(name: str) -> None:
    """The container runs as compose.yaml says: no capability, no privilege to gain, a read-only
    root file system, and no secret in its environment."""
    found = json.loads(run("podman", "inspect", name))[0]
    host = found["HostConfig"]
    effective = found.get("EffectiveCaps") or []
    if effective or not host.get("ReadonlyRootfs"):
        raise Failed(
            f"{name}: capabilities {effective}, read-only root {host.get('ReadonlyRootfs')}"
        )
    if not any("no-new-privileges" in option for option in host.get("SecurityOpt") or []):
        raise Failed(f"{name}: may gain privileges ({host.get('SecurityOpt')})")
    environment = found["Config"].get("Env") or []
    leaked = [line.split("=")[0] for line in environment if re.search("TOKEN|PASSWORD=", line)]
    if leaked:
        raise Failed(f"{name}: a secret in its environment: {leaked}")


def compose(*arguments: str, env: dict[str, str], files: list[Path]) -> str:
    named = [part for file in files for part in ("-f", str(file))]
    result = subprocess.run(
        ("podman-compose", "--project-name", PROJECT, *named, *arguments),
        capture_output=True, text=True, env={**ENV, **env}, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise Failed(f"podman-compose {' '.join(arguments)}: exit {result.returncode}\n"
                     f"{(result.stdout + result.stderr)[-3000:]}")  # fmt: skip
    return result.stdout


def container(service: str) -> str:
    """podman-compose's name for a service's container."""
    return f"{PROJECT}_{service}_1"


def rpc_count(name: str, method: str) -> int:
    """How many calls of `method` the replica's log records."""
    return sum(
        1
        for line in _json_lines(logs(name))
        if json.loads(line).get("method") == f"/memoryd.v2.ConversationService/{method}"
    )


def replicas(folder: Path) -> None:
    """Step 3 of the module docstring; the compose set stays up for teardown() to remove."""
    ports = {service: free_port() for service in ("balancer", "memoryd-1", "memoryd-2")}
    # The test's own addition: each replica on a loopback port, to write through one and read
    # through the other (the compose file publishes only the balancer).
    override = folder / "replica-ports.yaml"
    override.write_text(
        "services:\n"
        + "".join(
            f'  {service}:\n    ports: ["127.0.0.1:{port}:50051"]\n'
            for service, port in ports.items()
            if service != "balancer"
        )
    )
    env = {
        "MEMORYD_SECRETS": str(folder / "secrets"),
        "MEMORYD_PUBLISH": f"127.0.0.1:{ports['balancer']}",
    }
    made = compose_secrets(folder / "secrets")
    ca, adapter = made.ca, made.adapter
    printed = compose("up", "-d", env=env, files=[COMPOSE / "compose.yaml", override])
    for secret in (made.admin, made.adapter, made.password):
        if secret in printed:
            raise Failed("podman-compose printed a secret while it brought the set up")
    for service in ("postgres", "memoryd-1", "memoryd-2", "balancer"):
        hardened(container(service))
    for service in ("memoryd-1", "memoryd-2"):
        healthy(container(service), seconds=180)
    step(
        "replicas: PostgreSQL and both replicas up, healthy; every container without "
        "capabilities, privileges to gain or secrets in its environment, on a read-only root"
    )
    first, second, balancer = (
        f"127.0.0.1:{ports[name]}" for name in ("memoryd-1", "memoryd-2", "balancer")
    )
    bot = Caller(ca=ca, token=adapter)
    bot.append(first)
    if bot.search(second) != [TEXT]:
        raise Failed(
            f"written through memoryd-1, not found through memoryd-2: {bot.search(second)}"
        )
    step("replicas: written through memoryd-1 with TLS and a token, found through memoryd-2")
    before = {
        name: rpc_count(container(name), "SearchHistory") for name in ("memoryd-1", "memoryd-2")
    }
    for _ in range(6):
        if bot.search(balancer) != [TEXT]:
            raise Failed("a search through the balancer did not find the message")
    after = {name: rpc_count(container(name), "SearchHistory") for name in before}
    if sum(after.values()) - sum(before.values()) != 6 or any(
        after[n] == before[n] for n in before
    ):
        raise Failed(f"the balancer's six searches reached the replicas {before} -> {after}")
    step(f"replicas: six searches through {balancer} found it, on both replicas ({after})")
    anonymous = subprocess.run(
        Caller(ca=ca).command(balancer, "ConversationService/SearchHistory",
                              {"query": "checklist", "conversation": CONVERSATION}),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if anonymous.returncode == 0 or "Unauthenticated" not in anonymous.stderr:
        raise Failed(f"a call without a token: {anonymous.returncode} {anonymous.stderr}")
    plain = subprocess.run(
        Caller().command(balancer, "ConversationService/SearchHistory", {}, seconds=3),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if plain.returncode == 0 or "Failed to dial target host" not in plain.stderr:
        raise Failed(f"plaintext to the balancer's port: {plain.returncode} {plain.stderr}")
    step("replicas: refused without a token, and without TLS")
    postgres_tls()
    backup_and_restore(folder, env, override, bot, balancer)
    run("podman", "stop", "--time", "30", container("memoryd-1"))
    code = run("podman", "inspect", container("memoryd-1"), "--format", "{{.State.ExitCode}}")
    if code.strip() != "0":
        raise Failed(f"memoryd-1 stopped with exit {code.strip()}")
    step("replicas: memoryd-1 stopped with exit 0")


def postgres_tls() -> None:
    """memoryd's connections to PostgreSQL are TLS, and PostgreSQL refuses one without it."""
    counts = run(
        "podman", "exec", container("postgres"), "psql", "-U", "postgres", "-d", "memoryd",
        "-Atc", "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) "
        "FROM pg_stat_ssl AS s JOIN pg_stat_activity AS a USING (pid) "
        "WHERE a.usename = 'memoryd'",
    ).strip()  # fmt: skip
    encrypted, plain = (int(part) for part in counts.split("|"))
    if not encrypted or plain:
        raise Failed(f"memoryd's connections to PostgreSQL: {encrypted} TLS, {plain} plaintext")
    refused = subprocess.run(
        ("podman", "exec", container("postgres"), "psql",
         "host=127.0.0.1 dbname=memoryd user=memoryd sslmode=disable", "-c", "SELECT 1"),
        capture_output=True, text=True, env=ENV, check=False,
    )  # fmt: skip
    if refused.returncode == 0 or "no encryption" not in refused.stderr:
        raise Failed(f"a plaintext connection to PostgreSQL: {refused.stderr[-500:]}")
    step(f"replicas: {encrypted} connections of memoryd to PostgreSQL, all TLS; plaintext refused")


def _once_balanced(bot: Caller, balancer: str, seconds: float = 60.0) -> list[str]:
    """The search through the balancer, once it routes again: replicas that were stopped are
    healthy to podman before HAProxy's own checks take them back (a few seconds), and until
    then it closes the connection."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return bot.search(balancer)
        except Failed as failure:
            if "Failed to dial target host" not in str(failure) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def backup_and_restore(
    folder: Path, env: dict[str, str], override: Path, bot: Caller, balancer: str
) -> None:
    """docs/operations.md's backup and restore: pg_dump while memoryd serves; a message written
    after it; the replicas stopped, pg_restore, the replicas started: the message is gone, the
    one before the backup is there."""
    files = [COMPOSE / "compose.yaml", override]
    dump = folder / "memoryd.dump"
    with dump.open("wb") as out:
        subprocess.run(
            ("podman", "exec", container("postgres"), "pg_dump", "-U", "postgres", "-Fc",
             "memoryd"), stdout=out, env=ENV, check=True,
        )  # fmt: skip
    bot.append(balancer, LATER)
    if sorted(bot.search(balancer)) != sorted([TEXT, LATER]):
        raise Failed(f"after the backup, the search found {bot.search(balancer)}")
    compose("stop", "memoryd-1", "memoryd-2", env=env, files=files)
    with dump.open("rb") as source:
        restored = subprocess.run(
            ("podman", "exec", "-i", container("postgres"), "pg_restore", "-U", "postgres",
             "-d", "memoryd", "--clean", "--if-exists", "--single-transaction"),
            stdin=source, capture_output=True, text=True, env=ENV, check=False,
        )  # fmt: skip
    if restored.returncode != 0:
        raise Failed(f"pg_restore: exit {restored.returncode}\n{restored.stderr[-2000:]}")
    compose("start", "memoryd-1", "memoryd-2", env=env, files=files)
    for service in ("memoryd-1", "memoryd-2"):
        healthy(container(service), seconds=180)
    found = _once_balanced(bot, balancer)
    if found != [TEXT]:
        raise Failed(f"after the restore, the search found {found}")
    step(f"backup and restore: pg_dump ({dump.stat().st_size:,} bytes), pg_restore; the message "
         "written after the backup is gone, the one before it is back")  # fmt: skip


# The unit checked where it would run: memoryd's image (memoryd in /opt/memoryd, its own user)
# with systemd's tools added.
UNIT_CHECK = f"""FROM {IMAGE}
USER root
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install --yes \\
    --no-install-recommends systemd procps && rm -rf /var/lib/apt/lists/*
COPY memoryd.service memoryd.sysusers.conf /etc/systemd/system/
"""


def verify_unit() -> None:
    """Step 4 of the module docstring: `systemd-analyze verify` on a system where memoryd is
    installed as the unit says (the image, with systemd's tools added), and the unit's
    exposure score (`systemd-analyze security`)."""
    checker = "localhost/memoryd-unit-check:dev"
    run("podman", "build", "--format", "docker", "-t", checker, "-f", "-", str(UNIT.parent),
        stdin=UNIT_CHECK)  # fmt: skip
    try:
        found = subprocess.run(
            ("podman", "run", "--rm", "--entrypoint", "systemd-analyze", checker, "verify",
             "--man=no", "/etc/systemd/system/memoryd.service"),
            capture_output=True, text=True, env=ENV, check=False,
        )  # fmt: skip
    finally:
        run("podman", "rmi", "--force", checker, check=False)
    problems = [line for line in found.stderr.splitlines() if "memoryd.service" in line]
    if found.returncode != 0 or problems:
        raise Failed(f"systemd-analyze verify: exit {found.returncode}\n{found.stderr[-3000:]}")
    security = subprocess.run(
        ("systemd-analyze", "security", "--offline=yes", "--threshold=20", str(UNIT)),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    score = [line for line in security.stdout.splitlines() if "Overall exposure" in line]
    if security.returncode != 0 or not score:
        raise Failed(f"systemd-analyze security: {security.stdout[-2000:]}{security.stderr}")
    step(f"systemd unit: verified; {score[0].strip()}")


def nft_chains() -> set[str]:
    """The host's nftables chains ("family table chain"); empty when nft cannot list them."""
    found = subprocess.run(("nft", "--json", "list", "chains"), capture_output=True, text=True,
                           check=False)  # fmt: skip
    if found.returncode != 0:
        return set()
    chains = [item["chain"] for item in json.loads(found.stdout)["nftables"] if "chain" in item]
    return {f"{c['family']} {c['table']} {c['name']}" for c in chains}


def teardown(chains_before: set[str]) -> None:
    """Step 5 of the module docstring: what podman-compose leaves is removed by name."""
    cleanup_alone()
    subprocess.run(
        ("podman-compose", "--project-name", PROJECT, "-f", str(COMPOSE / "compose.yaml"),
         "down", "--volumes"),
        capture_output=True, env=ENV, check=False,
    )  # fmt: skip
    left = run(
        "podman",
        "ps",
        "--all",
        "--quiet",
        "--filter",
        f"label=io.podman.compose.project={PROJECT}",
        check=False,
    ).split()
    if left:
        run("podman", "rm", "--force", *left, check=False)
    for volume in run("podman", "volume", "ls", "--quiet", check=False).split():
        if volume.startswith(f"{PROJECT}_"):
            run("podman", "volume", "rm", "--force", volume, check=False)
    for network in run("podman", "network", "ls", "--format", "{{.Name}}", check=False).split():
        if network.startswith(f"{PROJECT}_"):
            run("podman", "network", "rm", "--force", network, check=False)
    added = sorted(nft_chains() - chains_before)
    for chain in added:
        family, table, name = chain.split()
        run("nft", "flush", "chain", family, table, name, check=False)
        run("nft", "delete", "chain", family, table, name, check=False)
    still = sorted(nft_chains() - chains_before)
    kept = f"; {still} could not be" if still else ""
    step(f"teardown: containers, volumes, networks; nftables chains removed: {added}{kept}")


def inputs_digest() -> str:
    """SHA-256 over INPUTS' files as git tracks them (secrets or an .env beside the compose
    file are not inputs), by path and content."""
    listed = subprocess.run(
        ("git", "ls-files", "-z", "--", *INPUTS), cwd=ROOT, capture_output=True, check=True
    )
    digest = hashlib.sha256()
    for name in sorted(filter(None, listed.stdout.decode().split("\0"))):
        digest.update(f"{name}\0".encode())
        digest.update(hashlib.sha256((ROOT / name).read_bytes()).digest())
    return digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-only", action="store_true", help="build the images (make image)")
    parser.add_argument("--keep", action="store_true", help="leave containers and volumes")
    parser.add_argument(
        "--inputs-changed", action="store_true", help="exit 0 if the inputs changed, 1 if not"
    )
    args = parser.parse_args()
    started = time.monotonic()
    digest = inputs_digest()
    if args.inputs_changed:
        recorded = RECORDED.read_text().split()[0] if RECORDED.exists() else ""
        same = digest == recorded
        step(f"the images' inputs {'are' if same else 'are not'} those of the recorded pass")
        return 1 if same else 0
    try:
        build()
        if args.build_only:
            return 0
        chains = nft_chains()
        cleanup_alone()
        try:
            alone()
            with tempfile.TemporaryDirectory() as folder:
                replicas(Path(folder))
            verify_unit()
        finally:
            if not args.keep:
                teardown(chains)
    except Failed as error:
        print(f"image-test failed: {error}", file=sys.stderr)
        return 1
    RECORDED.write_text(f"{digest}  image-test passed on these inputs (scripts/image_test.py)\n")
    step(f"passed in {time.monotonic() - started:.0f} s; recorded in {RECORDED.relative_to(ROOT)}")
    return 0


def logs(name: str) -> str:
    """A container's log (memoryd writes it on stderr)."""
    found = subprocess.run(
        ("podman", "logs", name), env=ENV, capture_output=True, text=True, check=False
    )
    return found.stdout + found.stderr


def _json_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("{")]


if __name__ == "__main__":
    sys.exit(main())
