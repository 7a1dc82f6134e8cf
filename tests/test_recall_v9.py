"""hybrid_recall_v9: hybrid_recall_v7's rows on one node (its trim runs on Citus too:
tests/test_citus.py). session_recall_v9: v6's rows without a token budget; with one, the budget
filled turn by turn as hybrid_recall_v7 fills it (recall._fill_v7 over v6's rows and their session-blended scores:
whole turns, each once, paid the model's counts, within the budget), the rows given in v6's
order (by session-blended score). The stable names call them."""

from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector
from test_recall_v5 import CASES, QUERIES, call, chat_url  # noqa: F401 (chat_url: a fixture)
from test_recall_v7 import args_for, check_context

BUDGETS = (12, 40, 80, 120, 300, 900)


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


@pytest.mark.parametrize("case", CASES)
def test_equals_v6_without_a_budget(chat, case):
    seen = 0
    for q in QUERIES:
        with chat.transaction():    # one now() for all
            v6 = call(chat, "session_recall_v6", **args_for(q, **case))
            assert call(chat, "session_recall_v9", **args_for(q, **case)) == v6
            assert call(chat, "session_recall", **args_for(q, **case)) == v6
        seen += len(v6)
    assert seen


def test_the_turn_fill_of_v6s_rows_given_in_v6s_order(chat):
    """The turns and passages are those recall._fill_v7 chooses from v6's rows and scores (the
    fill hybrid_recall_v7's tests hold to its contract); the rows come in v6's order (each at its
    chunk's place), cumulative_tokens running in that order."""
    reordered = split = 0
    for q in QUERIES + ["why did the deploy fail", "coupon endpoint test"]:
        for weight in (0.0, 0.2):
            for budget in BUDGETS:
                with chat.transaction():
                    ranked = call(chat, "session_recall_v6", **args_for(q, k=30))
                    rows = call(chat, "session_recall_v9", **args_for(q, k=30), token_budget=budget,
                                turn_text_weight=weight)
                    assert call(chat, "session_recall_v10", **args_for(q, k=30), token_budget=budget) == \
                        call(chat, "session_recall_v9", **args_for(q, k=30), token_budget=budget)
                    filled = chat.execute(
                        "select chunk_id, content, n_tokens, message_ids from recall._fill_v7(%s, %s, %s, %s, %s, %s) "
                        "order by pos", [ranked[0]["agent_id"], [r["chunk_id"] for r in ranked],
                                         [r["score"] for r in ranked], budget, q, weight]).fetchall()
                assert rows
                held = check_context(chat, rows, budget)
                assert sorted((r["chunk_id"], r["content"] or "", r["n_tokens"], r["message_ids"]) for r in rows) \
                    == sorted((c, t or next(x["content"] for x in ranked if x["chunk_id"] == c), n,
                               m or next(x["message_ids"] for x in ranked if x["chunk_id"] == c))
                              for c, t, n, m in filled)
                order = [r["chunk_id"] for r in ranked]
                places = [order.index(r["chunk_id"]) for r in rows]
                assert places == sorted(places)
                reordered += [c for c, *_ in filled] != [r["chunk_id"] for r in rows]
                split += any(not set(x["message_ids"]) <= set(held) for x in ranked
                             if x["chunk_id"] in {r["chunk_id"] for r in rows})
    assert reordered, "v6's order never differed from the fill's"
    assert split, "never took part of a chunk"


def test_bad_arguments_are_one_clear_error(chat):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="turn_text_weight must be finite"):
        call(chat, "session_recall_v9", **args_for("docker image"), token_budget=100, turn_text_weight=-1.0)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="token_budget must be >= 0, got -1"):
        call(chat, "session_recall_v9", **args_for("docker image"), token_budget=-1)
    assert call(chat, "session_recall_v9", **args_for("docker image"), token_budget=0) == []


def test_hybrid_recall_v9_gives_v7s_rows(chat):
    """Every budget (the trim when nothing fits included) and weight: v7's rows; v10 (which the
    stable name called) gives v9's."""
    trimmed = 0
    for q in QUERIES + ["docker image"]:
        for weight in (0.0, 0.2, 5.0):
            for budget in (None, 3, *BUDGETS):
                args = args_for(q, k=30, token_budget=budget, turn_text_weight=weight)
                with chat.transaction():
                    v7 = call(chat, "hybrid_recall_v7", **args)
                    assert call(chat, "hybrid_recall_v9", **args) == v7
                    args.pop("turn_text_weight")
                    assert call(chat, "hybrid_recall_v10", **args) == call(chat, "hybrid_recall_v9", **args)
                trimmed += any("trimmed_from_tokens" in r["metadata"] for r in v7)
    assert trimmed, "never trimmed"
