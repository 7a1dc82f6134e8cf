"""``pyrecall bench mcp``: how fast a connected MCP client gets an answer from ``recall`` (or
``context``, the session-start context).

A throwaway database is built as ``pyrecall bench latency`` builds it (pyrecall.bench.latency:
synthetic sessions through the normal ingestion path, clustered 384-dim vectors written
directly, the ANN index of recall.create_vector_index); then ``pyrecall mcp`` is started for
the largest agent in a subprocess, the MCP SDK's client connects over stdio, and each
``recall`` call is timed from the client: the JSON-RPC round trip, the server embedding the
query with the local model (all-MiniLM-L6-v2), and recall.hybrid_recall. The first calls
(the model warming up) are not counted.

The stored vectors are synthetic and the queries pseudo-words: the answers mean nothing, the
work (one query embedding, one ANN + full-text search over the agent's chunks) is the real one.
With the default random topic centres every query, embedded by the model, is farther than
recall.config ann_far_distance from all of the agent's chunks (best cosine distance ~0.8), so
each call also pays the vector arm's second, wider search (docs/DBA.md, "Queries far from all of
an agent's topics"); ``centres="model"`` makes the topic centres the model's embeddings of each
topic's words, so that a query sits near its topic's chunks (best distance ~0.5), as a real
question sits near the text that answers it. The report gives the share of far queries.

    >>> report = run(n_chunks=100_000, calls=200)   # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from .. import _config
from . import latency, load


def _pct(values: list[float], p: float) -> float:
    return load._pct(values, p)


def _stats(ms: list[float]) -> dict[str, float]:
    return {"p50": _pct(ms, 50), "p95": _pct(ms, 95), "p99": _pct(ms, 99),
            "mean": round(statistics.fmean(ms), 2), "max": round(max(ms), 2), "n": len(ms)}


TOOLS = ("recall", "context")


def _tool_args(tool: str, query: str, k: int, token_budget: int | None) -> dict[str, Any]:
    """The arguments of one call: ``recall`` asks the query (k, token_budget); ``context`` (the
    session-start context, recall.auto_context) takes the query as the task, token_budget
    or the tool's default 4000."""
    if tool == "context":
        return {"task_text": query} | ({"token_budget": token_budget} if token_budget is not None else {})
    return {"query": query, "k": k} | ({"token_budget": token_budget} if token_budget is not None else {})


async def _drive(url: str, agent: str, queries: list[str], *, warmup: int, k: int,
                 token_budget: int | None, tool: str = "recall") -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    root = Path(__file__).resolve().parents[2]
    env = {"HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
           "HF_HUB_DISABLE_PROGRESS_BARS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}
    if os.environ.get("PYRECALL_EMBED_MODEL"):
        env["PYRECALL_EMBED_MODEL"] = os.environ["PYRECALL_EMBED_MODEL"]
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "pyrecall.cli", "mcp", "--dsn", url, "--agent-id", agent],
                                   env=env)
    t = time.perf_counter()
    async with Client(params, read_timeout_seconds=300) as client:
        connected_s = time.perf_counter() - t
        first = time.perf_counter()
        result = await client.call_tool(tool, _tool_args(tool, queries[0], k, token_budget))
        first_ms = (time.perf_counter() - first) * 1000
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content[0].text}")
        for q in queries[1:warmup]:
            await client.call_tool(tool, _tool_args(tool, q, k, token_budget))
        times, rows, sources = [], [], set()
        for q in queries[warmup:]:
            t0 = time.perf_counter()
            result = await client.call_tool(tool, _tool_args(tool, q, k, token_budget))
            times.append((time.perf_counter() - t0) * 1000)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content[0].text}")
            rows.append(len(result.structured_content["memories"]))
            sources.add(result.structured_content["source"])
    return {"connect_s": round(connected_s, 2), "first_call_ms": round(first_ms, 1),
            f"{tool}_ms": _stats(times), "rows_per_call": round(statistics.fmean(rows), 1),
            "sources": sorted(sources)}


def components(url: str, agent: str, queries: list[str], *, k: int,
               token_budget: int | None, tool: str = "recall") -> dict[str, Any]:
    """The parts of a call, timed in this process: the query embedding (the local model, one
    thread as in the server), then the tool's function (recall.hybrid_recall, or
    recall.auto_context for ``context``) with that vector twice: on a connection bound as the
    server's are (Pool: role recall_agent, row-level security; one connection, as a pooled one
    serves call after call), and as the login role (the owner: no row-level security). What
    the MCP round trip adds is the rest; what row-level security costs is the difference."""
    from .._embed import get_embedder
    from .._mcp import Pool, _one_torch_thread
    from ..client import _args, _auto_args, _call

    function = "auto_context" if tool == "context" else "hybrid_recall"

    _one_torch_thread()
    embedder = get_embedder(None)
    embedder.embed(["warm up"])
    embed_ms, bound_ms, owner_ms = [], [], []
    pool = Pool(url, agent, size=1)
    try:
        with psycopg.connect(url, autocommit=True) as owner:
            register_vector(owner)
            for q in queries:
                t = time.perf_counter()
                vector = np.asarray(embedder.embed([q])[0], dtype=np.float32)
                embed_ms.append((time.perf_counter() - t) * 1000)
                if tool == "context":
                    args = _auto_args(agent, None, None, q, vector,
                                      4000 if token_budget is None else token_budget, None, False, None)
                else:
                    args = _args(agent, q, vector, k, token_budget, None, None, None, None, None, {})
                with pool.connection() as conn:
                    t = time.perf_counter()
                    conn.execute(_call(function, args), args).fetchall()
                    bound_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                owner.execute(_call(function, args), args).fetchall()
                owner_ms.append((time.perf_counter() - t) * 1000)
    finally:
        pool.close()
    return {"embed_ms": _stats(embed_ms), f"{function}_ms": _stats(bound_ms),
            f"{function}_unbound_ms": _stats(owner_ms)}


CENTRES = ("random", "model")


def model_centres(synth: latency.Synth) -> None:
    """Make ``synth``'s topic centres the local model's embeddings of each topic's words."""
    from .._embed import get_embedder

    texts = [" ".join(synth.words[synth.topic_words[t]]) for t in range(len(synth.centres))]
    centres = np.asarray(get_embedder(None).embed(texts), dtype=np.float32)
    synth.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)


def far_share(url: str, agent: str, queries: list[str]) -> dict[str, Any]:
    """How far the queries are from the agent's chunks: the median best cosine distance (an
    exact scan) and the share beyond recall.config ann_far_distance (those take the far pass)."""
    from .._embed import get_embedder

    vectors = np.asarray(get_embedder(None).embed(queries), dtype=np.float32)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        far = conn.execute("select (value #>> '{}')::float8 from recall.config "
                           "where key = 'ann_far_distance'").fetchone()
        best = [conn.execute("select min(embedding <=> %s) from recall.chunks where agent_id = %s",
                             (v, agent)).fetchone()[0] for v in vectors]
    limit = far[0] if far else None
    return {"best_distance_p50": round(statistics.median(best), 3), "ann_far_distance": limit,
            "far_share": round(sum(b > limit for b in best) / len(best), 3) if limit is not None else 0.0}


def run(n_chunks: int = 100_000, n_agents: int = 1, *, calls: int = 100, warmup: int = 10,
        k: int = 10, token_budget: int | None = None, seed: int = 7, dsn: str | None = None,
        centres: str = "random", tool: str = "recall", log=lambda m: None) -> dict[str, Any]:
    """Build, serve the largest agent over MCP (stdio), time ``calls`` calls of ``tool``."""
    from ._scratch import scratch_database

    if centres not in CENTRES:
        raise ValueError(f"centres must be one of {', '.join(CENTRES)}, got {centres!r}")
    if tool not in TOOLS:
        raise ValueError(f"tool must be one of {', '.join(TOOLS)}, got {tool!r}")
    synth = latency.Synth(seed)
    if centres == "model":
        model_centres(synth)
    agents = latency.plan_agents(synth, latency.agent_sizes(n_chunks, n_agents))
    largest = max(agents, key=lambda a: a.size)
    topics = [int(largest.topics[i % len(largest.topics)]) for i in range(calls + warmup)]
    queries = [synth.query_text(t) for t in topics]
    with scratch_database(dsn) as url:
        # the stored vectors stand for the server's model's (its queries are that model's)
        built = load.build(url, synth, agents, log, model=_config.embed_model())
        log(f"built {built['chunks']:,} chunks in {built['build_s']} s; serving {largest.agent_id} "
            f"({largest.size:,} chunks) over MCP")
        load_before = os.getloadavg()[0]
        measured = asyncio.run(_drive(url, largest.agent_id, queries, warmup=warmup, k=k,
                                      token_budget=token_budget, tool=tool))
        log(f"timing the parts in this process: query embedding, "
            f"{'auto_context' if tool == 'context' else 'hybrid_recall'}")
        parts = components(url, largest.agent_id, queries[warmup:], k=k, token_budget=token_budget,
                           tool=tool)
        distance = far_share(url, largest.agent_id, queries[warmup:])
    return {"chunks": built["chunks"], "agents": n_agents, "agent": largest.agent_id,
            "agent_chunks": largest.size, "tool": tool, "k": k, "token_budget": token_budget,
            "centres": centres,
            "queries": distance,
            "warmup_calls": warmup, "build": {"ingest_s": built["ingest"]["ingest_s"],
                                              "vectors_s": built["vectors_s"],
                                              "index": (built["index"] or {}).get("definition"),
                                              "index_s": (built["index"] or {}).get("build_s")},
            **measured, "parts": parts,
            "machine": {**load.machine(), "load_avg_1m": [round(load_before, 1),
                                                          round(os.getloadavg()[0], 1)]}}
