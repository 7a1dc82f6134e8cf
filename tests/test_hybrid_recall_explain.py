"""EXPLAIN: on a few thousand chunks, the vector arm uses the ANN index (or, for a small
agent, the agent B-tree) and the text arm the GIN index.

The plans of the statements inside the function come from auto_explain
(log_nested_statements, sent to the client as NOTICE).

Planner settings for small tables: the function picks the vector path itself (an exact scan
up to recall.config exact_scan_max_rows, lowered here to 100 so that the ANN path runs at this
size). On the ANN path, at a few thousand rows the planner rightly finds "agent B-tree + sort
600 rows" cheaper than the HNSW scan; `SET enable_sort = off` makes it cost the plan as it
would for a large agent, where the HNSW scan wins on its own. The text arm needs no setting.
"""

import re

import numpy as np
import pytest


@pytest.fixture
def loaded(conn):
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(20, 384))
    conn.execute("insert into recall.sessions (session_id, agent_id) "
                 "select 's' || g, 'agent-' || (g % 5) from generate_series(0, 49) g")
    # sessions of other agents, analysed: a sessions table of a size where a lookup by key
    # should use the index (50 rows fill one page, where a sequential scan is the right plan,
    # and the planner chose it whenever autovacuum had analysed the table during the test)
    conn.execute("insert into recall.sessions (session_id, agent_id) "
                 "select 'other' || g, 'agent-other' from generate_series(1, 20000) g")
    conn.execute("analyze recall.sessions")
    words = np.array("deploy docker nginx auth token migrate postgres index flaky retry cache queue".split())
    with conn.cursor().copy("copy recall.messages (session_id, role, content) from stdin") as cp:
        for i in range(3000):
            cp.write_row([f"s{i % 50}", "system", " ".join(rng.choice(words, 6)) + f" item{i}"])
    emb = (centers[rng.integers(0, 20, 3000)] + rng.normal(scale=0.3, size=(3000, 384))).astype(np.float32)
    ids = [r[0] for r in conn.execute("select chunk_id from recall.chunks order by chunk_id")]
    with conn.cursor() as cur:
        cur.executemany("update recall.chunks set embedding = %s where chunk_id = %s", list(zip(emb, ids, strict=True)))
    conn.execute("create index chunks_embedding_hnsw on recall.chunks using hnsw (embedding vector_cosine_ops)")
    conn.execute("analyze recall.chunks")
    return conn, emb


def nested_plans(conn, sql, params):
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    conn.execute("load 'auto_explain'")
    for k, v in {"log_min_duration": "0", "log_nested_statements": "on", "log_level": "notice",
                 "log_analyze": "off"}.items():
        conn.execute(f"set auto_explain.{k} = {v}")
    conn.execute(sql, params).fetchall()
    conn.execute("set auto_explain.log_min_duration = -1")
    return "\n".join(notices)


def test_large_agent_uses_hnsw_and_gin(loaded):
    conn, emb = loaded
    conn.execute("update recall.config set value = '100' where key = 'exact_scan_max_rows'")
    conn.execute("set enable_sort = off")
    plans = nested_plans(conn, "select * from recall.hybrid_recall('agent-1', 'item1971', %s)", [emb[0]])
    assert "Index Scan using chunks_embedding_hnsw" in plans
    assert "Bitmap Index Scan on chunks_agent_tsv_idx" in plans
    # no sequential scan of pyrecall's tables (v6's reader check reads the pg_roles catalog)
    assert not re.search(r"Seq Scan on (chunks|messages|sessions)\b", plans), plans


def test_small_agent_exact_scan_through_btree(loaded):
    conn, emb = loaded
    plans = nested_plans(conn, "select * from recall.hybrid_recall('agent-1', 'docker', %s)", [emb[0]])
    assert "chunks_embedding_hnsw" not in plans
    assert "chunks_agent_created_idx" in plans


def test_ann_path_returns_true_top_n_for_the_agent(loaded):
    conn, emb = loaded
    conn.execute("update recall.config set value = '100' where key = 'exact_scan_max_rows'")
    q = emb[5]
    # the reference is exact: "+ 0" keeps the planner off the HNSW index (which, chosen here for
    # the ORDER BY with the agent filter and no iterative scan, returned 7 rows, not 10)
    exact = [r[0] for r in conn.execute(
        "select chunk_id from recall.chunks where agent_id = 'agent-2' order by (embedding <=> %s) + 0 limit 10",
        [q])]
    assert len(exact) == 10
    got = [r[0] for r in conn.execute(
        "select chunk_id from recall._vector_arm('agent-2', %s, 10, null, null, null, null, null)", [q])]
    assert len(set(got) & set(exact)) >= 9
