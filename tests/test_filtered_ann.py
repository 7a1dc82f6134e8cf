"""Filtered ANN stays correct: recall._vector_arm's top 10 against the exact top 10 (numpy),
for agents holding 0.01%, 1%, 10% and 50% of a 200k-chunk table, with the indexes in place,
and with the other filters (time window, session, metadata, kinds) on the largest agent.

The table is built once for the module: 200k chunks of 384 dimensions (pyrecall/bench/index_build.py:
clustered vectors, every agent's chunks spread over every cluster), written straight into
recall.chunks, then indexed the way `make index` does it (concurrently; HNSW m=8,
ef_construction=32 to keep the build near a minute on two cores). Timings go to stderr.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from conftest import drop_database, new_database
from pgvector.psycopg import register_vector

from pyrecall import _index

ROOT = Path(__file__).resolve().parent.parent
from pyrecall.bench import index_build as bench  # noqa: E402

CHUNKS = 200_000
FRACTIONS = [0.0001, 0.01, 0.1, 0.5]
QUERIES = 30
BIG = "frac-0.5"


def _say(line: str) -> None:
    sys.stderr.write(f"\n[filtered ann] {line}\n")


@pytest.fixture(scope="module")
def table(server_url, template_url):
    url = new_database(server_url)
    t0 = time.perf_counter()
    agents, vecs, sample = bench.synthetic(CHUNKS, FRACTIONS)
    # metadata on the big agent: 'common' on half its chunks, 'rare' on 1% (chunk_id = row + 1)
    def project(chunk_id: int, agent: str) -> str:
        if agent != BIG:
            return "{}"
        if chunk_id % 100 == 0:
            return '{"project": "rare"}'
        return '{"project": "common"}' if chunk_id % 2 == 1 else "{}"

    metadata = [project(i + 1, a) for i, a in enumerate(agents)]
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        bench.load(conn, agents, vecs, metadata=metadata, n_words=4)  # little text: GIN is slow to fill
        assert conn.execute("select min(chunk_id), max(chunk_id) from recall.chunks").fetchone() == (1, CHUNKS)
        t1 = time.perf_counter()
        _index.create_index(conn, "hnsw", {"m": 8, "ef_construction": 32})
        t2 = time.perf_counter()
        built = _index.index_info(conn)
        _say(f"{CHUNKS} chunks loaded in {t1 - t0:.1f} s; indexes built concurrently in {t2 - t1:.1f} s: "
             + ", ".join(f"{r['agent_id']} ({r['index_rows']} rows, {r['size']}, {r['build_seconds']:.1f} s)"
                         for r in built))
        meta = {r[0]: r[1:] for r in conn.execute(
            "select chunk_id, created_at, session_id, metadata ->> 'project' from recall.chunks "
            "where agent_id = %s", [BIG])}
        # the metadata stored as objects (a text in binary COPY once became a JSON string, and
        # the metadata cases below compared empty answers)
        assert 900 <= sum(p == "rare" for _, _, p in meta.values()) <= 1100          # 1%
        assert 45_000 <= sum(p == "common" for _, _, p in meta.values()) <= 55_000   # half
    yield url, agents, vecs, sample, meta
    drop_database(server_url, url)


@pytest.fixture(scope="module")
def conn(table):
    with psycopg.connect(table[0], autocommit=True) as c:
        register_vector(c)
        yield c


def arm(conn, agent, q, n=10, exclude=None, filter=None, kinds=None, since=None, until=None):
    return [r[0] for r in conn.execute(
        "select chunk_id from recall._vector_arm(%s, %s, %s, %s, %s, %s, %s, %s)",
        [agent, q, n, exclude, filter, kinds, since, until])]


def with_paths(conn, call):
    """call() under client_min_messages = debug1: its result, and the arm's path messages."""
    messages = []
    handler = lambda d: messages.append(d.message_primary)  # noqa: E731
    conn.add_notice_handler(handler)
    conn.execute("set client_min_messages = debug1")
    try:
        result = call()
    finally:
        conn.execute("reset client_min_messages")
        conn.remove_notice_handler(handler)
    return result, " | ".join(m for m in messages if m.startswith("recall._vector_arm"))


def path(conn, agent, q, **kw) -> str:
    return with_paths(conn, lambda: arm(conn, agent, q, **kw))[1]


@pytest.mark.parametrize("fraction, expected_path", [
    (0.0001, "path exact (20 rows)"),
    (0.01, "path ANN via"),
    (0.1, "path ANN via"),
    (0.5, "path ANN via"),
])
def test_recall_at_10_for_every_agent_size(table, conn, fraction, expected_path):
    _, agents, vecs, sample, _ = table
    agent = f"frac-{fraction:g}"
    rows = np.nonzero(agents == agent)[0]
    recalls, times = [], []
    for _ in range(QUERIES):
        q = sample()
        truth = bench.exact_top(vecs, rows, q, 10)
        t0 = time.perf_counter()
        got = arm(conn, agent, q)
        times.append(time.perf_counter() - t0)
        assert len(got) == 10
        recalls.append(len(set(got) & set(truth)) / 10)
    _say(f"{agent} ({len(rows)} chunks): recall@10 {np.mean(recalls):.4f} (min {min(recalls):.1f}), "
         f"p50 {np.median(times) * 1000:.1f} ms")
    assert expected_path in path(conn, agent, sample())
    if expected_path == "path ANN via":                  # ... and the plan uses the agent's index
        assert "Index Scan using chunks_embedding_a_" in plans(conn, agent, sample())
    assert np.mean(recalls) >= 0.99


def plans(conn, agent, q) -> str:
    notices = []
    handler = lambda d: notices.append(d.message_primary)  # noqa: E731
    conn.add_notice_handler(handler)
    try:
        conn.execute("load 'auto_explain'")
        for k, v in {"log_min_duration": "0", "log_nested_statements": "on", "log_level": "notice"}.items():
            conn.execute(f"set auto_explain.{k} = {v}")
        arm(conn, agent, q)
    finally:
        conn.execute("set auto_explain.log_min_duration = -1")
        conn.remove_notice_handler(handler)
    return "\n".join(notices)


def _truth(vecs, meta, q, keep, n=10):
    rows = np.array([cid - 1 for cid, m in meta.items() if keep(cid, *m)], dtype=np.int64)
    return bench.exact_top(vecs, rows, q, n) if len(rows) else []


@pytest.mark.parametrize("name, kw, keep, expected_path", [
    ("window, wide", {"since": "days:200"}, lambda cid, at, s, p, since: at >= since, "path ANN via"),
    ("window, narrow", {"since": "days:3"}, lambda cid, at, s, p, since: at >= since, "path exact (window"),
    ("exclude a session", {"exclude": f"{BIG}/s7"}, lambda cid, at, s, p, since: s != f"{BIG}/s7", "path ANN via"),
    ("metadata, half", {"filter": '{"project": "common"}'}, lambda cid, at, s, p, since: p == "common", "path ANN via"),
    ("metadata, 1%", {"filter": '{"project": "rare"}'}, lambda cid, at, s, p, since: p == "rare",
     "rows pass the conditions"),
    ("metadata, none", {"filter": '{"project": "nobody"}'}, lambda cid, at, s, p, since: False,
     "path exact (0 rows pass the conditions)"),
    ("metadata, 1% of a window", {"filter": '{"project": "rare"}', "since": "days:200"},
     lambda cid, at, s, p, since: p == "rare" and at >= since, "rows pass the conditions)"),
    ("kinds, all", {"kinds": ["message", "code"]}, lambda cid, at, s, p, since: True, "path ANN via"),
    ("kinds, none", {"kinds": ["code"]}, lambda cid, at, s, p, since: False,
     "path exact (0 rows pass the conditions)"),
])
def test_filters_inside_the_search_on_the_largest_agent(table, conn, name, kw, keep, expected_path):
    _, agents, vecs, sample, meta = table
    newest = max(m[0] for m in meta.values())
    since = None
    if "since" in kw:
        import datetime as dt
        since = newest - dt.timedelta(days=int(kw["since"].split(":")[1]))
        kw = {**kw, "since": since}
    recalls = []
    for _ in range(20):
        q = sample()
        truth = _truth(vecs, meta, q, lambda cid, at, s, p: keep(cid, at, s, p, since))
        got = arm(conn, BIG, q, **kw)
        assert len(got) == len(truth) == (0 if name.endswith(", none") else 10)
        recalls.append(len(set(got) & set(truth)) / len(truth) if truth else 1.0)
    _say(f"{BIG}, {name}: recall@10 {np.mean(recalls):.3f}")
    assert expected_path in path(conn, BIG, sample(), **kw)
    assert np.mean(recalls) >= 0.99


def scoped(conn, agent, q, n=10, project=None, filters=None) -> list[int]:
    return [r[0] for r in conn.execute(
        "select chunk_id from recall._vector_arm_scoped(%s, %s, %s, null, %s, null, null, null, null, %s)",
        [agent, q, n, filters, project])]


@pytest.mark.parametrize("project, filters, keep, expected_path", [
    # auto_context's Related for a project: its chunks and the memories of no project (none here)
    ("rare", None, lambda p: p == "rare", "rows pass the conditions"),
    ("nobody", None, lambda p: False, "path exact (0 rows pass the conditions)"),
    ("common", None, lambda p: p == "common", "path ANN via"),   # half the agent: no count, ANN
    # a filter as its disjuncts (hybrid_recall v4's any of several values)
    (None, ['{"project": "rare"}', '{"project": "nobody"}'], lambda p: p == "rare",
     "rows pass the conditions"),
])
def test_selective_metadata_ranked_exactly_over_the_rows_passing_it(table, conn, project, filters, keep,
                                                                   expected_path):
    """A project or filter that few of the agent's rows pass: those rows are found through the
    GIN index on metadata and ranked exactly (no ANN scan reading max_scan_tuples tuples to find
    few or none, then an exact scan of the whole agent); the answer is the exact top n."""
    _, agents, vecs, sample, meta = table
    for _ in range(10):
        q = sample()
        truth = _truth(vecs, meta, q, lambda cid, at, s, p: keep(p))
        got = scoped(conn, BIG, q, project=project, filters=filters)
        assert len(got) == len(truth)
        if "rows pass" in expected_path:
            assert set(got) == set(truth)
    assert expected_path in with_paths(conn, lambda: scoped(conn, BIG, sample(), project=project,
                                                           filters=filters))[1]


def test_ann_short_of_n_with_a_metadata_condition_ranks_exactly(table, conn):
    """An ANN scan that stops before n rows pass (n larger than max_scan_tuples lets through)
    under a metadata condition half the agent passes: the exact top n instead, read with the
    condition's values (the planner may use the GIN index)."""
    _, agents, vecs, sample, meta = table
    q = sample()
    n = 30_000                      # 'common' holds 50,000; ef_search stops at 1000, 20,000 tuples
    truth = _truth(vecs, meta, q, lambda cid, at, s, p: p == "common", n=n)
    got, paths = with_paths(conn, lambda: scoped(conn, BIG, q, n=n, filters=['{"project": "common"}']))
    assert "exact instead" in paths
    assert len(got) == n and len(set(got) & set(truth)) >= n - 2    # float rounding at the edge


# ------------------------------------------------------------------ topic mixtures, per-size width
# Vectors shaped like real embeddings (pyrecall.bench.latency: each chunk a random mix of two of
# 256 topic directions plus noise, queries away from every stored vector), at a size CI can
# afford: two agents with indexes of their own (5,000 and 2,500 chunks). On such data an HNSW
# graph needs a search width that grows with its size; recall.config ann_ef_search_by_rows
# gives it per index, and these tests set a deliberately small table to see it chosen.

from pyrecall.bench import latency  # noqa: E402

TOPIC_SIZES = {"topics-5000": 5000, "topics-2500": 2500}
DEFAULT_STEPS = '{"0": 200, "20000": 400, "100000": 600, "200000": 800, "500000": 1000}'


@pytest.fixture(scope="module")
def topics(server_url, template_url):
    url = new_database(server_url)
    synth = latency.Synth(5, "topic")
    planned = latency.plan_agents(synth, list(TOPIC_SIZES.values()))
    names, parts = [], []
    for a, name in zip(planned, TOPIC_SIZES, strict=True):
        t = a.topics[synth.rng.integers(0, len(a.topics), a.size)]
        parts.append(synth.chunk_vectors(t, t % latency.SUBTOPICS))
        names += [name] * a.size
    agents, vecs = np.array(names, dtype=object), np.concatenate(parts)
    queries = {name: [synth.query_vector(int(a.topics[synth.rng.integers(0, len(a.topics))]))
                      for _ in range(QUERIES)] for a, name in zip(planned, TOPIC_SIZES, strict=True)}
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        bench.load(conn, agents, vecs, n_words=4)
        conn.execute("select * from recall.create_vector_index('hnsw')").fetchall()
        assert {r["agent_id"] for r in _index.index_info(conn)} == set(TOPIC_SIZES)
    yield url, agents, vecs, queries
    drop_database(server_url, url)


DEFAULT_CONFIG = {"ann_min_ef_search": "200", "ann_far_distance": "0.75", "ann_far_ef_search": "1000",
                  "ann_ef_search_by_rows": DEFAULT_STEPS}


@pytest.fixture
def tconn(topics):
    with psycopg.connect(topics[0], autocommit=True) as c:
        register_vector(c)
        assert dict(c.execute("select key, value::text from recall.config where key = any(%s)",
                              [list(DEFAULT_CONFIG)]).fetchall()) == DEFAULT_CONFIG
        c.execute("update recall.config set value = '1' where key = 'ann_min_ef_search'")
        c.execute("update recall.config set value = 'null' where key = 'ann_far_distance'")  # one width a call
        c.execute("set hnsw.ef_search = 10")          # the caller's value is a floor too
        yield c
        for key, value in DEFAULT_CONFIG.items():
            c.execute("update recall.config set value = %s::jsonb where key = %s", [value, key])


def _topic_recall(topics, conn, agent) -> tuple[float, str]:
    _, agents, vecs, queries = topics
    rows = np.nonzero(agents == agent)[0]
    recalls = []
    for q in queries[agent]:
        got = arm(conn, agent, q)
        recalls.append(len(set(got) & set(bench.exact_top(vecs, rows, q, 10))) / 10)
    return float(np.mean(recalls)), path(conn, agent, queries[agent][0])


def test_topic_mixtures_search_width_by_index_size(topics, tconn):
    """The step table gives each index its width: 4,000 rows and more, 200; fewer, 10. The
    larger agent then finds the true top 10; the smaller, searched at 10, misses some."""
    tconn.execute("""update recall.config set value = '{"0": 10, "4000": 200}'
                     where key = 'ann_ef_search_by_rows'""")
    big, big_path = _topic_recall(topics, tconn, "topics-5000")
    small, small_path = _topic_recall(topics, tconn, "topics-2500")
    _say(f"topic mixtures: 5,000 chunks at width 200: recall@10 {big:.3f}; 2,500 at width 10: {small:.3f}")
    assert "(hnsw, 5000 rows), ef_search = 200" in big_path
    assert "(hnsw, 2500 rows), ef_search = 10" in small_path
    assert big >= 0.99
    assert small < big


def test_topic_mixtures_tuned_from_a_measured_curve(topics, tconn):
    """tune_vector_search measures the curve on the data (vector_search_curve) and writes
    the step table; with it, both agents find the true top 10."""
    curve = tconn.execute("select index_rows, ef_search, recall_at_10 from recall.vector_search_curve("
                          "'{10,20,40,100,200}', 20)").fetchall()
    assert sorted({r[0] for r in curve}) == [2500, 5000] and len(curve) == 10
    for rows in (2500, 5000):                         # recall grows with the width (the ends)
        r = {ef: rec for n, ef, rec in curve if n == rows}
        assert 0 <= r[10] <= r[200] <= 1 and r[200] >= 0.95
    done = tconn.execute("""select * from recall.tune_vector_search(
                              '{"ann_ef_search_by_rows": "measure", "target_recall": 0.995}')""").fetchall()
    steps = tconn.execute("select value from recall.config where key = 'ann_ef_search_by_rows'").fetchone()[0]
    _say(f"topic mixtures: measured step table {steps} ({done[0][0]})")
    assert set(steps) == {"0", "2500"} and 1 <= steps["0"] <= steps["2500"] <= 1000
    for agent in TOPIC_SIZES:
        recall, _ = _topic_recall(topics, tconn, agent)
        assert recall >= 0.99, (agent, recall, steps)


@pytest.mark.parametrize("value, message", [
    ('{"x": 5}', "ann_ef_search_by_rows must be"),
    ('{"0": 5000}', "ann_ef_search_by_rows must be"),
    ('{}', "ann_ef_search_by_rows must be"),
    ('"sometimes"', "ann_ef_search_by_rows must be"),
])
def test_tune_rejects_a_bad_step_table(tconn, value, message):
    before = tconn.execute("select value from recall.config where key = 'ann_ef_search_by_rows'").fetchone()
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        tconn.execute("select recall.tune_vector_search(jsonb_build_object('ann_ef_search_by_rows', %s::jsonb))",
                      [value])
    assert tconn.execute("select value from recall.config where key = 'ann_ef_search_by_rows'").fetchone() == before


def test_step_table_from_the_command_line(topics, tconn):
    from click.testing import CliRunner

    from pyrecall.cli import main

    result = CliRunner().invoke(main, ["dba", "tune", "--set", 'ann_ef_search_by_rows={"0": 30, "3000": 60}',
                                       "--dsn", topics[0]])
    assert result.exit_code == 0, result.output
    assert 'recall.config ann_ef_search_by_rows = {"0": 30, "3000": 60}' in result.output
    assert "(hnsw, 5000 rows), ef_search = 60" in path(tconn, "topics-5000", topics[3]["topics-5000"][0])
    bad = CliRunner().invoke(main, ["dba", "tune", "--set", "ann_ef_search_by_rows={0: 30}", "--dsn", topics[0]])
    assert bad.exit_code == 1 and "not a JSON object" in bad.output and "Traceback" not in bad.output


def test_far_queries_searched_again_wider(topics, tconn):
    """A query away from every topic the agent holds (a random direction: its nearest chunks
    are all at cosine ~0.2, a near tie) is searched once more at ann_far_ef_search when the
    ANN's best distance passes ann_far_distance, and then finds the true top 10 that the
    narrow search missed; a query near the agent's chunks is searched once."""
    _, agents, vecs, _ = topics
    agent = "topics-5000"
    rows = np.nonzero(agents == agent)[0]
    rng = np.random.default_rng(11)
    g = rng.standard_normal((QUERIES, latency.DIM)).astype(np.float32)
    far = list(g / np.linalg.norm(g, axis=1, keepdims=True))
    assert min(1 - float(np.max(vecs[rows] @ q)) for q in far) > 0.76     # all beyond the threshold

    def recall() -> float:
        return float(np.mean([len(set(arm(tconn, agent, q)) & set(bench.exact_top(vecs, rows, q, 10))) / 10
                              for q in far]))

    tconn.execute("""update recall.config set value = '{"0": 10}' where key = 'ann_ef_search_by_rows'""")
    narrow = recall()                                  # ann_far_distance null (tconn): one pass
    assert "again" not in path(tconn, agent, far[0])
    tconn.execute("update recall.config set value = '0.75' where key = 'ann_far_distance'")
    wide = recall()
    near = vecs[rows[0]] + 0.3 * g[0] / np.linalg.norm(g[0])           # by a chunk of its own
    far_path, near_path = path(tconn, agent, far[0]), path(tconn, agent, near)
    _say(f"far queries, 5,000 chunks: recall@10 {narrow:.3f} at width 10, {wide:.3f} with the second pass "
         f"({far_path.split(' | ')[-1]})")
    assert "ef_search = 10" in far_path and "> ann_far_distance 0.75: again at width 1000" in far_path
    assert "again" not in near_path
    assert wide >= 0.99 and narrow < wide
    tconn.execute("set hnsw.ef_search = 1000")        # searched that wide already: one pass
    assert "again" not in path(tconn, agent, far[0])
    tconn.execute("set hnsw.ef_search = 10")
