"""all-MiniLM-L6-v2 fp32 vs int8 (issue 18): bulk chunks/s and per CPU second, cold one-query
time, cosine of the int8 vectors to the fp32 model's.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python bench/results/2026-11-27/int8_bench.py [--chunks 640] \
        [--rounds 2] [--cold 7] [--json out.json]

The texts: chunks of sessions written by `pyrecall bench index`'s generator (imported into a
throwaway database, embedded by nothing), a fixed random sample, embedded in calls of 64 texts
as `pyrecall embed` does, with the process's threads (2 cores here). The three bulk paths take turns, each round in the opposite order, so
that a change of the machine's load weighs on all alike. Cold: a fresh Python process imports
pyrecall's embedder, loads the ONNX session and embeds one question (median wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pyrecall import Recall
from pyrecall._embed import LocalEmbedder
from pyrecall.bench._scratch import scratch_database
from pyrecall.bench.fake_embedder import FakeEmbedder
from pyrecall.bench.sessions import write_sessions

INT8 = "local/all-MiniLM-L6-v2-int8"
QUESTION = "how did we handle authentication tokens?"
COLD = ("from pyrecall._embed import LocalEmbedder; "
        "LocalEmbedder({model!r}, backend='onnx' if {fp32} else 'auto').embed([{q!r}])")


def chunk_texts(n: int, sessions: int = 40, seed: int = 0) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        write_sessions(tmp, sessions, seed=seed)
        with scratch_database() as url, Recall(url, embedder=FakeEmbedder()) as r:
            r.import_([Path(tmp)], agent_id="bench")
            texts = [row[0] for row in r.conn.execute(
                "select content from recall.chunks where content ~ '\\S' order by chunk_id")]
    return random.Random(seed).sample(texts, min(n, len(texts)))


def cold(runs: int) -> dict[str, float]:
    """Median wall time of a fresh process embedding one question, fp32 and int8 in turns."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    codes = {"fp32_onnx": COLD.format(model="local/all-MiniLM-L6-v2", fp32=True, q=QUESTION),
             "int8_onnx": COLD.format(model=INT8, fp32=False, q=QUESTION)}
    times: dict[str, list[float]] = {k: [] for k in codes}
    for code in codes.values():
        subprocess.run([sys.executable, "-c", code], env=env, check=True)  # the export, once
    for _ in range(runs):
        for name, code in codes.items():
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            times[name].append(time.perf_counter() - t)
    return {k: round(statistics.median(v), 3) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=640)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cold", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    report: dict = {"load_at_start": os.getloadavg()}
    texts = chunk_texts(args.chunks)
    report["chunks"] = len(texts)
    paths = {"torch": LocalEmbedder(backend="torch"), "fp32_onnx": LocalEmbedder(backend="onnx"),
             "int8_onnx": LocalEmbedder(INT8)}
    for e in paths.values():
        e.embed(texts[:64])  # loaded, warm
    wall = dict.fromkeys(paths, 0.0)
    cpu = dict.fromkeys(paths, 0.0)
    vectors = {}
    for r in range(args.rounds):
        for name in (list(paths) if r % 2 == 0 else list(paths)[::-1]):
            w, c = time.perf_counter(), time.process_time()
            vectors[name] = np.asarray([v for i in range(0, len(texts), 64)
                                        for v in paths[name].embed(texts[i:i + 64])])
            wall[name] += time.perf_counter() - w
            cpu[name] += time.process_time() - c
    n = args.rounds * len(texts)
    report["chunks_per_s"] = {k: round(n / v, 1) for k, v in wall.items()}
    report["chunks_per_cpu_s"] = {k: round(n / v, 2) for k, v in cpu.items()}
    cos = (vectors["int8_onnx"] * vectors["fp32_onnx"]).sum(axis=1)
    report["int8_vs_fp32_cosine"] = {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5),
                                     "p5": round(float(np.percentile(cos, 5)), 5)}
    cos = (vectors["fp32_onnx"] * vectors["torch"]).sum(axis=1)
    report["fp32_onnx_vs_torch_cosine_min"] = round(float(cos.min()), 6)
    report["load_after_bulk"] = os.getloadavg()
    if args.cold:
        report["cold_one_query_s"] = cold(args.cold)
    report["load_at_end"] = os.getloadavg()
    out = json.dumps(report, indent=2)
    print(out)
    if args.json:
        Path(args.json).write_text(out + "\n")


if __name__ == "__main__":
    main()
