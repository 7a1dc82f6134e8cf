"""Insert throughput of Recall.add_messages, in-database chunking included.

    .venv/bin/python bench/ingest_throughput.py [N_MESSAGES] [SESSIONS] [WORDS_PER_MESSAGE]

Runs against $PYRECALL_DSN or the embedded server; writes into a fresh agent each run.
"""

import sys
import time
import uuid

import numpy as np

from pyrecall.client import Recall

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
n_sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 100
rng = np.random.default_rng(0)
vocab = np.array([f"w{i}" for i in range(5000)])
WORDS = int(sys.argv[3]) if len(sys.argv) > 3 else 30
zipf = np.minimum(rng.zipf(1.3, size=n * WORDS), 5000) - 1
agent = f"bench-{uuid.uuid4().hex[:8]}"
per = n // n_sessions
with Recall(migrate=True) as r:
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
    chunks = r.conn.execute("select count(*) from recall.chunks where agent_id = %s", [agent]).fetchone()[0]
    print(f"{n_sessions * per} messages in {n_sessions} sessions: {dt:.1f} s = "
          f"{n_sessions * per / dt:,.0f} messages/s ({chunks} chunks)")
