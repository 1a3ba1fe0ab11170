"""Facts a review wrote over the value limit (memories.MAX_VALUE_CHARS): never silently lost.

split    an add whose value is over the limit becomes one add a piece when it holds
         sentences that each fit: pieces of whole sentences, each as long as fits
shorten  the values still over it (adds and replaces) go to the model once, all in one call
         (`shorten_prompt`, `read_shortened`); a shortened value replaces the long one
refuse   what still does not fit, admission refuses, saying how long it is; the review run
         keeps the refusal, with the value and the message it came from (ListReviewRuns)
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from memoryd.domain.memories import MAX_VALUE_CHARS
from memoryd.domain.review_answer import Answer, Operation, ReviewAction

# A sentence ends at ., ! or ? (or a ; between clauses) followed by space.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")

SHORTEN_SYSTEM_PROMPT = f"""\
You shorten facts for a long-term memory. Each fact below is over {MAX_VALUE_CHARS} characters.
Rewrite each as one short declarative fact of at most {MAX_VALUE_CHARS} characters that keeps
what matters: names, numbers, places, what the user wants. Keep the order. Answer with JSON only:
{{"values": ["first fact, shortened", "second fact, shortened"]}}"""


@dataclasses.dataclass(frozen=True, slots=True)
class Fitted:
    """An answer whose long adds were split; `long` holds the positions of the operations
    whose values are still over the limit, and `split` how many adds were split."""

    answer: Answer
    long: tuple[int, ...]
    split: int


def is_long(operation: Operation) -> bool:
    """Whether an add or replace carries a value over the limit."""
    value = operation.fields.get("value")
    return (
        operation.action in (ReviewAction.ADD, ReviewAction.REPLACE)
        and isinstance(value, str)
        and len(value.strip()) > MAX_VALUE_CHARS
    )


def split_value(value: str) -> list[str] | None:
    """The value as pieces of whole sentences, each at most the limit and as long as fits; None
    when a sentence alone is over it (cutting a sentence would change what it says)."""
    sentences = [part for part in _SENTENCE_END.split(value.strip()) if part]
    if any(len(sentence) > MAX_VALUE_CHARS for sentence in sentences):
        return None
    pieces: list[str] = []
    for sentence in sentences:
        if pieces and len(pieces[-1]) + 1 + len(sentence) <= MAX_VALUE_CHARS:
            pieces[-1] = f"{pieces[-1]} {sentence}"
        else:
            pieces.append(sentence)
    return pieces


def fit(answer: Answer) -> Fitted:
    """The answer with each long add split where its sentences allow (see the module)."""
    operations: list[Operation] = []
    long: list[int] = []
    split = 0
    for operation in answer.operations:
        if not is_long(operation):
            operations.append(operation)
            continue
        pieces = split_value(operation.fields["value"]) if operation.action == "add" else None
        if pieces is None:
            long.append(len(operations))
            operations.append(operation)
            continue
        split += 1
        operations.extend(
            Operation(operation.action, {**operation.fields, "value": piece}) for piece in pieces
        )
    return Fitted(Answer(operations, answer.kind), tuple(long), split)


def shorten_prompt(values: Sequence[str]) -> list[dict[str, Any]]:
    """The chat messages of the one call that shortens `values`."""
    listed = "\n".join(json.dumps(value, ensure_ascii=False) for value in values)
    return [
        {"role": "system", "content": SHORTEN_SYSTEM_PROMPT},
        {"role": "user", "content": f"Facts ({len(values)}):\n{listed}"},
    ]


def read_shortened(text: str, count: int) -> list[str] | None:
    """The shortened values of the model's answer, in order; None when the answer is not JSON
    with a "values" list of `count` strings (a fenced block is read too)."""
    stripped = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", stripped, re.DOTALL)
    try:
        document = json.loads(fenced.group(1) if fenced else stripped)
    except ValueError:
        return None
    values = document.get("values") if isinstance(document, dict) else None
    if not isinstance(values, list) or len(values) != count:
        return None
    if not all(isinstance(value, str) for value in values):
        return None
    return values


def with_shortened(answer: Answer, long: Sequence[int], values: Sequence[str]) -> Answer:
    """The answer with the operations at `long` given the shortened `values` (a shortening
    still over the limit is left for admission to refuse, with the original value)."""
    operations = list(answer.operations)
    for position, value in zip(long, values, strict=True):
        if 0 < len(value.strip()) <= MAX_VALUE_CHARS:
            operation = operations[position]
            operations[position] = Operation(operation.action, {**operation.fields, "value": value})
    return Answer(operations, answer.kind)
