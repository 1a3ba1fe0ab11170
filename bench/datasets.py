"""The public conversation sets retrieval is measured on, read from where they were fetched.

Neither set is ever committed: LoCoMo is CC BY-NC 4.0, and BEAM's repository carries no licence.
Fetch them and pass their paths:

    git clone https://github.com/snap-research/LoCoMo          # data/locomo10.json
    git clone https://github.com/mohammadtavakoli78/BEAM       # chats/100K, chats/500K, ...

- **LoCoMo** (Maharana et al., ACL 2024): 10 long conversations between two people (5,882
  turns), 1,978 questions whose evidence is annotated turn by turn, and each session's
  observations (facts about the speakers, each with the turn it comes from). Tuning was allowed
  on conversations 1-5 only; 6-10 stay unseen.
- **BEAM** (Tavakoli et al., 2025, "Beyond a Million Tokens"): conversations between a user and
  an assistant (planning projects, coding, studying), each with probing questions of ten kinds;
  every kind but abstention names the messages it is about (`source_chat_ids`). Another domain,
  another speaker mix (one person and an assistant, long answers) and other question wording:
  a rule that gains on LoCoMo alone does not carry over. The 100K chats (20 conversations,
  5,732 messages) are read by default; `sizes` adds the 500K ones (35, 38,058).

Both become the same records: each conversation's turns in order, with who said them and when,
and the questions with the turns they are about.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import Callable
from pathlib import Path

SESSION = re.compile(r"session_(\d+)$")
# BEAM marks each user message with its place in the plan ("... ->-> 1,3"): not something a
# person types, so it is cut off.
BEAM_MARKER = re.compile(r"\s*->->[^\n]*$")
# A few generated answers run into hundreds of kilobytes of spaces (one is 348 KB): a run of
# spaces is one space.
BEAM_PADDING = re.compile(r"[ \t]{8,}")
BEAM_SIZES = ("100K",)


@dataclasses.dataclass(frozen=True, slots=True)
class Turn:
    """One turn: its id in the set, who said it, the text and when."""

    dia_id: str
    speaker: str
    text: str
    created_at: datetime.datetime
    # The first speaker of its conversation (LoCoMo), or the user (BEAM): stored as ROLE_USER.
    user: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    """One question with the turns its answer is in."""

    sample: str
    text: str
    evidence: frozenset[str]
    category: str


@dataclasses.dataclass(frozen=True, slots=True)
class Fact:
    """A fact about a speaker (LoCoMo's session observations), with the turn it comes from."""

    sample: str
    speaker: str
    text: str
    dia_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Dataset:
    """A set's conversations (turns in order), questions, facts, and how its conversations are
    grouped in reports."""

    name: str
    conversations: dict[str, list[Turn]]
    questions: list[Question]
    facts: list[Fact]
    group: Callable[[str], str]


LOCOMO_DEVELOPMENT = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


def locomo(path: Path) -> Dataset:
    """LoCoMo's locomo10.json."""
    records = json.loads(path.read_text(encoding="utf-8"))
    conversations: dict[str, list[Turn]] = {}
    questions: list[Question] = []
    facts: list[Fact] = []
    for record in records:
        sample = record["sample_id"]
        dialog = record["conversation"]
        sessions = sorted(
            (int(match.group(1)), name)
            for name in dialog
            if (match := SESSION.match(name)) and dialog[name]
        )
        turns: list[Turn] = []
        first = dialog[sessions[0][1]][0]["speaker"]
        for _, name in sessions:
            start = _locomo_date(dialog[f"{name}_date_time"])
            for offset, turn in enumerate(dialog[name]):
                turns.append(
                    Turn(
                        turn["dia_id"],
                        turn["speaker"],
                        turn["text"],
                        start + datetime.timedelta(seconds=10 * offset),
                        user=turn["speaker"] == first,
                    )
                )
        conversations[sample] = turns
        known = {turn.dia_id for turn in turns}
        for qa in record["qa"]:
            evidence = frozenset(
                part.strip()
                for item in qa.get("evidence", [])
                for part in re.split(r"[;,]", item)
                if part.strip() in known
            )
            if evidence:
                category = LOCOMO_CATEGORIES[qa["category"]]
                questions.append(Question(sample, qa["question"], evidence, category))
        for observations in record.get("observation", {}).values():
            for speaker, items in observations.items():
                for text, dia_id in (item for item in items if len(item) == 2):
                    if isinstance(dia_id, str) and dia_id.strip() in known:
                        facts.append(Fact(sample, speaker, text, dia_id.strip()))

    def group(sample: str) -> str:
        return "LoCoMo 1-5" if sample in LOCOMO_DEVELOPMENT else "LoCoMo 6-10"

    return Dataset("locomo", conversations, questions, facts, group)


def _locomo_date(text: str) -> datetime.datetime:
    """'1:56 pm on 8 May, 2023' as a UTC time."""
    parsed = datetime.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return parsed.replace(tzinfo=datetime.UTC)


def beam(root: Path, sizes: tuple[str, ...] = BEAM_SIZES) -> Dataset:
    """BEAM's chats/<size>/<n>/chat.json and probing_questions/probing_questions.json, under
    `root` (the repository, or its chats folder). A chat whose files are missing is passed over
    (the repository stores some of the larger ones outside git)."""
    chats = root / "chats" if (root / "chats").is_dir() else root
    conversations: dict[str, list[Turn]] = {}
    questions: list[Question] = []
    for size in sizes:
        folders = sorted(
            (path for path in (chats / size).iterdir() if path.name.isdigit()),
            key=lambda path: int(path.name),
        )
        for folder in folders:
            try:
                batches = json.loads((folder / "chat.json").read_text(encoding="utf-8"))
                probes = json.loads(
                    (folder / "probing_questions" / "probing_questions.json").read_text(
                        encoding="utf-8"
                    )
                )
            except (OSError, ValueError):
                continue
            sample = f"beam-{size}-{folder.name}"
            turns = _beam_turns(batches)
            conversations[sample] = turns
            known = {turn.dia_id for turn in turns}
            for category, items in probes.items():
                for item in items:
                    evidence = frozenset(
                        str(found)
                        for found in _ids(item.get("source_chat_ids"))
                        if str(found) in known
                    )
                    if evidence:
                        questions.append(Question(sample, item["question"], evidence, category))

    def group(sample: str) -> str:
        return f"BEAM {sample.split('-')[1]}"

    return Dataset("beam", conversations, questions, [], group)


def _beam_turns(batches: list[dict[str, object]]) -> list[Turn]:
    """A chat's messages in order; each batch happens on its time anchor (the batch's own, or
    its first message's), ten seconds a message."""
    turns: list[Turn] = []
    day = datetime.datetime(2024, 1, 1, 9, tzinfo=datetime.UTC)
    for batch in batches:
        messages = [message for pair in batch["turns"] for message in pair]  # type: ignore[attr-defined]
        anchor = batch.get("time_anchor") or next(
            (message.get("time_anchor") for message in messages if message.get("time_anchor")),
            None,
        )
        if anchor:
            day = datetime.datetime.strptime(str(anchor), "%B-%d-%Y").replace(
                hour=9, tzinfo=datetime.UTC
            )
        for offset, message in enumerate(messages):
            user = message["role"] == "user"
            turns.append(
                Turn(
                    str(message["id"]),
                    "user" if user else "assistant",
                    BEAM_PADDING.sub(" ", BEAM_MARKER.sub("", str(message["content"]))).strip(),
                    day + datetime.timedelta(seconds=10 * offset),
                    user=user,
                )
            )
        day += datetime.timedelta(hours=1)
    return turns


def _ids(found: object) -> list[object]:
    """The message ids of a question's source_chat_ids (a list, or lists by statement)."""
    if isinstance(found, dict):
        return [item for value in found.values() for item in _ids(value)]
    if isinstance(found, list):
        return [item for value in found for item in _ids(value)]
    return [] if found is None else [found]
