"""hybrid_recall_v7: v6's rows without a token budget; with one, the context filled turn by
turn, each turn paid what the model counts (recall.messages.n_tokens): the rows' n_tokens never
exceed the budget, no message is paid twice, a turn that does not fit is skipped and the fill
goes on, the best unit is trimmed when nothing fits, and the exact counts replace the estimates
once the worker has embedded the turns' chunks."""

from __future__ import annotations

import math

import numpy as np
import psycopg
import pytest
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector
from test_recall_v5 import AGENT, call, chat_url, passage_text  # noqa: F401 (chat_url: the fixture)

from pyrecall._worker import Worker

QUERIES = ["migration timeout orders table", "coupon deploy failed", "who owns the pipeline",
           "docker image"]


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


def args_for(q, **kw):
    return {"agent_id": AGENT, "query_text": q, "query_embedding": np.asarray(FakeEmbedder().vector(q)), **kw}


def messages(conn):
    return {r[0]: dict(zip(("session", "seq", "tokens", "date_tokens"), r[1:], strict=True)) for r in conn.execute(
        "select message_id, session_id, seq, n_tokens, date_tokens from recall.messages")}


def check_context(conn, rows, budget):
    """The contract's invariants of one context; the message ids it holds."""
    msgs = messages(conn)
    assert sum(r["n_tokens"] for r in rows) == rows[-1]["cumulative_tokens"] <= budget
    held = [m for r in rows for m in r["message_ids"] or ()]
    assert len(held) == len(set(held)), "a message paid twice"
    for r in rows:
        if r["metadata"].get("merged_chunk_ids") is None:
            continue                                  # a whole chunk: its own n_tokens
        where = [msgs[m] for m in r["message_ids"]]
        assert {w["session"] for w in where} == {r["session_id"]}
        assert [w["seq"] for w in where] == list(range(where[0]["seq"], where[0]["seq"] + len(where)))
        dated = r["session_id"] == "chat"             # the chat is in windows, the rest turn pairs
        assert r["content"] == passage_text(conn, r["message_ids"], dated)
        assert r["n_tokens"] == sum(w["tokens"] for w in where) + (where[0]["date_tokens"] if dated else 0)
    return held


@pytest.mark.parametrize("case", [dict(), dict(k=3), dict(kinds=["window"]), dict(token_budget=None)])
def test_equals_v6_without_a_budget(chat, case):
    for q in QUERIES:
        with chat.transaction():
            assert call(chat, "hybrid_recall_v7", **args_for(q, **case)) == \
                call(chat, "hybrid_recall_v6", **args_for(q, **case))


def test_turns_fill_the_budget_each_once_in_passages_within_the_budget(chat):
    """Whole turns, each at most once, the rows' n_tokens (the model's counts) within the
    budget; a row's turns are a run of adjacent turns of one session, its content written as
    a passage, its tokens the sum of its turns' and its date line's."""
    seen_split = False
    for q in QUERIES:
        for weight in (0.0, 0.2, 5.0):
            for budget in (12, 40, 80, 120, 300, 900):
                with chat.transaction():
                    ranked = call(chat, "hybrid_recall_v6", **args_for(q, k=30))
                    rows = call(chat, "hybrid_recall_v7", **args_for(q, k=30), token_budget=budget,
                                turn_text_weight=weight)
                assert rows
                held = check_context(chat, rows, budget)
                for r in rows:
                    own = next(x for x in ranked if x["chunk_id"] == r["chunk_id"])["message_ids"]
                    seen_split |= not set(own) <= set(held)
    assert seen_split, "never took part of a chunk"


def test_a_turn_that_does_not_fit_is_skipped_and_the_fill_goes_on(chat):
    """The best turn made too big for the budget: it is left out, the rows after it fill the
    budget all the same."""
    q = "docker image"
    with chat.transaction():
        first = call(chat, "hybrid_recall_v7", **args_for(q, k=30), token_budget=100)[0]
        top = first["message_ids"][0]
        chat.execute("update recall.messages set n_tokens = 95 where message_id = %s", [top])
        rows = call(chat, "hybrid_recall_v7", **args_for(q, k=30), token_budget=90)
        held = check_context(chat, rows, 90)
        assert top not in held and len(rows) >= 2
        assert rows[-1]["cumulative_tokens"] > 60
        # with room for it, it is back
        assert top in [m for r in call(chat, "hybrid_recall_v7", **args_for(q, k=30), token_budget=400)
                       for m in r["message_ids"]]
        raise psycopg.Rollback()


def test_the_best_unit_trimmed_when_nothing_fits(chat):
    with chat.transaction():
        chat.execute("update recall.messages set n_tokens = 400 where session_id in ('chat', 'pairs') "
                     "or session_id like 'solo%%'")
        best = call(chat, "hybrid_recall_v7", **args_for("docker image", k=30), token_budget=100000)[0]
        rows = call(chat, "hybrid_recall_v7", **args_for("docker image", k=30), token_budget=100)
        assert len(rows) == 1 and rows[0]["n_tokens"] <= 100
        assert rows[0]["metadata"]["trimmed_from_tokens"] == 400
        turn = rows[0]["message_ids"][0]
        assert turn in best["message_ids"]
        speaker, text = chat.execute("select coalesce(metadata->>'speaker', initcap(role)), content "
                                     "from recall.messages where message_id = %s", [turn]).fetchone()
        assert f"{speaker}: {text}".startswith(rows[0]["content"]) and rows[0]["content"]
        raise psycopg.Rollback()


def test_exact_counts_replace_the_estimates_once_embedded(chat):
    """Turns written with plain SQL are paid an estimate (four characters a token) until the
    worker embeds their chunks; then the model's count."""
    try:
        chat.execute("insert into recall.sessions (session_id, agent_id, metadata) "
                     "values ('late', %s, '{\"chunking\": \"window\"}')", [AGENT])
        chat.execute("insert into recall.messages (session_id, role, content, created_at, metadata) values "
                     "('late', 'user', 'the zebra crossing by the harbour is painted', '2026-04-01 10:00+00', "
                     "'{\"speaker\": \"zoe\"}'), "
                     "('late', 'user', 'zebra paint dries overnight', '2026-04-01 10:01+00', '{\"speaker\": \"yan\"}')")
        texts = ["zoe: the zebra crossing by the harbour is painted\n\n", "yan: zebra paint dries overnight\n\n"]
        q = args_for("zebra crossing paint", k=30, kinds=["window"], query_embedding=None)
        rows = call(chat, "hybrid_recall_v7", **q, token_budget=500)
        assert rows[0]["session_id"] == "late" and len(rows[0]["message_ids"]) == 2
        assert rows[0]["n_tokens"] == sum(math.ceil(len(t) / 4) for t in texts) + math.ceil(len("[1 April 2026]\n") / 4)

        class Characters(FakeEmbedder):
            def count_tokens(self, text):
                return len(text)

        Worker(chat, Characters(), agent=AGENT).run()
        rows = call(chat, "hybrid_recall_v7", **q, token_budget=500)
        assert rows[0]["session_id"] == "late"
        assert rows[0]["n_tokens"] == sum(len(t) for t in texts) + len("[1 April 2026]\n")
        assert len(rows[0]["content"]) == rows[0]["n_tokens"] - 2     # the last turn's blank line
    finally:
        chat.execute("delete from recall.sessions where session_id = 'late'")


def test_bad_weight_is_one_clear_error(chat):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="turn_text_weight must be finite"):
        call(chat, "hybrid_recall_v7", **args_for("docker image"), token_budget=100, turn_text_weight=-1.0)
