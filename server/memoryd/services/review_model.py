"""The review's model answer: read (refused when it was cut), its values fitted to the limit
(split, or shortened by one more call), the text kept of it, and the longest prefix of a line
within a budget (memoryd.services.review runs the review)."""

from __future__ import annotations

import json

from memoryd.domain import review_answer as answers
from memoryd.domain import review_fit
from memoryd.domain import review_prompt as prompts
from memoryd.domain.model_calls import Attempt
from memoryd.domain.tokens import load
from memoryd.llm.chain import Completion, ProviderChain
from memoryd.observability import metrics


def read_answer(completion: Completion, max_tokens: int) -> answers.Answer:
    """The answer's operations; ReviewOutputError when it is broken, or was cut at max_tokens
    (a cut list of tool calls may parse, and still miss what came after)."""
    if completion.cut:
        raise answers.ReviewOutputError(
            f"the answer was cut at {max_tokens} tokens (memoryd.memory.review_max_output_tokens): "
            "the messages stay for the next review"
        )
    return answers.parse_answer(
        completion.text, [(call.name, call.arguments) for call in completion.tool_calls]
    )


def cut(line: str, budget: int) -> str:
    """The longest prefix of `line` within `budget` tokens, ending on a whole character."""
    tokens = load().encode_ordinary(line)[:budget]
    text = load().decode(tokens, errors="ignore")
    return text.rstrip("\ufffd")


def answered(completion: Completion) -> str:
    """A model's answer as it came: its text, then its tool calls (name and arguments)."""
    calls = [
        json.dumps({"tool": call.name, "arguments": call.arguments}, ensure_ascii=False)
        for call in completion.tool_calls
    ]
    return "\n".join([completion.text, *calls]) if calls else completion.text


async def fitted(
    chain: ProviderChain,
    answer: answers.Answer,
    session: str,
    attempts: list[Attempt],
    max_tokens: int,
) -> answers.Answer:
    """The answer with its values over the limit split into sentences, or shortened by one
    more call to the model (memoryd.domain.review_fit); what neither fits is left for
    admission to refuse, and the run records it. A model that does not answer fails the
    review, so that its messages are read again."""
    fitted = review_fit.fit(answer)
    answer, shortened = fitted.answer, 0
    if fitted.long:
        values = [answer.operations[at].fields["value"].strip() for at in fitted.long]
        completion = await chain.complete(
            review_fit.shorten_prompt(values),
            agent=prompts.REVIEWER_AGENT,
            session_id=session,
            max_tokens=max_tokens,
            on_attempt=attempts.append,
        )
        found = None if completion.cut else review_fit.read_shortened(completion.text, len(values))
        if found is not None:
            answer = review_fit.with_shortened(answer, fitted.long, found)
            shortened = len(fitted.long) - sum(map(review_fit.is_long, answer.operations))
    for outcome, count in (
        ("split", fitted.split),
        ("shortened", shortened),
        ("refused", len(fitted.long) - shortened),
    ):
        if count:
            metrics.REVIEW_VALUES_OVER_LIMIT.labels(outcome).inc(count)
    return answer
