"""Retrieval quality on LoCoMo: does recall bring back the turns a question needs?

Each conversation becomes one agent, loaded through the normal ingestion path
(:func:`pyrecall._ingest.ingest`: sessions with their dates, one message per turn, chunked in
the database), embedded by :class:`pyrecall._worker.Worker`, summarized by
``recall.summarize_sessions()``; then every question of categories 1-4 that has evidence is
asked through the public SQL functions only. Answers are never read.

    >>> report = run("../shared/data/locomo/locomo-dev.json")  # doctest: +SKIP
    >>> report["methods"]["hybrid_recall"]["recall@10"]        # doctest: +SKIP
"""

from __future__ import annotations

import functools
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
from .._errors import ConfigError
from .._ingest import ingest
from .._worker import Worker, count_pending
from ..importers._records import Message, Session

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEFAULT_KS = (5, 10, 20)
TURN_SPACING = timedelta(minutes=1)
EVIDENCE_ID = re.compile(r"D(\d+):(\d+)")
CHUNKINGS = ("window", "turn_pair")
DEFAULT_BUDGETS = (250, 500, 1000, 2000)


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


def conversation_sessions(sample: dict, agent_id: str, name: str | None = None,
                          chunking: str = "window") -> list[Session]:
    """One conversation as pyrecall sessions: one message per turn, speaker_a as the user,
    speaker_b as the assistant, the speaker's name in metadata.speaker, dia_id as external id,
    turns one minute apart from the session's date. Session ids are ``<name>/session_<n>``
    (``name`` defaults to agent_id). ``chunking``: "window" (a chat: overlapping windows of
    turns, as every chat import is) or "turn_pair" (the default chunking of agent sessions)."""
    if chunking not in CHUNKINGS:
        raise ConfigError(f"chunking must be one of {', '.join(CHUNKINGS)}, got {chunking!r}")
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
                                          **({"chunking": "window"} if chunking == "window" else {})},
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
              limit_questions: int | None = None, one_agent: str | None = None,
              chunking: str = "window") -> Dataset:
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
        sessions = conversation_sessions(sample, agent_id, name, chunking)
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
    function: str = "hybrid_recall"          # hybrid_recall | session_recall | auto_context
    text: bool = True
    embedding: bool = True
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def context(self) -> bool:
        """auto_context: asked for a context at a budget (the question as its task), with no
        ranking of k chunks to score: judged at the budgets only."""
        return self.function.startswith("auto_context")

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
# the stable names, and the versions in development beside them (V5_METHODS)
FUNCTIONS = {"hybrid_recall", "session_recall", "hybrid_recall_v4", "session_recall_v4",
             "hybrid_recall_v5", "session_recall_v5", "hybrid_recall_v6", "session_recall_v6",
             "hybrid_recall_v7", "session_recall_v8", "hybrid_recall_v9", "session_recall_v9",
             "hybrid_recall_v10", "session_recall_v10", "hybrid_recall_v11", "session_recall_v11",
             "hybrid_recall_v13", "session_recall_v13",
             "auto_context", "auto_context_v10", "auto_context_v12", "auto_context_v13",
             "auto_context_v14", "auto_context_v15"}
# every method `bench locomo --methods` can name: the defaults, and each version by its name
METHODS = {m.name: m for m in DEFAULT_METHODS} | {
    f"{fn}_{v}": Method(f"{fn}_{v}", function=f"{fn}_{v}")
    for fn in ("hybrid_recall", "session_recall") for v in ("v4", "v5", "v6")} | {
    name: Method(name, function=name) for name in ("hybrid_recall_v7", "session_recall_v8", "hybrid_recall_v9",
                                                    "session_recall_v9", "hybrid_recall_v10",
                                                    "session_recall_v10", "hybrid_recall_v11",
                                                    "session_recall_v11", "hybrid_recall_v13",
                                                    "session_recall_v13")} | {
    # the session-start context with the question as its task, its default shares (Recent 0.3
    # of the budget: the newest chunks, whatever the question)
    name: Method(name, function=name) for name in ("auto_context", "auto_context_v10", "auto_context_v12",
                                                    "auto_context_v13", "auto_context_v14",
                                                    "auto_context_v15")}


def _statement(method: Method, *, budget: bool = False) -> sql.Composed:
    """The SQL call of one method; with ``budget``, also the token_budget argument and the
    n_tokens column (what a context at a budget is judged on)."""
    if method.function not in FUNCTIONS:
        raise ConfigError(f"unknown recall function {method.function!r}")
    if method.context:
        names = ["agent_id", "task_text", "task_embedding", "as_of", *method.options, "token_budget"]
    else:
        names = ["agent_id", "query_text", "query_embedding", "k", "as_of", *method.options]
    if budget and not method.context:
        names.append("token_budget")
    args = sql.SQL(", ").join(
        sql.SQL("{} => {}").format(sql.Identifier(n), sql.Placeholder(n)) for n in names)
    columns = "session_id, message_ids, n_tokens, content" if budget or method.context else "session_id, message_ids"
    return sql.SQL("select {} from {}({})").format(
        sql.SQL(columns), sql.Identifier("recall", method.function), args)


def ask(conn: psycopg.Connection, method: Method, question: Question, embedding, k: int,
        *, statement: sql.Composed | None = None, token_budget: int | None = None) -> list[tuple]:
    """The ranking one method returns for one question: (session_id, message_ids) per chunk,
    and n_tokens too when ``token_budget`` is given (the function fills the budget itself)."""
    params = {"agent_id": question.agent_id, "query_text": question.text if method.text else None,
              "query_embedding": embedding if method.embedding else None, "k": k,
              "as_of": question.as_of}
    if method.context:
        if token_budget is None:
            raise ConfigError(f"{method.name} is asked at a token budget only")
        params = {"agent_id": question.agent_id, "task_text": params["query_text"],
                  "task_embedding": params["query_embedding"], "as_of": question.as_of}
    for name, value in method.options.items():
        params[name] = timedelta(days=value) if name == "half_life" and isinstance(value, (int, float)) else value
    if token_budget is not None:
        params["token_budget"] = token_budget
    return conn.execute(statement or _statement(method, budget=token_budget is not None),
                        params).fetchall()


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
    """Ask every question with every method; the scores per method, overall and by category.
    A context method (auto_context) has no ranking: it is left out here (evaluate_budgets)."""
    ks = sorted(set(ks))
    depth = max(max(ks), 20)
    dia_of = dict(conn.execute("select message_id, external_id from recall.messages").fetchall())
    keys = [f"recall@{k}" for k in ks] + ["all@10", "session_recall@5", "mrr"]
    results = {}
    for method in (m for m in methods if not m.context):
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


# ---------------------------------------------------------------- at a token budget

def score_context(context: Sequence[tuple[Sequence[str], int]], question: Question) -> dict[str, float]:
    """Evidence recall of one context: ``context`` is (turns it holds, n_tokens) per piece.

    recall = share of the evidence turns the context holds; all = 1 when it holds every one;
    tokens = what the context costs (a turn held by two pieces is paid twice, as an agent
    reading the context pays it).

    >>> q = Question("a", "?", 1, ["D1:1", "D1:2"], {"s1"}, None)
    >>> score_context([(["D1:1", "D1:3"], 40), (["D1:3"], 10)], q)
    {'recall': 0.5, 'all': 0.0, 'tokens': 50.0}
    """
    evidence = set(question.evidence)
    held = {t for turns, _ in context for t in turns}
    return {"recall": len(held & evidence) / len(evidence), "all": float(evidence <= held),
            "tokens": float(sum(n for _, n in context))}


def fill(ranked: Iterable[tuple[Sequence[str], int]], budget: int) -> list[tuple[Sequence[str], int]]:
    """The first pieces of a ranking whose running token sum stays within ``budget``, stopping
    at the first that would exceed it: the rule of hybrid_recall_v3's token_budget, applied to
    the baselines so that every method is cut the same way.

    >>> fill([(["a"], 100), (["b"], 200), (["c"], 10)], 250)
    [(['a'], 100)]
    """
    out, used = [], 0
    for piece in ranked:
        if used + piece[1] > budget:
            break
        out.append(piece)
        used += piece[1]
    return out


def _budget_summary(rows: list[tuple[int, dict[str, float]]]) -> dict[str, Any]:
    keys = ["recall", "all", "tokens"]
    counted = [r for _, r in rows if "model_tokens" in r]
    by_cat = defaultdict(list)
    for cat, r in rows:
        by_cat[cat].append(r)
    out = _mean([r for _, r in rows], keys)
    if counted:
        # the contexts as the model counts their text (each row's content): how many exceed
        # the budget, and by how much at most
        out["over"] = round(sum(r["model_tokens"] > r["budget"] for r in counted) / len(counted), 4)
        out["over_max"] = max(max(r["model_tokens"] - r["budget"] for r in counted), 0)
    out["by_category"] = {str(c): {**_mean(by_cat[c], keys), "n": len(by_cat[c])}
                          for c in sorted(by_cat)}
    return out


def evaluate_budgets(conn: psycopg.Connection, questions: Sequence[Question], embeddings: Sequence,
                     methods: Sequence[Method], budgets: Sequence[int], *, k: int = 200,
                     progress: Callable[[str, int], Callable[[int], None]] | None = None,
                     counter: Embedder | None = None) -> dict[str, dict[str, Any]]:
    """Each method asked with ``token_budget`` = each budget (the function fills it), scored
    by score_context: {method: {str(budget): {recall, all, tokens, by_category}}}; with
    ``counter`` (an embedder), also the share of contexts whose text its model counts above
    the budget ("over": each row's content counted, summed) and the largest excess
    ("over_max")."""
    dia_of = dict(conn.execute("select message_id, external_id from recall.messages").fetchall())
    results = {}
    for method in methods:
        statement = _statement(method, budget=True)
        advance = progress(f"asking at budgets: {method.name}", len(questions)) if progress else None
        rows: dict[int, list] = {b: [] for b in budgets}
        for question, embedding in zip(questions, embeddings, strict=True):
            for b in budgets:
                got = ask(conn, method, question, embedding, k, statement=statement, token_budget=b)
                context = [([dia_of[m] for m in ids or () if m in dia_of], n) for _, ids, n, _ in got]
                scored = score_context(context, question)
                if counter is not None:
                    scored = {**scored, "budget": b,
                              "model_tokens": sum(counter.count_tokens(text) for *_, text in got)}
                rows[b].append((question.category, scored))
            if advance:
                advance(1)
        results[method.name] = {str(b): _budget_summary(rows[b]) for b in budgets}
    return results


# ---------------------------------------------------------------- single-turn baselines

@dataclass
class Turns:
    """One agent's turns as single documents, each with the speaker's name in its text."""

    dia_ids: list[str]
    texts: list[str]
    n_tokens: list[int]
    vectors: Any = None            # unit vectors, one row per turn
    bm25: Any = None               # a bm25s.BM25 over the texts


@functools.lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def single_turns(dataset: Dataset, embedder: Embedder, *,
                 progress: Callable[[str, int], Callable[[int], None]] | None = None
                 ) -> dict[str, Turns]:
    """Every agent's turns as "Speaker: text" documents: embedded with the same model, token
    counts from the same tokenizer as n_tokens, and a BM25 index (bm25s, English stop words
    and Snowball stemming, as PostgreSQL's 'english' configuration does)."""
    try:
        import bm25s
    except ImportError:
        raise ConfigError("the single-turn baselines need bm25s and PyStemmer: "
                          "pip install 'pyrecall[bench]' (or pass --no-baselines)") from None
    import numpy as np

    total = sum(len(s.messages) for ss in dataset.sessions.values() for s in ss)
    advance = progress("baselines: embedding single turns", total) if progress else None
    stemmer = _stemmer()
    out = {}
    for agent_id, sessions in dataset.sessions.items():
        docs = [(m.external_id, f"{(m.metadata or {}).get('speaker') or m.role.title()}: {m.content}")
                for s in sessions for m in s.messages]
        turns = Turns([d for d, _ in docs], [t for _, t in docs],
                      [embedder.count_tokens(t) for _, t in docs])
        vectors = []
        for i in range(0, len(turns.texts), 64):
            batch = turns.texts[i:i + 64]
            vectors.extend(embedder.embed(batch))
            if advance:
                advance(len(batch))
        turns.vectors = np.asarray(vectors, dtype=np.float32)
        turns.bm25 = bm25s.BM25(k1=1.2, b=0.75)
        turns.bm25.index(bm25s.tokenize(turns.texts, stopwords="en", stemmer=stemmer,
                                        show_progress=False), show_progress=False)
        out[agent_id] = turns
    return out


def baseline_rankings(turns: Turns, question: Question, embedding, *, rrf_k: int = 60
                      ) -> dict[str, list[int]]:
    """Indexes of the agent's turns, best first, for each baseline: dense (cosine of MiniLM
    vectors), bm25, and rrf (their reciprocal-rank fusion, sum of 1 / (rrf_k + rank))."""
    import bm25s
    import numpy as np

    dense = [int(i) for i in np.argsort(-(turns.vectors @ np.asarray(embedding, dtype=np.float32)),
                                        kind="stable")]
    tokens = bm25s.tokenize([question.text], stopwords="en", stemmer=_stemmer(), show_progress=False)
    bm25: list[int] = []
    if tokens.ids and tokens.ids[0]:
        docs, scores = turns.bm25.retrieve(tokens, k=len(turns.texts), show_progress=False)
        bm25 = [int(d) for d, sc in zip(docs[0], scores[0], strict=True) if sc > 0]
    fused: dict[int, float] = defaultdict(float)
    for ranking in (dense, bm25):
        for rank, i in enumerate(ranking, start=1):
            fused[i] += 1.0 / (rrf_k + rank)
    rrf = sorted(fused, key=lambda i: (-fused[i], i))
    return {"baseline_dense": dense, "baseline_bm25": bm25, "baseline_rrf": rrf}


def evaluate_baselines(dataset: Dataset, embeddings: Sequence, budgets: Sequence[int],
                       turns_by_agent: dict[str, Turns]) -> dict[str, dict[str, Any]]:
    """The single-turn baselines cut at each budget by ``fill``, scored by score_context."""
    rows: dict[str, dict[int, list]] = defaultdict(lambda: {b: [] for b in budgets})
    for question, embedding in zip(dataset.questions, embeddings, strict=True):
        turns = turns_by_agent[question.agent_id]
        for name, ranking in baseline_rankings(turns, question, embedding).items():
            ranked = [([turns.dia_ids[i]], turns.n_tokens[i]) for i in ranking]
            for b in budgets:
                rows[name][b].append((question.category, score_context(fill(ranked, b), question)))
    return {name: {str(b): _budget_summary(by_budget[b]) for b in budgets}
            for name, by_budget in rows.items()}


# ---------------------------------------------------------------- one run

def run(path: str | Path, *, dsn: str | None = None, ks: Sequence[int] = DEFAULT_KS,
        methods: Sequence[Method] = DEFAULT_METHODS, limit_conversations: int | None = None,
        limit_questions: int | None = None, one_agent: str | None = None,
        budgets: Sequence[int] = DEFAULT_BUDGETS, baselines: bool = True,
        chunking: str = "window", embedder: Embedder | None = None,
        progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Load a LoCoMo file into a fresh database, ask its questions, return the report.

    ``dsn``: the server to create the throwaway database on (default: a throwaway embedded
    server). ``one_agent``, ``chunking``: see load_file. ``budgets``: also judge every method
    by the evidence its context holds at each token budget (report key "budget", per method),
    and, with ``baselines``, single-turn dense / BM25 / RRF baselines cut at the same budgets.
    The shape of the report is that of ``pyrecall bench locomo --json``.
    """
    from ._scratch import scratch_database

    dataset = load_file(path, limit_conversations=limit_conversations,
                        limit_questions=limit_questions, one_agent=one_agent,
                        chunking=chunking)
    budgets = sorted(set(budgets))
    embedder = embedder or get_embedder("local/all-MiniLM-L6-v2")
    with scratch_database(dsn, dim=embedder.dim) as url, _connect(url) as conn:
        loaded = load(conn, dataset, embedder, progress=progress)
        embeddings = embed_questions(embedder, dataset.questions, progress=progress)
        scores = evaluate(conn, dataset.questions, embeddings, methods, ks=ks, progress=progress)
        if budgets:
            at_budget = evaluate_budgets(conn, dataset.questions, embeddings, methods, budgets,
                                         progress=progress, counter=embedder)
            for name, figures in at_budget.items():
                scores.setdefault(name, {})["budget"] = figures
    if budgets and baselines:
        turns = single_turns(dataset, embedder, progress=progress)
        for name, figures in evaluate_baselines(dataset, embeddings, budgets, turns).items():
            scores[name] = {"budget": figures}
    return {
        "n_questions": len(dataset.questions),
        "n_unparseable_evidence": dataset.n_unparseable,
        "n_skipped_questions": dataset.n_skipped,
        "n_conversations": len({s.session_id.rsplit("/", 1)[0]
                                for ss in dataset.sessions.values() for s in ss}),
        "n_agents": len(dataset.sessions),
        "one_agent": one_agent,
        "chunking": chunking,
        "k": sorted(set(ks)),
        "budgets": budgets,
        "model": embedder.model,
        "load": loaded,
        "methods": scores,
    }


def _connect(url: str) -> psycopg.Connection:
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn
