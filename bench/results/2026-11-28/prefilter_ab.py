"""The vector arm under a selective metadata condition, before and after (bench/LOG.md
2026-11-28): recall._vector_arm_scoped as of commit OLD and as in the working tree, applied in
turn to one database, 3 rounds x 5 calls each (after one untimed call), median wall time of each case and the rows each
side returned (they must be equal).

The database: `pyrecall bench latency --sizes 100000x1 --keep` (one agent, 100,206 chunks,
synthetic vectors), then its chunks' metadata set to projects of 50% / 49.5% / 0.5%:
    update recall.chunks set metadata = metadata || jsonb_build_object('project', 'big');
    update recall.chunks set metadata = jsonb_build_object('project',
        case when abs(hashint8(chunk_id)) % 200 = 0 then 'small' else 'mid' end)
      where abs(hashint8(chunk_id)) % 2 = 0;
    vacuum analyze recall.chunks;

    .venv/bin/python bench/results/2026-11-28/prefilter_ab.py DSN OLD_COMMIT
"""
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

dsn, old_rev = sys.argv[1], sys.argv[2]
root = Path(__file__).resolve().parents[3]
sql = {"old": subprocess.run(["git", "show", f"{old_rev}:sql/idempotent/015-vector-arm.sql"], cwd=root,
                             check=True, capture_output=True, text=True).stdout,
       "new": (root / "sql/idempotent/015-vector-arm.sql").read_text()}
conn = psycopg.connect(dsn, autocommit=True)
agent = conn.execute("select agent_id from recall.chunks limit 1").fetchone()[0]
e = conn.execute("select embedding::text from recall.chunks where agent_id = %s order by chunk_id "
                 "offset 777 limit 1", [agent]).fetchone()[0]
AC = ("select count(*), coalesce(sum(n_tokens), 0) from recall.auto_context(agent_id => %s, "
      "token_budget => 2000, task_text => 'fix the flaky test in the login flow', "
      "task_embedding => %s::vector, project => %s)")
HR = ("select count(*), coalesce(sum(n_tokens), 0) from recall.hybrid_recall(agent_id => %s, "
      "query_text => 'fix the flaky test in the login flow', query_embedding => %s::vector, k => 10, "
      "filter => %s::jsonb)")
HK = HR.replace("filter => %s::jsonb", "kinds => %s::text[]")
cases = [("auto_context, project", AC, p) for p in ("big", "mid", "small", "newrepo", None)] + \
        [("hybrid_recall, filter", HR, json.dumps({"project": p}) if p else None)
         for p in ("big", "small", "nobody", None)] + \
        [("hybrid_recall, kinds", HK, k) for k in (["turn_pair"], ["memory"], ["code"])]
times, rows = {}, {}
for _ in range(3):
    for side in ("old", "new"):
        conn.execute(sql[side])
        for name, q, arg in cases:
            conn.execute(q, [agent, e, arg])       # untimed: the functions compiled, caches filled
            for _ in range(5):
                t = time.perf_counter()
                r = conn.execute(q, [agent, e, arg]).fetchone()
                times.setdefault((side, name, str(arg)), []).append((time.perf_counter() - t) * 1000)
                rows.setdefault((side, name, str(arg)), set()).add(r)
conn.execute(sql["new"])
print(f"{'case':24} {'argument':22} {'old ms':>8} {'new ms':>8}  rows (count, tokens)")
for name, _, arg in cases:
    key = str(arg)
    o, n = (statistics.median(times[(s, name, key)]) for s in ("old", "new"))
    old_rows, new_rows = rows[("old", name, key)], rows[("new", name, key)]
    print(f"{name:24} {key:22} {o:8.1f} {n:8.1f}  {sorted(new_rows)}"
          + ("" if old_rows == new_rows else f" DIFFERENT from old: {sorted(old_rows)}"))
