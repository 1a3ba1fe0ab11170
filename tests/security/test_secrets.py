"""Secrets are never shown: one masking rule (memoryd.config.secrets) for the connection string's
password in both its forms, URL passwords and key-like query values, used by `memoryd config
show`, GetServerInfo (over gRPC, HTTP and the console's session), start-up errors and the log; a
config file holding any secret that others can read is refused."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.config.secrets import MASK, Redactor, dsn_secrets, mask_dsn, mask_quoted, mask_url
from memoryd.logs import LogPipeline
from memoryd.testing.postgres import database_dsn
from memoryd.testing.server_process import ServerProcess
from tests.helpers import run_memoryd

PASSWORD = "hunter2-S3cret"


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (
            f"host=/run/pg user=memoryd password={PASSWORD} dbname=memoryd",
            f"host=/run/pg user=memoryd password={MASK} dbname=memoryd",
        ),
        (
            f"host=db password = '{PASSWORD} with \\' quote' dbname=m",
            f"host=db password={MASK} dbname=m",
        ),
        (f"sslpassword={PASSWORD} host=db", f"sslpassword={MASK} host=db"),
        (
            f"postgresql://memoryd:{PASSWORD}@db.example:5432/m?sslmode=require",
            f"postgresql://memoryd:{MASK}@db.example:5432/m?sslmode=require",
        ),
        (f"postgres://db/m?password={PASSWORD}", f"postgres://db/m?password={MASK}"),
        (f"host=db password={PASSWORD} unreadable' rest", MASK),
        ("host=/run/pg dbname=memoryd", "host=/run/pg dbname=memoryd"),
    ],
)
def test_a_connection_string_shows_no_password(dsn: str, shown: str) -> None:
    assert mask_dsn(dsn) == shown
    assert PASSWORD not in mask_dsn(dsn)


def test_the_secrets_of_a_connection_string_are_found_in_both_forms() -> None:
    assert dsn_secrets(f"host=db password='{PASSWORD}'") == [PASSWORD]
    assert dsn_secrets(f"postgresql://u:{PASSWORD.replace('-', '%2D')}@db/m") == [PASSWORD]
    assert dsn_secrets("host=db") == []


def test_urls_and_quoted_fragments() -> None:
    url = f"https://bot:{PASSWORD}@api.example/v1?api_key={PASSWORD}&model=x"
    assert mask_url(url) == f"https://bot:{MASK}@api.example/v1?api_key={MASK}&model=x"
    said = 'missing "=" after "cret" in connection info string'
    assert mask_quoted(said, keep={"="}) == f'missing "=" after "{MASK}" in connection info string'


def test_the_log_masks_what_a_library_quotes() -> None:
    stream = io.StringIO()
    pipeline = LogPipeline(
        "info", "json", stream=stream, redact=Redactor([PASSWORD, 'quo"te-secret']).redact
    )
    logger = logging.getLogger("memoryd.test.secrets")
    try:
        raise RuntimeError(f"cannot connect: password {PASSWORD} refused")  # noqa: TRY301
    except RuntimeError:
        logger.exception('failed with quo"te-secret')
    pipeline.stop()
    written = stream.getvalue()
    assert PASSWORD not in written
    assert "te-secret" not in written
    assert written.count(MASK) >= 2


def test_the_log_takes_and_masks_other_libraries_lines() -> None:
    stream = io.StringIO()
    pipeline = LogPipeline("info", "json", stream=stream, redact=Redactor([PASSWORD]).redact)
    exporter = logging.getLogger("opentelemetry.exporter.otlp.test")
    exporter.warning("Transient error exporting to otel:%s@collector.example:4317", PASSWORD)
    exporter.info("chatter below a warning stays out")
    pipeline.stop()
    (line,) = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert line["logger"] == "opentelemetry.exporter.otlp.test"
    assert line["msg"] == f"Transient error exporting to otel:{MASK}@collector.example:4317"


def test_config_show_masks_a_password_in_the_file_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[memoryd.storage]\nbackend = "postgres"\ndsn = "host=/run/pg password={PASSWORD}"\n'
        f'[memoryd.tracing]\notlp_endpoint = "https://otel:{PASSWORD}@collector.example:4317"\n'
        "[[memoryd.providers]]\n"
        f'name = "p"\nbase_url = "https://u:{PASSWORD}@llm.example/v1"\nmodel = "m"\n',
        encoding="utf-8",
    )
    config.chmod(0o600)
    # The home by its variable: a --home would put the suite's own database in the way.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env["MEMORYD_HOME"] = str(tmp_path)
    for arguments in ((), ("--json",)):
        shown = run_memoryd("config", "show", "--config", str(config), *arguments, env=env)
        assert shown.returncode == 0, shown.stderr
        assert PASSWORD not in shown.stdout
        assert shown.stdout.count(MASK) >= 3
    uri = f"postgresql://memoryd:{PASSWORD}@db/m"
    shown = run_memoryd(
        "config", "show", "--config", str(config), env={**env, "MEMORYD_STORAGE_DSN": uri}
    )
    assert shown.returncode == 0, shown.stderr
    assert PASSWORD not in shown.stdout


def test_a_password_in_the_connection_string_reaches_no_output(
    postgres_base: str, tmp_path: Path
) -> None:
    """A server on PostgreSQL whose DSN carries a password (the test database trusts its
    socket, so any password connects): GetServerInfo over gRPC, over HTTP/JSON and through a
    console session, and the whole log, show it masked."""
    home = tmp_path / "home"
    dsn = f"{database_dsn(postgres_base, home)} password={PASSWORD}"
    server = ServerProcess(
        home,
        config='[memoryd.http]\nlisten = "127.0.0.1:0"\n',
        env={"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_DSN": dsn},
    ).start()
    try:
        with md.connect_sync(server.address) as channel:
            info = md.SyncStubs(channel).admin.GetServerInfo(md.GetServerInfoRequest())
        assert PASSWORD not in info.settings_json
        storage = json.loads(info.settings_json)["memoryd"]["storage"]
        assert storage["dsn"].endswith(f"password={MASK}")
        http = str(server.events("serving")[-1]["http"])
        answer = _post(http, "/memoryd.v2.AdminService/GetServerInfo", {})
        assert PASSWORD not in answer
        assert MASK in answer
        # The console's settings page reads the same call through its session.
        signed = urllib.request.Request(
            f"http://{http}/console/session",
            data=b'{"token": ""}',
            headers={"content-type": "application/json", "origin": f"http://{http}"},
        )
        with urllib.request.urlopen(signed, timeout=30) as response:  # noqa: S310
            cookie = response.headers["set-cookie"].split(";")[0]
            csrf = json.loads(response.read())["csrf"]
        console = _post(
            http,
            "/memoryd.v2.AdminService/GetServerInfo",
            {},
            cookie=cookie,
            **{"x-memoryd-csrf": csrf},
        )
        assert PASSWORD not in console
        assert MASK in console
    finally:
        assert server.stop() == 0, server.output
    assert PASSWORD not in server.output


def _failed_start(home: Path, settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`memoryd serve` with these MEMORYD_ settings (and no others), expected to stop: its
    exit and output."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", "serve", "--home", str(home)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=environment | settings,
    )
    assert done.returncode != 0
    return done


@pytest.mark.parametrize(
    "dsn",
    [
        # libpq quotes the piece it could not read: a piece of the password.
        f"host=/nonexistent password={PASSWORD} tail-of-it dbname=x",
        f"host=127.0.0.1 port=1 password={PASSWORD} connect_timeout=2",
        f"postgresql://u:{PASSWORD}@127.0.0.1:1/x?connect_timeout=2",
    ],
)
def test_a_start_up_error_quotes_no_password(tmp_path: Path, dsn: str) -> None:
    done = _failed_start(
        tmp_path / "h", {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_DSN": dsn}
    )
    assert "cannot connect" in done.stderr
    for piece in (PASSWORD, "tail-of-it", "S3cret"):
        assert piece not in done.stderr


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        (
            f'[memoryd.storage]\nbackend = "postgres"\ndsn = "host=/x password={PASSWORD}"\n',
            "memoryd.storage.dsn",
        ),
        (
            (
                f'[[memoryd.providers]]\nname = "p"\nbase_url = "https://u:{PASSWORD}@x/v1"\n'
                'model = "m"\n'
            ),
            "memoryd.providers[0].base_url",
        ),
    ],
)
def test_a_config_file_with_a_password_that_others_can_read_is_refused(
    tmp_path: Path, text: str, setting: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    config.chmod(0o644)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memoryd",
            "serve",
            "--home",
            str(tmp_path / "h"),
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=environment,
    )
    assert done.returncode == 1
    assert f"holds a secret ({setting}) and other users can read it (mode 0644)" in done.stderr
    assert PASSWORD not in done.stderr


def _post(address: str, path: str, body: object, **headers: str) -> str:
    request = urllib.request.Request(
        f"http://{address}{path}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "origin": f"http://{address}", **headers},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return str(response.read().decode())


@pytest.mark.storage  # the PostgreSQL run calls with_password through it
def test_a_password_file_connects_and_reaches_no_output(postgres_base: str, tmp_path: Path) -> None:
    """PostgreSQL's password from a file of its own (a container's secret): the server connects
    with it, and neither its settings nor its log show it; a start that cannot connect does
    not quote it either."""
    secret = tmp_path / "db.password"
    secret.write_text(PASSWORD + "\n", encoding="utf-8")
    secret.chmod(0o400)
    home = tmp_path / "home"
    server = ServerProcess(
        home,
        env={
            "MEMORYD_STORAGE_BACKEND": "postgres",
            "MEMORYD_STORAGE_DSN": database_dsn(postgres_base, home),
            "MEMORYD_STORAGE_PASSWORD_FILE": str(secret),
        },
    ).start()
    try:
        with md.connect_sync(server.address) as channel:
            info = md.SyncStubs(channel).admin.GetServerInfo(md.GetServerInfoRequest())
        assert PASSWORD not in info.settings_json
        assert json.loads(info.settings_json)["memoryd"]["storage"]["password_file"] == str(secret)
    finally:
        assert server.stop() == 0, server.output
    assert PASSWORD not in server.output
    unreachable = {
        "MEMORYD_STORAGE_BACKEND": "postgres",
        "MEMORYD_STORAGE_DSN": "host=127.0.0.1 port=1 connect_timeout=2",
        "MEMORYD_STORAGE_PASSWORD_FILE": str(secret),
    }
    refused = _failed_start(tmp_path / "h", unreachable)
    assert "cannot connect" in refused.stderr
    assert PASSWORD not in refused.stderr
    secret.chmod(0o644)
    opened = _failed_start(tmp_path / "h", unreachable)
    assert "password_file" in opened.stderr
    assert "can be read or written by other users (mode 0644)" in opened.stderr
    assert PASSWORD not in opened.stderr
