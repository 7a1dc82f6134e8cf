"""Release v14: auto_context_v14 is v13's with Recent's rows in reading order — its sessions
newest first (by the newest row of each), the rows of a session in the order they happened —
where v13 gave them in the fill's order, newest first, so that a session read backwards
(`make demo`: "User: Fix that one too then." before the exchange it refers to). The rows
themselves, and every other section, are v13's. (SQL logic: the hash
embedder's vectors, over the Claude Code sessions `make demo` imports and test_recall_v5's chat.)"""

from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector
from test_recall_v5 import AGENT as CHAT_AGENT
from test_recall_v5 import call, chat_url  # noqa: F401 (chat_url: a fixture)
from test_recall_v7 import args_for as chat_args
from test_recall_v13 import QUERIES, agent, agent_url, context, messages  # noqa: F401 (fixtures)

BUDGETS = (60, 300, 1000, 2000, 4000)
SHARES = ({}, {"recent_share": 0.6}, {"recent_share": 1.0, "failure_share": 0.0})


def first_seq(row, msgs) -> int:
    return min(msgs[m]["seq"] for m in row["message_ids"])


def reading_order(recent, msgs) -> None:
    """Each session's rows together, the sessions newest first (by their newest row), the rows
    of a session by where they start in it."""
    sessions = [r["session_id"] for r in recent]
    order = list(dict.fromkeys(sessions))
    assert sessions == sorted(sessions, key=order.index), "a session's rows apart"
    newest = {s: max(r["created_at"] for r in recent if r["session_id"] == s) for s in order}
    assert [newest[s] for s in order] == sorted(newest.values(), reverse=True)
    for s in order:
        starts = [first_seq(r, msgs) for r in recent if r["session_id"] == s]
        assert starts == sorted(starts), f"session {s} out of order: {starts}"


def same_rows_as_v13(v14, v13) -> None:
    """The same rows: Pinned, Related and Failures in v13's order with its running totals;
    Recent the same rows (its running totals follow its order)."""
    no_total = lambda rows: sorted((tuple({**r, "cumulative_tokens": 0}.items()) for r in rows), key=repr)  # noqa: E731
    assert [r for r in v14 if r["section"] != "recent"] == [r for r in v13 if r["section"] != "recent"]
    assert no_total([r for r in v14 if r["section"] == "recent"]) == no_total(
        [r for r in v13 if r["section"] == "recent"])
    assert [r["section"] for r in v14] == [r["section"] for r in v13]
    total = 0
    for r in v14:
        total += r["n_tokens"]
        assert r["cumulative_tokens"] == total


def test_recent_reads_in_order_with_v13s_rows(agent):  # noqa: F811 (a fixture)
    msgs = messages(agent)
    reordered = 0
    for task in (None, *QUERIES[:3]):
        for budget in BUDGETS:
            for shares in SHARES:
                v13 = context(agent, "auto_context_v13", task, token_budget=budget, **shares)
                v14 = context(agent, "auto_context_v14", task, token_budget=budget, **shares)
                same_rows_as_v13(v14, v13)
                recent = [r for r in v14 if r["section"] == "recent"]
                reading_order(recent, msgs)
                reordered += recent != [r for r in v13 if r["section"] == "recent"]
                assert sum(r["n_tokens"] for r in v14) <= budget
    assert reordered, "v13's Recent was in reading order everywhere: the test compares nothing"


def test_the_demo_session_reads_forwards(agent):  # noqa: F811 (a fixture)
    """The case seen in `make demo`: the flaky-test session's Recent rows, as they happened."""
    v14 = context(agent, "auto_context_v14", "deploy the API to staging", token_budget=2000)
    recent = [r["content"] for r in v14 if r["section"] == "recent"]
    first = next(i for i, c in enumerate(recent) if c.startswith("User: CI is red"))
    last = next(i for i, c in enumerate(recent) if c.startswith("User: Fix that one too then."))
    assert first < last
    v13 = [r["content"] for r in context(agent, "auto_context_v13", "deploy the API to staging",
                                          token_budget=2000) if r["section"] == "recent"]
    assert v13.index(recent[last]) < v13.index(recent[first])      # v13: backwards


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


def test_a_chats_recent_passages_in_order(chat):
    """A chat's windows come as passages of turns (message_ids, no whole chunk): placed by
    their first turn."""
    msgs = {r[0]: {"seq": r[1]} for r in chat.execute(
        "select message_id, seq from recall.messages where agent_id = %s", [CHAT_AGENT])}
    seen = 0
    for budget in (80, 200, 400, 800):
        query = chat_args("coupon deploy")
        args = {"agent_id": CHAT_AGENT, "task_text": query["query_text"],
                "task_embedding": query["query_embedding"], "token_budget": budget,
                "recent_share": 1.0, "failure_share": 0.0, "as_of": "2026-04-01"}
        v13, v14 = call(chat, "auto_context_v13", **args), call(chat, "auto_context_v14", **args)
        same_rows_as_v13(v14, v13)
        recent = [r for r in v14 if r["section"] == "recent"]
        reading_order(recent, msgs)
        seen += len(recent)
    assert seen
