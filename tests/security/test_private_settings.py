"""Settings others could take: `memoryd setup` writes the home 0700 and config.toml 0600 under
any umask (and keeps tokens it finds); `serve` refuses, naming the file and the chmod, a config
file others can write, one holding a token that others can read, and a TLS key others can read;
tokens on a non-loopback address need TLS (or --insecure)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from memoryd.testing.server_process import ServerProcess
from tests.certificates import Authority

TOKEN = (
    '[[memoryd.auth.tokens]]\ntoken = "admin-token-0123456789abcdef"\nrole = "admin"\n'
    'agents = ["*"]\n'
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def memoryd(
    *args: str, umask: int = 0o022, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env=environment,
        umask=umask,
    )


def serve(
    folder: Path, config: Path, listen: str = "127.0.0.1:0"
) -> subprocess.CompletedProcess[str]:
    """`memoryd serve` with this config, expected to refuse to start."""
    return memoryd(
        "serve", "--home", str(folder / "home"), "--config", str(config), "--listen", listen
    )


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_setup_writes_a_private_home_and_config_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    home = tmp_path / "home"
    done = memoryd(
        "setup",
        "--yes",
        "--skip-check",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--home",
        str(home),
        umask=umask,
    )
    assert done.returncode == 0, done.stderr
    assert mode(home) == 0o700
    assert mode(home / "config.toml") == 0o600


def test_setup_keeps_the_tokens_of_an_existing_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = home / "config.toml"
    config.write_text(TOKEN, encoding="utf-8")
    done = memoryd(
        "setup",
        "--yes",
        "--skip-check",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--home",
        str(home),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    written = tomllib.loads(config.read_text(encoding="utf-8"))
    assert written["memoryd"]["auth"]["tokens"] == [
        {"token": "admin-token-0123456789abcdef", "role": "admin", "agents": ["*"]}
    ]
    assert written["memoryd"]["providers"][0]["model"] == "m"
    assert mode(config) == 0o600


@pytest.mark.parametrize(
    ("text", "file_mode", "expected"),
    [
        ("", 0o666, "can be written by other users (mode 0666)"),
        ("", 0o620, "can be written by other users (mode 0620)"),
        (
            TOKEN,
            0o644,
            "holds a secret (memoryd.auth.tokens[0].token) and other users can read it (mode 0644)",
        ),
        (
            TOKEN,
            0o640,
            "holds a secret (memoryd.auth.tokens[0].token) and other users can read it (mode 0640)",
        ),
    ],
)
def test_serve_refuses_a_config_others_can_take(
    tmp_path: Path, text: str, file_mode: int, expected: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    config.chmod(file_mode)
    done = serve(tmp_path, config)
    assert done.returncode == 1
    assert f"config file {config} {expected}" in done.stderr
    assert "Run: chmod" in done.stderr


def test_a_config_without_secrets_may_be_readable(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[memoryd.server]\nlog_level = "info"\n', encoding="utf-8")
    config.chmod(0o644)
    done = memoryd("config", "show", "--config", str(config), "--home", str(tmp_path / "h"))
    assert done.returncode == 0  # reading settings is never refused
    server = ServerProcess(tmp_path / "home", env={"MEMORYD_CONFIG": str(config)}).start()
    assert server.stop() == 0


def test_serve_refuses_a_tls_key_others_can_read(tmp_path: Path) -> None:
    pair = Authority(tmp_path).issue("server", server=True)
    pair.key.chmod(0o644)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[memoryd.server]\ntls_cert = "{pair.cert}"\ntls_key = "{pair.key}"\n', encoding="utf-8"
    )
    config.chmod(0o600)
    done = serve(tmp_path, config)
    assert done.returncode == 1
    assert f"memoryd.server.tls_key {pair.key} can be read or written by other users" in done.stderr
    assert f"chmod 600 {pair.key}" in done.stderr


def test_tokens_on_a_network_address_need_tls(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(TOKEN, encoding="utf-8")
    config.chmod(0o600)
    refused = serve(tmp_path, config, listen="0.0.0.0:0")
    assert refused.returncode == 1
    assert "refusing to serve 0.0.0.0:0 with tokens but without TLS" in refused.stderr
