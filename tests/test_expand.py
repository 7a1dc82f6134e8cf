"""recall.expand (`pyrecall expand`, Recall.expand, the MCP tool `expand`): what was said around
a recalled chunk, within a token budget — the chunk's messages, then its session's others of the
kinds asked, nearest first, one side after the other, each side contiguous. (SQL logic: the
hash embedder's counts, over the Claude Code sessions `make demo` imports.)"""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from click.testing import CliRunner
from test_recall_v13 import AGENT, agent, agent_url  # noqa: F401 (fixtures)

from pyrecall._errors import ConfigError, NotFoundError
from pyrecall.cli import main
from pyrecall.client import AsyncRecall, Recall

BUDGETS = (5, 40, 150, 400, 1500, 100_000)
ALL = ["text", "thinking", "tool_call", "tool_result"]


def expand(conn, chunk_id, budget, kinds=None):
    args = [AGENT, chunk_id, budget] + ([kinds] if kinds is not None else [])
    cur = conn.execute(f"select * from recall.expand({', '.join(['%s'] * len(args))})", args)
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def session_messages(conn, session_id):
    return conn.execute("select message_id, seq, kind, n_tokens from recall.messages "
                        "where agent_id = %s and session_id = %s order by seq", [AGENT, session_id]).fetchall()


def test_the_chunk_then_its_neighbours_nearest_first_within_the_budget(agent):  # noqa: F811 (a fixture)
    chunks = agent.execute("select chunk_id, session_id, message_ids from recall.chunks "
                           "where agent_id = %s and cardinality(message_ids) > 0 order by chunk_id",
                           [AGENT]).fetchall()
    assert len(chunks) > 40
    grown = cut = 0
    for chunk_id, session_id, own in chunks:
        msgs = session_messages(agent, session_id)
        seqs = {m[0]: m[1] for m in msgs}
        lo, hi = min(seqs[i] for i in own), max(seqs[i] for i in own)
        for budget in BUDGETS:
            for kinds in (None, ALL):
                rows = expand(agent, chunk_id, budget, kinds)
                assert rows, (chunk_id, budget)
                assert {r["session_id"] for r in rows} == {session_id}
                assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)
                assert rows[-1]["cumulative_tokens"] == sum(r["n_tokens"] for r in rows) <= budget
                assert all(r["in_chunk"] == (r["message_id"] in own) for r in rows)
                # a message costs the model's count where it has one (here, the text turns)
                counted = {m[0]: m[3] for m in msgs if m[3] is not None}
                trimmed = len(rows) == 1 and rows[0]["n_tokens"] < (counted.get(rows[0]["message_id"]) or 0)
                assert trimmed or all(r["n_tokens"] == counted[r["message_id"]]
                                      for r in rows if r["message_id"] in counted)
                wanted = {"text"} if kinds is None else set(ALL)
                assert all(r["in_chunk"] or r["kind"] in wanted for r in rows)
                taken = [r for r in rows if not r["in_chunk"]]
                if taken:
                    # the chunk whole; each side a run of the session's messages of those kinds
                    # that starts next to the chunk
                    assert {r["message_id"] for r in rows if r["in_chunk"]} == set(own)
                    outside = [m for m in msgs if m[0] not in own and m[2] in wanted]
                    before = [m[1] for m in outside if m[1] < lo][::-1]
                    after = [m[1] for m in outside if m[1] > hi]
                    got_before = sorted((r["seq"] for r in taken if r["seq"] < lo), reverse=True)
                    got_after = sorted(r["seq"] for r in taken if r["seq"] > hi)
                    assert got_before == before[:len(got_before)]
                    assert got_after == after[:len(got_after)]
                    grown += 1
                elif len(rows) < len(own):
                    cut += 1
                # all there is, when it all fits
                everything = [m for m in msgs if m[0] in own or m[2] in wanted]
                if kinds is None and all(m[3] is not None for m in everything) and \
                        sum(m[3] for m in everything) <= budget:
                    assert [r["message_id"] for r in rows] == [m[0] for m in everything]
    assert grown > 100 and cut > 5


def test_a_chunk_too_large_comes_back_as_what_fits(agent):  # noqa: F811 (a fixture)
    chunk_id, own, tokens = agent.execute(
        "select c.chunk_id, array_agg(m.message_id order by m.seq), array_agg(m.n_tokens order by m.seq) "
        "from recall.chunks c "
        "join recall.messages m on m.agent_id = c.agent_id and m.message_id = any (c.message_ids) "
        "where c.agent_id = %s and c.kind = 'turn_pair' group by c.chunk_id "
        "having min(m.n_tokens) >= 8 and count(*) = 2 order by sum(m.n_tokens) desc limit 1", [AGENT]).fetchone()
    # the question fits, not its answer: the question alone, nothing around it
    rows = expand(agent, chunk_id, tokens[0] + 1)
    assert [r["message_id"] for r in rows] == own[:1] and rows[0]["in_chunk"]
    # not even the first: it, trimmed to the budget
    rows = expand(agent, chunk_id, tokens[0] - 3)
    assert len(rows) == 1 and rows[0]["message_id"] == own[0] and 1 <= rows[0]["n_tokens"] <= tokens[0] - 3
    full = agent.execute("select content from recall.messages where message_id = %s", [own[0]]).fetchone()[0]
    assert full.startswith(rows[0]["content"]) and len(rows[0]["content"]) < len(full)


def test_a_memory_is_itself(agent):  # noqa: F811 (a fixture)
    text = "Staging's load balancer health-checks port 8080; uvicorn must listen there. " * 6
    with agent.transaction():
        memory = agent.execute("select recall.remember(%s, %s)", [AGENT, text]).fetchone()[0]
        whole = expand(agent, memory, 1000)
        assert [(r["kind"], r["content"], r["in_chunk"], r["seq"]) for r in whole] == [("memory", text, True, None)]
        short = expand(agent, memory, 20)
        assert len(short) == 1 and short[0]["n_tokens"] <= 20 and text.startswith(short[0]["content"])
        raise psycopg.Rollback


@pytest.mark.parametrize("args, error, message", [
    ((None, 1, 100), psycopg.errors.InvalidParameterValue, "agent_id and chunk_id are required"),
    ((AGENT, None, 100), psycopg.errors.InvalidParameterValue, "agent_id and chunk_id are required"),
    ((AGENT, 1, 0), psycopg.errors.InvalidParameterValue, "token_budget must be >= 1, got 0"),
    ((AGENT, 1, None), psycopg.errors.InvalidParameterValue, "token_budget must be >= 1, got NULL"),
    ((AGENT, 1, 100, ["text", "gossip"]), psycopg.errors.InvalidParameterValue, "kinds must be among"),
    ((AGENT, 1, 100, None), psycopg.errors.InvalidParameterValue, "kinds must be among"),
    ((AGENT, 10 ** 12, 100), psycopg.errors.NoDataFound, "agent claude-code has no chunk 1000000000000"),
    (("someone-else", 1, 100), psycopg.errors.NoDataFound, "agent someone-else has no chunk 1"),
])
def test_bad_arguments(agent, args, error, message):  # noqa: F811 (a fixture)
    with pytest.raises(error, match=message):
        agent.execute(f"select * from recall.expand({', '.join(['%s'] * len(args))})", list(args))


def test_the_clients_and_the_command_line(agent, agent_url, monkeypatch):  # noqa: F811 (fixtures)
    monkeypatch.delenv("PYRECALL_AGENT", raising=False)
    chunk_id = agent.execute("select chunk_id from recall.chunks where agent_id = %s and content like "
                             "'User: Fix that one too then.%%'", [AGENT]).fetchone()[0]
    with Recall(agent_url) as r:
        rows = r.expand(AGENT, chunk_id, token_budget=400)
        assert rows == expand(agent, chunk_id, 400)
        assert [m["speaker"] for m in rows][-2:] == ["User", "Assistant"] and rows[-1]["in_chunk"]
        assert len(r.expand(AGENT, chunk_id, token_budget=400, kinds="text")) == len(rows)
        with pytest.raises(NotFoundError, match="has no chunk 999999999"):
            r.expand(AGENT, 999_999_999)
        with pytest.raises(ConfigError, match="unknown message kind.s. 'gossip'"):
            r.expand(AGENT, chunk_id, kinds=["gossip"])

    async def go():
        async with await AsyncRecall.connect(agent_url) as a:
            return await a.expand(AGENT, chunk_id, token_budget=400)
    assert asyncio.run(go()) == rows

    cli = lambda *args: CliRunner().invoke(main, [str(a) for a in args], env={"PYRECALL_DSN": agent_url})  # noqa: E731
    out = cli("expand", chunk_id, "--token-budget", 400)
    assert out.exit_code == 0, out.output
    assert out.output.startswith("# Flaky test_expired_token_rejected")
    assert f"{len(rows)} message(s) · {rows[-1]['cumulative_tokens']} token(s)" in out.output
    assert "* [" in out.output and "\nFix that one too then.\n" in out.output
    printed = json.loads(cli("expand", chunk_id, "--token-budget", 400, "--json").output)
    assert [m["message_id"] for m in printed] == [m["message_id"] for m in rows]
    every = json.loads(cli("expand", chunk_id, "--token-budget", 5000, "--kinds", "all", "--json").output)
    assert {m["kind"] for m in every} >= {"text", "tool_call", "tool_result"}
    for args, message in [(("--kinds", "text,gossip"), "unknown message kind(s) 'gossip'"),
                          (("--token-budget", 0), "0 is not in the range x>=1")]:
        bad = cli("expand", chunk_id, *args)
        assert bad.exit_code != 0 and message in bad.output and "Traceback" not in bad.output
    missing = cli("expand", 999_999_999)
    assert missing.exit_code == 1 and "Error: agent claude-code has no chunk 999999999" in missing.output
