"""Far queries on a database `pyrecall bench latency --chunks 1000000 --agents 1000 --vectors topic
--keep --dsn ...` left: recall@10 of recall._vector_arm (100 candidates, the configured widths)
and of the own-index ANN statement at widths 200 and 1000, against recall._vector_exact.

    python bench/results/2026-11-26/far_queries.py URL 15 random         # random directions
    python bench/results/2026-11-26/far_queries.py URL 15 nonheld 1.5    # two topics the agent lacks + noise

"random": a random unit vector (near no topic: the nearest chunks at cosine ~0.2, a near tie);
"nonheld": a mix of two of the 256 topics the agent's sessions are not about, plus noise of that
norm (0: the pure direction of one such topic). Agents 0, 5, 12, 26, 52 (134k, 22k, 10k, 5k,
2.5k chunks). "ids": recall@10 by chunk ids; "dist": hits within 0.005 of the exact 10th distance.
"""

from __future__ import annotations

import statistics
import sys

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from pyrecall.bench import latency as L

ARM = "select chunk_id, distance from recall._vector_arm(%s, %s, 100, null, null, null, null, null) limit 10"
EXACT = "select chunk_id, distance from recall._vector_exact(%s, %s, 10, null, null, null, null, null)"


def main() -> None:
    url, n_queries, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    noise = float(sys.argv[4]) if len(sys.argv) > 4 else 1.5
    synth = L.Synth(7, "topic")
    agents = L.plan_agents(synth, L.agent_sizes(1_000_000, 1000))
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        for idx in (0, 5, 12, 26, 52):
            a = agents[idx]
            rng = np.random.default_rng(99)
            others = np.setdiff1d(np.arange(L.N_TOPICS), a.topics)
            pred = conn.execute("select recall._agent_key_predicate('c.agent_id', recall._agent_key(%s))",
                                [a.agent_id]).fetchone()[0]
            stmt = (f"select c.chunk_id, c.embedding <=> %(q)s from recall.chunks c where c.agent_id = %(a)s "
                    f"and {pred} order by c.embedding <=> %(q)s limit 10")
            res: dict = {w: [] for w in ("arm", 200, 1000)}
            dists = []
            for _ in range(n_queries):
                first, second = rng.choice(others, 2, replace=False)
                if kind == "random":
                    g = rng.standard_normal(L.DIM).astype(np.float32)
                    q = g / np.linalg.norm(g)
                elif noise == 0:
                    q = synth.centres[first]
                else:
                    q = L.topic_mixture(synth.centres, np.array([first]), np.array([second]), rng, noise=noise)[0]
                truth = conn.execute(EXACT, [a.agent_id, q]).fetchall()
                ids, d10 = {r[0] for r in truth}, truth[-1][1]
                dists.append((truth[0][1], d10))

                def score(rows, ids=ids, d10=d10):
                    return len({r[0] for r in rows} & ids) / 10, sum(r[1] <= d10 + 0.005 for r in rows) / 10

                res["arm"].append(score(conn.execute(ARM, [a.agent_id, q]).fetchall()))
                for w in (200, 1000):
                    with conn.transaction():
                        conn.execute("set local enable_sort = off")
                        conn.execute(f"set local hnsw.ef_search = {w}")
                        res[w].append(score(conn.execute(stmt, {"q": q, "a": a.agent_id}).fetchall()))
            print(f"{a.size} chunks, {kind} queries: exact d1/d10 {statistics.fmean(x[0] for x in dists):.4f}/"
                  f"{statistics.fmean(x[1] for x in dists):.4f}; "
                  + "; ".join(f"{w}: ids {statistics.fmean(r[0] for r in v):.3f} dist {statistics.fmean(r[1] for r in v):.3f}"
                              for w, v in res.items()), flush=True)


if __name__ == "__main__":
    main()
