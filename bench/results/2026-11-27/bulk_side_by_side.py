"""Bulk embedding with batches side by side (issue 18, 2026-11-27 third session): the local
MiniLM (fp32 and int8) embedding chunks in calls of 64 as `pyrecall embed` does, one batch at a
time on a session with every core (before: ``workers = 1``) against several batches at once on
a one-thread session (now), in alternating rounds in one process; and the vectors of both.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python bench/results/2026-11-27/bulk_side_by_side.py [--chunks 384] [--rounds 4]

The texts: chunks of sessions written by `pyrecall bench index`'s generator (int8_bench.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from int8_bench import chunk_texts  # noqa: E402

from pyrecall._embed import LocalEmbedder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=384)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    texts = chunk_texts(args.chunks)
    report: dict = {"chunks": len(texts), "cpus": len(os.sched_getaffinity(0)), "load_at_start": os.getloadavg()}
    for name in ("local/all-MiniLM-L6-v2", "local/all-MiniLM-L6-v2-int8"):
        e = LocalEmbedder(name)
        model = e._loaded(64)[0]
        cpus = model.workers
        e.embed(texts[:64])
        rows = {"one batch at a time": [], "side by side": []}
        vectors = {}
        for r in range(args.rounds):
            for mode in (("one batch at a time", "side by side") if r % 2 == 0 else
                         ("side by side", "one batch at a time")):
                model.workers = 1 if mode == "one batch at a time" else cpus
                t, c = time.perf_counter(), time.process_time()
                out = [v for i in range(0, len(texts), 64) for v in e.embed(texts[i:i + 64])]
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                rows[mode].append({"chunks_per_s": round(len(texts) / wall, 1),
                                   "per_cpu_s": round(len(texts) / cpu, 1), "load": round(os.getloadavg()[0], 2)})
                vectors[mode] = np.asarray(out)
                print(name, mode, rows[mode][-1], flush=True)
        model.workers = cpus
        diff = float(np.abs(vectors["one batch at a time"] - vectors["side by side"]).max())
        med = {k: float(np.median([x["chunks_per_s"] for x in v])) for k, v in rows.items()}
        report[name] = {"rounds": rows, "median_chunks_per_s": med,
                        "ratio": round(med["side by side"] / med["one batch at a time"], 3),
                        "max_abs_diff": diff}
        print(name, "ratio", report[name]["ratio"], "max |diff|", diff, flush=True)
    out = Path(__file__).with_name("bulk_side_by_side.json")
    out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
