"""The pure domain rules as specifications, without a server: query quoting, page tokens, the
reviewer's answer parsing and admission, and prompt-file rendering. Hypothesis tries what a
careless or hostile client (or model) could send."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import string
from typing import Any

import apsw
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memoryd.domain import compaction, review_fit
from memoryd.domain import review_admission as admission
from memoryd.domain import review_answer as answers
from memoryd.domain import review_prompt as prompts
from memoryd.domain.conversation import check_identifier
from memoryd.domain.digits import is_number
from memoryd.domain.memories import (
    MAX_VALUE_CHARS,
    Category,
    MemoryRecord,
    Provenance,
    ScopeType,
    fact_key,
    prompt_target,
)
from memoryd.domain.messages import Role, Trust
from memoryd.domain.paging import PageCursor, PageTokens, TokenKind
from memoryd.domain.prompt_files import MEMORY_MD, USER_MD, render
from memoryd.domain.review_runs import AnswerKind
from memoryd.domain.search_query import MAX_QUERY_WORDS, is_real_term, plan_search
from memoryd.domain.timestamps import to_text
from memoryd.domain.tokens import count_tokens
from memoryd.errors import InvalidArgument
from memoryd.storage.connection import SqliteConnection

# Text as people and attackers type it: FTS5 syntax, quotes, wildcards, other scripts, emoji.
HOSTILE = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("\"*:^()-+{}[]%_\\'NEAR AND OR NOT ")),
        st.characters(codec="utf-8", exclude_categories=["Cs"]),
    ),
    max_size=80,
)
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def fts() -> apsw.Connection:
    """An FTS5 table tokenized like messages_fts."""
    connection = SqliteConnection(":memory:")
    connection.execute(
        "CREATE VIRTUAL TABLE t USING fts5(content, "
        "tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    return connection


# --- query quoting -------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(query=HOSTILE)
def test_any_query_is_ordinary_text_that_finds_itself(fts: apsw.Connection, query: str) -> None:
    if len(query.split()) > MAX_QUERY_WORDS:  # only over-long queries are refused
        with pytest.raises(InvalidArgument, match=f"the limit is {MAX_QUERY_WORDS}"):
            plan_search(query)
        return
    plan = plan_search(query)
    if plan.word_expression is None:
        return
    fts.execute("DELETE FROM t")
    fts.execute("INSERT INTO t (rowid, content) VALUES (1, ?)", (query,))
    found = fts.execute(
        "SELECT rowid FROM t WHERE t MATCH ?", (f"content : ({plan.word_expression})",)
    ).fetchall()
    assert found == [(1,)]


def test_fts_syntax_in_a_query_is_quoted_as_words() -> None:
    plan = plan_search('Rust++ AND "quoted" text:foo NEAR(ab cd) *')
    # "AND" is an English function word, "*" punctuation: neither is searched.
    assert plan.word_expression == '"Rust++" """quoted""" "text:foo" "NEAR(ab" "cd)"'
    assert plan.any_word_expression == (
        '"Rust++" OR """quoted""" OR "text:foo" OR "NEAR(ab" OR "cd)"'
    )
    assert plan.words[-1] == "*"
    assert "*" not in plan.terms


def test_like_wildcards_in_a_term_are_checked_exactly() -> None:
    plan = plan_search("100% ab_c plain")
    assert plan.trigram_pieces == ("100", "plain")
    assert plan.exact_words == ("ab_c",)


@pytest.mark.parametrize(
    "query",
    [
        "AND OR NOT",
        "the when",
        "what is it?",
        "I'm",
        "don't",
        "What's",
        "?!",
        "%",
        "  ",
        "of the a",
    ],
)
def test_words_that_carry_no_meaning_are_no_query(query: str) -> None:
    plan = plan_search(query)
    assert plan.is_empty
    assert plan.word_expression is None
    assert plan.substring_terms == ()


@pytest.mark.parametrize(
    ("query", "terms", "substring_terms"),
    [
        ("What is the capital of Mongolia?", ("capital", "Mongolia?"), ("capital", "Mongolia")),
        ("Caroline's painting", ("Caroline", "painting"), ("Caroline", "painting")),
        ("caroline\u2019s", ("caroline",), ("caroline",)),
        # Whole words of two letters are terms (a letter alone is not); pieces of words need
        # three.
        ("go to C++ AI 7", ("go", "AI", "7"), ()),
        ("0% 100%", ("0%", "100%"), ("100",)),
        # Two characters of a script written without spaces are a real term; emoji are too.
        ("\u6771\u4eac \U0001f389", ("\u6771\u4eac", "\U0001f389"), ("\u6771\u4eac", "\U0001f389")),
        ("\u732b", ("\u732b",), ()),
    ],
)
def test_the_terms_of_a_query(
    query: str, terms: tuple[str, ...], substring_terms: tuple[str, ...]
) -> None:
    plan = plan_search(query)
    assert plan.terms == terms
    assert plan.substring_terms == substring_terms


@pytest.mark.parametrize(
    ("word", "real"),
    [
        ("is", False),
        ("of", False),
        ("a", False),
        ("ab", False),
        ("abc", True),
        ("The", False),
        ("Are", False),
        ("0%", False),
        ("e_case", True),
        ("\u6771\u4eac", True),
        ("\u732b", False),
        ("\U0001f389", True),
        ("**", False),
        ("Caf\u00e9", True),
    ],
)
def test_only_a_real_term_is_looked_for_inside_other_words(word: str, *, real: bool) -> None:
    assert is_real_term(word) is real


# --- page tokens ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(before=st.integers(1, 2**62), floor=st.integers(0, 2**62), bound=st.text(max_size=40))
def test_a_page_token_reads_back_as_issued(before: int, floor: int, bound: str) -> None:
    tokens = PageTokens(b"k" * 32)
    cursor = PageCursor(before_id=before, floor_id=floor)
    assert tokens.messages_cursor(tokens.messages_token(cursor, bound), bound) == cursor


@settings(max_examples=300, deadline=None)
@given(position=st.integers(0, 200), char=st.sampled_from(string.ascii_letters + "._-=+/"))
def test_an_altered_page_token_is_refused(position: int, char: str) -> None:
    tokens = PageTokens(b"k" * 32)
    token = tokens.messages_token(PageCursor(before_id=42, floor_id=7), "conversation")
    index = position % len(token)
    forged = token[:index] + char + token[index + 1 :]
    if forged == token:
        return
    with pytest.raises(InvalidArgument, match="page_token"):
        tokens.messages_cursor(forged, "conversation")


@settings(max_examples=300, deadline=None)
@given(token=st.text(max_size=1100))
def test_any_text_as_a_page_token_is_invalid_argument(token: str) -> None:
    with pytest.raises(InvalidArgument):
        PageTokens(b"k" * 32).messages_cursor(token, "conversation")


def test_a_page_token_is_bound_to_its_key_listing_and_request() -> None:
    tokens = PageTokens(b"k" * 32)
    token = tokens.messages_token(PageCursor(before_id=9, floor_id=0), "mine")
    with pytest.raises(InvalidArgument, match="not issued by this server"):
        PageTokens(b"o" * 32).messages_cursor(token, "mine")
    with pytest.raises(InvalidArgument, match="not issued by this server"):
        tokens.position(TokenKind.SOURCES, token, "mine")
    with pytest.raises(InvalidArgument, match="different conversation"):
        tokens.messages_cursor(token, "yours")


# --- the reviewer's answer -----------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(HOSTILE, st.text(max_size=200)))
def test_any_answer_parses_or_fails_as_review_output(text: str) -> None:
    try:
        answer = answers.parse_answer(text, [])
    except answers.ReviewOutputError:
        return
    assert answer.kind in set(AnswerKind)
    assert answer.kind is AnswerKind.OPERATIONS or not answer.operations


def test_an_answer_is_json_a_fence_or_json_inside_prose() -> None:
    operation = {"action": "add", "target": "user", "category": "goal", "value": "Run"}
    document = json.dumps({"operations": [operation]})
    for text in (document, f"```json\n{document}\n```", f"Here you go: {document} Thanks."):
        answer = answers.parse_answer(text, [])
        assert answer.kind is AnswerKind.OPERATIONS
        assert [op.fields for op in answer.operations] == [operation]
    assert answers.parse_answer(prompts.NOTHING_TO_SAVE, []).kind is AnswerKind.NOTHING
    assert answers.parse_answer("Nothing new {really}.", []).kind is AnswerKind.PROSE
    with pytest.raises(answers.ReviewOutputError):
        answers.parse_answer('{"operations": [', [])  # cut off: retried, never "nothing"


def _record(
    memory_id: int,
    *,
    trust: Trust = Trust.OPERATOR,
    category: Category = Category.GOAL,
    scope_type: ScopeType = ScopeType.OWNER,
    value: str = "Run a marathon",
) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        agent_id="main",
        owner_id="default",
        scope_type=scope_type,
        scope_id="default" if scope_type is ScopeType.OWNER else "main",
        category=category,
        key=f"k{memory_id}",
        value=value,
        confidence=1.0,
        prompt_target=prompt_target(category, scope_type),
        metadata_json="{}",
        trust=trust,
        provenance=Provenance(),
        created_at=NOW,
        updated_at=NOW,
        archived_at=None,
        archived_by=None,
        archive_reason=None,
    )


FIELDS = st.dictionaries(
    st.sampled_from(["action", "target", "category", "value", "id", "reason", "text"]),
    st.one_of(st.none(), st.integers(), st.text(max_size=300), st.booleans(), st.lists(st.none())),
)


@settings(max_examples=500, deadline=None)
@given(
    action=st.sampled_from(["add", "replace", "archive", "working_memory", "describe", "drop"]),
    fields=FIELDS,
    guest=st.booleans(),
)
@example(action="replace", fields={"id": "¹"}, guest=False)  # a digit to isdigit(), not int()
def test_admission_never_raises_and_changes_only_shown_rows(
    action: str, fields: dict[str, Any], guest: bool
) -> None:
    shown = {1: _record(1), 2: None, 3: _record(3, trust=Trust.GUEST)}
    admitted = admission.admit(answers.Operation(action, fields), shown, 0, guest=guest)
    if isinstance(admitted, admission.Skipped):
        assert admitted.reason
        return
    if isinstance(admitted, admission.Replace | admission.Archive):
        assert admitted.id in (1, 3)  # listed and still active
        assert not guest or admitted.id == 3  # a guest changes only a guest's row
    if isinstance(admitted, admission.Add):
        assert 1 <= len(admitted.value) <= MAX_VALUE_CHARS
        assert not (guest and admitted.category is Category.DIRECTIVE)


@settings(max_examples=500, deadline=None)
@given(value=st.text(min_size=1, max_size=MAX_VALUE_CHARS).filter(str.strip))
def test_a_fact_key_is_a_valid_key_the_same_for_the_same_value(value: str) -> None:
    key = fact_key(value)
    assert check_identifier(key, "key") == key
    assert key == fact_key(value)
    assert len(key) <= 40 + 1 + 4
    assert key == key.casefold()


def test_a_fact_key_reads_as_the_fact() -> None:
    assert fact_key("Lives in Lisbon") == "lives-in-lisbon-7ad6"
    assert fact_key("Takes coffee black!").startswith("takes-coffee-black-")
    assert fact_key("🙂").startswith("fact-")
    long = fact_key("Prefers dark mode in every editor, terminal and browser at work")
    assert long.startswith("prefers-dark-mode-in-every-editor-")
    assert fact_key("Lives in Lisbon") != fact_key("Lives in Lisbon.")


def test_admission_says_why_an_operation_is_skipped() -> None:
    shown = {1: _record(1)}

    def reason(action: str, guest: bool = False, **fields: Any) -> str:
        admitted = admission.admit(answers.Operation(action, dict(fields)), shown, 0, guest=guest)
        assert isinstance(admitted, admission.Skipped)
        return admitted.reason

    assert reason("replace", id=9, value="x") == (
        "replace: row 9 was not in the memory shown to the review"
    )
    assert reason("archive", guest=True, id=1) == (
        "archive: row 1 was written by an operator; a guest may not change it"
    )
    assert reason("add", guest=True, target="memory", category="directive", value="Be brief") == (
        "add: a guest may not write a directive"
    )
    assert reason("explode") == "unknown action 'explode'"


# --- prompt files ----------------------------------------------------------------------------

VALUES = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=250
)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(VALUES, max_size=40), categories=st.lists(st.sampled_from(Category)))
def test_a_rendered_prompt_file_fits_its_budget_and_no_value_starts_a_section(
    values: list[str], categories: list[Category]
) -> None:
    records = [
        _record(
            index + 1,
            value=value,
            category=categories[index % len(categories)] if categories else Category.GOAL,
            scope_type=ScopeType.OWNER if index % 2 else ScopeType.AGENT,
        )
        for index, value in enumerate(values)
    ]
    for file in (USER_MD, MEMORY_MD):
        rendered = render(file, records, count_tokens)
        assert rendered.tokens <= file.max_tokens
        assert rendered.tokens == count_tokens(rendered.text)
        titles = [section.title for section in file.sections]
        headings = [line[3:] for line in rendered.text.splitlines() if line.startswith("## ")]
        assert headings == [title for title in titles if title in headings]  # declared order
        for line in rendered.text.splitlines():
            assert line == "" or line.startswith(("- ", "## "))


# --- compaction ------------------------------------------------------------------------------


def _message(message_id: int, tokens: int, role: Role = Role.USER) -> compaction.WindowMessage:
    return compaction.WindowMessage(
        id=message_id,
        role=role,
        kind="chat_message",
        sender="ada",
        content=f"m{message_id}",
        metadata_json="{}",
        tokens=tokens,
        created_at=to_text(NOW),
        answer_bytes=64,
    )


def test_the_budget_keeps_the_newest_half_and_summarises_the_rest() -> None:
    assert (compaction.budget(2001), compaction.summary_budget(1000)) == (1000, 250)
    assert compaction.summary_budget(100) == 64
    assert (compaction.limit(0.85, 1000), compaction.trigger(0.85, 100)) == (850, 85)
    window = [_message(i, 100) for i in range(1, 7)]
    selected = compaction.select([], window, 400)  # kept total within 200
    assert [m.id for m in selected.summarized] == [1, 2, 3, 4]
    assert [m.id for m in selected.kept] == [5, 6]
    huge = compaction.select([], [_message(1, 10), _message(2, 5000)], 400)
    assert [m.id for m in huge.kept] == [2]  # the newest message is always kept


def test_a_tool_result_stays_with_its_call() -> None:
    window = [
        _message(1, 100),
        _message(2, 100, Role.ASSISTANT),  # the call
        _message(3, 100, Role.TOOL),
        _message(4, 100, Role.TOOL),
        _message(5, 50, Role.ASSISTANT),
    ]
    selected = compaction.select([], window, 500)  # 250 keeps 5, 4, and 3 would pass it
    assert [m.id for m in selected.kept] == [2, 3, 4, 5]
    composed = compaction.compose([], [], window, limit_tokens=200)
    # The newest fit (5, 4) but a window may not start at a tool result: 4 is left out too.
    assert [message.id for message in composed.messages] == [5]
    assert (composed.omitted_messages, composed.omitted_tokens) == (4, 400)


@settings(max_examples=200, deadline=None)
@given(
    tokens=st.lists(st.integers(1, 300), min_size=1, max_size=30),
    roles=st.lists(st.sampled_from([Role.USER, Role.ASSISTANT, Role.TOOL]), min_size=30),
    total_budget=st.integers(2, 2000),
)
def test_selection_splits_the_window_without_losing_a_message(
    tokens: list[int], roles: list[Role], total_budget: int
) -> None:
    window = [_message(i + 1, n, roles[i]) for i, n in enumerate(tokens)]
    selected = compaction.select([], window, total_budget)
    assert [*selected.summarized, *selected.kept] == window
    assert selected.kept
    assert selected.kept[0].role is not Role.TOOL or not selected.summarized


def test_the_backoff_holds_until_its_deadline() -> None:
    failed = NOW + dt.timedelta(seconds=60)

    def reason(now: dt.datetime, peak: int | None = 900, omitted: int = 0) -> str | None:
        return compaction.skip_reason(
            enabled=True,
            peak_prompt_tokens=peak,
            trigger_tokens=850,
            omitted_messages=omitted,
            backoff_until=failed,
            now=now,
        )

    assert (
        reason(NOW) == f"a compaction failed; automatic compaction waits until {failed.isoformat()}"
    )
    assert reason(failed - dt.timedelta(microseconds=1)) is not None
    assert reason(failed) is None
    assert reason(failed, peak=849) == (
        "the last peak of 849 prompt tokens is under the trigger of 850, and the composed "
        "context leaves no message out"
    )
    assert reason(failed, peak=None) == (
        "no prompt tokens recorded yet: CommitTurn reports the first measurement"
    )
    # Messages left out of the composed context trigger it too, under the peak or before one.
    assert reason(failed, peak=849, omitted=3) is None
    assert reason(failed, peak=None, omitted=1) is None
    assert reason(NOW, peak=849, omitted=3) is not None  # the backoff still holds


SENTENCES = st.lists(
    st.text(string.ascii_letters + " ,", min_size=1, max_size=120).map(
        lambda text: text.strip() + "."
    ),
    min_size=1,
    max_size=8,
)


@given(SENTENCES)
def test_a_split_fact_keeps_every_sentence_in_order_and_each_piece_fits(
    sentences: list[str],
) -> None:
    value = " ".join(sentences)
    pieces = review_fit.split_value(value)
    assert pieces is not None
    assert all(0 < len(piece) <= MAX_VALUE_CHARS for piece in pieces)
    assert " ".join(pieces).split() == value.split()
    # As few pieces as whole sentences allow: no two neighbours would fit together.
    assert all(len(a) + 1 + len(b) > MAX_VALUE_CHARS for a, b in itertools.pairwise(pieces))


def test_a_sentence_over_the_limit_is_not_cut() -> None:
    assert review_fit.split_value("Short one. " + "x" * (MAX_VALUE_CHARS + 1)) is None


@pytest.mark.parametrize(
    ("answer", "count", "read"),
    [
        ('{"values": ["a", "b"]}', 2, ["a", "b"]),
        ('```json\n{"values": ["a"]}\n```', 1, ["a"]),
        ('{"values": ["a"]}', 2, None),
        ('{"values": [1, 2]}', 2, None),
        ("Sure! Here they are", 1, None),
        ("[]", 1, None),
    ],
)
def test_the_shortening_answer_is_read_strictly(
    answer: str, count: int, read: list[str] | None
) -> None:
    assert review_fit.read_shortened(answer, count) == read


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("12", True),
        ("0", True),
        ("¹", False),
        ("②", False),
        ("٣", False),
        ("", False),
        ("1 ", False),
    ],
)
def test_a_number_is_ascii_digits(text: str, number: bool) -> None:
    assert is_number(text) is number
