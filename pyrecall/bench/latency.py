"""Speed at scale: synthetic agents' memories, loaded through the normal path, then timed.

Data (seeded, reproducible):
- agents whose sizes follow Zipf's law (a few very large, most small), ``n_chunks`` in all;
- sessions of 10 user/assistant exchanges (20 messages -> 10 turn_pair chunks), spread over
  the year before now, turns a minute apart;
- text drawn from a Zipf vocabulary of pseudo-words, a fifth of each message from the words
  of the session's topic;
- 384-dim unit vectors in clusters: topic centre + sub-topic + noise (no model at this scale).

Messages go through :func:`pyrecall._ingest.ingest` (COPY + in-database chunking); vectors are
written with binary COPY + UPDATE; the ANN index is built by ``recall.create_vector_index``.
Then, for small / medium / large agents and overall, the p50/p95/p99 latency and recall@10
(against the exact per-agent answer) of: (a) the exact per-agent query, (b) the raw ANN query
(HNSW forced, iterative scan; through the agent's own partial index where it has one), (c) ``recall.hybrid_recall`` with a token budget, (d)
``recall.session_recall``; then (c) under load: queries/s and latency with 1, 2, ... clients
asking at once (:func:`throughput`).

    >>> report = run(n_chunks=20_000, n_agents=50)   # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import queue
import statistics
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from .._errors import ConfigError
from .._ingest import ingest
from ..importers._records import Message, Session

DIM = 384
TURNS_PER_SESSION = 10              # exchanges: 20 messages, 10 turn_pair chunks
N_TOPICS = 256
SUBTOPICS = 16
VOCAB = 30_000
TOPIC_WORDS = 40
SMALL_MAX = 1_000                   # chunks: small <= 1,000 < medium <= 20,000 < large
MEDIUM_MAX = 20_000
CLASSES = ("small", "medium", "large")
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "ve", "da", "gu", "zo", "fe",
             "ri", "an", "el", "on", "is", "ur", "ba", "co", "de", "fi", "ga", "ho", "ju",
             "ki", "la", "mo", "nu", "pe", "qua", "sa", "te", "vi", "wa", "xe", "yo", "ze"]


def size_class(n: int) -> str:
    return "small" if n <= SMALL_MAX else "medium" if n <= MEDIUM_MAX else "large"


def agent_sizes(n_chunks: int, n_agents: int, s: float = 1.0, min_size: int = 10) -> list[int]:
    """Chunks per agent, Zipf-distributed (rank r gets ~ 1/r^s), summing to n_chunks.

    >>> sizes = agent_sizes(20_000, 50)
    >>> sum(sizes), sizes[0] > 10 * sizes[-1]
    (20000, True)
    """
    if n_agents < 1 or n_chunks < n_agents * min_size:
        raise ConfigError(f"need at least {min_size} chunks per agent ({n_agents} agents)")
    weights = np.array([1 / (r ** s) for r in range(1, n_agents + 1)])
    sizes = np.maximum(min_size, np.floor(weights / weights.sum() * n_chunks)).astype(int)
    sizes[0] += n_chunks - sizes.sum()
    return sizes.tolist()


VECTOR_KINDS = ("cluster", "topic")
TOPIC_NOISE = 1.2                   # topic mixtures: noise of each stored vector (norm, ~) ...
QUERY_NOISE = 1.5                   # ... and of each query: it sits away from every stored vector


class Synth:
    """The seeded generator of words and vectors.

    ``vectors="cluster"``: each chunk near its session's topic centre and one of 16 sub-topic
    directions (clean clusters, which an HNSW graph navigates easily). ``vectors="topic"``:
    each chunk a random mix of its session's topic and any other of the 256 topic directions,
    plus noise larger than the mix; queries are such mixes with more noise still. Shaped like
    real embeddings, where every text touches several subjects and a question sits away from
    the statement that answers it (see :func:`topic_mixture`): the nearest neighbours are far
    and nearly tied, so that HNSW misses some of the true top 10, as on real embeddings,
    where clusters let it find them all (figures: bench/LOG.md).
    """

    def __init__(self, seed: int = 7, vectors: str = "cluster"):
        if vectors not in VECTOR_KINDS:
            raise ConfigError(f"vectors must be one of {', '.join(VECTOR_KINDS)}, got {vectors!r}")
        self.kind = vectors
        self.rng = np.random.default_rng(seed)
        rng = np.random.default_rng(seed + 1)
        words = set()
        while len(words) < VOCAB:
            words.add("".join(rng.choice(SYLLABLES, size=rng.integers(2, 5))))
        # shuffled from sorted order: a set's own order changes with each process's hash seed
        self.words = np.array(sorted(sorted(words), key=lambda w: rng.random()))
        ranks = np.arange(1, VOCAB + 1)
        self.cdf = np.cumsum(1 / ranks ** 1.07)
        self.cdf /= self.cdf[-1]
        self.topic_words = rng.integers(0, VOCAB, size=(N_TOPICS, TOPIC_WORDS))
        centres = rng.standard_normal((N_TOPICS, DIM)).astype(np.float32)
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)
        sub = rng.standard_normal((N_TOPICS, SUBTOPICS, DIM)).astype(np.float32)
        self.sub = sub / np.linalg.norm(sub, axis=2, keepdims=True)

    def text(self, topic: int, n_words: int) -> str:
        ids = np.searchsorted(self.cdf, self.rng.random(n_words))
        own = self.rng.random(n_words) < 0.2
        ids[own] = self.topic_words[topic, self.rng.integers(0, TOPIC_WORDS, own.sum())]
        return " ".join(self.words[np.minimum(ids, VOCAB - 1)])

    def query_text(self, topic: int) -> str:
        n = int(self.rng.integers(3, 8))
        ids = self.topic_words[topic, self.rng.integers(0, TOPIC_WORDS, n - 1)]
        return " ".join(self.words[ids]) + " " + self.text(topic, 1)

    def vectors(self, topics: np.ndarray, subs: np.ndarray, noise: float = 0.8) -> np.ndarray:
        """Unit vectors: topic centre + 0.7 * sub-topic direction + noise of norm ~``noise``."""
        g = self.rng.standard_normal((len(topics), DIM)).astype(np.float32) / math.sqrt(DIM)
        v = self.centres[topics] + 0.7 * self.sub[topics, subs] + noise * g
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    def mixtures(self, first: np.ndarray, second: np.ndarray, noise: float = TOPIC_NOISE) -> np.ndarray:
        """Topic mixtures over this generator's 256 topic directions (:func:`topic_mixture`)."""
        return topic_mixture(self.centres, first, second, self.rng, noise=noise)

    def chunk_vectors(self, topics: np.ndarray, subs: np.ndarray) -> np.ndarray:
        """The vectors of chunks whose sessions are about ``topics`` (``subs``: sub-topics, for clusters)."""
        if self.kind == "cluster":
            return self.vectors(topics, subs)
        return self.mixtures(topics, self._other_topic(topics))

    def query_vector(self, topic: int) -> np.ndarray:
        """A query about ``topic``, of the generator's shape."""
        if self.kind == "cluster":
            return self.vectors(np.array([topic]), np.array([int(self.rng.integers(0, SUBTOPICS))]))[0]
        first = np.array([topic])
        return self.mixtures(first, self._other_topic(first), noise=QUERY_NOISE)[0]

    def _other_topic(self, topics: np.ndarray) -> np.ndarray:
        """For each of ``topics``, another of the 256, drawn at random."""
        other = self.rng.integers(0, N_TOPICS - 1, len(topics))
        return other + (other >= topics)


def topic_mixture(directions: np.ndarray, first: np.ndarray, second: np.ndarray,
                  rng: np.random.Generator, *, noise: float = TOPIC_NOISE) -> np.ndarray:
    """Unit vectors shaped like real embeddings: ``w * directions[first] + (1 - w) *
    directions[second]`` (w uniform in 0.2..0.8) plus isotropic noise of norm ~``noise``.

    Unlike clean clusters, the noise spans every dimension, so the neighbourhoods have a high
    intrinsic dimension, as real text embeddings do: an HNSW graph then needs a wider search
    (ef_search) to find the true nearest neighbours, the more so the more vectors it holds.

    >>> rng = np.random.default_rng(0)
    >>> d = rng.standard_normal((256, DIM)); d /= np.linalg.norm(d, axis=1, keepdims=True)
    >>> v = topic_mixture(d, np.array([1, 2]), np.array([3, 4]), rng)
    >>> v.shape, bool(np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5))
    ((2, 384), True)
    """
    w = rng.uniform(0.2, 0.8, (len(first), 1)).astype(np.float32)
    g = rng.standard_normal((len(first), directions.shape[1])).astype(np.float32)
    g *= noise / math.sqrt(directions.shape[1])
    v = w * directions[first] + (1 - w) * directions[second] + g
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


@dataclass
class Agent:
    agent_id: str
    size: int
    topics: np.ndarray              # the topics its sessions are about
    session_topics: dict[str, int]  # session id -> topic


def plan_agents(synth: Synth, sizes: list[int]) -> list[Agent]:
    agents = []
    for i, size in enumerate(sizes):
        n_topics = int(min(N_TOPICS, max(2, round(math.log2(size + 1)))))
        topics = synth.rng.choice(N_TOPICS, size=n_topics, replace=False)
        agents.append(Agent(f"agent-{i:05d}", size, topics, {}))
    return agents


def sessions_of(synth: Synth, agent: Agent, now: datetime) -> Iterator[Session]:
    """The agent's sessions, each TURNS_PER_SESSION exchanges (the last one shorter)."""
    n_sessions = math.ceil(agent.size / TURNS_PER_SESSION)
    starts = np.sort(synth.rng.uniform(0, 365 * 86400, n_sessions))
    for s in range(n_sessions):
        turns = min(TURNS_PER_SESSION, agent.size - s * TURNS_PER_SESSION)
        topic = int(agent.topics[synth.rng.integers(0, len(agent.topics))])
        sid = f"{agent.agent_id}/s{s:05d}"
        agent.session_topics[sid] = topic
        started = now - timedelta(days=365) + timedelta(seconds=float(starts[s]))
        lengths = np.clip(synth.rng.lognormal(3.2, 0.6, 2 * turns), 4, 200).astype(int)
        messages = [Message(None, "user" if j % 2 == 0 else "assistant", "text",
                            synth.text(topic, int(lengths[j])), started + timedelta(minutes=j))
                    for j in range(2 * turns)]
        yield Session(sid, agent.agent_id, started_at=started, messages=messages)


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(p / 100 * len(v)) - 1))]


def _stats(times: list[float]) -> dict[str, float]:
    return {"p50": round(_pct(times, 50), 2), "p95": round(_pct(times, 95), 2),
            "p99": round(_pct(times, 99), 2), "mean": round(statistics.fmean(times), 2) if times else None}


# ---------------------------------------------------------------- load

def load(conn: psycopg.Connection, synth: Synth, agents: list[Agent], *, batch_messages: int = 20_000,
         jobs: int = 1, connect: Callable[[], psycopg.Connection] | None = None,
         progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Ingest every agent's sessions; return messages, seconds spent in ingest, messages/s.

    ``jobs`` > 1 loads over that many connections (``connect()`` opens each), as a bulk
    import of many agents would: the data are generated here, in one seeded order, and each
    batch of ``batch_messages`` goes whole, in one transaction, to whichever connection is free.
    The rate is then messages over the wall time of the whole load.
    """
    now = datetime.now(UTC).replace(microsecond=0)
    total = sum(a.size for a in agents) * 2
    advance = progress("ingesting messages", total) if progress else None

    def batches() -> Iterator[tuple[dict[str, list[Session]], int]]:
        by_agent: dict[str, list[Session]] = {}
        n = 0
        for agent in agents:
            for session in sessions_of(synth, agent, now):
                by_agent.setdefault(session.agent_id, []).append(session)
                n += len(session.messages)
                if n >= batch_messages:
                    yield by_agent, n
                    by_agent, n = {}, 0
        if by_agent:
            yield by_agent, n

    def ingest_batch(c: psycopg.Connection, by_agent: dict[str, list[Session]]) -> int:
        with c.transaction():
            return sum(ingest(c, ss, agent_id=agent_id).inserted for agent_id, ss in by_agent.items())

    n_messages = 0
    if jobs <= 1:
        spent = 0.0
        for by_agent, n in batches():
            t_batch = time.perf_counter()
            n_messages += ingest_batch(conn, by_agent)
            spent += time.perf_counter() - t_batch      # generating the data is not ingest
            if advance:
                advance(n)
    else:
        if connect is None:
            raise ConfigError("jobs > 1 needs connect, to open one connection per job")
        # wall time, generating the data included (it overlaps the ingest)
        n_messages, spent = _load_parallel(batches(), ingest_batch, jobs, connect, advance)
    return {"messages": n_messages, "ingest_s": round(spent, 2), "jobs": max(jobs, 1),
            "messages_per_s": round(n_messages / spent, 1) if spent else None}


def _load_parallel(batches: Iterator[tuple[dict[str, list[Session]], int]],
                   ingest_batch: Callable[[psycopg.Connection, dict[str, list[Session]]], int],
                   jobs: int, connect: Callable[[], psycopg.Connection],
                   advance: Callable[[int], None] | None) -> tuple[int, float]:
    """Feed batches to ``jobs`` threads, one connection each; (messages, wall seconds).

    The queue holds at most two batches a job, so memory stays bounded; a failing job stops
    the load with its error.
    """
    work: queue.Queue = queue.Queue(maxsize=2 * jobs)
    done: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with connect() as c:
                while (item := work.get()) is not None:
                    by_agent, n = item
                    if not errors:
                        done.append(ingest_batch(c, by_agent))
                        if advance:
                            advance(n)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread below
            errors.append(exc)
            while work.get() is not None:             # drain, so that the producer never blocks
                pass

    t = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(jobs)]
    for th in threads:
        th.start()
    for item in batches:
        if errors:
            break
        work.put(item)
    for _ in threads:
        work.put(None)
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return sum(done), time.perf_counter() - t


def set_embeddings(conn: psycopg.Connection, synth: Synth, agents: list[Agent], *,
                   batch: int = 100_000, model: str = "synthetic",
                   progress: Callable[[str, int], Callable[[int], None]] | None = None) -> float:
    """Give every chunk its vector (binary COPY into a temp table, then one UPDATE a batch),
    recorded as made by ``model`` (the client checks it against its query model: a bench that
    queries through the client names the model it queries with)."""
    topic_of = {sid: t for a in agents for sid, t in a.session_topics.items()}
    # in an order that does not depend on how the load interleaved its connections
    rows = conn.execute("select chunk_id, session_id, first_seq from recall.chunks "
                        "order by session_id, kind, first_seq, part").fetchall()
    advance = progress("writing vectors", len(rows)) if progress else None
    t = time.perf_counter()
    conn.execute("create temp table if not exists bench_vectors (chunk_id bigint, embedding vector)")
    for i in range(0, len(rows), batch):
        part = rows[i:i + batch]
        topics = np.array([topic_of[sid] for _, sid, _ in part])
        subs = np.array([(zlib.crc32(sid.encode()) + seq // 2) % SUBTOPICS for _, sid, seq in part])
        vecs = synth.chunk_vectors(topics, subs)
        with conn.transaction():
            conn.execute("truncate bench_vectors")
            with conn.cursor().copy("copy bench_vectors (chunk_id, embedding) from stdin "
                                    "with (format binary)") as cp:
                cp.set_types(["int8", "vector"])
                for (cid, _, _), v in zip(part, vecs, strict=True):
                    cp.write_row([cid, v])
            conn.execute("""update recall.chunks c
                               set embedding = v.embedding, embedding_model = %s,
                                   embedded_at = now()
                              from bench_vectors v where v.chunk_id = c.chunk_id""", [model])
        if advance:
            advance(len(part))
    return time.perf_counter() - t


def build_index(conn: psycopg.Connection, *, maintenance_work_mem: str = "4GB") -> dict[str, Any]:
    """Build the ANN index(es) as the DBA would: ``recall.create_vector_index()`` with its
    defaults where it exists and works, else one pgvector HNSW index over the table."""
    conn.execute(sql.SQL("set maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
    note = None
    has = conn.execute("select exists (select from pg_proc p join pg_namespace n on n.oid = p.pronamespace "
                       "where n.nspname = 'recall' and p.proname = 'create_vector_index')").fetchone()[0]
    t = time.perf_counter()
    done = False
    if has:
        try:
            conn.execute("select * from recall.create_vector_index()").fetchall()
            done = True
        except psycopg.Error as exc:
            note = f"recall.create_vector_index failed, fell back to plain DDL: {str(exc).strip()}"
            t = time.perf_counter()
    if not done:
        conn.execute("create index chunks_embedding_idx on recall.chunks "
                     "using hnsw (embedding vector_cosine_ops)")
    seconds = time.perf_counter() - t
    conn.execute("reset maintenance_work_mem")
    indexes = [r[0] for r in conn.execute(
        "select pg_get_indexdef(i.indexrelid) from pg_index i join pg_class c on c.oid = i.indexrelid "
        "join pg_am am on am.oid = c.relam where i.indrelid = 'recall.chunks'::regclass "
        "and am.amname in ('hnsw', 'diskann') order by 1").fetchall()]
    return {"build_s": round(seconds, 2), "n_indexes": len(indexes),
            "definition": indexes[0] if len(indexes) == 1 else f"{len(indexes)} indexes, e.g. "
            + (indexes[0] if indexes else "none"),
            "note": note, "maintenance_work_mem": maintenance_work_mem}


# ---------------------------------------------------------------- queries

EXACT = """select chunk_id from recall.chunks
           where agent_id = %s and embedding is not null
           order by (embedding <=> %s) + 0, chunk_id limit 10"""
ANN = sql.SQL("""select chunk_id from (select chunk_id, embedding <=> %(q)s as d from recall.chunks
                               where agent_id = %(agent)s{own} order by embedding <=> %(q)s limit 10) x
         order by d, chunk_id""")
ARM = "select chunk_id from recall._vector_arm(%s, %s, 100, null, null, null, null, null) limit 10"
HYBRID = """select chunk_id from recall.hybrid_recall(agent_id => %s, query_text => %s,
            query_embedding => %s, k => 10, token_budget => 2000)"""
SESSION = """select chunk_id from recall.session_recall(agent_id => %s, query_text => %s,
             query_embedding => %s, k => 10, token_budget => 2000)"""


@dataclass
class Query:
    agent: Agent
    vector: np.ndarray
    text: str


def make_queries(synth: Synth, agents: list[Agent], per_class: int) -> dict[str, list[Query]]:
    out: dict[str, list[Query]] = {}
    for cls in CLASSES:
        members = [a for a in agents if size_class(a.size) == cls]
        if not members:
            continue
        qs = []
        for _ in range(per_class):
            a = members[int(synth.rng.integers(0, len(members)))]
            topic = int(a.topics[synth.rng.integers(0, len(a.topics))])
            qs.append(Query(a, synth.query_vector(topic), synth.query_text(topic)))
        out[cls] = qs
    return out


def _ann_query(conn: psycopg.Connection, agent_id: str) -> str:
    """(b) for one agent. A partial index serves only a WHERE that implies its predicate, so an
    agent with an index of its own is asked with that predicate too, as recall._vector_arm
    asks; any other agent has only the whole-table index, if one exists, or the exact plan."""
    row = conn.execute("select recall._agent_key_predicate('agent_id', recall._agent_key(%s)) "
                       "from recall._agent_vector_index(%s) v where v.index_oid is not null",
                       [agent_id, agent_id]).fetchone()
    # the predicate is SQL that recall._agent_key_predicate wrote (the agent's key as a literal,
    # which the planner must see to match the partial index)
    return ANN.format(own=sql.SQL(" and " + row[0]) if row else sql.SQL("")).as_string(conn)


def _timed(conn: psycopg.Connection, query: str, params) -> tuple[float, list[int]]:
    t = time.perf_counter()
    rows = conn.execute(query, params).fetchall()
    return (time.perf_counter() - t) * 1000, [r[0] for r in rows]


def measure(conn: psycopg.Connection, queries: dict[str, list[Query]], *, ef_search: int = 40,
            progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Latency and recall@10 vs exact of (a)-(d), per size class and overall."""
    total = sum(len(q) for q in queries.values())
    advance = progress("querying", total * 2) if progress else None
    conn.execute("set hnsw.iterative_scan = relaxed_order")
    conn.execute(sql.SQL("set hnsw.ef_search = {}").format(sql.Literal(int(ef_search))))
    ann_of = {a: _ann_query(conn, a) for a in {q.agent.agent_id for qs in queries.values() for q in qs}}
    per: dict[str, dict[str, list]] = {}
    for rnd in range(2):                      # round 0 warms the caches; round 1 is measured
        for cls, qs in queries.items():
            m = per.setdefault(cls, {k: [] for k in ("exact", "ann", "hybrid", "session",
                                                     "ann_recall", "arm_recall")})
            for q in qs:
                t_a, truth = _timed(conn, EXACT, [q.agent.agent_id, q.vector])
                with conn.transaction():
                    conn.execute("set local enable_sort = off")   # only the HNSW index can order
                    t_b, ann = _timed(conn, ann_of[q.agent.agent_id], {"q": q.vector, "agent": q.agent.agent_id})
                _, arm = _timed(conn, ARM, [q.agent.agent_id, q.vector])
                t_c, _ = _timed(conn, HYBRID, [q.agent.agent_id, q.text, q.vector])
                t_d, _ = _timed(conn, SESSION, [q.agent.agent_id, q.text, q.vector])
                if rnd == 1:
                    n = max(1, len(truth))
                    m["exact"].append(t_a)
                    m["ann"].append(t_b)
                    m["hybrid"].append(t_c)
                    m["session"].append(t_d)
                    m["ann_recall"].append(len(set(ann) & set(truth)) / n)
                    m["arm_recall"].append(len(set(arm) & set(truth)) / n)
                if advance:
                    advance(1)
    out: dict[str, Any] = {}
    pooled: dict[str, list] = {}
    for m in per.values():
        for k, v in m.items():
            pooled.setdefault(k, []).extend(v)
    for cls, m in [*per.items(), ("overall", pooled)]:
        r = {name: _stats(m[name]) for name in ("exact", "ann", "hybrid", "session")}
        r["ann"]["recall@10"] = round(statistics.fmean(m["ann_recall"]), 4)
        r["hybrid"]["vector_arm_recall@10"] = round(statistics.fmean(m["arm_recall"]), 4)
        r["exact"]["recall@10"] = 1.0
        r["hybrid_over_exact"] = {p: round(r["hybrid"][p] / r["exact"][p], 3) if r["exact"][p] else None
                                  for p in ("p50", "p95", "p99")}
        r["n_queries"] = len(m["exact"])
        out[cls] = r
    return out


def throughput(connect: Callable[[], psycopg.Connection], queries: dict[str, list[Query]],
               clients: list[int], *, seconds: float = 10.0, ef_search: int = 40,
               progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """(c) under load: for each n in ``clients``, n connections (one thread each) ask
    ``recall.hybrid_recall`` the pooled queries of every size class in turn, each from its own
    starting point, for ``seconds``; queries/s, latency percentiles and queries/s over the
    first n's (the scaling) in the same run."""
    pool = [q for cls in CLASSES for q in queries.get(cls, [])]
    if not pool or not clients:
        return {}
    advance = progress("under load", len(clients)) if progress else None
    out: dict[str, Any] = {}
    base_qps = None
    for n in clients:
        done, elapsed = _under_load(connect, pool, n, seconds, ef_search)
        qps = len(done) / elapsed if elapsed else 0.0
        base_qps = base_qps or qps
        out[str(n)] = {**_stats(done), "qps": round(qps, 1), "n_queries": len(done),
                       "qps_over_first": round(qps / base_qps, 3) if base_qps else None}
        if advance:
            advance(1)
    return {"seconds": seconds, "queries": len(pool), "by_clients": out}


def _under_load(connect: Callable[[], psycopg.Connection], pool: list[Query], n: int,
                seconds: float, ef_search: int) -> tuple[list[float], float]:
    """n clients asking at once: every latency (ms) and the wall seconds from the common start
    to the last client's last answer. Each connection first asks every pooled query once,
    unmeasured (plans cached, pages read), so that 1 and 8 clients start equally warm; each
    asks at least once measured. A failing client stops the run with its error."""
    conns: list[psycopg.Connection] = []
    times: list[list[float]] = [[] for _ in range(n)]
    errors: list[BaseException] = []
    ready = threading.Barrier(n + 1)
    deadline = [float("inf")]

    def client(i: int) -> None:
        c, j = conns[i], i * len(pool) // n
        try:
            c.execute("set hnsw.iterative_scan = relaxed_order")
            c.execute(sql.SQL("set hnsw.ef_search = {}").format(sql.Literal(int(ef_search))))
            for q in pool:
                c.execute(HYBRID, [q.agent.agent_id, q.text, q.vector]).fetchall()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread below
            errors.append(exc)
        ready.wait()
        while not errors:
            q = pool[j % len(pool)]
            j += 1
            try:
                t, _ = _timed(c, HYBRID, [q.agent.agent_id, q.text, q.vector])
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
                return
            times[i].append(t)
            if time.perf_counter() >= deadline[0]:
                return

    try:
        for _ in range(n):
            conns.append(connect())
        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
        for th in threads:
            th.start()
        ready.wait()                                  # every client warm: the clock starts
        t0 = time.perf_counter()
        deadline[0] = t0 + seconds
        for th in threads:
            th.join()
        elapsed = time.perf_counter() - t0
    finally:
        for c in conns:
            c.close()
    if errors:
        raise errors[0]
    return [t for ts in times for t in ts], elapsed


# ---------------------------------------------------------------- one run

def parse_sizes(text: str) -> list[int]:
    """'100000x1,5000x10,20' -> [100000, 5000 (ten times), 20]: chunks per agent.

    >>> parse_sizes("300x2, 20")
    [300, 300, 20]
    """
    sizes: list[int] = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        size, x, times = part.partition("x")
        try:
            n, k = int(size), int(times if x else 1)
        except ValueError:
            raise ConfigError(f"expected sizes like 100000x1,5000x10, got {part!r}") from None
        if n < 1 or k < 1:
            raise ConfigError(f"sizes and counts must be positive, got {part!r}")
        sizes += [n] * k
    if not sizes:
        raise ConfigError("no agent sizes given")
    return sizes


def table_state(conn: psycopg.Connection) -> dict[str, Any]:
    """What the write path left in recall.chunks: dead tuples, and the share of pages marked
    all-visible (index-only scans skip the heap only there)."""
    row = conn.execute("""select s.n_live_tup, s.n_dead_tup, c.relpages, c.relallvisible,
                                 s.last_autovacuum, s.last_autoanalyze
                          from pg_stat_user_tables s join pg_class c on c.oid = s.relid
                          where s.relid = 'recall.chunks'::regclass""").fetchone()
    return {"live": row[0], "dead": row[1], "pages": row[2],
            "all_visible": round(row[3] / row[2], 3) if row[2] else None,
            "autovacuumed": row[4] is not None, "autoanalyzed": row[5] is not None}


def _backend_cpu_s(conn: psycopg.Connection) -> float | None:
    """CPU seconds the connection's server process has used (user + system, from /proc: a
    server on this machine only), or None. Unlike wall time, it does not grow with the load
    of a shared machine."""
    import os

    try:
        pid = conn.info.backend_pid
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def hybrid_pass(conn: psycopg.Connection, queries: dict[str, list[Query]]) -> dict[str, Any]:
    """hybrid_recall over every query once, in the order given (no warm-up): latency stats,
    and the server's CPU per call (mean; None when the server's /proc is out of reach)."""
    cpu0 = _backend_cpu_s(conn)
    times = [_timed(conn, HYBRID, [q.agent.agent_id, q.text, q.vector])[0]
             for qs in queries.values() for q in qs]
    cpu1 = _backend_cpu_s(conn)
    cpu = round((cpu1 - cpu0) * 1000 / len(times), 2) if cpu0 is not None and cpu1 is not None and times else None
    return {**_stats(times), "cpu_ms_per_call": cpu}


def after_embed(conn: psycopg.Connection, queries: dict[str, list[Query]]) -> dict[str, Any]:
    """hybrid_recall right after every chunk got its vector by UPDATE (as the embedding
    worker writes them), then after each of the things autovacuum would eventually do, one
    at a time, so that the cost of each shows: reading every row once (sets the hint bits),
    cleaning the GIN pending lists, VACUUM (dead tuples, visibility map)."""
    out: dict[str, Any] = {}
    steps: list[tuple[str, Callable[[], Any] | None]] = [
        ("right_after", None),
        ("again", None),
        ("after_reading_every_row", lambda: conn.execute("select count(*) from recall.chunks where length(content) >= 0").fetchone()),
        ("after_gin_clean_pending_list", lambda: conn.execute(
            "select sum(gin_clean_pending_list(i.indexrelid::regclass))::bigint from pg_index i "
            "join pg_class c on c.oid = i.indexrelid join pg_am am on am.oid = c.relam "
            "where i.indrelid = 'recall.chunks'::regclass and am.amname = 'gin'").fetchone()),
        ("after_vacuum", lambda: conn.execute("vacuum recall.chunks")),
    ]
    for name, action in steps:
        t = time.perf_counter()
        result = action() if action is not None else None
        took = time.perf_counter() - t
        state = table_state(conn)
        out[name] = {"hybrid": hybrid_pass(conn, queries), "step_s": round(took, 2), "table": state}
        if name == "after_gin_clean_pending_list":
            out[name]["pending_pages_cleaned"] = result[0]
    return out


def run(n_chunks: int = 20_000, n_agents: int = 50, *, dsn: str | None = None, seed: int = 7,
        queries_per_class: int = 100, ef_search: int = 40, load_jobs: int = 1,
        clients: list[int] | None = None, clients_seconds: float = 10.0,
        sizes: list[int] | None = None, vectors: str = "cluster", measure_after_embed: bool = False,
        keep: bool = False, progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Generate, load, index and time; return the report of ``pyrecall bench latency --json``.

    ``sizes``: chunks per agent (instead of ``n_chunks`` over ``n_agents`` by Zipf's law);
    ``vectors``: "cluster" or "topic" (see :class:`Synth`); ``measure_after_embed``: first
    build the indexes and ANALYZE right after writing the vectors, time hybrid_recall then
    and after each maintenance step (:func:`after_embed`), before the usual measurement;
    ``keep`` (with ``dsn``): leave the database on that server, its URL in the report ("url").
    """
    from ._scratch import scratch_database
    from .locomo import _connect

    synth = Synth(seed, vectors)
    agents = plan_agents(synth, sizes if sizes else agent_sizes(n_chunks, n_agents))
    n_agents = len(agents)
    fresh = None
    with scratch_database(dsn, keep=keep) as url, _connect(url) as conn:
        server = conn.execute("select version()").fetchone()[0]
        loaded = load(conn, synth, agents, jobs=load_jobs, connect=lambda: _connect(url),
                      progress=progress)
        chunks = conn.execute("select count(*) from recall.chunks").fetchone()[0]
        if measure_after_embed:                 # the state a first bulk load leaves
            conn.execute("vacuum analyze recall.chunks")
            conn.execute("vacuum analyze recall.messages")
            # autovacuum would do the steps of after_embed at a moment of its choosing, in the
            # middle of the measurement: kept off the table until they are measured one by one
            conn.execute("alter table recall.chunks set (autovacuum_enabled = off)")
        vectors_s = set_embeddings(conn, synth, agents, progress=progress)
        if measure_after_embed:
            index = build_index(conn)
            conn.execute("analyze recall.chunks")
            conn.execute("select recall.summarize_sessions()")
            fresh = after_embed(conn, make_queries(synth, agents, max(1, queries_per_class // 2)))
            conn.execute("alter table recall.chunks reset (autovacuum_enabled)")
        t = time.perf_counter()
        conn.execute("vacuum analyze recall.chunks")
        conn.execute("vacuum analyze recall.messages")
        vacuum_s = time.perf_counter() - t
        if not measure_after_embed:
            index = build_index(conn)
        t = time.perf_counter()
        conn.execute("select recall.summarize_sessions()")    # (again, if measure_after_embed: a no-op)
        summarize_s = time.perf_counter() - t
        sizes = dict(zip(("database", "chunks_total", "chunks_heap", "ann_index", "messages_total"),
                         conn.execute("""select pg_database_size(current_database()),
                    pg_total_relation_size('recall.chunks'), pg_relation_size('recall.chunks'),
                    coalesce((select sum(pg_relation_size(i.indexrelid)) from pg_index i
                              join pg_class c on c.oid = i.indexrelid join pg_am am on am.oid = c.relam
                              where i.indrelid = 'recall.chunks'::regclass
                                and am.amname in ('hnsw', 'diskann')), 0),
                    pg_total_relation_size('recall.messages')""").fetchone(), strict=True))
        queries = make_queries(synth, agents, queries_per_class)
        config = {k: json.loads(v) for k, v in conn.execute(
            "select key, value::text from recall.config where key ~ '^(ann_|exact_scan|agent_index)' order by key")}
        results = measure(conn, queries, ef_search=ef_search, progress=progress)
        under_load = throughput(lambda: _connect(url), queries, list(clients or []),
                                seconds=clients_seconds, ef_search=ef_search, progress=progress)
    per_million = 1e6 / chunks if chunks else 0
    classes = {cls: sum(1 for a in agents if size_class(a.size) == cls) for cls in CLASSES}
    return {
        "chunks": chunks, "agents": n_agents, "messages": loaded["messages"],
        "agent_sizes": {"largest": max(a.size for a in agents), "smallest": min(a.size for a in agents),
                        "by_class": classes},
        "ingest": loaded,
        "vectors_s": round(vectors_s, 2), "vacuum_s": round(vacuum_s, 2),
        "index": index,
        "summarize_s": round(summarize_s, 2),
        "size_bytes": {k: int(v) for k, v in sizes.items()},
        "size_gib_per_million_chunks": {k: round(int(v) * per_million / 2**30, 3) for k, v in sizes.items()},
        "ef_search": ef_search,
        "vectors": vectors,
        "vector_search_config": config,
        "after_embed": fresh,
        "server": server,
        "latency_ms": results,
        "under_load": under_load,
        **({"url": url} if keep else {}),
    }
