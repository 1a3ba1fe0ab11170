"""Ranks on a timeline (tests/retrieval_fixture.py TIMELINE), through the shared server and its
embedded model, in hybrid search: a question naming a day finds the message whose "yesterday"
points at it; a question asking when finds the message saying when; evidence a month apart is
found together; and asked of the whole agent, another chat on the same topics does not crowd out
the one the question is about. Ranks, not scores, are asserted.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

import memoryd_client as md
from tests import retrieval_fixture as fixture
from tests.memory.test_retrieval import embedded

AGENT = "timeline"


def _said(
    conversation: md.Conversation, lines: tuple[tuple[int, str, str], ...], first: str
) -> md.AppendMessagesRequest:
    start = dt.datetime(*fixture.TIMELINE_START, 9, 0, tzinfo=dt.UTC)
    request = md.AppendMessagesRequest(conversation=conversation)
    for index, (days, sender, text) in enumerate(lines):
        message = request.messages.add(
            role=md.ROLE_USER if sender == first else md.ROLE_ASSISTANT,
            sender=sender,
            content=text,
            client_message_id=str(index),
        )
        message.created_at.FromDatetime(start + dt.timedelta(days=days, minutes=index))
    return request


@pytest.fixture(scope="module")
async def chats(memory: md.Stubs) -> tuple[md.Conversation, str]:
    """Ana and Ben's chat and Chen and Dana's, under an agent of their own; the agent's id."""
    agent = f"{AGENT}-{uuid.uuid4().hex[:8]}"
    ours = md.Conversation(agent_id=agent, owner_id="ana", channel="telegram", chat_id="ana-ben")
    theirs = md.Conversation(
        agent_id=agent, owner_id="chen", channel="telegram", chat_id="chen-dana"
    )
    await memory.conversations.AppendMessages(_said(ours, fixture.TIMELINE, fixture.ANA))
    await memory.conversations.AppendMessages(_said(theirs, fixture.OTHER_TIMELINE, fixture.CHEN))
    await embedded(memory)
    return ours, agent


@pytest.mark.parametrize("question", fixture.TIMELINE_QUESTIONS, ids=lambda q: q.query)
async def test_each_answer_is_ranked_where_the_timeline_says(
    memory: md.Stubs,
    chats: tuple[md.Conversation, str],
    question: fixture.TimelineQuestion,
) -> None:
    ours, agent = chats
    request = md.SearchHistoryRequest(query=question.query, limit=10)
    if question.whole_agent:
        request.agent.agent_id = agent
    else:
        request.conversation.CopyFrom(ours)
    hits = (await memory.conversations.SearchHistory(request)).hits
    shown = [f"{hit.message.conversation.chat_id}: {hit.message.content}" for hit in hits]
    places = [
        place
        for place, hit in enumerate(hits, start=1)
        if hit.message.conversation.chat_id == ours.chat_id
        and hit.message.client_message_id in {str(answer) for answer in question.answers}
    ]
    assert len(places) == len(question.answers), shown
    assert max(places) <= question.within, shown
