"""hybrid_recall_turns (sql/idempotent/065-recall-turns.sql, development, issue 19): v5's rows
without a token budget; with one, the context filled turn by turn: each turn once, adjacent turns
of a session one passage, a turn that holds the query's words ahead of its window's others."""

from __future__ import annotations

import math

import numpy as np
import psycopg
import pytest
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector
from test_recall_v5 import AGENT, call, chat_url, passage_text  # noqa: F401 (chat_url: the fixture)

QUERIES = ["migration timeout orders table", "coupon deploy failed", "who owns the pipeline",
           "docker image"]


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


def args_for(q, **kw):
    return dict(agent_id=AGENT, query_text=q, query_embedding=np.asarray(FakeEmbedder().vector(q)), **kw)


@pytest.mark.parametrize("case", [dict(), dict(k=3), dict(kinds=["window"])])
def test_equals_v5_without_a_budget(chat, case):
    for q in QUERIES:
        with chat.transaction():
            assert call(chat, "hybrid_recall_turns", **args_for(q, **case)) == \
                call(chat, "hybrid_recall_v5", **args_for(q, **case))


def test_turns_fill_the_budget_each_once_in_passages(chat):
    """Whole turns, each at most once, within the budget; a row's turns are a run of adjacent
    turns of one session, its content written as v5 writes a passage, its tokens at the ranked
    chat chunks' tokens per character."""
    seq = {m: (s, q) for m, s, q in chat.execute("select message_id, session_id, seq from recall.messages")}
    seen_split = False
    for q in QUERIES:
        for weight in (0.0, 0.2, 5.0):
            for budget in (80, 120, 300, 900):
                with chat.transaction():
                    ranked = call(chat, "hybrid_recall_v4", **args_for(q, k=30))
                    rows = call(chat, "hybrid_recall_turns", **args_for(q, k=30), token_budget=budget,
                                turn_text_weight=weight)
                ratio = sum(r["n_tokens"] for r in ranked) / sum(len(r["content"]) for r in ranked)
                held = [m for r in rows for m in r["message_ids"]]
                assert rows and len(held) == len(set(held)), "a turn paid twice"
                assert sum(r["n_tokens"] for r in rows) == rows[-1]["cumulative_tokens"] <= budget
                for r in rows:
                    where = [seq[m] for m in r["message_ids"]]
                    assert {s for s, _ in where} == {r["session_id"]}
                    assert [n for _, n in where] == list(range(where[0][1], where[0][1] + len(where)))
                    dated = r["kind"] == "window"
                    assert r["content"] == passage_text(chat, r["message_ids"], dated)
                    assert r["n_tokens"] == max(1, math.ceil(len(r["content"]) * ratio))
                    own = next(x for x in ranked if x["chunk_id"] == r["chunk_id"])["message_ids"]
                    seen_split |= not set(own) <= set(held)
    assert seen_split, "never took part of a chunk"


def test_a_turn_holding_the_query_words_comes_first(chat):
    """With the turn's own match weighed in, the first passage holds a turn that says "docker
    image"; with weight 0 every turn of the best chunk ranks alike (its score), so the first
    passage is made of that chunk's turns."""
    with chat.transaction():
        best = call(chat, "hybrid_recall_v4", **args_for("docker image", k=30))[0]
        weighed = call(chat, "hybrid_recall_turns", **args_for("docker image", k=30), token_budget=60,
                       turn_text_weight=5.0)
        flat = call(chat, "hybrid_recall_turns", **args_for("docker image", k=30), token_budget=2000,
                    turn_text_weight=0.0)
    first = chat.execute("select string_agg(content, ' ') from recall.messages where message_id = any (%s)",
                         [weighed[0]["message_ids"]]).fetchone()[0]
    assert "docker image" in first
    assert set(best["message_ids"]) <= set(flat[0]["message_ids"])


def test_bad_weight_is_one_clear_error(chat):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="turn_text_weight must be finite"):
        call(chat, "hybrid_recall_turns", **args_for("docker image"), token_budget=100, turn_text_weight=-1.0)
