"""Re-run the query phase of `pyrecall bench latency` on a database an earlier `--keep` run left,
with the same queries: the generator's random stream is replayed (the sessions' text, then the
vectors, in the order the run drew them), so make_queries gives the run's queries again.

    python bench/results/2026-11-26/remeasure.py URL --chunks 1000000 --agents 1000 --queries 100 \
        --vectors topic > latency_1m_topic_remeasured.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import UTC, datetime

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from pyrecall.bench import latency as L


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--vectors", default="topic")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    synth = L.Synth(args.seed, args.vectors)
    agents = L.plan_agents(synth, L.parse_sizes(args.sizes) if args.sizes else L.agent_sizes(args.chunks, args.agents))
    now = datetime.now(UTC)
    t = time.perf_counter()
    for agent in agents:                       # the text, as load() drew it
        for _ in L.sessions_of(synth, agent, now):
            pass
    topic_of = {sid: tp for a in agents for sid, tp in a.session_topics.items()}
    with psycopg.connect(args.url, autocommit=True) as conn:
        register_vector(conn)
        rows = conn.execute("select chunk_id, session_id, first_seq from recall.chunks "
                            "order by session_id, kind, first_seq, part").fetchall()
        for i in range(0, len(rows), 100_000):  # the vectors, as set_embeddings drew them
            part = rows[i:i + 100_000]
            topics = np.array([topic_of[sid] for _, sid, _ in part])
            subs = np.zeros(len(part), dtype=int)
            vecs = synth.chunk_vectors(topics, subs)
            stored = conn.execute("select embedding from recall.chunks where chunk_id = %s", [part[0][0]]).fetchone()[0]
            if not np.allclose(stored.to_numpy(), vecs[0], atol=1e-6):
                raise SystemExit("the replayed vectors differ from the stored ones: not the same run")
        replay_s = time.perf_counter() - t
        queries = L.make_queries(synth, agents, args.queries)
        config = {k: v for k, v in conn.execute(
            "select key, value from recall.config where key ~ '^(ann_|exact_scan|agent_index)' order by key")}
        load0 = os.getloadavg()
        t = time.perf_counter()
        results = L.measure(conn, queries)
        print(json.dumps({"replay_s": round(replay_s, 1), "measure_s": round(time.perf_counter() - t, 1),
                          "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                          "vector_search_config": config, "latency_ms": results}, indent=2))


if __name__ == "__main__":
    main()
