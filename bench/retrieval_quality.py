"""Retrieval quality on LoCoMo and BEAM: recall@k of annotated evidence, through the real server.

    python bench/retrieval_quality.py --locomo PATH/TO/locomo10.json [--beam PATH/TO/BEAM]
        [--beam-sizes 100K,500K] [--modes lexical,semantic,hybrid] [--backend postgres]
        [--scopes conversation,agent] [--home DIR] [--floors 0.3,0.4,...]

The sets are never committed (bench/datasets.py says where to fetch them). Each set is loaded
under an agent of its own, one memoryd conversation per conversation of the set, through
AppendMessages (sender = speaker, created_at = when the turn was said, client_message_id = the
turn's id); LoCoMo's session observations are stored as facts of the conversation's owner
(StoreMemory). The server embeds everything in the background; the script waits until nothing
is left to embed. Then every question is sent, as typed, to SearchHistory scoped to its
conversation, once per mode. The metric is LoCoMo's paper's: the mean over questions of the
fraction of a question's evidence turns found in the top k. Reported for LoCoMo 1-5 (the only
conversations rules were ever tuned on), LoCoMo 6-10 and BEAM, side by side: a ranking rule is
kept only if it gains on LoCoMo and on BEAM.

Beside it:
- **facts**: LoCoMo's questions asked of Recall (the owner's facts, default mode); a fact is a
  true hit when the turn it was taken from is evidence of the question.
- **off-topic**: the questions of bench/off_topic.txt (about things no conversation talks of),
  each asked of every conversation that holds none of its topic words, of SearchHistory
  (hybrid, semantic) and Recall (facts, default and semantic mode). An answer with a hit is a
  wrong answer; the table counts the empty ones, for the calibrating half (odd lines) and the
  checking half (even lines).
- **plain FTS5** over the same turns (porter stemming, the question's words OR-ed, bm25), and
  the LoCoMo paper's DRAGON row (Table 3).

`--floors 0.3,0.4,...` calibrates the relevance floor ([memoryd.search] min_relevance): the
server runs without one, every hit comes back with its relevance, and each floor is applied to
the answers: recall@k on each group, the share of true hits in the top 10 it loses, and the
off-topic answers it leaves empty. `--scopes conversation,agent` asks each question of its
conversation (the default) and of its set's whole agent. `--home DIR` (SQLite) keeps the loaded
and embedded data directory: a later run with the same DIR asks at once, so that a change of
ranking is measured in a minute, not after a new load.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import backends
import datasets
import grpc
from datasets import Dataset, Question
from real_chat import asked

import memoryd_client as md
from memoryd.domain.time_expressions import asked_span
from memoryd.storage.connection import SqliteConnection
from memoryd.testing.server_process import ServerProcess

KS = (1, 5, 10, 25, 50)
DRAGON = {"5": 56.7, "10": 66.2, "25": 76.7, "50": 82.7}
MODES = {
    "lexical": md.SEARCH_MODE_LEXICAL,
    "semantic": md.SEARCH_MODE_SEMANTIC,
    "hybrid": md.SEARCH_MODE_HYBRID,
}
BATCH = 100
OFF_TOPIC_FILE = Path(__file__).with_name("off_topic.txt")
_WORDS = re.compile(r"[^\W_]+")


@dataclasses.dataclass(frozen=True, slots=True)
class OffTopic:
    """A question about nothing held, the words naming its topic, and its half."""

    text: str
    topic: frozenset[str]
    calibrating: bool


def off_topic_questions(path: Path = OFF_TOPIC_FILE) -> list[OffTopic]:
    """bench/off_topic.txt: odd lines calibrate, even lines check."""
    lines = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    found = []
    for place, line in enumerate(lines):
        text, _, topic = line.partition("|")
        found.append(OffTopic(text.strip(), frozenset(topic.split()), calibrating=place % 2 == 0))
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class Hit:
    """One hit as the calibration reads it: the turn (or fact's turn) and its relevance; and
    every figure it came with, for --dump."""

    dia_id: str
    relevance: float
    figures: dict[str, object] = dataclasses.field(default_factory=dict, compare=False)


def figures_of(
    scores: md.HitScores, matches: Iterable[md.MatchKind.ValueType]
) -> dict[str, object]:
    """A hit's figures as --dump writes them."""
    return {
        "bm25": round(scores.bm25, 4),
        "similarity": round(scores.similarity, 4),
        "coverage": round(scores.coverage, 4),
        "fused": round(scores.fused, 4),
        "lexical_rank": scores.lexical_rank,
        "semantic_rank": scores.semantic_rank,
        "matches": [md.MatchKind.Name(kind) for kind in matches],
    }


@dataclasses.dataclass
class Loaded:
    """The sets in the server: their questions, and the turn each fact came from."""

    sets: list[Dataset]
    fact_turns: dict[int, str] = dataclasses.field(default_factory=dict)

    @property
    def questions(self) -> list[Question]:
        return [question for dataset in self.sets for question in dataset.questions]

    def dataset_of(self, sample: str) -> Dataset:
        return next(dataset for dataset in self.sets if sample in dataset.conversations)

    def group(self, sample: str) -> str:
        return self.dataset_of(sample).group(sample)


def conversation_of(dataset: Dataset, sample: str) -> md.Conversation:
    return md.Conversation(
        agent_id=dataset.name, owner_id=sample, channel=dataset.name, chat_id=sample
    )


def append_all(memory: md.SyncStubs, dataset: Dataset) -> float:
    """Append every turn of the set; returns the seconds it took."""
    started = time.perf_counter()
    for sample, turns in dataset.conversations.items():
        for start in range(0, len(turns), BATCH):
            request = md.AppendMessagesRequest(conversation=conversation_of(dataset, sample))
            for turn in turns[start : start + BATCH]:
                message = request.messages.add(
                    role=md.ROLE_USER if turn.user else md.ROLE_ASSISTANT,
                    sender=turn.speaker,
                    content=turn.text,
                    client_message_id=turn.dia_id,
                )
                message.created_at.FromDatetime(turn.created_at)
            memory.conversations.AppendMessages(request)
    return time.perf_counter() - started


def store_facts(memory: md.SyncStubs, dataset: Dataset) -> dict[int, str]:
    """Store the set's facts as owner facts; returns each row's id with the turn it came from
    (a fact stored twice keeps its first turn)."""
    turns: dict[int, str] = {}
    for fact in dataset.facts:
        response = memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=md.OwnerScope(agent_id=dataset.name, owner_id=fact.sample),
                category=md.CATEGORY_FACT,
                scope_type=md.SCOPE_TYPE_OWNER,
                value=fact.text[:200],
            )
        )
        turns.setdefault(response.memory.id, fact.dia_id)
    return turns


def fact_turns_of(home: Path) -> dict[int, str]:
    """The fact rows' turns, as a kept data directory recorded them."""
    found = json.loads((home / "retrieval-quality-facts.json").read_text(encoding="utf-8"))
    return {int(key): value for key, value in found.items()}


def wait_for_embeddings(memory: md.SyncStubs, timeout: float = 7200.0) -> float:
    """Wait until the server has embedded every message and row; returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        status = memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
        if not status.enabled or status.pending_messages + status.pending_memories == 0:
            return time.perf_counter() - started
        time.sleep(0.5)
    sys.exit("the embedding queue did not drain in time")


def recall_at(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    wanted = set(evidence)
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def summarise(
    loaded: Loaded, questions: list[Question], rankings: list[list[str]]
) -> dict[str, object]:
    """recall@k in percent by group (LoCoMo 1-5, 6-10, BEAM), then for each set by category,
    by number of evidence turns, and for questions naming a date or not."""
    groups: dict[str, list[int]] = defaultdict(list)
    for index, question in enumerate(questions):
        dataset = loaded.dataset_of(question.sample)
        groups[dataset.group(question.sample)].append(index)
        label = dataset.name
        groups[f"{label}: all"].append(index)
        groups[f"{label}: {question.category}"].append(index)
        evidence = len(question.evidence)
        groups[f"{label}: evidence turns {evidence if evidence < 4 else '4 or more'}"].append(index)
        dated = asked_span(question.text) is not None
        groups[f"{label}: {'names a date' if dated else 'names no date'}"].append(index)
    table: dict[str, object] = {}
    for name in sorted(groups, key=lambda n: (":" in n, not n.endswith(": all"), n)):
        members = groups[name]
        table[name] = {
            str(k): round(
                100
                * statistics.mean(
                    recall_at(rankings[i], questions[i].evidence, k) for i in members
                ),
                1,
            )
            for k in KS
        } | {"questions": len(members)}
    return table


def plain_fts5(loaded: Loaded) -> list[list[str]]:
    """The baseline: FTS5 over the same turns, the question's words OR-ed, ranked by bm25."""
    connection = SqliteConnection(":memory:")
    connection.execute(
        "CREATE VIRTUAL TABLE t USING fts5(content, sample UNINDEXED, dia UNINDEXED, "
        "tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    with connection:
        for dataset in loaded.sets:
            for sample, turns in dataset.conversations.items():
                connection.executemany(
                    "INSERT INTO t (content, sample, dia) VALUES (?, ?, ?)",
                    [(turn.text, sample, turn.dia_id) for turn in turns],
                )
    rankings = []
    for question in loaded.questions:
        words = _WORDS.findall(question.text)
        expression = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
        found = connection.execute(
            "SELECT dia FROM t WHERE t MATCH ? AND sample = ? ORDER BY bm25(t) LIMIT ?",
            (expression, question.sample, max(KS)),
        ).fetchall()
        rankings.append([str(row[0]) for row in found])
    return rankings


def search(
    memory: md.SyncStubs,
    loaded: Loaded,
    text: str,
    sample: str,
    mode: md.SearchMode.ValueType,
    *,
    scope: str = "conversation",
    limit: int = max(KS),
) -> list[Hit]:
    """SearchHistory's hits as (turn, relevance). In the agent scope a hit of another
    conversation is a miss (turn ids repeat across conversations)."""
    dataset = loaded.dataset_of(sample)
    request = md.SearchHistoryRequest(query=asked(text), limit=limit, mode=mode)
    if scope == "agent":
        request.agent.agent_id = dataset.name
    else:
        request.conversation.CopyFrom(conversation_of(dataset, sample))
    response = memory.conversations.SearchHistory(request)
    return [
        Hit(
            hit.message.client_message_id
            if hit.message.conversation.chat_id == sample
            else "elsewhere",
            hit.scores.relevance,
            figures_of(hit.scores, hit.matches),
        )
        for hit in response.hits
    ]


def recall(
    memory: md.SyncStubs,
    loaded: Loaded,
    text: str,
    sample: str,
    mode: md.SearchMode.ValueType,
    *,
    limit: int = max(KS),
) -> list[Hit]:
    """Recall's facts of the conversation's owner, as (the fact's turn, relevance)."""
    dataset = loaded.dataset_of(sample)
    response = memory.memory.Recall(
        md.RecallRequest(
            conversation=conversation_of(dataset, sample),
            query=asked(text),
            scope=md.RECALL_SCOPE_OWNER,
            source=md.RECALL_SOURCE_MEMORIES,
            limit=min(limit, 50),
            mode=mode,
        )
    )
    return [
        Hit(
            loaded.fact_turns.get(hit.memory.id, "?"),
            hit.scores.relevance,
            figures_of(hit.scores, hit.matches) | {"text": hit.memory.value},
        )
        for hit in response.hits
    ]


def timed(ask: Callable[[], list[Hit]], latencies: list[float]) -> list[Hit]:
    began = time.perf_counter()
    found = ask()
    latencies.append((time.perf_counter() - began) * 1000)
    return found


def off_topic_asks(loaded: Loaded, questions: list[OffTopic]) -> list[tuple[OffTopic, str]]:
    """Each off-topic question with each conversation holding none of its topic words."""
    words: dict[str, set[str]] = {}
    for dataset in loaded.sets:
        for sample, turns in dataset.conversations.items():
            words[sample] = {word for turn in turns for word in _WORDS.findall(turn.text.lower())}
    return [
        (question, sample)
        for question in questions
        for sample in words
        if not question.topic & words[sample]
    ]


def empty_share(answers: list[list[Hit]], floor: float = 0.0) -> str:
    empty = sum(not [hit for hit in hits if hit.relevance >= floor] for hits in answers)
    return f"{empty} of {len(answers)} ({100 * empty / max(1, len(answers)):.1f}%)"


@dataclasses.dataclass
class Answers:
    """What the servers answered, question by question (each set is asked of a server of its
    own, so that one set's words do not weigh the other's: the answers are gathered here)."""

    questions: list[Question] = dataclasses.field(default_factory=list)
    # "hybrid", "hybrid, agent scope", ...: the hits of each question, and the latencies.
    searched: dict[str, list[list[Hit]]] = dataclasses.field(default_factory=dict)
    latencies: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    # The questions of sets with facts, and Recall's hits of facts.
    fact_questions: list[Question] = dataclasses.field(default_factory=list)
    recalled: list[list[Hit]] = dataclasses.field(default_factory=list)
    # The off-topic asks, and each way's: (question, conversation, hits).
    asks: list[tuple[OffTopic, str]] = dataclasses.field(default_factory=list)
    off_topic: dict[str, list[tuple[OffTopic, str, list[Hit]]]] = dataclasses.field(
        default_factory=dict
    )

    def add(self, other: Answers) -> None:
        self.questions += other.questions
        self.fact_questions += other.fact_questions
        self.recalled += other.recalled
        self.asks += other.asks
        for mine, theirs in (
            (self.searched, other.searched),
            (self.latencies, other.latencies),
            (self.off_topic, other.off_topic),
        ):
            for name, values in theirs.items():
                mine.setdefault(name, []).extend(values)  # type: ignore[arg-type]


def ask_all(
    memory: md.SyncStubs, loaded: Loaded, plan: Plan, log: Callable[[str], None]
) -> Answers:
    """Every question of the plan, asked of a loaded server."""
    answers = Answers(questions=loaded.questions)
    for scope in plan.scopes:
        suffix = "" if scope == "conversation" else f", {scope} scope"
        for name in plan.modes:
            latencies: list[float] = []
            answers.searched[f"{name}{suffix}"] = [
                timed(
                    functools.partial(
                        search,
                        memory,
                        loaded,
                        question.text,
                        question.sample,
                        MODES[name],
                        scope=scope,
                    ),
                    latencies,
                )
                for question in loaded.questions
            ]
            answers.latencies[f"{name}{suffix}"] = latencies
            log(f"{name}{suffix}: done")
    if loaded.fact_turns:
        answers.fact_questions = [
            question for question in loaded.questions if loaded.dataset_of(question.sample).facts
        ]
        latencies = []
        answers.recalled = [
            timed(
                functools.partial(
                    recall,
                    memory,
                    loaded,
                    question.text,
                    question.sample,
                    md.SEARCH_MODE_UNSPECIFIED,
                ),
                latencies,
            )
            for question in answers.fact_questions
        ]
        answers.latencies["facts"] = latencies
        log("facts: done")
    answers.asks = off_topic_asks(loaded, plan.off_topic)
    ways: dict[str, Callable[[str, str], list[Hit]]] = {
        "SearchHistory hybrid": lambda text, sample: search(
            memory, loaded, text, sample, md.SEARCH_MODE_HYBRID, limit=10
        ),
        "SearchHistory semantic": lambda text, sample: search(
            memory, loaded, text, sample, md.SEARCH_MODE_SEMANTIC, limit=10
        ),
    }
    if loaded.fact_turns:
        ways["Recall facts, default mode"] = lambda text, sample: recall(
            memory, loaded, text, sample, md.SEARCH_MODE_UNSPECIFIED, limit=10
        )
        ways["Recall facts, semantic"] = lambda text, sample: recall(
            memory, loaded, text, sample, md.SEARCH_MODE_SEMANTIC, limit=10
        )
    for name, ask in ways.items() if answers.asks else ():
        answers.off_topic[name] = [
            (question, sample, ask(question.text, sample)) for question, sample in answers.asks
        ]
    if answers.asks:
        log("off-topic: done")
    if plan.floors is not None and "hybrid" not in answers.searched:
        answers.searched["hybrid"] = [
            search(memory, loaded, question.text, question.sample, md.SEARCH_MODE_HYBRID)
            for question in loaded.questions
        ]
    return answers


def off_topic_table(answers: Answers) -> dict[str, object]:
    """Empty answers to the off-topic asks, by half, for each way of asking."""
    table: dict[str, object] = {"asks": len(answers.asks)}
    for name, answered in answers.off_topic.items():
        table[name] = {
            half: empty_share(
                [
                    hits
                    for question, _, hits in answered
                    if question.calibrating == (half == "calibrating half")
                ]
            )
            for half in ("calibrating half", "checking half")
        } | {"all": empty_share([hits for _, _, hits in answered]), "asks": len(answered)}
    return table


def calibrate(
    floors: list[float],
    loaded: Loaded,
    questions: list[Question],
    answered: list[list[Hit]],
    off_topic: list[list[Hit]],
) -> dict[str, object]:
    """For each floor: recall@5 / @10 by group, the share of the evidence found in the top 10
    without a floor that the floor loses, and the off-topic answers it leaves empty."""
    table: dict[str, object] = {}
    unfloored = [[hit.dia_id for hit in hits] for hits in answered]
    found_before = sum(
        len(set(question.evidence) & set(ranked[:10]))
        for question, ranked in zip(questions, unfloored, strict=True)
    )
    for floor in [0.0, *floors]:
        rankings = [[hit.dia_id for hit in hits if hit.relevance >= floor] for hits in answered]
        summary = summarise(loaded, questions, rankings)
        found = sum(
            len(set(question.evidence) & set(ranked[:10]))
            for question, ranked in zip(questions, rankings, strict=True)
        )
        lost = 100 * (found_before - found) / max(1, found_before)
        table[f"floor {floor:g}"] = {
            group: {k: figures[k] for k in ("5", "10")}  # type: ignore[index]
            for group, figures in summary.items()
            if ":" not in group
        } | {
            "true hits in the top 10 lost": f"{lost:.2f}%",
            "off-topic answers empty": empty_share(off_topic, floor),
        }
    return table


def report(loaded: Loaded, answers: Answers, plan: Plan) -> dict[str, object]:
    """The figures of the gathered answers."""
    results: dict[str, object] = {}
    for name, answered in answers.searched.items():
        rankings = [[hit.dia_id for hit in hits] for hits in answered]
        results[f"memoryd {name}"] = summarise(loaded, answers.questions, rankings)
        if name in answers.latencies:
            results[f"memoryd {name}"] |= {"client_ms": latency(answers.latencies[name])}  # type: ignore[operator]
    if answers.fact_questions:
        rankings = [[hit.dia_id for hit in hits] for hits in answers.recalled]
        results["facts (Recall, default mode)"] = summarise(
            loaded, answers.fact_questions, rankings
        ) | {"client_ms": latency(answers.latencies["facts"])}
    if answers.asks:
        results["off-topic (empty answers)"] = off_topic_table(answers)
    if plan.floors is not None and answers.asks:
        results["relevance floors (SearchHistory hybrid)"] = calibrate(
            plan.floors,
            loaded,
            answers.questions,
            answers.searched["hybrid"],
            [hits for _, _, hits in answers.off_topic["SearchHistory hybrid"]],
        )
        if answers.fact_questions:
            results["relevance floors (Recall facts)"] = calibrate(
                plan.floors,
                loaded,
                answers.fact_questions,
                answers.recalled,
                [hits for _, _, hits in answers.off_topic["Recall facts, default mode"]],
            )
    return results


def dump(path: Path, loaded: Loaded, answers: Answers) -> None:
    """Every answer as a JSON line: what was asked, of what, the evidence, and each hit."""

    def hits(found: list[Hit]) -> list[dict[str, object]]:
        return [{"turn": hit.dia_id, "relevance": hit.relevance} | hit.figures for hit in found]

    def line_of(ask: str, question: Question, found: list[Hit]) -> dict[str, object]:
        return {
            "ask": ask,
            "set": loaded.dataset_of(question.sample).name,
            "group": loaded.group(question.sample),
            "sample": question.sample,
            "question": question.text,
            "category": question.category,
            "evidence": sorted(question.evidence),
            "hits": hits(found),
        }

    lines = [
        line_of(f"search {way}", question, found)
        for way, answered in answers.searched.items()
        for question, found in zip(answers.questions, answered, strict=True)
    ]
    lines += [
        line_of("recall facts", question, found)
        for question, found in zip(answers.fact_questions, answers.recalled, strict=True)
    ]
    lines += [
        {
            "ask": f"off-topic {way}",
            "set": loaded.dataset_of(sample).name,
            "sample": sample,
            "question": question.text,
            "calibrating": question.calibrating,
            "hits": hits(found),
        }
        for way, answered in answers.off_topic.items()
        for question, sample, found in answered
    ]
    with path.open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(line) + "\n" for line in lines)


def peak_rss_mb(pid: int) -> dict[str, float]:
    """The server's resident memory now and at its peak (Linux /proc), in MB."""
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    found = {}
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found["now" if name == "VmRSS" else "peak"] = round(int(value.split()[0]) / 1024, 1)
    return found


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def latency(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 0.5), 2), "p99": round(percentile(values, 0.99), 2)}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What one run measures."""

    modes: list[str]
    scopes: tuple[str, ...] = ("conversation",)
    floors: list[float] | None = None
    off_topic: list[OffTopic] = dataclasses.field(default_factory=list)


def load(
    memory: md.SyncStubs, loaded: Loaded, home: Path, log: Callable[[str], None]
) -> dict[str, object]:
    """Load the set (unless the kept data directory holds it), then wait for the vectors."""
    marker = home / "retrieval-quality-loaded"
    append_seconds = 0.0
    if marker.exists():
        loaded.fact_turns = fact_turns_of(home)
    else:
        began = time.perf_counter()
        for dataset in loaded.sets:
            append_all(memory, dataset)
            loaded.fact_turns |= store_facts(memory, dataset)
        append_seconds = time.perf_counter() - began
        log(f"appended in {append_seconds:.1f} s; embedding")
    embed_seconds = wait_for_embeddings(memory)
    if not marker.exists():
        (home / "retrieval-quality-facts.json").write_text(
            json.dumps(loaded.fact_turns), encoding="utf-8"
        )
        marker.touch()
    turns = sum(len(turns) for dataset in loaded.sets for turns in dataset.conversations.values())
    return {
        "turns": turns,
        "facts": len(loaded.fact_turns),
        "append_seconds": round(append_seconds, 2),
        "embedding_seconds_after_append": round(embed_seconds, 1),
        "embedded_messages_per_second": round(turns / embed_seconds, 1)
        if embed_seconds and append_seconds
        else None,
    }


def run_server(
    config: str,
    *,
    backend: str,
    loaded: Loaded,
    plan: Plan,
    log: Callable[[str], None],
    kept_home: Path | None = None,
) -> tuple[dict[str, object], Answers]:
    """Load one set through a real server on `backend` and ask it everything. With
    `kept_home`, a data directory loaded by an earlier run is asked at once."""
    results: dict[str, object] = {}
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([backend], Path(scratch)) as places,
    ):
        home = kept_home or Path(scratch) / "home"
        server = ServerProcess(home, config=config, env=places.env(backend, home)).start()
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.SyncStubs(channel)
                results["load"] = load(memory, loaded, home, log)
                answers = ask_all(memory, loaded, plan, log)
            results["server_rss_mb"] = peak_rss_mb(server.process.pid)
        finally:
            code = server.stop()
    if code != 0:
        sys.exit(f"memoryd exited with {code}")
    return results, answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, help="LoCoMo's data/locomo10.json")
    parser.add_argument("--beam", type=Path, help="BEAM's repository (or its chats folder)")
    parser.add_argument("--beam-sizes", default=",".join(datasets.BEAM_SIZES))
    parser.add_argument("--modes", default="lexical,semantic,hybrid")
    parser.add_argument("--config", type=Path, help="a memoryd config file (default: defaults)")
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    parser.add_argument(
        "--floors",
        type=lambda text: [float(item) for item in text.split(",") if item],
        help="relevance floors to calibrate, comma-separated (the server runs with none)",
    )
    parser.add_argument(
        "--scopes",
        default="conversation",
        help="comma-separated: conversation (each question of its own), agent (of its set's)",
    )
    parser.add_argument(
        "--home",
        type=Path,
        help="keep the loaded data directory here (SQLite), and ask at once when it is loaded",
    )
    parser.add_argument("--no-off-topic", action="store_true", help="skip the off-topic asks")
    parser.add_argument(
        "--dump", type=Path, help="write every answer, hit by hit with its figures, as JSON lines"
    )
    args = parser.parse_args()
    if args.locomo is None and args.beam is None:
        sys.exit("give --locomo PATH, --beam PATH, or both")
    if args.home is not None and args.backend != "sqlite":
        sys.exit("--home keeps a SQLite data directory: use it with --backend sqlite")
    scopes = tuple(scope for scope in args.scopes.split(",") if scope)
    if not set(scopes) <= {"conversation", "agent"}:
        sys.exit(f"unknown scope in {args.scopes!r}; choose from conversation, agent")
    modes = [mode for mode in args.modes.split(",") if mode]
    for mode in modes:
        if mode not in MODES:
            sys.exit(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    sets = []
    if args.locomo is not None:
        sets.append(datasets.locomo(args.locomo))
    if args.beam is not None:
        sets.append(datasets.beam(args.beam, tuple(args.beam_sizes.split(","))))
    loaded = Loaded(sets)

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    config = args.config.read_text(encoding="utf-8") if args.config else ""
    if args.floors:
        config += "\n[memoryd.search]\nmin_relevance = 0\n"
    plan = Plan(
        modes=modes,
        scopes=scopes,
        floors=args.floors,
        off_topic=[] if args.no_off_topic else off_topic_questions(),
    )
    result: dict[str, object] = {
        "benchmark": "retrieval_quality",
        "backend": args.backend,
        "questions": {dataset.name: len(dataset.questions) for dataset in sets},
        "plain FTS5 (words OR-ed, bm25)": summarise(loaded, loaded.questions, plain_fts5(loaded)),
        "DRAGON (LoCoMo paper, Table 3)": DRAGON,
    }
    answers = Answers()
    for dataset in sets:
        one = Loaded([dataset])
        home = None if args.home is None else args.home / dataset.name
        found, asked = run_server(
            config, backend=args.backend, loaded=one, plan=plan, log=log, kept_home=home
        )
        result[f"{dataset.name} server"] = found
        loaded.fact_turns |= one.fact_turns
        answers.add(asked)
    result |= report(loaded, answers, plan)
    if args.dump is not None:
        dump(args.dump, loaded, answers)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
