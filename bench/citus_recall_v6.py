"""What a hybrid_recall costs delegated to a Citus worker against a single node (docs/SCALING.md
records the figures): the latency of one call, p50 and p95, one client, measured by the client
(so the round trip to the server it talks to is in it).

Both servers get the same data: AGENTS agents of 3 sessions x CHUNKS chunks each, with the
deterministic fake embedder's vectors (the cost measured is the delegation and the planning on
the worker; the search of agents this small is exact). The call is
`recall.hybrid_recall(agent, 'refund webhook fails', <its embedding>, k => 10)` for a random
agent, so v6's search (text plan, both arms, the rows read by primary key) runs.

    PYTHONPATH=. python bench/citus_recall_v6.py --cluster "$(pyrecall dba citus up | tail -1)"

Without --single, a single embedded server is started for the comparison (and stopped).
One machine: the coordinator, both workers and the client share its cores.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

from pyrecall import _db, _migrate
from pyrecall.bench.fake_embedder import FakeEmbedder

CALL = "select * from recall.hybrid_recall(%s, 'refund webhook fails', %s, k => 10)"


def fill(url: str, agents: int, chunks: int) -> None:
    emb = FakeEmbedder()
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        have = conn.execute("select count(distinct agent_id) from recall.sessions "
                            "where agent_id like 'benchv6-%%'").fetchone()[0]
        for a in range(have, agents):
            agent = f"benchv6-{a}"
            for s in range(3):
                sid = f"{agent}-s{s}"
                conn.execute("insert into recall.sessions (session_id, agent_id, project) "
                             "values (%s, %s, 'payments')", [sid, agent])
                for i in range(chunks):
                    text = (f"{agent} session {s} note {i}: the refund webhook "
                            f"{'fails' if i % 2 else 'retries'} on friday")
                    conn.execute(
                        "insert into recall.chunks (agent_id, session_id, kind, first_seq, part, "
                        "message_ids, content, n_tokens, created_at, embedding, embedding_model, "
                        "embedded_at) values (%s, %s, 'message', %s, 0, '{}', %s, 12, "
                        "now() - %s * interval '1 hour', %s, 'fake', now())",
                        [agent, sid, i + 1, text, s * chunks + i, emb.vector(text)])


def latencies(url: str, agents: int, calls: int) -> list[float]:
    query = FakeEmbedder().vector("refund webhook fails")
    rng = random.Random(7)
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        for n in range(calls + 20):
            agent = f"benchv6-{rng.randrange(agents)}"
            t0 = time.perf_counter()
            rows = conn.execute(CALL, [agent, query]).fetchall()
            if n >= 20:                      # (the first calls warm the caches)
                out.append((time.perf_counter() - t0) * 1000)
            assert rows, agent
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", required=True, help="the Citus coordinator's URL (distributed)")
    parser.add_argument("--single", help="a single node's URL (default: a throwaway embedded server)")
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=30, help="chunks per session (3 sessions an agent)")
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    tmp = None
    single = args.single
    if single is None:
        tmp = Path(tempfile.mkdtemp(prefix="pyrecall-citus-bench-"))
        os.chmod(tmp, 0o755)
        single = _db.start(tmp, settings={"shared_buffers": "256MB"})
        with psycopg.connect(single, autocommit=True) as conn:
            _migrate.migrate(conn)
    try:
        for url in (single, args.cluster):
            fill(url, args.agents, args.chunks)
        print(f"hybrid_recall v6, {args.agents} agents x {3 * args.chunks} chunks, {args.calls} calls, "
              f"1 client, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        print("| server | p50 ms | p95 ms |")
        print("|---|---|---|")
        for name, url in (("single node", single), ("Citus, delegated", args.cluster)):
            ms = sorted(latencies(url, args.agents, args.calls))
            print(f"| {name} | {statistics.median(ms):.2f} | {ms[int(0.95 * len(ms))]:.2f} |")
    finally:
        if tmp is not None:
            _db.stop(tmp)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
