"""session_recall_v8: v6's rows without a token budget; with one, v6's fill (chunks best first
in v6's order, skip-and-continue, overlapping or adjacent chat chunks of a session merged into one
passage, the first chunk trimmed when it alone exceeds the budget) with each merged passage paid
what the model counts of its text (recall.messages.n_tokens and date_tokens) instead of v6's
estimate, so that the rows' n_tokens are the model's count of their text. The stable
session_recall called it until v9 (tests/test_recall_v9.py). (With the real model, on LoCoMo's format: tests/test_bench.py checks
that no context's text, as the model counts it, exceeds its budget.)"""

from __future__ import annotations

import math

import psycopg
import pytest
from pgvector.psycopg import register_vector
from test_recall_v5 import CASES, QUERIES, call, chat_url, passage_text  # noqa: F401 (chat_url: a fixture)
from test_recall_v7 import args_for

BUDGETS = (60, 200, 400, 800, 5000)


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn

def turns(conn):
    return {r[0]: dict(zip(("session", "seq", "tokens", "date_tokens", "text"), r[1:], strict=True))
            for r in conn.execute("select message_id, session_id, seq, n_tokens, date_tokens, "
                                  "coalesce(metadata->>'speaker', initcap(role)) || ': ' || content "
                                  "from recall.messages")}


def estimate(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


@pytest.mark.parametrize("case", CASES)
def test_equals_v6_without_a_budget(chat, case):
    seen = 0
    for q in QUERIES:
        with chat.transaction():    # one now() for all
            v6 = call(chat, "session_recall_v6", **args_for(q, **case))
            assert call(chat, "session_recall_v8", **args_for(q, **case)) == v6
        seen += len(v6)
    assert seen


def check_context(conn, rows, ranked, budget, *, counted=True):
    """The contract of one v8 context; (merged windows, merged pairs) it holds."""
    msgs = turns(conn)
    kinds = {r["chunk_id"]: r["kind"] for r in ranked.values()}
    assert sum(r["n_tokens"] for r in rows) == rows[-1]["cumulative_tokens"] <= budget
    held = [m for r in rows for m in r["message_ids"] or ()]
    assert len(held) == len(set(held)), "a message paid twice"
    order = list(ranked)
    assert [order.index(r["chunk_id"]) for r in rows] == sorted(order.index(r["chunk_id"]) for r in rows)
    windows = pairs = 0
    for r in rows:
        best = ranked[r["chunk_id"]]
        parts = r["metadata"].get("merged_chunk_ids")
        if parts is None:
            if "trimmed_from_tokens" not in r["metadata"]:      # a whole chunk: v6's row
                assert r == {**best, "cumulative_tokens": r["cumulative_tokens"]}
            continue
        assert parts[0] == r["chunk_id"] and len(parts) >= 2
        assert {m for c in parts for m in ranked[c]["message_ids"]} == set(r["message_ids"])
        where = [msgs[m] for m in r["message_ids"]]
        assert [w["seq"] for w in where] == list(range(where[0]["seq"], where[0]["seq"] + len(where)))
        dated = any(kinds[c] == "window" for c in parts)
        assert r["content"] == passage_text(conn, r["message_ids"], dated)
        if counted:   # the model's counts (here the test embedder's), as the worker recorded them
            assert r["n_tokens"] == sum(w["tokens"] for w in where) + (where[0]["date_tokens"] if dated else 0)
        else:         # not counted yet: four characters a token, as hybrid_recall_v7 estimates
            first = where[0]["text"]
            date_line = r["content"][:r["content"].index("\n") + 1] if dated else ""
            assert r["n_tokens"] == sum(estimate(w["text"] + "\n\n") for w in where) + (
                estimate(date_line) if dated else 0), first
        windows += dated
        pairs += not dated
    return windows, pairs


def test_merged_passages_are_paid_their_turns_counts(chat):
    """v6's estimate (characters x the best chunk's tokens per character) replaced by the turns'
    counts; everything else as v6: the order, skip-and-continue, whole chunks as ranked."""
    merged_windows = merged_pairs = compared = 0
    for q in QUERIES + ["why did the deploy fail", "coupon endpoint test"]:
        with chat.transaction():
            ranked = {r["chunk_id"]: r for r in call(chat, "session_recall_v6", **args_for(q, k=30))}
            for budget in BUDGETS:
                rows = call(chat, "session_recall_v8", **args_for(q, k=30), token_budget=budget)
                w, p = check_context(chat, rows, ranked, budget)
                merged_windows += w
                merged_pairs += p
                v6 = call(chat, "session_recall_v6", **args_for(q, k=30), token_budget=budget)
                # where every ranked chunk fits either way, the same chunks lead the same passages
                if sum(r["n_tokens"] for r in ranked.values()) <= budget:
                    assert [r["chunk_id"] for r in rows] == [r["chunk_id"] for r in v6]
                    compared += 1
    assert merged_windows and merged_pairs and compared


def test_turns_not_counted_yet_are_estimated(chat):
    """Before the worker has counted a turn (messages.n_tokens NULL), its passage pays the
    estimate of the same text, four characters a token."""
    merged = 0
    with chat.transaction():
        chat.execute("update recall.messages set n_tokens = null, date_tokens = null")
        for q in QUERIES:
            ranked = {r["chunk_id"]: r for r in call(chat, "session_recall_v6", **args_for(q, k=30))}
            for budget in BUDGETS:
                rows = call(chat, "session_recall_v8", **args_for(q, k=30), token_budget=budget)
                merged += sum(check_context(chat, rows, ranked, budget, counted=False))
        raise psycopg.Rollback()    # the module's other tests read the counts
    assert merged
    assert chat.execute("select count(*) from recall.messages where n_tokens is null").fetchone()[0] == 0


def test_the_first_chunk_larger_than_the_budget_is_trimmed_short_of_it(chat):
    """As v6: the best chunk alone over the budget is trimmed to fit, the rest filled as usual;
    v8 cuts it 2% (at least 2 tokens) short of the budget, room for the estimate of the kept
    text's tokens; a budget of 0 gives nothing."""
    q = "migration timeout orders table"
    best = call(chat, "session_recall_v8", **args_for(q, k=30))[0]
    assert best["n_tokens"] > 40
    for budget in (best["n_tokens"] - 1, best["n_tokens"] // 2, 40):
        rows = call(chat, "session_recall_v8", **args_for(q, k=30), token_budget=budget)
        top = rows[0]
        assert top["chunk_id"] == best["chunk_id"]
        assert top["metadata"]["trimmed_from_tokens"] == best["n_tokens"]
        assert best["content"].startswith(top["content"]) and len(top["content"]) < len(best["content"])
        assert top["n_tokens"] <= budget - max(2, math.ceil(budget * 0.02))
        assert rows[-1]["cumulative_tokens"] <= budget
        assert all(not set(r["message_ids"] or ()) & set(top["message_ids"]) for r in rows[1:])
    assert call(chat, "session_recall_v8", **args_for(q, k=30), token_budget=0) == []
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="token_budget must be >= 0, got -1"):
        call(chat, "session_recall_v8", **args_for(q), token_budget=-1)
