"""What a search's candidates hold of its query and how near they are: the relevance every hit
is judged by (memoryd.domain.relevance), read by the searches of messages and of rows alike.

A query's terms are weighed once a search (storage.terms.idf: the rows of the index holding
each), and a candidate is judged only when the search reaches it: most ranked candidates are
never shown.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping

from memoryd.domain.relevance import (
    CALIBRATION,
    Calibration,
    Evidence,
    QueryTerms,
    is_phatic,
    term_weight,
)
from memoryd.domain.search_query import SearchPlan, substring_term
from memoryd.domain.time_expressions import asked_time
from memoryd.storage import terms as stored
from memoryd.storage.engine import WordTable
from memoryd.storage.transaction import Transaction

# A term in more rows than this of the whole index is taken as held by any scope (looking it up
# would visit up to that many rows; its weight is small anyway).
RARE_TERM_ROWS = 20_000


@dataclasses.dataclass(frozen=True, slots=True)
class Relevance:
    """How hits are judged: the calibration of the model's similarities, and the floor of
    relevance every hit is held to ([memoryd.search] min_relevance; 0 keeps every hit)."""

    calibration: Calibration = CALIBRATION
    floor: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class TermCounts:
    """How many rows of a table hold each of a query's terms, and its rows: read once a search
    (storage.terms.counts), for the order the words are searched in and for their weights."""

    rows: float
    holding: Mapping[str, float]

    @classmethod
    def read(cls, connection: Transaction, table: WordTable, plan: SearchPlan) -> TermCounts:
        """The counts of the plan's terms in `table`."""
        rows, holding = stored.counts(connection, table, list(plan.terms))
        return cls(rows, dict(zip(plan.terms, holding, strict=True)))

    def of_words(self) -> dict[str, float]:
        """The counts of the terms that are one word each, by that word as the index holds
        it (what a word search's score is given: engine.WordIndex)."""
        found = {}
        for term, count in self.holding.items():
            words = stored.phrase_words(term)
            if len(words) == 1:
                found[words[0]] = count
        return found


def query_terms(
    connection: Transaction,
    table: WordTable,
    plan: SearchPlan,
    held: Callable[[list[str]], list[bool]],
    counted: TermCounts | None = None,
) -> QueryTerms:
    """The plan's terms as the word index reads them, weighed by their rarity in `table` (from
    `counted`, read now when not given), and which of them the search's scope holds (`held` of
    their quoted phrases: a term in more than RARE_TERM_ROWS rows of the table is taken as
    held, as most are, without a lookup)."""
    split = {term: stored.phrase_words(term) for term in plan.terms}
    # A term without words of the index (an emoji) is kept when a substring search looks for
    # it; no row's words hold it, so it weighs as a word no row holds.
    terms = [term for term in plan.terms if split[term] or _partial(term)]
    counted = counted or TermCounts.read(connection, table, plan)
    holding = [counted.holding.get(term, 0.0) for term in terms]
    weights = [term_weight(counted.rows, count) for count in holding]
    looked_up = [
        index
        for index, count in enumerate(holding)
        if count <= RARE_TERM_ROWS and split[terms[index]]
    ]
    absent = [False] * len(terms)
    found = held([_quoted(terms[index]) for index in looked_up]) if looked_up else []
    for index, inside in zip(looked_up, found, strict=True):
        absent[index] = not inside
    asked = asked_time(" ".join(plan.words))
    # The words naming an asked time are no terms of their own: the time is (QueryTerms).
    naming = set() if asked is None else set(stored.phrase_words(asked.words))
    dated = [bool(naming) and set(split[term]) <= naming for term in terms]
    kept = [index for index, inside in enumerate(dated) if not inside]
    return QueryTerms(
        words=tuple(split[terms[index]] for index in kept),
        weights=tuple(weights[index] for index in kept),
        folded=tuple(_partial(terms[index]) for index in kept),
        span=None if asked is None else asked.span,
        span_weight=max(
            (weight for weight, inside in zip(weights, dated, strict=True) if inside),
            default=max(weights, default=1.0),
        ),
        absent=tuple(absent[index] for index in kept),
    )


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _partial(term: str) -> str:
    """What a partial match of the term looks for: the term without the punctuation around it,
    when it is a real term; else nothing."""
    found = substring_term(term)
    return "" if found is None else found.casefold()


class Judge:
    """One search's judge of its candidates: each judged once, when first asked."""

    def __init__(
        self,
        terms: QueryTerms,
        similarities: Mapping[int, float] | None,
        calibration: Calibration = CALIBRATION,
        *,
        floor: float = 0.0,
    ) -> None:
        self.terms = terms
        # The candidates' similarities to the query (None: the search compares no meaning);
        # a search adds those of candidates it reaches late (neighbours).
        self.similarities: dict[int, float] | None = (
            None if similarities is None else dict(similarities)
        )
        self._calibration = calibration
        self.floor = floor
        self._absence = terms.absence  # the same for every candidate
        self._judged: dict[int, Evidence] = {}

    def judge(
        self,
        item: int,
        text: str,
        *,
        speaker: str = "",
        at: datetime.datetime | None = None,
    ) -> Evidence:
        """The evidence of candidate `item`, whose text (and sender and time, for a message)
        is given."""
        found = self._judged.get(item)
        if found is not None:
            return found
        words = stored.text_words(f"{speaker}\n{text}" if speaker else text)
        coverage = self.terms.coverage(words, text, at)
        similarity = None if self.similarities is None else self.similarities.get(item)
        calibration = self._calibration
        absence = self._absence
        # Filler, unless it holds every term asked for (a search for "thanks" or "👍").
        phatic = coverage < 1.0 and is_phatic(text)
        found = Evidence(
            coverage=coverage,
            similarity=similarity,
            relevance=calibration.relevance(coverage, similarity, absence),
            phatic=phatic,
            # A turn that says nothing never matches by its meaning (its vector carries the
            # turn before it).
            by_meaning=not phatic
            and similarity is not None
            and calibration.relevance(0.0, similarity, absence) >= self.floor,
        )
        self._judged[item] = found
        return found
