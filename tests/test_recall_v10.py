"""Release v10: hybrid_recall_v10, session_recall_v10 and auto_context_v10 are v9's, v9's and
v6's with the text arm asked for the query's rarest words only (recall._text_plan_v10: at most
recall.config text_max_words, default 16). A query of at most that many words gets the older
version's rows; a longer one is searched by its rarest words, so that its cost no longer grows
with its length (docs/RELIABILITY.md bug 8: a session summary of 81 words took 6.6 s at 100k
chunks). The stable names call v10."""

from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector
from test_recall_v5 import AGENT, CASES, call, chat_url  # noqa: F401 (chat_url: a fixture)
from test_recall_v7 import QUERIES, args_for

AS_OF = "2026-03-05"
# a pasted log or a session summary: more distinct words than the plan keeps
LONG = ("the nightly migration of the orders table timed out again while the coupon deploy waited "
        "for the pipeline owner; the docker image build retried twice, the staging database "
        "logged a lock timeout on the archive partition, and the alerting channel paged the "
        "whole team until the rollback finished restoring yesterday's snapshot")


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


def plan(conn, version: str, text: str) -> dict:
    cur = conn.execute(f"select * from recall._text_plan_{version}(%s, %s)", [AGENT, text])
    return dict(zip([d.name for d in cur.description], cur.fetchone(), strict=True))


@pytest.mark.parametrize("case", CASES)
def test_short_queries_get_the_older_versions_rows(chat, case):
    seen = 0
    for q in QUERIES:
        assert len(plan(chat, "v6", q)["lexemes"] or []) <= 16
        assert plan(chat, "v10", q) == plan(chat, "v6", q)
        for budget in (None, 40, 300):
            args = {**args_for(q, **case), "token_budget": budget, "as_of": AS_OF}
            v9 = call(chat, "hybrid_recall_v9", **args)
            # (v11: v10's rows at turn_vector_weight 0, test_recall_v11.py; the stable names call v13)
            assert call(chat, "hybrid_recall_v10", **args) == v9 == \
                call(chat, "hybrid_recall_v11", **args, turn_vector_weight=0.0)
            v9 = call(chat, "session_recall_v9", **args)
            assert call(chat, "session_recall_v10", **args) == v9 == \
                call(chat, "session_recall_v11", **args, turn_vector_weight=0.0)
            seen += len(v9)
    assert seen


@pytest.mark.parametrize("task", [None, *QUERIES])
def test_auto_context_v10_gives_v6s_rows_for_a_short_query(chat, task):
    args = {"agent_id": AGENT, "task_text": task, "token_budget": 600, "as_of": AS_OF}
    if task:
        args["task_embedding"] = args_for(task)["query_embedding"]
    v6 = call(chat, "auto_context_v6", **args)
    assert v6
    # (the stable name calls v13, whose Related is filled turn by turn: test_auto_context_v12.py)
    assert call(chat, "auto_context_v10", **args) == v6


def test_a_long_query_is_searched_by_its_rarest_words(chat):
    """v6 keeps every word of LONG (after the common ones); v10 the 16 of them with the highest
    idf (the rarest in the agent's newest chunks; ties by the word, as v6 ranks them)."""
    full, capped = plan(chat, "v6", LONG), plan(chat, "v10", LONG)
    assert len(full["lexemes"]) > 16 == len(capped["lexemes"])
    by_rarity = sorted(zip(full["lexemes"], full["idfs"], strict=True), key=lambda w: (-w[1], w[0]))
    assert sorted(w for w, _ in by_rarity[:16]) == capped["lexemes"]
    assert dict(zip(capped["lexemes"], capped["idfs"], strict=True)) == \
        {w: i for w, i in by_rarity[:16]}
    assert capped["avg_len"] == full["avg_len"] and capped["agent_rows"] == full["agent_rows"]
    # the recall runs on them, by keywords and with a vector, whole and at a budget
    for budget in (None, 300):
        rows = call(chat, "hybrid_recall", **args_for(LONG), token_budget=budget, as_of=AS_OF)
        assert rows and all(r["text_rank"] is not None for r in rows[:1])
        assert call(chat, "session_recall", **args_for(LONG), token_budget=budget, as_of=AS_OF)
    assert call(chat, "auto_context", agent_id=AGENT, task_text=LONG, as_of=AS_OF)


def test_text_max_words_is_a_setting(chat):
    try:
        chat.execute("insert into recall.config (key, value) values ('text_max_words', '4')")
        assert len(plan(chat, "v10", LONG)["lexemes"]) == 4
        chat.execute("update recall.config set value = '0' where key = 'text_max_words'")
        assert len(plan(chat, "v10", LONG)["lexemes"]) == 1   # at least the rarest word
        assert len(plan(chat, "v6", LONG)["lexemes"]) > 16   # v6 as released
    finally:
        chat.execute("delete from recall.config where key = 'text_max_words'")
