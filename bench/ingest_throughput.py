"""Insert throughput of Recall.add_messages, in-database chunking included.

    .venv/bin/python bench/ingest_throughput.py [N_MESSAGES] [SESSIONS] [WORDS_PER_MESSAGE]

Runs against $PYRECALL_DSN or the embedded server; writes into a fresh agent each run. Besides
the wall-clock rate it prints the CPU time per message of the client and of its server backend
(from /proc/self/schedstat, readable by a superuser on Linux): unlike the rate, these hardly
depend on what else runs on the machine, nor on how long the disk takes to flush each commit.
"""

import sys
import time
import uuid

import numpy as np
import psycopg

from pyrecall.client import Recall


def server_cpu_ns(conn) -> int | None:
    """CPU time used so far by this connection's backend, or None where it cannot be read."""
    try:
        return int(conn.execute("select split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)").fetchone()[0])
    except psycopg.Error:
        return None


n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
n_sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 100
rng = np.random.default_rng(0)
vocab = np.array([f"w{i}" for i in range(5000)])
WORDS = int(sys.argv[3]) if len(sys.argv) > 3 else 30
zipf = np.minimum(rng.zipf(1.3, size=n * WORDS), 5000) - 1
agent = f"bench-{uuid.uuid4().hex[:8]}"
per = n // n_sessions
with Recall(migrate=True) as r:
    cpu0, server0 = time.process_time(), server_cpu_ns(r.conn)
    t0 = time.perf_counter()
    pos = 0
    for s in range(n_sessions):
        msgs = []
        for i in range(per):
            words = " ".join(vocab[zipf[pos:pos + WORDS]])
            pos += WORDS
            msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": words})
        r.add_messages(f"{agent}-{s}", msgs, agent_id=agent)
    dt = time.perf_counter() - t0
    cpu, server1 = time.process_time() - cpu0, server_cpu_ns(r.conn)
    total = n_sessions * per
    chunks = r.conn.execute("select count(*) from recall.chunks where agent_id = %s", [agent]).fetchone()[0]
    server = "n/a" if server0 is None or server1 is None else f"{(server1 - server0) / 1e3 / total:.1f}"
    print(f"{total} messages in {n_sessions} sessions: {dt:.1f} s = "
          f"{total / dt:,.0f} messages/s ({chunks} chunks); CPU per message: "
          f"server {server} us, client {cpu * 1e6 / total:.1f} us")
