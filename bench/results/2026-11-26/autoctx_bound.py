"""auto_context_v6 without a task, as the owner and as a role bound with recall.bind_agent (the
MCP server's way), 5 timed calls each, twice; then the plan of the Failures predicate under the
policies. Run with: PYTHONPATH=. python bench/results/2026-11-26/autoctx_bound.py DATADIR CHUNKS
(DATADIR built by autoctx_before_after.py)."""
import statistics
import sys
import time
from pathlib import Path

import psycopg

from pyrecall import _db
from pyrecall.bench import latency

url = _db.start(Path(sys.argv[1]))
a = latency.plan_agents(latency.Synth(7), [int(sys.argv[2])])[0]
own = psycopg.connect(url, autocommit=True)
if not own.execute("select 1 from pg_roles where rolname = 'ac_bench'").fetchone():
    own.execute("create role ac_bench login password 'pw'")
    own.execute("select recall.bind_agent('ac_bench', %s)", [a.agent_id])
b = psycopg.connect(url.replace("user=postgres", "user=ac_bench password=pw"), autocommit=True)
for who, cn in (("owner", own), ("bound", b), ("owner", own), ("bound", b)):
    ms = []
    for _ in range(6):
        with cn.transaction():
            if who == "bound":
                cn.execute("select set_config('role', 'recall_agent', true), set_config('recall.agent_id', %s, true)", [a.agent_id])
            t = time.perf_counter()
            n = len(cn.execute("select * from recall.auto_context_v6(%s)", [a.agent_id]).fetchall())
            ms.append((time.perf_counter() - t) * 1000)
    print(who, n, "rows, p50", round(statistics.median(ms[1:]), 1), "ms")
cn = b
with cn.transaction():
    cn.execute("select set_config('role', 'recall_agent', true), set_config('recall.agent_id', %s, true)", [a.agent_id])
    print("\n".join(r[0] for r in cn.execute("explain select c.chunk_id from recall.chunks c where c.agent_id = %s and c.metadata @> '{}' and recall._is_failure(c.kind, c.content, c.metadata)", [a.agent_id])))
