"""A/B: v3 vs v4 pieces, interleaved, on the bench latency data (20k chunks, 50 agents)."""
import json
import statistics
import sys
import time

from pyrecall.bench import latency as L
from pyrecall.bench._scratch import scratch_database
from pyrecall.bench.locomo import _connect

n_chunks, n_agents, per_class = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
synth = L.Synth(7, "cluster")
agents = L.plan_agents(synth, L.agent_sizes(n_chunks, n_agents))
A = "agent_id => %(a)s, query_text => %(t)s, query_embedding => %(v)s"
SQL = {f"{fn}_{v}": f"select chunk_id from recall.{fn}_{v}({A}, k => 10, token_budget => 2000)"
       for fn in ("hybrid_recall", "session_recall") for v in ("v3", "v4")}
SQL["pool_v3"] = f"select chunk_id from recall.hybrid_recall_v3({A}, k => 1000, candidates => 200, dedup_similarity => 2)"
SQL["pool_v4"] = f"select chunk_id from recall._hybrid_recall_v4({A}, k => 1000, candidates => 200, dedup_similarity => 2)"
SQL["varm_v3"] = "select chunk_id from recall._vector_arm(%(a)s, %(v)s, 200, null, null, null, null, null)"
SQL["varm_v4"] = "select chunk_id from recall._vector_arm_scoped(%(a)s, %(v)s, 200, null, null, null, null, null, null, null)"
SQL["tarm_v3"] = ("select t.chunk_id from recall._text_plan_v3(%(a)s, %(t)s) p, lateral recall._text_arm_v3(%(a)s, p.match_q, p.rank_q, "
                  "p.agent_rows, p.lexemes, p.idfs, p.avg_len, 200, null, null, null, null, null, null) t")
SQL["tarm_v4"] = ("select t.chunk_id from recall._text_plan_v3(%(a)s, %(t)s) p, lateral recall._text_arm_v4(%(a)s, p.match_q, p.rank_q, "
                  "p.agent_rows, p.lexemes, p.idfs, p.avg_len, 200, null, null, null, null, null, null, null, null) t")
only = sys.argv[4].split(",") if len(sys.argv) > 4 else None
if only:
    SQL = {k: v for k, v in SQL.items() if any(k.startswith(o) for o in only)}
out = {}
with scratch_database(None) as url, _connect(url) as conn:
    L.load(conn, synth, agents, jobs=1, connect=lambda: _connect(url))
    L.set_embeddings(conn, synth, agents)
    conn.execute("vacuum analyze recall.chunks")
    L.build_index(conn)
    conn.execute("select recall.summarize_sessions()")
    queries = L.make_queries(synth, agents, per_class)
    for cls, qs in queries.items():
        t = {k: [] for k in SQL}
        diff = []
        for i, q in enumerate(qs):
            order = list(SQL) if i % 2 == 0 else list(SQL)[::-1]
            ids = {}
            for k in order:
                p = {"a": q.agent.agent_id, "t": q.text, "v": q.vector}
                s = time.perf_counter()
                ids[k] = sorted(r[0] for r in conn.execute(SQL[k], p).fetchall())
                t[k].append((time.perf_counter() - s) * 1000)
            for k in SQL:
                if k.endswith("_v3") and ids[k] != ids[k[:-1] + "4"]:
                    diff.append(k)
        out[cls] = {k: {"p50": round(statistics.median(v), 2), "p95": round(sorted(v)[int(0.95 * (len(v) - 1))], 2)} for k, v in t.items()}
        out[cls]["differ"] = diff
print(json.dumps(out, indent=1))
