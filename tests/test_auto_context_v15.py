"""Release v15: auto_context_v15 is v14's with Recent filled turn by turn, turn pairs too, where
v14 took a turn pair whole: the turns Recent shows of one session with no text message between
them (tool calls and thinking aside) are one passage, one row (`make demo`: the flaky-test
session was three rows, two turn pairs and the answer between them). An agent's question still
comes only with its answer (the fill's rule since v13). Pinned is v14's; with no Recent the
whole context is v14's; where Recent shows the same messages as v14, so are Related and
Failures. The stable name calls v15. (SQL logic: the hash embedder's vectors, over the Claude
Code sessions `make demo` imports and test_recall_v5's chat in windows.)"""

from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector
from test_auto_context_v14 import reading_order
from test_recall_v5 import AGENT as CHAT_AGENT
from test_recall_v5 import call, chat_url  # noqa: F401 (chat_url: a fixture)
from test_recall_v7 import args_for as chat_args
from test_recall_v13 import QUERIES, agent, agent_url, answers, check, context, messages  # noqa: F401 (fixtures)

BUDGETS = (60, 300, 1000, 2000, 4000)
SHARES = ({}, {"recent_share": 0.6}, {"recent_share": 1.0, "failure_share": 0.0})


def section(rows, name):
    return [r for r in rows if r["section"] == name]


def without_totals(rows):
    return [{**r, "cumulative_tokens": 0} for r in rows]


def text(recent):
    """Each session's text as Recent reads it: its rows' contents one after another."""
    sessions = list(dict.fromkeys(r["session_id"] for r in recent))
    return [(s, "\n\n".join(r["content"] for r in recent if r["session_id"] == s)) for s in sessions]


def apart(recent, msgs) -> int:
    """How many rows of Recent (in its order) continue the passage of the row before: the same
    session, and the text message before its first turn is the last turn of that row."""
    joined = 0
    for a, b in zip(recent, recent[1:], strict=False):
        if a["session_id"] != b["session_id"] or not a["message_ids"] or not b["message_ids"]:
            continue
        last = max(msgs[m]["seq"] for m in a["message_ids"] if msgs[m]["kind"] == "text")
        first = min(b["message_ids"], key=lambda m: msgs[m]["seq"])
        joined += msgs[first]["prev_text"] == last
    return joined


def test_recent_is_a_passage_a_run_of_turns(agent):  # noqa: F811 (a fixture)
    msgs, pairs = messages(agent), answers(agent)
    fewer_rows = same_messages = 0
    for task in (None, *QUERIES[:3]):
        for budget in BUDGETS:
            for shares in SHARES:
                v14 = context(agent, "auto_context_v14", task, token_budget=budget, **shares)
                v15 = context(agent, "auto_context_v15", task, token_budget=budget, **shares)
                assert context(agent, "auto_context", task, token_budget=budget, **shares) == v15
                assert sum(r["n_tokens"] for r in v15) <= budget
                assert sum(r["n_tokens"] for r in v15) == (v15[-1]["cumulative_tokens"] if v15 else 0)
                held = [m for r in v15 for m in r["message_ids"] or ()]
                assert len(held) == len(set(held)), "a message shown twice"
                assert section(v15, "pinned") == section(v14, "pinned")
                recent = section(v15, "recent")
                # each passage one run of a session's text messages, a question with its answer
                check(agent, recent, budget, msgs, pairs, whole=False)
                reading_order(recent, msgs)
                assert apart(recent, msgs) == 0, "two rows of Recent that are one passage"
                old = section(v14, "recent")
                fewer_rows += len(recent) < len(old)
                if sorted(m for r in recent for m in r["message_ids"]) == \
                        sorted(m for r in old for m in r["message_ids"]):
                    same_messages += 1
                    assert text(recent) == text(old)
                    for name in ("related", "failures"):
                        assert without_totals(section(v15, name)) == without_totals(section(v14, name))
    assert fewer_rows, "v15's Recent never joined two of v14's rows: the test compares nothing"
    assert same_messages, "Recent never showed v14's messages: the other sections were not compared"


def test_v14s_rows_apart_where_v15_joins_them(agent):  # noqa: F811 (a fixture)
    """What the release is about: v14's Recent holds rows of one session with no text message
    between them; v15's none (above), at the same budgets."""
    msgs = messages(agent)
    joined = sum(apart(section(context(agent, "auto_context_v14", task, token_budget=budget), "recent"), msgs)
                 for task in (None, *QUERIES[:3]) for budget in BUDGETS)
    assert joined > 0


@pytest.mark.parametrize("task", [None, "deploy the API to staging"])
def test_without_recent_the_context_is_v14s(agent, task):  # noqa: F811 (a fixture)
    for budget in BUDGETS:
        for shares in ({"recent_share": 0.0}, {"recent_share": 0.0, "failure_share": 0.5}):
            v15 = context(agent, "auto_context_v15", task, token_budget=budget, **shares)
            assert v15 == context(agent, "auto_context_v14", task, token_budget=budget, **shares)
            assert not section(v15, "recent")


def test_the_demo_session_is_one_passage(agent):  # noqa: F811 (a fixture)
    """The case seen in `make demo`: the flaky-test session, three rows in v14 (its two turn
    pairs and the answer after the tool calls between them), is one row, read in order."""
    said = ("User: CI is red", "Assistant: Fixed: 200 runs", "User: Fix that one too then.",
            "Assistant: Done: the rate limiter")
    v15 = section(context(agent, "auto_context", "deploy the API to staging", token_budget=2000), "recent")
    rows = [r["content"] for r in v15 if any(s in r["content"] for s in said)]
    assert len(rows) == 1
    assert [rows[0].index(s) for s in said] == sorted(rows[0].index(s) for s in said)
    v14 = section(context(agent, "auto_context_v14", "deploy the API to staging", token_budget=2000), "recent")
    assert len([r for r in v14 if any(s in r["content"] for s in said)]) == 3


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


def test_a_chats_recent_is_passages_in_order(chat):
    """A chat's Recent (its windows were filled turn by turn already, its sessions of one
    user's turn pairs now are too): passages of runs of turns, in reading order, each turn
    once, none that continues the row before; where v14 showed the same turns, v14's text
    (its rows of a session joined)."""
    msgs = {r[0]: dict(zip(("seq", "kind", "prev_text"), r[1:], strict=True)) for r in chat.execute(
        "select message_id, seq, kind, (select max(p.seq) from recall.messages p "
        "  where p.agent_id = m.agent_id and p.session_id = m.session_id and p.seq < m.seq "
        "    and p.kind = 'text') "
        "from recall.messages m where agent_id = %s", [CHAT_AGENT])}
    seen = same = 0
    for budget in (80, 200, 400, 800):
        for task in ("coupon deploy", None):
            args = {"agent_id": CHAT_AGENT, "token_budget": budget, "recent_share": 1.0,
                    "failure_share": 0.0, "as_of": "2026-04-01"}
            if task:
                query = chat_args(task)
                args |= {"task_text": query["query_text"], "task_embedding": query["query_embedding"]}
            v15 = call(chat, "auto_context_v15", **args)
            recent = section(v15, "recent")
            assert sum(r["n_tokens"] for r in v15) <= budget
            held = [m for r in recent for m in r["message_ids"]]
            assert len(held) == len(set(held))
            reading_order(recent, msgs)
            assert apart(recent, msgs) == 0
            old = section(call(chat, "auto_context_v14", **args), "recent")
            if sorted(held) == sorted(m for r in old for m in r["message_ids"]):
                same += 1
                assert text(recent) == text(old)
            seen += len(recent)
    assert seen and same
