"""Index a real-sized history end to end: generated Claude Code sessions, `pyrecall import`,
`pyrecall embed` with the local model, then cold one-shot recalls.

Steps, each timed, into a throwaway database, through the client the commands call:
1. write N sessions (pyrecall.bench.sessions, ~50 chunks each);
2. import them (``Recall.import_``, what `pyrecall import DIR` calls);
3. embed every chunk (``Recall.embed_pending``, what `pyrecall embed` runs, its VACUUM
   (ANALYZE) of a large run and the agent's vector index included), model loaded beforehand;
   hybrid_recall's p95 right after it and after a second vacuum (the settled state), and at
   the end without the agent's index (the exact scan it replaced);
4. the raw model on a sample of the same chunks (calls of 64): the model the job ran (ONNX
   Runtime), so the pipeline's share of the model's speed is measured in the same run, and
   the fp32 MiniLM on sentence-transformers (torch), the bulk path before 2026-11-27;
5. cold `pyrecall recall "QUESTION"` and `pyrecall recall --auto --task-text T --hook`, each a
   new process, 5 runs, median.

The p95 and the sample of chunk texts are read on a second connection of the benchmark's own
(instruments, not the product's path).

    >>> run(20)["end_to_end_s"]  # doctest: +SKIP
"""

from __future__ import annotations

import compileall
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import _db, _index
from .._embed import LocalEmbedder
from ..client import Recall
from ._scratch import scratch_database
from .ingest import server_cpu_ns
from .sessions import write_sessions

AGENT = "claude-code"
QUERIES = ["why did the tests fail with a duplicate key?", "add retries with backoff",
           "pool exhausted timeout under load", "migration backfill column", "where is the user_id validated?",
           "the endpoint returns 500 on empty input", "configure structured logging", "rate limiting"]
QUESTION = "why did the billing migration fail with a duplicate key?"
TASK = "add idempotency keys to the orders endpoint"


def _p95(conn, vectors: list[np.ndarray], rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        for q, v in zip(QUERIES, vectors, strict=True):
            t = time.perf_counter()
            conn.execute("select chunk_id from recall.hybrid_recall(agent_id => %s, query_text => %s, "
                         "query_embedding => %s, k => 10, token_budget => 2000)", [AGENT, q, v]).fetchall()
            times.append(time.perf_counter() - t)
    return round(float(np.percentile(times, 95)) * 1000, 1)


def _command() -> list[str]:
    script = Path(sys.executable).with_name("pyrecall")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from pyrecall.cli import run; run()"]


def _compile_package() -> None:
    """Byte-compile pyrecall as installing its wheel does: a development tree run with
    PYTHONDONTWRITEBYTECODE=1 (or edited since) would otherwise compile its modules in every
    process, which no installed copy does."""
    compileall.compile_dir(str(Path(__file__).resolve().parents[1]), quiet=1)


def cold_recall(url: str, args: list[str], runs: int = 5, stdin: str | None = None,
                check: bool = True, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Wall and CPU seconds (user + system, the process and its children) of ``pyrecall ARGS``
    in new processes: medians and every run. CPU time hardly moves with the machine's load;
    wall time does."""
    env = {**os.environ, "PYRECALL_DSN": url, "HF_HUB_OFFLINE": "1", **(env or {})}
    _compile_package()
    times, cpus = [], []
    for _ in range(runs):
        t = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run([*_command(), *args], env=env, input=stdin or "", capture_output=True,
                              text=True, timeout=300)
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if check and (proc.returncode != 0
                      or not re.search(r'source=hybrid|"source": "hybrid"', proc.stdout)):
            raise RuntimeError(f"pyrecall {' '.join(args)} failed or did not recall by meaning: "
                               f"{(proc.stderr or proc.stdout).strip()[-300:]}")
    return {"median_s": round(statistics.median(times), 3), "runs_s": [round(t, 3) for t in times],
            "median_cpu_s": round(statistics.median(cpus), 3)}


def _raw(encode: Callable[[list[str]], Any], texts: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds to embed ``texts`` in batches of 64."""
    t, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), 64):
        encode(texts[i:i + 64])
    return time.perf_counter() - t, time.process_time() - cpu


def run(n_sessions: int = 1000, *, dsn: str | None = None, seed: int = 0, sample: int = 640,
        recall_runs: int = 5, model: str = "local/all-MiniLM-L6-v2", turn_vectors: bool = True,
        log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Generate, import, embed and recall; the report (seconds, chunks/s, latencies, load).
    ``model``: the local model that embeds the chunks and the cold recalls' queries;
    ``turn_vectors`` false: recall.config turn_vectors false (the job embeds no turn of its own:
    chunks only, as before release 11). The pipeline's chunks/s counts chunks; with turn vectors
    the job also embeds each text turn of the chat chunks ("turns_embedded")."""
    report: dict[str, Any] = {"sessions": n_sessions, "model": model, "turn_vectors": turn_vectors,
                              "load_at_start": os.getloadavg()}
    tmp = Path(tempfile.mkdtemp(prefix="pyrecall-bench-index-"))
    try:
        t = time.perf_counter()
        write_sessions(tmp, n_sessions, seed=seed)
        report["generate_s"] = round(time.perf_counter() - t, 1)
        log(f"{n_sessions} sessions written in {report['generate_s']} s")
        embedder = LocalEmbedder(model)
        with scratch_database(dsn) as url, Recall(url, embedder=embedder) as r, \
                _db.connect(url) as probe:
            t = time.perf_counter()
            imported = r.import_([tmp], agent_id=AGENT)
            report["index_s"] = round(time.perf_counter() - t, 1)
            report["messages"] = imported.inserted
            report["chunks"] = sum(s["chunks"] for s in r.sessions(AGENT, limit=n_sessions + 1))
            log(f"indexed: {report['chunks']} chunks in {report['index_s']} s")

            t = time.perf_counter()
            embedder.embed(["warm up"] * 64)   # loads the model `pyrecall embed` uses
            report["model_load_s"] = round(time.perf_counter() - t, 1)
            report["bulk_backend"] = type(embedder._loaded(64)[0]).__name__
            # the raw model on a sample of the same chunks, half before and half after the
            # pipeline, so that a change of the machine's load weighs on both alike
            texts = [row[0] for row in probe.execute("select content from recall.chunks where "
                                                     "content ~ '\\S' order by chunk_id").fetchall()]
            texts = random.Random(seed).sample(texts, min(sample, len(texts)))
            half = len(texts) // 2
            raw_before = _raw(embedder.embed, texts[:half])

            vectors = [np.asarray(v, dtype=np.float32) for v in embedder.embed(QUERIES)]
            if not turn_vectors:
                probe.execute("insert into recall.config (key, value) values ('turn_vectors', 'false') "
                              "on conflict (key) do update set value = excluded.value")
            backend = r.conn.info.backend_pid          # whose CPU time the embedding costs
            t, cpu, server = time.perf_counter(), time.process_time(), server_cpu_ns(probe, backend)
            embedded = r.embed_pending(batch_size=64)
            embed_s, embed_cpu = time.perf_counter() - t, time.process_time() - cpu
            server_end = server_cpu_ns(probe, backend)
            if server is not None and server_end is not None:
                embed_cpu += (server_end - server) / 1e9   # the backend's share: claims, updates
            # the job ends by building the agent's own vector index (pyrecall._index.upkeep):
            # counted in embed_s, not in the pipeline's chunks/s (the model's work)
            index_s = sum(row["build_seconds"] or 0 for row in embedded.indexed)
            report["embed_s"] = round(embed_s, 1)
            report["embedded"] = embedded.embedded
            report["turns_embedded"] = probe.execute(
                "select count(*) from recall.messages where embedding is not null").fetchone()[0]
            report["vacuumed"] = embedded.vacuumed
            report["index_built"] = [{"rows": row["index_rows"], "method": row["method"],
                                      "build_s": row["build_seconds"]} for row in embedded.indexed]
            report["pipeline_chunks_per_s"] = round(embedded.embedded / (embed_s - index_s), 1)
            report["pipeline_chunks_per_cpu_s"] = round(embedded.embedded / embed_cpu, 2)
            log(f"embedded {embedded.embedded} in {embed_s:.0f} s")
            # at once, before autovacuum can come: what the job leaves; then settled
            report["p95_ms_right_after_embed"] = _p95(probe, vectors)
            probe.execute("vacuum (analyze) recall.chunks")
            report["p95_ms_later"] = _p95(probe, vectors)
            raw_after = _raw(embedder.embed, texts[half:])
            report["raw_sample"] = len(texts)
            report["raw_bulk_chunks_per_s"] = round(len(texts) / (raw_before[0] + raw_after[0]), 1)
            report["raw_bulk_chunks_per_cpu_s"] = round(len(texts) / (raw_before[1] + raw_after[1]), 2)
            # the bulk path before 2026-11-27: the fp32 MiniLM on sentence-transformers (torch)
            torch = LocalEmbedder(backend="torch")
            torch.embed(texts[:2])  # loaded
            wall, cpu = _raw(torch.embed, texts)
            report["raw_torch_chunks_per_s"] = round(len(texts) / wall, 1)
            report["raw_torch_chunks_per_cpu_s"] = round(len(texts) / cpu, 2)
            report["pipeline_vs_raw"] = round(report["pipeline_chunks_per_s"] / report["raw_bulk_chunks_per_s"], 3)
            report["pipeline_vs_raw_cpu"] = round(report["pipeline_chunks_per_cpu_s"]
                                                  / report["raw_bulk_chunks_per_cpu_s"], 3)
            log(f"raw model: {report['raw_bulk_chunks_per_s']}/s (fp32 on torch {report['raw_torch_chunks_per_s']}/s)")

            report["end_to_end_s"] = round(report["generate_s"] + report["index_s"] + report["model_load_s"]
                                           + report["embed_s"], 1)

            model_env = {"PYRECALL_EMBED_MODEL": model}
            report["cold_recall"] = cold_recall(url, ["recall", QUESTION], recall_runs, env=model_env)
            hook = '{"cwd": "/home/dev/acme-api", "session_id": "new-session"}'
            report["cold_auto_hook"] = cold_recall(
                url, ["recall", "--auto", "--task-text", TASK, "--hook", "--format", "json"], recall_runs, hook,
                env=model_env)
            # the floor of any pyrecall process on this machine now: imports, no database
            report["cold_help"] = cold_recall(url, ["--help"], recall_runs, check=False)
            log(f"cold recall median {report['cold_recall']['median_s']} s "
                f"(pyrecall --help {report['cold_help']['median_s']} s)")
            # the same queries without the agent's index (what the job left before it built one):
            # the exact scan of every chunk of the agent
            if embedded.indexed:
                _index.drop_index(probe)
                report["p95_ms_without_index"] = _p95(probe, vectors)
                log(f"p95 {report['p95_ms_later']} ms with the agent's index, "
                    f"{report['p95_ms_without_index']} ms without")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report["load_at_end"] = os.getloadavg()
    return report

