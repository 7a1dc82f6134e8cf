"""Vector index management: create / refresh / drop / info, option validation, concurrent
builds and their progress, the path recall._vector_arm takes, and the query-time knobs.

Chunks are written straight into recall.chunks (binary COPY) with clustered vectors: these
tests are about the indexes, not about chunking.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from pyrecall import _index

ROOT = Path(__file__).resolve().parent.parent
from pyrecall.bench import index_build as bench  # noqa: E402

NEEDS_VECTORSCALE = "needs the pgvectorscale extension (Dockerfile.postgres)"


def load(conn, sizes: dict[str, int], *, seed: int = 0):
    """Chunks for agents of the given sizes (shuffled together); (agents array, vectors, sample)."""
    agents = np.array([a for a, n in sizes.items() for _ in range(n)], dtype=object)
    np.random.default_rng(seed).shuffle(agents)
    vecs, sample = bench.clustered(len(agents), seed=seed)
    bench.load(conn, agents, vecs, seed=seed)
    return agents, vecs, sample


def config(conn, **values):
    for key, value in values.items():
        conn.execute("update recall.config set value = %s::jsonb where key = %s", [json.dumps(value), key])


def has_vectorscale(conn) -> bool:
    return conn.execute("select exists (select from pg_extension where extname = 'vectorscale')").fetchone()[0]


def info(conn) -> list[dict]:
    return _index.index_info(conn)


def arm(conn, agent, q, n=10, **filters):
    args = [filters.get(k) for k in ("exclude_session_id", "filter", "kinds", "since", "until")]
    return [r[0] for r in conn.execute(
        "select chunk_id from recall._vector_arm(%s, %s, %s, %s, %s, %s, %s, %s)", [agent, q, n, *args])]


def plans_of(conn, agent, q, n=10) -> str:
    """The plans of the statements inside _vector_arm (auto_explain, this session only)."""
    notices = []
    handler = lambda d: notices.append(d.message_primary)  # noqa: E731
    conn.add_notice_handler(handler)
    try:
        conn.execute("load 'auto_explain'")
        for k, v in {"log_min_duration": "0", "log_nested_statements": "on", "log_level": "notice"}.items():
            conn.execute(f"set auto_explain.{k} = {v}")
        arm(conn, agent, q, n)
    finally:
        conn.execute("set auto_explain.log_min_duration = -1")
        conn.remove_notice_handler(handler)
    return "\n".join(notices)


def path_of(conn, agent, q, n=10, **filters) -> str:
    """The path _vector_arm took (its DEBUG message)."""
    messages = []
    handler = lambda d: messages.append(d.message_primary)  # noqa: E731
    conn.add_notice_handler(handler)
    try:
        conn.execute("set client_min_messages = debug1")
        arm(conn, agent, q, n, **filters)
    finally:
        conn.execute("reset client_min_messages")
        conn.remove_notice_handler(handler)
    return " | ".join(m for m in messages if m.startswith("recall._vector_arm"))


@pytest.fixture
def small(conn):
    """3 agents: big (600 chunks), mid (300), tiny (20); own indexes from 250 chunks up."""
    config(conn, agent_index_min_rows=250)
    agents, vecs, sample = load(conn, {"big": 600, "mid": 300, "tiny": 20})
    return conn, agents, vecs, sample


# ------------------------------------------------------------------ create / info / drop

def test_create_builds_one_index_per_large_agent(small):
    conn, *_ = small
    ran = [r[0] for r in conn.execute("select * from recall.create_vector_index('hnsw', '{\"m\": 8, \"ef_construction\": 32}')")]
    assert any(s.startswith("create index chunks_embedding_a_") for s in ran)
    rows = {r["agent_id"]: r for r in info(conn)}
    assert set(rows) == {"big", "mid"}
    big = rows["big"]
    assert big["index_name"] == conn.execute("select recall._agent_index_name('big')").fetchone()[0]
    assert big["method"] == "hnsw" and big["options"] == {"m": 8, "ef_construction": 32}
    assert big["valid"] and big["size_bytes"] > 0 and big["built_at"] is not None
    assert big["build_seconds"] >= 0
    key = conn.execute("select recall._agent_key('big')").fetchone()[0]
    hashed = conn.execute("select hashtextextended('big', 0)").fetchone()[0]
    assert int(key, 16) == hashed % 2**64  # the index name's key is the same hash, in hex
    assert big["index_name"].endswith(key)
    assert f"WHERE (hashtextextended(agent_id, (0)::bigint) = '{hashed}'::bigint)" in big["definition"]
    assert "USING hnsw (embedding public.vector_cosine_ops)" in big["definition"]
    conf = conn.execute("select value from recall.config where key = 'vector_index'").fetchone()[0]
    assert conf["method"] == "hnsw" and conf["options"] == {"m": 8, "ef_construction": 32}
    assert conf["scope"] == "agents"


def test_auto_is_hnsw_without_vectorscale(small):
    conn, *_ = small
    if has_vectorscale(conn):
        pytest.skip("vectorscale is installed here: auto means diskann (see test_diskann_*)")
    conn.execute("select recall.create_vector_index()")
    assert {r["method"] for r in info(conn)} == {"hnsw"}


def test_refresh_is_idempotent_and_follows_the_agents(small):
    conn, agents, vecs, sample = small
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}')")
    # nothing changed: the refresh (no arguments) only records the layout
    assert [r[0] for r in conn.execute("select recall.vector_index_ddl()")] == [
        "select recall._vector_index_configured('hnsw', '{\"m\": 8}', 'agents')"]
    # tiny grows past the threshold, mid shrinks below half of it
    bench.load(conn, np.array(["tiny"] * 300, dtype=object), bench.clustered(300, seed=5)[0], seed=5, tag="b2")
    conn.execute("delete from recall.chunks where agent_id = 'mid' and chunk_id % 3 <> 0")
    ddl = [r[0] for r in conn.execute("select recall.vector_index_ddl()")]
    mid = conn.execute("select recall._agent_index_name('mid')").fetchone()[0]
    assert f"drop index concurrently if exists recall.{mid}" in ddl
    tiny, big = conn.execute("select hashtextextended('tiny', 0), recall._agent_key('big')").fetchone()
    assert any(f"where pg_catalog.hashtextextended(agent_id, 0) = '{tiny}'::bigint" in s for s in ddl)
    assert not any(big in s for s in ddl[:-1])
    _index.create_index(conn)
    assert {r["agent_id"] for r in info(conn)} == {"big", "tiny"}


def test_new_options_rebuild_beside_the_old_index_and_swap(small):
    conn, *_ = small
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}')")
    name, key, hashed = conn.execute("select recall._agent_index_name('big'), recall._agent_key('big'), "
                                     "hashtextextended('big', 0)").fetchone()
    ddl = [r[0] for r in conn.execute("select recall.vector_index_ddl('hnsw', '{\"m\": 12}')")]
    big = [s for s in ddl if name in s]
    assert big == [
        f"create index concurrently {name}_new on recall.chunks using hnsw (embedding public.vector_cosine_ops) "
        f"with (m=12) where pg_catalog.hashtextextended(agent_id, 0) = '{hashed}'::bigint",
        f"select recall._vector_index_built('{name}_new', '{key}', 't')",
        f"alter index recall.{name} rename to {name}_old",
        f"alter index recall.{name}_new rename to {name}",
        f"drop index concurrently if exists recall.{name}_old",
    ]
    _index.create_index(conn, "hnsw", {"m": 12})
    assert {r["options"]["m"] for r in info(conn)} == {12}


@pytest.mark.parametrize("scope, names", [
    ("table", {"chunks_embedding_idx"}),
    ("both", {"chunks_embedding_idx", "big", "mid"}),
    ("agents", {"big", "mid"}),
])
def test_scopes(small, scope, names):
    conn, *_ = small
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}', %s)", [scope])
    assert {r["agent_id"] or r["index_name"] for r in info(conn)} == names


def test_switching_scope_drops_what_is_no_longer_asked(small):
    conn, *_ = small
    conn.execute("select recall.create_vector_index('hnsw', '{}', 'both')")
    conn.execute("select recall.create_vector_index(scope => 'table')")
    assert [r["index_name"] for r in info(conn)] == ["chunks_embedding_idx"]


def test_drop_removes_every_ann_index_and_the_layout(small):
    conn, *_ = small
    conn.execute("select recall.create_vector_index('hnsw', '{}', 'both')")
    conn.execute("create index by_hand on recall.chunks using hnsw (embedding vector_l2_ops)")
    assert conn.execute("select recall.drop_vector_index()").fetchone()[0] == 4
    assert info(conn) == []
    assert conn.execute("select count(*) from recall.config where key = 'vector_index'").fetchone()[0] == 0
    assert conn.execute("select recall.drop_vector_index()").fetchone()[0] == 0


def test_python_drop_runs_concurrently(small):
    conn, *_ = small
    _index.create_index(conn, "hnsw", {"m": 8})
    ran = _index.drop_index(conn)
    assert ran[0].startswith("drop index concurrently if exists recall.chunks_embedding_a_")
    assert info(conn) == []


def test_agent_id_with_quotes_is_a_literal_not_sql(conn):
    evil = "it's \"x\"'); drop table recall.chunks; --"
    config(conn, agent_index_min_rows=50)
    _, vecs, sample = load(conn, {evil: 80})
    conn.execute("select recall.create_vector_index('hnsw', '{}')")
    [row] = info(conn)
    assert row["agent_id"] == evil and evil not in row["definition"]
    q = sample()
    assert "path ANN via" in path_of(conn, evil, q) or "path exact" in path_of(conn, evil, q)
    assert len(arm(conn, evil, q)) == 10
    assert conn.execute("select count(*) from recall.chunks").fetchone()[0] == 80


# ------------------------------------------------------------------ validation

@pytest.mark.parametrize("method, options, scope, sqlstate, message", [
    ("ivfflat", {}, None, "22023", 'method must be auto, diskann or hnsw, got "ivfflat"'),
    ("hnsw", {"foo": 1}, None, "22023", 'unknown option "foo" for a hnsw index; valid options: m, ef_construction'),
    ("hnsw", {"num_neighbors": 50}, None, "22023", 'unknown option "num_neighbors" for a hnsw index; valid options: m, ef_construction'),
    ("hnsw", {"m": 1}, None, "22023", "option m must be an integer between 2 and 100, got 1"),
    ("hnsw", {"m": 101}, None, "22023", "option m must be an integer between 2 and 100, got 101"),
    ("hnsw", {"m": 16.5}, None, "22023", "option m must be an integer between 2 and 100, got 16.5"),
    ("hnsw", {"m": "8; drop table x"}, None, "22023", 'option m must be an integer between 2 and 100, got "8; drop table x"'),
    ("hnsw", {"m": None}, None, "22023", "option m must be an integer between 2 and 100, got null"),
    ("hnsw", {"ef_construction": 1001}, None, "22023", "option ef_construction must be an integer between 4 and 1000, got 1001"),
    ("hnsw", {"m": 40, "ef_construction": 64}, None, "22023", "option ef_construction must be at least twice m, got ef_construction 64 and m 40"),
    ("hnsw", [1], None, "22023", "options must be a JSON object, got a JSON array"),
    ("hnsw", {}, "everything", "22023", 'scope must be agents, table or both, got "everything"'),
])
def test_bad_arguments_are_22023(conn, method, options, scope, sqlstate, message):
    import json
    for fn in ("recall.create_vector_index", "recall.vector_index_ddl"):
        with pytest.raises(psycopg.Error) as e:
            conn.execute(f"select * from {fn}(%s, %s, %s)", [method, json.dumps(options), scope])
        assert e.value.sqlstate == sqlstate
        assert e.value.diag.message_primary == message


@pytest.mark.parametrize("options, expected", [
    ({}, []),
    ({"num_neighbors": 50, "search_list_size": 100, "max_alpha": 1.2, "storage_layout": "memory_optimized",
      "num_bits_per_dimension": 2},
     ["storage_layout=memory_optimized", "num_neighbors=50", "search_list_size=100", "max_alpha=1.2",
      "num_bits_per_dimension=2"]),
    ({"storage_layout": "plain", "num_dimensions": 256}, ["storage_layout=plain", "num_dimensions=256"]),
    ({"max_alpha": "1.5"}, ["max_alpha=1.5"]),
    ({"num_neighbors": "64"}, ["num_neighbors=64"]),
])
def test_diskann_options_accepted(conn, options, expected):
    """Option checking needs no extension: it runs before anything is built."""
    import json
    got = conn.execute("select recall._vector_index_reloptions('diskann', %s)", [json.dumps(options)]).fetchone()[0]
    assert got == expected


@pytest.mark.parametrize("options, message", [
    ({"num_neighbors": 5}, "option num_neighbors must be an integer between 10 and 1000, got 5"),
    ({"search_list_size": 5000}, "option search_list_size must be an integer between 10 and 1000, got 5000"),
    ({"max_alpha": 0.5}, "option max_alpha must be a number between 1.0 and 5.0, got 0.5"),
    ({"max_alpha": "1.2) with (x"}, 'option max_alpha must be a number between 1.0 and 5.0, got "1.2) with (x"'),
    ({"storage_layout": "fast"}, 'option storage_layout must be memory_optimized or plain, got "fast"'),
    ({"storage_layout": "plain", "num_bits_per_dimension": 2},
     "option num_bits_per_dimension applies to storage_layout memory_optimized only"),
    ({"num_dimensions": 385}, "option num_dimensions must be an integer between 0 and 384, got 385"),
    ({"m": 16}, 'unknown option "m" for a diskann index; valid options: num_neighbors, search_list_size, '
                "max_alpha, storage_layout, num_bits_per_dimension, num_dimensions"),
])
def test_diskann_bad_options_are_22023(conn, options, message):
    import json
    with pytest.raises(psycopg.Error) as e:
        conn.execute("select recall._vector_index_reloptions('diskann', %s)", [json.dumps(options)])
    assert e.value.sqlstate == "22023"
    assert e.value.diag.message_primary == message


def test_diskann_without_vectorscale_is_0A000(conn):
    if has_vectorscale(conn):
        pytest.skip("vectorscale is installed here")
    with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
        conn.execute("select recall.vector_index_ddl('diskann')")
    assert e.value.diag.message_primary == (
        "method diskann needs the vectorscale extension (pgvectorscale), which is not installed in this database")


def test_diskann_build_and_search(small):
    conn, agents, vecs, sample = small
    if not has_vectorscale(conn):
        pytest.skip(NEEDS_VECTORSCALE)
    conn.execute("select recall.create_vector_index('auto', '{\"num_neighbors\": 20}')")
    assert {r["method"] for r in info(conn)} == {"diskann"}
    q = sample()
    assert "path ANN via" in path_of(conn, "big", q) and "(diskann)" in path_of(conn, "big", q)
    rows = np.nonzero(agents == "big")[0]
    truth = bench.exact_top(vecs, rows, q, 10)
    assert len(set(arm(conn, "big", q)) & set(truth)) >= 9


# ------------------------------------------------------------------ concurrent build, progress

def test_concurrent_build_lets_writers_in_and_shows_progress(small, db_url):
    """CREATE INDEX CONCURRENTLY waits for transactions that already wrote to recall.chunks;
    meanwhile new writes go on, and recall.index_build_progress() shows the build."""
    conn, *_ = small
    holder = psycopg.connect(db_url)                       # an open writing transaction
    holder.execute("update recall.chunks set importance = importance where chunk_id = 1")
    builder = psycopg.connect(db_url, autocommit=True)
    seen, errors = [], []

    def build():
        try:
            _index.create_index(builder, "hnsw", {"m": 8}, progress=seen.append, every=0.1)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=build)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        progress = []
        while not progress and time.monotonic() < deadline:
            progress = _index.build_progress(conn)
            time.sleep(0.05)
        assert progress, "the build never showed in pg_stat_progress_create_index"
        assert progress[0]["index_name"].endswith("_new")
        assert progress[0]["phase"].startswith("waiting for")
        # a writer is not blocked by the build
        with psycopg.connect(db_url, autocommit=True) as writer:
            writer.execute("set lock_timeout = '2s'")
            writer.execute("update recall.chunks set importance = 0.9 where chunk_id = 2")
            writer.execute("insert into recall.chunks (agent_id, session_id, kind, first_seq, message_ids, "
                           "content, n_tokens, created_at) select agent_id, session_id, kind, 99999, '{}', "
                           "'new', 1, now() from recall.chunks where chunk_id = 3")
    finally:
        holder.rollback()
        holder.close()
        thread.join(60)
        builder.close()
    assert not errors, errors
    assert seen and all(row["index_name"].endswith("_new") for row in seen)
    assert all(r["valid"] for r in info(conn)) and len(info(conn)) == 2


def test_interrupted_concurrent_build_is_cleaned_up(small, db_url):
    conn, *_ = small
    name = conn.execute("select recall._agent_index_name('big')").fetchone()[0]
    # what a cancelled CREATE INDEX CONCURRENTLY leaves: an INVALID index
    conn.execute(f"create index {name}_new on recall.chunks using hnsw (embedding vector_cosine_ops) where agent_id = 'big'")
    conn.execute(f"update pg_index set indisvalid = false where indexrelid = 'recall.{name}_new'::regclass")
    ddl = [r[0] for r in conn.execute("select recall.vector_index_ddl('hnsw')")]
    assert ddl[0] == f"drop index concurrently if exists recall.{name}_new"
    _index.create_index(conn, "hnsw")
    assert sorted(r["agent_id"] for r in info(conn)) == ["big", "mid"]
    assert conn.execute("select to_regclass(%s)", [f"recall.{name}_new"]).fetchone()[0] is None


# ------------------------------------------------------------------ the arm's paths and knobs

def test_paths(small):
    conn, agents, vecs, sample = small
    q = sample()
    assert "path exact (600 rows)" in path_of(conn, "big", q)          # no index yet: exact
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}')")
    big = conn.execute("select recall._agent_index_name('big')").fetchone()[0]
    assert f"path ANN via recall.{big} (hnsw, 600 rows), ef_search = 200" in path_of(conn, "big", q)
    conn.execute("set enable_sort = off")       # at 600 rows B-tree + sort is cheaper; not at 2000+
    assert f"Index Scan using {big} on chunks" in plans_of(conn, "big", q)
    conn.execute("reset enable_sort")
    assert "path exact (20 rows)" in path_of(conn, "tiny", q)
    # a narrow time window holds few rows: exact over the window
    since = conn.execute("select max(created_at) - interval '20 days' from recall.chunks").fetchone()[0]
    assert "path exact (window of" in path_of(conn, "big", q, since=since)
    # a filter nothing passes: its rows (none) read through the GIN index, no ANN scan (the
    # ANN scan that gives up before n pass: tests/test_filtered_ann.py)
    assert "path exact (0 rows pass the conditions)" in path_of(conn, "big", q, filter='{"nope": 1}')
    assert arm(conn, "big", q, filter='{"nope": 1}') == []
    # no index of its own, above exact_scan_max_rows, with a whole-table index: iterative scan
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}', 'table')")
    config(conn, exact_scan_max_rows=100)
    n_table = conn.execute("select count(*) from recall.chunks").fetchone()[0]
    assert f"path ANN via recall.chunks_embedding_idx (hnsw, {n_table} rows)" in path_of(conn, "big", q)
    conn.execute("select recall.drop_vector_index()")
    assert "no ANN index: refresh the indexes" in path_of(conn, "big", q)


def test_whole_table_index_with_iterative_scan_finds_the_agents_neighbours(conn):
    """scope 'table': one index for everyone; an agent above exact_scan_max_rows gets the
    iterative scan, which keeps reading the graph until n of its chunks came by."""
    config(conn, exact_scan_max_rows=300)
    agents, vecs, sample = load(conn, {"a": 1000, "b": 3000, "c": 1000})
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 16, \"ef_construction\": 64}', 'table')")
    rows = np.nonzero(agents == "a")[0]
    recalls = []
    for _ in range(20):
        q = sample()
        truth = bench.exact_top(vecs, rows, q, 10)
        recalls.append(len(set(arm(conn, "a", q)) & set(truth)) / 10)
    assert "path ANN via recall.chunks_embedding_idx" in path_of(conn, "a", sample())
    assert np.mean(recalls) >= 0.99


def knob(conn, name):
    return conn.execute("select current_setting(%s, true)", [name]).fetchone()[0]


def test_knobs_are_restored_and_a_larger_caller_value_wins(small):
    conn, agents, vecs, sample = small
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}')")
    q = sample()
    with conn.transaction():
        conn.execute("set local hnsw.ef_search = 10")
        conn.execute("set local hnsw.iterative_scan = off")
        assert "ef_search = 200" in path_of(conn, "big", q)              # raised to the floor (200)
        assert knob(conn, "hnsw.ef_search") == "10"                      # and restored
        assert knob(conn, "hnsw.iterative_scan") == "off"
        assert knob(conn, "hnsw.max_scan_tuples") == "20000"
        conn.execute("set local hnsw.ef_search = 400")
        assert "ef_search = 400" in path_of(conn, "big", q)              # a larger value wins
        assert knob(conn, "hnsw.ef_search") == "400"
    config(conn, ann_min_ef_search=250)
    assert "ef_search = 250" in path_of(conn, "big", q)                  # the floor is configurable
    assert "ef_search = 300" in path_of(conn, "big", q, n=300)           # n itself is a floor
    config(conn, ann_min_ef_search=10, ann_ef_search_by_rows={"0": 20, "500": 90, "10000": 500})
    assert "(hnsw, 600 rows), ef_search = 90" in path_of(conn, "big", q)  # the width for its size
    config(conn, ann_ef_search_by_rows={"0": 20, "700": 90})
    assert "(hnsw, 600 rows), ef_search = 40" in path_of(conn, "big", q)  # 20, below the session's 40
    config(conn, ann_min_ef_search=250)
    with conn.transaction():                                             # through hybrid_recall too
        conn.execute("set local hnsw.ef_search = 7")
        conn.execute("select count(*) from recall.hybrid_recall('big', 'x', %s)", [q]).fetchone()
        assert knob(conn, "hnsw.ef_search") == "7"


def test_knobs_from_alter_database_reach_new_sessions(small, db_url):
    conn, *_ = small
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}')")
    ran = _index.tune(conn, {"hnsw.ef_search": 321, "diskann.query_rescore": "77"})
    dbname = conn.info.dbname
    assert ran == [f"alter database {dbname} set hnsw.ef_search = '321'",
                   f"alter database {dbname} set diskann.query_rescore = '77'"]
    with psycopg.connect(db_url, autocommit=True) as fresh:
        register_vector(fresh)
        q = small[3]()
        assert "ef_search = 321" in path_of(fresh, "big", q)
        settings = {r["name"]: r for r in _index.search_settings(fresh)}
        assert settings["hnsw.ef_search"]["database_default"] == "321"
        assert settings["diskann.query_rescore"]["database_default"] == "77"
    _index.tune(conn, {"hnsw.ef_search": None})
    with psycopg.connect(db_url, autocommit=True) as fresh:
        settings = {r["name"]: r for r in _index.search_settings(fresh)}
        assert settings["hnsw.ef_search"]["database_default"] is None


@pytest.mark.parametrize("settings, message", [
    ({"hnsw.ef_search": 0}, "option hnsw.ef_search must be an integer between 1 and 1000, got 0"),
    ({"hnsw.ef_search": "lots"}, 'option hnsw.ef_search must be an integer between 1 and 1000, got "lots"'),
    ({"hnsw.iterative_scan": "fast"}, 'hnsw.iterative_scan must be off, relaxed_order or strict_order, got "fast"'),
    ({"work_mem": "1GB"}, re.compile(r'^unknown setting "work_mem"; valid: hnsw\.ef_search, ')),
])
def test_bad_knobs_are_22023(conn, settings, message):
    with pytest.raises(psycopg.Error) as e:
        _index.tune(conn, settings)
    assert e.value.sqlstate == "22023"
    if isinstance(message, str):
        assert e.value.diag.message_primary == message
    else:
        assert message.match(e.value.diag.message_primary)


def test_the_catalog_names_no_agent(small):
    """pg_index / pg_class / comments are readable by every role: they hold hashes of agent ids only."""
    conn, *_ = small
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}', 'both')")
    with conn.transaction():
        conn.execute("set local role recall_agent")
        conn.execute("select set_config('recall.agent_id', 'mid', true)")
        seen = " ".join(r[0] or "" for r in conn.execute(
            "select pg_get_indexdef(i.indexrelid) || ' ' || c.relname || ' ' "
            "|| coalesce(obj_description(c.oid, 'pg_class'), '') "
            "from pg_index i join pg_class c on c.oid = i.indexrelid where i.indrelid = 'recall.chunks'::regclass"))
        assert "'big'" not in seen and "big" not in seen.replace("bigint", "")
        # index_info resolves the agents the caller may see, and no other
        assert {r["agent_id"] for r in info(conn)} == {None, "mid"}


def test_agent_role_uses_its_own_index_under_rls(small):
    """recall_agent sees its rows only (RLS); the partial index still serves it."""
    conn, agents, vecs, sample = small
    conn.execute("select recall.create_vector_index('hnsw', '{\"m\": 8}')")
    q = sample()
    rows = np.nonzero(agents == "big")[0]
    truth = bench.exact_top(vecs, rows, q, 10)
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    conn.execute("load 'auto_explain'")                                  # as superuser, then:
    for k, v in {"log_min_duration": "0", "log_nested_statements": "on", "log_level": "notice"}.items():
        conn.execute(f"set auto_explain.{k} = {v}")
    with conn.transaction():
        conn.execute("set local role recall_agent")
        conn.execute("select set_config('recall.agent_id', 'big', true)")
        conn.execute("set local enable_sort = off")
        got = arm(conn, "big", q)
        assert len(set(got) & set(truth)) >= 9
        assert "Index Scan using chunks_embedding_a_" in "\n".join(notices)
        assert arm(conn, "mid", q) == []                                 # another agent: nothing
    conn.execute("set auto_explain.log_min_duration = -1")


# ------------------------------------------------------------------ storage of the vectors

def storage(conn, table, column):
    return conn.execute("select attstorage from pg_attribute where attrelid = %s::regclass and attname = %s",
                        [table, column]).fetchone()[0]


def test_vectors_are_stored_inline_unless_configured_otherwise(conn):
    """STORAGE main keeps a 384-dim vector in its row (exact scans ~3x cheaper, docs/DBA.md);
    recall.config embedding_storage = external gives pgvector's default back at the next migrate."""
    from pyrecall import _migrate
    assert storage(conn, "recall.chunks", "embedding") == "m"
    assert storage(conn, "recall.sessions", "summary_embedding") == "m"
    # a chunk of 700 incompressible characters: row > 2 kB, and the vector is its largest value
    # (pgvector's default would move it out first); with main the text goes to TOAST instead.
    # Under 005's toast_tuple_target (8160) such a row stays whole: back to PostgreSQL's 2 kB
    # target here, so that the storage alone decides (test_migrations covers the target)
    conn.execute("alter table recall.chunks reset (toast_tuple_target)")
    _, vecs, _ = load(conn, {"a": 1})
    rng = np.random.default_rng(0)
    text = " ".join("".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), 8)) for _ in range(78))
    toasted = "select pg_column_toast_chunk_id(embedding) is not null, pg_column_toast_chunk_id(content) is not null from recall.chunks"
    conn.execute("update recall.chunks set content = %s, embedding = %s", [text, vecs[0] * 2])
    assert conn.execute(toasted).fetchone() == (False, True)           # vector in the row, text out
    conn.execute("update recall.config set value = '\"external\"' where key = 'embedding_storage'")
    _migrate.migrate(conn)
    assert storage(conn, "recall.chunks", "embedding") == "e"
    assert storage(conn, "recall.sessions", "summary_embedding") == "e"
    conn.execute("update recall.chunks set content = %s || 'x', embedding = %s", [text, vecs[0] * 3])
    assert conn.execute(toasted).fetchone() == (True, False)           # pgvector's default: vector out


def test_first_build_without_options_uses_ef_construction_128_and_a_refresh_keeps_the_layout(small):
    """No options on a first build: HNSW gets ef_construction=128; a refresh without arguments
    reuses the options last built (an older layout built with pgvector's defaults is not
    rebuilt), and explicit options win."""
    conn, *_ = small
    if has_vectorscale(conn):
        pytest.skip("vectorscale is installed here: auto means diskann")
    conn.execute("select recall.create_vector_index()")
    rows = info(conn)
    assert rows and all(r["options"] == {"ef_construction": 128} for r in rows)
    assert all("ef_construction='128'" in r["definition"] for r in rows)
    conn.execute("select recall.create_vector_index('hnsw', '{}')")        # pgvector's defaults
    built = {r["index_name"]: r["built_at"] for r in info(conn)}
    assert all(r["options"] == {} for r in info(conn))
    assert [r[0] for r in conn.execute("select * from recall.vector_index_ddl()")
            if "create index" in r[0]] == []                             # refresh: up to date
    assert {r["index_name"]: r["built_at"] for r in info(conn)} == built
