"""Each way of calling the stable functions, 10 calls on a new connection: a latency cliff (a
path scanning the agent: every call > 100 ms) or a generic-plan regression (calls 6-10 slower
than 2-5). bench/LOG.md 2026-11-28: `latency_cliffs_{before,after}.txt` on the database of
prefilter_ab.py, before and after the kinds joined the selective path of the vector arm.

    .venv/bin/python bench/results/2026-11-28/latency_cliffs.py DSN AGENT
"""
import statistics
import sys
import time

import psycopg

dsn, agent = sys.argv[1], sys.argv[2]
with psycopg.connect(dsn, autocommit=True) as c0:
    e = c0.execute("select embedding::text from recall.chunks where agent_id = %s and embedding is not null "
                   "order by chunk_id offset 777 limit 1", [agent]).fetchone()[0]
    sess = c0.execute("select session_id from recall.sessions where agent_id = %s "
                      "order by started_at desc limit 1", [agent]).fetchone()[0]
T, V, A = "'fix the flaky test in the login flow'", f"'{e}'::vector", f"'{agent}'"
H = f"select count(*) from recall.hybrid_recall(agent_id => {A}, query_text => {T}, query_embedding => {V}"
S = f"select count(*) from recall.session_recall(agent_id => {A}, query_text => {T}, query_embedding => {V}"
calls = {
    "hybrid": H + ")",
    "hybrid text only": f"select count(*) from recall.hybrid_recall(agent_id => {A}, query_text => {T})",
    "hybrid vector only": f"select count(*) from recall.hybrid_recall(agent_id => {A}, query_embedding => {V})",
    "hybrid budget 500": H + ", token_budget => 500)",
    "hybrid k 100": H + ", k => 100)",
    "hybrid since 7 days": H + ", since => now() - interval '7 days')",
    "hybrid until 300 days ago": H + ", until => now() - interval '300 days')",
    "hybrid kinds code": H + ", kinds => array['code'])",
    "hybrid kinds memory": H + ", kinds => array['memory'])",
    "hybrid exclude session": H + f", exclude_session_id => '{sess}')",
    "hybrid filter small": H + """, filter => '{"project": "small"}')""",
    "hybrid filter 2 values": H + """, filter => '{"project": ["small", "nobody"]}')""",
    "hybrid turns_per_session 1": H + ", turns_per_session => 1)",
    "session": S + ")",
    "session budget 1000": S + ", token_budget => 1000)",
    "session filter small": S + """, filter => '{"project": "small"}')""",
    "session filter nobody": S + """, filter => '{"project": "nobody"}')""",
    "session since 7 days": S + ", since => now() - interval '7 days')",
    "memories": f"select count(*) from recall.memories(agent_id => {A})",
}
for name, q in calls.items():
    with psycopg.connect(dsn, autocommit=True) as conn:
        ts = []
        for _ in range(10):
            t = time.perf_counter()
            conn.execute(q).fetchone()
            ts.append((time.perf_counter() - t) * 1000)
    a, b = statistics.median(ts[1:5]), statistics.median(ts[5:])
    flag = ("  <-- generic" if b > 1.5 * a + 3 else "") + ("  <-- slow" if min(ts) > 100 else "")
    print(f"{name:28} first {ts[0]:7.1f}  2-5 {a:7.1f}  6-10 {b:7.1f}{flag}", flush=True)
