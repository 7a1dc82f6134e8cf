"""auto_context's own cost, before and after the autoctx fix: one database of `bench latency`'s
synthetic history with one agent of CHUNKS chunks (its own HNSW index), auto_context called N
times with a task (pseudo-word text + topic vector) and N times without (Related from the latest
session), as the owner. "before": auto_context_v4 in a transaction that drops
recall.chunks_failures_idx first (then rolls back): v4's plan is v6's before the fix. "after":
auto_context_v6 with the index. Interleaved, who goes first alternating. p50 / p95 ms over the
calls after the first two, whether before and after returned the same rows (chunk id, section,
score, tokens; both in one transaction: one now()), and the range of the 1-minute
load average. Run with

    PYTHONPATH=<checkout> python bench/results/2026-11-26/autoctx_before_after.py DATADIR [CHUNKS] [N]

DATADIR keeps the embedded server and its database between runs (built on the first)."""
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from pyrecall import _db, _migrate
from pyrecall.bench import latency, load

data = Path(sys.argv[1])
size = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
n = int(sys.argv[3]) if len(sys.argv) > 3 else 20
synth = latency.Synth(7)
agents = latency.plan_agents(synth, [size])
built = data.exists()
data.mkdir(parents=True, exist_ok=True)
os.chmod(data, 0o755)
url = _db.start(data)
with psycopg.connect(url, autocommit=True) as c:
    _migrate.migrate(c, dim=latency.DIM)
    if not built:
        load.build(url, synth, agents, print)
cn = psycopg.connect(url, autocommit=True)
register_vector(cn)
a = agents[0]
print("chunks", cn.execute("select count(*) from recall.chunks where agent_id = %s", [a.agent_id]).fetchone()[0])
fns = ["before", "after"]
fn_of = {"before": "auto_context_v4", "after": "auto_context_v6"}
for mode in ("task", "no task"):
    times = {f: [] for f in fns}
    same = 0
    loads = [os.getloadavg()[0]]
    for i in range(n):
        t = a.topics[i % len(a.topics)]
        q, v = synth.query_text(int(t)), synth.query_vector(int(t)).astype(np.float32)
        rows = {}
        with cn.transaction():   # one now() for both
            for f in fns[::1 if i % 2 else -1]:
                if mode == "task":
                    sql, args = (f"select chunk_id, section, score, n_tokens from recall.{fn_of[f]}(%s, "
                                 "task_text => %s, task_embedding => %s)", [a.agent_id, q, v])
                else:
                    sql, args = (f"select chunk_id, section, score, n_tokens from recall.{fn_of[f]}(%s)",
                                 [a.agent_id])
                with cn.transaction(force_rollback=True):   # a savepoint: the index back after
                    if f == "before":
                        cn.execute("drop index recall.chunks_failures_idx")
                    t0 = time.perf_counter()
                    rows[f] = cn.execute(sql, args).fetchall()
                    times[f].append((time.perf_counter() - t0) * 1000)
        same += rows[fns[0]] == rows[fns[1]]
        loads.append(os.getloadavg()[0])
    figs = {}
    for f in fns:
        ms = sorted(times[f][2:])
        figs[f] = (round(statistics.median(ms), 1), round(ms[round(0.95 * (len(ms) - 1))], 1))
    print(f"{mode}: {n} calls, p50/p95 ms {figs}, same rows {same}/{n}, "
          f"rows {len(rows[fns[0]])}, load {min(loads):.1f}-{max(loads):.1f}")
