"""The start-up refusals that protect what memoryd holds: no network exposure without
authentication and TLS, and no settings file or key that other users could read or change."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from memoryd.config.settings import Settings
from memoryd.errors import StartupError


def is_loopback(listen: str) -> bool:
    """Whether HOST:PORT only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check_exposure(settings: Settings) -> None:
    """Without authentication (tokens, or client certificates under mutual TLS), memoryd serves
    only this machine unless told otherwise; and tokens, like everything a call carries, cross
    a network only inside TLS. TLS alone authenticates the server, not callers."""
    server = settings.server
    for listen in (server.listen, settings.http.listen, settings.metrics.listen):
        if listen:
            _check_exposed(settings, listen)


def _check_exposed(settings: Settings, listen: str) -> None:
    server = settings.server
    if server.insecure or is_loopback(listen):
        return
    if not (settings.auth.tokens or server.tls_client_ca):
        raise StartupError(
            f"refusing to serve {listen} without authentication: anyone who can reach "
            "it could read and erase every conversation. Configure [[memoryd.auth.tokens]] (or "
            "mutual TLS, [memoryd.server] tls_client_ca), listen on a loopback address "
            "(127.0.0.1), or start with --insecure if that is really wanted"
        )
    if not server.tls_cert:
        raise StartupError(
            f"refusing to serve {listen} with tokens but without TLS: every bearer token "
            "and every conversation would cross the network in clear text, for anyone on the "
            "path to read and replay. Set [memoryd.server] tls_cert and tls_key, listen on a "
            "loopback address behind a TLS-terminating proxy, or start with --insecure if that "
            "is really wanted"
        )


def check_private_settings(settings: Settings) -> None:
    """Refuse, as ssh does, files whose secrets or powers others could take: a config file
    others can write (they could add their own admin token), a config file holding a secret (a
    token, a password in the connection string or a URL) that others can read, and a TLS
    private key others can read. Each refusal names the file and the
    chmod that fixes it."""
    path = settings.config_path
    if path is not None:
        mode = _mode(path)
        folder = _mode(path.parent)
        if mode & 0o022:
            raise StartupError(
                f"config file {path} can be written by other users (mode {mode:04o}): they "
                f"could give themselves a token. Run: chmod go-w {path}"
            )
        if folder & 0o022 and not folder & 0o1000:
            raise StartupError(
                f"config file {path} is in a folder other users can write (mode {folder:04o}): "
                f"they could replace it. Run: chmod go-w {path.parent}"
            )
        if settings.secrets_in_file and mode & 0o044:
            raise StartupError(
                f"config file {path} holds a secret ({settings.secrets_in_file[0]}) and other "
                f"users can read it (mode {mode:04o}). Run: chmod 600 {path} (or keep it in the "
                "environment: token_env, dsn_env, a provider's api_key_env)"
            )
    key = settings.server.tls_key
    if key:
        key_path = Path(key).expanduser()
        mode = _mode(key_path)
        if mode & 0o077:
            raise StartupError(
                f"memoryd.server.tls_key {key_path} can be read or written by other users "
                f"(mode {mode:04o}): anyone who reads it can impersonate this server. Run: "
                f"chmod 600 {key_path}"
            )


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:  # unreadable or gone: the read that follows says so
        return 0
