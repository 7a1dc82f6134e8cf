"""Recall v5 (sql/idempotent/060-recall-v5.sql): v4's rows without a token budget; with one, the
budget filled skip-and-continue, overlapping or adjacent chat chunks of a session merged into one
passage (no message paid twice), and the best chunk trimmed when it alone exceeds the budget."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest
from conftest import drop_database, new_database
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector

from pyrecall._worker import Worker

AGENT = "a"
LINES = [("alice", "the deploy of the coupon service failed again"),
         ("bob", "migration 0042 locked the orders table for an hour"),
         ("carol", "I rolled back the migration and retried the deploy of the coupon service"),
         ("alice", "coupons work now, the docker image is fine"),
         ("bob", "let us add a timeout to the migration of the orders table"),
         ("carol", "agreed, and a test for the coupon endpoint"),
         ("dave", "the orders table migration needs a lock timeout too"),
         ("erin", "who owns the coupon service deploy pipeline?"),
         ("alice", "I do; the deploy failed on the migration step"),
         ("bob", "then the timeout fixes the deploy as well")]
SOLO = [("the deploy failed on the migration", "roll the migration back first"),
        ("orders table lock again", "add a lock timeout to the orders migration"),
        ("coupon endpoint returns 500", "the coupon service lost its database"),
        ("deploy pipeline owner?", "alice owns the deploy pipeline"),
        ("migration timeout value?", "thirty seconds for the migration timeout"),
        ("docker image for coupons", "the coupon image is rebuilt nightly by the deploy job")]
PAIRS = [("why did the deploy fail?", "the migration locked the orders table"),
         ("how do we stop the migration hanging?", "a lock timeout on the orders migration"),
         ("is the coupon endpoint tested?", "not yet, carol adds a test for the coupon endpoint")]


def call(conn, fn, **kw):
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    cur = conn.execute(f"select * from recall.{fn}({names})", kw)
    cols = [d.name for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


@pytest.fixture(scope="module")
def chat_url(server_url, template_url):
    """A chat in windows (4 turns every 2) and a session of turn pairs, embedded with the hash
    embedder; n_tokens then set by hand so that fills differ: the one-pair sessions (nothing to
    merge) 30 to 190 by session; the chat and the pairs in proportion to their text (as the
    model's counts are), so that a merged passage costs at most what its chunks cost apart and
    v5 holds every message v4 holds. (With counts out of proportion, 30 to 190 by chunk_id, a
    merge priced at its best chunk's tokens per character cost more than its chunks apart and
    v5 held less than v4: found when the chat's chunk ids changed.)"""
    url = new_database(server_url)
    t = datetime(2026, 3, 1, tzinfo=UTC)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("insert into recall.sessions (session_id, agent_id, title, metadata) values "
                     "('chat', %s, 'ops chat', '{\"chunking\": \"window\"}'), "
                     "('pairs', %s, 'questions', '{}')", [AGENT, AGENT])
        for i, (who, text) in enumerate(LINES):
            conn.execute("insert into recall.messages (session_id, role, content, created_at, metadata) "
                         "values ('chat', 'user', %s, %s, %s)",
                         [text, t + timedelta(minutes=i), json.dumps({"speaker": who})])
        for i, (q, a) in enumerate(PAIRS):
            for j, (role, text) in enumerate((("user", q), ("assistant", a))):
                conn.execute("insert into recall.messages (session_id, role, content, created_at) "
                             "values ('pairs', %s, %s, %s)", [role, text, t + timedelta(hours=1, minutes=2 * i + j)])
        for i, (q, a) in enumerate(SOLO):    # one turn pair a session: nothing to merge
            conn.execute("insert into recall.sessions (session_id, agent_id, metadata) "
                         "values (%s, %s, '{\"solo\": true}')", [f"solo{i}", AGENT])
            for j, (role, text) in enumerate((("user", q), ("assistant", a))):
                conn.execute("insert into recall.messages (session_id, role, content, created_at) "
                             "values (%s, %s, %s, %s)", [f"solo{i}", role, text, t + timedelta(days=1, hours=i, minutes=j)])
        Worker(conn, FakeEmbedder(), agent=AGENT).run()
        assert conn.execute("select count(*) from recall.chunks where embedding is null").fetchone()[0] == 0
        conn.execute("update recall.chunks set n_tokens = case session_id "
                     "when 'chat' then ceil(char_length(content) * 0.6) "
                     "when 'pairs' then ceil(char_length(content) * 0.35) "
                     "else 30 + (substr(session_id, 5)::int * 3 % 5) * 40 end")
        sizes = {r[0] for r in conn.execute("select n_tokens from recall.chunks")}
        assert len(sizes) >= 3
    yield url
    drop_database(server_url, url)


@pytest.fixture
def chat(chat_url):
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


QUERIES = ["migration timeout orders table", "coupon deploy failed", "who owns the pipeline"]
CASES = [dict(), dict(k=3), dict(kinds=["window"]), dict(exclude_session_id="pairs"),
         dict(vector_weight=0.2, text_weight=0.8, turns_per_session=2)]


@pytest.mark.parametrize("case", CASES, ids=[json.dumps(c) for c in CASES])
@pytest.mark.parametrize("fn", ["hybrid_recall", "session_recall"])
def test_v5_equals_v4_without_a_budget(chat, fn, case):
    fake = FakeEmbedder()
    seen = 0
    for q in QUERIES:
        args = dict(agent_id=AGENT, query_text=q, query_embedding=np.asarray(fake.vector(q)), **case)
        with chat.transaction():    # one now() for both
            v4 = call(chat, f"{fn}_v4", **args)
            v5 = call(chat, f"{fn}_v5", **args)
            stable = call(chat, fn, **args)
        assert v5 == v4 == stable
        seen += len(v4)
    assert seen > 0


def greedy(rows, budget):
    """The contract's fill, written out: each row in order kept when it fits in what is left."""
    out, used = [], 0
    for r in rows:
        if used + r["n_tokens"] <= budget:
            used += r["n_tokens"]
            out.append((r["chunk_id"], used))
    return out


@pytest.mark.parametrize("fn", ["hybrid_recall", "session_recall"])
def test_budget_is_filled_skip_and_continue(chat, fn):
    """On chunks that share no session (nothing to merge): exactly the greedy fill."""
    fake = FakeEmbedder()
    skipped_somewhere = False
    for q in QUERIES:
        args = dict(agent_id=AGENT, query_text=q, query_embedding=np.asarray(fake.vector(q)), k=20,
                    filter=json.dumps({"solo": True}))
        if fn == "session_recall":
            args["n_sessions"] = 20
        with chat.transaction():
            ranked = call(chat, f"{fn}_v4", **args)
            assert len(ranked) >= 5 and len({r["session_id"] for r in ranked}) == len(ranked)
            first = ranked[0]["n_tokens"]   # (a smaller budget trims it: the next test)
            for budget in (first, first + 40, first + 80, first + 150, first + 333, 10_000):
                v4 = call(chat, f"{fn}_v4", **args, token_budget=budget)
                v5 = call(chat, f"{fn}_v5", **args, token_budget=budget)
                got = [(r["chunk_id"], r["cumulative_tokens"]) for r in v5]
                assert got == greedy(ranked, budget), (q, budget)
                assert v5[-1]["cumulative_tokens"] <= budget
                # v4's rows (it stops at the first that does not fit) are where v5 starts
                assert [r["chunk_id"] for r in v5[:len(v4)]] == [r["chunk_id"] for r in v4]
                # the rows themselves are v4's (scores, content, message_ids)
                by_id = {r["chunk_id"]: r for r in ranked}
                assert all(r == {**by_id[r["chunk_id"]], "cumulative_tokens": r["cumulative_tokens"]}
                           for r in v5)
                skipped_somewhere |= len(v5) > len(v4) and len(v5) < len(ranked)
    assert skipped_somewhere, "no case where a row was skipped and a later one kept"


@pytest.mark.parametrize("fn", ["hybrid_recall", "session_recall"])
def test_best_chunk_larger_than_the_budget_is_trimmed(chat, fn):
    q = "migration timeout orders table"
    args = dict(agent_id=AGENT, query_text=q, query_embedding=np.asarray(FakeEmbedder().vector(q)), k=20,
                kinds=["window"])
    best = call(chat, f"{fn}_v4", **args)[0]
    assert best["kind"] == "window" and len(best["message_ids"]) == 4
    full = best["content"]
    for budget in (best["n_tokens"] // 2, best["n_tokens"] // 4 + 1, best["n_tokens"] - 1):
        assert call(chat, f"{fn}_v4", **args, token_budget=budget) == [] or budget >= best["n_tokens"]
        rows = call(chat, f"{fn}_v5", **args, token_budget=budget)
        top = rows[0]
        assert top["chunk_id"] == best["chunk_id"]
        kept = top["content"]
        # the beginning of the chunk, within the budget's share of its characters, whole words
        assert full.startswith(kept) and 0 < len(kept) <= len(full) * budget / best["n_tokens"]
        assert full[len(kept)].isspace()
        assert top["n_tokens"] == math.ceil(best["n_tokens"] * len(kept) / len(full)) <= budget
        assert top["metadata"] == {**best["metadata"], "trimmed_from_tokens": best["n_tokens"]}
        # its messages: those whose text begins in the kept part, in order
        texts = dict(chat.execute("select message_id, content from recall.messages "
                                  "where message_id = any(%s)", [best["message_ids"]]).fetchall())
        want = [m for m in best["message_ids"] if texts[m][:40] in kept]
        assert want and top["message_ids"] == want
        assert len(want) < len(best["message_ids"])
        # the rest of the budget is filled as usual, never with the trimmed chunk's messages
        assert rows[-1]["cumulative_tokens"] <= budget
        assert all(not set(r["message_ids"] or ()) & set(want) for r in rows[1:])
    # a budget too small for one word: nothing, as v4
    assert call(chat, f"{fn}_v5", **args, token_budget=0) == []


def test_bad_budget_is_one_clear_error(chat):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="token_budget must be >= 0, got -1"):
        call(chat, "hybrid_recall_v5", agent_id=AGENT, query_text="deploy", token_budget=-1)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="token_budget must be >= 0, got -1"):
        call(chat, "session_recall_v5", agent_id=AGENT, query_text="deploy", token_budget=-1)


def passage_text(conn, ids, dated):
    """A passage as the contract writes it: its messages in order, "Speaker: text", the date of
    its first message first when it is made of chat windows."""
    rows = conn.execute("select coalesce(metadata->>'speaker', initcap(role)), content, created_at "
                        "from recall.messages where message_id = any(%s) order by seq", [ids]).fetchall()
    body = "\n\n".join(f"{who}: {text}" for who, text, _ in rows)
    when = rows[0][2].astimezone(UTC)
    return f"[{when.day} {when:%B %Y}]\n{body}" if dated else body


@pytest.mark.parametrize("fn", ["hybrid_recall", "session_recall"])
def test_overlapping_and_adjacent_chunks_become_one_passage(chat, fn):
    fake = FakeEmbedder()
    kinds = dict(chat.execute("select chunk_id, kind from recall.chunks").fetchall())
    merged_windows = merged_pairs = 0
    for q in QUERIES + ["why did the deploy fail", "coupon endpoint test"]:
        args = dict(agent_id=AGENT, query_text=q, query_embedding=np.asarray(fake.vector(q)), k=30)
        with chat.transaction():
            ranked = {r["chunk_id"]: r for r in call(chat, f"{fn}_v4", **args)}
            for budget in (200, 400, 800, 5000):
                v4 = call(chat, f"{fn}_v4", **args, token_budget=budget)
                v5 = call(chat, f"{fn}_v5", **args, token_budget=budget)
                held = [m for r in v5 for m in r["message_ids"] or ()]
                assert len(held) == len(set(held)), "a message paid twice"
                assert set(held) >= {m for r in v4 for m in r["message_ids"] or ()}
                assert sum(r["n_tokens"] for r in v5) == v5[-1]["cumulative_tokens"] <= budget
                assert [r["score"] for r in v5] == sorted((r["score"] for r in v5), reverse=True) \
                    or fn == "session_recall"
                for r in v5:
                    best = ranked[r["chunk_id"]]
                    parts = r["metadata"].get("merged_chunk_ids")
                    if parts is None:
                        assert r == {**best, "cumulative_tokens": r["cumulative_tokens"]}
                        continue
                    assert parts[0] == r["chunk_id"] and len(parts) >= 2
                    assert {m for c in parts for m in ranked[c]["message_ids"]} == set(r["message_ids"])
                    dated = any(kinds[c] == "window" for c in parts)
                    assert r["content"] == passage_text(chat, r["message_ids"], dated)
                    assert r["n_tokens"] == math.ceil(len(r["content"]) * best["n_tokens"] / len(best["content"]))
                    assert {k: v for k, v in r.items() if k not in ("content", "n_tokens", "message_ids",
                                                                   "metadata", "cumulative_tokens")} == \
                        {k: v for k, v in best.items() if k not in ("content", "n_tokens", "message_ids",
                                                                    "metadata", "cumulative_tokens")}
                    merged_windows += dated
                    merged_pairs += not dated
    assert merged_windows and merged_pairs
