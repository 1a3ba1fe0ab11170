"""A number written in ASCII digits: how memoryd reads a number from text it is given (a model's
answer, a header, a config value, an address, a page token).

`str.isdigit()` is true of superscripts and other digit signs that `int()` refuses ("¹", "②"),
and `int()` reads the digits of every script ("٣" is 3): "¹" passed the first and broke the
second. A number here is ASCII digits, or it is not a number."""

from __future__ import annotations


def is_number(text: str) -> bool:
    """Whether `text` is one or more ASCII digits, and nothing else."""
    return text.isascii() and text.isdigit()
