"""Latency of the token budget fill, v4 vs v5: LoCoMo dev in one agent (hash-embedder vectors), the
first 200 questions, each function with k and token_budget as printed; p50 and p95 ms. Run with
PYTHONPATH=<checkout> python bench/results/2026-11-26/fill_latency_v4_v5.py"""
import statistics
import time

import numpy as np

from pyrecall.bench import locomo
from pyrecall.bench._scratch import scratch_database
from pyrecall.bench.fake_embedder import FakeEmbedder

ds = locomo.load_file("/work/shared/data/locomo/locomo-dev.json", one_agent="locomo")
emb = FakeEmbedder(record=False)
out = {}
with scratch_database(None) as url, locomo._connect(url) as conn:
    locomo.load(conn, ds, emb)
    qs = ds.questions[:200]
    for fn in ("hybrid_recall_v4", "hybrid_recall_v5", "session_recall_v4", "session_recall_v5"):
        for k, b in ((10, 2000), (200, 250), (200, 2000)):
            ts = []
            for q in qs:
                args = {"a": q.agent_id, "t": q.text, "e": np.asarray(emb.vector(q.text)), "k": k, "b": b, "o": q.as_of}
                t = time.perf_counter()
                conn.execute(f"select * from recall.{fn}(agent_id => %(a)s, query_text => %(t)s, query_embedding => %(e)s, k => %(k)s, token_budget => %(b)s, as_of => %(o)s)", args).fetchall()
                ts.append((time.perf_counter() - t) * 1000)
            ts.sort()
            out[f"{fn} k={k} B={b}"] = (round(statistics.median(ts), 2), round(ts[int(0.95 * len(ts))], 2))
            print(fn, k, b, out[f"{fn} k={k} B={b}"], flush=True)
