"""Issue 18, 2026-11-27 fourth session: would loading the query model in a thread while psycopg
is imported and the connection made shorten a cold one-shot recall? `seq`: import the embedder,
import psycopg + numpy, connect, SELECT 1, load the model and embed one question; `par`: the same
with the model loaded in a thread started before psycopg's import. Prints the seconds of each
part. Run alternating:
    for i in 1 2 3 4 5 6; do for m in seq par; do python cold_overlap_probe.py $m "$URL"; done; done
"""

import os
import sys
import threading
import time

start = time.perf_counter()
par = sys.argv[1] == "par"
from pyrecall._embed import LocalEmbedder  # noqa: E402 (timed from the start)

embedder = LocalEmbedder()
if par:
    loader = threading.Thread(target=embedder._loaded, daemon=True)
    loader.start()
import numpy  # noqa: E402, F401 (timed: the client imports it)
import psycopg  # noqa: E402

conn = psycopg.connect(sys.argv[2])
conn.execute("select 1").fetchall()
db_done = time.perf_counter()
if par:
    loader.join()
joined = time.perf_counter()
embedder.embed(["how did we handle authentication tokens?"])
end = time.perf_counter()
print(f"{sys.argv[1]} db {db_done - start:.3f} join {joined - db_done:.3f} total {end - start:.3f}")
os._exit(0)
