"""The embedding job: claiming, concurrency, crashes, failures, re-embedding, dimensions."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector

from pyrecall import DimensionMismatchError, _worker
from pyrecall._worker import Worker, count_pending

HERE = Path(__file__).resolve().parent


def seed(conn, n, *, sessions=10, poison_at=None):
    conn.execute("insert into recall.sessions (session_id, agent_id) "
                 "select 's' || g, 'agent-' || (g %% 2) from generate_series(0, %s) g", [sessions - 1])
    with conn.cursor().copy("copy recall.messages (session_id, role, content) from stdin") as cp:
        for i in range(n):
            text = f"POISON {i}" if poison_at == i else f"note {i} about topic {i % 37}"
            cp.write_row([f"s{i % sessions}", "system", text])
    assert conn.execute("select count(*) from recall.chunks").fetchone()[0] == n


def connect(url):
    c = psycopg.connect(url, autocommit=True)
    register_vector(c)
    return c


def test_embeds_everything_and_records_model(conn):
    seed(conn, 150)
    emb = FakeEmbedder()
    report = Worker(conn, emb, batch_size=32).run()
    assert (report.scanned, report.embedded, report.failed, report.pending) == (150, 150, 0, 0)
    row = conn.execute("select count(*), count(distinct embedding_model), min(embedding_model), "
                       "bool_and(embedded_at is not null) from recall.chunks where embedding is not null").fetchone()
    assert row == (150, 1, "fake/hash", True)
    # n_tokens became the embedder's exact count
    assert conn.execute("select bool_and(n_tokens = array_length(regexp_split_to_array(content, ' '), 1)) "
                        "from recall.chunks").fetchone()[0] is True


def test_two_concurrent_workers_embed_each_chunk_once(db_url, conn):
    seed(conn, 2000)
    emb = FakeEmbedder(delay=0.005)
    reports, errors = [], []

    def work():
        try:
            with connect(db_url) as c:
                reports.append(Worker(c, emb, batch_size=50).run())
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert sorted(r.embedded > 0 for r in reports) == [True, True]      # both did work
    assert sum(r.embedded for r in reports) == 2000
    assert len(emb.seen) == 2000 and len(set(emb.seen)) == 2000        # nobody twice
    assert count_pending(conn) == 0


def test_worker_killed_mid_batch_loses_nothing(db_url, conn):
    seed(conn, 400)
    proc = subprocess.Popen([sys.executable, str(HERE / "worker_proc.py"), db_url, "0.2"],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])})
    deadline = time.time() + 60
    while time.time() < deadline:   # let it write a few batches, then kill it mid-batch
        done = conn.execute("select count(*) from recall.chunks where embedding is not null").fetchone()[0]
        if done >= 60:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    done = conn.execute("select count(*) from recall.chunks where embedding is not null").fetchone()[0]
    assert 60 <= done < 400
    # the claim died with the connection: the rest is pending again, nothing half-written
    assert count_pending(conn) == 400 - done
    report = Worker(conn, FakeEmbedder(), batch_size=50).run()
    assert report.embedded == 400 - done and count_pending(conn) == 0


def test_provider_down_keeps_chunks_pending_with_error(conn):
    seed(conn, 40)
    report = Worker(conn, FakeEmbedder(down=True), batch_size=16).run()
    assert (report.embedded, report.failed, report.pending) == (0, 40, 0)   # 0: all in backoff
    rows = conn.execute("select embed_attempts, embed_error, embed_after > now() from recall.chunks").fetchall()
    assert set(rows) == {(1, "TransientEmbeddingError: provider down (fake)", True)}
    assert count_pending(conn) == 0            # waiting out the backoff
    # a second failure doubles the wait
    report = Worker(conn, FakeEmbedder(down=True), retry_now=True).run()
    waits = conn.execute("select distinct embed_attempts, round(extract(epoch from embed_after - now()) / 30) "
                         "from recall.chunks").fetchall()
    assert waits == [(2, 2)]
    # the provider is back: retry now (or after the backoff) embeds everything
    report = Worker(conn, FakeEmbedder(), retry_now=True).run()
    assert report.embedded == 40
    assert conn.execute("select count(*) from recall.chunks where embed_error is not null "
                        "or embed_attempts > 0").fetchone()[0] == 0


def test_one_bad_chunk_does_not_stop_the_batch(conn):
    seed(conn, 64, poison_at=17)
    report = Worker(conn, FakeEmbedder(poison="POISON"), batch_size=64).run()
    assert (report.embedded, report.failed) == (63, 1)
    bad = conn.execute("select content, embed_attempts, embed_error from recall.chunks "
                       "where embedding is null").fetchall()
    assert bad == [("System: POISON 17", 1, "EmbeddingError: provider refused the input (fake)")]


def test_dry_run_counts_and_writes_nothing(conn):
    seed(conn, 30)
    assert count_pending(conn) == 30
    assert count_pending(conn, agent="agent-1") == 15
    assert conn.execute("select count(*) from recall.chunks where embedding is not null").fetchone()[0] == 0


def test_reembed_with_another_model_of_same_dimension(conn):
    seed(conn, 20)
    Worker(conn, FakeEmbedder(model="fake/a")).run()
    report = Worker(conn, FakeEmbedder(model="fake/b"), reembed=True).run()
    assert report.embedded == 20
    assert conn.execute("select array_agg(distinct embedding_model) from recall.chunks").fetchone()[0] == ["fake/b"]


def test_dimension_mismatch_refused_then_reembed_path(conn):
    seed(conn, 10)
    small = FakeEmbedder(model="fake/small", dim=8)
    with pytest.raises(DimensionMismatchError,
                       match=r"gives 8-dimensional vectors but this database stores 384; to switch, run "
                             r"`pyrecall embed --reembed --model fake/small`"):
        Worker(conn, small).run()
    _worker.change_dimension(conn, 8)
    register_vector(conn)
    assert Worker(conn, small, reembed=True).run().embedded == 10
    typ = conn.execute("select format_type(atttypid, atttypmod) from pg_attribute "
                       "where attrelid = 'recall.chunks'::regclass and attname = 'embedding'").fetchone()[0]
    assert typ == "vector(8)"


def test_cleanup_removes_orphans(conn):
    seed(conn, 5)
    conn.execute("alter table recall.messages disable trigger messages_after_delete")
    conn.execute("delete from recall.messages where seq = 1")
    conn.execute("alter table recall.messages enable trigger messages_after_delete")
    assert _worker.cleanup(conn) == 5   # one per session had seq 1: 5 sessions of 10 hold messages
    assert conn.execute("select count(*) from recall.chunks").fetchone()[0] == 0


def test_empty_chunks_skipped_not_retried(conn):
    seed(conn, 3)
    conn.execute("update recall.chunks set content = '   ' where chunk_id = (select min(chunk_id) from recall.chunks)")
    report = Worker(conn, FakeEmbedder()).run()
    assert (report.embedded, report.skipped) == (2, 1)
    assert Worker(conn, FakeEmbedder(), retry_now=True).run().scanned == 0


def _vacuums(conn) -> int:
    conn.execute("select pg_stat_clear_snapshot()")
    return conn.execute("select vacuum_count from pg_stat_user_tables "
                        "where relid = 'recall.chunks'::regclass").fetchone()[0]


def _dead_tuples(conn) -> int:
    conn.execute("create extension if not exists pgstattuple")
    return conn.execute("select dead_tuple_count from pgstattuple('recall.chunks')").fetchone()[0]


@pytest.mark.parametrize(("chunks", "vacuumed"), [(99, False), (100, True), (250, True)])
def test_a_run_that_writes_many_rows_vacuums_them(conn, monkeypatch, chunks, vacuumed):
    # Every embedding written is an UPDATE that leaves a dead row version; past the threshold
    # the run vacuums, so the next queries do not pay for them.
    monkeypatch.setattr(_worker, "VACUUM_MIN_ROWS", 100)
    seed(conn, chunks)
    before = _vacuums(conn)
    report = Worker(conn, FakeEmbedder(), batch_size=32).run()
    assert (report.embedded, report.vacuumed) == (chunks, vacuumed)
    assert _vacuums(conn) == before + vacuumed
    if vacuumed:
        assert _dead_tuples(conn) == 0


def test_no_vacuum_inside_the_callers_transaction(db_url, monkeypatch):
    monkeypatch.setattr(_worker, "VACUUM_MIN_ROWS", 10)
    with psycopg.connect(db_url) as c:  # autocommit off: a transaction is open throughout
        register_vector(c)
        seed(c, 20)
        report = Worker(c, FakeEmbedder()).run()
        assert (report.embedded, report.vacuumed) == (20, False)


def test_commit_guard_holds_ctrl_c_from_arm_to_the_end_of_the_block():
    """A Ctrl-C during a batch's COMMIT waits until the batch is counted (then interrupts); one
    before arm() interrupts at once; the program's own handler is back afterwards."""
    before = signal.getsignal(signal.SIGINT)
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with _worker._CommitGuard() as guard:
            guard.arm()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            steps.append("counted")     # reached: the interrupt is held
    assert steps == ["counted"] and signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):
        with _worker._CommitGuard():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            steps.append("not reached")
    assert steps == ["counted"] and signal.getsignal(signal.SIGINT) is before
    with _worker._CommitGuard() as guard:   # nothing held: nothing raised
        guard.arm()
    # outside the main thread it does nothing (signals go to the main thread)
    seen = []
    t = threading.Thread(target=lambda: seen.append(_worker._CommitGuard().__enter__().previous))
    t.start()
    t.join()
    assert seen == [None]
