"""Vector index measurements: build time, size, filtered recall@10 and latency per agent size.

Loads a synthetic table straight into recall.chunks (COPY, binary: this measures the vector
arm, not chunking), builds the index through recall.create_vector_index, then for agents of
several sizes asks recall._vector_arm and recall.hybrid_recall, comparing with the exact
answer computed in numpy.

    .venv/bin/python bench/index_build.py --chunks 100000 --method hnsw
    .venv/bin/python bench/index_build.py --chunks 200000 --method hnsw \\
        --options '{"m": 8, "ef_construction": 32}' --fractions 0.0001,0.01,0.1,0.5 --json

The data: 384-dim unit vectors in 100 clusters (see `clustered`), each chunk in a uniformly
chosen cluster whatever its agent — the hard case for a filtered ANN search, since an agent's
chunks are then spread over the whole graph. Text: 20 words of a 5000-word Zipf vocabulary. Agents: one per fraction asked
(``frac-0.01`` holds 1% of the chunks, ...), the rest spread over filler agents of ~1000.
With ``--dsn`` the benchmark database is created on that server (the role needs CREATEDB);
without it, a throwaway embedded server is started in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pyrecall import _db, _migrate  # noqa: E402

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
    graph on them reached recall@10 0.83 at ef_search 200, unfiltered.)
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


def load(conn: psycopg.Connection, agents: np.ndarray, vecs: np.ndarray, *, session_size: int = 100,
         seed: int = 0, tag: str = "", metadata: list[str] | None = None, n_words: int = 20) -> None:
    """Sessions (`session_size` chunks each, ids ``<agent>/<tag>s<n>``), then the chunks by
    binary COPY into recall.chunks, straight (the chunking triggers are off meanwhile);
    `metadata`: one JSON text per chunk; `n_words`: words of text per chunk."""
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
                              metadata[i] if metadata is not None else "{}"])
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


def measure(conn, agents, vecs, sample, fractions, *, queries: int, k: int = 10):
    out = {}
    rng = np.random.default_rng(11)
    for f in fractions:
        agent = f"frac-{f:g}"
        rows = np.nonzero(agents == agent)[0]
        recalls, recalls_100, t_arm, t_arm100, t_hybrid = [], [], [], [], []
        for _ in range(queries):
            q = sample()
            truth = set(exact_top(vecs, rows, q, k))
            t0 = time.perf_counter()
            got = [r[0] for r in conn.execute(
                "select chunk_id from recall._vector_arm(%s, %s, %s, null, null, null, null, null)",
                [agent, q, k])]
            t_arm.append(time.perf_counter() - t0)
            recalls.append(len(truth & set(got)) / len(truth))
            t0 = time.perf_counter()
            got100 = [r[0] for r in conn.execute(
                "select chunk_id from recall._vector_arm(%s, %s, 100, null, null, null, null, null)",
                [agent, q])]
            t_arm100.append(time.perf_counter() - t0)
            recalls_100.append(len(truth & set(got100[:k])) / len(truth))
            t0 = time.perf_counter()
            conn.execute("select count(*) from recall.hybrid_recall(%s, %s, %s, token_budget => 2000)",
                         [agent, words(rng, 3), q]).fetchone()
            t_hybrid.append(time.perf_counter() - t0)
        ms = lambda xs, p: round(pct(xs, p) * 1000, 2)  # noqa: E731
        out[agent] = {
            "rows": int(len(rows)),
            "recall@10": round(statistics.mean(recalls), 4),
            "min_recall@10": round(min(recalls), 2),
            "recall@10_of_n100": round(statistics.mean(recalls_100), 4),
            "arm_n10_p50_ms": ms(t_arm, 50), "arm_n10_p95_ms": ms(t_arm, 95),
            "arm_n100_p50_ms": ms(t_arm100, 50), "arm_n100_p95_ms": ms(t_arm100, 95),
            "hybrid_p50_ms": ms(t_hybrid, 50), "hybrid_p95_ms": ms(t_hybrid, 95),
        }
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--method", default="auto", help="auto | hnsw | diskann | none")
    ap.add_argument("--options", default="{}", help="JSON options of create_vector_index")
    ap.add_argument("--scope", default="agents", help="agents | table | both")
    ap.add_argument("--keep-index", action="store_true", help="keep the indexes there (refresh only)")
    ap.add_argument("--fractions", default="0.0001,0.01,0.1,0.5")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--dsn", default=None, help="admin URL of a server (default: a throwaway embedded one)")
    ap.add_argument("--keep", action="store_true", help="reuse the loaded database if it exists")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--env", action="store_true",
                    help="take CHUNKS, INDEX, SCOPE, M, EF_CONSTRUCTION, ... and PYRECALL_ADMIN_DSN "
                         "from the environment (make bench-index)")
    args = ap.parse_args(argv)
    if args.env:
        from pyrecall._index import MAKE_OPTIONS
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
        report = run(admin, args, fractions)
    finally:
        if tmp is not None:
            _db.stop(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))


def run(admin: str, args, fractions) -> dict:
    info = psycopg.conninfo.conninfo_to_dict(admin)
    url = psycopg.conninfo.make_conninfo(**{**info, "dbname": BENCH_DB})
    agents, vecs, sample = synthetic(args.chunks, fractions)
    report = {"chunks": args.chunks, "method": args.method, "options": json.loads(args.options),
              "scope": args.scope}
    with psycopg.connect(admin, autocommit=True) as c:
        exists = c.execute("select 1 from pg_database where datname = %s", [BENCH_DB]).fetchone()
        if exists and not args.keep:
            c.execute(psycopg.sql.SQL("drop database {} with (force)").format(psycopg.sql.Identifier(BENCH_DB)))
            exists = None
        if not exists:
            c.execute(psycopg.sql.SQL("create database {}").format(psycopg.sql.Identifier(BENCH_DB)))
    with psycopg.connect(url, autocommit=True) as conn:
        _migrate.migrate(conn, dim=DIM)
        register_vector(conn)
        if not conn.execute("select count(*) from recall.chunks").fetchone()[0]:
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
        report["agents"] = measure(conn, agents, vecs, sample, fractions, queries=args.queries)
        for a, r in report["agents"].items():
            log(f"{a:14} {json.dumps(r)}")
    return report


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
