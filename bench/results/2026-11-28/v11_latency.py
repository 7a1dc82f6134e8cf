"""hybrid_recall_v10 vs v11 at a budget: client-side time per call (issue 19, 2026-11-28 second
session). On rank_lab.py's database (LoCoMo dev, 1,286 chunks, 2,760 turns; migrated to v11 and
its turns embedded by `pyrecall embed`), the first 200 dev questions, k 10 and k 200, each
budget, v10 and v11 alternating question by question; prints p50 / p95 ms of each.
Run: python v11_latency.py"""

import time
from pathlib import Path

import numpy as np

from pyrecall.bench import locomo

LAB = Path("/tmp/rank-lab")
url = (LAB / "url").read_text()
ds = locomo.load_file(Path("/work/shared/data/locomo/locomo-dev.json"))
emb = list(np.load(LAB / "questions.npy"))[:200]
with locomo._connect(url) as conn:
    for k in (10, 200):
        for budget in (250, 2000):
            times = {"v10": [], "v11": []}
            for q, v in zip(ds.questions[:200], emb, strict=True):
                for fn in times:
                    t = time.perf_counter()
                    conn.execute(f"select * from recall.hybrid_recall_{fn}(agent_id => %s, query_text => %s, "
                                 "query_embedding => %s, k => %s, as_of => %s, token_budget => %s)",
                                 (q.agent_id, q.text, v, k, q.as_of, budget)).fetchall()
                    times[fn].append((time.perf_counter() - t) * 1000)
            print(f"k {k} B {budget}: " + ", ".join(
                f"{fn} p50 {np.percentile(x, 50):.1f} p95 {np.percentile(x, 95):.1f} ms" for fn, x in times.items()),
                flush=True)
print("load", open("/proc/loadavg").read().split()[:3])
