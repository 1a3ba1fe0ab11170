"""`make dist`'s packages install and work outside the repository: the README's one command
(`pip install --find-links dist 'memoryd[mcp,postgres,tracing]'`) in a fresh virtualenv (both
sdists build the same wheels), whose `memoryd serve` answers the client's example and the sync
client; the TypeScript tarball in a fresh npm
project, whose adapter example runs against that server."""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.testing.server_process import ServerProcess
from scripts import build_dist

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    # Packaging, not storage: run once (the fresh virtualenv has no PostgreSQL driver).
    pytest.mark.sqlite_only("what the packages hold does not depend on the backend"),
]
# What the README tells a user to install from `make dist`'s folder.
INSTALL = "memoryd[mcp,postgres,tracing]"
# The optional parts that INSTALL's extras bring.
EXTRAS = "import mcp, psycopg, opentelemetry.sdk, opentelemetry.exporter.otlp.proto.grpc"
CONSOLE_ASSETS = (
    "from importlib.resources import files; "
    "print(*sorted(p.name for p in (files('memoryd.console') / 'assets').iterdir()))"
)
WHERE_FROM = (
    "import memoryd, memoryd_client; print(memoryd.__file__); print(memoryd_client.__file__)"
)
SYNC_LIST = """
import sys, memoryd_client as md
with md.connect_sync(sys.argv[1]) as channel:
    key = md.Conversation(owner_id="ada", channel="console", chat_id="console")
    print([m.content for m in md.SyncConversationClient(channel, key).list().messages])
"""


def run(command: list[str], *, cwd: Path, stdin: str = "", timeout: float = 600) -> str:
    """Run outside the repository, without its $PYTHONPATH; stdout, or fail with everything."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    result = subprocess.run(
        command,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every package, built as `make dist` builds them, by name of file kind."""
    built = build_dist.build(tmp_path_factory.mktemp("dist"))
    names = {
        "server_wheel": "memoryd-*.whl",
        "server_sdist": "memoryd-*.tar.gz",
        "client_wheel": "memoryd_client-*.whl",
        "client_sdist": "memoryd_client-*.tar.gz",
        "model_wheel": "memoryd_model_bge_small-*.whl",
        "npm": "memoryd-client-*.tgz",
    }
    found = {}
    for name, pattern in names.items():
        matches = [path for path in built if path.match(pattern)]
        assert len(matches) == 1, (name, built)
        found[name] = matches[0]
    return found


@pytest.fixture(scope="module")
def installed(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the repository with memoryd installed; its python."""
    folder = tmp_path_factory.mktemp("fresh")
    venv.create(folder / "venv", with_pip=True)
    python = folder / "venv" / "bin" / "python"
    pip = [
        str(python),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--constraint",
        str(ROOT / "constraints.txt"),
    ]
    # The README's command: the wheelhouse for memoryd's own packages, the index for the rest.
    run([*pip, "--find-links", str(dist["server_wheel"].parent), INSTALL], cwd=folder)
    # Each sdist builds the wheel that was installed (a setuptools that reads license
    # expressions, 77+, to build them).
    run([*pip, "--upgrade", "setuptools>=77"], cwd=folder)
    for sdist, wheel in (("server_sdist", "server_wheel"), ("client_sdist", "client_wheel")):
        rebuilt = folder / f"rebuilt-{sdist}"
        run(
            [
                str(python),
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--wheel-dir",
                str(rebuilt),
                str(dist[sdist]),
            ],
            cwd=folder,
        )
        assert [path.name for path in rebuilt.iterdir()] == [dist[wheel].name]
    return python


@pytest.fixture(scope="module")
def fresh_server(installed: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(installed.parent.parent.parent / "home", python=str(installed)).start()
    yield server
    assert server.stop() == 0, server.output


def test_the_extras_and_the_console_install_with_the_server(installed: Path) -> None:
    run([str(installed), "-c", EXTRAS], cwd=installed.parent)
    assets = run([str(installed), "-c", CONSOLE_ASSETS], cwd=installed.parent)
    assert assets.split() == ["console.css", "console.js", "index.html"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"pip install --find-links dist '{INSTALL}'" in readme


def test_the_installed_packages_come_from_the_virtualenv(installed: Path) -> None:
    where = run(
        [
            str(installed),
            "-c",
            WHERE_FROM,
        ],
        cwd=installed.parent,
    )
    for line in where.splitlines():
        assert line.startswith(str(installed.parent.parent)), where
        assert not line.startswith(str(ROOT)), where


def test_the_python_example_and_the_sync_client_against_the_installed_server(
    installed: Path, fresh_server: ServerProcess
) -> None:
    said = run(
        [
            str(installed),
            str(ROOT / "clients" / "python" / "examples" / "adapter.py"),
            "--address",
            fresh_server.address,
            "--owner",
            "ada",
        ],
        cwd=installed.parent,
        stdin="I'm vegetarian\n",
    )
    assert "assistant: echo: I'm vegetarian" in said
    listed = run(
        [
            str(installed),
            "-c",
            SYNC_LIST,
            fresh_server.address,
        ],
        cwd=installed.parent,
    )
    assert "I'm vegetarian" in listed


def test_the_npm_tarball_installs_and_its_example_runs(
    dist: dict[str, Path], fresh_server: ServerProcess, tmp_path: Path
) -> None:
    npm, node = shutil.which("npm"), shutil.which("node")
    assert npm
    assert node
    project = tmp_path / "adapter"
    project.mkdir()
    run([npm, "init", "-y"], cwd=project)
    run([npm, "pkg", "set", "type=module"], cwd=project)
    run([npm, "install", "--no-audit", "--no-fund", str(dist["npm"])], cwd=project, timeout=300)
    # The example as compiled by the package's build, importing the installed package.
    compiled = ROOT / "clients" / "typescript" / "dist" / "examples" / "adapter.js"
    source = compiled.read_text(encoding="utf-8")
    assert '"../src/index.js"' in source
    (project / "adapter.js").write_text(
        source.replace('"../src/index.js"', '"@memoryd/client"'), encoding="utf-8"
    )
    said = run(
        [node, "adapter.js", "--address", fresh_server.address, "--owner", "grace"],
        cwd=project,
        stdin="I live in Lisbon\n",
    )
    assert "echo: I live in Lisbon" in said
    assert not (project / "node_modules" / "@memoryd" / "client" / "src").exists()
    assert (project / "node_modules" / "@memoryd" / "client" / "dist" / "src" / "index.js").exists()


def readme_go_commands(checkout: Path) -> list[list[str]]:
    """The `go mod` commands clients/go/README.md gives, for a checkout at `checkout`."""
    text = (ROOT / "clients" / "go" / "README.md").read_text(encoding="utf-8")
    joined = text.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        if line.startswith("go mod"):
            command = line.split("#")[0].split()
            commands.append(
                [word.replace("../memoryd/clients/go", str(checkout)) for word in command]
            )
    return commands


def test_the_go_client_builds_in_a_module_outside_the_repository_as_its_readme_says(
    fresh_server: ServerProcess, tmp_path: Path
) -> None:
    go = shutil.which("go")
    assert go
    module = tmp_path / "adapter"
    module.mkdir()
    run([go, "mod", "init", "example.com/adapter"], cwd=module)
    shutil.copy(ROOT / "clients" / "go" / "examples" / "adapter" / "main.go", module / "main.go")
    commands = readme_go_commands(ROOT / "clients" / "go")
    assert [command[:3] for command in commands] == [["go", "mod", "edit"], ["go", "mod", "tidy"]]
    for command in commands:
        run([go, *command[1:]], cwd=module, timeout=300)
    run([go, "build", "-o", "adapter", "."], cwd=module, timeout=300)
    said = run(
        [str(module / "adapter"), "--address", fresh_server.address, "--owner", "lin"],
        cwd=module,
        stdin="I collect stamps\n",
    )
    assert "echo: I collect stamps" in said
