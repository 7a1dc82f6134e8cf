"""The vector arm on real embeddings: recall@10 against the exact scan on MiniLM vectors of real
text, with real questions as queries (``pyrecall bench ann``).

The text: every turn of a LoCoMo file and, for turns of several sentences, each sentence too
(real sentences, ~9,700 units from the development split); the queries: every question of
the file. Both are embedded with the local model (all-MiniLM-L6-v2 unless ``--model``). The
units are one agent's chunks, written straight into a throwaway database (binary COPY; this
measures the vector arm, not chunking), indexed by ``recall.create_vector_index()`` (the agent
gets an HNSW index of its own), then each question asks:

- ``recall._vector_arm`` as hybrid_recall asks it (100 candidates; the configured widths), its
  first 10 against the exact top 10 (``recall._vector_exact``);
- the same arm for 10 rows at each search width of ``ef_values`` (the configured widths set to
  1 for the run, so that the session's hnsw.ef_search decides): the recall curve.

With ``compare`` (the default), a second agent of as many topic-mixture vectors
(:mod:`pyrecall.bench.latency`) gets the same treatment in the same database, so that the
synthetic data's difficulty can be set beside the real one's at equal size.

    >>> report = run("../shared/data/locomo/locomo-dev.json")   # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from .._embed import get_embedder
from .._errors import ConfigError

DEFAULT_EF = (10, 20, 40, 100, 200, 400)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
ARM = "select chunk_id from recall._vector_arm(%s, %s, %s, null, null, null, null, null) limit 10"
EXACT = "select chunk_id, distance from recall._vector_exact(%s, %s, 11, null, null, null, null, null)"


def read_units(path: str | Path, *, sentences: bool = True) -> tuple[list[str], list[str]]:
    """(units, questions) of a LoCoMo file: each turn's text (a photo's caption appended) and,
    with ``sentences``, each sentence of 3 words or more of a turn of several; each distinct
    text once. Questions: every ``qa`` question, whatever its category."""
    from .locomo import turn_text

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if isinstance(data, dict):
        data = [data]
    units: dict[str, None] = {}
    questions: dict[str, None] = {}
    for sample in data:
        conv = sample.get("conversation") or {}
        for key in sorted(conv):
            turns = conv[key]
            if not (key.startswith("session_") and isinstance(turns, list)):
                continue
            for turn in turns:
                text = turn_text(turn)
                if not text:
                    continue
                units[text] = None
                parts = [p for p in SENTENCE.split(turn.get("text") or "") if len(p.split()) >= 3]
                if sentences and len(parts) > 1:
                    units.update(dict.fromkeys(parts))
        for qa in sample.get("qa") or []:
            if (qa.get("question") or "").strip():
                questions[qa["question"].strip()] = None
    if not units or not questions:
        raise ConfigError(f"{path}: no LoCoMo turns or questions found")
    return list(units), list(questions)


def load_agent(conn: psycopg.Connection, agent_id: str, texts: Sequence[str], vectors: np.ndarray,
               *, session_size: int = 100) -> None:
    """One agent's chunks straight into recall.chunks (sessions of ``session_size``)."""
    import datetime as dt

    n = len(texts)
    sessions = [f"{agent_id}/s{i // session_size}" for i in range(n)]
    now = dt.datetime.now(dt.UTC)
    with conn.cursor() as cur:
        with cur.copy("copy recall.sessions (session_id, agent_id) from stdin") as cp:
            for sid in dict.fromkeys(sessions):
                cp.write_row([sid, agent_id])
        cur.execute("alter table recall.chunks disable trigger user")
        try:
            with cur.copy("copy recall.chunks (agent_id, session_id, kind, first_seq, message_ids, "
                          "content, n_tokens, created_at, embedding) from stdin (format binary)") as cp:
                cp.set_types(["text", "text", "text", "int4", "int8[]", "text", "int4", "timestamptz",
                              "vector"])
                for i in range(n):
                    cp.write_row([agent_id, sessions[i], "message", i % session_size, [i],
                                  texts[i], max(1, len(texts[i]) // 4),
                                  now - dt.timedelta(minutes=n - i), vectors[i]])
        finally:
            cur.execute("alter table recall.chunks enable trigger user")


def _recall(got: Sequence[int], truth: Sequence[int]) -> float:
    return len(set(got) & set(truth)) / max(1, len(truth))


def measure(conn: psycopg.Connection, agent_id: str, queries: Sequence[np.ndarray],
            ef_values: Sequence[int], *,
            progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """The arm as hybrid_recall asks it, and the recall curve over ``ef_values``, for one agent."""
    advance = progress(f"asking {agent_id}", len(queries)) if progress else None
    truths, sims, arm_recall, arm_ms = [], [], [], []
    for q in queries:
        rows = conn.execute(EXACT, [agent_id, q]).fetchall()
        truths.append([r[0] for r in rows[:10]])
        sims.append([1 - r[1] for r in rows])
        t = time.perf_counter()
        got = [r[0] for r in conn.execute(ARM, [agent_id, q, 100])]
        arm_ms.append((time.perf_counter() - t) * 1000)
        arm_recall.append(_recall(got, truths[-1]))
        if advance:
            advance(1)
    path = _path(conn, agent_id, queries[0])
    saved = {k: v for k, v in conn.execute(
        "select key, value::text from recall.config where key in ('ann_min_ef_search', 'ann_ef_search_by_rows')")}
    curve = {}
    try:
        conn.execute("update recall.config set value = '1' where key = 'ann_min_ef_search'")
        conn.execute("""update recall.config set value = '{"0": 1}' where key = 'ann_ef_search_by_rows'""")
        for ef in ef_values:
            conn.execute(sql.SQL("set hnsw.ef_search = {}").format(sql.Literal(int(ef))))
            rec = [_recall([r[0] for r in conn.execute(ARM, [agent_id, q, 10])], truth)
                   for q, truth in zip(queries, truths, strict=True)]
            curve[str(ef)] = round(statistics.fmean(rec), 4)
    finally:
        conn.execute("reset hnsw.ef_search")
        for k, v in saved.items():
            conn.execute("update recall.config set value = %s::jsonb where key = %s", [v, k])
    s = np.array([x for x in sims if len(x) == 11])
    return {
        "chunks": conn.execute("select count(*) from recall.chunks where agent_id = %s", [agent_id]).fetchone()[0],
        "queries": len(queries),
        "path": path,
        "arm_recall@10": round(statistics.fmean(arm_recall), 4),
        "arm_min_recall@10": round(min(arm_recall), 2),
        "arm_ms": {"p50": round(float(np.percentile(arm_ms, 50)), 2),
                   "p95": round(float(np.percentile(arm_ms, 95)), 2)},
        "recall@10_by_ef_search": curve,
        "similarity": {"top1": round(float(s[:, 0].mean()), 4), "top10": round(float(s[:, 9].mean()), 4),
                       "gap_10_11": round(float((s[:, 9] - s[:, 10]).mean()), 4)} if len(s) else None,
    }


def _path(conn: psycopg.Connection, agent_id: str, q) -> str:
    notes: list[str] = []
    handler = lambda d: notes.append(d.message_primary)  # noqa: E731
    conn.add_notice_handler(handler)
    try:
        conn.execute("set client_min_messages = debug1")
        conn.execute(ARM, [agent_id, q, 100]).fetchall()
    finally:
        conn.execute("reset client_min_messages")
        conn.remove_notice_handler(handler)
    return " | ".join(n for n in notes if n.startswith("recall._vector_arm"))


def run(path: str | Path, *, dsn: str | None = None, model: str | None = None, sentences: bool = True,
        ef_values: Sequence[int] = DEFAULT_EF, compare: bool = True, seed: int = 7,
        limit_units: int | None = None,
        progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Embed, load, index, ask; return the report of ``pyrecall bench ann --json``."""
    from . import latency
    from ._scratch import scratch_database
    from .locomo import _connect

    units, questions = read_units(path, sentences=sentences)
    units = units[:limit_units]
    embedder = get_embedder(model)

    def embed(texts: list[str], label: str) -> np.ndarray:
        advance = progress(label, len(texts)) if progress else None
        out = []
        for i in range(0, len(texts), 64):
            out.extend(embedder.embed(texts[i:i + 64]))
            if advance:
                advance(len(texts[i:i + 64]))
        return np.asarray(out, dtype=np.float32)

    t = time.perf_counter()
    vecs = embed(units, "embedding text")
    qvecs = embed(questions, "embedding questions")
    embed_s = time.perf_counter() - t
    report: dict[str, Any] = {"data": Path(path).name, "model": getattr(embedder, "name", model) or "default",
                              "units": len(units), "questions": len(questions),
                              "sentences": sentences, "embed_s": round(embed_s, 1),
                              "ef_values": list(ef_values)}
    with scratch_database(dsn, dim=embedder.dim) as url, _connect(url) as conn:
        load_agent(conn, "real", units, vecs)
        if compare:
            synth = latency.Synth(seed, "topic")
            topics = synth.rng.integers(0, latency.N_TOPICS, len(units))
            load_agent(conn, "topic", ["topic mixture"] * len(units),
                       synth.chunk_vectors(topics, topics % latency.SUBTOPICS))
            tq = [synth.query_vector(int(t)) for t in synth.rng.integers(0, latency.N_TOPICS, len(questions))]
        conn.execute("vacuum analyze recall.chunks")
        t = time.perf_counter()
        conn.execute("select * from recall.create_vector_index('hnsw')").fetchall()
        report["index_build_s"] = round(time.perf_counter() - t, 1)
        report["vector_search_config"] = {k: json.loads(v) for k, v in conn.execute(
            "select key, value::text from recall.config where key ~ '^(ann_|agent_index)' order by key")}
        report["real"] = measure(conn, "real", list(qvecs), ef_values, progress=progress)
        if compare:
            report["topic"] = measure(conn, "topic", tq, ef_values, progress=progress)
    return report
