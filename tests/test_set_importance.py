"""recall.set_importance: an agent sets the importance of one of its chunks; the chunker keeps
it when it derives the chunk again; bad input and other agents' chunks are refused with their
SQLSTATE."""

from pathlib import Path

import psycopg
import pytest

from pyrecall._ingest import ingest
from pyrecall.importers import discord

CHAT = Path(__file__).parent / "fixtures" / "discord_payments.json"


@pytest.fixture
def chat(conn):
    ingest(conn, discord.parse(CHAT).sessions, agent_id="support")
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('other', 'someone-else')")
    conn.execute("insert into recall.messages (session_id, role, content) values ('other', 'user', 'secret')")
    return conn


def window(conn, first_seq=9):
    return conn.execute("select chunk_id, importance, importance_set_at is not null from recall.chunks "
                        "where kind = 'window' and first_seq = %s", [first_seq]).fetchone()


def test_set_is_kept_when_the_window_is_derived_again_and_null_resets(chat):
    chunk_id, derived, _ = window(chat)
    assert derived == 0.5
    assert chat.execute("select recall.set_importance('support', %s, 0.9)", [chunk_id]).fetchone()[0] == 0.5
    assert window(chat) == (chunk_id, pytest.approx(0.9), True)
    # a new message re-derives every window of the chat (and grows the last one): kept
    chat.execute("insert into recall.messages (session_id, role, content, created_at, metadata) values "
                 "('discord:1160000000000000002', 'user', 'one more thing', '2026-03-10 10:00+00', "
                 "'{\"author\": \"erin\"}')")
    assert window(chat) == (chunk_id, pytest.approx(0.9), True)
    assert chat.execute("select count(*) from recall.chunks where kind = 'window' and importance <> 0.5"
                        ).fetchone()[0] == 1
    # recall ranks by it: with importance alone weighed, the marked window comes first
    top = chat.execute("select chunk_id, importance from recall.hybrid_recall('support', 'refund webhook', "
                       "null, k => 1, vector_weight => 0, text_weight => 0, recency_weight => 0, "
                       "importance_weight => 1)").fetchone()
    assert top == (chunk_id, pytest.approx(0.9))
    # NULL: back to the messages' value, derived again from then on
    assert chat.execute("select recall.set_importance('support', %s, null)", [chunk_id]).fetchone()[0] == pytest.approx(0.9)
    assert window(chat) == (chunk_id, 0.5, False)
    chat.execute("update recall.messages set importance = 0.8 where external_id = '1300000000000000010'")
    assert window(chat) == (chunk_id, pytest.approx(0.8), False)


@pytest.mark.parametrize("args, sqlstate, message", [
    (("support", 1, 1.5), "22023", "importance must be between 0 and 1, got 1.5"),
    (("support", 1, -0.1), "22023", "importance must be between 0 and 1, got -0.1"),
    (("support", 1, float("nan")), "22023", "importance must be between 0 and 1, got NaN"),
    (("", 1, 0.5), "22023", "agent_id is required"),
    ((None, 1, 0.5), "22023", "agent_id is required"),
    (("support", None, 0.5), "22023", "chunk_id is required"),
    (("support", 10**12, 0.5), "P0002", "agent 'support' has no chunk 1000000000000"),
])
def test_bad_arguments(chat, args, sqlstate, message):
    with pytest.raises(psycopg.Error) as err:
        chat.execute("select recall.set_importance(%s, %s, %s)", args)
    assert (err.value.sqlstate, err.value.diag.message_primary) == (sqlstate, message)


def test_another_agents_chunk_reads_as_missing(chat):
    theirs = chat.execute("select chunk_id from recall.chunks where agent_id = 'someone-else'").fetchone()[0]
    mine = window(chat)[0]
    # named as the owner's: the agent does not own it
    with pytest.raises(psycopg.errors.NoDataFound, match=f"agent 'support' has no chunk {theirs}"):
        chat.execute("select recall.set_importance('support', %s, 0.9)", [theirs])
    # an agent role (row-level security) naming the other agent: the same as a chunk that is not there
    chat.execute("set role recall_agent")
    chat.execute("select set_config('recall.agent_id', 'support', false)")
    with pytest.raises(psycopg.errors.NoDataFound, match=f"agent 'someone-else' has no chunk {theirs}"):
        chat.execute("select recall.set_importance('someone-else', %s, 0.9)", [theirs])
    assert chat.execute("select recall.set_importance('support', %s, 0.7)", [mine]).fetchone()[0] == 0.5
    chat.execute("reset role")
    assert chat.execute("select importance from recall.chunks where chunk_id = %s", [theirs]).fetchone()[0] == 0.5
    assert window(chat)[1] == pytest.approx(0.7)


def test_comment_names_the_sqlstates(chat):
    comment = chat.execute("select obj_description('recall.set_importance(text, bigint, float8)'::regprocedure)"
                           ).fetchone()[0]
    assert "22023" in comment and "P0002" in comment


def test_python_clients(chat, db_url):
    import asyncio

    from pyrecall import AsyncRecall, NotFoundError, Recall

    chunk_id = window(chat)[0]
    with Recall(db_url, migrate=False) as r:
        assert r.set_importance("support", chunk_id, 0.75) == 0.5
        assert r.set_importance("support", chunk_id, None) == pytest.approx(0.75)
        with pytest.raises(NotFoundError, match="agent 'nobody' has no chunk"):
            r.set_importance("nobody", chunk_id, 0.2)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="between 0 and 1"):
            r.set_importance("support", chunk_id, 2)

    async def main():
        async with await AsyncRecall.connect(db_url) as a:
            before = await a.set_importance("support", chunk_id, 1)
            with pytest.raises(NotFoundError):
                await a.set_importance("support", 10**12, 0.5)
            return before
    assert asyncio.run(main()) == 0.5
    assert window(chat)[1:] == (1.0, True)
