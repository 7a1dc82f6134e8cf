"""The ingest regression repro (bench/LOG.md, 2026-11-26 night): bench latency's generator and
batches (20,000 messages a transaction, one ingest call per agent) on one connection, printing the
wall time and the server CPU per message of each batch.

    PYTHONPATH=<tree> python ingest_staging_repro.py "host=/path/pgdata user=postgres dbname=postgres" \\
        scratch_db 200000 200

The database scratch_db is dropped and created on that server, then migrated by the tree's code.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

import psycopg

from pyrecall import _migrate
from pyrecall._ingest import ingest
from pyrecall.bench import latency


def server_cpu_ns(conn: psycopg.Connection, pid: int) -> int:
    return int(conn.execute("select split_part(pg_read_file(%s), ' ', 1)",
                            [f"/proc/{int(pid)}/schedstat"]).fetchone()[0])


def main(dsn: str, dbname: str, n_chunks: int, n_agents: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"drop database if exists {dbname} with (force)")
        admin.execute(f"create database {dbname}")
    url = psycopg.conninfo.make_conninfo(dsn, dbname=dbname)
    with psycopg.connect(url, autocommit=True) as c:
        _migrate.migrate(c, dim=384)
    synth = latency.Synth(7)          # the messages do not depend on the vector kind
    agents = latency.plan_agents(synth, latency.agent_sizes(n_chunks, n_agents))
    now = datetime.now(UTC).replace(microsecond=0)
    with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url, autocommit=True) as probe:
        pid = conn.info.backend_pid
        total = 0

        def flush(b: int, by_agent: dict) -> int:
            s0, t0 = server_cpu_ns(probe, pid), time.perf_counter()
            with conn.transaction():
                n = sum(ingest(conn, ss, agent_id=a).inserted for a, ss in by_agent.items())
            t, s1 = time.perf_counter() - t0, server_cpu_ns(probe, pid)
            print(f"batch {b} agents {len(by_agent)} msgs {n} total {total + n} wall {t:.2f}s "
                  f"{n / t:.0f}/s server {(s1 - s0) / 1e3 / n:.0f} us/msg", flush=True)
            return n

        by_agent: dict = {}
        n = b = 0
        for agent in agents:
            for s in latency.sessions_of(synth, agent, now):
                by_agent.setdefault(s.agent_id, []).append(s)
                n += len(s.messages)
                if n >= 20_000:
                    b += 1
                    total += flush(b, by_agent)
                    by_agent, n = {}, 0
        if by_agent:
            total += flush(b + 1, by_agent)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
