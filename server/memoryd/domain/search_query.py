"""Turning any user text into safe full-text searches, of the words that mean something.

User text never reaches FTS5 as syntax. The query is split on whitespace into words; each word
that contains a letter or digit becomes one quoted FTS5 phrase (inner quotes doubled), so `AND`,
`*`, `text:foo`, `"` and `C++` are plain words. The words are alternatives: messages holding all
of them come first, then those holding any of them, each ranked by bm25, so that a hit with more
of the words, or rarer ones, ranks higher, and a word the message lacks never hides it.

Only words that carry meaning are searched (`terms`). English function words ("when", "did",
"the"), the pieces of contractions ("I'm", "don't", "what's") and punctuation carry none: a
query of nothing else finds nothing, by its words or by its meaning, rather than every message
that says "is". A possessive is its noun ("Caroline's" is "Caroline": FTS5 would otherwise look
for "caroline" followed by "s").

When whole words find fewer hits than asked for, a substring search fills the rest: each term
must occur in the content as typed (case-insensitively), which finds partial words, text written
without spaces (Chinese, Japanese) and symbols or emoji the word index ignores. A piece of a word
matches inside any longer word, so only a real term takes part (`is_real_term`): three
characters or more, two in a script written without spaces, or an emoji; "of" inside "offer"
is no match. The trigram index can answer a `LIKE '%piece%'` for pieces of three or more
characters without wildcards; so terms are cut at LIKE's wildcard characters, and any term the
pieces cannot fully decide is checked exactly with `instr`.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
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
# What is left of a contraction's parts once split at the apostrophe ("I'm", "don't", "we've"):
# never a word of its own.
CONTRACTION_PARTS = frozenset(
    (  # noqa: SIM905 - a word list reads better as text
        "s t d ll m re ve y don doesn didn isn aren wasn weren hasn haven hadn wouldn shouldn "
        "couldn mustn needn ain"
    ).split()
)
APOSTROPHES = "'\u2019"
# A piece of a word shorter than this matches inside too many others to mean anything.
REAL_TERM_CHARS = 3
# In scripts written without spaces between words, two characters already name something.
UNSPACED_TERM_CHARS = 2
_UNSPACED_SCRIPTS = (
    "CJK",
    "HIRAGANA",
    "KATAKANA",
    "HANGUL",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
    "TIBETAN",
)
MAX_QUERY_CHARS = 1024
MAX_QUERY_WORDS = 32
TRIGRAM = 3
LIKE_WILDCARDS = "%_"
# "'s" ending a word, before any closing punctuation ("Caroline's?").
_POSSESSIVE = re.compile(r"['\u2019][sS](?=[^\w]*$)")


@dataclasses.dataclass(frozen=True, slots=True)
class SearchPlan:
    """How one query is searched: word stage, then substring stage."""

    # The query's words, as typed (control characters removed), without repeats.
    words: tuple[str, ...]
    # The words that carry meaning (not function words, contraction parts or punctuation), a
    # possessive as its noun: what the word stage searches.
    terms: tuple[str, ...]
    # FTS5 expression requiring every term; None when no term has a letter or digit.
    word_expression: str | None
    # FTS5 expression accepting any of the words; None when there is at most one such word
    # (then it would find what word_expression finds).
    any_word_expression: str | None
    # Pieces (>= 3 characters, no LIKE wildcards) the trigram index can look up with LIKE.
    trigram_pieces: tuple[str, ...]
    # Real terms that must also be confirmed with an exact case-insensitive substring test.
    exact_words: tuple[str, ...]
    # The quoted FTS5 phrases the two expressions are made of.
    phrases: tuple[str, ...] = ()
    # The real terms (is_real_term) a substring match must hold, every one of them.
    substring_terms: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """A query with nothing that carries meaning (blank, punctuation, function words
        alone) finds nothing: neither by its words nor by its meaning."""
        return not self.phrases and not self.substring_terms

    def phrase_of(self, term: str) -> str | None:
        """The quoted phrase a term is searched as (None: a term without letters or digits)."""
        phrase = _quote(term)
        return phrase if phrase in self.phrases else None


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

    terms = [term for term in (_term(word) for word in words) if term is not None]
    phrases = [_quote(term) for term in terms if any(_is_token_char(char) for char in term)]
    substring_terms = [
        found for found in (substring_term(word) for word in words) if found is not None
    ]
    trigram_pieces: list[str] = []
    exact_words: list[str] = []
    for term in substring_terms:
        pieces = [piece for piece in _split_wildcards(term) if piece]
        long_pieces = [piece for piece in pieces if len(piece) >= TRIGRAM]
        trigram_pieces.extend(long_pieces)
        # The LIKE pieces decide the term on their own only when the term is exactly one piece.
        if long_pieces != [term]:
            exact_words.append(term)
    return SearchPlan(
        words=tuple(words),
        terms=tuple(dict.fromkeys(terms)),
        word_expression=" ".join(phrases) if phrases else None,
        any_word_expression=" OR ".join(phrases) if len(phrases) > 1 else None,
        trigram_pieces=tuple(dict.fromkeys(trigram_pieces)),
        exact_words=tuple(dict.fromkeys(exact_words)),
        phrases=tuple(dict.fromkeys(phrases)),
        substring_terms=tuple(dict.fromkeys(substring_terms)),
    )


def _term(word: str) -> str | None:
    """The term a query word searches for, or None when it carries no meaning: a function
    word, a contraction of one ("I'm", "what's", "don't"), a letter alone, or punctuation alone
    (symbols such as emoji stay: they are searched as substrings). A possessive is its noun."""
    parts = _parts(word)
    if not parts:
        return word if any(unicodedata.category(char) == "So" for char in word) else None
    if all(part in STOP_WORDS or part in CONTRACTION_PARTS for part in parts):
        return None
    if len(parts) == 1 and len(parts[0]) == 1 and not (parts[0].isdigit() or _unspaced(parts[0])):
        return None  # a letter alone ("x", the "C" of "C++") names nothing
    possessive = _POSSESSIVE.search(word)
    if possessive is not None and len(parts) == 2 and parts[1] == "s":
        return word[: possessive.start()] + word[possessive.end() :]
    return word


def substring_term(word: str) -> str | None:
    """What a substring search looks for of a query word: its term without the punctuation
    around it ("Mongolia?" is "Mongolia"), when that is a real term; else None."""
    term = _term(word)
    if term is None:
        return None
    trimmed = term.strip("".join(_ends_of(term)))
    return trimmed if is_real_term(trimmed) else None


def _ends_of(term: str) -> set[str]:
    """The punctuation characters of `term` (what may be trimmed off its ends)."""
    return {char for char in term if unicodedata.category(char)[0] == "P"}


def is_real_term(term: str) -> bool:
    """Whether a piece of text means enough to be looked for inside longer words: at least
    REAL_TERM_CHARS letters or digits (UNSPACED_TERM_CHARS in a script written without
    spaces), or an emoji; never a function word or punctuation alone."""
    if any(unicodedata.category(char) == "So" for char in term):
        return True
    meaningful = [char for char in term if _is_token_char(char)]
    if not meaningful or _folded(term) in STOP_WORDS:
        return False
    if any(_unspaced(char) for char in meaningful):
        return len(meaningful) >= UNSPACED_TERM_CHARS
    return len(meaningful) >= REAL_TERM_CHARS


def _parts(word: str) -> list[str]:
    """The word's runs of token characters, folded: the words the index splits it into."""
    return [
        "".join(run).casefold()
        for is_token, run in itertools.groupby(word, key=_is_token_char)
        if is_token
    ]


def _unspaced(char: str) -> bool:
    name = unicodedata.name(char, "")
    return name.startswith(_UNSPACED_SCRIPTS)


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
