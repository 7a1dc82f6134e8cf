"""Vector index measurements: build time, size, filtered recall@10 and latency per agent size.

Loads a synthetic table straight into recall.chunks (COPY, binary: this measures the vector
arm, not chunking), builds the index through recall.create_vector_index, then for agents of
several sizes asks recall._vector_arm and recall.hybrid_recall, comparing with the exact
answer computed in numpy.

    pyrecall bench vector-index --chunks 100000 --method hnsw
    pyrecall bench vector-index --chunks 200000 --method hnsw \\
        --options '{"m": 8, "ef_construction": 32}' --fractions 0.0001,0.01,0.1,0.5 --json

The data: 384-dim unit vectors in 100 clusters (see `clustered`), each chunk in a uniformly
chosen cluster whatever its agent — the hard case for a filtered ANN search, since an agent's
chunks are then spread over the whole graph. Text: 20 words of a 5000-word Zipf vocabulary. Agents: one per fraction asked
(``frac-0.01`` holds 1% of the chunks, ...), the rest spread over filler agents of ~1000.
With ``--dsn`` the benchmark database is created on that server (the role needs CREATEDB);
without it, a throwaway embedded server is started in a temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from .. import _db, _migrate

DIM = 384
BENCH_DB = "pyrecall_bench_index"


def clustered(n: int, *, seed: int = 0, clusters: int = 100, latent: int = 16):
    """(vectors, sample): n unit vectors (float32) in clusters, and a function drawing query
    vectors from the same distribution.

    Clusters with a realistic intrinsic dimension: points drawn around `clusters` centres in
    a `latent`-dimensional space, mapped to 384 dimensions by a fixed random linear map, plus
    a little isotropic noise. (Isotropic Gaussian clusters in 384 dimensions have no
    neighbourhood structure at all — within a cluster every point is about as far as any
    other — which neither real embedding models nor any ANN index can work with: an HNSW
    graph on them finds far fewer of the true neighbours than on real embeddings.)
    """
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=1.0, size=(clusters, latent))
    lift = rng.normal(size=(latent, DIM)) / np.sqrt(latent)

    def draw(m: int, r: np.random.Generator) -> np.ndarray:
        z = centers[r.integers(0, clusters, m)] + r.normal(size=(m, latent))
        v = z @ lift + r.normal(scale=0.05, size=(m, DIM))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v.astype(np.float32)

    vecs = np.concatenate([draw(min(50_000, n - i), rng) for i in range(0, n, 50_000)]) if n else \
        np.zeros((0, DIM), np.float32)
    qrng = np.random.default_rng(seed + 99)
    return vecs, lambda: draw(1, qrng)[0]


def synthetic(n: int, fractions: list[float], *, seed: int = 0, filler_size: int = 1000):
    """(agents, vectors, sample): one agent per fraction (``frac-0.01`` holds 1% of the rows),
    the rest in filler agents of `filler_size`, shuffled; vectors from `clustered`, each row
    in a cluster chosen whatever its agent — the hard case for a filtered ANN search, since
    an agent's chunks are then spread over the whole graph."""
    rng = np.random.default_rng(seed)
    agents = []
    for f in fractions:
        agents += [f"frac-{f:g}"] * max(1, round(n * f))
    rest = n - len(agents)
    if rest < 0:
        raise SystemExit("the fractions add up to more than 1")
    agents += [f"filler-{i // filler_size}" for i in range(rest)]
    agents = np.array(agents, dtype=object)
    rng.shuffle(agents)
    vecs, sample = clustered(n, seed=seed)
    return agents, vecs, sample


VOCAB = ["".join(s) for s in np.random.default_rng(42).choice(
    list("bcdfghklmnprstvz"), size=(5000, 3)).tolist()]
VOCAB = [w[0] + "a" + w[1] + "o" + w[2] for w in VOCAB]           # 5000 pronounceable words
ZIPF = 1.0 / np.arange(1, len(VOCAB) + 1) ** 1.1
ZIPF /= ZIPF.sum()


def words(rng: np.random.Generator, n: int, rows: int | None = None):
    """n words of the Zipf vocabulary (a few common, most rare, as in real text): one text,
    or a list of `rows` texts."""
    picks = rng.choice(len(VOCAB), size=(rows or 1, n), p=ZIPF)
    texts = [" ".join(VOCAB[i] for i in row) for row in picks]
    return texts if rows is not None else texts[0]


def query_words(rng: np.random.Generator, n: int = 3) -> str:
    """A query's words: content words (ranks 100-5000 of the vocabulary), as a question has
    once stop words are gone; the 100 most common words are in most chunks."""
    return " ".join(VOCAB[i] for i in rng.integers(100, len(VOCAB), n))


def load(conn: psycopg.Connection, agents: np.ndarray, vecs: np.ndarray, *, session_size: int = 100,
         seed: int = 0, tag: str = "", metadata: list[str] | None = None, n_words: int = 20) -> None:
    """Sessions (`session_size` chunks each, ids ``<agent>/<tag>s<n>``), then the chunks by
    binary COPY into recall.chunks, straight (the chunking triggers are off meanwhile);
    `metadata`: one JSON text per chunk (an object, stored as one: a text given to a jsonb
    column in binary COPY would be stored as a JSON string); `n_words`: words of text per chunk."""
    import json

    from psycopg.types.json import Jsonb

    rng = np.random.default_rng(seed + 1)
    n = len(agents)
    seen: dict[str, int] = {}
    sessions, session_of = {}, []
    for a in agents:
        i = seen.get(a, 0)
        seen[a] = i + 1
        sid = f"{a}/{tag}s{i // session_size}"
        sessions[sid] = a
        session_of.append(sid)
    year = 365 * 86400
    ages = rng.uniform(0, year, n)
    texts = words(rng, n_words, n)
    with conn.cursor() as cur:
        with cur.copy("copy recall.sessions (session_id, agent_id) from stdin") as cp:
            for sid, a in sessions.items():
                cp.write_row([sid, a])
        cur.execute("alter table recall.chunks disable trigger user")
        now = time.time()
        with cur.copy("copy recall.chunks (agent_id, session_id, kind, first_seq, message_ids, "
                      "content, n_tokens, created_at, embedding, metadata) from stdin (format binary)") as cp:
            cp.set_types(["text", "text", "text", "int4", "int8[]", "text", "int4", "timestamptz", "vector",
                          "jsonb"])
            import datetime as dt
            for i in range(n):
                cp.write_row([agents[i], session_of[i], "message", i, [i], texts[i], 30,
                              dt.datetime.fromtimestamp(now - ages[i], dt.UTC), vecs[i],
                              Jsonb(json.loads(metadata[i]) if metadata is not None else {})])
        cur.execute("alter table recall.chunks enable trigger user")
    conn.execute("vacuum analyze recall.chunks")
    conn.execute("analyze recall.sessions")


def exact_top(vecs: np.ndarray, rows: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    """chunk ids (row + 1) of the k nearest rows among `rows` by cosine distance."""
    d = 1 - vecs[rows] @ (q / np.linalg.norm(q))
    order = np.lexsort((rows, d))[:k]
    return [int(r) + 1 for r in rows[order]]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def backend_cpu(conn) -> Callable[[], float]:
    """Seconds of CPU the connection's server process has used so far (from /proc: the
    server runs on this machine), or a clock that always says 0 elsewhere. CPU time per call
    does not grow when other processes crowd the CPU, unlike wall time: it is what a call
    would take on an idle machine (everything here is in memory)."""
    pid = conn.execute("select pg_backend_pid()").fetchone()[0]
    stat = Path(f"/proc/{pid}/stat")
    tick = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / tick   # utime + stime
    return used


def measure(conn, agents, vecs, sample, fractions, *, queries: int, k: int = 10):
    """Per agent: recall@10 of _vector_arm (n=10, and the top 10 of n=100) against the exact
    answer; wall-time p50/p95 of _vector_arm and of hybrid_recall; mean server CPU per call."""
    out = {}
    rng = np.random.default_rng(11)
    cpu = backend_cpu(conn)
    calls = {
        "arm_n10": ("select chunk_id from recall._vector_arm(%s, %s, 10, null, null, null, null, null)", 2),
        "arm_n100": ("select chunk_id from recall._vector_arm(%s, %s, 100, null, null, null, null, null)", 2),
        "hybrid": ("select chunk_id from recall.hybrid_recall(%s, %s, %s, token_budget => 2000)", 3),
    }
    for f in fractions:
        agent = f"frac-{f:g}"
        rows = np.nonzero(agents == agent)[0]
        qs = [sample() for _ in range(queries)]
        truths = [set(exact_top(vecs, rows, q, k)) for q in qs]
        texts = [query_words(rng) for _ in qs]
        report = {"rows": int(len(rows))}
        for name, (sql, nargs) in calls.items():
            wall, got = [], []
            c0 = cpu()
            for q, text in zip(qs, texts, strict=True):
                args = [agent, q] if nargs == 2 else [agent, text, q]
                t0 = time.perf_counter()
                got.append([r[0] for r in conn.execute(sql, args)])
                wall.append(time.perf_counter() - t0)
            report[f"{name}_cpu_ms"] = round((cpu() - c0) / len(qs) * 1000, 2)
            report[f"{name}_p50_ms"] = round(pct(wall, 50) * 1000, 2)
            report[f"{name}_p95_ms"] = round(pct(wall, 95) * 1000, 2)
            if name.startswith("arm"):
                recalls = [len(t & set(g[:k])) / len(t) for t, g in zip(truths, got, strict=True)]
                report[f"{name}_recall@10"] = round(statistics.mean(recalls), 4)
                report[f"{name}_min_recall@10"] = round(min(recalls), 2)
        out[agent] = report
    return out


def main(args) -> dict:
    """Run with options ``args`` (chunks, method, options, scope, keep_index, fractions, queries,
    dsn, keep, db, embedding_storage; env: take CHUNKS, INDEX, SCOPE, M, ... and
    PYRECALL_ADMIN_DSN from the environment, as `make bench-index` passes them)."""
    if args.env:
        from .._index import MAKE_OPTIONS
        env = lambda name: os.environ.get(name, "").strip() or None  # noqa: E731
        args.chunks = int(env("CHUNKS") or args.chunks)
        args.method = env("INDEX") or args.method
        args.scope = env("SCOPE") or args.scope
        args.dsn = args.dsn or env("PYRECALL_ADMIN_DSN")
        options = json.loads(args.options)
        options.update({key: env(var) for var, key in MAKE_OPTIONS.items() if env(var)})
        args.options = json.dumps(options)
    fractions = [float(x) for x in args.fractions.split(",")]

    tmp = None
    if args.dsn:
        admin = args.dsn
    else:
        tmp = Path(tempfile.mkdtemp(prefix="pyrecall-bench-"))
        os.chmod(tmp, 0o755)
        admin = _db.start(tmp, settings={"fsync": "off", "full_page_writes": "off",
                                         "synchronous_commit": "off"})
    try:
        return run(admin, args, fractions)
    finally:
        if tmp is not None:
            _db.stop(tmp)
            shutil.rmtree(tmp, ignore_errors=True)


def run(admin: str, args, fractions) -> dict:
    info = psycopg.conninfo.conninfo_to_dict(admin)
    url = psycopg.conninfo.make_conninfo(**{**info, "dbname": args.db})
    agents, vecs, sample = synthetic(args.chunks, fractions)
    report = {"chunks": args.chunks, "method": args.method, "options": json.loads(args.options),
              "scope": args.scope, "embedding_storage": args.embedding_storage or "external (default)"}
    with psycopg.connect(admin, autocommit=True) as c:
        exists = c.execute("select 1 from pg_database where datname = %s", [args.db]).fetchone()
        if exists and not args.keep:
            c.execute(psycopg.sql.SQL("drop database {} with (force)").format(psycopg.sql.Identifier(args.db)))
            exists = None
        if not exists:
            c.execute(psycopg.sql.SQL("create database {}").format(psycopg.sql.Identifier(args.db)))
    with psycopg.connect(url, autocommit=True) as conn:
        _migrate.migrate(conn, dim=DIM)
        register_vector(conn)
        if not conn.execute("select count(*) from recall.chunks").fetchone()[0]:
            if args.embedding_storage:
                conn.execute(psycopg.sql.SQL("alter table recall.chunks alter column embedding set storage {}")
                             .format(psycopg.sql.SQL(args.embedding_storage)))
            t0 = time.perf_counter()
            load(conn, agents, vecs)
            report["load_s"] = round(time.perf_counter() - t0, 1)
            log(f"loaded {args.chunks} chunks in {report['load_s']} s")
        if not args.keep_index:
            conn.execute("select recall.drop_vector_index()")
        if args.method != "none":
            ddl = [r[0] for r in conn.execute("select recall.vector_index_ddl(%s, %s, %s)",
                                              [args.method, args.options, args.scope])]
            t0 = time.perf_counter()
            for stmt in ddl:
                if stmt.startswith("create index"):
                    log(stmt)
                conn.execute(stmt)
            report["build_s"] = round(time.perf_counter() - t0, 1)
            conn.execute("analyze recall.chunks")
            report["indexes"] = [
                {"name": r[0], "agent": r[1], "rows": r[2], "mb": round(r[3] / 2**20, 1), "build_s": r[4]}
                for r in conn.execute("select index_name, agent_id, index_rows, size_bytes, build_seconds "
                                      "from recall.index_info()")]
            report["index_mb"] = round(sum(i["mb"] for i in report["indexes"]), 1)
            log(f"built in {report['build_s']} s, {report['index_mb']} MB: "
                + json.dumps(report["indexes"]))
        report["load_average"] = os.getloadavg()
        report["agents"] = measure(conn, agents, vecs, sample, fractions, queries=args.queries)
        report["load_average"] = [round((a + b) / 2, 1) for a, b in zip(report["load_average"],
                                                                     os.getloadavg(), strict=True)]
        for a, r in report["agents"].items():
            log(f"{a:14} {json.dumps(r)}")
    return report


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
