"""Row-level security's cost, v5 against v6: one database of `bench latency`'s synthetic history
with two agents (100,000 and 20,000 chunks, each its own HNSW index), each queried N times
(pseudo-word text + topic vector, k 10) as the owner and as the MCP server binds a call (a login
role bound with recall.bind_agent, then role recall_agent + recall.agent_id for the transaction).
Each query runs every function as the owner and bound, one after the other (interleaved, who
goes first alternating: the machine's load hits all alike); p50 / p95 ms over the calls after
the first two, whether v5 and v6, owner and bound, returned the same chunk ids (per function),
and the range of the 1-minute load average during the run. Run with

    PYTHONPATH=<checkout> python bench/results/2026-11-26/rls_v5_v6.py DATADIR [N] [fn,fn,...]

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
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
fns = sys.argv[3].split(",") if len(sys.argv) > 3 else ["hybrid_recall_v5", "hybrid_recall_v6"]
synth = latency.Synth(7)
agents = latency.plan_agents(synth, [100_000, 20_000])
built = data.exists()
data.mkdir(parents=True, exist_ok=True)
os.chmod(data, 0o755)
url = _db.start(data)
with psycopg.connect(url, autocommit=True) as c:
    _migrate.migrate(c, dim=latency.DIM)
    if not built:
        load.build(url, synth, agents, print)
    if not c.execute("select 1 from pg_roles where rolname = 'rls_bench'").fetchone():
        c.execute("create role rls_bench login password 'pw'")


def connect(user=None):
    cn = psycopg.connect(url if user is None else url.replace("user=postgres", f"user={user} password=pw"),
                         autocommit=True)
    register_vector(cn)
    return cn


owner = connect()
for a in agents:
    owner.execute("select recall.bind_agent('rls_bench', %s)", [a.agent_id])
    queries = [(synth.query_text(int(t)), synth.query_vector(int(t)).astype(np.float32))
               for t in (a.topics[i % len(a.topics)] for i in range(n))]
    with connect("rls_bench") as bound:
        conns = (("owner", owner), ("bound", bound))
        times = {(w, f): [] for w, _ in conns for f in fns}
        same = 0
        loads = [os.getloadavg()[0]]
        for i, (q, v) in enumerate(queries):
            ids = {}
            for f in fns:
                sql = (f"select chunk_id from recall.{f}(%s, task_text => %s, task_embedding => %s)"
                       if f.startswith("auto_context") else f"select chunk_id from recall.{f}(%s, %s, %s, k => 10)")
                for who, cn in conns[::1 if i % 2 else -1]:   # who goes first alternates
                    with cn.transaction():
                        if who == "bound":
                            cn.execute("select set_config('role', 'recall_agent', true), "
                                       "set_config('recall.agent_id', %s, true)", [a.agent_id])
                        t = time.perf_counter()
                        ids.setdefault(f.rsplit("_v", 1)[0], []).append(
                            [r[0] for r in cn.execute(sql, [a.agent_id, q, v]).fetchall()])
                        times[(who, f)].append((time.perf_counter() - t) * 1000)
            same += all(x == got[0] for got in ids.values() for x in got)
            loads.append(os.getloadavg()[0])
        for who, _ in conns:
            figs = {}
            for f in fns:
                ms = sorted(times[(who, f)][2:])
                figs[f] = (round(statistics.median(ms), 1), round(ms[round(0.95 * (len(ms) - 1))], 1))
            print(f"{a.agent_id} ({a.size:,} chunks) {who}: "
                  + ", ".join(f"{f} {p50} / {p95}" for f, (p50, p95) in figs.items()), flush=True)
        print(f"  same ids (each function's versions, owner and bound) {same}/{n}; load average (1 min) "
              f"{min(loads):.1f}-{max(loads):.1f}", flush=True)
