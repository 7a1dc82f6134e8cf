"""What a hybrid_recall costs delegated to a Citus worker, against a single node, and queries/s
with 1, 2 and 4 concurrent clients on both (docs/SCALING.md records the figures).

Both servers get the same data: AGENTS agents of 3 sessions x CHUNKS chunks each, with the
deterministic fake embedder's vectors (the cost measured is the delegation and the planning on
the worker; the search of agents this small is exact). The call is
``recall.hybrid_recall(agent, 'refund webhook fails', <its embedding>, k => 10)`` for a random
agent, so v6's search (text plan, both arms, the rows read by primary key) runs. Latency is seen
by the client (the round trip to the server it talks to is in it).

The cluster's data goes into the coordinator's own database (distributed by ``recall.distribute``);
the single node is a throwaway embedded server (``_scratch``), removed afterwards. One machine:
the coordinator, both workers and the clients share its cores; this shows the overhead of the
delegation, not how a cluster of machines scales.
"""

from __future__ import annotations

import os
import random
import statistics
import threading
import time
from collections.abc import Callable

import psycopg
from pgvector.psycopg import register_vector

from .._errors import ConfigError
from ._scratch import scratch_database
from .fake_embedder import FakeEmbedder

CALL = "select * from recall.hybrid_recall(%s, 'refund webhook fails', %s, k => 10)"
PREFIX = "benchv6-"
WARMUP = 20


def check_coordinator(dsn: str | None) -> None:
    """A ConfigError (one line) unless dsn is a Citus coordinator with the recall schema distributed."""
    if not dsn:
        raise ConfigError("bench citus needs --dsn <the Citus coordinator's URL> "
                          "(make citus-up prints it)")
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        if conn.execute("select 1 from pg_extension where extname = 'citus'").fetchone() is None:
            raise ConfigError("not a Citus coordinator: the citus extension is not installed in "
                              "that database")
        if not conn.execute("select citus_is_coordinator()").fetchone()[0]:
            raise ConfigError("not a Citus coordinator: that server is a worker "
                              "(or has no workers added)")
        if conn.execute("select 1 from pg_dist_partition "
                        "where logicalrelid = to_regclass('recall.sessions')").fetchone() is None:
            raise ConfigError("the recall schema is not distributed on that coordinator "
                              "(run pyrecall migrate, then sql/citus/distribute.sql)")


def fill(url: str, agents: int, chunks: int) -> int:
    """Give url AGENTS agents of 3 sessions x CHUNKS chunks (those already there are kept);
    returns the agents' chunk count found there afterwards."""
    emb = FakeEmbedder()
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        have = {r[0] for r in conn.execute(
            "select distinct agent_id from recall.sessions where agent_id like %s",
            [PREFIX + "%"])}
        for a in range(agents):
            agent = f"{PREFIX}{a}"
            if agent in have:
                continue
            with conn.transaction():
                for s in range(3):
                    sid = f"{agent}-s{s}"
                    conn.execute("insert into recall.sessions (session_id, agent_id, project) "
                                 "values (%s, %s, 'payments')", [sid, agent])
                    rows = []
                    for i in range(chunks):
                        text = (f"{agent} session {s} note {i}: the refund webhook "
                                f"{'fails' if i % 2 else 'retries'} on friday")
                        rows.append([agent, sid, i + 1, text, s * chunks + i, emb.vector(text)])
                    with conn.cursor() as cur:
                        cur.executemany(
                            "insert into recall.chunks (agent_id, session_id, kind, first_seq, part, "
                            "message_ids, content, n_tokens, created_at, embedding, embedding_model, "
                            "embedded_at) values (%s, %s, 'message', %s, 0, '{}', %s, 12, "
                            "now() - %s * interval '1 hour', %s, 'fake', now())", rows)
        return conn.execute(
            "select count(*) from recall.chunks where agent_id = any(%s)",
            [[f"{PREFIX}{a}" for a in range(agents)]]).fetchone()[0]


def _client(url: str, agents: int, calls: int, seed: int, start: threading.Barrier,
            out: list[float], errors: list[str]) -> None:
    query = FakeEmbedder().vector("refund webhook fails")
    rng = random.Random(seed)
    try:
        with psycopg.connect(url, autocommit=True) as conn:   # (in a transaction block: no delegation)
            register_vector(conn)
            for _ in range(WARMUP):                            # (the first calls warm the caches)
                conn.execute(CALL, [f"{PREFIX}{rng.randrange(agents)}", query]).fetchall()
            start.wait()
            for _ in range(calls):
                agent = f"{PREFIX}{rng.randrange(agents)}"
                t0 = time.perf_counter()
                rows = conn.execute(CALL, [agent, query]).fetchall()
                out.append((time.perf_counter() - t0) * 1000)
                if not rows:
                    errors.append(f"no rows for {agent}")
    except Exception as exc:  # noqa: BLE001 - reported in the result, the barrier released
        errors.append(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
        start.abort()


def phase(url: str, agents: int, calls: int, clients: int) -> dict:
    """CLIENTS connections each make CALLS calls at once: queries/s and the latency of each call."""
    ms: list[float] = []
    errors: list[str] = []
    start = threading.Barrier(clients + 1)
    threads = [threading.Thread(target=_client, args=(url, agents, calls, 7 + c, start, ms, errors))
               for c in range(clients)]
    for t in threads:
        t.start()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise ConfigError(f"hybrid_recall failed on {_where(url)}: {errors[0]}")
    ms.sort()
    return {"clients": clients, "calls": len(ms), "qps": round(len(ms) / wall, 1),
            "p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2)}


def _where(url: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    return f"{info.get('host', '')}:{info.get('port', '')}"


def run(dsn: str | None, *, agents: int = 20, chunks: int = 30, calls: int = 300,
        clients: list[int] = (1, 2, 4), log: Callable[[str], None] = lambda m: None) -> dict:
    check_coordinator(dsn)
    load = [round(x, 1) for x in os.getloadavg()]
    report: dict = {"call": "recall.hybrid_recall(agent, 'refund webhook fails', <embedding>, k => 10)",
                    "agents": agents, "chunks_per_agent": 3 * chunks, "calls_per_client": calls,
                    "cores": os.cpu_count()}
    with scratch_database(settings={"shared_buffers": "256MB"}) as single:
        servers = {"single": single, "citus": dsn}
        for name, url in servers.items():
            log(f"loading {agents} agents x {3 * chunks} chunks into {name}")
            report[f"{name}_chunks"] = fill(url, agents, chunks)
        with psycopg.connect(dsn, autocommit=True) as conn:
            plan = "\n".join(r[0] for r in conn.execute(
                "explain select * from recall.hybrid_recall(%s, 'x', null, k => 10)", [f"{PREFIX}0"]))
        report["delegated"] = "Task Count: 1" in plan
        results: dict[str, list[dict]] = {name: [] for name in servers}
        for c in clients:
            for name, url in servers.items():
                log(f"{name}: {c} client(s) x {calls} calls")
                results[name].append(phase(url, agents, calls, c))
        report.update(results)
    one = {name: next((r for r in rs if r["clients"] == 1), None) for name, rs in results.items()}
    if one["single"] and one["citus"]:
        report["delegation_ms_per_call_p50"] = round(one["citus"]["p50_ms"] - one["single"]["p50_ms"], 2)
    report["load_average"] = {"start": load, "end": [round(x, 1) for x in os.getloadavg()]}
    return report
