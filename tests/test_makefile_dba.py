"""Every DBA target of mk/dba.mk runs (`make -s <target>`), against a test database named by
PYRECALL_DSN, except the DOCKER=1 variants (no Docker engine here).

`-o .venv/.installed-stamp` tells make not to (re)build the venv: it is there already.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import psycopg
import pytest
from conftest import drop_database, new_database
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parent.parent
STAMP = ".venv/.installed-stamp"
TARGETS = ["db-up", "db-down", "migrate", "index", "index-drop", "index-info", "tune", "explain",
           "stats", "vacuum", "psql", "bench", "bench-index"]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.fixture(scope="module")
def db(server_url, template_url):
    """A database with 3 agents' messages, chunked in the database, embedded with random vectors."""
    url = new_database(server_url)
    rng = np.random.default_rng(1)
    words = np.array("deploy docker nginx auth token migrate postgres index flaky retry cache queue".split())
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("insert into recall.sessions (session_id, agent_id) "
                     "select 's' || g, 'agent-' || (g % 3) from generate_series(0, 29) g")
        with conn.cursor().copy("copy recall.messages (session_id, role, content) from stdin") as cp:
            for i in range(900):
                cp.write_row([f"s{i % 30}", "system", " ".join(rng.choice(words, 6)) + f" item{i}"])
        ids = [r[0] for r in conn.execute("select chunk_id from recall.chunks order by chunk_id")]
        emb = rng.normal(size=(len(ids), 384)).astype(np.float32)
        with conn.cursor() as cur:
            cur.executemany("update recall.chunks set embedding = %s where chunk_id = %s", list(zip(emb, ids, strict=True)))
        conn.execute("update recall.config set value = '100' where key = 'agent_index_min_rows'")
        conn.execute("vacuum analyze recall.chunks")
    yield url
    drop_database(server_url, url)


def make(target: str, *variables: str, dsn: str | None = None, env: dict | None = None,
         input: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    environ = {**os.environ, **(env or {})}
    if dsn is not None:
        environ["PYRECALL_DSN"] = dsn
    for name in ("INDEX", "M", "EF_CONSTRUCTION", "EF_SEARCH", "Q", "AGENT", "SCOPE", "CHUNKS"):
        environ.pop(name, None)
    done = subprocess.run(["make", "-s", "-o", STAMP, target, *variables], cwd=ROOT, env=environ,
                          input=input, capture_output=True, text=True, timeout=600)
    if ok:
        assert done.returncode == 0, f"make {target} failed:\n{done.stdout}\n{done.stderr}"
    return done


def test_help_lists_every_dba_target():
    out = make("help").stdout
    for target in TARGETS:
        assert f"  {target} " in out, target


def test_db_up_and_down_start_and_stop_the_embedded_server():
    data = Path(tempfile.mkdtemp(prefix="pyrecall-make-"))
    os.chmod(data, 0o755)
    env = {"PYRECALL_DATA_DIR": str(data)}
    environ = {**os.environ, **env}
    environ.pop("PYRECALL_DSN", None)
    try:
        up = subprocess.run(["make", "-s", "-o", STAMP, "db-up"], cwd=ROOT, env=environ,
                            capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stderr
        url = up.stdout.strip().splitlines()[-1]
        assert f"host={data}/pgdata" in url
        with psycopg.connect(url) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        down = subprocess.run(["make", "-s", "-o", STAMP, "db-down"], cwd=ROOT, env=environ,
                              capture_output=True, text=True, timeout=120)
        assert down.returncode == 0 and down.stdout.strip() == "stopped"
    finally:
        subprocess.run([str(ROOT / ".venv/bin/pyrecall"), "db", "stop"], env=environ, capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


def test_migrate(db):
    assert "applied: nothing new" in make("migrate", dsn=db).stdout


def test_index_info_drop(db):
    done = make("index", "INDEX=hnsw", "M=8", "EF_CONSTRUCTION=32", dsn=db)
    assert "create index concurrently chunks_embedding_a_" in done.stderr
    assert "index(es) built" in done.stderr
    info = make("index-info", dsn=db).stdout
    assert info.count("chunks_embedding_a_") == 3 and '{"m": 8, "ef_construction": 32}' in info
    # again, nothing to do: the refresh keeps what is up to date
    assert "0 index(es) built" in make("index", dsn=db).stderr
    assert "drop index concurrently" in make("index-drop", dsn=db).stderr
    assert make("index-info", dsn=db).stdout.strip() == "(none)"
    make("index", "INDEX=hnsw", "SCOPE=table", "M=8", dsn=db)
    assert "chunks_embedding_idx " in make("index-info", dsn=db).stdout


def test_index_values_are_data_not_shell(db, tmp_path):
    marker = tmp_path / "pwned"
    done = make("index", "INDEX=hnsw", f"M=8; touch {marker}", f"EF_CONSTRUCTION=$(touch {marker})",
                dsn=db, ok=False)
    assert done.returncode != 0
    assert 'option m must be an integer between 2 and 100, got "8; touch' in done.stderr
    assert not marker.exists()
    done = make("index", "INDEX=ivfflat", dsn=db, ok=False)
    assert 'Error: method must be auto, diskann or hnsw, got "ivfflat"' in done.stderr


def test_tune_persists_with_alter_database(db):
    make("tune", "EF_SEARCH=123", "QUERY_RESCORE=60", dsn=db)
    with psycopg.connect(db) as conn:
        assert conn.execute("select current_setting('hnsw.ef_search', true)").fetchone()[0] == "123"
        assert conn.execute("select current_setting('diskann.query_rescore', true)").fetchone()[0] == "60"
    out = make("tune", dsn=db).stdout                                   # no values: just show
    assert "hnsw.ef_search" in out and "123" in out
    make("tune", "EF_SEARCH=default", "QUERY_RESCORE=default", dsn=db)
    with psycopg.connect(db) as conn:
        assert conn.execute("select setconfig from pg_db_role_setting where setdatabase = "
                            "(select oid from pg_database where datname = current_database())").fetchone() is None
    bad = make("tune", "EF_SEARCH=0", dsn=db, ok=False)
    assert "option hnsw.ef_search must be an integer between 1 and 1000, got" in bad.stderr


def test_explain_shows_the_nested_plans(db):
    make("index", "INDEX=hnsw", "M=8", "EF_CONSTRUCTION=32", dsn=db)
    out = make("explain", 'Q=how did we deploy "docker"?', "AGENT=agent-1", dsn=db).stdout
    assert "Function Scan on hybrid_recall" in out and "Execution Time" in out
    assert "statements inside the function (auto_explain)" in out
    assert "c.tsv @@ p_match" in out                                    # the text arm (GIN path)
    assert "chunks_embedding_a_" in out or "chunks_agent_created_idx" in out  # the vector arm
    out = make("explain", "Q=docker", "EMBED=none", dsn=db).stdout
    assert "query_embedding => NULL" in out


def test_stats(db):
    out = make("stats", dsn=db).stdout
    assert "chunks_agent_tsv_idx" in out and "pending" in out
    for agent in ("agent-0", "agent-1", "agent-2"):
        assert agent in out


def test_vacuum(db):
    out = make("vacuum", dsn=db).stdout
    assert "vacuum analyze recall.chunks" in out and "vacuum analyze recall.messages" in out


def test_psql_runs_on_the_database(db):
    out = make("psql", dsn=db, input="select count(*) as n_agents from (select distinct agent_id from recall.chunks) a;\n").stdout
    assert "n_agents" in out and " 3" in out


def test_bench_runs_small(db, server_url):
    done = make("bench", "CHUNKS=2000", "AGENTS=5", dsn=db, env={"PYRECALL_ADMIN_DSN": server_url})
    assert done.stdout.strip()


def test_bench_index_runs_small(server_url):
    done = make("bench-index", "CHUNKS=3000", "INDEX=hnsw", "M=8", "EF_CONSTRUCTION=32",
                env={"PYRECALL_ADMIN_DSN": server_url})
    assert "recall@10" in done.stderr and "built in" in done.stderr
