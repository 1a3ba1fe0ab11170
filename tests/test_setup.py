"""`memoryd setup` (flags and a terminal's answers) and `memoryd config show`, as users run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from argparse import Namespace
from io import StringIO
from pathlib import Path

from memoryd.cli.setup_commands import run_setup
from memoryd.testing.fake_model import FakeModel


def memoryd(
    *args: str, home: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args, "--home", str(home)],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=environment,
    )


def test_setup_with_flags_checks_the_endpoint_and_writes_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[memoryd.server]\nlisten = "127.0.0.1:6000"\n\n'
        '[[memoryd.providers]]\nname = "main"\nbase_url = "http://127.0.0.1:8/v1"\n'
        'model = "old"\n\n'
        '[[memoryd.providers]]\nname = "backup"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'model = "small"\n',
        encoding="utf-8",
    )
    with FakeModel() as model:
        model.reply("OK")
        result = memoryd(
            "setup",
            "--yes",
            "--base-url",
            model.base_url,
            "--model",
            "llama3.1",
            "--api-key-env",
            "LOCAL_KEY",
            "--review-interval-hours",
            "12",
            home=home,
        )
    assert result.returncode == 0, result.stderr
    assert f"{model.base_url} answered with model llama3.1" in result.stdout
    assert "note: $LOCAL_KEY is not set in this shell" in result.stdout
    written = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    assert written["memoryd"]["server"] == {"listen": "127.0.0.1:6000"}  # kept
    assert written["memoryd"]["memory"] == {"review_interval_hours": 12}
    assert written["memoryd"]["search"] == {"embeddings": "embedded"}  # the default
    # The primary is replaced (it keeps its name); the fallback stays.
    assert [p["name"] for p in written["memoryd"]["providers"]] == ["main", "backup"]
    assert written["memoryd"]["providers"][0] == {
        "name": "main",
        "base_url": model.base_url,
        "model": "llama3.1",
        "api_key_env": "LOCAL_KEY",
    }
    assert model.requests[0]["model"] == "llama3.1"


def test_setup_refuses_an_endpoint_that_does_not_answer(tmp_path: Path) -> None:
    result = memoryd(
        "setup", "--yes", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", home=tmp_path / "h"
    )
    assert result.returncode == 1
    assert "did not answer: primary: cannot connect" in result.stderr
    assert not (tmp_path / "h" / "config.toml").exists()
    skipped = memoryd(
        "setup",
        "--yes",
        "--skip-check",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        home=tmp_path / "h",
    )
    assert skipped.returncode == 0
    assert (tmp_path / "h" / "config.toml").is_file()


def test_setup_asks_for_what_no_flag_gave(tmp_path: Path) -> None:
    with FakeModel() as model:
        answers = iter([model.base_url, "qwen", "", "0", "provider", "nomic-embed-text"])
        asked: list[str] = []

        def ask(question: str) -> str:
            asked.append(question)
            return next(answers)

        out = StringIO()
        args = Namespace(
            home=str(tmp_path / "home"),
            config=None,
            name=None,
            base_url=None,
            model=None,
            api_key_env=None,
            review_interval_hours=None,
            embeddings=None,
            embedding_model=None,
            skip_check=False,
            yes=False,
        )
        assert run_setup(args, {}, out, ask) == 0
    assert asked[0].startswith("Model endpoint (OpenAI-compatible base URL)")
    assert asked[3] == "Review interval in hours (0 turns background review off) [24]: "
    assert asked[4].startswith("Semantic search: embedded (a small model on this machine)")
    assert asked[5] == "Embedding model of the endpoint []: "
    written = tomllib.loads((tmp_path / "home" / "config.toml").read_text(encoding="utf-8"))
    assert written["memoryd"]["memory"]["review_interval_hours"] == 0
    assert written["memoryd"]["providers"][0]["model"] == "qwen"
    assert "api_key_env" not in written["memoryd"]["providers"][0]
    assert written["memoryd"]["search"] == {
        "embeddings": "provider",
        "embedding_model": "nomic-embed-text",
    }


def test_config_show_masks_secrets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[[memoryd.providers]]\nname = "cloud"\nbase_url = "https://user:hunter2@api.example/v1?api_key=abc&x=1"\n'
        'model = "big"\napi_key_env = "CLOUD_KEY"\n',
        encoding="utf-8",
    )
    shown = memoryd("config", "show", "--json", home=home, env={"CLOUD_KEY": "sk-very-secret"})
    assert shown.returncode == 0, shown.stderr
    for secret in ("hunter2", "sk-very-secret", "abc"):
        assert secret not in shown.stdout
    document = json.loads(shown.stdout)["memoryd"]
    (provider,) = document["providers"]
    assert provider["api_key"] == "********"
    assert (
        provider["base_url"]
        == "https://user:********@api.example/v1?api_key=%2A%2A%2A%2A%2A%2A%2A%2A&x=1"
    )
    assert document["memory"]["review_interval_hours"] == 24.0
    assert document["history"]["max_conversation_history"] == "unbounded"
    text = memoryd("config", "show", home=home)
    assert "[[memoryd.providers]]" in text.stdout
    assert 'api_key = "(not set)"' in text.stdout


def test_config_show_shows_every_section_and_where_each_value_came_from(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        "[memoryd.compaction]\nthreshold = 0.7\n\n[memoryd.realtime]\npersist_transcripts = true\n",
        encoding="utf-8",
    )
    env = {"MEMORYD_SERVER_LOG_LEVEL": "debug"}
    shown = memoryd("config", "show", "--json", home=home, env=env)
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    document, origins = answer["memoryd"], answer["origins"]
    for section in ("server", "storage", "history", "memory", "compaction", "realtime", "search"):
        assert section in document, section
    assert document["compaction"]["threshold"] == 0.7
    assert document["realtime"]["persist_transcripts"] is True
    assert origins["memoryd.compaction.threshold"] == "file"
    assert origins["memoryd.realtime.persist_transcripts"] == "file"
    assert origins["memoryd.server.log_level"] == "environment"
    assert origins["memoryd.history.max_content_bytes"] == "default"
    assert origins["memoryd.home"] == "flag"
    text = memoryd("config", "show", home=home, env=env).stdout
    assert "[memoryd.compaction]\n" in text
    assert "threshold = 0.7  # file\n" in text
    assert 'log_level = "debug"  # environment\n' in text
