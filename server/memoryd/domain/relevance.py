"""How well a hit matches a query, on one scale for every kind of hit, and the turns that say
nothing.

A hit's evidence is what its words hold of the query and how near its meaning is:

- `coverage`: the share of the query's terms (memoryd.domain.search_query) the hit holds, each
  weighed by its rarity (bm25's idf), 0 to 1. A term held only inside a longer word ("passport"
  in "passports2026") counts PARTIAL of its weight. "What is the capital of Mongolia?" is
  two terms, and a message about venture capital holds the commoner of them: well under half.
- `similarity`: the cosine of the query's and the hit's vectors, when the hit has one.

`relevance` turns the two into one figure from 0 to 1 that one floor ([memoryd.search]
min_relevance) is applied to, whichever ranking found the hit: a word match, a partial word, a
key, the meaning, or their fusion. See `Calibration` for its form and how it was fitted.

A phatic turn ("ok", "Sounds good, thanks!", "haha yes") holds no term of any question, and its
vector carries the turn before it (memoryd.services.embedding.message_text): found by its
meaning, it ranked above the turn that holds what was asked. `is_phatic` names such turns; the
fusion never lets one match on its own, unless it holds every term of the query (a search for
"thanks" or for an emoji is after exactly those turns).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from collections.abc import Sequence

from memoryd.domain.search_query import CONTRACTION_PARTS, STOP_WORDS
from memoryd.domain.time_expressions import Span, spoken_spans

# The weight of a term held only inside a longer word.
PARTIAL = 0.5
# FTS5's idf of a word in half the rows or more, where its formula gives 0 or less.
IDF_FLOOR = 1e-6

# Words that carry no content of their own in a chat: acknowledgements, greetings, laughter.
PHATIC_WORDS = frozenset(
    (  # noqa: SIM905 - a word list reads better as text
        "ok okay okey k kk thanks thank thx ty tysm yes yeah yea yep yup ya no nope nah sure "
        "cool nice great good awesome lol lmao rofl haha hahaha hehe hah ha hmm hm mm oh ah "
        "aw aww wow whoa right alright fine perfect sounds sound got it see bye goodbye hi "
        "hello hey welcome np agreed exactly indeed true totally absolutely definitely "
        "amazing glad well same sweet cheers congrats congratulations night morning later "
        "soon sorry please love omg yay ugh oops wonderful fantastic brilliant lovely "
        "gotcha noted understood hear thats ikr idk tbh fr"
    ).split()
)
# A turn longer than this many words (or characters) says something, whatever its words.
PHATIC_MAX_WORDS = 12
PHATIC_MAX_CHARS = 160
# Runs of letters and digits.
_WORDS = re.compile(r"[^\W_]+")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """What a hit holds of a query and how near it is, and the relevance that makes."""

    coverage: float
    # None: the hit has no vector of the model, or the search compares no meaning.
    similarity: float | None
    relevance: float
    # A turn that says nothing of its own (is_phatic) and holds less than every term of the
    # query: it never matches on its own.
    phatic: bool = False
    # Whether its meaning alone reaches the floor (it then says it matched by meaning).
    by_meaning: bool = False

    def passes(self, floor: float) -> bool:
        """Whether the hit matches on its own at `floor`."""
        return not self.phatic and self.relevance >= floor


@dataclasses.dataclass(frozen=True, slots=True)
class QueryTerms:
    """A query's terms as the word index reads them (each a run of words; none for a symbol
    such as an emoji, which only a substring match holds), their weights (bm25's idf), and each
    term as typed, folded, for partial matches. A time the query names
    ("on 16 June, 2023", "in May") is one term of its own, held by a message said then or
    speaking of then (memoryd.domain.time_expressions), weighed as the heaviest of the words
    that name it, which are no terms of their own: a question's date asks when, and the
    messages it is about rarely spell it out."""

    words: tuple[tuple[str, ...], ...]
    weights: tuple[float, ...]
    folded: tuple[str, ...]
    span: Span | None = None
    span_weight: float = 0.0
    # Whether each term is held by nothing of the search's scope (then no hit can hold it).
    absent: tuple[bool, ...] = ()

    @property
    def absence(self) -> float:
        """The weighted share of the terms nothing of the scope holds: a question about
        something never mentioned ("What is the capital of Mongolia?" of a chat that never
        names Mongolia) is answered by meaning alone only when it is very near."""
        total = sum(self.weights)
        if total <= 0 or not self.absent:
            return 0.0
        missing = sum(w for w, gone in zip(self.weights, self.absent, strict=True) if gone)
        return missing / total

    def total(self, *, timed: bool) -> float:
        """The weight of every term (the time's too when the text has a time)."""
        return sum(self.weights) + (self.span_weight if timed and self.span else 0.0)

    def coverage(
        self,
        text_words: Sequence[str],
        text: str = "",
        at: datetime.datetime | None = None,
    ) -> float:
        """The weighted share of the terms `text_words` (the text's words, in order) holds; a
        term found only as part of a longer word of `text` counts PARTIAL. With `at` (when the
        text was said), the asked time counts as held as closely as the text's days meet it."""
        total = self.total(timed=at is not None)
        if total <= 0:
            return 0.0
        present = set(text_words)
        folded_text = None  # folded when a term is looked for inside words (most are not)
        held = 0.0
        for words, weight, folded in zip(self.words, self.weights, self.folded, strict=True):
            if words and (
                words[0] in present if len(words) == 1 else _holds(text_words, present, words)
            ):
                held += weight
            elif folded:
                if folded_text is None:
                    folded_text = text.casefold()
                if folded in folded_text:
                    # Inside a longer word; a term the index has no word for (an emoji) is
                    # only ever held so.
                    held += PARTIAL * weight if words else weight
        if at is not None and self.span is not None:
            spans = spoken_spans(text, at)
            held += self.span_weight * max(
                (self.span.precision(days) for days in spans if self.span.meets(days)),
                default=0.0,
            )
        return min(1.0, held / total)


def term_weight(rows: float, holding: float) -> float:
    """bm25's idf of a term `holding` of `rows` rows hold (FTS5's formula, with its floor): a
    term no row holds weighs most."""
    size = max(rows, holding)
    weight = math.log((size - holding + 0.5) / (holding + 0.5))
    return weight if weight > 0 else IDF_FLOOR


def _holds(text_words: Sequence[str], present: set[str], words: tuple[str, ...]) -> bool:
    """Whether the words occur in the text one after another (a phrase: "e-mail")."""
    if not all(word in present for word in words):
        return False
    if len(words) == 1:
        return True
    width = len(words)
    return any(
        tuple(text_words[start : start + width]) == words
        for start in range(len(text_words) - width + 1)
    )


def is_phatic(text: str) -> bool:
    """Whether a turn says nothing of its own: every word of it a function word, a piece of a
    contraction, or a word of PHATIC_WORDS, in at most PHATIC_MAX_WORDS words (emoji and
    punctuation say nothing either)."""
    if len(text) > PHATIC_MAX_CHARS:
        return False
    # Word by word, ending at the first that says something (most turns' first or second):
    # half the time of splitting the whole turn first, for every candidate a search judges.
    for count, found in enumerate(_WORDS.finditer(text.casefold()), start=1):
        word = found.group()
        if count > PHATIC_MAX_WORDS or not (
            word in PHATIC_WORDS or word in STOP_WORDS or word in CONTRACTION_PARTS
        ):
            return False
    return True


@dataclasses.dataclass(frozen=True, slots=True)
class Calibration:
    """How a hit's evidence becomes its relevance, for one embedding model.

    With a vector: relevance = logistic(SLOPE * (similarity + coverage_share * coverage -
    absence_cost * absence - meaning_floor)). The floor of 0.5 is then a plane: a hit holding
    none of the query's terms needs `meaning_floor` of similarity; holding more of them, up to
    `coverage_share` less; and a query whose terms the scope never holds (QueryTerms.absence)
    asks up to `absence_cost` more of every hit. A hit holding every term matches whatever its
    similarity, as by its words alone. Without a vector (words alone: lexical mode,
    embeddings off, a message not embedded yet): relevance = logistic(SLOPE * (coverage -
    words_floor)). Fitted on LoCoMo's conversations 1-5 and the calibrating half of
    bench/off_topic.txt (bench/retrieval_quality.py --floors); docs/performance.md has the
    figures on the rest.
    """

    # The similarity at which a hit holding none of the query's terms reaches 0.5; None: the
    # model's similarities are not calibrated (a provider's model), and any hit found by
    # meaning stands at 0.5 (more when its words say more).
    meaning_floor: float | None = 0.56
    # What holding every term of the query is worth, in similarity.
    coverage_share: float = 0.2
    # What a query about nothing the scope holds costs, in similarity.
    absence_cost: float = 0.1
    # Words alone: the coverage that reaches 0.5.
    words_floor: float = 0.2

    def relevance(self, coverage: float, similarity: float | None, absence: float = 0.0) -> float:
        """The relevance of a hit holding `coverage` of the query, `similarity` near it, for a
        query `absence` of whose terms its scope never holds."""
        if similarity is not None and coverage < 1.0 and self.meaning_floor is not None:
            return _logistic(
                SLOPE
                * (
                    similarity
                    + self.coverage_share * coverage
                    - self.absence_cost * absence
                    - self.meaning_floor
                )
            )
        words = _logistic(SLOPE * (coverage - self.words_floor))
        if similarity is None or coverage >= 1.0:
            # A hit holding every term of the query matches, however far its vector is (a
            # symbol, a name, a code the model reads as noise).
            return words
        return max(0.5, words)  # a model whose similarities were never measured


# How fast relevance rises through the floor: 0.1 of similarity above it is 0.95.
SLOPE = 30.0


def _logistic(score: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score))))


CALIBRATION = Calibration()
# A model never measured: no meaning floor; words alone as for any model.
UNCALIBRATED = Calibration(meaning_floor=None)
