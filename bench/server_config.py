"""What the benchmarks configure their memoryd with: the embedded embedder on (the default) or
off, and the option that chooses it."""

from __future__ import annotations

import argparse

EMBEDDINGS_OFF = '[memoryd.search]\nembeddings = "off"\n'


def add_embeddings_option(parser: argparse.ArgumentParser, *, default: str = "on") -> None:
    """`--embeddings on|off`: the server's background embedder (and query embeddings)."""
    parser.add_argument(
        "--embeddings",
        choices=("on", "off"),
        default=default,
        help=f"the server's embeddings (default {default})",
    )


def embeddings(choice: str) -> str:
    """The config text for `--embeddings`'s choice (on: nothing, the default)."""
    return EMBEDDINGS_OFF if choice == "off" else ""
