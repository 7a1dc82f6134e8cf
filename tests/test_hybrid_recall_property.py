"""hybrid_recall compared with a small reference implementation in Python, on hundreds of
random queries over one random data set.

The reference takes the per-chunk primitives from PostgreSQL (cosine distance, ts_rank_cd,
whether a tsquery matches, length(tsv)) and v3's text plan (recall._text_plan_v3, tested on
its own in tests/test_hybrid_recall.py) so that floating-point details cannot differ, and
re-implements everything the function decides: both candidate arms with their filters, v3's
BM25 text_rank with document frequencies counted among the hits, the fusion, min similarity,
the near-duplicate rule, the order, k and the token budget.
"""

import json
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

AS_OF = datetime(2026, 6, 1, tzinfo=UTC)
WORDS = "deploy docker compose nginx auth token jwt migrate postgres index test flaky retry cache".split()
KINDS = ["message", "turn_pair", "code", "tool", "thinking"]


@pytest.fixture(scope="module")
def dataset(server_url, template_url):
    import psycopg
    from conftest import drop_database, new_database
    from pgvector.psycopg import register_vector

    url = new_database(server_url)
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    rng = random.Random(1234)
    nrng = np.random.default_rng(1234)
    base = nrng.normal(size=(12, 384)).astype(np.float32)
    texts = []
    for i in range(160):
        agent = "a1" if i % 4 else "a2"
        session = f"{agent}-s{rng.randrange(4)}"
        project = rng.choice(["api", "web"])
        conn.execute("insert into recall.sessions (session_id, agent_id, project) values (%s, %s, %s) "
                     "on conflict do nothing", [session, agent, project])
        # some texts repeat exactly (duplicates), most are random word bags
        text = rng.choice(texts) if texts and rng.random() < 0.1 else " ".join(rng.choices(WORDS, k=rng.randint(2, 30)))
        texts.append(text)
        created = AS_OF - timedelta(days=rng.uniform(-2, 120))
        conn.execute("insert into recall.messages (session_id, role, content, created_at, importance, metadata) "
                     "values (%s, 'system', %s, %s, %s, %s)",
                     [session, text, created, round(rng.random(), 3), json.dumps({"tag": rng.choice("xyz")})])
        cid = conn.execute("select max(chunk_id) from recall.chunks").fetchone()[0]
        conn.execute("update recall.chunks set kind = %s where chunk_id = %s", [rng.choice(KINDS), cid])
        if rng.random() < 0.85:   # some chunks stay pending (no embedding)
            v = base[rng.randrange(12)] + nrng.normal(scale=rng.choice([0.001, 0.5, 2.0]), size=384)
            conn.execute("update recall.chunks set embedding = %s where chunk_id = %s", [v.astype(np.float32), cid])
    rows = conn.execute("select chunk_id, agent_id, session_id, kind, content, created_at, n_tokens, "
                        "importance, metadata, embedding is not null from recall.chunks").fetchall()
    chunks = {r[0]: dict(zip(["id", "agent", "session", "kind", "content", "created", "tokens",
                              "importance", "metadata", "embedded"], r, strict=True)) for r in rows}
    pair_cos = {(a, b): s for a, b, s in conn.execute(
        "select x.chunk_id, y.chunk_id, 1 - (x.embedding <=> y.embedding) from recall.chunks x, recall.chunks y "
        "where x.embedding is not null and y.embedding is not null").fetchall()}
    yield conn, chunks, pair_cos, base
    conn.close()
    drop_database(server_url, url)


# the tsquery each version ranks with (recall._text_query_v2 is checked on its own in
# tests/test_hybrid_recall.py); the reference takes it from the database
TEXT_QUERY = {"v1": "recall._text_query(%(t)s)", "v2": "recall._text_query_v2(%(a)s, %(t)s)"}


def bm25_ranks(conn, a, passes, chunks):
    """v3's text arm in Python: the hits of match_q, and text_rank for every chunk."""
    plan = conn.execute("select rank_q::text, match_q::text, lexemes, idfs, avg_len "
                        "from recall._text_plan_v3(%s, %s)", [a["agent_id"], a["query_text"]]).fetchone()
    rank_q, match_q, lexemes, idf, avg_len = plan
    words = lexemes or []
    prim = {}
    for cid, length, match, held, cd in conn.execute(
            "select chunk_id, length(tsv), coalesce(tsv @@ %(m)s::tsquery, false), "
            "array(select coalesce(tsv @@ quote_literal(w)::tsquery, false) from unnest(%(w)s::text[]) w), "
            "case when tsv @@ %(r)s::tsquery then ts_rank_cd(tsv, %(r)s::tsquery, 1) else 0 end "
            "from recall.chunks", {"m": match_q, "w": words, "r": rank_q}).fetchall():
        prim[cid] = (length, match, held, cd)
    hits = [cid for cid, c in chunks.items() if passes(c) and prim[cid][1]]
    total = 0.0
    for x in idf or []:
        total += x

    def text_rank(cid):
        length, _, held, cd = prim[cid]
        if lexemes is not None:
            s = 0.0
            for i in range(len(words)):    # the database's order: by word
                if held[i]:
                    s += idf[i]
            return s / total * 1.6 / (1.6 + 0.6 * length / max(avg_len, 1)) if total else 0.0
        return cd / (cd + 0.1) if cd else 0.0

    return hits, text_rank


def reference(conn, chunks, pair_cos, a, version="v3"):
    """What hybrid_recall must return, decided in Python."""
    q_emb, q_text = a["query_embedding"], a["query_text"]
    tsq = TEXT_QUERY.get(version, TEXT_QUERY["v2"])
    prim = {cid: {"dist": d, "match": m, "rank": r} for cid, d, m, r in conn.execute(
        "select chunk_id, case when %(e)s::vector is not null and embedding is not null then embedding <=> %(e)s::vector end, "
        f"coalesce(tsv @@ {tsq}, false), ts_rank_cd(tsv, {tsq}, 1) "
        "from recall.chunks", {"e": q_emb, "t": q_text, "a": a["agent_id"]}).fetchall()}

    def passes(c):
        return (c["agent"] == a["agent_id"]
                and (a["exclude_session_id"] is None or c["session"] != a["exclude_session_id"])
                and (a["filter"] is None or all(c["metadata"].get(k) == v for k, v in json.loads(a["filter"]).items()))
                and (a["kinds"] is None or c["kind"] in a["kinds"])
                and (a["since"] is None or c["created"] >= a["since"])
                and (a["until"] is None or c["created"] < a["until"]))

    pool = [c for c in chunks.values() if passes(c)]
    n = a["candidates"]
    vec = sorted((c for c in pool if prim[c["id"]]["dist"] is not None), key=lambda c: (prim[c["id"]]["dist"], c["id"]))[:n] if q_emb is not None else []
    if version == "v3":
        hits, text_rank = bm25_ranks(conn, a, passes, chunks)
        txt = sorted((chunks[h] for h in hits), key=lambda c: (-text_rank(c["id"]), c["id"]))[:n]
    else:
        txt = sorted((c for c in pool if prim[c["id"]]["match"]), key=lambda c: (-prim[c["id"]]["rank"], c["id"]))[:n]
    cands = {c["id"]: c for c in vec + txt}
    scored = []
    for cid, c in cands.items():
        p = prim[cid]
        sim = None if p["dist"] is None else 1 - p["dist"]
        if version == "v3":
            tr = text_rank(cid)
        else:
            tr = p["rank"] / (p["rank"] + 0.1) if p["match"] else 0.0
        age = max((AS_OF - c["created"]).total_seconds(), 0)
        rec = 0.5 ** (age / a["half_life"].total_seconds())
        score = (a["vector_weight"] * (sim or 0) + a["text_weight"] * tr
                 + a["recency_weight"] * rec + a["importance_weight"] * c["importance"])
        if a["min_similarity"] is not None and sim is not None and sim < a["min_similarity"]:
            continue
        scored.append((score, c))
    scored.sort(key=lambda sc: (-sc[0], -sc[1]["created"].timestamp(), -sc[1]["id"]))
    top = scored[: max(4 * a["k"], 40)]
    kept = []
    for i, (s, c) in enumerate(top):
        dup = any(b["content"] == c["content"] or pair_cos.get((b["id"], c["id"]), -2) >= a["dedup_similarity"]
                  for _, b in top[:i])
        if not dup:
            kept.append((s, c))
    out, total = [], 0
    for s, c in kept[: a["k"]]:
        total += c["tokens"]
        if a["token_budget"] is not None and total > a["token_budget"]:
            break
        out.append((c["id"], s, total))
    return out


def random_args(rng, base):
    qe = None
    if rng.random() < 0.8:
        qe = (base[rng.randrange(12)] + np.random.default_rng(rng.randrange(10**6)).normal(scale=0.7, size=384)).astype(np.float32)
    qt = " ".join(rng.sample(WORDS, rng.randint(1, 3))) if (qe is None or rng.random() < 0.7) else None
    return {
        "agent_id": rng.choice(["a1", "a1", "a2"]),
        "query_text": qt,
        "query_embedding": qe,
        "k": rng.choice([1, 3, 5, 10, 20]),
        "token_budget": rng.choice([None, None, 0, 20, 60, 150]),
        "exclude_session_id": rng.choice([None, None, "a1-s1", "a2-s0"]),
        "min_similarity": rng.choice([None, None, 0.0, 0.3]),
        "filter": rng.choice([None, None, '{"project": "api"}', '{"tag": "x"}']),
        "kinds": rng.choice([None, None, ["message", "code"], ["tool"]]),
        "since": rng.choice([None, None, AS_OF - timedelta(days=60)]),
        "until": rng.choice([None, None, AS_OF - timedelta(days=10)]),
        "vector_weight": rng.choice([0.0, 0.5, 1.0]),
        "text_weight": rng.choice([0.0, 0.3, 1.0]),
        "recency_weight": rng.choice([0.0, 0.1, 0.5]),
        "importance_weight": rng.choice([0.0, 0.1, 0.5]),
        "half_life": timedelta(days=rng.choice([1, 30, 365])),
        "candidates": rng.choice([3, 10, 100]),
        "as_of": AS_OF,
        "dedup_similarity": rng.choice([0.95, 0.99, 1.01]),
    }


# v4 is v3 on data without memories; the stable name's v5 fills a budget otherwise
# (tests/test_recall_v5.py)
@pytest.mark.parametrize("function,seed", [("hybrid_recall_v4", s) for s in range(300)]
                         + [("hybrid_recall_v2", s) for s in range(100)]
                         + [("hybrid_recall_v1", s) for s in range(100)])
def test_matches_reference(dataset, function, seed):
    conn, chunks, pair_cos, base = dataset
    rng = random.Random(seed)
    a = random_args(rng, base)
    names = ", ".join(f"{k} => %({k})s" for k in a)
    got = conn.execute(f"select chunk_id, score, cumulative_tokens from recall.{function}({names})", a).fetchall()
    want = reference(conn, chunks, pair_cos, a, {"v1": "v1", "v2": "v2"}.get(function[-2:], "v3"))
    assert [g[0] for g in got] == [w[0] for w in want]
    assert [g[1] for g in got] == pytest.approx([w[1] for w in want], rel=1e-6, abs=1e-7)
    assert [g[2] for g in got] == [w[2] for w in want]
