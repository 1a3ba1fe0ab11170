"""Turning any user text into safe full-text searches.

User text never reaches FTS5 as syntax. The query is split on whitespace into words; each word
that contains a letter or digit becomes one quoted FTS5 phrase (inner quotes doubled), so `AND`,
`*`, `text:foo`, `"` and `C++` are plain words. The words are alternatives: messages holding all
of them come first, then those holding any of them, each ranked by bm25, so that a hit with more
of the words, or rarer ones, ranks higher, and a word the message lacks ("when", "did") never
hides it. English function words ("when", "did", "the") count only when the query has nothing
else: they would otherwise rank chatter that shares them above the message that answers.

When whole words find fewer hits than asked for, a substring search fills the rest: each word
must occur in the content as typed (case-insensitively), which finds partial words, text written
without spaces (Chinese, Japanese) and symbols or emoji the word index ignores. The trigram index
can answer a `LIKE '%piece%'` for pieces of three or more characters without wildcards; so words
are cut at LIKE's wildcard characters, and any word the pieces cannot fully decide is checked
exactly with `instr`.
"""

from __future__ import annotations

import dataclasses
import unicodedata

from memoryd.domain.conversation import CONTROL_CHARACTERS
from memoryd.errors import InvalidArgument, Reason

# English function words: never alternatives on their own when a query has other words.
STOP_WORDS = frozenset(
    (  # noqa: SIM905 - a word list reads better as text
        "a about above after again against all am an and any are as at be because been before "
        "being below between both but by can could did do does doing down during each few for "
        "from further had has have having he her here hers herself him himself his how i if "
        "in into is it its itself just me more most my myself no nor not now of off on once "
        "only or other our ours ourselves out over own same she should so some such than that "
        "the their theirs them themselves then there these they this those through to too "
        "under until up very was we were what when where which while who whom why will with "
        "would you your yours yourself yourselves"
    ).split()
)
MAX_QUERY_CHARS = 1024
MAX_QUERY_WORDS = 32
TRIGRAM = 3
LIKE_WILDCARDS = "%_"


@dataclasses.dataclass(frozen=True, slots=True)
class SearchPlan:
    """How one query is searched: word stage, then substring stage."""

    # The query's words, as typed (control characters removed), without repeats.
    words: tuple[str, ...]
    # FTS5 expression requiring every word; None when no word has a letter or digit.
    word_expression: str | None
    # FTS5 expression accepting any of the words; None when there is at most one such word
    # (then it would find what word_expression finds).
    any_word_expression: str | None
    # Pieces (>= 3 characters, no LIKE wildcards) the trigram index can look up with LIKE.
    trigram_pieces: tuple[str, ...]
    # Words that must also be confirmed with an exact case-insensitive substring test.
    exact_words: tuple[str, ...]
    # The quoted FTS5 phrases the two expressions are made of.
    phrases: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """A blank query finds nothing."""
        return not self.words

    def without_common(self, common: frozenset[str]) -> SearchPlan:
        """This plan with the `common` phrases (words in very many messages) left out of the
        any-word stage, when rarer ones remain: a message holding only a common word would rank
        low for its small idf anyway, and reading every message that holds it is what makes a
        search of a large scope slow. The every-word stage keeps them."""
        kept = [phrase for phrase in self.phrases if phrase not in common]
        if not kept or len(kept) == len(self.phrases):
            return self
        return dataclasses.replace(self, any_word_expression=" OR ".join(kept))


def plan_search(query: str, field: str = "query") -> SearchPlan:
    """Plan the search of `query`; raises InvalidArgument only for over-long queries."""
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(
            f"{field} is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}",
            reason=Reason.VALUE_TOO_LONG,
            field=field,
        )
    cleaned = CONTROL_CHARACTERS.sub(" ", query)
    words = list(dict.fromkeys(cleaned.split()))
    if len(words) > MAX_QUERY_WORDS:
        raise InvalidArgument(
            f"{field} has {len(words)} words; the limit is {MAX_QUERY_WORDS}",
            reason=Reason.VALUE_TOO_LONG,
            field=field,
        )

    tokens = [word for word in words if any(_is_token_char(char) for char in word)]
    content = [word for word in tokens if _folded(word) not in STOP_WORDS]
    phrases = [_quote(word) for word in content or tokens]
    trigram_pieces: list[str] = []
    exact_words: list[str] = []
    for word in words:
        pieces = [piece for piece in _split_wildcards(word) if piece]
        long_pieces = [piece for piece in pieces if len(piece) >= TRIGRAM]
        trigram_pieces.extend(long_pieces)
        # The LIKE pieces decide the word on their own only when the word is exactly one piece.
        if long_pieces != [word]:
            exact_words.append(word)
    return SearchPlan(
        words=tuple(words),
        word_expression=" ".join(phrases) if phrases else None,
        any_word_expression=" OR ".join(phrases) if len(phrases) > 1 else None,
        trigram_pieces=tuple(dict.fromkeys(trigram_pieces)),
        exact_words=tuple(exact_words),
        phrases=tuple(phrases),
    )


def _folded(word: str) -> str:
    return "".join(char for char in word.casefold() if _is_token_char(char))


def like_pattern(piece: str) -> str:
    """A LIKE pattern matching `piece` anywhere; pieces never contain wildcards."""
    return f"%{piece}%"


def _quote(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _is_token_char(char: str) -> bool:
    # The unicode61 tokenizer's token characters: letters, numbers and private-use code points.
    category = unicodedata.category(char)
    return category[0] in "LN" or category == "Co"


def _split_wildcards(word: str) -> list[str]:
    pieces = [word]
    for wildcard in LIKE_WILDCARDS:
        pieces = [part for piece in pieces for part in piece.split(wildcard)]
    return pieces
