"""Load test: N concurrent clients calling recall.hybrid_recall while a worker embeds and an
importer writes. Reports, for each N: recalls/s, p50/p95/p99 latency, errors, and whether
every write arrived (counts checked after each phase).

    pyrecall bench load                                  # 1M chunks, N = 4, 16, 64, 60 s each
    pyrecall bench load --chunks 100000 --clients 8 --seconds 10
    pyrecall bench load --dsn postgresql://... --keep   # on a server of your own

The database (a throwaway embedded server unless --dsn) is built as `pyrecall bench latency`
builds it (pyrecall.bench.latency): Zipf-sized agents, sessions of 10 exchanges through the
normal ingestion path, synthetic Zipf text, clustered 384-dim vectors written directly, the
ANN index of recall.create_vector_index (or plain HNSW). `--reuse URL` skips the build and
runs on a database a previous `--keep` run left (same --seed, same --chunks/--agents).

During each phase:
- clients: a psycopg_pool.ConnectionPool of N connections; each client thread takes a
  connection per call and asks hybrid_recall (k 10, token budget 2000) with a query text and
  a query embedding, for an agent drawn with probability ~ sqrt(size) (big agents are asked
  more often, small ones still are);
- importer: sessions of 20 messages for agent `load-importer`, one ingest (one transaction)
  per session, at --import-rate messages/s;
- worker: pyrecall._worker.Worker with a hash embedder (no model: the load is on the database),
  embedding what the importer writes, batches of 64.
After the phase the worker drains the queue; then the importer's messages, chunks and
embeddings are counted against what it reported: a lost or doubled write is an error.
"""

from __future__ import annotations

import math
import os
import platform
import random
import statistics
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool

from .._errors import ConfigError
from .._ingest import ingest
from .._worker import Worker
from ..importers._records import Message, Session
from . import latency
from .fake_embedder import FakeEmbedder

IMPORTER = "load-importer"
HYBRID = """select chunk_id, score, cumulative_tokens from recall.hybrid_recall(
              agent_id => %s, query_text => %s, query_embedding => %s, k => 10, token_budget => 2000)"""


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return round(v[min(len(v) - 1, max(0, math.ceil(p / 100 * len(v)) - 1))], 2)


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = None
    try:
        mem = round(int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal"))) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory_gib": mem, "python": platform.python_version(),
            "platform": platform.platform()}


# ---------------------------------------------------------------- the database

@contextmanager
def database(dsn: str | None, keep: bool):
    """A migrated database: new on --dsn's server, or a throwaway embedded server."""
    if dsn and keep:
        name = f"pyrecall_load_{os.getpid()}"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        info["dbname"] = name
        url = psycopg.conninfo.make_conninfo(**info)
        from .. import _migrate

        with psycopg.connect(url, autocommit=True) as c:
            _migrate.migrate(c, dim=latency.DIM)
        yield url
        return
    from ._scratch import scratch_database

    with scratch_database(dsn) as url:
        yield url


def build(url: str, synth: latency.Synth, agents: list[latency.Agent], log, *, index: bool = True,
          model: str = "synthetic") -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        t = time.perf_counter()
        loaded = latency.load(conn, synth, agents)
        log(f"ingested {loaded['messages']} messages in {loaded['ingest_s']} s")
        vectors_s = latency.set_embeddings(conn, synth, agents, model=model)
        log(f"vectors written in {vectors_s:.1f} s")
        conn.execute("vacuum analyze recall.chunks")
        conn.execute("vacuum analyze recall.messages")
        if index:
            index = latency.build_index(conn)
            log(f"index built in {index['build_s']} s: {index['definition']}")
        else:
            index = None   # agents up to recall.config exact_scan_max_rows are scanned exactly anyway
        chunks = conn.execute("select count(*) from recall.chunks").fetchone()[0]
        return {"chunks": chunks, "messages": loaded["messages"], "ingest": loaded,
                "vectors_s": round(vectors_s, 1), "index": index, "build_s": round(time.perf_counter() - t, 1)}


def make_queries(synth: latency.Synth, agents: list[latency.Agent], n: int) -> list[tuple[str, str, np.ndarray]]:
    weights = np.sqrt(np.array([a.size for a in agents], dtype=float))
    picks = synth.rng.choice(len(agents), size=n, p=weights / weights.sum())
    out = []
    for i in picks:
        a = agents[int(i)]
        topic = int(a.topics[synth.rng.integers(0, len(a.topics))])
        vec = synth.vectors(np.array([topic]), np.array([int(synth.rng.integers(0, latency.SUBTOPICS))]))[0]
        out.append((a.agent_id, synth.query_text(topic), vec))
    return out


# ---------------------------------------------------------------- one phase

class Importer(threading.Thread):
    """Sessions of 20 messages for IMPORTER, one transaction each, at `rate` messages/s."""

    def __init__(self, url: str, synth_seed: int, rate: float, stop: threading.Event, phase: int):
        super().__init__(daemon=True)
        self.url, self.rate, self.stop, self.phase = url, rate, stop, phase
        self.rng = random.Random(synth_seed)
        self.inserted = self.sessions = 0
        self.errors: list[str] = []

    def run(self):
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                start, n = time.perf_counter(), 0
                while not self.stop.is_set():
                    sid = f"{IMPORTER}/p{self.phase}/s{self.sessions:06d}"
                    now = datetime.now(UTC)
                    msgs = [Message(None, "user" if j % 2 == 0 else "assistant", "text",
                                    f"import {self.phase}.{self.sessions}.{j}: "
                                    + " ".join(self.rng.choice(WORDS) for _ in range(30)),
                                    now + timedelta(seconds=j)) for j in range(20)]
                    self.inserted += ingest(conn, [Session(sid, IMPORTER, messages=msgs)], agent_id=IMPORTER).inserted
                    self.sessions += 1
                    n += 20
                    ahead = n / self.rate - (time.perf_counter() - start)
                    if ahead > 0:
                        self.stop.wait(ahead)
        except Exception as exc:  # noqa: BLE001 - reported
            self.errors.append(f"{type(exc).__name__}: {exc}")


WORDS = [f"w{i}" for i in range(2000)]


class Embedding(threading.Thread):
    """The embedding worker: what is pending, again and again, until told to stop."""

    def __init__(self, url: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.url, self.stop = url, stop
        self.embedded = self.failed = 0
        self.errors: list[str] = []

    def run(self):
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                register_vector(conn)
                worker = Worker(conn, FakeEmbedder(model="load/hash", dim=latency.DIM, record=False), batch_size=64, agent=IMPORTER)
                while not self.stop.is_set():
                    report = worker.run()
                    self.embedded += report.embedded
                    self.failed += report.failed
                    if report.scanned == 0:
                        self.stop.wait(0.2)
        except Exception as exc:  # noqa: BLE001 - reported
            self.errors.append(f"{type(exc).__name__}: {exc}")


def phase(url: str, n_clients: int, seconds: float, queries, *, import_rate: float, phase_no: int,
          seed: int, log) -> dict[str, Any]:
    stop = threading.Event()
    lat: list[list[float]] = [[] for _ in range(n_clients)]
    errors: list[str] = []
    with psycopg.connect(url, autocommit=True) as c:
        before = c.execute("select count(*) from recall.messages where agent_id = %s", [IMPORTER]).fetchone()[0]
    pool = ConnectionPool(url, min_size=n_clients, max_size=n_clients, open=True, configure=register_vector,
                          kwargs={"autocommit": True}, timeout=60)
    pool.wait(timeout=120)

    def client(i: int):
        rng = random.Random(seed * 1000 + i)
        while not stop.is_set():
            agent, text, vec = queries[rng.randrange(len(queries))]
            t = time.perf_counter()
            try:
                with pool.connection() as c:
                    c.execute(HYBRID, [agent, text, vec]).fetchall()
            except Exception as exc:  # noqa: BLE001 - counted
                errors.append(f"{type(exc).__name__}: {str(exc).strip()[:200]}")
                continue
            lat[i].append((time.perf_counter() - t) * 1000)

    importer = Importer(url, seed + phase_no, import_rate, stop, phase_no)
    embedding = Embedding(url, stop)
    clients = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n_clients)]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    for th in [importer, embedding, *clients]:
        th.start()
    stop.wait(seconds)
    stop.set()
    for th in clients:
        th.join(120)
    elapsed = time.perf_counter() - t0
    importer.join(120)
    embedding.join(120)
    pool.close()
    load_after = os.getloadavg()[0]

    # drain the queue, then count: every message the importer reported is there, once; each
    # of its chunks exists and carries exactly one embedding
    with psycopg.connect(url, autocommit=True) as c:
        register_vector(c)
        drained = Worker(c, FakeEmbedder(model="load/hash", dim=latency.DIM, record=False), batch_size=256, agent=IMPORTER).run()
        msgs, dup, chunks, embedded, pending = c.execute(
            """select (select count(*) from recall.messages where agent_id = %(a)s),
                      (select count(*) - count(distinct (session_id, external_id)) from recall.messages
                       where agent_id = %(a)s),
                      (select count(*) from recall.chunks where agent_id = %(a)s),
                      (select count(embedding) from recall.chunks where agent_id = %(a)s),
                      (select count(*) from recall.chunks where agent_id = %(a)s and embedding is null)""",
            {"a": IMPORTER}).fetchone()
    all_lat = [x for per in lat for x in per]
    lost = (msgs - before) - importer.inserted
    report = {
        "clients": n_clients, "seconds": round(elapsed, 1), "recalls": len(all_lat),
        "recalls_per_s": round(len(all_lat) / elapsed, 1),
        "latency_ms": {"p50": _pct(all_lat, 50), "p95": _pct(all_lat, 95), "p99": _pct(all_lat, 99),
                       "mean": round(statistics.fmean(all_lat), 2) if all_lat else None,
                       "max": round(max(all_lat), 1) if all_lat else None},
        "errors": len(errors) + len(importer.errors) + len(embedding.errors),
        "error_samples": (errors + importer.errors + embedding.errors)[:5],
        "importer": {"sessions": importer.sessions, "messages": importer.inserted,
                     "messages_per_s": round(importer.inserted / elapsed, 1)},
        "worker": {"embedded_during": embedding.embedded, "embedded_after": drained.embedded,
                   "failed": embedding.failed + drained.failed},
        "writes": {"messages_expected": before + importer.inserted, "messages_found": msgs,
                   "lost_messages": lost, "duplicate_messages": dup, "chunks": chunks,
                   "chunks_expected": msgs // 2, "embedded": embedded, "pending": pending},
        "loadavg_1m": [round(load_before, 2), round(load_after, 2)],
    }
    report["ok"] = (report["errors"] == 0 and lost == 0 and dup == 0 and chunks == msgs // 2
                    and embedded == chunks and pending == 0)
    log(f"N={n_clients:>3}: {report['recalls_per_s']:>7} recalls/s  p50 {report['latency_ms']['p50']} ms  "
        f"p95 {report['latency_ms']['p95']} ms  p99 {report['latency_ms']['p99']} ms  errors {report['errors']}  "
        f"importer {importer.inserted} msgs  embedded {embedding.embedded}+{drained.embedded}  "
        f"writes {'ok' if report['ok'] else 'LOST/WRONG'}")
    return report


# ---------------------------------------------------------------- the run

def run(*, chunks: int = 1_000_000, agents: int | None = None, clients: list[int] = (4, 16, 64),
        seconds: float = 60, dsn: str | None = None, reuse: str | None = None, keep: bool = False,
        seed: int = 7, import_rate: float = 100.0, n_queries: int = 2000, index: bool = True,
        log=print) -> dict[str, Any]:
    agents = agents or max(10, min(1000, chunks // 1000))
    synth = latency.Synth(seed)
    plan = latency.plan_agents(synth, latency.agent_sizes(chunks, agents))
    report: dict[str, Any] = {"machine": machine(), "chunks_asked": chunks, "agents": agents, "seed": seed,
                              "import_rate": import_rate, "started": datetime.now(UTC).isoformat(timespec="seconds")}

    def go(url: str):
        with psycopg.connect(url, autocommit=True) as c:
            report["server"] = c.execute("select version()").fetchone()[0]
            report["settings"] = dict(c.execute(
                "select name, setting || coalesce(unit, '') from pg_settings where name in "
                "('shared_buffers', 'work_mem', 'max_connections', 'effective_cache_size', 'fsync', "
                "'synchronous_commit')").fetchall())
        if reuse is None:
            report["build"] = build(url, synth, plan, log, index=index)
        with psycopg.connect(url, autocommit=True) as c:
            report["chunks"] = c.execute("select count(*) from recall.chunks").fetchone()[0]
            report["largest_agent"] = max(a.size for a in plan)
        queries = make_queries(synth, plan, n_queries)
        report["phases"] = [phase(url, n, seconds, queries, import_rate=import_rate, phase_no=i, seed=seed, log=log)
                            for i, n in enumerate(clients)]
        report["ok"] = all(p["ok"] for p in report["phases"])
        if keep:
            report["url"] = url

    if reuse:
        go(reuse)
    elif keep and not dsn:
        raise ConfigError("--keep needs --dsn (a throwaway embedded server is always removed)")
    else:
        with database(dsn, keep) as url:
            go(url)
    return report
