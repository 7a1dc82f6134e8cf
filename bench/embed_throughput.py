"""Embedding pipeline vs raw sentence-transformers on the same texts.

    .venv/bin/python bench/embed_throughput.py [N_TEXTS] [BATCH,...]

For each batch size, interleaved: (a) raw SentenceTransformer.encode of the N texts, and
(b) pyrecall's Worker embedding the same N texts as pending chunks (claim with FOR UPDATE
SKIP LOCKED, LocalEmbedder.embed, exact token counts, UPDATE), on $PYRECALL_DSN or the
embedded server. Prints chunks/s of each and the ratio (b)/(a).
"""

import os
import sys
import time
import uuid

import numpy as np

from pyrecall import _db, _migrate
from pyrecall._embed import get_embedder
from pyrecall._worker import Worker

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
batches = [int(b) for b in (sys.argv[2] if len(sys.argv) > 2 else "16,64,256").split(",")]
rng = np.random.default_rng(1)
words = "deploy docker compose nginx auth token jwt migrate postgres index test flaky retry cache port build image".split()
texts = [" ".join(rng.choice(words, 50)) + f" item {i}" for i in range(n)]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
emb = get_embedder("local/all-MiniLM-L6-v2")
emb.embed(["warm up"])
model = emb._st()[0]  # the SentenceTransformer the embedder wraps
conn = _db.connect()
_migrate.migrate(conn)
print(f"{n} texts of ~{int(np.mean([len(t) for t in texts]))} chars; load {os.getloadavg()[0]:.1f}")
for b in batches:
    t0 = time.perf_counter()
    model.encode(texts, batch_size=b, normalize_embeddings=True)
    raw = n / (time.perf_counter() - t0)
    agent = f"embbench-{uuid.uuid4().hex[:6]}"
    conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, %s)", [agent, agent])
    with conn.cursor().copy("copy recall.messages (session_id, role, kind, content) from stdin") as cp:
        for t in texts:
            cp.write_row([agent, "assistant", "thinking", t])
    emb.batch_size = b
    t0 = time.perf_counter()
    report = Worker(conn, emb, batch_size=b, agent=agent).run()
    pipe = report.embedded / (time.perf_counter() - t0)
    conn.execute("delete from recall.sessions where session_id = %s", [agent])
    print(f"batch {b:4}: raw encode {raw:7.1f}/s   pipeline {pipe:7.1f}/s   ratio {pipe / raw:.2f}"
          f"   (load {os.getloadavg()[0]:.1f})")
