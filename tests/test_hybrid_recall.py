"""recall.hybrid_recall against the real database, with expectations computed by hand.

The vectors here are chosen by the tests (this is about SQL logic, not embedding quality).
"""

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest

AS_OF = datetime(2026, 6, 1, tzinfo=UTC)
DIM = 384


def unit(*coords, dim=DIM):
    """A unit vector from its first coordinates (the rest zero)."""
    v = np.zeros(dim, dtype=np.float32)
    v[: len(coords)] = coords
    return v / np.linalg.norm(v)


def add_chunk(conn, text, *, agent="a1", session=None, vec=None, age_days=1.0, importance=0.5,
              metadata="{}", role="system"):
    """One message -> one 'message' chunk; then set its embedding, time and importance."""
    session = session or f"{agent}-s"
    conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, %s) "
                 "on conflict do nothing", [session, agent])
    created = AS_OF - timedelta(days=age_days)
    conn.execute("insert into recall.messages (session_id, role, content, created_at, importance, metadata) "
                 "values (%s, %s, %s, %s, %s, %s)", [session, role, text, created, importance, metadata])
    cid = conn.execute("select max(chunk_id) from recall.chunks where session_id = %s", [session]).fetchone()[0]
    if vec is not None:
        conn.execute("update recall.chunks set embedding = %s where chunk_id = %s", [vec, cid])
    return cid


def recall(conn, fn="hybrid_recall", **kw):
    kw.setdefault("agent_id", "a1")
    kw.setdefault("as_of", AS_OF)
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    return conn.execute(f"select * from recall.{fn}({names})", kw).fetchall()


def ids(rows):
    return [r[0] for r in rows]


ONLY_VECTOR = dict(vector_weight=1, text_weight=0, recency_weight=0, importance_weight=0)
ONLY_TEXT = dict(vector_weight=0, text_weight=1, recency_weight=0, importance_weight=0)


def test_pure_vector_ranking_is_brute_force_cosine_order(conn):
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(60, DIM)).astype(np.float32)
    cids = [add_chunk(conn, f"note number {i}", vec=v) for i, v in enumerate(vecs)]
    q = rng.normal(size=DIM).astype(np.float32)
    sims = vecs @ q / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(q))
    expected = [cids[i] for i in np.argsort(-sims)[:20]]
    rows = recall(conn, query_embedding=q, k=20, **ONLY_VECTOR)
    assert ids(rows) == expected
    assert [r[6] for r in rows] == pytest.approx(sorted(sims, reverse=True)[:20], abs=1e-5)
    assert [r[5] for r in rows] == pytest.approx([r[6] for r in rows])


def test_v2_pure_text_ranking_is_ts_rank_cd(conn):
    a = add_chunk(conn, "docker docker docker compose")
    b = add_chunk(conn, "docker once, and then a long story about something else entirely")
    add_chunk(conn, "nothing relevant here")
    rows = recall(conn, "hybrid_recall_v2", query_text="docker", **ONLY_TEXT)
    assert ids(rows) == [a, b]
    ranks = conn.execute(
        "select ts_rank_cd(tsv, to_tsquery('english', 'docker'), 1) from recall.chunks "
        "where chunk_id = any(%s) order by chunk_id", [[a, b]]).fetchall()
    assert [r[7] for r in rows] == pytest.approx([r / (r + 0.1) for (r,) in ranks])


def lengths(conn, agent="a1"):
    """length(tsv) of each chunk of an agent, and their mean (the text plan's avg_len)."""
    rows = conn.execute("select chunk_id, length(tsv) from recall.chunks where agent_id = %s", [agent]).fetchall()
    return dict(rows), sum(n for _, n in rows) / len(rows)


def test_pure_text_ranking_is_bm25_with_idf(conn):
    """v3's text_rank by hand: sum of the held words' idf over all words' idf, times
    1.6 / (1.6 + 0.6 * length / mean length); idf = ln(1 + (N - df + 0.5) / (df + 0.5))."""
    a = add_chunk(conn, "docker docker docker compose")
    b = add_chunk(conn, "docker once, and then a long story about something else entirely")
    add_chunk(conn, "nothing relevant here")
    length, mean = lengths(conn)
    norm = {cid: 1.6 / (1.6 + 0.6 * n / mean) for cid, n in length.items()}

    rows = recall(conn, query_text="docker", **ONLY_TEXT)     # one word: its idf cancels out
    assert ids(rows) == [a, b]                                 # b is longer
    assert [r[7] for r in rows] == pytest.approx([norm[a], norm[b]])

    idf_docker, idf_compose = math.log(1 + 1.5 / 2.5), math.log(1 + 2.5 / 1.5)   # N = 3; df 2 and 1
    rows = recall(conn, query_text="docker compose", **ONLY_TEXT)
    assert ids(rows) == [a, b]
    assert [r[7] for r in rows] == pytest.approx(
        [norm[a], idf_docker / (idf_docker + idf_compose) * norm[b]])
    assert all(0 < r[7] <= 1 for r in rows)


def test_a_rare_word_outweighs_a_common_one(conn):
    """ts_rank_cd (v2) has no IDF: the chunk repeating the commoner word wins there. BM25 (v3)
    ranks the chunk holding the rare word first."""
    for i in range(28):    # 'deploy' in 11 of 31 chunks (35%: kept in the query), 'kubernetes' in 2
        add_chunk(conn, ("deploy " if i < 10 else "") + f"routine note {i}", age_days=i + 2)
    common = add_chunk(conn, "deploy deploy deploy the service", age_days=1)
    rare = add_chunk(conn, "kubernetes cluster upgraded", age_days=1)
    add_chunk(conn, "kubernetes again, in a longer note about other things entirely", age_days=40,
              session="other")
    assert conn.execute("select lexemes from recall._text_plan_v3('a1', 'deploy kubernetes')"
                        ).fetchone()[0] == ["deploy", "kubernet"]
    v3 = ids(recall(conn, query_text="deploy kubernetes", k=40, **ONLY_TEXT))
    v2 = ids(recall(conn, "hybrid_recall_v2", query_text="deploy kubernetes", k=40, **ONLY_TEXT))
    assert v3[0] == rare and v3.index(rare) < v3.index(common)
    assert v2[0] == common and v2.index(common) < v2.index(rare)
    assert len(v3) == len(v2) == 13     # the same 13 matches, in another order


def test_vector_candidates_get_their_text_rank_too(conn):
    """A chunk that only the vector arm brings (its word is too common to be matched) is still
    scored with every word of the query."""
    for i in range(30):    # 'painting' in 10 of 30 chunks, 'guitar' in 3
        add_chunk(conn, ("guitar " if i < 3 else "") + ("painting " if i % 3 == 0 else "") + f"note {i}",
                  age_days=i, vec=unit(0, 1))
    target = add_chunk(conn, "painting by the lake", age_days=0.5, vec=unit(1, 0.01))
    set_config(conn, "text_match_max_rows", "5")          # 'painting' is not matched, only ranked
    assert text_plan(conn, "guitar painting")[1] == "'guitar'"
    rows = recall(conn, query_text="guitar painting", query_embedding=unit(1, 0), k=40,
                  vector_weight=1, text_weight=1, recency_weight=0, importance_weight=0)
    by_id = {r[0]: r for r in rows}
    assert rows[0][0] == target and by_id[target][7] > 0
    assert all(r[7] == 0 for r in rows if "guitar" not in r[3] and "painting" not in r[3])


def test_text_query_matches_any_word_unless_websearch_operators(conn):
    a = add_chunk(conn, "the postgres migration failed")
    b = add_chunk(conn, "the docker build failed")
    assert set(ids(recall(conn, query_text="postgres docker", **ONLY_TEXT))) == {a, b}
    assert ids(recall(conn, query_text='"docker build"', **ONLY_TEXT)) == [b]
    assert ids(recall(conn, query_text="failed -docker", **ONLY_TEXT)) == [a]


def test_recency_orders_identical_chunks_by_age(conn):
    old = add_chunk(conn, "deploy the service", age_days=60, session="s-old")
    new = add_chunk(conn, "deploy the service", age_days=1, session="s-new")
    weights = dict(vector_weight=0, text_weight=0, recency_weight=1, importance_weight=0)
    rows = recall(conn, query_text="deploy", dedup_similarity=1.1, **weights)
    # identical text: the older one is a duplicate of the newer, higher-scored one
    assert ids(rows) == [new] and old not in ids(rows)
    assert rows[0][8] == pytest.approx(0.5 ** (1 / 30))


def test_recency_formula_and_half_life(conn):
    a = add_chunk(conn, "deploy alpha", age_days=10)
    b = add_chunk(conn, "deploy beta", age_days=40)
    rows = recall(conn, query_text="deploy", half_life=timedelta(days=20),
                  vector_weight=0, text_weight=0, recency_weight=1, importance_weight=0)
    assert ids(rows) == [a, b]
    assert [r[8] for r in rows] == pytest.approx([0.5 ** 0.5, 0.5 ** 2])


def test_future_chunk_has_recency_one(conn):
    add_chunk(conn, "deploy later", age_days=-5)
    assert recall(conn, query_text="deploy")[0][8] == 1.0


def test_importance(conn):
    low = add_chunk(conn, "deploy alpha", importance=0.2)
    high = add_chunk(conn, "deploy beta", importance=0.9)
    rows = recall(conn, query_text="deploy", vector_weight=0, text_weight=0, recency_weight=0, importance_weight=1)
    assert ids(rows) == [high, low]
    assert [r[9] for r in rows] == pytest.approx([0.9, 0.2])


def test_score_is_the_weighted_sum(conn):
    add_chunk(conn, "docker deploy", vec=unit(1, 1), age_days=15, importance=0.8)
    w = dict(vector_weight=0.4, text_weight=0.3, recency_weight=0.2, importance_weight=0.1)
    (row,) = recall(conn, query_text="docker", query_embedding=unit(1, 0), **w)
    sim, tr, rec, imp = row[6], row[7], row[8], row[9]
    assert sim == pytest.approx(math.sqrt(0.5), abs=1e-6)
    assert rec == pytest.approx(0.5 ** 0.5)
    assert row[5] == pytest.approx(0.4 * sim + 0.3 * tr + 0.2 * rec + 0.1 * imp)


@pytest.mark.parametrize("arg,value,expected_texts", [
    ("filter", '{"project": "api"}', {"deploy api"}),
    ("filter", '{"project": "web"}', {"deploy web"}),
    ("filter", '{"nope": 1}', set()),
    ("kinds", ["message"], {"deploy api", "deploy web", "deploy old"}),
    ("kinds", ["turn_pair"], set()),
    ("since", AS_OF - timedelta(days=5), {"deploy api", "deploy web"}),
    ("until", AS_OF - timedelta(days=5), {"deploy old"}),
    ("exclude_session_id", "a1-web", {"deploy api", "deploy old"}),
])
def test_filters(conn, arg, value, expected_texts):
    add_chunk(conn, "deploy api", session="a1-api", metadata='{"project": "api"}', vec=unit(1))
    add_chunk(conn, "deploy web", session="a1-web", metadata='{"project": "web"}', vec=unit(0, 1))
    add_chunk(conn, "deploy old", session="a1-old", age_days=30, vec=unit(1, 0, 1))
    for query in (dict(query_text="deploy"), dict(query_embedding=unit(1, 1, 1))):
        rows = recall(conn, **query, **{arg: value})
        assert {r[3].removeprefix("System: ") for r in rows} == expected_texts, query


def test_session_project_filter(conn):
    conn.execute("insert into recall.sessions (session_id, agent_id, project, branch) values "
                 "('p1', 'a1', 'acme', 'main'), ('p2', 'a1', 'other', 'main')")
    for s in ("p1", "p2"):
        conn.execute("insert into recall.messages (session_id, role, content) values (%s, 'user', 'deploy it')", [s])
    rows = recall(conn, query_text="deploy", filter='{"project": "acme", "branch": "main"}')
    assert [r[1] for r in rows] == ["p1"]


def test_min_similarity(conn):
    near = add_chunk(conn, "a", vec=unit(1, 0.1))
    add_chunk(conn, "b", vec=unit(0.2, 1))
    rows = recall(conn, query_embedding=unit(1), min_similarity=0.9)
    assert ids(rows) == [near]


@pytest.mark.parametrize("budget,expected_count", [
    (None, 3), (0, 0), (9, 0), (10, 1), (29, 1), (30, 2), (59, 2), (60, 3), (10_000, 3)])
def test_token_budget_cut(conn, budget, expected_count):
    """v1-v4's fill (v4 here; the stable name's v5 fill: tests/test_recall_v5.py)."""
    # n_tokens = ceil(chars / 4): 40, 80 and 120 characters -> 10, 20, 30 tokens
    for i, (n, imp) in enumerate([(40, 0.9), (80, 0.6), (120, 0.3)]):
        text = f"deploy{i} " + "x" * (n - len(f"System: deploy{i} "))
        add_chunk(conn, text, importance=imp)
    rows = recall(conn, "hybrid_recall_v4", query_text="deploy0 deploy1 deploy2", token_budget=budget,
                  vector_weight=0, text_weight=0, recency_weight=0, importance_weight=1)
    assert len(rows) == expected_count
    assert [r[10] for r in rows] == [10, 20, 30][:expected_count]
    assert [r[11] for r in rows] == [10, 30, 60][:expected_count]


def test_first_row_larger_than_budget_gives_no_rows_even_if_smaller_ones_follow(conn):
    """v1-v4; v5 trims the first row and goes on; v7 (the stable name) skips the turn that does
    not fit and takes the next that does, trimming only when none fits (tests/test_recall_v7.py)."""
    add_chunk(conn, "deploy " + "y" * 400, importance=1.0)
    add_chunk(conn, "deploy small", importance=0.0)
    args = dict(query_text="deploy", token_budget=50,
                vector_weight=0, text_weight=0, recency_weight=0, importance_weight=1)
    assert recall(conn, "hybrid_recall_v4", **args) == []
    rows = recall(conn, "hybrid_recall_v5", **args)
    # one 400-character word: cut inside it (not back to "deploy"), the budget's share of it
    assert len(rows) == 1 and rows[0][3].startswith("System: deploy yyy")
    assert rows[0][10] == rows[0][11] == 50 and rows[0][12]["trimmed_from_tokens"] > 50
    rows = recall(conn, **args)
    assert [r[3] for r in rows] == ["System: deploy small"] and "trimmed_from_tokens" not in rows[0][12]
    # with room for no turn at all, the best one trimmed
    rows = recall(conn, **{**args, "token_budget": 5})
    assert len(rows) == 1 and rows[0][3] == "System: deploy" and rows[0][10] <= 5


def test_keyword_fallback_without_any_embedding(conn):
    a = add_chunk(conn, "we configured nginx as a reverse proxy")
    add_chunk(conn, "lunch was good")
    rows = recall(conn, query_text="nginx proxy")
    assert ids(rows) == [a] and rows[0][6] is None


def test_chunk_without_embedding_found_by_text_beside_vector_hits(conn):
    a = add_chunk(conn, "kubernetes rollout", vec=None)
    b = add_chunk(conn, "something else", vec=unit(1))
    rows = recall(conn, query_text="kubernetes", query_embedding=unit(1))
    assert set(ids(rows)) == {a, b}


def test_duplicates_removed_higher_score_stays(conn):
    a = add_chunk(conn, "deploy with compose", session="x1", vec=unit(1, 0.01), importance=0.9)
    add_chunk(conn, "deploy with compose", session="x2", vec=unit(0, 1), importance=0.1)    # same text
    add_chunk(conn, "deploy via compose", session="x3", vec=unit(1, 0.011), importance=0.2)  # cosine ~1
    d = add_chunk(conn, "deploy elsewhere", session="x4", vec=unit(0, 0, 1), importance=0.5)
    rows = recall(conn, query_text="deploy", query_embedding=unit(1))
    assert ids(rows) == [a, d]
    assert len(recall(conn, query_text="deploy", query_embedding=unit(1), dedup_similarity=1.01)) == 3


def test_other_agents_identical_chunk_never_appears(conn):
    mine = add_chunk(conn, "secret deploy key rotation", agent="a1", vec=unit(1))
    add_chunk(conn, "secret deploy key rotation", agent="a2", vec=unit(1))
    add_chunk(conn, "secret deploy key rotation v2", agent="a2", vec=unit(1, 0.001))
    rows = recall(conn, query_text="secret deploy", query_embedding=unit(1), k=50)
    assert ids(rows) == [mine]


def test_ties_newer_first_then_chunk_id(conn):
    a = add_chunk(conn, "deploy one", age_days=2, session="t1")
    b = add_chunk(conn, "deploy two", age_days=1, session="t2")
    c = add_chunk(conn, "deploy six", age_days=1, session="t3")
    rows = recall(conn, query_text="deploy", vector_weight=0, text_weight=0, recency_weight=0, importance_weight=1)
    assert ids(rows) == [c, b, a]


def test_k_limits_rows(conn):
    for i in range(15):
        add_chunk(conn, f"deploy {i}", session=f"k{i}")
    assert len(recall(conn, query_text="deploy", k=4)) == 4


def test_stable_name_is_the_newest_version_and_old_versions_stay_callable(conn):
    for i in range(5):
        add_chunk(conn, f"deploy {i} times", vec=unit(*([0] * i + [1])), session=f"v{i}")
    args = dict(agent_id="a1", query_text="deploy", query_embedding=unit(1, 2), as_of=AS_OF)
    names = ", ".join(f"{k} => %({k})s" for k in args)
    got = {v: conn.execute(f"select * from recall.hybrid_recall{v}({names})", args).fetchall()
           for v in ("", "_v1", "_v2", "_v3", "_v4")}
    assert got[""] == got["_v4"] and len(got[""]) == 5
    # v4 adds columns after v3's; without memories its rows are v3's
    assert [row[:14] for row in got["_v4"]] == got["_v3"]
    assert all(len(rows) == 5 for rows in got.values())


BAD = [
    (dict(agent_id=None, query_text="x"), "agent_id is required"),
    (dict(query_text=None), "nothing to search for"),
    (dict(query_text="   "), "nothing to search for"),
    (dict(query_embedding=unit(1, dim=3)), "query_embedding has 3 dimensions; this database stores 384"),
    (dict(query_embedding=np.zeros(DIM, dtype=np.float32)), "query_embedding is all zeros"),
    (dict(query_text="x", k=0), "k must be between 1 and 1000, got 0"),
    (dict(query_text="x", k=-1), "k must be between 1 and 1000, got -1"),
    (dict(query_text="x", k=10**6), "k must be between 1 and 1000, got 1000000"),
    (dict(query_text="x", token_budget=-1), "token_budget must be >= 0, got -1"),
    (dict(query_text="x", vector_weight=-0.1), "weights must be finite and >= 0"),
    (dict(query_text="x", text_weight=float("nan")), "weights must be finite and >= 0"),
    (dict(query_text="x", half_life=timedelta(0)), "half_life must be a positive interval"),
    (dict(query_text="x", half_life=timedelta(days=-1)), "half_life must be a positive interval"),
    (dict(query_text="x", candidates=0), "candidates must be between 1 and 10000"),
    (dict(query_text="x", min_similarity=2.0), "min_similarity must be between -1 and 1"),
    (dict(query_text="x", filter="[1]"), "filter must be a JSON object, got a JSON array"),
    (dict(query_text="x", since=AS_OF, until=AS_OF - timedelta(days=1)), "since .* is after until"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[m[:30] for _, m in BAD])
def test_bad_arguments_are_clear_errors(conn, args, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        recall(conn, **args)


# ---------------------------------------------------------------- v2: the document-frequency-aware text query

def text_query_v2(conn, text, agent="a1"):
    return conn.execute("select recall._text_query_v2(%s, %s)::text", [agent, text]).fetchone()[0]


def test_v2_text_query_drops_words_found_in_most_of_the_agents_chunks(conn):
    for i in range(30):   # 'caroline' in all 30, 'guitar' in 3, 'painting' in 15 (half: kept)
        words = ["caroline said"] + (["guitar"] if i < 3 else []) + (["painting"] if i % 2 else [])
        add_chunk(conn, " ".join(words) + f" note {i}", age_days=i)
    add_chunk(conn, "caroline", agent="a2")      # another agent's chunks do not count, nor show
    assert text_query_v2(conn, "Did Caroline play the guitar?") == "'guitar' | 'play'"
    assert text_query_v2(conn, "caroline painting guitar") == "'guitar' | 'paint'"
    # v1 keeps every word, and ranks the chunks that only share the name
    assert conn.execute("select recall._text_query('caroline guitar')::text").fetchone()[0] == "'carolin' | 'guitar'"
    rows = recall(conn, query_text="Did Caroline play the guitar?", k=30, **ONLY_TEXT)
    assert len(rows) == 3 and all("guitar" in r[3] for r in rows)
    assert len(conn.execute("select * from recall.hybrid_recall_v1(agent_id => 'a1', query_text => "
                            "'Did Caroline play the guitar?', k => 30)").fetchall()) == 30


def test_v2_text_query_keeps_every_word_when_all_are_common_or_the_agent_is_small(conn):
    for i in range(19):
        add_chunk(conn, f"caroline guitar {i}")
    assert text_query_v2(conn, "caroline guitar") == "'carolin' | 'guitar'"          # 19 < 20 chunks
    add_chunk(conn, "caroline guitar again")
    assert text_query_v2(conn, "caroline guitar") == "'carolin' | 'guitar'"          # every word common
    add_chunk(conn, "something else")
    assert text_query_v2(conn, "caroline pottery") == "'potteri'"
    assert text_query_v2(conn, '"caroline guitar"') == "'carolin' <-> 'guitar'"       # websearch: strict
    assert text_query_v2(conn, "caroline -guitar") == "'carolin' & !'guitar'"
    assert text_query_v2(conn, "the of and") is None                                   # stop words only
    assert text_query_v2(conn, None) is None


def test_v2_text_query_estimates_on_the_newest_chunks(conn):
    for i in range(40):       # the 15 newest say 'home', the 25 oldest 'tokyo'
        add_chunk(conn, ("tokyo trip " if i >= 15 else "home ") + str(i), age_days=i)
    assert text_query_v2(conn, "tokyo home") == "'home'"     # all 40 in the sample: tokyo 62% > half

    def setting(key, value):
        conn.execute("insert into recall.config (key, value) values (%s, %s) "
                     "on conflict (key) do update set value = excluded.value", [key, value])

    setting("text_df_sample", "20")                          # the newest 20: home 75%, tokyo 25%
    assert text_query_v2(conn, "tokyo home") == "'tokyo'"
    setting("text_df_sample", "300")
    setting("text_common_share", "0.7")                      # now neither is common
    assert text_query_v2(conn, "tokyo home") == "'home' | 'tokyo'"


def text_plan(conn, text, agent="a1"):
    return conn.execute("select rank_q::text, match_q::text from recall._text_plan_v2(%s, %s)",
                        [agent, text]).fetchone()


def set_config(conn, key, value):
    conn.execute("insert into recall.config (key, value) values (%s, %s) "
                 "on conflict (key) do update set value = excluded.value", [key, value])


def test_v2_text_arm_matches_only_the_rarer_words_of_a_large_agent(conn):
    for i in range(30):   # 'guitar' in 3 chunks, 'painting' in 10, 'caroline' in all
        words = ["caroline"] + (["guitar"] if i < 3 else []) + (["painting"] if i % 3 == 0 else [])
        add_chunk(conn, " ".join(words) + f" note {i}", age_days=i)
    assert text_plan(conn, "guitar painting") == ("'guitar' | 'paint'", "'guitar' | 'paint'")
    set_config(conn, "text_match_max_rows", "5")       # 10 'painting' chunks are too many to rank
    assert text_plan(conn, "guitar painting") == ("'guitar' | 'paint'", "'guitar'")
    rows = recall(conn, query_text="guitar painting", k=30, **ONLY_TEXT)
    assert len(rows) == 3 and all("guitar" in r[3] for r in rows)   # painting-only chunks: no candidates
    assert {r[7] > 0 for r in rows} == {True}
    # ranked with both words: a chunk holding both comes first
    assert "painting" in rows[0][3]
    set_config(conn, "text_match_max_rows", "1")       # none qualifies: the rarest word alone
    assert text_plan(conn, "guitar painting") == ("'guitar' | 'paint'", "'guitar'")


def test_v2_text_plan_extrapolates_the_agents_size_from_the_samples_time_span(conn):
    for i in range(40):   # one chunk a day; 'tokyo' in every fourth, 'kyoto' in every tenth
        add_chunk(conn, ("tokyo " if i % 4 == 0 else "") + ("kyoto " if i % 10 == 0 else "") + f"day {i}",
                  age_days=i)
    set_config(conn, "text_df_sample", "20")           # the newest 20 span 19 days, the agent 39
    set_config(conn, "text_match_max_rows", "9")       # ~41 chunks: tokyo 5/20 -> 10.3 > 9, kyoto 2/20 -> 4.1
    assert text_plan(conn, "tokyo kyoto") == ("'kyoto' | 'tokyo'", "'kyoto'")
    set_config(conn, "text_match_max_rows", "11")      # (taken as 20 chunks, tokyo would be 5: matched here too)
    assert text_plan(conn, "tokyo kyoto") == ("'kyoto' | 'tokyo'", "'kyoto' | 'tokyo'")


def test_v2_text_arm_answers_the_same_through_the_gin_index_and_the_agent_scan(conn):
    words = ["deploy", "docker", "postgres", "upgrade", "cache", "timeout", "migration", "index"]
    for i in range(60):
        add_chunk(conn, " ".join(words[j] for j in range(8) if (i >> (j % 6)) & 1 or i % 7 == j) + f" n{i}",
                  age_days=i, metadata='{"tag": "%s"}' % ("x" if i % 3 else "y"))
    queries = [dict(query_text="docker timeout"), dict(query_text="postgres upgrade index", filter='{"tag": "y"}'),
               dict(query_text="cache", kinds=["message"]), dict(query_text='"docker postgres"'),
               dict(query_text="migration deploy", since=AS_OF - timedelta(days=30))]
    answers = {}
    for scan_max in ("1000000", "0"):      # every agent scanned / every agent through GIN
        set_config(conn, "text_scan_max_rows", scan_max)
        answers[scan_max] = [[(r[0], r[5]) for r in recall(conn, k=20, **ONLY_TEXT, **q)] for q in queries]
    assert answers["0"] == answers["1000000"]
    assert all(answers["0"])                # each query finds something


def test_v3_pair_pruning_gives_the_same_answer(conn):
    """A large agent's text arm first reads the chunks holding two query words and a chunk
    holding one only when it could still reach the top `candidates`: the answer must be the one
    of reading every hit. Forced on for this small agent (text_pair_min_rows 0) and off."""
    words = ["deploy", "docker", "postgres", "upgrade", "cache", "timeout", "migration", "index"]
    rng = np.random.default_rng(11)
    for i in range(120):
        held = [w for w in words if rng.random() < 0.3]
        filler = " ".join(f"w{int(x)}" for x in rng.integers(0, 40, size=rng.integers(1, 12)))
        add_chunk(conn, " ".join(held) + " " + filler, age_days=i / 3,
                  metadata='{"tag": "%s"}' % ("x" if i % 3 else "y"))
    rare = add_chunk(conn, "kubernetes", age_days=50)   # one query word only, but a rare one
    queries = [dict(query_text="kubernetes docker timeout"),
               dict(query_text="docker timeout"), dict(query_text="postgres upgrade index cache"),
               dict(query_text="deploy docker postgres upgrade cache timeout migration", filter='{"tag": "y"}'),
               dict(query_text="migration index", since=AS_OF - timedelta(days=20)),
               dict(query_text="cache w3 w7"), dict(query_text='"docker postgres"')]
    pair_path = "select count(*) >= %s from recall.chunks where agent_id = 'a1' and tsv @@ %s::tsquery"
    answers, used_pairs = {}, 0
    for pair_min in ("1000000000", "0"):
        set_config(conn, "text_pair_min_rows", pair_min)
        got = []
        for q in queries:
            for n in (3, 10, 100):
                got.append([(r[0], r[7]) for r in recall(conn, k=20, candidates=n, **ONLY_TEXT, **q)])
                if pair_min == "0" and q["query_text"] == "docker timeout":
                    used_pairs += conn.execute(pair_path, [n, "docker & timeout"]).fetchone()[0]
        answers[pair_min] = got
    assert answers["0"] == answers["1000000000"]
    assert all(answers["0"])
    assert used_pairs >= 1          # the pair path was taken (>= candidates chunks hold both words)
    # ... and with it, the chunk holding the rare word alone was still read: it comes first
    assert all(got[0][0] == rare for got in answers["0"][:3])
