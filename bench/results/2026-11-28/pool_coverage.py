"""Issue 19, where release 11's misses are: in the candidates the fill is given, or not taken?

For every question of the LoCoMo dev split (rank_lab.py's database; LAB=one: every
conversation in one agent, turn_vec_lab.py setup-one), the share of its evidence turns held by
hybrid_recall_v11's first k chunks (k = 10 ... 200: `bench locomo` gives the fill 200) and by
its contexts at 250 / 1000 / 2000 tokens, by category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop). Output: pool_coverage_{dev,one}.txt.

    python pool_coverage.py > pool_coverage_dev.txt
    LAB=one python pool_coverage.py > pool_coverage_one.txt
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26"))
import rank_lab  # noqa: E402

from pyrecall.bench import locomo  # noqa: E402

K = [10, 25, 50, 100, 200]


def main() -> None:
    one = os.environ.get("LAB") == "one"
    lab = Path("/tmp/rank-lab-one") if one else rank_lab.LAB
    url = (lab / "url").read_text()
    dataset = locomo.load_file(rank_lab.DATA, one_agent="locomo" if one else None)
    embeddings = list(np.load(lab / "questions.npy"))
    method = locomo.Method("hybrid_recall_v11", function="hybrid_recall_v11")
    sums: dict = defaultdict(lambda: defaultdict(float))
    with locomo._connect(url) as conn:
        dia = dict(conn.execute("select message_id, external_id from recall.messages").fetchall())

        def held(rows) -> set:
            return {dia.get(m) for r in rows for m in (r[1] or [])}

        for q, e in zip(dataset.questions, embeddings, strict=True):
            evidence = set(q.evidence)
            ranked = locomo.ask(conn, method, q, e, 200)
            shares = {f"pool{k}": len(held(ranked[:k]) & evidence) / len(evidence) for k in K}
            for b in (250, 1000, 2000):
                rows = locomo.ask(conn, method, q, e, 200, token_budget=b)
                shares[f"b{b}"] = len(held(rows) & evidence) / len(evidence)
            for key in (q.category, "all"):
                sums[key]["n"] += 1
                for name, share in shares.items():
                    sums[key][name] += share
    for key in sorted(sums, key=str):
        s = sums[key]
        print(key, int(s["n"]), " ".join(f"{k}:{s[k] / s['n']:.3f}" for k in s if k != "n"))


if __name__ == "__main__":
    main()
