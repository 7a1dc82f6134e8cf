"""The same synthetic memories in peer stores, in the same run: LanceDB and Chroma.

pyrecall is loaded as in :mod:`.latency` (messages through the ingestion path, chunked in the
database, vectors written, ANN index built); the resulting chunks (id, agent, text, vector)
are then written to
- LanceDB: one table, a BTREE scalar index on agent_id, a full-text index on text and its
  default vector index (cosine); queried with a prefilter on agent_id, vector-only and hybrid;
- Chroma: one persistent collection (cosine HNSW), metadata agent_id; queried with
  ``where={"agent_id": ...}``.
Every store answers the same queries; recall@10 is against the exact per-agent answer.
Needs the ``bench`` extra's optional peers: ``pip install lancedb chromadb``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import latency


def _stats(times: list[float], recalls: list[float] | None = None) -> dict[str, Any]:
    out = latency._stats(times)
    if recalls is not None:
        out["recall@10"] = round(statistics.fmean(recalls), 4)
    return out


def _measure(queries: list[latency.Query], truth: list[list[int]],
             ask: Callable[[latency.Query], list[int]]) -> dict[str, Any]:
    times, recalls = [], []
    for rnd in range(2):  # round 0 warms up
        for q, t in zip(queries, truth, strict=True):
            start = time.perf_counter()
            got = ask(q)
            if rnd:
                times.append((time.perf_counter() - start) * 1000)
                recalls.append(len(set(got) & set(t)) / max(1, len(t)))
    return _stats(times, recalls)


# LanceDB's vector query tuned for recall (its defaults: 20 probes, no refine)
LANCE_NPROBES, LANCE_REFINE = 50, 10


def lancedb_run(rows: dict[str, Any], queries, truth, workdir: str) -> dict[str, Any]:
    os.environ.setdefault("LANCE_LOG", "error")  # else a deprecation warning per query
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(workdir)
    n = len(rows["chunk_id"])
    t = time.perf_counter()
    table = None
    for i in range(0, n, 50_000):
        part = pa.table({
            "chunk_id": pa.array(rows["chunk_id"][i:i + 50_000], pa.int64()),
            "agent_id": pa.array(rows["agent_id"][i:i + 50_000], pa.string()),
            "text": pa.array(rows["text"][i:i + 50_000], pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(rows["vector"][i:i + 50_000].reshape(-1), pa.float32()), latency.DIM),
        })
        if table is None:
            table = db.create_table("chunks", part)
        else:
            table.add(part)
    insert_s = time.perf_counter() - t
    t = time.perf_counter()
    table.create_scalar_index("agent_id", index_type="BTREE")
    table.create_fts_index("text")
    table.create_index(metric="cosine", vector_column_name="vector")
    index_s = time.perf_counter() - t

    def vector_query(q, tuned: bool = False):
        query = (table.search(q.vector, vector_column_name="vector")
                 .where(f"agent_id = '{q.agent.agent_id}'", prefilter=True))
        if tuned:
            # LanceDB's knobs for recall: more IVF partitions probed, and the PQ candidates
            # re-ranked on their full vectors (refine_factor x limit of them)
            query = query.nprobes(LANCE_NPROBES).refine_factor(LANCE_REFINE)
        return query.select(["chunk_id"]).limit(10).to_arrow()["chunk_id"].to_pylist()

    def hybrid(q):
        res = (table.search(query_type="hybrid", vector_column_name="vector")
               .vector(q.vector).text(q.text)
               .where(f"agent_id = '{q.agent.agent_id}'", prefilter=True)
               .limit(10).to_arrow())
        return res["chunk_id"].to_pylist()

    out = {"version": lancedb.__version__, "insert_s": round(insert_s, 2),
           "rows_per_s": round(n / insert_s, 1), "index_s": round(index_s, 2),
           "vector_filtered": _measure(queries, truth, vector_query),
           "vector_filtered_refined": {"nprobes": LANCE_NPROBES, "refine_factor": LANCE_REFINE,
                                       **_measure(queries, truth, lambda q: vector_query(q, tuned=True))}}
    try:
        out["hybrid_filtered"] = _measure(queries, truth, hybrid)
    except Exception as exc:  # report, do not hide, a peer's failure
        out["hybrid_filtered"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def chroma_run(rows: dict[str, Any], queries, truth, workdir: str) -> dict[str, Any]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=workdir, settings=Settings(anonymized_telemetry=False))
    coll = client.create_collection("chunks", metadata={"hnsw:space": "cosine"})
    n = len(rows["chunk_id"])
    batch = min(5000, client.get_max_batch_size())
    t = time.perf_counter()
    for i in range(0, n, batch):
        coll.add(ids=[str(x) for x in rows["chunk_id"][i:i + batch]],
                 embeddings=rows["vector"][i:i + batch],
                 documents=rows["text"][i:i + batch],
                 metadatas=[{"agent_id": a} for a in rows["agent_id"][i:i + batch]])
    insert_s = time.perf_counter() - t

    def vector_only(q):
        res = coll.query(query_embeddings=[q.vector], n_results=10,
                         where={"agent_id": q.agent.agent_id}, include=[])
        return [int(x) for x in res["ids"][0]]

    return {"version": chromadb.__version__, "insert_s": round(insert_s, 2),
            "rows_per_s": round(n / insert_s, 1), "index_s": 0.0,
            "vector_filtered": _measure(queries, truth, vector_only)}


def run(n_chunks: int = 100_000, n_agents: int = 200, *, dsn: str | None = None, seed: int = 7,
        queries_per_class: int = 100, peers: tuple[str, ...] = ("lancedb", "chroma"),
        progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Load the synthetic data into pyrecall and each peer; time the same filtered queries."""
    from ._scratch import scratch_database
    from .locomo import _connect

    synth = latency.Synth(seed)
    agents = latency.plan_agents(synth, latency.agent_sizes(n_chunks, n_agents))
    report: dict[str, Any] = {"chunks": None, "agents": n_agents}
    with scratch_database(dsn) as url, _connect(url) as conn:
        loaded = latency.load(conn, synth, agents, progress=progress)
        latency.set_embeddings(conn, synth, agents, progress=progress)
        conn.execute("vacuum analyze recall.chunks")
        index = latency.build_index(conn)
        conn.execute("select recall.summarize_sessions()")
        fetched = conn.execute("select chunk_id, agent_id, content, embedding from recall.chunks "
                               "order by chunk_id").fetchall()
        rows = {"chunk_id": [r[0] for r in fetched], "agent_id": [r[1] for r in fetched],
                "text": [r[2] for r in fetched],
                "vector": np.stack([_array(r[3]) for r in fetched])}
        del fetched
        report["chunks"] = len(rows["chunk_id"])
        by_class = latency.make_queries(synth, agents, queries_per_class)
        queries = [q for qs in by_class.values() for q in qs]
        truth = [[r[0] for r in conn.execute(latency.EXACT, [q.agent.agent_id, q.vector]).fetchall()]
                 for q in queries]
        ours = latency.measure(conn, {"all": queries}, progress=progress)["all"]
        report["pyrecall"] = {"ingest_messages_per_s": loaded["messages_per_s"],
                              "index_s": index["build_s"], "index": index["definition"],
                              "exact": ours["exact"], "ann": ours["ann"],
                              "hybrid_recall": ours["hybrid"], "session_recall": ours["session"]}
    for name in peers:
        workdir = tempfile.mkdtemp(prefix=f"pyrecall-peer-{name}-")
        try:
            fn = lancedb_run if name == "lancedb" else chroma_run
            report[name] = fn(rows, queries, truth, workdir)
        except ImportError as exc:
            report[name] = {"error": f"not installed: {exc} (pip install lancedb chromadb)"}
        except Exception as exc:
            report[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    report["n_queries"] = len(queries)
    return report


def _array(v) -> np.ndarray:
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)
