"""The opt-in recall log: off by default; once on, each recall through the Python client writes
one row (recall.log_recall); recall.recall_stats and recall.recall_misses answer how fast, how
often and what is never found; agents see their own rows only."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import psycopg
import pytest

from pyrecall import AsyncRecall, Recall
from pyrecall import client as client_module
from pyrecall._ingest import ingest
from pyrecall.importers import discord

CHAT = Path(__file__).parent / "fixtures" / "discord_payments.json"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def set_config(conn, key, value):
    conn.execute("insert into recall.config (key, value) values (%s, %s::jsonb) "
                 "on conflict (key) do update set value = excluded.value", [key, value])


@pytest.fixture
def chat(conn, monkeypatch):
    monkeypatch.setattr(client_module, "LOG_CHECK_SECONDS", 0.0)   # every call re-reads the switch
    ingest(conn, discord.parse(CHAT).sessions, agent_id="support")
    return conn


class NoEmbedder:
    """No query embedding (keyword recall): these tests are about the log, not the ranking."""

    model = "none/none"
    dim = 384

    def embed(self, texts):
        from pyrecall import EmbeddingError
        raise EmbeddingError("no model in this test")

    async def aembed(self, texts):
        return self.embed(texts)


def log_rows(conn):
    return conn.execute("select agent_id, function, n_rows, tokens, source, query_hash, query_text, "
                        "latency_ms > 0 from recall.recall_log order by log_id").fetchall()


def test_off_by_default(chat, db_url):
    with Recall(db_url, embedder=NoEmbedder(), migrate=False) as r:
        assert len(r.recall("support", "refund webhook")) > 0
    assert log_rows(chat) == []
    assert chat.execute("select recall.log_recall('support', 'hybrid_recall', 1, 0)").fetchone()[0] is False


def test_each_recall_writes_one_row(chat, db_url):
    set_config(chat, "recall_log", "true")
    with Recall(db_url, embedder=NoEmbedder(), migrate=False) as r:
        found = r.recall("support", "refund webhook", k=3)
        r.recall("support", "kubernetes quota")                              # a miss
        r.session_recall("support", "refund webhook", k=2)
        r.auto_context("support", task=None, token_budget=300)
    rows = log_rows(chat)
    assert rows[0] == ("support", "hybrid_recall", len(found), found.tokens, "keyword",
                       sha("refund webhook"), None, True)
    assert rows[1][:3] == ("support", "hybrid_recall", 0) and rows[1][5] == sha("kubernetes quota")
    assert [r[1] for r in rows[2:]] == ["session_recall", "auto_context"]
    assert rows[3][5] is None and rows[3][2] > 0                          # no task: no hash
    # the text only when asked for
    set_config(chat, "recall_log_text", "true")
    with Recall(db_url, embedder=NoEmbedder(), migrate=False) as r:
        r.recall("support", "kubernetes quota")
    assert log_rows(chat)[-1][5:7] == (sha("kubernetes quota"), "kubernetes quota")

    stats = chat.execute("select function, calls, misses, miss_rate::float8, p50_ms > 0, avg_rows, keyword_only "
                         "from recall.recall_stats where agent_id = 'support' order by function").fetchall()
    assert [s[:4] for s in stats] == [("auto_context", 1, 0, 0), ("hybrid_recall", 3, 2, pytest.approx(0.667)),
                                      ("session_recall", 1, 0, 0)]
    assert all(s[4] for s in stats)
    misses = chat.execute("select function, query_hash, query_text, times from recall.recall_misses").fetchall()
    assert misses == [("hybrid_recall", sha("kubernetes quota"), "kubernetes quota", 2)]


def test_switching_off_stops_it(chat, db_url):
    set_config(chat, "recall_log", "true")
    with Recall(db_url, embedder=NoEmbedder(), migrate=False) as r:
        r.recall("support", "refund")
        set_config(chat, "recall_log", "false")
        r.recall("support", "refund")
    assert len(log_rows(chat)) == 1


def test_the_switch_is_read_at_most_every_few_seconds(chat, db_url, monkeypatch):
    """Statements a recall sends: the recall itself, the switch and the agent's stored model
    (recall.embedding_model) when they are due, one INSERT when the log is on, and the client's
    first recall by keywords while its query is embedded (Recall._warm_backend)."""
    monkeypatch.setattr(client_module, "LOG_CHECK_SECONDS", 3600.0)
    with Recall(db_url, embedder=NoEmbedder(), migrate=False) as r:
        sent = []
        real = r.conn.execute

        def spy(query, *a, **kw):
            sent.append(str(query))
            return real(query, *a, **kw)
        r.conn.execute = spy
        r.recall("support", "refund")
        r.recall("support", "refund")
        assert sum("recall.config" in s for s in sent) == 1
        assert sum("recall.embedding_model" in s for s in sent) == 1
        assert not any("log_recall" in s for s in sent)     # off: no INSERT at all
        assert sum("hybrid_recall" in s for s in sent) == 3  # the warm-up, then the two recalls
        assert len(sent) == 5


def test_agent_roles_log_their_own_agent_only(chat, db_url):
    """An agent role: its rows are logged; a recall of another agent's id is refused
    (42501, since v6; v5 returned nothing) and logs nothing; the agent sees only its own log
    rows."""
    set_config(chat, "recall_log", "true")
    chat.execute("insert into recall.recall_log (agent_id, function, latency_ms, n_rows, query_text) "
                 "values ('other', 'hybrid_recall', 1, 0, 'private question')")
    with Recall(db_url, embedder=NoEmbedder(), migrate=False) as r:
        r.conn.execute("set role recall_agent")
        r.conn.execute("select set_config('recall.agent_id', 'support', false)")
        assert len(r.recall("support", "refund webhook")) > 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with r.conn.transaction():                    # as the MCP server calls: in a transaction
                r.recall("other", "private")
        assert r.conn.execute("select count(*) from recall.recall_log").fetchone()[0] == 1
        assert r.conn.execute("select agent_id, query_text from recall.recall_log").fetchall() == [("support", None)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            r.conn.execute("select * from recall.recall_stats")
    assert [r[0] for r in log_rows(chat)] == ["other", "support"]


def test_not_written_on_a_read_only_transaction(chat, db_url):
    set_config(chat, "recall_log", "true")
    with Recall(db_url, embedder=NoEmbedder(), migrate=False) as r:
        with r.conn.transaction():
            r.conn.execute("set transaction read only")
            assert len(r.recall("support", "refund webhook")) > 0
    assert log_rows(chat) == []


def test_async_client_logs_too(chat, db_url):
    set_config(chat, "recall_log", "true")

    async def main():
        async with await AsyncRecall.connect(db_url, embedder=NoEmbedder()) as a:
            await a.recall("support", "refund webhook", k=2)
            await a.auto_context("support", task="refund", token_budget=200)
    asyncio.run(main())
    assert [(r[1], r[5]) for r in log_rows(chat)] == [("hybrid_recall", sha("refund webhook")),
                                                      ("auto_context", sha("refund"))]


def test_log_recall_refuses_missing_arguments(chat):
    set_config(chat, "recall_log", "true")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="are required"):
        chat.execute("select recall.log_recall('support', null, 1, 0)")
