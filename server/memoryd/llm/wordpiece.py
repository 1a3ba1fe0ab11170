"""BERT's uncased WordPiece tokenizer, for the embedded embedding model.

The same steps as BERT's BasicTokenizer and WordpieceTokenizer (and Hugging Face's BertNormalizer,
BertPreTokenizer and WordPiece, which the model was trained with):

1. clean: drop NUL, U+FFFD and control characters; every whitespace character becomes a space;
2. put spaces around CJK ideographs, so each is a word of its own;
3. lowercase, decompose (NFD) and drop the combining marks (accents);
4. split on whitespace, and make every punctuation character a word of its own;
5. cut each word into the longest vocabulary pieces from the left, later pieces prefixed "##"; a
   word that cannot be cut so, or longer than 100 characters, is [UNK].

Written here rather than taken from a tokenizer package, which would bring a hub client and half a
dozen other packages along for these eighty lines.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
from pathlib import Path

MAX_WORD_CHARS = 100
CONTINUATION = "##"
UNKNOWN = "[UNK]"
FIRST = "[CLS]"
SEPARATOR = "[SEP]"
WHITESPACE = frozenset(" \t\n\r")

# The CJK ideograph blocks BERT splits into single characters.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


class WordPiece:
    """A vocabulary, and text to token ids with it."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self._ids = {token: index for index, token in enumerate(vocabulary)}
        self.unknown_id = self._ids[UNKNOWN]
        self.first_id = self._ids[FIRST]
        self.separator_id = self._ids[SEPARATOR]
        self._pieces = functools.lru_cache(maxsize=65536)(self._word_ids)

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        """A vocabulary file: one token a line, in id order."""
        return cls(path.read_text(encoding="utf-8").splitlines())

    def encode(self, text: str, max_tokens: int) -> list[int]:
        """[CLS], the text's pieces, [SEP]: at most `max_tokens` ids in all."""
        ids = [self.first_id]
        room = max_tokens - 1
        for word in words(text):
            ids.extend(self._pieces(word))
            if len(ids) >= room:
                del ids[room:]
                break
        ids.append(self.separator_id)
        return ids

    def _word_ids(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_WORD_CHARS:
            return (self.unknown_id,)
        found: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else CONTINUATION + word[start:end]
                index = self._ids.get(piece)
                if index is not None:
                    found.append(index)
                    break
                end -= 1
            else:
                return (self.unknown_id,)
            start = end
        return tuple(found)


def words(text: str) -> list[str]:
    """Steps 1-4: the normalised words and punctuation marks of `text`."""
    spaced: list[str] = []
    for char in text:
        code = ord(char)
        if code in (0, 0xFFFD) or (_is_control(char)):
            continue
        if char in WHITESPACE or unicodedata.category(char) == "Zs":
            spaced.append(" ")
        elif _is_cjk(code):
            spaced.extend((" ", char, " "))
        else:
            spaced.append(char)
    normalised = unicodedata.normalize("NFD", "".join(spaced).lower())
    plain = "".join(char for char in normalised if unicodedata.category(char) != "Mn")
    found: list[str] = []
    for chunk in plain.split():
        current: list[str] = []
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    found.append("".join(current))
                    current = []
                found.append(char)
            else:
                current.append(char)
        if current:
            found.append("".join(current))
    return found


def _is_control(char: str) -> bool:
    if char in WHITESPACE:
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    # ASCII symbols count as punctuation too ("$", "^", "`"), as in BERT.
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")
