"""A worker in its own process (for the SIGKILL test): embeds with a slow fake embedder."""

import sys

import psycopg
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector

from pyrecall._worker import Worker

url, delay = sys.argv[1], float(sys.argv[2])
with psycopg.connect(url, autocommit=True) as conn:
    register_vector(conn)
    Worker(conn, FakeEmbedder(delay=delay), batch_size=20).run()
