"""Issue 19, 2026-11-27 fourth session: where session_recall's contexts exceed their budget by the
model's count. On rank_lab.py's database (bench/results/2026-11-26/rank_lab.py setup; load
sql/released/v8.sql into it for v8): each row of the first N dev questions at B 250/500/1000/2000
counted by MiniLM and compared with its n_tokens, by kind of row (whole chunk, merged passage,
trimmed chunk); contexts whose counted text exceeds B. Run: python over_budget_rows.py
session_recall_v6 200"""

import collections
import sys
from pathlib import Path

import numpy as np

from pyrecall._embed import get_embedder
from pyrecall.bench import locomo

LAB = Path("/tmp/rank-lab")
fn = sys.argv[1] if len(sys.argv) > 1 else "session_recall_v6"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
url = (LAB / "url").read_text()
dataset = locomo.load_file(Path("/work/shared/data/locomo/locomo-dev.json"))
vectors = list(np.load(LAB / "questions.npy"))
model = get_embedder("local/all-MiniLM-L6-v2")
stats: collections.Counter = collections.Counter()
worst: collections.Counter = collections.Counter()
with locomo._connect(url) as conn:
    for q, v in list(zip(dataset.questions, vectors, strict=True))[:n]:
        for b in (250, 500, 1000, 2000):
            rows = conn.execute(
                f"select content, n_tokens, metadata from recall.{fn}(agent_id => %s, query_text => %s, "
                "query_embedding => %s, k => 200, as_of => %s, token_budget => %s)",
                (q.agent_id, q.text, v, q.as_of, b)).fetchall()
            total = 0
            for content, said, meta in rows:
                real = model.count_tokens(content)
                kind = ("trimmed" if meta.get("trimmed_from_tokens")
                        else "merged" if meta.get("merged_chunk_ids") else "whole")
                stats[kind, "rows"] += 1
                if real != said:
                    stats[kind, "off"] += 1
                    stats[kind, "diff"] += real - said
                    worst[kind] = max(worst[kind], real - said)
                total += real
            if total > b:
                stats[b, "over"] += 1
print(fn, dict(stats), dict(worst))
