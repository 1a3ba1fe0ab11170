"""`memoryd setup` and `memoryd config show`: write the config file, show the effective settings.

    memoryd setup [--home DIR] [--config PATH] [--name N] [--base-url URL] [--model M]
                  [--api-key-env VAR] [--review-interval-hours H] [--skip-check] [--yes]

Setup asks on a terminal for what no flag gave (the seed's setup wizard: the model endpoint and
the review interval), asking again at once when an answer cannot be used, checks that the
endpoint answers a chat completion (on a terminal, offering to write the file anyway when it
does not), and writes the config file: the new provider becomes the primary, other providers
stay as fallbacks, every other setting in the file is kept, and so are its comments and layout
(tomlkit edits the file in place). `config show` prints the settings memoryd would run with,
from the same sources as `serve`, with secrets masked: API keys are never written to the file
or shown.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import tomlkit

from memoryd.config import (
    DEFAULT_HOME,
    ProviderSettings,
    load_settings,
    setting_origins,
)
from memoryd.config.editing import read_editable, write_private
from memoryd.config.shown import effective
from memoryd.errors import StartupError
from memoryd.llm.chain import ModelUnavailableError, ProviderChain

EXIT_FAILED = 1


EMBEDDINGS = ("embedded", "provider", "off")


def add_commands(commands: Any) -> None:
    """Add `setup` and `config show` to the top-level parser."""
    setup = commands.add_parser(
        "setup", help="write the config file (model endpoint, review, embeddings)"
    )
    setup.add_argument("--home", metavar="DIR", help="data directory (default ~/.memoryd)")
    setup.add_argument("--config", metavar="PATH", help="the file to write (<home>/config.toml)")
    setup.add_argument("--name", help="the provider's name (default: primary)")
    setup.add_argument(
        "--base-url", help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1"
    )
    setup.add_argument("--model", help="the model name")
    setup.add_argument("--api-key-env", help="the environment variable holding the API key")
    setup.add_argument(
        "--review-interval-hours",
        type=float,
        help="the longest a fact waits for review, in hours (0: only the turn and idle triggers)",
    )
    setup.add_argument(
        "--embeddings",
        choices=EMBEDDINGS,
        help="semantic search: the embedded model (default), the endpoint's /embeddings, or off",
    )
    setup.add_argument("--embedding-model", help='the endpoint\'s embedding model ("provider")')
    setup.add_argument("--skip-check", action="store_true", help="do not call the endpoint")
    setup.add_argument("--yes", action="store_true", help="never ask; use flags and defaults")
    setup.set_defaults(run=run_setup)

    config = commands.add_parser("config", help="inspect the configuration")
    actions = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="print the effective settings, secrets masked")
    show.add_argument("--config", metavar="PATH", help="TOML config file")
    show.add_argument("--home", metavar="DIR", help="data directory")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(run=run_show)


# --- setup -----------------------------------------------------------------------------------


def run_setup(
    args: argparse.Namespace,
    env: Mapping[str, str],
    out: TextIO = sys.stdout,
    ask: Callable[[str], str] | None = None,
) -> int:
    """Ask, check, write."""
    interactive = not args.yes and sys.stdin.isatty()
    prompt = ask or (input if interactive else None)
    home = Path(args.home or env.get("MEMORYD_HOME") or DEFAULT_HOME).expanduser()
    path = Path(args.config).expanduser() if args.config else home / "config.toml"
    try:
        document = read_editable(path)
        answers = _answers(args, document, prompt)
        provider = ProviderSettings(
            name=answers["name"],
            base_url=answers["base_url"],
            model=answers["model"],
            api_key_env=answers["api_key_env"],
        )
        search = _search_answers(args, document, prompt)
    except (StartupError, ValueError) as error:
        print(f"memoryd: {error}", file=sys.stderr)  # noqa: T201 - CLI output
        return EXIT_FAILED
    if not args.skip_check:
        problem = asyncio.run(_check_endpoint(provider, env))
        if problem:
            said = f"memoryd: {provider.base_url} did not answer: {problem}"
            if prompt is None:
                print(  # noqa: T201 - CLI output
                    f"{said} (fix it, or pass --skip-check to write the file anyway)",
                    file=sys.stderr,
                )
                return EXIT_FAILED
            print(said, file=sys.stderr)  # noqa: T201 - CLI output
            if prompt("Write the file anyway? [y/N]: ").strip().lower() not in ("y", "yes"):
                print(f"memoryd: nothing written to {path}", file=sys.stderr)  # noqa: T201
                return EXIT_FAILED
        else:
            out.write(f"{provider.base_url} answered with model {provider.model}\n")
    _merge(document, provider, answers["review_interval_hours"])
    document["memoryd"].setdefault("search", {}).update(search)
    write_private(path, tomlkit.dumps(document))
    out.write(f"wrote {path}\n")
    if provider.api_key_env and provider.api_key_env not in env:
        out.write(f"note: ${provider.api_key_env} is not set in this shell\n")
    return 0


def _answers(
    args: argparse.Namespace, document: Any, ask: Callable[[str], str] | None
) -> dict[str, Any]:
    """The provider's and the interval's answers: flags first, then a terminal's (asked again
    until usable), then what the file holds. Raises ValueError for an unusable value."""
    table = document.get("memoryd", {})
    current = (table.get("providers") or [{}])[0]
    memory = table.get("memory", {})
    questions: list[tuple[str, str, Any]] = [
        ("base_url", "Model endpoint (OpenAI-compatible base URL)", current.get("base_url", "")),
        ("model", "Model name", current.get("model", "")),
        (
            "api_key_env",
            "Environment variable with the API key (empty: none)",
            current.get("api_key_env", ""),
        ),
        (
            "review_interval_hours",
            "Review interval in hours, the longest a fact waits (0: turn and idle triggers only)",
            memory.get("review_interval_hours", 24),
        ),
    ]
    answers: dict[str, Any] = {"name": args.name or current.get("name") or "primary"}
    for key, question, default in questions:
        given = getattr(args, key)
        if given is None and ask is not None:
            answers[key] = _asked(ask, key, f"{question} [{default}]: ", default)
        else:
            answers[key] = _usable(key, default if given is None else given)
    return answers


def _asked(ask: Callable[[str], str], key: str, question: str, default: Any) -> Any:
    """A terminal's answer, asked again until it can be used (an empty one takes `default`)."""
    while True:
        reply = ask(question).strip() or str(default)
        try:
            return _usable(key, reply)
        except ValueError as error:
            print(f"memoryd: {error}; try again", file=sys.stderr)  # noqa: T201 - CLI output


def _usable(key: str, value: Any) -> Any:
    """One answer, checked (and the interval read as a number); ValueError says why not."""
    if key == "review_interval_hours":
        try:
            hours = float(value)
        except (TypeError, ValueError):
            message = f"the review interval must be a number of hours, got {value!r}"
            raise ValueError(message) from None
        if not math.isfinite(hours) or hours < 0:
            message = f"the review interval must be 0 or more hours, got {value!r}"
            raise ValueError(message)
        return hours
    text = str(value).strip()
    if key in ("base_url", "model") and not text:
        message = f"--{key.replace('_', '-')} is required"
        raise ValueError(message)
    if key == "base_url" and not text.startswith(("http://", "https://")):
        message = f"the base URL must start with http:// or https://, got {text!r}"
        raise ValueError(message)
    return text


def _search_answers(
    args: argparse.Namespace, document: dict[str, Any], ask: Callable[[str], str] | None
) -> dict[str, str]:
    """[memoryd.search]: which embeddings, and the endpoint's model for "provider"."""
    current = document.get("memoryd", {}).get("search", {})
    choice = args.embeddings
    default = current.get("embeddings", "embedded")
    if choice is None and ask is not None:
        reply = ask(
            "Semantic search: embedded (a small model on this machine), provider (the "
            f"endpoint's /embeddings) or off [{default}]: "
        ).strip()
        choice = reply or default
    choice = choice or default
    if choice not in EMBEDDINGS:
        message = f"embeddings must be one of {', '.join(EMBEDDINGS)}, got {choice!r}"
        raise ValueError(message)
    answers = {"embeddings": choice}
    if choice == "provider":
        model = args.embedding_model
        known = current.get("embedding_model", "")
        if model is None and ask is not None:
            model = ask(f"Embedding model of the endpoint [{known}]: ").strip() or known
        model = model or known
        if not str(model).strip():
            message = "--embedding-model is required with --embeddings provider"
            raise ValueError(message)
        answers["embedding_model"] = str(model)
    return answers


async def _check_endpoint(provider: ProviderSettings, env: Mapping[str, str]) -> str:
    checked = dataclasses.replace(provider, timeout_seconds=min(provider.timeout_seconds, 30))
    chain = ProviderChain([checked], env)
    try:
        await chain.complete(
            [{"role": "user", "content": "Reply with OK."}], agent="setup", session_id="setup"
        )
    except ModelUnavailableError as error:
        return str(error)
    finally:
        await chain.close()
    return ""


def _merge(document: Any, provider: ProviderSettings, hours: float) -> None:
    """The provider becomes the primary (an entry of its name is updated in place, keeping its
    other settings and comments), and the interval is set."""
    table = document.setdefault("memoryd", {})
    if "providers" not in table:
        table["providers"] = tomlkit.aot()
    providers = table["providers"]
    entry = next((p for p in providers if p.get("name") == provider.name), None)
    if entry is None:
        entry = tomlkit.table()
        entry["name"] = provider.name
    else:
        providers.remove(entry)
    entry["base_url"] = provider.base_url
    entry["model"] = provider.model
    if provider.api_key_env:
        entry["api_key_env"] = provider.api_key_env
    elif "api_key_env" in entry:
        del entry["api_key_env"]
    providers.insert(0, entry)
    table.setdefault("memory", {})["review_interval_hours"] = (
        int(hours) if float(hours).is_integer() else hours
    )


def to_toml(document: dict[str, Any], origins: Mapping[str, str] | None = None) -> str:
    """TOML text for memoryd's config shape: tables of scalars, arrays of tables; with
    `origins`, each value that has one is followed by a comment saying where it came from."""
    lines: list[str] = []
    said = origins or {}

    def emit(prefix: str, table: dict[str, Any]) -> None:
        scalars = {k: v for k, v in table.items() if not _is_table(v)}
        for key, value in scalars.items():
            origin = said.get(f"{prefix}.{key}" if prefix else key)
            note = f"  # {origin}" if origin else ""
            lines.append(f"{key} = {_toml_value(value)}{note}")
        for key, value in table.items():
            name = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict):
                lines.extend(["", f"[{name}]"])
                emit(name, value)
            elif _is_table(value):
                for item in value:
                    lines.extend(["", f"[[{name}]]"])
                    emit(name, item)

    emit("", document)
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_table(value: Any) -> bool:
    """A table, or an array of tables (`[[...]]`); an array of scalars is a value."""
    return isinstance(value, dict) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


# --- config show -----------------------------------------------------------------------------


def run_show(args: argparse.Namespace, env: Mapping[str, str], out: TextIO = sys.stdout) -> int:
    """Print the effective settings."""
    try:
        settings = load_settings(env, config_path=args.config, home=args.home)
    except StartupError as error:
        print(f"memoryd: {error}", file=sys.stderr)  # noqa: T201 - CLI output
        return EXIT_FAILED
    origins = setting_origins(env, config_path=args.config, home=args.home)
    shown = effective(settings, env)
    if args.json:
        out.write(json.dumps({**shown, "origins": origins}, indent=2) + "\n")
    else:
        out.write(to_toml(shown, origins))
    return 0
