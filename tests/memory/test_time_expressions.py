"""The dates a question names and the days a message speaks of (memoryd.domain.time_expressions),
which search ranks by: pure functions, checked against a calendar."""

from __future__ import annotations

import datetime as dt

import pytest

from memoryd.domain.time_expressions import Span, asked_span, asks_when, spoken_spans

D = dt.date
# Monday 14 August 2023, in the afternoon.
SAID = dt.datetime(2023, 8, 14, 14, 24, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("question", "span"),
    [
        ("What did she show on October 13, 2023?", Span(D(2023, 10, 13), D(2023, 10, 13))),
        ("What did she do on 7th May 2023?", Span(D(2023, 5, 7), D(2023, 5, 7))),
        ("What setback did he face in October 2023?", Span(D(2023, 10, 1), D(2023, 10, 31))),
        ("When did they go camping in June?", Span(D(2000, 6, 1), D(2000, 6, 30), any_year=True)),
        ("How often did she swim in 2022?", Span(D(2022, 1, 1), D(2022, 12, 31))),
        ("What happened on 30 February 2023?", Span(D(2023, 2, 1), D(2023, 2, 28))),
        ("When did Caroline go to the group?", None),
        ("May I ask what she likes?", None),
    ],
)
def test_the_span_a_question_names(question: str, span: Span | None) -> None:
    assert asked_span(question) == span


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("I went to a pride parade last Friday", [(D(2023, 8, 4), D(2023, 8, 11))]),
        ("we went camping two weekends ago", [(D(2023, 7, 28), D(2023, 8, 3))]),
        ("Last month I got hurt", [(D(2023, 7, 1), D(2023, 7, 31))]),
        ("I went yesterday", [(D(2023, 8, 13), D(2023, 8, 13))]),
        ("three days ago it rained", [(D(2023, 8, 10), D(2023, 8, 12))]),
        ("see you next week", [(D(2023, 8, 15), D(2023, 8, 28))]),
        ("the cat sleeps on the sofa", []),
    ],
)
def test_the_days_a_message_speaks_of(text: str, days: list[tuple[dt.date, dt.date]]) -> None:
    found = spoken_spans(text, SAID)
    assert found[0] == Span(D(2023, 8, 14), D(2023, 8, 14))  # the day it was said, first
    assert [(span.first, span.last) for span in found[1:]] == days


def test_a_span_of_any_year_meets_the_same_days_of_every_year_and_a_wide_one_points_less() -> None:
    june = asked_span("in June")
    assert june is not None
    assert june.meets(Span(D(2023, 6, 27), D(2023, 6, 27)))
    assert not june.meets(Span(D(2023, 7, 1), D(2023, 7, 2)))
    day = Span(D(2023, 3, 3), D(2023, 3, 3))
    assert day.precision(Span(D(2023, 3, 3), D(2023, 3, 3))) == 1.0
    assert day.precision(Span(D(2023, 3, 1), D(2023, 3, 31))) == pytest.approx(7 / 31)


def test_a_question_asking_when() -> None:
    assert asks_when("When did she move to Lisbon?")
    assert not asks_when("What did she do whenever it rained?")
