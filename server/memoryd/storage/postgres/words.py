"""Word search on PostgreSQL: the FTS5 expressions storage builds, as tsquery, and FTS5's
ranking and snippets in PostgreSQL's terms.

memoryd.domain.search_query turns user text into quoted FTS5 phrases joined by spaces (every
phrase) or by OR (any phrase). Here each phrase goes to `phraseto_tsquery` as a parameter: it
builds lexemes from the text, so no character of it is ever tsquery syntax. The phrases are
joined with `&&` or `||`.

The text search configuration `memoryd_english` (the schema's) stems English with Snowball, as
FTS5's porter tokenizer does, and keeps stop words, as FTS5 does: the domain decides which
words count, not the index.

bm25's place is taken by ts_rank with the content weighted 1 and the sender SENDER_WEIGHT,
normalised by the document's length (1 + log of its words). Scores are negated so that lower is
better, as bm25's are: callers sort and scale them the same way on both backends.
"""

from __future__ import annotations

import re

from memoryd.domain.snippets import ELLIPSIS, MARK, WORD_SNIPPET_TOKENS

CONFIG = "memoryd_english"
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')
_WORD = re.compile(r"\w")
# Two marked parts of one word, joined by punctuation: "**e**-**mail**".
_JOINED_PARTS = re.compile(rf"(?<=\w){re.escape(MARK)}([^\w\s]+){re.escape(MARK)}(?=\w)")
# ts_rank's weights of {D, C, B, A}: A is a message's content (or a memory's text), B its sender.
SENDER_WEIGHT = 1.0
_WEIGHTS = f"'{{0, 0, {SENDER_WEIGHT}, 1.0}}'"
# ts_headline's options: FTS5 snippet()'s markers, about as many words, one fragment.
_HEADLINE = (
    f'StartSel="{MARK}", StopSel="{MARK}", MaxWords={WORD_SNIPPET_TOKENS}, '
    f"MinWords={WORD_SNIPPET_TOKENS // 2}, ShortWord=0, MaxFragments=1, "
    f'FragmentDelimiter="{ELLIPSIS}"'
)


# What a statement joins with its tsquery (`query_table`), and how it names it.
QUERY = "wq.q"


def query_table(expression: str) -> tuple[str, list[str]]:
    """A one-row table holding the tsquery of an FTS5 expression of quoted phrases, for a
    statement's FROM list (`FROM messages AS m, {table}`; the query is QUERY), and its
    parameters: the query is built once, whatever the statement does with it."""
    phrases = [found.group(1).replace('""', '"') for found in _PHRASE.finditer(expression)]
    if not phrases:
        return "(SELECT CAST('' AS tsquery) AS q) AS wq", []
    joiner = " || " if " OR " in _PHRASE.sub("", expression) else " && "
    sql = joiner.join(f"phraseto_tsquery('{CONFIG}', ?)" for _ in phrases)
    return f"(SELECT {sql} AS q) AS wq", phrases


def score(column: str) -> str:
    """The SQL of a match's score against QUERY (lower is better, as bm25's)."""
    return f"-ts_rank({_WEIGHTS}, {column}, {QUERY}, 1)"


def headline(column: str) -> str:
    """The SQL of a snippet of `column` around what QUERY matched, between MARKs."""
    return f"ts_headline('{CONFIG}', {column}, {QUERY}, '{_HEADLINE}')"


def with_ellipses(snippet: str, content: str) -> str:
    """FTS5 snippet()'s form: one mark around a word the query spells with punctuation
    ("**e-mail**", where ts_headline marks each part), and ellipses where words of the content
    come before or after the excerpt. What ts_headline leaves out around it that holds no word
    (a sentence's last full stop) is put back, as FTS5 keeps it."""
    snippet = _JOINED_PARTS.sub(r"\1", snippet)
    excerpt = snippet.replace(MARK, "")
    start = content.find(excerpt)
    if start < 0:  # not found as it stands: say only that the content goes on
        return ELLIPSIS + snippet + ELLIPSIS
    before, after = content[:start], content[start + len(excerpt) :]
    head = ELLIPSIS if _WORD.search(before) else before
    tail = ELLIPSIS if _WORD.search(after) else after
    return head + snippet + tail
