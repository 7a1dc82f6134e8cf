"""Recall v4: v3's rows where nothing new is asked, memories ranked with the transcripts (as_of,
supersedes), turns_per_session, any-of and any-message filters, auto_context's Pinned section
and project-scoped Related."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
import pytest
from conftest import drop_database, new_database
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector

from pyrecall import _sync
from pyrecall._worker import Worker

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "cli"
SHOP = "/home/dev/shop"
AGENT = "claude-code"
DIM = 384


def call(conn, fn, **kw):
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    cur = conn.execute(f"select * from recall.{fn}({names})", kw)
    return [tuple(r) for r in cur.fetchall()], [d.name for d in cur.description]


# ---------------------------------------------------------------- v4 == v3 without memories

@pytest.fixture(scope="module")
def shop_url(server_url, template_url):
    """The CLI fixtures (two projects, branches, failures) and a chat in windows, embedded with
    the hash embedder; no memories. Read only."""
    url = new_database(server_url)
    paths = [FIXTURES / n for n in ("shop-main.jsonl", "shop-coupons.jsonl", "reports.jsonl")]
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        _sync.index(conn, paths, agent_id=AGENT)
        conn.execute("insert into recall.sessions (session_id, agent_id, title, project, metadata) "
                     "values ('chat', %s, 'ops chat', %s, '{\"chunking\": \"window\"}')", [AGENT, SHOP])
        t = datetime(2026, 3, 1, tzinfo=UTC)
        lines = [("alice", "the deploy of the coupon service failed again"),
                 ("bob", "migration 0042 locked the orders table"),
                 ("carol", "I rolled back the migration and retried the deploy"),
                 ("alice", "coupons work now, the docker image is fine"),
                 ("bob", "let us add a timeout to the migration"),
                 ("carol", "agreed, and a test for the coupon endpoint")]
        for i, (who, text) in enumerate(lines):
            conn.execute("insert into recall.messages (session_id, role, content, created_at, metadata) "
                         "values ('chat', 'user', %s, %s, %s)",
                         [text, t + timedelta(minutes=i), json.dumps({"speaker": who, "author": who})])
        Worker(conn, FakeEmbedder(), agent=AGENT).run()
        assert conn.execute("select count(*) from recall.chunks where embedding is null").fetchone()[0] == 0
    yield url
    drop_database(server_url, url)


@pytest.fixture
def shop(shop_url):
    with psycopg.connect(shop_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


QUERIES = ["migration failed", "coupon endpoint", "docker image deploy", "orders table timeout"]

HYBRID_CASES = [
    dict(),
    dict(k=3),
    dict(k=20, token_budget=300),
    dict(filter={"project": SHOP}),
    dict(filter={"chunking": "window"}),          # a key of the chunk, in no message
    dict(kinds=["tool", "turn_pair"]),
    dict(min_similarity=0.0),
    dict(exclude_session_id="chat"),
    dict(vector_weight=0.2, text_weight=0.8, recency_weight=0.1, half_life=timedelta(days=3)),
    dict(as_of=datetime(2026, 4, 1, tzinfo=UTC)),
]


@pytest.mark.parametrize("case", HYBRID_CASES, ids=[json.dumps(c, default=str) for c in HYBRID_CASES])
@pytest.mark.parametrize("with_vector", [False, True])
def test_hybrid_recall_v4_equals_v3_without_memories(shop, case, with_vector):
    fake = FakeEmbedder()
    seen = 0
    for q in QUERIES:
        args = dict(agent_id=AGENT, query_text=q, **case)
        if "filter" in args:
            args["filter"] = json.dumps(args["filter"])
        if with_vector:
            args["query_embedding"] = np.asarray(fake.vector(q))
        with shop.transaction():    # one now() for both
            v3, _ = call(shop, "hybrid_recall_v3", **args)
            v4, cols = call(shop, "hybrid_recall_v4", **args)
            stable, _ = call(shop, "hybrid_recall", **args)
            v5, _ = call(shop, "hybrid_recall_v5", **args)
            v7, _ = call(shop, "hybrid_recall_v7", **args)
        seen += len(v3)
        assert [r[:14] for r in v4] == v3
        # the stable name calls v13: v4's rows without a budget; with one, v7's fill with each
        # turn also valued by its own vector and a question kept with its answer (test_recall_v13.py)
        assert stable == v7 or "token_budget" in case
        assert v7 == v4 or "token_budget" in case
        assert v5 == v4 or "token_budget" in case
        assert cols[14:] == ["memory_id", "agent_id", "session_title", "role", "memory_kind"]
        assert all(r[14] is None and r[15] == AGENT for r in v4)
    assert seen > 0


SESSION_CASES = [dict(), dict(k=4, n_sessions=2), dict(token_budget=250, session_weight=0.8),
                 dict(filter={"project": SHOP}), dict(summary_weight=0.3)]


@pytest.mark.parametrize("case", SESSION_CASES, ids=[json.dumps(c) for c in SESSION_CASES])
def test_session_recall_v4_equals_v3_without_memories(shop, case):
    fake = FakeEmbedder()
    for q in QUERIES:
        args = dict(agent_id=AGENT, query_text=q, query_embedding=np.asarray(fake.vector(q)), **case)
        if "filter" in args:
            args["filter"] = json.dumps(args["filter"])
        with shop.transaction():
            v3, _ = call(shop, "session_recall_v3", **args)
            v4, _ = call(shop, "session_recall_v4", **args)
            stable, _ = call(shop, "session_recall", **args)
            v5, _ = call(shop, "session_recall_v5", **args)
            v9, _ = call(shop, "session_recall_v9", **args)
        assert v3, q
        assert [r[:16] for r in v4] == v3
        assert stable == v9 or "token_budget" in case   # (the stable name calls v13: v5's rows without a budget)
        assert v9 == v5 == v4 or "token_budget" in case


AUTO_CASES = [
    dict(),
    dict(task_text="why did the migration fail?"),
    dict(project=SHOP, all_projects=True),
    dict(project=SHOP, branch="main", all_projects=True),
    dict(project=SHOP, branch="feature/coupons", task_text="coupon endpoint", all_projects=True),
    dict(project=SHOP, token_budget=300, all_projects=True),
]


@pytest.mark.parametrize("case", AUTO_CASES, ids=[json.dumps(c) for c in AUTO_CASES])
def test_auto_context_v4_equals_v3_without_memories(shop, case):
    args = dict(agent_id=AGENT, **case)
    v4_only = args.pop("all_projects", None)
    with shop.transaction():
        v3, _ = call(shop, "auto_context_v3", **args)
        if v4_only is not None:
            args["all_projects"] = v4_only
        v4, cols = call(shop, "auto_context_v4", **args)
        stable, _ = call(shop, "auto_context", **args)
        v15, _ = call(shop, "auto_context_v15", **args)
    assert v3
    assert [r[:15] for r in v4] == v3
    # the stable name calls v15: v4's rows but for its Recent and Related sections, filled
    # turn by turn (tests/test_auto_context_v12.py, tests/test_recall_v13.py), Recent in reading
    # order (tests/test_auto_context_v14.py) and its turn pairs too (tests/test_auto_context_v15.py)
    assert stable == v15
    # (the running token totals, column 11, follow the Related section's)
    assert [r[:11] + r[12:] for r in stable if r[14] not in ("recent", "related")] == \
        [r[:11] + r[12:] for r in v4 if r[14] not in ("recent", "related")]
    assert cols[14] == "section" and cols[15:] == ["memory_id", "agent_id", "session_title", "role",
                                                   "memory_kind"]


def test_filter_finds_a_speaker_anywhere_in_a_window(shop):
    """The chat chunker's metadata.messages: v4 finds the windows where bob speaks at all; v3
    only those whose first message is his (none here)."""
    args = dict(agent_id=AGENT, query_text="migration timeout orders", k=50,
                filter=json.dumps({"author": "bob"}))
    v3, _ = call(shop, "hybrid_recall_v3", **args)
    v4, cols = call(shop, "hybrid_recall_v4", **args)
    assert v3 == []
    assert v4 and all(r[1] == "chat" and "bob: " in r[3] for r in v4)
    both, _ = call(shop, "hybrid_recall_v4", **{**args, "filter": json.dumps({"author": ["bob", "alice"]})})
    assert {r[0] for r in v4} <= {r[0] for r in both}


def test_rows_carry_session_title_and_roles(shop):
    rows, cols = call(shop, "hybrid_recall", agent_id=AGENT, query_text="migration coupon deploy", k=50)
    by = [dict(zip(cols, r, strict=True)) for r in rows]
    titles = dict(shop.execute("select session_id, title from recall.sessions").fetchall())
    assert all(r["session_title"] == titles[r["session_id"]] for r in by)
    roles = {r["kind"]: r["role"] for r in by}
    assert roles.get("turn_pair") == "user+assistant"
    assert roles.get("window") == "user"


# ---------------------------------------------------------------- filters (contract point 2)

def unit(*coords):
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(coords)] = coords
    return v / np.linalg.norm(v)


# hand-made chunk metadata of chat windows: top-level keys of the first message, and "messages"
METAS = [
    {"channel": "ops", "author": "alice", "messages": [{"author": "alice", "id": 1}, {"author": "bob", "id": 2}]},
    {"channel": "ops", "author": "carol", "messages": [{"author": "carol", "id": 3}, {"author": "dave", "id": 4}]},
    {"channel": "dev", "author": "bob", "messages": [{"author": "bob", "id": 5}, {"author": "erin", "id": 6}]},
    {"channel": "dev", "author": "erin"},                                   # no messages key
    {"channel": "ops", "author": "frank", "tags": ["a", "b"], "messages": [{"author": "frank", "id": 7}]},
]

FILTERS = [  # filter, the chunks (indexes of METAS) that match
    ({}, {0, 1, 2, 3, 4}),
    ({"author": "bob"}, {0, 2}),                       # bob speaks second in window 0
    ({"author": "dave"}, {1}),
    ({"author": ["dave", "erin"]}, {1, 2, 3}),         # any of
    ({"author": []}, set()),                           # any of none
    ({"channel": "ops", "author": "bob"}, {0}),
    ({"channel": ["ops", "dev"], "author": ["bob", "carol"]}, {0, 1, 2}),
    ({"id": 6}, {2}),
    ({"id": [2, 7]}, {0, 4}),
    ({"author": "bob", "id": 2}, {0}),                 # one message with both ...
    ({"author": "alice", "id": 2}, {0}),               # ... or different messages: each key on its own
    ({"tags": ["a"]}, set()),                          # an array is "any of": "a" is not a value of tags
    ({"tags": [["a"]]}, {4}),                          # ... the array ["a"] held by tags is
    ({"channel": "nowhere"}, set()),
]


def contract_match(meta: dict, flt: dict) -> bool:
    """Contract point 2, written plainly."""
    def contains(a, b):               # jsonb @> for the shapes used here
        if isinstance(b, dict):
            return isinstance(a, dict) and all(k in a and contains(a[k], v) for k, v in b.items())
        if isinstance(b, list):
            return isinstance(a, list) and all(any(contains(x, y) for x in a) for y in b)
        return a == b
    for key, value in flt.items():
        options = value if isinstance(value, list) else [value]
        if not any(contains(meta, {key: v}) or contains(meta.get("messages"), [{key: v}]) for v in options):
            return False
    return True


@pytest.fixture
def chat_chunks(conn):
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('w', 'a1')")
    conn.execute("insert into recall.messages (session_id, role, content) "
                 "select 'w', 'user', 'deploy note ' || i from generate_series(0, %s) i", [len(METAS) - 1])
    ids = [r[0] for r in conn.execute("select chunk_id from recall.chunks where session_id = 'w' "
                                      "order by first_seq").fetchall()]
    for i, (cid, meta) in enumerate(zip(ids, METAS, strict=True)):
        conn.execute("update recall.chunks set metadata = %s, embedding = %s where chunk_id = %s",
                     [json.dumps(meta), unit(1, 0.1 * i), cid])
    return ids


@pytest.mark.parametrize("flt, expected", FILTERS, ids=[json.dumps(f) for f, _ in FILTERS])
def test_filter_any_of_and_any_message(conn, chat_chunks, flt, expected):
    assert {i for i, m in enumerate(METAS) if contract_match(m, flt)} == expected   # the reference agrees
    want = {chat_chunks[i] for i in expected}
    for arm in (dict(query_text="deploy"), dict(query_embedding=unit(1))):
        rows, _ = call(conn, "hybrid_recall", agent_id="a1", k=100, filter=json.dumps(flt),
                       dedup_similarity=2.0, **arm)
        assert {r[0] for r in rows} == want, arm
    rows, _ = call(conn, "session_recall", agent_id="a1", query_text="deploy", k=100,
                   filter=json.dumps(flt), dedup_similarity=2.0)
    assert {r[0] for r in rows} == want


def test_v3_keeps_containment_filters(conn, chat_chunks):
    rows, _ = call(conn, "hybrid_recall_v3", agent_id="a1", query_text="deploy", k=100,
                   filter=json.dumps({"author": "bob"}))
    assert {r[0] for r in rows} == {chat_chunks[2]}       # the first message's author only


@pytest.mark.parametrize("flt, message", [
    ({"messages": [{"author": "bob"}]}, 'filter key "messages" is reserved'),
    ({f"k{i}": [1, 2, 3] for i in range(5)}, "filter has too many alternatives"),
    ([1], "filter must be a JSON object, got a JSON array"),
])
def test_bad_filters(conn, flt, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        call(conn, "hybrid_recall", agent_id="a1", query_text="x", filter=json.dumps(flt))


def test_filter_on_the_ann_path(conn):
    """The ANN statement of _vector_arm_v4 (a whole-table index, an agent past
    exact_scan_max_rows) applies the filter and the validity of memories inside the search."""
    conn.execute("update recall.config set value = '20' where key = 'exact_scan_max_rows'")
    # more than agent_index_min_rows pass the filter (20 of 200), else they are ranked exactly
    # (test_filtered_ann.py: the selective metadata path)
    conn.execute("update recall.config set value = '5' where key = 'agent_index_min_rows'")
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('big', 'a1')")
    rng = np.random.default_rng(3)
    conn.execute("insert into recall.messages (session_id, role, content, metadata) "
                 "select 'big', 'user', 'note ' || i, jsonb_build_object('author', "
                 "case when i % 10 = 0 then 'bob' else 'x' end) from generate_series(1, 200) i")
    for (cid,) in conn.execute("select chunk_id from recall.chunks where session_id = 'big'").fetchall():
        conn.execute("update recall.chunks set embedding = %s where chunk_id = %s",
                     [rng.normal(size=DIM).astype(np.float32), cid])
    q = rng.normal(size=DIM).astype(np.float32)
    old = conn.execute("select recall.remember('a1', 'old fact', embedding => %s)", [q]).fetchone()[0]
    new = conn.execute("select recall.remember('a1', 'new fact', supersedes => %s, embedding => %s)",
                       [old, q * 0.9 + 0.1]).fetchone()[0]
    conn.execute("select recall.create_vector_index('hnsw', scope => 'table')")
    debug = []
    conn.add_notice_handler(lambda d: debug.append(d.message_primary))
    conn.execute("set client_min_messages = debug1")
    rows, _ = call(conn, "hybrid_recall", agent_id="a1", query_embedding=q, k=5, candidates=5,
                   filter=json.dumps({"author": "bob"}))
    conn.execute("reset client_min_messages")
    arm = [d for d in debug if d.startswith("recall._vector_arm_scoped")]
    assert any("path ANN" in d for d in arm) and not any("exact instead" in d for d in arm), arm
    authors = {r[0]: r[12].get("author") for r in rows}
    assert len(rows) == 5 and set(authors.values()) == {"bob"}
    rows, _ = call(conn, "hybrid_recall", agent_id="a1", query_embedding=q, k=3, kinds=["memory"])
    assert [r[0] for r in rows] == [new]


# ---------------------------------------------------------------- turns_per_session

def test_turns_per_session(conn):
    for s in ("s1", "s2", "s3"):
        conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, 'a1')", [s])
        for i in range(4):
            conn.execute("insert into recall.messages (session_id, role, content, importance) "
                         "values (%s, 'system', %s, %s)", [s, f"deploy step {s} {i}", 0.1 * i])
    m1 = conn.execute("select recall.remember('a1', 'deploy rule one')").fetchone()[0]
    m2 = conn.execute("select recall.remember('a1', 'deploy rule two')").fetchone()[0]
    for fn in ("hybrid_recall", "session_recall"):
        full, cols = call(conn, fn, agent_id="a1", query_text="deploy", k=50)
        capped, _ = call(conn, fn, agent_id="a1", query_text="deploy", k=50, turns_per_session=2)
        sid = cols.index("session_id")
        per = {s: [r[0] for r in capped if r[sid] == s] for s in ("s1", "s2", "s3")}
        assert all(len(v) == 2 for v in per.values()), per
        # each session's best two of the uncapped order; memories are not capped
        for s, got in per.items():
            assert got == [r[0] for r in full if r[sid] == s][:2]
        assert {m1, m2} <= {r[0] for r in capped}
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="turns_per_session must be at least 1"):
            call(conn, fn, agent_id="a1", query_text="deploy", turns_per_session=0)


# ---------------------------------------------------------------- memories in recall

def test_memory_ranks_with_transcripts_and_superseded_ones_never_show(conn):
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s', 'a1')")
    conn.execute("insert into recall.messages (session_id, role, content) values "
                 "('s', 'user', 'which port does the api use?'), ('s', 'assistant', 'the api listens on 8080')")
    old = conn.execute("select recall.remember('a1', 'the api port is 8080', kind => 'fact')").fetchone()[0]
    new = conn.execute("select recall.remember('a1', 'the api port is 9090', kind => 'fact', "
                       "supersedes => %s)", [old]).fetchone()[0]
    for fn, extra in (("hybrid_recall", {}), ("session_recall", {}),
                      ("auto_context", {"task_text": "api port"})):
        q = {} if fn == "auto_context" else {"query_text": "api port"}
        rows, cols = call(conn, fn, agent_id="a1", **q, **extra)
        got = [r[cols.index("memory_id")] for r in rows]
        assert new in got and old not in got, fn
        assert any(x is None for x in got), fn        # the transcript too


def test_session_recall_memory_skips_the_session_stage(conn):
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s', 'a1')")
    conn.execute("insert into recall.messages (session_id, role, content) values ('s', 'user', 'kafka topic')")
    mid = conn.execute("select recall.remember('a1', 'kafka topic retention is 7 days')").fetchone()[0]
    rows, cols = call(conn, "session_recall", agent_id="a1", query_text="kafka topic retention", n_sessions=1)
    by = {r[0]: dict(zip(cols, r, strict=True)) for r in rows}
    assert by[mid]["session_rank"] is None and by[mid]["session_score"] is None
    hybrid, _ = call(conn, "hybrid_recall", agent_id="a1", query_text="kafka topic retention")
    assert by[mid]["score"] == pytest.approx(next(r[5] for r in hybrid if r[0] == mid))


# ---------------------------------------------------------------- auto_context: Pinned, all_projects

@pytest.fixture
def projects(conn):
    t = datetime.now(UTC) - timedelta(days=1)
    for sid, project in (("a1", "alpha"), ("b1", "beta")):
        conn.execute("insert into recall.sessions (session_id, agent_id, project) values (%s, 'ag', %s)",
                     [sid, project])
        conn.execute("insert into recall.messages (session_id, role, content, created_at) values "
                     "(%s, 'user', %s, %s), (%s, 'assistant', %s, %s)",
                     [sid, f"how do we cache sessions in {project}?", t,
                      sid, f"{project} caches sessions in redis", t + timedelta(seconds=1)])


def auto(conn, **kw):
    rows, cols = call(conn, "auto_context", agent_id="ag", **kw)
    return [dict(zip(cols, r, strict=True)) for r in rows]


def test_pinned_section_first_within_budget(conn, projects):
    remember = lambda text, **kw: conn.execute(  # noqa: E731
        "select recall.remember('ag', %s, project => %s, importance => %s, pinned => %s)",
        [text, kw.get("project"), kw.get("importance", 0.7), kw.get("pinned", True)]).fetchone()[0]
    everywhere = remember("Always write tests first " + "x" * 80, importance=0.9)     # ~27 tokens
    alpha = remember("alpha deploys on Fridays only", project="alpha", importance=0.8)
    beta = remember("beta is frozen", project="beta")
    unpinned = remember("alpha uses redis 7", project="alpha", pinned=False)
    rows = auto(conn, project="alpha", task_text="cache sessions redis", token_budget=400)
    pinned = [r["memory_id"] for r in rows if r["section"] == "pinned"]
    assert pinned == [everywhere, alpha]
    assert [r["section"] for r in rows][:2] == ["pinned", "pinned"]
    assert beta not in {r["memory_id"] for r in rows}
    assert rows[-1]["cumulative_tokens"] <= 400
    related = [r for r in rows if r["section"] == "related"]
    assert unpinned in {r["memory_id"] for r in related}
    # a budget that holds the first pinned memory only: it alone, and the others share nothing
    first = next(r for r in rows if r["memory_id"] == everywhere)["n_tokens"]
    small = auto(conn, project="alpha", task_text="cache sessions redis", token_budget=first)
    assert [(r["section"], r["memory_id"]) for r in small] == [("pinned", everywhere)]
    # without a project: every pinned memory
    assert {r["memory_id"] for r in auto(conn, token_budget=400) if r["section"] == "pinned"} == {
        everywhere, alpha, beta}
    # superseded: the replacement is pinned in its place; as_of before: the old one
    before = conn.execute("select now()").fetchone()[0]
    newer = conn.execute("select recall.remember('ag', 'alpha deploys on Thursdays', supersedes => %s)",
                         [alpha]).fetchone()[0]
    now_pinned = [r["memory_id"] for r in auto(conn, project="alpha") if r["section"] == "pinned"]
    assert newer in now_pinned and alpha not in now_pinned
    then = [r["memory_id"] for r in auto(conn, project="alpha", as_of=before) if r["section"] == "pinned"]
    assert alpha in then and newer not in then


def test_related_in_the_project_unless_all_projects(conn, projects):
    mem_none = conn.execute("select recall.remember('ag', 'sessions caching: keep TTL short')").fetchone()[0]
    mem_beta = conn.execute("select recall.remember('ag', 'beta sessions cache in memcached', "
                            "project => 'beta')").fetchone()[0]
    def related(**kw):
        return {(r["session_id"], r["memory_id"]) for r in auto(conn, task_text="cache sessions", **kw)
                if r["section"] == "related"}
    # (alpha's own session is in Recent already)
    scoped = related(project="alpha")
    assert {s for s, _ in scoped} == {"memories:ag"}
    assert {m for _, m in scoped if m} == {mem_none}
    wide = related(project="alpha", all_projects=True)
    assert {s for s, _ in wide} == {"b1", "memories:ag"}
    assert {m for _, m in wide if m} == {mem_none, mem_beta}
    # without a project: agent-wide, as v3
    assert {s for s, _ in related()} == {"memories:ag"} | ({"a1", "b1"} - {
        r["session_id"] for r in auto(conn, task_text="cache sessions") if r["section"] == "recent"})
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="all_projects must be true or false"):
        auto(conn, project="alpha", all_projects=None)


def test_latest_session_is_never_the_memories_session(conn):
    """Without a task, Related is about the latest work session (here one without messages,
    older than the memories session): never the memories session, whose memories would then be
    left out of Related."""
    conn.execute("insert into recall.sessions (session_id, agent_id, title, started_at) "
                 "values ('work', 'solo', 'redis cache eviction', now() - interval '1 day')")
    mid = conn.execute("select recall.remember('solo', 'redis cache eviction uses allkeys-lru')").fetchone()[0]
    rows, cols = call(conn, "auto_context", agent_id="solo")
    assert [(r[cols.index("section")], r[cols.index("memory_id")]) for r in rows] == [("related", mid)]


def test_pairs_of_v4_arguments_do_not_interfere(conn):
    """as_of, turns_per_session and a filter together (a smoke test of the argument plumbing)."""
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s', 'a1')")
    conn.execute("insert into recall.messages (session_id, role, content, metadata) values "
                 "('s', 'user', 'deploy one', '{\"author\": \"x\"}'), ('s', 'user', 'deploy two', '{\"author\": \"y\"}')")
    for flt, tps in itertools.product([None, json.dumps({"author": ["x", "y"]})], [None, 1]):
        rows, _ = call(conn, "hybrid_recall", agent_id="a1", query_text="deploy", filter=flt,
                       turns_per_session=tps, as_of=datetime.now(UTC) + timedelta(days=1))
        assert len(rows) == (1 if tps else 2)
