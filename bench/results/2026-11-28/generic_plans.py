"""auto_context from the sixth call on one connection (bench/LOG.md 2026-11-28): PL/pgSQL's
generic plans against plans made with each call's values (sql/idempotent/085-plan-settings.sql).
For each way of calling it, a new connection makes 10 calls, with auto_context_v10's
plan_cache_mode reset (PostgreSQL's auto) and then as migrate sets it (force_custom_plan);
each call's wall time in ms, the medians of calls 2-5 and 6-10, and whether every call
returned the same rows.

    .venv/bin/python bench/results/2026-11-28/generic_plans.py DSN AGENT [PROJECT]

The database of prefilter_ab.py (one agent of 100,206 chunks, projects of 50% / 49.5% / 0.5%).
"""
import statistics
import sys
import time

import psycopg

dsn, agent = sys.argv[1], sys.argv[2]
project = sys.argv[3] if len(sys.argv) > 3 else None
with psycopg.connect(dsn, autocommit=True) as c0:
    e = c0.execute("select embedding::text from recall.chunks where agent_id = %s and embedding is not null "
                   "order by chunk_id offset 777 limit 1", [agent]).fetchone()[0]
task = "task_text => 'fix the flaky test in the login flow', task_embedding => %(e)s::vector, "
calls = {"task, project": task + "project => %(p)s", "task": task.rstrip(", "),
         "project": "project => %(p)s", "neither": None}
for mode in ("reset", "force_custom_plan"):
    with psycopg.connect(dsn, autocommit=True) as c0:
        c0.execute(f"alter function recall.auto_context_v10 {'reset plan_cache_mode' if mode == 'reset' else 'set plan_cache_mode = force_custom_plan'}")
    for name, args in calls.items():
        if "project" in name and project is None:
            continue
        q = ("select array_agg(chunk_id order by chunk_id) from recall.auto_context(agent_id => %(a)s, "
             "token_budget => 2000" + (", " + args if args else "") + ")")
        with psycopg.connect(dsn, autocommit=True) as conn:
            ts, rows = [], set()
            for _ in range(10):
                t = time.perf_counter()
                rows.add(tuple(conn.execute(q, {"a": agent, "e": e, "p": project}).fetchone()[0] or ()))
                ts.append((time.perf_counter() - t) * 1000)
        print(f"{mode:18} {name:14} " + " ".join(f"{x:6.1f}" for x in ts)
              + f"   median 2-5 {statistics.median(ts[1:5]):6.1f}  6-10 {statistics.median(ts[5:]):6.1f}"
              + f"  {'same rows' if len(rows) == 1 else 'ROWS DIFFER'}")
with psycopg.connect(dsn, autocommit=True) as c0:
    c0.execute("alter function recall.auto_context_v10 set plan_cache_mode = force_custom_plan")
