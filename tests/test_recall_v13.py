"""Release v13: hybrid_recall_v13, session_recall_v13 and auto_context_v13 are v11's and v12's
whose budget fill (recall._fill_v13) never shows an agent's question without its answer and
joins turns across the tool calls between them: two taken turns of a session are one passage
when no text message lies between them; the user turn of a turn pair is taken only with its
answer (both fit or neither), unless the context holds the answer already. A chat in windows has neither: its
contexts are v11's. The stable names call v13. (SQL logic: the hash embedder's vectors, over
the Claude Code sessions `make demo` imports.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg
import pytest
from conftest import drop_database, new_database
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector
from test_recall_v5 import AGENT as CHAT_AGENT
from test_recall_v5 import CASES, call, chat_url, passage_text  # noqa: F401 (chat_url: a fixture)
from test_recall_v7 import QUERIES as CHAT_QUERIES
from test_recall_v7 import args_for as chat_args

from pyrecall._ingest import ingest
from pyrecall._worker import Worker
from pyrecall.importers import claude_code

AGENT = "claude-code"
SESSIONS = Path(__file__).resolve().parent.parent / "examples" / "sessions" / "acme-api"
QUERIES = ["deploy the API to staging", "why did the alpine build fail?", "JWT secret in the tests",
           "flaky expired token test", "refresh tokens migration NOT NULL", "commit it"]
BUDGETS = (40, 120, 300, 600, 1500, 4000)


@pytest.fixture(scope="module")
def agent_url(server_url, template_url):
    """The four Claude Code sessions of examples/sessions (turn pairs with tool calls and
    thinking between question and answer, answers in several texts), embedded with the hash
    embedder (the messages' n_tokens its counts)."""
    url = new_database(server_url)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        sessions = [s for f in sorted(SESSIONS.glob("*.jsonl")) for s in claude_code.parse(f).sessions]
        ingest(conn, sessions, agent_id=AGENT)
        Worker(conn, FakeEmbedder(), agent=AGENT).run()
        assert conn.execute("select count(*) filter (where embedding is null or n_tokens is null) "
                            "from recall.chunks").fetchone()[0] == 0
    yield url
    drop_database(server_url, url)


@pytest.fixture
def agent(agent_url):
    with psycopg.connect(agent_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


def args_for(q, **kw):
    return {"agent_id": AGENT, "query_text": q, "query_embedding": np.asarray(FakeEmbedder().vector(q)), **kw}


def messages(conn):
    """Per message: its session, seq, kind, tokens, and the text message before it in its session."""
    rows = conn.execute(
        "select message_id, session_id, seq, kind, n_tokens, "
        "       (select max(p.seq) from recall.messages p where p.agent_id = m.agent_id "
        "          and p.session_id = m.session_id and p.seq < m.seq and p.kind = 'text') "
        "from recall.messages m where agent_id = %s", [AGENT]).fetchall()
    return {r[0]: dict(zip(("session", "seq", "kind", "tokens", "prev_text"), r[1:], strict=True)) for r in rows}


def answers(conn):
    """Each question (the user turn of a turn pair) and its answer."""
    return dict(conn.execute(
        "select q.message_id, a.message_id from recall.chunks c "
        "join recall.messages q on q.agent_id = c.agent_id and q.message_id = any (c.message_ids) and q.role = 'user' "
        "join recall.messages a on a.agent_id = c.agent_id and a.message_id = any (c.message_ids) "
        "  and a.role = 'assistant' "
        "where c.agent_id = %s and c.kind = 'turn_pair'", [AGENT]).fetchall())


def check(conn, rows, budget, msgs, pairs, *, whole=True):
    """The fill's contract: within the budget, each message once, a passage's turns a run of
    one session's text messages with none between them, written and counted as its turns; a
    question with its answer in one passage. Returns how many questions the rows hold."""
    assert sum(r["n_tokens"] for r in rows) <= budget
    if whole and rows:
        assert sum(r["n_tokens"] for r in rows) == rows[-1]["cumulative_tokens"]
    held = [m for r in rows for m in r["message_ids"] or ()]
    assert len(held) == len(set(held)), "a message paid twice"
    questions = 0
    for r in rows:
        ids = r["message_ids"]
        if r["metadata"].get("trimmed_from_tokens") is not None:
            continue
        if r["metadata"].get("merged_chunk_ids") is not None:          # a passage
            where = [msgs[m] for m in ids]
            assert {w["session"] for w in where} == {r["session_id"]}
            assert all(w["kind"] == "text" for w in where)
            assert all(b["prev_text"] == a["seq"] for a, b in zip(where, where[1:], strict=False)), \
                "a passage's turns are not one run of text messages"
            assert r["content"] == passage_text(conn, ids, False)
            assert r["n_tokens"] == sum(w["tokens"] for w in where)
        if r["metadata"].get("merged_chunk_ids") is None and r["kind"] != "turn_pair":
            continue                  # a code block, a tool call, a memory: not a turn
        for m in ids or ():
            if m in pairs:
                questions += 1
                assert pairs[m] in ids, "a question without its answer"
    return questions


def v11_faults(rows, msgs, pairs):
    """What v13 changes in a v11/v12 context: a question held without its answer, or with it
    but in another row (tool calls between them part a passage)."""
    where = {m: i for i, r in enumerate(rows) for m in r["message_ids"] or ()
             if r["metadata"].get("merged_chunk_ids") is not None or r["kind"] == "turn_pair"}
    return sum(q in where and where.get(a) != where[q] for q, a in pairs.items())


def test_the_sessions_have_what_the_release_is_about(agent):
    """Questions whose answer comes after tool calls or thinking (else v13 would change nothing
    here)."""
    msgs, pairs = messages(agent), answers(agent)
    apart = sum(msgs[a]["seq"] > msgs[q]["seq"] + 1 for q, a in pairs.items())
    assert len(pairs) >= 6 and apart >= 4


@pytest.mark.parametrize("fn", ["hybrid_recall", "session_recall"])
def test_a_question_comes_with_its_answer_in_one_passage(agent, fn):
    msgs, pairs = messages(agent), answers(agent)
    faults = questions = 0
    for q in QUERIES:
        for budget in BUDGETS:
            args = args_for(q, k=30, token_budget=budget)
            with agent.transaction():
                rows = call(agent, f"{fn}_v13", **args)
                v11 = call(agent, f"{fn}_v11", **args)
                assert call(agent, fn, **args) == rows             # the stable name calls v13
            assert rows
            questions += check(agent, rows, budget, msgs, pairs)
            faults += v11_faults(v11, msgs, pairs)
            assert v11_faults(rows, msgs, pairs) == 0
    assert questions, "no context held a question: the rule is untested"
    assert faults, "v11 never parted a question from its answer: the test compares nothing"


@pytest.mark.parametrize("fn", ["hybrid_recall", "session_recall"])
@pytest.mark.parametrize("case", [dict(), dict(k=3), dict(kinds=["turn_pair", "tool"])])
def test_without_a_budget_the_rows_are_v11s(agent, fn, case):
    for q in QUERIES:
        with agent.transaction():
            v13 = call(agent, f"{fn}_v13", **args_for(q, **case))
            assert v13 and v13 == call(agent, f"{fn}_v11", **args_for(q, **case))
            assert call(agent, fn, **args_for(q, **case)) == v13


def test_the_values_are_v11s_a_question_alone_gives_way(agent):
    """v13 values every unit as v11 does: where v11's context holds no question, v13's is the
    same; where it held one without its answer, v13 takes the pair if both fit, else neither."""
    pairs = answers(agent)
    same = 0
    for q in QUERIES:
        for budget in BUDGETS:
            args = args_for(q, k=30, token_budget=budget)
            v11 = call(agent, "hybrid_recall_v11", **args)
            v13 = call(agent, "hybrid_recall_v13", **args)
            held11 = {m for r in v11 for m in r["message_ids"]}
            held13 = {m for r in v13 for m in r["message_ids"]}
            if not held11 & set(pairs) and not held13 & set(pairs):
                # the same messages, in passages that may join across tool calls
                assert held13 == held11
                same += 1
            for question in held13 & set(pairs):
                assert pairs[question] in held13
    assert same


def test_when_not_one_unit_fits_the_best_is_trimmed(agent):
    """At a budget below most units' size: v11's context (the best unit that fits, else the best
    trimmed: its values are v11's), but where v11 showed a short question whole (its answer
    left out), v13 shows no question alone."""
    msgs, pairs = messages(agent), answers(agent)
    same = alone = 0
    for q in QUERIES:
        args = args_for(q, k=30, token_budget=6)
        with agent.transaction():                           # one now(): the same recency
            v11 = call(agent, "hybrid_recall_v11", **args)
            v13 = call(agent, "hybrid_recall_v13", **args)
        assert len(v13) == 1 and 6 >= v13[0]["n_tokens"] > 0
        if "trimmed_from_tokens" not in v13[0]["metadata"]:     # a unit of 6 tokens or less
            assert not set(v13[0]["message_ids"]) & set(pairs)
        if v13 == v11:
            same += 1
        else:
            (old,) = v11
            assert "trimmed_from_tokens" not in old["metadata"] and old["message_ids"][0] in pairs
            assert msgs[old["message_ids"][0]]["tokens"] <= 6 < v13[0]["metadata"]["trimmed_from_tokens"]
            alone += 1
    assert same and alone


def test_a_chat_in_windows_is_v11s(chat):
    """A chat between people has no turn pairs and no tool calls: v13's contexts of its windows
    are v11's, row for row."""
    for q in CHAT_QUERIES:
        for budget in (12, 40, 120, 300, 900):
            args = chat_args(q, k=30, kinds=["window"], token_budget=budget, as_of="2026-03-05")
            assert call(chat, "hybrid_recall_v13", **args) == call(chat, "hybrid_recall_v11", **args)
            assert call(chat, "session_recall_v13", **args) == call(chat, "session_recall_v11", **args)


@pytest.mark.parametrize("case", CASES)
def test_the_chat_fixture_keeps_v11s_contract(chat, case):
    """The chat fixture's turn pairs (no tool calls between): every context within its budget,
    each message once, a question only with its answer; where v11 took no question alone, v13's
    rows are v11's."""
    pairs = dict(chat.execute("select q.message_id, a.message_id from recall.chunks c "
                              "join recall.messages q on q.message_id = c.message_ids[1] "
                              "join recall.messages a on a.message_id = c.message_ids[2] "
                              "where c.kind = 'turn_pair' and q.role = 'user'").fetchall())
    assert pairs
    equal = 0
    for q in CHAT_QUERIES:
        for budget in (40, 120, 300, 900):
            args = {**chat_args(q, **case), "token_budget": budget, "as_of": "2026-03-05"}
            for fn in ("hybrid_recall", "session_recall"):
                v11 = call(chat, f"{fn}_v11", **args)
                v13 = call(chat, f"{fn}_v13", **args)
                held = [m for r in v13 for m in r["message_ids"]]
                assert len(held) == len(set(held)) and sum(r["n_tokens"] for r in v13) <= budget
                assert all(pairs[m] in held for m in held if m in pairs)
                alone = [m for r in v11 for m in r["message_ids"] if m in pairs and pairs[m] not in r["message_ids"]]
                if not alone:
                    assert v13 == v11
                    equal += 1
    assert equal


def test_a_chat_of_people_in_turn_pairs_is_v11s(chat):
    """A question is a user's to an agent: a turn whose metadata names its speaker is a person of
    a chat (chunked in turn pairs here), whose every turn may come alone, as in v11. The same
    turn pairs without names: v13 differs from v11 somewhere (else this compares nothing)."""
    def contexts():
        out = []
        for q in CHAT_QUERIES:
            for budget in (12, 40, 120, 300):
                args = chat_args(q, k=30, token_budget=budget, as_of="2026-03-05")
                with chat.transaction():
                    out.append([call(chat, f"{fn}_{v}", **args) for fn in ("hybrid_recall", "session_recall")
                                for v in ("v11", "v13")])
        return out
    assert any(h11 != h13 or s11 != s13 for h11, h13, s11, s13 in contexts())
    with chat.transaction(force_rollback=True):
        chat.execute("update recall.messages set metadata = metadata || jsonb_build_object("
                     "'speaker', case role when 'user' then 'Ann' else 'Bob' end) "
                     "where session_id <> 'chat'")
        for h11, h13, s11, s13 in contexts():
            assert h13 == h11 and s13 == s11


def context(conn, fn, task, **kw):
    args = {"agent_id": AGENT, "as_of": "2026-03-20", "project": "/home/dev/acme-api", **kw}
    if task:
        args |= {"task_text": task, "task_embedding": args_for(task)["query_embedding"]}
    return call(conn, fn, **args)


def test_auto_context_related_keeps_a_question_with_its_answer(agent):
    """auto_context_v13 is v12's calling the new fill: Pinned and Failures v12's, Recent the
    same messages (turn pairs whole already), Related never a question without its answer nor
    a question and its answer apart (the stable name: tests/test_auto_context_v15.py)."""
    msgs, pairs = messages(agent), answers(agent)
    faults = 0
    for task in (None, *QUERIES):
        for budget in (60, 300, 1000, 2000, 4000):
            for shares in ({}, {"recent_share": 0.0, "failure_share": 0.0}):
                v12 = context(agent, "auto_context_v12", task, token_budget=budget, **shares)
                v13 = context(agent, "auto_context_v13", task, token_budget=budget, **shares)
                for name in ("pinned", "failures"):       # (their cumulative_tokens: after Related's)
                    assert [{**r, "cumulative_tokens": 0} for r in v13 if r["section"] == name] == \
                        [{**r, "cumulative_tokens": 0} for r in v12 if r["section"] == name]
                recent = [sorted(m for r in rows if r["section"] == "recent" for m in r["message_ids"])
                          for rows in (v12, v13)]
                assert recent[0] == recent[1]
                related = [r for r in v13 if r["section"] == "related"]
                check(agent, related, budget, msgs, pairs, whole=False)
                assert v11_faults(related, msgs, pairs) == 0
                faults += v11_faults([r for r in v12 if r["section"] == "related"], msgs, pairs)
                assert sum(r["n_tokens"] for r in v13) <= budget
    assert faults, "v12's Related never parted a question from its answer: the test compares nothing"


def test_bad_arguments_are_v11s_errors(agent):
    for fn in ("hybrid_recall", "session_recall"):
        for bad in ({"token_budget": -1}, {"token_budget": 100, "turn_vector_weight": -1.0},
                    {"token_budget": 100, "turn_speaker_weight": float("nan")}):
            errors = []
            for v in ("v11", "v13"):
                with pytest.raises(psycopg.errors.InvalidParameterValue) as e:
                    call(agent, f"{fn}_{v}", **args_for("deploy", **bad))
                errors.append(e.value.diag.message_primary)
            assert errors[0] == errors[1]
    assert CHAT_AGENT != AGENT
