"""Index upkeep by the embedding job: an agent that comes to hold agent_index_min_rows embedded
chunks gets a vector index of its own at the end of the run that embedded them
(recall.vector_index_upkeep_ddl, pyrecall._index.upkeep), so that its recalls stop scanning
every chunk. The vectors are the fake embedder's: this is about which indexes get built."""

import time

import psycopg
import pytest
from fake_embedder import FakeEmbedder

from pyrecall import ConfigError, _index
from pyrecall._worker import Worker
from pyrecall.client import Recall

MIN_ROWS = 60


@pytest.fixture
def small_threshold(conn):
    conn.execute("update recall.config set value = %s where key = 'agent_index_min_rows'", [str(MIN_ROWS)])
    return conn


def seed(conn, agent, n, start=0):
    conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, %s) "
                 "on conflict do nothing", [f"{agent}-s", agent])
    with conn.cursor().copy("copy recall.messages (session_id, role, content) from stdin") as cp:
        for i in range(start, start + n):
            cp.write_row([f"{agent}-s", "system", f"note {i} of {agent} about topic {i % 13}"])


def own_index(conn, agent):
    return conn.execute("select index_oid from recall._agent_vector_index(%s)", [agent]).fetchone()[0]


def built_at(conn, agent):
    return {r["agent_id"]: r["built_at"] for r in _index.index_info(conn)}.get(agent)


def test_the_run_builds_the_index_an_agent_has_come_to_need(small_threshold):
    conn = small_threshold
    seed(conn, "big", MIN_ROWS + 5)
    seed(conn, "small", MIN_ROWS - 1)
    report = Worker(conn, FakeEmbedder(), batch_size=32).run()
    assert report.embedded == 2 * MIN_ROWS + 4 and report.errors == []
    assert [(r["agent_id"], r["index_rows"], r["valid"]) for r in report.indexed] == [("big", MIN_ROWS + 5, True)]
    assert report.indexed[0]["index_name"].startswith("chunks_embedding_a_")
    assert own_index(conn, "big") is not None and own_index(conn, "small") is None
    # an index concurrently built leaves nothing behind (no _new, no INVALID)
    assert [(r["agent_id"], r["valid"]) for r in _index.index_info(conn)] == [("big", True)]
    first = built_at(conn, "big")

    # nothing pending: nothing embedded, nothing built
    assert Worker(conn, FakeEmbedder()).run().indexed == []
    # the small agent grows past the threshold: its index is built, the other one is kept as it was
    seed(conn, "small", 5, start=MIN_ROWS)
    seed(conn, "big", 5, start=MIN_ROWS + 5)
    again = Worker(conn, FakeEmbedder()).run()
    assert [r["agent_id"] for r in again.indexed] == ["small"]
    assert built_at(conn, "big") == first
    # and the recall of each goes through its own index
    conn.execute("set client_min_messages = debug1")
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    conn.execute("select * from recall.hybrid_recall('small', 'topic 3', %s::vector, 5)",
                 [FakeEmbedder().embed(["topic 3"])[0]]).fetchall()
    paths = [n for n in notices if n.startswith("recall._vector_arm_scoped")]
    assert any("path ANN via" in n for n in paths), notices


def test_an_index_is_built_only_for_the_agents_the_run_embedded(small_threshold):
    """An agent already past the threshold without an index (embedded before upkeep existed, or
    with --no-index) is left to the refresh unless this run embedded some of its chunks."""
    conn = small_threshold
    seed(conn, "old", MIN_ROWS)
    Worker(conn, FakeEmbedder(), index=False).run()
    seed(conn, "new", MIN_ROWS)
    report = Worker(conn, FakeEmbedder()).run()
    assert [r["agent_id"] for r in report.indexed] == ["new"]
    assert own_index(conn, "old") is None
    # with no list, the SQL function names every agent that needs one
    ddl = [r[0] for r in conn.execute("select recall.vector_index_upkeep_ddl()").fetchall()]
    assert sum(s.startswith("create index concurrently") for s in ddl) == 1
    assert _index.upkeep(conn)[0]["agent_id"] == "old"


def test_index_all_also_builds_for_the_agents_the_run_did_not_embed_for(small_threshold):
    """`pyrecall embed` and each worker's first run (index='all'): an agent that grew past the
    threshold before the upkeep existed gets its index even when nothing is pending."""
    conn = small_threshold
    seed(conn, "old", MIN_ROWS)
    seed(conn, "other", MIN_ROWS)
    Worker(conn, FakeEmbedder(), index=False).run()
    # a worker of one agent: that agent alone
    report = Worker(conn, FakeEmbedder(), agent="old", index="all").run()
    assert (report.embedded, [r["agent_id"] for r in report.indexed]) == (0, ["old"])
    assert own_index(conn, "other") is None
    worker = Worker(conn, FakeEmbedder(), index="all")
    assert [r["agent_id"] for r in worker.run().indexed] == ["other"]
    # later runs of that worker look only at the agents they embed for
    seed(conn, "third", MIN_ROWS)
    Worker(conn, FakeEmbedder(), index=False).run()
    assert worker.run().indexed == [] and own_index(conn, "third") is None
    with pytest.raises(ConfigError, match="index must be True, False or 'all'"):
        Worker(conn, FakeEmbedder(), index="yes")


def test_the_worker_indexes_at_start_the_agents_that_grew_before_it(small_threshold, db_url):
    conn = small_threshold
    seed(conn, "old", MIN_ROWS)
    Worker(conn, FakeEmbedder(), index=False).run()
    reports, deadline = [], time.monotonic() + 60
    with Recall(db_url, embedder=FakeEmbedder()) as r:
        r.run_worker(idle_timeout=0.1, summarize_after=None, on_report=reports.append,
                     stop=lambda: bool(reports) or time.monotonic() > deadline)
    assert [(x.embedded, [i["agent_id"] for i in x.indexed]) for x in reports] == [(0, ["old"])]


def test_no_upkeep_when_switched_off_or_the_layout_is_one_table_index(small_threshold):
    conn = small_threshold
    seed(conn, "a", MIN_ROWS)
    assert Worker(conn, FakeEmbedder(), index=False).run().indexed == []
    conn.execute("update recall.chunks set embedding = null")
    conn.execute("update recall.config set value = 'false' where key = 'auto_vector_index'")
    assert Worker(conn, FakeEmbedder()).run().indexed == []
    conn.execute("update recall.config set value = 'true' where key = 'auto_vector_index'")
    _index.create_index(conn, "hnsw", {"m": 8}, "table")
    conn.execute("update recall.chunks set embedding = null")
    report = Worker(conn, FakeEmbedder()).run()
    assert report.indexed == [] and report.embedded == MIN_ROWS
    assert own_index(conn, "a") is None
    assert [r["agent_id"] for r in _index.index_info(conn)] == [None]   # the table index only


def test_the_layout_last_built_is_followed(small_threshold):
    """The options the DBA built with (recall.config vector_index) are the new index's."""
    conn = small_threshold
    _index.create_index(conn, "hnsw", {"m": 8, "ef_construction": 40}, "agents")
    seed(conn, "a", MIN_ROWS)
    report = Worker(conn, FakeEmbedder()).run()
    assert [(r["method"], r["options"]) for r in report.indexed] == [("hnsw", {"m": 8, "ef_construction": 40})]


def test_another_process_building_leaves_the_build_to_it(small_threshold, db_url):
    conn = small_threshold
    seed(conn, "a", MIN_ROWS)
    with psycopg.connect(db_url, autocommit=True) as other:
        other.execute("select pg_advisory_lock(hashtextextended(%s, 0))", [_index.UPKEEP_LOCK])
        report = Worker(conn, FakeEmbedder()).run()
        assert report.indexed == [] and report.errors == [] and report.embedded == MIN_ROWS
    assert own_index(conn, "a") is None
    assert [r["agent_id"] for r in _index.upkeep(conn, ["a"])] == ["a"]


def test_a_failed_build_is_reported_and_the_embeddings_kept(small_threshold):
    conn = small_threshold
    seed(conn, "a", MIN_ROWS)
    key = conn.execute("select recall._agent_key('a')").fetchone()[0]
    # something that is not an index where the build puts its new index
    conn.execute(f"create table recall.chunks_embedding_a_{key}_new (x int)")
    report = Worker(conn, FakeEmbedder()).run()
    assert report.embedded == MIN_ROWS and report.pending == 0 and report.indexed == []
    assert len(report.errors) == 1 and report.errors[0].startswith("vector index not built")
    assert "is not an index" in report.errors[0]
    # the lock was given back: once the obstacle is gone, the next upkeep builds it
    conn.execute(f"drop table recall.chunks_embedding_a_{key}_new")
    assert [r["agent_id"] for r in _index.upkeep(conn, ["a"])] == ["a"]


def test_inside_a_transaction_nothing_is_built(small_threshold, db_url):
    conn = small_threshold
    seed(conn, "a", MIN_ROWS)
    with psycopg.connect(db_url) as tx:   # not autocommit: the caller's transaction
        from pgvector.psycopg import register_vector
        register_vector(tx)
        report = Worker(tx, FakeEmbedder()).run()
        assert report.embedded == MIN_ROWS and report.indexed == [] and report.errors == []
    assert own_index(conn, "a") is None


def test_a_role_that_does_not_own_the_table_leaves_it_to_the_owner(small_threshold):
    """CREATE INDEX is the table owner's: an embedding run as another role (recall_admin, an
    operator) builds nothing and reports no error at every run; the owner's next run does."""
    conn = small_threshold
    seed(conn, "a", MIN_ROWS)
    Worker(conn, FakeEmbedder(), index=False).run()
    conn.execute("set role recall_admin")
    assert _index.upkeep(conn, ["a"]) == []
    conn.execute("reset role")
    assert [r["agent_id"] for r in _index.upkeep(conn, ["a"])] == ["a"]


def test_a_build_cut_short_is_built_again_by_the_next_run(small_threshold):
    """Ctrl-C or a crash during the concurrent build leaves an INVALID <name>_new and no index:
    the next run builds it even when it embeds nothing (and nothing for that agent)."""
    conn = small_threshold
    seed(conn, "a", MIN_ROWS)
    Worker(conn, FakeEmbedder(), index=False).run()
    key = conn.execute("select recall._agent_key('a')").fetchone()[0]
    # what an interrupted CREATE INDEX CONCURRENTLY leaves: the index, marked invalid
    conn.execute(f"create index chunks_embedding_a_{key}_new on recall.chunks using hnsw "
                 f"(embedding vector_cosine_ops) where hashtextextended(agent_id, 0) = "
                 f"('x' || '{key}')::bit(64)::bigint")
    conn.execute("update pg_index set indisvalid = false "
                 f"where indexrelid = 'recall.chunks_embedding_a_{key}_new'::regclass")
    assert own_index(conn, "a") is None
    report = Worker(conn, FakeEmbedder()).run()
    assert report.embedded == 0
    assert [(r["agent_id"], r["index_name"], r["valid"]) for r in report.indexed] == [
        ("a", f"chunks_embedding_a_{key}", True)]
    assert [r["index_name"] for r in _index.index_info(conn)] == [f"chunks_embedding_a_{key}"]
    # with nothing cut short and nothing embedded, a run builds nothing
    assert Worker(conn, FakeEmbedder()).run().indexed == []


def test_a_dba_build_waits_for_the_upkeep_lock(small_threshold, db_url):
    """`pyrecall dba index` (create_index) and the job's upkeep never build at once: the
    first waits for the lock the second holds."""
    import threading

    conn = small_threshold
    with psycopg.connect(db_url, autocommit=True) as other:
        other.execute("select pg_advisory_lock(hashtextextended(%s, 0))", [_index.UPKEEP_LOCK])
        done = threading.Event()

        def build():
            with psycopg.connect(db_url, autocommit=True) as c:
                _index.create_index(c, "hnsw", {"m": 8}, "agents")
            done.set()

        t = threading.Thread(target=build)
        t.start()
        assert not done.wait(1.0)            # waiting for the lock
        other.execute("select pg_advisory_unlock(hashtextextended(%s, 0))", [_index.UPKEEP_LOCK])
        t.join(30)
        assert done.is_set()
    assert conn.execute("select value ->> 'method' from recall.config where key = 'vector_index'").fetchone()[0] == "hnsw"
