"""session_recall_v6 vs v8 at a budget: server time per call (issue 19, 2026-11-27 fourth
session). On rank_lab.py's database (LoCoMo dev, 1,286 chunks; sql/released/v8.sql loaded),
the first 200 dev questions, k 10, each budget, v6 and v8 alternating question by question;
prints p50 / p95 ms of each. Run: python v8_latency.py"""

import time
from pathlib import Path

import numpy as np

from pyrecall.bench import locomo

LAB = Path("/tmp/rank-lab")
url = (LAB / "url").read_text()
ds = locomo.load_file(Path("/work/shared/data/locomo/locomo-dev.json"))
emb = list(np.load(LAB / "questions.npy"))[:200]
with locomo._connect(url) as conn:
    for budget in (250, 2000):
        times = {"v6": [], "v8": []}
        for q, v in zip(ds.questions[:200], emb, strict=True):
            for fn in ("v6", "v8"):
                t = time.perf_counter()
                conn.execute(f"select * from recall.session_recall_{fn}(agent_id => %s, query_text => %s, "
                             "query_embedding => %s, k => 10, as_of => %s, token_budget => %s)",
                             (q.agent_id, q.text, v, q.as_of, budget)).fetchall()
                times[fn].append((time.perf_counter() - t) * 1000)
        print(f"B {budget}: " + ", ".join(f"{fn} p50 {np.percentile(x, 50):.1f} p95 {np.percentile(x, 95):.1f} ms"
                                          for fn, x in times.items()))
print("load", open("/proc/loadavg").read().split()[:3])
