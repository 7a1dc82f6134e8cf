"""Retrieval quality on LoCoMo: does recall bring back the turns a question needs?

Each conversation becomes one agent, loaded through the normal ingestion path
(:func:`pyrecall._ingest.ingest`: sessions with their dates, one message per turn, chunked in
the database), embedded by :class:`pyrecall._worker.Worker`, summarized by
``recall.summarize_sessions()``; then every question of categories 1-4 that has evidence is
asked through the public SQL functions only. Answers are never read.

    >>> report = run("../shared/data/locomo/locomo-dev.json")  # doctest: +SKIP
    >>> report["methods"]["hybrid_recall"]["recall@10"]        # doctest: +SKIP
    0.7...
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from .._embed import Embedder, get_embedder
from .._ingest import ingest
from .._worker import Worker, count_pending
from ..importers._records import Message, Session

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEFAULT_KS = (5, 10, 20)
TURN_SPACING = timedelta(minutes=1)
EVIDENCE_ID = re.compile(r"D(\d+):(\d+)")


# ---------------------------------------------------------------- the data

def parse_date(text: str) -> datetime:
    """A LoCoMo session date ("1:56 pm on 8 May, 2023") as an aware UTC datetime.

    >>> parse_date("1:56 pm on 8 May, 2023").isoformat()
    '2023-05-08T13:56:00+00:00'
    """
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def parse_evidence(ids: Iterable[str]) -> tuple[list[str], int]:
    """Evidence ids as canonical dia_ids ("D8:6"), and how many pieces could not be parsed.

    One source string may hold several ids ("D8:6; D9:17"); leading zeros are dropped
    ("D30:05" -> "D30:5"); a piece without the D<session>:<turn> shape counts as unparseable.

    >>> parse_evidence(["D8:6; D9:17", "D:11:26", "D30:05"])
    (['D8:6', 'D9:17', 'D30:5'], 1)
    """
    out, bad = [], 0
    for raw in ids:
        for piece in re.split(r"[;,\s]+", str(raw).strip()):
            if not piece:
                continue
            m = EVIDENCE_ID.fullmatch(piece)
            if m is None:
                bad += 1
                continue
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia not in out:
                out.append(dia)
    return out, bad


def _session_numbers(conv: dict) -> list[int]:
    nums = []
    for key, value in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(value, list) and value:
            nums.append(int(m.group(1)))
    return sorted(nums)


def turn_text(turn: dict) -> str:
    """What a turn says; a shared photo's caption is appended as "[shares a photo: ...]"."""
    text = (turn.get("text") or "").strip()
    caption = (turn.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return text


def conversation_sessions(sample: dict, agent_id: str, name: str | None = None) -> list[Session]:
    """One conversation as pyrecall sessions: one message per turn, speaker_a as the user,
    speaker_b as the assistant, the speaker's name in metadata.speaker, dia_id as external id,
    turns one minute apart from the session's date. Session ids are ``<name>/session_<n>``
    (``name`` defaults to agent_id)."""
    conv = sample["conversation"]
    sessions = []
    for n in _session_numbers(conv):
        raw_date = conv.get(f"session_{n}_date_time")
        started = parse_date(raw_date) if raw_date else None
        messages = []
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = turn_text(turn)
            if not text:
                continue
            meta: dict[str, Any] = {"speaker": turn.get("speaker"), "dia_id": turn.get("dia_id")}
            if turn.get("blip_caption"):
                meta["blip_caption"] = turn["blip_caption"]
            if turn.get("img_url"):
                meta["img_url"] = turn["img_url"]
            role = "user" if turn.get("speaker") == conv["speaker_a"] else "assistant"
            messages.append(Message(
                external_id=turn.get("dia_id"), role=role, kind="text", content=text,
                created_at=started + i * TURN_SPACING if started else None, metadata=meta))
        sessions.append(Session(
            session_id=f"{name or agent_id}/session_{n}", agent_id=agent_id, title=f"session {n}",
            # a chat between two people: chunked in overlapping windows of turns (see
            # recall._rechunk), as every chat import is
            started_at=started, metadata={"locomo_session": n, "date_time": raw_date,
                                          "chunking": "window"},
            messages=messages))
    return sessions


@dataclass
class Question:
    agent_id: str
    text: str
    category: int
    evidence: list[str]            # dia_ids found in the conversation
    evidence_sessions: set[str]    # their session ids
    as_of: datetime | None         # when it is asked: just after the conversation's last turn


@dataclass
class Dataset:
    questions: list[Question]
    n_unparseable: int              # evidence pieces that are not D<n>:<i>, or name no turn
    n_skipped: int                  # questions of categories 1-4 with no usable evidence
    sessions: dict[str, list[Session]]


def load_file(path: str | Path, *, limit_conversations: int | None = None,
              limit_questions: int | None = None, one_agent: str | None = None) -> Dataset:
    """Read a LoCoMo file: the sessions to ingest and the questions to ask (categories 1-4).

    ``limit_questions`` keeps the first n questions of each conversation (for quick runs).
    ``one_agent``: every conversation goes to this one agent (its sessions keep their
    conversation's name), so the other conversations are distractors, as an agent's many past
    sessions are; every question is then asked just after the last turn of the file.
    """
    data = json.loads(Path(path).read_text())
    if isinstance(data, dict):
        data = [data]
    questions, bad, skipped, all_sessions = [], 0, 0, {}
    for index, sample in enumerate(data[:limit_conversations]):
        name = str(sample.get("sample_id") or f"conv-{index}")
        agent_id = one_agent or name
        sessions = conversation_sessions(sample, agent_id, name)
        all_sessions.setdefault(agent_id, []).extend(sessions)
        where = {m.external_id: s.session_id for s in sessions for m in s.messages}
        last = max((m.created_at for s in sessions for m in s.messages if m.created_at), default=None)
        asked = []
        for qa in sample.get("qa", []):
            if qa.get("category") not in CATEGORIES or not qa.get("evidence"):
                continue
            ids, unparsed = parse_evidence(qa["evidence"])
            found = [d for d in ids if d in where]
            bad += unparsed + len(ids) - len(found)
            if not found:
                skipped += 1
                continue
            asked.append(Question(agent_id, qa["question"], qa["category"], found,
                                  {where[d] for d in found}, last + TURN_SPACING if last else None))
        questions.extend(asked[:limit_questions])
    if one_agent:
        last = max((m.created_at for ss in all_sessions.values() for s in ss for m in s.messages
                    if m.created_at), default=None)
        for q in questions:
            q.as_of = last + TURN_SPACING if last else None
    return Dataset(questions, bad, skipped, all_sessions)


# ---------------------------------------------------------------- loading

def load(conn: psycopg.Connection, dataset: Dataset, embedder: Embedder, *,
         progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Ingest every conversation, embed every chunk, summarize every session; return timings."""
    t0 = time.perf_counter()
    n_messages = 0
    for agent_id, sessions in dataset.sessions.items():
        n_messages += ingest(conn, sessions, agent_id=agent_id).inserted
    t1 = time.perf_counter()
    pending = count_pending(conn)
    advance = progress("embedding chunks", pending) if progress else None
    report = Worker(conn, embedder, batch_size=64, progress=advance).run()
    t2 = time.perf_counter()
    conn.execute("select recall.summarize_sessions()")
    t3 = time.perf_counter()
    n_chunks = conn.execute("select count(*) from recall.chunks").fetchone()[0]
    return {"messages": n_messages, "chunks": n_chunks, "embedded": report.embedded,
            "ingest_s": round(t1 - t0, 3), "embed_s": round(t2 - t1, 3),
            "summarize_s": round(t3 - t2, 3)}


def embed_questions(embedder: Embedder, questions: Sequence[Question], *,
                    progress: Callable[[str, int], Callable[[int], None]] | None = None) -> list:
    import numpy as np

    advance = progress("embedding questions", len(questions)) if progress else None
    out = []
    for i in range(0, len(questions), 64):
        batch = [q.text for q in questions[i:i + 64]]
        out.extend(np.asarray(v, dtype=np.float32) for v in embedder.embed(batch))
        if advance:
            advance(len(batch))
    return out


# ---------------------------------------------------------------- methods

@dataclass(frozen=True)
class Method:
    """One way of asking: a public SQL function with some of its arguments.

    ``text``/``embedding`` say whether the query text and the query embedding are passed;
    ``options`` are further named arguments of the function (weights, candidates, ...).
    """

    name: str
    function: str = "hybrid_recall"          # hybrid_recall | session_recall
    text: bool = True
    embedding: bool = True
    options: dict[str, Any] = field(default_factory=dict)

    def __hash__(self):
        return hash((self.name, self.function, self.text, self.embedding,
                     json.dumps(self.options, sort_keys=True, default=str)))


ONLY = {"vector_weight": 0.0, "text_weight": 0.0, "recency_weight": 0.0, "importance_weight": 0.0}
DEFAULT_METHODS = (
    Method("dense", text=False, options={**ONLY, "vector_weight": 1.0}),
    Method("text", embedding=False, options={**ONLY, "text_weight": 1.0}),
    Method("hybrid_recall"),
    Method("session_recall", function="session_recall"),
)
FUNCTIONS = {"hybrid_recall", "session_recall"}


def _statement(method: Method) -> sql.Composed:
    if method.function not in FUNCTIONS:
        raise ValueError(f"unknown recall function {method.function!r}")
    names = ["agent_id", "query_text", "query_embedding", "k", "as_of", *method.options]
    args = sql.SQL(", ").join(
        sql.SQL("{} => {}").format(sql.Identifier(n), sql.Placeholder(n)) for n in names)
    return sql.SQL("select session_id, message_ids from recall.{}({})").format(
        sql.Identifier(method.function), args)


def ask(conn: psycopg.Connection, method: Method, question: Question, embedding, k: int,
        *, statement: sql.Composed | None = None) -> list[tuple[str, list[int]]]:
    """The ranking one method returns for one question: (session_id, message_ids) per chunk."""
    params = {"agent_id": question.agent_id, "query_text": question.text if method.text else None,
              "query_embedding": embedding if method.embedding else None, "k": k,
              "as_of": question.as_of}
    for name, value in method.options.items():
        params[name] = timedelta(days=value) if name == "half_life" and isinstance(value, (int, float)) else value
    return conn.execute(statement or _statement(method), params).fetchall()


# ---------------------------------------------------------------- scoring

def score_ranking(ranking: Sequence[tuple[str, list[int]]], question: Question,
                  dia_of: dict[int, str], ks: Sequence[int]) -> dict[str, float]:
    """recall@k for each k, all@10, session_recall@5 and reciprocal rank of one ranking.

    A chunk covers the turns of its messages (a turn pair covers both); recall@k is the share
    of the evidence turns covered by the first k chunks; session_recall@5 is 1 when every
    evidence session is among the first five distinct sessions of the ranking.
    """
    evidence = set(question.evidence)
    covered: set[str] = set()
    covered_at: dict[int, set[str]] = {}
    first_hit = None
    sessions: list[str] = []
    for rank, (session_id, message_ids) in enumerate(ranking, start=1):
        turns = {dia_of.get(m) for m in message_ids or ()} - {None}
        if first_hit is None and turns & evidence:
            first_hit = rank
        covered |= turns
        covered_at[rank] = set(covered)
        if session_id not in sessions:
            sessions.append(session_id)

    def upto(k: int) -> set[str]:
        return covered_at[min(k, len(ranking))] if ranking else set()

    out = {f"recall@{k}": len(upto(k) & evidence) / len(evidence) for k in ks}
    out["all@10"] = float(evidence <= upto(10))
    out["session_recall@5"] = float(question.evidence_sessions <= set(sessions[:5]))
    out["mrr"] = 1.0 / first_hit if first_hit else 0.0
    return out


def _mean(rows: list[dict[str, float]], keys: list[str]) -> dict[str, float]:
    return {key: round(statistics.fmean(r[key] for r in rows), 4) if rows else 0.0 for key in keys}


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def evaluate(conn: psycopg.Connection, questions: Sequence[Question], embeddings: Sequence,
             methods: Sequence[Method], *, ks: Sequence[int] = DEFAULT_KS,
             progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Ask every question with every method; the scores per method, overall and by category."""
    ks = sorted(set(ks))
    depth = max(max(ks), 20)
    dia_of = dict(conn.execute("select message_id, external_id from recall.messages").fetchall())
    keys = [f"recall@{k}" for k in ks] + ["all@10", "session_recall@5", "mrr"]
    results = {}
    for method in methods:
        statement = _statement(method)
        advance = progress(f"asking: {method.name}", len(questions)) if progress else None
        rows, times = [], []
        for question, embedding in zip(questions, embeddings, strict=True):
            t = time.perf_counter()
            ranking = ask(conn, method, question, embedding, depth, statement=statement)
            times.append((time.perf_counter() - t) * 1000)
            rows.append((question.category, score_ranking(ranking, question, dia_of, ks)))
            if advance:
                advance(1)
        by_cat = defaultdict(list)
        for cat, r in rows:
            by_cat[cat].append(r)
        result = _mean([r for _, r in rows], keys)
        result["by_category"] = {str(c): {**_mean(by_cat[c], keys), "n": len(by_cat[c])}
                                 for c in sorted(by_cat)}
        result["latency_ms"] = {"p50": round(_percentile(times, 50), 2),
                                "p95": round(_percentile(times, 95), 2)}
        results[method.name] = result
    return results


# ---------------------------------------------------------------- one run

def run(path: str | Path, *, dsn: str | None = None, ks: Sequence[int] = DEFAULT_KS,
        methods: Sequence[Method] = DEFAULT_METHODS, limit_conversations: int | None = None,
        limit_questions: int | None = None, one_agent: str | None = None,
        embedder: Embedder | None = None,
        progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Load a LoCoMo file into a fresh database, ask its questions, return the report.

    ``dsn``: the server to create the throwaway database on (default: a throwaway embedded
    server). ``one_agent``: see load_file. The shape of the report is that of
    ``pyrecall bench locomo --json``.
    """
    from ._scratch import scratch_database

    dataset = load_file(path, limit_conversations=limit_conversations,
                        limit_questions=limit_questions, one_agent=one_agent)
    embedder = embedder or get_embedder("local/all-MiniLM-L6-v2")
    with scratch_database(dsn, dim=embedder.dim) as url, _connect(url) as conn:
        loaded = load(conn, dataset, embedder, progress=progress)
        embeddings = embed_questions(embedder, dataset.questions, progress=progress)
        scores = evaluate(conn, dataset.questions, embeddings, methods, ks=ks, progress=progress)
    return {
        "n_questions": len(dataset.questions),
        "n_unparseable_evidence": dataset.n_unparseable,
        "n_skipped_questions": dataset.n_skipped,
        "n_conversations": len({s.session_id.rsplit("/", 1)[0]
                                for ss in dataset.sessions.values() for s in ss}),
        "n_agents": len(dataset.sessions),
        "one_agent": one_agent,
        "k": sorted(set(ks)),
        "model": embedder.model,
        "load": loaded,
        "methods": scores,
    }


def _connect(url: str) -> psycopg.Connection:
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn
