"""Settings: defaults, the TOML file, environment overrides, flags; refusals say what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.config import load_settings
from memoryd.errors import StartupError


def test_defaults(tmp_path: Path) -> None:
    settings = load_settings({"MEMORYD_HOME": str(tmp_path)})
    assert settings.home == tmp_path.resolve()
    assert settings.database_path == tmp_path.resolve() / "memory.db"
    assert settings.config_path is None
    assert settings.server.listen == "127.0.0.1:50051"
    assert settings.storage.synchronous == "normal"
    assert settings.history.max_conversation_history is None
    assert settings.history.max_content_bytes == 256 * 1024
    assert (settings.compaction.enabled, settings.compaction.threshold) == (True, 0.85)
    assert settings.compaction.reasoning_effort == "medium"
    assert settings.compaction.context_entry_limit == 10
    assert settings.compaction.failure_backoff_seconds == 60


def test_home_defaults_to_dot_memoryd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_settings({}).home == (tmp_path / ".memoryd").resolve()


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "memoryd.toml"
    config.write_text(
        """
[memoryd]
home = "%s"

[memoryd.server]
listen = "0.0.0.0:6000"
grace_period_seconds = 3

[memoryd.storage]
synchronous = "full"

[memoryd.history]
max_conversation_history = 40
max_messages_per_call = 10
"""
        % (tmp_path / "from-file"),
        encoding="utf-8",
    )
    env = {"MEMORYD_HISTORY_MAX_MESSAGES_PER_CALL": "20", "MEMORYD_STORAGE_SECURE_DELETE": "false"}
    settings = load_settings(env, config_path=str(config))
    assert settings.home == (tmp_path / "from-file").resolve()
    assert settings.config_path == config
    assert settings.server.listen == "0.0.0.0:6000"
    assert settings.server.grace_period_seconds == 3.0
    assert settings.storage.synchronous == "full"
    assert settings.storage.secure_delete is False
    assert settings.history.max_conversation_history == 40
    assert settings.history.max_messages_per_call == 20

    flagged = load_settings(
        env, config_path=str(config), home=str(tmp_path / "flag"), listen="127.0.0.1:7000"
    )
    assert flagged.home == (tmp_path / "flag").resolve()
    assert flagged.server.listen == "127.0.0.1:7000"


def test_config_file_in_home_is_found(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[memoryd.server]\nreader_threads = 2\n")
    settings = load_settings({"MEMORYD_HOME": str(tmp_path)})
    assert settings.server.reader_threads == 2
    assert settings.config_path == tmp_path / "config.toml"


@pytest.mark.parametrize("value", ["unbounded", "0"])
def test_unbounded_history(tmp_path: Path, value: str) -> None:
    settings = load_settings(
        {"MEMORYD_HOME": str(tmp_path), "MEMORYD_HISTORY_MAX_CONVERSATION_HISTORY": value}
    )
    assert settings.history.max_conversation_history is None


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("[memoryd.server]\nlisten = 5\n", {}, "memoryd.server.listen must be a string, got 5"),
        ("[memoryd.server]\nlisten = 'a:b'\n", {}, "memoryd.server.listen must be HOST:PORT"),
        ("[memoryd.server]\nlisten = 'a:¹'\n", {}, "memoryd.server.listen must be HOST:PORT"),
        ("[memoryd.server]\nreader_threads = 0\n", {}, "reader_threads must be positive, got 0"),
        ("[memoryd.storage]\nbusy_timeout_ms = -1\n", {}, "busy_timeout_ms must not be negative"),
        ("[memoryd.storage]\nsecure_delete = 1\n", {}, "secure_delete must be true or false"),
        ("[memoryd.storage]\nwrite_attempts = 99\n", {}, "write_attempts must be at most 10"),
        (
            "[memoryd.history]\nmax_conversation_history = 'lots'\n",
            {},
            "max_conversation_history (a positive integer or 'unbounded') must be an integer",
        ),
        (
            "[memoryd.compaction]\nthreshold = 1.5\n",
            {},
            (
                "memoryd.compaction.threshold must be between 0.1 and 1.0 (a fraction of the "
                "context window), got 1.5"
            ),
        ),
        (
            "",
            {"MEMORYD_COMPACTION_THRESHOLD": "0.05"},
            "memoryd.compaction.threshold must be between 0.1 and 1.0",
        ),
        (
            "[memoryd.compaction]\nreasoning_effort = 'max'\n",
            {},
            (
                "memoryd.compaction.reasoning_effort must be one of 'none', 'minimal', 'low', "
                "'medium', 'high', got 'max'"
            ),
        ),
        (
            "[memoryd.memory]\nmax_tool_calls = 3\nreview_max_operations = 5\n",
            {},
            (
                "memoryd.memory.max_tool_calls (OpenHermit's name) and review_max_operations are "
                "the same cap: set one, or the same value in both (got 3 and 5)"
            ),
        ),
        ("[memoryd.nope]\n", {}, "unknown setting memoryd.nope"),
        ("[other]\n", {}, "unknown top-level table [other]"),
        ("", {"MEMORYD_SERVER_LISTN": "x"}, "unknown environment setting MEMORYD_SERVER_LISTN"),
        (
            "",
            {"MEMORYD_SERVER_GRACE_PERIOD_SECONDS": "nan"},
            "MEMORYD_SERVER_GRACE_PERIOD_SECONDS must be a finite number, got nan",
        ),
        (
            "",
            {"MEMORYD_SERVER_READER_THREADS": "many"},
            "MEMORYD_SERVER_READER_THREADS must be an integer, got 'many'",
        ),
    ],
)
def test_bad_settings_are_refused(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(StartupError) as caught:
        load_settings({"MEMORYD_HOME": str(tmp_path), **env}, config_path=str(config))
    assert message in str(caught.value)


def test_a_missing_explicit_config_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="does not exist"):
        load_settings({}, config_path=str(tmp_path / "absent.toml"))


def test_settings_are_frozen(tmp_path: Path) -> None:
    settings = load_settings({"MEMORYD_HOME": str(tmp_path)})
    with pytest.raises(AttributeError):
        settings.server.listen = "x"  # type: ignore[misc]  # what the test shows refused


def test_a_message_must_fit_one_answer(tmp_path: Path) -> None:
    env = {"MEMORYD_HOME": str(tmp_path), "MEMORYD_HISTORY_MAX_CONTENT_BYTES": str(3 * 1024 * 1024)}
    with pytest.raises(StartupError) as refused:
        load_settings(env)
    assert str(refused.value) == (
        "memoryd.history.max_content_bytes + max_metadata_bytes is 3,211,264 bytes; at most "
        "3,145,728, so that one message always fits in the 4 MiB answer every gRPC client accepts"
    )


def test_openhermits_max_tool_calls_is_the_operation_cap(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[memoryd.memory]\nmax_tool_calls = 3\n", encoding="utf-8")
    settings = load_settings({"MEMORYD_HOME": str(tmp_path)}, config_path=str(config))
    assert settings.memory.operation_cap == 3
    assert load_settings({"MEMORYD_HOME": str(tmp_path)}).memory.operation_cap is None
