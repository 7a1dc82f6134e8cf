"""Insert throughput of ``Recall.add_messages``, in-database chunking included.

N messages of Zipf-drawn words in S sessions, one ``add_messages`` call per session, into a
fresh database; each call its own transaction, or ``per_transaction`` calls in one (as a bulk
load of many agents makes them: ``bench latency`` ingests 20,000 messages a transaction, one
call per agent). Besides the wall-clock rate it reports the CPU time per
message of the client and of its server backend (``/proc/PID/schedstat``, read on a second
connection; readable by a superuser on Linux): unlike the rate, these hardly depend on what else runs on the machine,
nor on how long the disk takes to flush each commit.

    >>> run(2_000, 20)["messages_per_s"]  # doctest: +SKIP
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import psycopg

from .. import _db
from ..client import Recall
from ._scratch import scratch_database

AGENT = "bench-ingest"


def server_cpu_ns(conn: psycopg.Connection, pid: int | None = None) -> int | None:
    """CPU time used so far by a server backend (``pid``'s, else ``conn``'s own), read on
    ``conn``; None where it cannot be read."""
    path = "/proc/self/schedstat" if pid is None else f"/proc/{int(pid)}/schedstat"
    try:
        return int(conn.execute("select split_part(pg_read_file(%s), ' ', 1)", [path]).fetchone()[0])
    except psycopg.Error:
        return None


def run(n_messages: int = 100_000, n_sessions: int = 100, words: int = 30, *,
        per_transaction: int = 1, dsn: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Ingest ``n_messages`` of ``words`` words each in ``n_sessions`` sessions, the calls of
    ``per_transaction`` sessions in one transaction; the report."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(5000)])
    per = max(1, n_messages // n_sessions)
    drawn = np.minimum(rng.zipf(1.3, size=n_sessions * per * words), 5000) - 1
    with scratch_database(dsn) as url, Recall(url) as r, _db.connect(url) as probe:
        backend = r.conn.info.backend_pid   # the client's server process, whose CPU time is read
        cpu0, server0 = time.process_time(), server_cpu_ns(probe, backend)
        t0 = time.perf_counter()
        pos = 0
        for first in range(0, n_sessions, per_transaction):
            with r.conn.transaction():
                for s in range(first, min(first + per_transaction, n_sessions)):
                    msgs = []
                    for i in range(per):
                        msgs.append({"role": "user" if i % 2 == 0 else "assistant",
                                     "content": " ".join(vocab[drawn[pos:pos + words]])})
                        pos += words
                    r.add_messages(f"{AGENT}-{s}", msgs, agent_id=AGENT)
        elapsed = time.perf_counter() - t0
        cpu, server1 = time.process_time() - cpu0, server_cpu_ns(probe, backend)
        total = n_sessions * per
        chunks = sum(s["chunks"] for s in r.sessions(AGENT, limit=n_sessions + 1))
    return {
        "messages": total, "sessions": n_sessions, "words_per_message": words,
        "sessions_per_transaction": per_transaction, "chunks": chunks,
        "seconds": round(elapsed, 2), "messages_per_s": round(total / elapsed, 1),
        "server_cpu_us_per_message": (None if server0 is None or server1 is None
                                      else round((server1 - server0) / 1e3 / total, 1)),
        "client_cpu_us_per_message": round(cpu * 1e6 / total, 1),
    }
