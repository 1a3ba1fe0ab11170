"""The pure rules of relevance, without a server: what a hit holds of a query (coverage), what
a scope never holds (absence), a date as a term, turns that say nothing, the calibration's
shape, and word snippets. The words come from the word index's own tokenizer
(memoryd.storage.terms), as the server reads them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.domain.relevance import (
    CALIBRATION,
    PHATIC_MAX_WORDS,
    UNCALIBRATED,
    Calibration,
    QueryTerms,
    is_phatic,
    term_weight,
)
from memoryd.domain.snippets import ELLIPSIS, word_snippet
from memoryd.domain.time_expressions import asked_span
from memoryd.storage.terms import phrase_words, text_spans, text_words


def terms(*words: str, weights: tuple[float, ...] = (), **fields: Any) -> QueryTerms:
    return QueryTerms(
        words=tuple(phrase_words(word) for word in words),
        weights=weights or (1.0,) * len(words),
        folded=tuple(word.casefold() for word in words),
        **fields,
    )


def coverage(query: QueryTerms, text: str, at: dt.datetime | None = None) -> float:
    return query.coverage(text_words(text), text, at)


# --- coverage --------------------------------------------------------------------------------


def test_coverage_is_the_weighted_share_of_the_terms_held() -> None:
    capital_of_mongolia = terms("capital", "Mongolia", weights=(2.0, 6.0))
    assert coverage(capital_of_mongolia, "We talked about venture capital") == 0.25
    assert coverage(capital_of_mongolia, "Mongolia's capital is cold") == 1.0
    assert coverage(capital_of_mongolia, "Nothing of it") == 0.0
    # Stemmed as the index stems: "painting" holds "paint".
    assert coverage(terms("paint"), "I finished the painting") == 1.0


def test_a_term_held_inside_a_longer_word_counts_half_and_a_phrase_in_order() -> None:
    assert coverage(terms("passport"), "apassportb is a made-up token") == 0.5
    assert coverage(terms("e-mail"), "please e-mail me") == 1.0
    assert coverage(terms("e-mail"), "mail me an e too") == 0.0
    # A term the index has no word for (an emoji) is held whole as a substring.
    party = QueryTerms(words=((),), weights=(1.0,), folded=("\U0001f389",))
    assert party.coverage(text_words("party \U0001f389 tonight"), "party \U0001f389 tonight") == 1


def test_a_named_day_is_a_term_held_by_a_message_said_or_speaking_of_it() -> None:
    query = terms("news", weights=(1.0,), span=asked_span("on 16 June, 2023"), span_weight=3.0)
    said_then = dt.datetime(2023, 6, 16, 10, tzinfo=dt.UTC)
    assert coverage(query, "Great news!", said_then) == 1.0
    assert coverage(query, "Great news!", said_then + dt.timedelta(days=30)) == 0.25
    # Said the day after, of "yesterday": the day it speaks of.
    assert coverage(query, "Yesterday was great", said_then + dt.timedelta(days=1)) == 0.75
    # Without a time (a memory row), the date is no term at all.
    assert coverage(query, "Great news!") == 1.0


def test_absence_is_the_weighted_share_of_terms_the_scope_never_holds() -> None:
    assert terms("capital", "Mongolia", weights=(2.0, 6.0), absent=(False, True)).absence == 0.75
    assert terms("capital", weights=(2.0,), absent=(False,)).absence == 0.0
    assert terms("capital", weights=(2.0,)).absence == 0.0


def test_a_term_in_most_rows_weighs_next_to_nothing_and_one_in_none_the_most() -> None:
    assert term_weight(100, 90) == pytest.approx(1e-6)
    assert term_weight(100, 0) > term_weight(100, 1) > term_weight(100, 10)


# --- turns that say nothing ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["ok", "Thanks!", "Sounds good, thanks.", "haha yes 😂", "lol", "Oh wow, that's great!", "👍"],
)
def test_phatic_turns(text: str) -> None:
    assert is_phatic(text)


@pytest.mark.parametrize(
    "text",
    [
        "ok, the espresso machine is fixed",
        "Thanks for the coffee",
        "Yes, in Lisbon",
        "good " * 13,  # too long to be filler
    ],
)
def test_turns_that_say_something(text: str) -> None:
    assert not is_phatic(text)


def test_filler_counts_every_word_up_to_the_limit() -> None:
    """At most PHATIC_MAX_WORDS words, each filler; a content word anywhere says something."""
    assert is_phatic("ok " * PHATIC_MAX_WORDS)
    assert not is_phatic("ok " * (PHATIC_MAX_WORDS + 1))
    assert not is_phatic("ok " * (PHATIC_MAX_WORDS - 1) + "espresso")
    assert is_phatic("!!! 😂 ...")  # no word at all


# --- the calibration -------------------------------------------------------------------------


@given(st.floats(0, 1), st.floats(0, 1), st.floats(-1, 1), st.floats(-1, 1), st.floats(0, 1))
def test_relevance_rises_with_coverage_and_similarity_and_falls_with_absence(
    low: float, high: float, near: float, nearer: float, absence: float
) -> None:
    low, high = sorted((low, high))
    near, nearer = sorted((near, nearer))
    relevance = CALIBRATION.relevance
    assert relevance(low, near, absence) <= relevance(high, near, absence)
    assert relevance(low, near, absence) <= relevance(low, nearer, absence)
    assert relevance(low, near, absence) >= relevance(low, near, min(1.0, absence + 0.1))
    assert 0 <= relevance(low, near, absence) <= 1
    # Words alone (no vector) rise with coverage too.
    assert relevance(low, None) <= relevance(high, None)


def test_the_floor_of_one_half_is_the_calibrated_plane() -> None:
    floor = CALIBRATION.meaning_floor or 0.0
    assert CALIBRATION.relevance(0.0, floor) == pytest.approx(0.5)
    half = CALIBRATION.coverage_share / 2
    assert CALIBRATION.relevance(0.5, floor - half) == pytest.approx(0.5)
    assert CALIBRATION.relevance(0.0, floor + CALIBRATION.absence_cost, 1.0) == pytest.approx(0.5)
    assert CALIBRATION.relevance(CALIBRATION.words_floor, None) == pytest.approx(0.5)


@given(st.floats(-1, 1), st.floats(0, 1))
def test_a_hit_holding_every_term_matches_however_far_its_vector(
    similarity: float, absence: float
) -> None:
    # "©" or a part number: the model reads it as noise, the words say it is what was asked.
    assert CALIBRATION.relevance(1.0, similarity, absence) > 0.99
    assert UNCALIBRATED.relevance(1.0, similarity, absence) > 0.99


def test_a_model_never_calibrated_lets_its_meaning_stand_at_the_floor() -> None:
    assert UNCALIBRATED.relevance(0.0, -0.2) == 0.5
    assert UNCALIBRATED.relevance(1.0, 0.1) > 0.99
    shifted = Calibration(meaning_floor=0.3)
    assert shifted.relevance(0.0, 0.3) == pytest.approx(0.5)


# --- snippets --------------------------------------------------------------------------------


def snippet(text: str, *words: str) -> str | None:
    return word_snippet(text, text_spans(text), [phrase_words(word) for word in words])


def test_a_short_message_is_its_own_snippet_with_the_terms_marked() -> None:
    assert snippet("Please send the e-mail to Bob", "e-mail") == "Please send the **e-mail** to Bob"
    assert snippet("That is the user's café", "user") == "That is the **user**'s café"
    assert snippet("Я живу в Москве и люблю", "Москве") == "Я живу в **Москве** и люблю"
    assert snippet("I finished the painting.", "paint") == "I finished the **painting**."
    assert snippet("Nothing here", "zanzibar") is None


def test_a_long_message_is_cut_around_its_terms() -> None:
    text = (
        " ".join(f"w{n}" for n in range(40)) + " zanzibar " + " ".join(f"v{n}" for n in range(40))
    )
    found = snippet(text, "zanzibar")
    assert found is not None
    assert found.startswith(ELLIPSIS)
    assert found.endswith(ELLIPSIS)
    assert "**zanzibar**" in found
    assert len(found.removeprefix(ELLIPSIS).removesuffix(ELLIPSIS).split()) == 16
    # The window holding the most terms wins.
    both = "alpha " + "x " * 30 + "beta gamma " + "y " * 30
    assert "**beta** **gamma**" in (snippet(both, "beta", "gamma", "alpha") or "")


def test_a_phrase_longer_than_a_snippet_opens_the_window_unmarked() -> None:
    # Found by the round-trip property test: a message searched for as a whole, its one phrase
    # of 20 words longer than the 16 a snippet holds.
    text = "intro " + " ".join(f"w{n}" for n in range(20)) + " outro"
    phrase = " ".join(f"w{n}" for n in range(20))
    found = word_snippet(text, text_spans(text), [phrase_words(phrase)])
    assert found == ELLIPSIS + " ".join(f"w{n}" for n in range(16)) + ELLIPSIS
