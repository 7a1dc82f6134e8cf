"""Release 12: auto_context v10 and v12 at equal token budgets on the LoCoMo dev split, with
their default shares (Recent 0.3 of the budget: the newest chunks) and with recent_share 0
(Related alone: v12's is then hybrid_recall_v11's context). rank_lab.py's database migrated
to this tree (LAB=one: turn_vec_lab.py setup-one's). Output: auto_context_lab.txt.

    python auto_context_lab.py auto_context_v10 auto_context_v12 'auto_context_v12:{"recent_share": 0}'
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26"))
import rank_lab  # noqa: E402

from pyrecall.bench import locomo  # noqa: E402

BUDGETS = ("250", "500", "1000", "2000")


def main(specs: list[str]) -> None:
    one = os.environ.get("LAB") == "one"
    lab = Path("/tmp/rank-lab-one") if one else rank_lab.LAB
    dataset = locomo.load_file(rank_lab.DATA, one_agent="locomo" if one else None)
    embeddings = list(np.load(lab / "questions.npy"))
    with locomo._connect((lab / "url").read_text()) as conn:
        for spec in specs:
            name, _, opts = spec.partition(":")
            method = locomo.Method(spec, function=name, options=json.loads(opts) if opts else {})
            t = time.perf_counter()
            got = locomo.evaluate_budgets(conn, dataset.questions, embeddings, [method],
                                          [int(b) for b in BUDGETS])[spec]
            print(("one " if one else "dev ") + spec.ljust(45),
                  " ".join(f"{got[b]['recall']:.3f}" for b in BUDGETS),
                  f"mh {got['1000']['by_category']['1']['recall']:.3f}",
                  "tok", "/".join(f"{got[b]['tokens']:.0f}" for b in BUDGETS),
                  f"({time.perf_counter() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
