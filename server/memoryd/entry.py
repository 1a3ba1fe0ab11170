"""The `memoryd` command (and `python -m memoryd`): SIGHUP held first (memoryd.hangups), then
the command line, whose imports take a second on a loaded machine."""

from __future__ import annotations

from memoryd import hangups


def main() -> int:
    """Run `memoryd` with this process's arguments; the exit code."""
    hangups.hold()
    from memoryd.cli.main import main as run  # noqa: PLC0415 - after hold(): imports take time

    return run()
