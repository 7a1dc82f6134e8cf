"""The vector arm's recall curve by agent size, for queries near and far from the agent's topics.

Run on a database that `pyrecall bench latency --vectors topic --keep --dsn ...` left (same
--seed and --chunks/--agents or --sizes, so that the agents' topics are known again):

    python bench/results/2026-11-26/vec_probe.py URL --chunks 1000000 --agents 1000 \
        --widths 100,200,300,400,600,800,1000 --queries 30 > probe.json

For each agent with an index of its own (all of them, or the largest --max-agents plus a few
smaller), --queries near queries (a topic the agent holds, as bench latency asks) and as many
far ones (two topics it holds none of): the exact top 10 (recall._vector_exact), then the ANN
statement of recall._vector_arm through the agent's own index at each width (LIMIT 10, enable_sort
off); "over": width 200 with an over-fetch of 1000 rows (iterative scan relaxed_order) re-ranked
exactly; "arm": recall._vector_arm itself (100 candidates, the configured widths). recall@10 by
ids and by distance (a hit: within 0.005 cosine distance of the exact 10th, the issue's
definition); ms per query; the best ANN distance against the exact one (to tell far queries).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from pyrecall.bench import latency as L

EPS = 0.005


def own_statement(conn, agent_id: str, limit: int) -> str:
    pred = conn.execute("select recall._agent_key_predicate('c.agent_id', recall._agent_key(%s))",
                        [agent_id]).fetchone()[0]
    return (f"select c.chunk_id, c.embedding <=> %(q)s from recall.chunks c where c.agent_id = %(a)s "
            f"and {pred} and c.embedding is not null order by c.embedding <=> %(q)s limit {limit}")


def timed(conn, stmt, params):
    t = time.perf_counter()
    rows = conn.execute(stmt, params).fetchall()
    return (time.perf_counter() - t) * 1000, rows


def score(rows, truth_ids, d10):
    top = sorted(rows, key=lambda r: (r[1], r[0]))[:10]
    ids = {r[0] for r in top}
    return (len(ids & truth_ids) / 10, min(10, sum(1 for r in top if r[1] <= d10 + EPS)) / 10,
            top[0][1] if top else None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--widths", default="100,200,300,400,600,800,1000")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--max-agents", type=int, default=6, help="the largest agents with own indexes")
    ap.add_argument("--smaller", default="10000,5000,2500", help="also one agent near each of these sizes")
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    synth = L.Synth(args.seed, "topic")
    sizes = L.parse_sizes(args.sizes) if args.sizes else L.agent_sizes(args.chunks, args.agents)
    agents = L.plan_agents(synth, sizes)
    rng = np.random.default_rng(4242)
    with psycopg.connect(args.url, autocommit=True) as conn:
        register_vector(conn)
        own = {r[0]: int(r[1]) for r in conn.execute(
            "select x.agent_id, greatest(ix.reltuples, 0)::bigint from (select distinct agent_id from recall.chunks) x "
            "join pg_class ix on ix.relname = recall._agent_index_name(x.agent_id) "
            "and ix.relnamespace = 'recall'::regnamespace")}
        with_own = sorted((a for a in agents if a.agent_id in own), key=lambda a: -a.size)
        chosen = with_own[:args.max_agents]
        for s in [int(x) for x in args.smaller.split(",") if x]:
            rest = [a for a in with_own if a not in chosen]
            if rest:
                chosen.append(min(rest, key=lambda a: abs(a.size - s)))
        out = {"widths": widths, "queries": args.queries, "eps": EPS, "loadavg_start": os.getloadavg(),
               "config": {k: v for k, v in conn.execute(
                   "select key, value from recall.config where key ~ '^(ann_|exact_scan|agent_index)'")},
               "agents": []}
        for a in chosen:
            stmt10 = own_statement(conn, a.agent_id, 10)
            stmt_over = own_statement(conn, a.agent_id, 1000)
            others = np.setdiff1d(np.arange(L.N_TOPICS), a.topics)
            rec = {"agent": a.agent_id, "size": a.size, "index_rows": own[a.agent_id], "n_topics": len(a.topics)}
            for kind in ("near", "far"):
                acc: dict[str, list] = {}
                for _ in range(args.queries):
                    if kind == "near":
                        first = np.array([int(rng.choice(a.topics))])
                        second = rng.integers(0, L.N_TOPICS - 1, 1)
                        second = second + (second >= first)
                    else:
                        first, second = rng.choice(others, 2, replace=False)[:, None]
                    q = L.topic_mixture(synth.centres, np.atleast_1d(first), np.atleast_1d(second), rng,
                                        noise=L.QUERY_NOISE)[0]
                    t_exact, truth = timed(conn, "select chunk_id, distance from recall._vector_exact(%s, %s, 10, "
                                           "null, null, null, null, null)", [a.agent_id, q])
                    truth_ids = {r[0] for r in truth}
                    d10 = truth[-1][1]
                    acc.setdefault("exact_ms", []).append(t_exact)
                    acc.setdefault("d1_exact", []).append(truth[0][1])
                    acc.setdefault("d10_exact", []).append(d10)
                    for w in widths:
                        with conn.transaction():
                            conn.execute("set local enable_sort = off")
                            conn.execute(f"set local hnsw.ef_search = {w}")
                            conn.execute("set local hnsw.iterative_scan = relaxed_order")
                            ms, rows = timed(conn, stmt10, {"q": q, "a": a.agent_id})
                        r_id, r_d, d1 = score(rows, truth_ids, d10)
                        acc.setdefault(f"w{w}", []).append((r_id, r_d, ms, d1))
                    with conn.transaction():
                        conn.execute("set local enable_sort = off")
                        conn.execute("set local hnsw.ef_search = 200")
                        conn.execute("set local hnsw.iterative_scan = relaxed_order")
                        ms, rows = timed(conn, stmt_over, {"q": q, "a": a.agent_id})
                    r_id, r_d, d1 = score(rows, truth_ids, d10)
                    acc.setdefault("over200x1000", []).append((r_id, r_d, ms, d1))
                    ms, rows = timed(conn, "select chunk_id, distance from recall._vector_arm(%s, %s, 100, null, "
                                     "null, null, null, null)", [a.agent_id, q])
                    r_id, r_d, d1 = score(rows, truth_ids, d10)
                    acc.setdefault("arm", []).append((r_id, r_d, ms, d1))
                    acc.setdefault("arm_d", []).append([round(rows[i][1], 4) for i in (0, 9, len(rows) - 1)])
                summary = {"exact_ms_p50": round(statistics.median(acc["exact_ms"]), 2),
                           "d1_exact_mean": round(statistics.fmean(acc["d1_exact"]), 4),
                           "d10_exact_mean": round(statistics.fmean(acc["d10_exact"]), 4)}
                for key, vals in acc.items():
                    if key.startswith(("w", "over")) or key == "arm":
                        summary[key] = {"recall_ids": round(statistics.fmean(v[0] for v in vals), 4),
                                        "recall_dist": round(statistics.fmean(v[1] for v in vals), 4),
                                        "min_ids": min(v[0] for v in vals),
                                        "ms_p50": round(statistics.median(v[2] for v in vals), 2),
                                        "d1_mean": round(statistics.fmean(v[3] for v in vals), 4)}
                summary["per_query_arm_d1_d10_dn"] = acc["arm_d"]
                summary["per_query_recall_arm"] = [v[0] for v in acc["arm"]]
                rec[kind] = summary
            out["agents"].append(rec)
            print(f"{a.agent_id} {a.size}: near arm {rec['near']['arm']['recall_ids']} far arm "
                  f"{rec['far']['arm']['recall_ids']} / dist {rec['far']['arm']['recall_dist']}",
                  file=sys.stderr, flush=True)
        out["loadavg_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
