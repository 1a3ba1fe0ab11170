"""SearchHistory: any text is a valid query; words by bm25, then substrings; scopes isolate."""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memoryd_client as md
from memoryd.domain.search_query import plan_search
from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres
from tests.helpers import append, assistant, user

CORPUS = [
    "Please send the e-mail to Bob before noon",
    "I write C++ and Rust at work",
    "That is the user's favourite café",
    "Rock AND roll, OR jazz, NOT country",
    'She said "hello" to everyone',
    "Wildcards like * and ? are globs",
    "Config key text:foo is set",
    "Party time 🎉😀 tonight",
    "東京タワーに行きました",
    "Я живу в Москве и люблю привет",
    "The deploys run nightly from release-2026",
    "Coverage went to 100% today",
    "snake_case_name versus snakeXcaseXname",
    "back\\slash and (parens) and {braces} and ^caret",
]


async def search(
    memory: md.Stubs,
    query: str,
    *,
    conversation: md.Conversation | None = None,
    owner: md.OwnerScope | None = None,
    agent: md.AgentScope | None = None,
    limit: int = 0,
    kinds: tuple[str, ...] = (),
) -> list[md.HistoryHit]:
    """Run one lexical search and return its hits (tests/memory/test_retrieval.py tests meaning)."""
    request_ = md.SearchHistoryRequest(
        query=query, limit=limit, kinds=list(kinds), mode=md.SEARCH_MODE_LEXICAL
    )
    if conversation is not None:
        request_.conversation.CopyFrom(conversation)
    elif owner is not None:
        request_.owner.CopyFrom(owner)
    else:
        request_.agent.CopyFrom(agent or md.AgentScope())
    response = await memory.conversations.SearchHistory(request_)
    return list(response.hits)


@pytest.fixture(scope="module")
async def corpus(memory: md.Stubs) -> md.Conversation:
    """One conversation holding CORPUS, in order."""
    conversation = md.Conversation(channel="telegram", chat_id=f"corpus-{uuid.uuid4().hex[:8]}")
    await append(memory, conversation, *(user(text) for text in CORPUS))
    return conversation


HOSTILE = [
    ("e-mail", "Please send the **e-mail** to Bob before noon", md.MATCH_KIND_WORD),
    ("C++ Rust", "I write C++ and **Rust** at work", md.MATCH_KIND_WORD),
    # A possessive is its noun.
    ("user's", "That is the **user**'s favourite café", md.MATCH_KIND_WORD),
    ("roll AND", "Rock AND **roll**, OR jazz, NOT country", md.MATCH_KIND_WORD),
    ('"hello"', 'She said "**hello**" to everyone', md.MATCH_KIND_WORD),
    ("text:foo", "Config key **text:foo** is set", md.MATCH_KIND_WORD),
    ("😀", "Party time 🎉**😀** tonight", md.MATCH_KIND_SUBSTRING),
    ("東京", "**東京**タワーに行きました", md.MATCH_KIND_SUBSTRING),
    ("Москве", "Я живу в **Москве** и люблю привет", md.MATCH_KIND_WORD),
    ("Моск", "Я живу в **Моск**ве и люблю привет", md.MATCH_KIND_SUBSTRING),
    ("100%", "Coverage went to **100**% today", md.MATCH_KIND_WORD),
    ("overag", "C**overag**e went to 100% today", md.MATCH_KIND_SUBSTRING),
    ("e_case", "snak**e_case**_name versus snakeXcaseXname", md.MATCH_KIND_SUBSTRING),
    ("(parens)", "back\\slash and (**parens**) and {braces} and ^caret", md.MATCH_KIND_WORD),
    ("^caret", "back\\slash and (parens) and {braces} and ^**caret**", md.MATCH_KIND_WORD),
    ("back\\slash", "**back\\slash** and (parens) and {braces} and ^caret", md.MATCH_KIND_WORD),
]


@pytest.mark.parametrize(("query", "snippet", "match"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_hostile_queries_are_plain_text(
    memory: md.Stubs,
    corpus: md.Conversation,
    query: str,
    snippet: str,
    match: int,
) -> None:
    hits = await search(memory, query, conversation=corpus)
    assert (snippet, match) in [(hit.snippet, hit.match) for hit in hits]


# Words that carry no meaning find nothing, though a message holds them: function words,
# punctuation, and pieces of words too short to mean anything.
MEANINGLESS = ["AND", "OR NOT", '"', "*", "0%", "e_", "C++", "is the", "I'm", "?!"]


@pytest.mark.parametrize("query", MEANINGLESS)
async def test_words_that_carry_no_meaning_find_nothing(
    memory: md.Stubs, corpus: md.Conversation, query: str
) -> None:
    assert await search(memory, query, conversation=corpus) == []


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        "OR",
        "NOT",
        "NEAR(a b)",
        "a OR b",
        "-x",
        "x*",
        "{content}:x",
        "'",
        "(",
        ")",
        "\\",
        "%",
        "_",
        "%%",
        "\x00",
        "\u200b",
        "💩" * 50,
        "a" * 1024,
        " ".join(["w"] * 32),
    ],
)
async def test_more_hostile_queries_never_fail(
    memory: md.Stubs, corpus: md.Conversation, query: str
) -> None:
    for hit in await search(memory, query, conversation=corpus):
        assert hit.message.content in CORPUS


async def test_wildcard_characters_match_only_themselves(
    memory: md.Stubs, corpus: md.Conversation
) -> None:
    # Unescaped, "%" and "_" would match "anything" and "any one character".
    assert [h.message.content for h in await search(memory, "e_case", conversation=corpus)] == [
        "snake_case_name versus snakeXcaseXname"
    ]
    assert await search(memory, "ke%ca", conversation=corpus) == []
    assert await search(memory, "eXc_s", conversation=corpus) == []


async def test_stemming_partial_words_and_words_as_alternatives(
    memory: md.Stubs, corpus: md.Conversation
) -> None:
    deploys = "The deploys run nightly from release-2026"
    for query in (
        "deploy",
        "deploying",
        "running deploys",
        "nightly release-2026",
        "deplo",
        "ightl",
    ):
        hits = await search(memory, query, conversation=corpus)
        assert [h.message.content for h in hits] == [deploys], query
    # Any word finds; a message holding every word would come first.
    hits = await search(memory, "deploys jazz", conversation=corpus)
    assert [h.message.content for h in hits] == [deploys, "Rock AND roll, OR jazz, NOT country"]


async def test_word_matches_rank_by_bm25_then_substrings_fill_the_rest(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    await append(
        memory,
        conversation,
        user("passport passport passport renewal"),
        user("my passport expires in March, the passport office is slow"),
        user("the passports are in the drawer"),
        user("apassportb is a made-up token"),
        user("nothing relevant"),
    )
    hits = await search(memory, "passport", conversation=conversation)
    assert [h.match for h in hits] == [md.MATCH_KIND_WORD] * 3 + [md.MATCH_KIND_SUBSTRING]
    assert hits[0].message.content == "passport passport passport renewal"
    assert hits[0].rank <= hits[1].rank <= hits[2].rank < 0
    assert hits[3].message.content == "apassportb is a made-up token"
    assert hits[3].rank == 0
    assert hits[3].snippet == "a**passport**b is a made-up token"
    assert len({h.message.id for h in hits}) == len(hits)

    assert len(await search(memory, "passport", conversation=conversation, limit=2)) == 2
    only_words = await search(memory, "passport", conversation=conversation, limit=3)
    assert all(h.match == md.MATCH_KIND_WORD for h in only_words)


async def test_a_word_in_most_messages_counts_less_than_a_rare_one(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    # bm25's inverse document frequency, on both backends: "caroline" (the sender of nearly
    # every message, and in their words) weighs next to nothing beside "painting". PostgreSQL's
    # ts_rank alone has no idf and put the twelve "caroline" messages first.
    server = start_server(tmp_path / "home").start()
    chat = md.Conversation(channel="t", chat_id="idf")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        chatter = [user(f"caroline says hello, caroline {n}", sender="caroline") for n in range(12)]
        await append(memory, chat, *chatter, user("I finished the painting", sender="melanie"))
        response = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(
                query="caroline painting", conversation=chat, limit=13, mode=md.SEARCH_MODE_LEXICAL
            )
        )
    # The twelve that hold "caroline" alone hold next to nothing of the query: left out.
    assert [hit.message.content for hit in response.hits] == ["I finished the painting"]
    assert response.below_floor == 12


async def test_kind_filter(memory: md.Stubs, conversation: md.Conversation) -> None:
    await append(
        memory,
        conversation,
        user("pancakes for breakfast"),
        user("pancakes again", kind="voice_turn"),
    )
    hits = await search(memory, "pancakes", conversation=conversation, kinds=("voice_turn",))
    assert [h.message.content for h in hits] == ["pancakes again"]
    hits = await search(memory, "ancake", conversation=conversation, kinds=("voice_turn",))
    assert [h.message.content for h in hits] == ["pancakes again"]


async def test_long_snippets_are_excerpts(memory: md.Stubs, conversation: md.Conversation) -> None:
    text = (
        " ".join(f"filler{i}" for i in range(200))
        + " zanzibar "
        + " ".join(f"tail{i}" for i in range(200))
    )
    await append(memory, conversation, user(text))
    (word,) = await search(memory, "zanzibar", conversation=conversation)
    assert "**zanzibar**" in word.snippet
    assert word.snippet.startswith("…")
    assert word.snippet.endswith("…")
    assert len(word.snippet) < 300
    (partial,) = await search(memory, "anziba", conversation=conversation)
    assert "z**anziba**r" in partial.snippet
    assert partial.snippet.startswith("…")
    assert partial.snippet.endswith("…")
    assert len(partial.snippet) < 200


async def test_scopes_isolate_conversations_owners_and_agents(
    memory: md.Stubs,
) -> None:
    tag = uuid.uuid4().hex[:8]
    word = f"quokka{tag}"
    ada_tg = md.Conversation(
        agent_id=f"agent-{tag}", owner_id="ada", channel="telegram", chat_id="1"
    )
    ada_slack = md.Conversation(
        agent_id=f"agent-{tag}", owner_id="ada", channel="slack", chat_id="C1"
    )
    bob_tg = md.Conversation(
        agent_id=f"agent-{tag}", owner_id="bob", channel="telegram", chat_id="2"
    )
    other_agent = md.Conversation(
        agent_id=f"other-{tag}", owner_id="ada", channel="telegram", chat_id="1"
    )
    for conversation, text in [
        (ada_tg, f"ada on telegram {word}"),
        (ada_slack, f"ada on slack {word}"),
        (bob_tg, f"bob on telegram {word}"),
        (other_agent, f"other agent {word}"),
    ]:
        await append(memory, conversation, user(text))

    async def found(**scope: Any) -> set[str]:
        hits_word = await search(memory, word, **scope)
        hits_part = await search(memory, word[1:-1], **scope)
        assert {h.message.content for h in hits_word} == {h.message.content for h in hits_part}
        return {h.message.content for h in hits_word}

    assert await found(conversation=ada_tg) == {f"ada on telegram {word}"}
    assert await found(owner=md.OwnerScope(agent_id=f"agent-{tag}", owner_id="ada")) == {
        f"ada on telegram {word}",
        f"ada on slack {word}",
    }
    assert await found(owner=md.OwnerScope(agent_id=f"agent-{tag}", owner_id="bob")) == {
        f"bob on telegram {word}"
    }
    assert await found(agent=md.AgentScope(agent_id=f"agent-{tag}")) == {
        f"ada on telegram {word}",
        f"ada on slack {word}",
        f"bob on telegram {word}",
    }
    assert await found(agent=md.AgentScope(agent_id=f"other-{tag}")) == {f"other agent {word}"}
    assert await found(agent=md.AgentScope(agent_id="nobody")) == set()


async def test_cleared_messages_stay_searchable(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    await append(memory, conversation, user("my locker code is in the blue notebook"))
    await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    hits = await search(memory, "notebook", conversation=conversation)
    assert [h.message.content for h in hits] == ["my locker code is in the blue notebook"]


@pytest.fixture(scope="module")
def sync_memory(server: ServerProcess) -> Iterator[md.SyncStubs]:
    """A blocking stub (Hypothesis drives synchronous tests)."""
    with grpc.insecure_channel(server.address) as opened:
        yield md.SyncStubs(opened)


@pytest.fixture(scope="module")
def sync_corpus(sync_memory: md.SyncStubs) -> md.Conversation:
    """A conversation with CORPUS, for the properties."""
    conversation = md.Conversation(channel="telegram", chat_id=f"prop-{uuid.uuid4().hex[:8]}")
    sync_memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=conversation, messages=[assistant(text) for text in CORPUS]
        )
    )
    return conversation


@pytest.mark.slow  # hundreds of calls through the server
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=80))
def test_any_text_is_a_valid_query(
    sync_memory: md.SyncStubs, sync_corpus: md.Conversation, query: str
) -> None:
    response = sync_memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query=query, conversation=sync_corpus, limit=5)
    )
    for hit in response.hits:
        assert hit.message.content in CORPUS
        assert hit.match in md.MatchKind.values()[1:]


@pytest.mark.slow  # hundreds of calls through the server
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(min_size=1, max_size=200).filter(lambda value: value.strip() != ""))
def test_any_text_round_trips_and_finds_itself(sync_memory: md.SyncStubs, text: str) -> None:
    conversation = md.Conversation(channel="prop", chat_id=uuid.uuid4().hex)
    request = md.AppendMessagesRequest(conversation=conversation, messages=[user(text)])
    if on_postgres() and "\x00" in text:  # PostgreSQL's text cannot hold U+0000
        with pytest.raises(grpc.RpcError) as refused:
            sync_memory.conversations.AppendMessages(request)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "U+0000" in (refused.value.details() or "")
        return
    sync_memory.conversations.AppendMessages(request)
    listed = sync_memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert [m.content for m in listed.messages] == [text]
    hits = sync_memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query=text[:1024], conversation=conversation)
    ).hits
    # Every word of a message occurs in it, so a message finds itself whenever the text holds
    # a word that means something; control characters are not searchable text (a query ignores
    # them).
    searchable = "".join(" " if unicodedata.category(char) == "Cc" else char for char in text)
    if 0 < len(searchable.split()) <= 32 and not plan_search(searchable).is_empty:
        assert [h.message.content for h in hits] == [text]
    elif len(searchable.split()) <= 32:
        assert hits == []


async def test_partial_words_ignore_case_beyond_ascii(
    memory: md.Stubs, corpus: md.Conversation
) -> None:
    for query in ("моск", "МОСК", "мОсК"):
        hits = await search(memory, query, conversation=corpus)
        assert [hit.message.content for hit in hits] == ["Я живу в Москве и люблю привет"], query
        assert hits[0].snippet == "Я живу в **Моск**ве и люблю привет"
