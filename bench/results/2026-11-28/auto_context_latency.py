"""auto_context v10 and v12 timed alternately (the same questions as tasks, the default budget
4000 and 1000), on rank_lab.py's database (the LoCoMo dev split, turn vectors embedded):
the wall time of each call's round trip on a Unix socket, every fourth question (190), a
warm-up round first. Output: auto_context_latency.txt.

    python auto_context_latency.py > auto_context_latency.txt
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26"))
import rank_lab  # noqa: E402

from pyrecall.bench import locomo  # noqa: E402


def main() -> None:
    dataset = locomo.load_file(rank_lab.DATA)
    embeddings = list(np.load(rank_lab.LAB / "questions.npy"))
    pairs = list(zip(dataset.questions, embeddings, strict=True))[::4][:200]
    times: dict = {}
    with locomo._connect((rank_lab.LAB / "url").read_text()) as conn:
        for budget in (1000, 4000):
            for rnd in range(2):            # the first round warms both up; the second is kept
                for q, e in pairs:
                    for v in ("v10", "v12") if rnd % 2 == 0 else ("v12", "v10"):
                        t = time.perf_counter()
                        conn.execute(f"select * from recall.auto_context_{v}(%s, task_text => %s, "
                                     "task_embedding => %s, token_budget => %s, as_of => %s)",
                                     [q.agent_id, q.text, e, budget, q.as_of]).fetchall()
                        if rnd:
                            times.setdefault((budget, v), []).append((time.perf_counter() - t) * 1000)
    print(f"load {os.getloadavg()[0]:.1f}; {len(pairs)} questions, ms p50 / p95")
    for (budget, v), ms in sorted(times.items()):
        ms.sort()
        print(f"B {budget} auto_context_{v}: {statistics.median(ms):.1f} / {ms[int(0.95 * (len(ms) - 1))]:.1f}")


if __name__ == "__main__":
    main()
