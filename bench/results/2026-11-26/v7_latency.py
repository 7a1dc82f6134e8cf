"""p50/p95 ms of hybrid_recall_v6 and v7 (and others named) at k 10 / 200 and B 250 / 2000 / none,
asked in turn on the LoCoMo dev split (60 questions, each twice, the second timed).

The database: rank_lab.py setup (one load + embedding kept in an embedded server), copied,
migrated to this tree (`pyrecall migrate`: 011-message-tokens, v7) and its messages counted
(pyrecall._worker.count_messages with the local model); its URL in /tmp/v7/lab/url.

    python v7_latency.py hybrid_recall_v6,hybrid_recall_v7 60
"""
import statistics
import sys
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from pyrecall.bench import locomo

url = open('/tmp/v7/lab/url').read()
c = psycopg.connect(url, autocommit=True)
register_vector(c)
ds = locomo.load_file('/work/shared/data/locomo/locomo-dev.json')
emb = np.load('/tmp/v7/lab/questions.npy')
fns = sys.argv[1].split(',')
n = int(sys.argv[2]) if len(sys.argv) > 2 else 60
qs = list(range(0, len(ds.questions), max(1, len(ds.questions) // n)))[:n]
for k, B in [(10, 250), (10, 2000), (200, 250), (200, 2000), (10, None)]:
    times = {f: [] for f in fns}
    for rep in range(2):
        for qi in qs:
            q = ds.questions[qi]
            for f in fns:
                t = time.perf_counter()
                c.execute(f"select * from recall.{f}(agent_id => %s, query_text => %s, query_embedding => %s, k => %s, as_of => %s, token_budget => %s)",
                          (q.agent_id, q.text, emb[qi], k, q.as_of, B)).fetchall()
                if rep:
                    times[f].append((time.perf_counter() - t) * 1000)
    print(f"k {k} B {B}: " + "; ".join(f"{f} p50 {statistics.median(v):.1f} p95 {np.percentile(v, 95):.1f}" for f, v in times.items()), flush=True)
