"""Issue 18, 2026-11-27 fourth session: would loading the query model in a thread while psycopg
is imported and the connection made shorten a cold one-shot recall? `seq`: import the embedder,
import psycopg + numpy, connect, SELECT 1, load the model and embed one question; `par`: the same
with the model loaded in a thread started before psycopg's import. Prints the seconds of each
part. Run alternating: for i in 1 2 3 4 5 6; do for m in seq par; do python cold_overlap_probe.py $m "$URL"; done; done"""
import sys, time, threading
t = time.perf_counter()
par = sys.argv[1] == "par"
from pyrecall._embed import LocalEmbedder
e = LocalEmbedder()
if par:
    th = threading.Thread(target=e._loaded, daemon=True); th.start()
import psycopg, numpy
conn = psycopg.connect(sys.argv[2]); conn.execute("select 1").fetchall()
t1 = time.perf_counter()
if par: th.join()
t2 = time.perf_counter()
e.embed(["how did we handle authentication tokens?"])
t3 = time.perf_counter()
print(f"{sys.argv[1]} db {t1-t:.3f} join {t2-t1:.3f} total {t3-t:.3f}")
import os; os._exit(0)
