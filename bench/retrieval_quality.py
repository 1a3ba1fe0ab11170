"""Retrieval quality on LoCoMo: recall@k of annotated evidence, through the real server.

    python bench/retrieval_quality.py PATH/TO/locomo10.json [--modes lexical,semantic,hybrid]
                                      [--backend postgres]

LoCoMo (Maharana et al., ACL 2024) is CC BY-NC 4.0, so it is never committed; fetch it with
`git clone https://github.com/snap-research/LoCoMo` and pass `LoCoMo/data/locomo10.json`.

Each of the ten conversations is appended to one memoryd conversation through AppendMessages
(sender = speaker, created_at = the session's date plus ten seconds a turn, client_message_id =
the dialog id). The server embeds them in the background; the script waits until the embedding
queue is empty. Then every question is sent, as typed, to SearchHistory scoped to its
conversation, once per mode. The metric is the paper's: the mean over questions of the fraction
of a question's evidence turns found in the top k.

Tuning is allowed on conversations 1-5 only (conv-26, conv-30, conv-41, conv-42, conv-43);
every figure is reported for 1-5, 6-10 and all ten. In the same run, a baseline: plain SQLite
FTS5 over the same turns (porter stemming, the question's words OR-ed, ranked by bm25), and the
paper's DRAGON row (Table 3).

`--floors 0.5,0.55,...` calibrates the similarity floor ([memoryd.search] min_similarity): the
server runs without one, and each floor is applied to its hybrid answers with the server's own
rule (memoryd.domain.fusion.above_floor, a message's neighbours being the turns before and after
it), reporting recall@k on each half and, for OFF_TOPIC (questions about nothing LoCoMo's chats
hold, asked of every conversation), how many answers come back empty. The server's default
floor is the highest whose recall@10 on conversations 1-5 is at most 0.5 below no floor's.

`--scopes conversation,agent` asks each question of its conversation (the default), and of the
whole agent (all ten conversations under one agent). `--home DIR` (SQLite) keeps the loaded and
embedded data directory: a later run with the same DIR starts the server on it and asks at once,
so that a change of ranking is measured in a minute, not after a new load.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import apsw
import backends
import grpc

import memoryd_client as md
from memoryd.domain.fusion import Scores, above_floor
from memoryd.domain.time_expressions import asked_span
from memoryd.testing.server_process import ServerProcess

KS = (1, 5, 10, 25, 50)
DEVELOPMENT = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
DRAGON = {"5": 56.7, "10": 66.2, "25": 76.7, "50": 82.7}
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MODES = {
    "lexical": md.SEARCH_MODE_LEXICAL,
    "semantic": md.SEARCH_MODE_SEMANTIC,
    "hybrid": md.SEARCH_MODE_HYBRID,
}
SESSION = re.compile(r"session_(\d+)$")
BATCH = 100
# Questions about nothing the LoCoMo conversations hold (written for this benchmark): a memory
# with a floor on meaning answers them with nothing, not with the nearest unrelated turns.
OFF_TOPIC = (
    "What is the melting point of tungsten carbide?",
    "How does the Krebs cycle produce ATP in mitochondria?",
    "Which enzyme unwinds the DNA double helix during replication?",
    "What is the Schwarzschild radius of a black hole of ten solar masses?",
    "How do I configure BGP route reflectors on a Juniper router?",
    "What does the x86 instruction CMPXCHG16B do?",
    "How is the Navier-Stokes equation discretised in finite volume solvers?",
    "Which Byzantine emperor commissioned the Hagia Sophia?",
    "What is the half-life of carbon-14?",
    "How does a Wankel rotary engine seal its combustion chambers?",
    "What is the Chandrasekhar limit?",
    "Who proved Fermat's Last Theorem?",
    "How do you compute the eigenvalues of a Hermitian matrix?",
    "What is the capital of Kyrgyzstan?",
    "Which amino acids are encoded by the codon UUA?",
    "How does Kerberos issue ticket-granting tickets?",
    "What is the difference between TCP Reno and TCP Cubic congestion control?",
    "What year was the Treaty of Westphalia signed?",
    "How does a superheterodyne receiver demodulate AM?",
    "What is the orbital period of Neptune?",
    "Which compiler pass performs loop-invariant code motion?",
    "What is the boiling point of liquid nitrogen in Kelvin?",
    "How is the Gini coefficient calculated?",
    "What does the Linux syscall epoll_wait return?",
    "Which glaciers feed the Aletsch glacier?",
    "How do quantum error-correcting surface codes work?",
    "What is the bond angle of a water molecule?",
    "Who wrote the Principia Mathematica with Russell?",
    "How are Reed-Solomon codes decoded?",
    "What is the tensile strength of structural steel?",
    "Which protocol does Kubernetes use for etcd consensus?",
    "What is the function of the loop of Henle in the kidney?",
    "How is the Hubble constant measured with Cepheid variables?",
    "What are the rules of castling in chess?",
    "How does PostgreSQL implement MVCC visibility?",
    "What causes the Coriolis effect?",
    "Which element has the atomic number 74?",
    "How does the Diffie-Hellman key exchange resist eavesdropping?",
    "What is the derivative of the arctangent function?",
    "Which dynasty built the Forbidden City in Beijing?",
)


class Turn:
    """One dialog turn."""

    def __init__(self, dia_id: str, speaker: str, text: str, created_at: datetime.datetime):
        self.dia_id = dia_id
        self.speaker = speaker
        self.text = text
        self.created_at = created_at


@dataclasses.dataclass(frozen=True, slots=True)
class Scored:
    """A hybrid hit as the floor's rule reads it."""

    dia_id: str
    message_id: int
    scores: Scores


class Question:
    """One annotated question."""

    def __init__(self, sample: str, text: str, evidence: set[str], category: int):
        self.sample = sample
        self.text = text
        self.evidence = evidence
        self.category = category


def session_date(text: str) -> datetime.datetime:
    """'1:56 pm on 8 May, 2023' as a UTC time."""
    parsed = datetime.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return parsed.replace(tzinfo=datetime.UTC)


def load_dataset(path: Path) -> tuple[dict[str, list[Turn]], list[Question]]:
    """The turns of each conversation, in order, and the questions with usable evidence."""
    records = json.loads(path.read_text(encoding="utf-8"))
    conversations: dict[str, list[Turn]] = {}
    questions: list[Question] = []
    for record in records:
        sample = record["sample_id"]
        dialog = record["conversation"]
        sessions = sorted(
            (int(match.group(1)), name)
            for name in dialog
            if (match := SESSION.match(name)) and dialog[name]
        )
        turns: list[Turn] = []
        for _, name in sessions:
            start = session_date(dialog[f"{name}_date_time"])
            for offset, turn in enumerate(dialog[name]):
                turns.append(
                    Turn(
                        turn["dia_id"],
                        turn["speaker"],
                        turn["text"],
                        start + datetime.timedelta(seconds=10 * offset),
                    )
                )
        conversations[sample] = turns
        known = {turn.dia_id for turn in turns}
        for qa in record["qa"]:
            evidence = {
                part.strip()
                for item in qa.get("evidence", [])
                for part in re.split(r"[;,]", item)
                if part.strip() in known
            }
            if evidence:
                questions.append(Question(sample, qa["question"], evidence, qa["category"]))
    return conversations, questions


AGENT = "bench"


def conversation_of(sample: str) -> md.Conversation:
    return md.Conversation(agent_id=AGENT, owner_id=sample, channel="locomo", chat_id=sample)


def append_all(memory: md.MemoryServiceStub, conversations: dict[str, list[Turn]]) -> float:
    """Append every turn; returns the seconds it took."""
    started = time.perf_counter()
    for sample, turns in conversations.items():
        speakers = list(dict.fromkeys(turn.speaker for turn in turns))
        for start in range(0, len(turns), BATCH):
            batch = turns[start : start + BATCH]
            request = md.AppendMessagesRequest(conversation=conversation_of(sample))
            for turn in batch:
                message = request.messages.add(
                    role=md.ROLE_USER if turn.speaker == speakers[0] else md.ROLE_ASSISTANT,
                    sender=turn.speaker,
                    content=turn.text,
                    client_message_id=turn.dia_id,
                )
                message.created_at.FromDatetime(turn.created_at)
            memory.AppendMessages(request)
    return time.perf_counter() - started


def wait_for_embeddings(admin: md.MemoryServiceStub, timeout: float = 1800.0) -> float:
    """Wait until the server has embedded every message; returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        status = admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
        if not status.enabled or status.pending_messages + status.pending_memories == 0:
            return time.perf_counter() - started
        time.sleep(0.5)
    sys.exit("the embedding queue did not drain in time")


def recall_at(ranked: list[str], evidence: set[str], k: int) -> float:
    return len(evidence.intersection(ranked[:k])) / len(evidence)


def summarise(questions: list[Question], rankings: list[list[str]]) -> dict[str, object]:
    """recall@k in percent for conversations 1-5, 6-10, all; and over all ten, per category,
    per number of evidence turns, and for questions naming a date or not."""
    groups: dict[str, list[int]] = defaultdict(list)
    for index, question in enumerate(questions):
        half = "conversations 1-5" if question.sample in DEVELOPMENT else "conversations 6-10"
        groups[half].append(index)
        groups["all ten"].append(index)
        groups[f"category {question.category} ({CATEGORIES[question.category]})"].append(index)
        evidence = len(question.evidence)
        groups[f"evidence turns: {evidence if evidence < 4 else '4 or more'}"].append(index)
        dated = asked_span(question.text) is not None
        groups["names a date" if dated else "names no date"].append(index)
    table: dict[str, object] = {}
    for name in sorted(groups, key=lambda n: (not n.startswith("conv"), n != "all ten", n)):
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


def plain_fts5(conversations: dict[str, list[Turn]], questions: list[Question]) -> list[list[str]]:
    """The baseline: FTS5 over the same turns, the question's words OR-ed, ranked by bm25."""
    connection = apsw.Connection(":memory:")
    connection.execute(
        "CREATE VIRTUAL TABLE t USING fts5(content, sample UNINDEXED, dia UNINDEXED, "
        "tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    with connection:
        for sample, turns in conversations.items():
            connection.executemany(
                "INSERT INTO t (content, sample, dia) VALUES (?, ?, ?)",
                [(turn.text, sample, turn.dia_id) for turn in turns],
            )
    rankings = []
    for question in questions:
        words = re.findall(r"\w+", question.text)
        expression = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
        found = connection.execute(
            "SELECT dia FROM t WHERE t MATCH ? AND sample = ? ORDER BY bm25(t) LIMIT ?",
            (expression, question.sample, max(KS)),
        ).fetchall()
        rankings.append([row[0] for row in found])
    return rankings


def through_server(
    memory: md.MemoryServiceStub, questions: list[Question], mode: int, scope: str = "conversation"
) -> tuple[list[list[str]], list[float]]:
    """Rankings and client latencies (ms) of SearchHistory in one mode and scope. In the agent
    scope a hit of another conversation counts as a miss (dialog ids repeat across them)."""
    rankings, latencies = [], []
    for question in questions:
        request = md.SearchHistoryRequest(query=question.text, limit=max(KS), mode=mode)
        if scope == "agent":
            request.agent.agent_id = AGENT
        else:
            request.conversation.CopyFrom(conversation_of(question.sample))
        began = time.perf_counter()
        response = memory.SearchHistory(request)
        latencies.append((time.perf_counter() - began) * 1000)
        rankings.append(
            [
                hit.message.client_message_id
                if hit.message.conversation.chat_id == question.sample
                else "elsewhere"
                for hit in response.hits
            ]
        )
    return rankings, latencies


def empty_off_topic(memory: md.MemoryServiceStub, samples: list[str]) -> str:
    """How many off-topic questions, asked of every conversation, get no hit (hybrid)."""
    empty = 0
    for text in OFF_TOPIC:
        for sample in samples:
            response = memory.SearchHistory(
                md.SearchHistoryRequest(
                    query=text, conversation=conversation_of(sample), mode=md.SEARCH_MODE_HYBRID
                )
            )
            empty += not response.hits
    return f"{empty} of {len(OFF_TOPIC) * len(samples)}"


def scored(
    memory: md.MemoryServiceStub, questions: list[Question], samples: list[str], mode: int
) -> tuple[list[list[Scored]], list[list[Scored]]]:
    """Every hit of `mode` (dialog id, message id, scores), without a floor: for the
    questions, and for each off-topic question asked of every conversation."""

    def ask(text: str, sample: str) -> list[Scored]:
        response = memory.SearchHistory(
            md.SearchHistoryRequest(
                query=text, conversation=conversation_of(sample), limit=max(KS), mode=mode
            )
        )
        return [
            Scored(
                hit.message.client_message_id,
                hit.message.id,
                Scores(
                    similarity=hit.scores.similarity,
                    fused=hit.scores.fused,
                    lexical_rank=hit.scores.lexical_rank,
                    semantic_rank=hit.scores.semantic_rank,
                ),
            )
            for hit in response.hits
        ]

    answered = [ask(question.text, question.sample) for question in questions]
    off_topic = [ask(text, sample) for text in OFF_TOPIC for sample in samples]
    return answered, off_topic


def floored(hits: list[Scored], floor: float, *, context: bool = True) -> list[str]:
    """The dialog ids the server's floor would keep (turns next to each other in a
    conversation have ids next to each other: they were appended in order). `context`: the
    neighbours of a kept hit stay (hybrid), or not (semantic mode has no context)."""
    ids = {hit.message_id for hit in hits} if context else set()
    neighbours = {
        hit.message_id: (
            hit.message_id - 1 if hit.message_id - 1 in ids else None,
            hit.message_id + 1 if hit.message_id + 1 in ids else None,
        )
        for hit in hits
    }
    by_id = {hit.message_id: hit.dia_id for hit in hits}
    kept, _ = above_floor([(hit.message_id, hit.scores) for hit in hits], floor, neighbours)
    return [by_id[item] for item, _ in kept]


def calibrate(
    floors: list[float],
    questions: list[Question],
    answered: list[list[Scored]],
    off_topic: list[list[Scored]],
    *,
    context: bool,
) -> dict[str, object]:
    """Recall@k on each half and empty off-topic answers, for each floor (0: none). In
    semantic mode every hit is one of meaning alone, so the rule is the similarity."""
    table: dict[str, object] = {}
    for floor in [0.0, *floors]:
        rankings = [floored(hits, floor, context=context) for hits in answered]
        summary = summarise(questions, rankings)
        table[f"floor {floor:g}"] = {
            half: {k: figures[k] for k in ("5", "10")}  # type: ignore[index]
            for half, figures in summary.items()
            if half.startswith("conv") or half == "all ten"
        } | {
            "off-topic answers empty": f"{sum(not floored(h, floor) for h in off_topic)} of "
            f"{len(off_topic)}"
        }
    return table


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


def run_server(
    path_config: str,
    *,
    backend: str,
    conversations: dict[str, list[Turn]],
    questions: list[Question],
    modes: list[str],
    log: Callable[[str], None],
    floors: list[float] | None = None,
    scopes: tuple[str, ...] = ("conversation",),
    kept_home: Path | None = None,
) -> dict[str, object]:
    """Load through a real server on `backend` and measure each mode (in each scope). With
    `kept_home`, a data directory loaded by an earlier run is asked at once."""
    results: dict[str, object] = {}
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([backend], Path(scratch)) as places,
    ):
        home = kept_home or Path(scratch) / "home"
        loaded = home / "retrieval-quality-loaded"
        server = ServerProcess(home, config=path_config, env=places.env(backend, home)).start()
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.MemoryServiceStub(channel)
                admin = memory
                append_seconds = 0.0
                if not loaded.exists():
                    append_seconds = append_all(memory, conversations)
                    log(f"appended in {append_seconds:.1f} s; embedding")
                embed_seconds = wait_for_embeddings(admin) if modes != ["lexical"] else 0.0
                if kept_home is not None:
                    loaded.touch()
                turns = sum(len(t) for t in conversations.values())
                results["load"] = {
                    "turns": turns,
                    "append_seconds": round(append_seconds, 2),
                    "embedding_seconds_after_append": round(embed_seconds, 1),
                    "embedded_messages_per_second": round(turns / embed_seconds, 1)
                    if embed_seconds and append_seconds
                    else None,
                }
                for name in ("hybrid", "semantic") if floors else ():
                    answered, off_topic = scored(
                        memory, questions, list(conversations), MODES[name]
                    )
                    results[f"similarity floors ({name})"] = calibrate(
                        floors or [], questions, answered, off_topic, context=name == "hybrid"
                    )
                for scope in scopes:
                    suffix = "" if scope == "conversation" else f", {scope} scope"
                    for name in modes:
                        rankings, latencies = through_server(memory, questions, MODES[name], scope)
                        log(f"{name}{suffix}: done")
                        results[f"memoryd {name}{suffix}"] = summarise(questions, rankings) | {
                            "client_ms": {
                                "p50": round(percentile(latencies, 0.5), 2),
                                "p99": round(percentile(latencies, 0.99), 2),
                            }
                        }
                if "hybrid" in modes and "conversation" in scopes:
                    results["memoryd hybrid"] |= {  # type: ignore[operator]
                        "off-topic answers empty": empty_off_topic(memory, list(conversations))
                    }
            results["server_rss_mb"] = peak_rss_mb(server.process.pid)
        finally:
            code = server.stop()
    if code != 0:
        sys.exit(f"memoryd exited with {code}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="LoCoMo's data/locomo10.json")
    parser.add_argument("--modes", default="lexical,semantic,hybrid")
    parser.add_argument("--config", type=Path, help="a memoryd config file (default: defaults)")
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    parser.add_argument(
        "--floors",
        type=lambda text: [float(item) for item in text.split(",") if item],
        help="similarity floors to calibrate, comma-separated (the server runs with none)",
    )
    parser.add_argument(
        "--scopes",
        default="conversation",
        help="comma-separated: conversation (each question of its own), agent (of all ten)",
    )
    parser.add_argument(
        "--home",
        type=Path,
        help="keep the loaded data directory here (SQLite), and ask at once when it is loaded",
    )
    args = parser.parse_args()
    if args.home is not None and args.backend != "sqlite":
        sys.exit("--home keeps a SQLite data directory: use it with --backend sqlite")
    scopes = tuple(scope for scope in args.scopes.split(",") if scope)
    if not set(scopes) <= {"conversation", "agent"}:
        sys.exit(f"unknown scope in {args.scopes!r}; choose from conversation, agent")
    conversations, questions = load_dataset(args.dataset)
    modes = [mode for mode in args.modes.split(",") if mode]
    for mode in modes:
        if mode not in MODES:
            sys.exit(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    config = args.config.read_text(encoding="utf-8") if args.config else ""
    if args.floors:
        config += "\n[memoryd.search]\nmin_similarity = 0\n"
    result: dict[str, object] = {
        "benchmark": "retrieval_quality",
        "backend": args.backend,
        "questions": len(questions),
        "plain FTS5 (words OR-ed, bm25)": summarise(
            questions, plain_fts5(conversations, questions)
        ),
        "DRAGON (paper, Table 3)": DRAGON,
    }
    result |= run_server(
        config,
        backend=args.backend,
        conversations=conversations,
        questions=questions,
        modes=modes,
        log=log,
        floors=args.floors,
        scopes=scopes,
        kept_home=args.home,
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
