"""hybrid_recall and session_recall v11 vs v13, auto_context v12 vs v13, at a budget: client-side
time per call (release 13's fill reads, for each turn it weighs, the text message before it).
On rank_lab.py's database (bench/results/2026-11-26: LoCoMo dev, 1,286 chunks, 2,760 turns;
migrated by this checkout and its turns embedded by `pyrecall embed`), the first 200 dev
questions, k 200 (what `bench locomo` gives the fill) and auto_context with the question as its
task, each budget, old and new alternating question by question; p50 / p95 ms.
Run: python v13_latency.py > v13_latency.txt"""

import time
from pathlib import Path

import numpy as np

from pyrecall.bench import locomo

LAB = Path("/tmp/rank-lab")
url = (LAB / "url").read_text()
ds = locomo.load_file(Path("/work/shared/data/locomo/locomo-dev.json"))
emb = list(np.load(LAB / "questions.npy"))[:200]
CALLS = {
    "hybrid_recall": ("select * from recall.hybrid_recall_{v}(agent_id => %s, query_text => %s, "
                      "query_embedding => %s, k => 200, as_of => %s, token_budget => %s)", ("v11", "v13")),
    "session_recall": ("select * from recall.session_recall_{v}(agent_id => %s, query_text => %s, "
                       "query_embedding => %s, k => 200, as_of => %s, token_budget => %s)", ("v11", "v13")),
    "auto_context": ("select * from recall.auto_context_{v}(agent_id => %s, task_text => %s, "
                     "task_embedding => %s, as_of => %s, token_budget => %s)", ("v12", "v13")),
}
with locomo._connect(url) as conn:
    for name, (call, versions) in CALLS.items():
        for budget in (250, 2000):
            times = {v: [] for v in versions}
            for i, (q, v) in enumerate(zip(ds.questions[:200], emb, strict=True)):
                for ver in versions if i % 2 == 0 else versions[::-1]:
                    t = time.perf_counter()
                    conn.execute(call.format(v=ver), (q.agent_id, q.text, v, q.as_of, budget)).fetchall()
                    times[ver].append((time.perf_counter() - t) * 1000)
            print(f"{name} B {budget}: " + ", ".join(
                f"{ver} p50 {np.percentile(x, 50):.1f} p95 {np.percentile(x, 95):.1f} ms" for ver, x in times.items()),
                flush=True)
print("load", open("/proc/loadavg").read().split()[:3])
