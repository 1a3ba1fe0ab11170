"""Case-insensitive "contains" tests for substring searches, as SQL.

SQLite's lower() folds ASCII letters only, so "моск" would not find "Москве". A word with
non-ASCII cased letters is compared through memoryd_fold (Python's casefold, registered on every
connection); every other word (ASCII, or scripts without case such as Chinese, Japanese and
emoji) through lower(), which is native and several times cheaper per row.
"""

from __future__ import annotations

from memoryd.storage.connection import FOLD_FUNCTION
from memoryd.storage.engine import Engine


def contains(engine: Engine, column: str, word: str) -> tuple[str, str]:
    """An SQL condition "`column` contains `word`, ignoring case", and its one parameter."""
    if needs_unicode_folding(word):
        return f"{engine.position(f'{FOLD_FUNCTION}({column})', '?')} > 0", word.casefold()
    return f"{engine.position(f'lower({column})', 'lower(?)')} > 0", word


def needs_unicode_folding(word: str) -> bool:
    """Whether `word` has a cased letter outside ASCII."""
    return not word.isascii() and any(
        not char.isascii() and char.lower() != char.upper() for char in word
    )
