"""Agent-first keys (sql/incremental/010-agent-first-keys.sql): every key of a per-agent table
holds agent_id, and everything that writes or looks up through a key works when a session id
is unique within its agent only, as on a Citus cluster (where UNIQUE (session_id) cannot be
kept): the ON CONFLICT targets match the agent-first keys, the chunker, the summaries and the
memories keep two agents' sessions of the same id apart."""

from __future__ import annotations

import psycopg
import pytest
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector

from pyrecall import ConfigError, NotFoundError, _summarize
from pyrecall._ingest import ingest
from pyrecall._worker import Worker
from pyrecall.client import Recall
from pyrecall.importers._records import Message, Session

PER_AGENT = ("sessions", "messages", "chunks", "source_files", "recall_log")


def test_every_key_of_a_per_agent_table_holds_agent_id(conn):
    """The keys Citus can enforce on tables distributed by agent_id (a new table or key
    without agent_id fails here); UNIQUE (session_id) is the one node's alone."""
    rows = conn.execute(
        """select c.conrelid::regclass::text, c.conname, c.contype,
                  array(select a.attname::text from unnest(c.conkey) with ordinality k(n, i)
                        join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.n
                        order by k.i) as cols,
                  c.confrelid::regclass::text
           from pg_constraint c
           where c.conrelid = any(%s::regclass[]) and c.contype in ('p', 'u', 'f')""",
        [[f"recall.{t}" for t in PER_AGENT]]).fetchall()
    assert {r[0] for r in rows if r[2] == "p"} == {f"recall.{t}" for t in PER_AGENT}
    lacking = [r[1] for r in rows if "agent_id" not in r[3]]
    assert lacking == ["sessions_session_id_key"]
    fkeys = {r[1]: (r[3], r[4]) for r in rows if r[2] == "f"}
    assert fkeys == {"messages_session_fkey": (["agent_id", "session_id"], "recall.sessions"),
                     "chunks_session_fkey": (["agent_id", "session_id"], "recall.sessions")}


@pytest.fixture
def cluster_like(db_url):
    """A database whose session ids are unique within their agent only (UNIQUE (session_id)
    dropped, as recall.distribute() does on Citus), and two agents holding the session 'shared'."""
    with psycopg.connect(db_url, autocommit=True) as c:
        register_vector(c)
        c.execute("alter table recall.sessions drop constraint sessions_session_id_key")
        for agent, topic in (("ann", "kubernetes ingress"), ("bob", "postgres replication")):
            c.execute("insert into recall.sessions (session_id, agent_id, title, project) "
                      "values ('shared', %s, %s, 'infra')", [agent, f"{topic} night"])
            c.execute("insert into recall.messages (session_id, agent_id, role, kind, content, metadata) "
                      "values ('shared', %s, 'user', 'text', %s, '{}'), "
                      "       ('shared', %s, 'assistant', 'text', %s, '{}'), "
                      "       ('shared', %s, 'assistant', 'tool_call', 'kubectl get pods', '{\"tool_use_id\": \"t\"}'), "
                      "       ('shared', %s, 'tool', 'tool_result', 'all running', '{\"tool_use_id\": \"t\"}')",
                      [agent, f"the {topic} broke again", agent, f"fixed the {topic} config", agent, agent])
        yield c


def chunks_of(conn, agent, kind=None):
    if kind:
        return [r[3] for r in chunks_of(conn, agent) if r[0] == kind]
    return conn.execute("select kind, first_seq, part, content from recall.chunks "
                        "where agent_id = %s and session_id = 'shared' order by 1, 2, 3", [agent]).fetchall()


def test_two_agents_same_session_id_are_kept_apart(cluster_like, db_url):
    conn = cluster_like
    ann, bob = chunks_of(conn, "ann"), chunks_of(conn, "bob")
    assert [r[:3] for r in ann] == [r[:3] for r in bob] == [("tool", 3, 0), ("turn_pair", 1, 0)]
    assert "kubernetes" in ann[1][3] and "postgres" in bob[1][3]
    assert not any("postgres" in r[3] for r in ann)
    # messages number per (agent, session); a re-insert is a no-op for its agent only
    conn.execute("insert into recall.messages (session_id, agent_id, role, content) "
                 "values ('shared', 'ann', 'user', 'and the ingress again?')")
    seqs = dict(conn.execute("select agent_id, max(seq) from recall.messages group by agent_id").fetchall())
    assert seqs == {"ann": 5, "bob": 4}
    assert [r[:2] for r in chunks_of(conn, "bob")] == [r[:2] for r in bob]           # bob's untouched
    # a message without its agent is ambiguous now: one clear error, nothing written
    with pytest.raises(psycopg.errors.CheckViolation, match="held by 2 agents: give the message its agent_id"):
        conn.execute("insert into recall.messages (session_id, role, content) values ('shared', 'user', 'x')")
    # an update of one agent's message re-chunks that agent's session only (trigger path)
    conn.execute("update recall.messages set content = 'the ingress broke on Friday' "
                 "where agent_id = 'ann' and seq = 1")
    assert "Friday" in chunks_of(conn, "ann", "turn_pair")[0]
    assert "Friday" not in " ".join(r[3] for r in chunks_of(conn, "bob"))
    # a session's metadata change re-chunks its agent's chunks only
    conn.execute("update recall.sessions set project = 'edge' where agent_id = 'bob'")
    projects = dict(conn.execute("select agent_id, array_agg(distinct metadata->>'project') from recall.chunks "
                                 "where session_id = 'shared' group by agent_id").fetchall())
    assert projects == {"ann": ["infra"], "bob": ["edge"]}
    # deleting one agent's session cascades to its rows only
    conn.execute("delete from recall.sessions where agent_id = 'ann' and session_id = 'shared'")
    left = conn.execute("select agent_id, count(*) from recall.messages group by 1 union all "
                        "select agent_id, count(*) from recall.chunks group by 1").fetchall()
    assert {a for a, _ in left} == {"bob"}


def test_writes_through_the_new_keys(cluster_like, db_url):
    """Ingest (ON CONFLICT (agent_id, session_id)), embedding, extractive and model summaries
    (ON CONFLICT (agent_id, session_id, kind, first_seq, part)), memories and set_importance,
    and the client's show, for two agents holding the same session id."""
    conn = cluster_like
    # each agent appends to its own session of that id; an agent without one is refused (the
    # id is another agent's), as on one node
    for agent in ("ann", "bob"):
        added = ingest(conn, [Session("shared", agent, messages=[
            Message(f"{agent}-x", "assistant", "text", f"{agent} wrote the postmortem")])], agent_id=agent)
        assert added.inserted == 1
    assert [r[0] for r in conn.execute("select agent_id from recall.messages where external_id like '%-x' "
                                       "order by 1")] == ["ann", "bob"]
    with pytest.raises(ConfigError, match="session 'shared' already belongs to agent"):
        ingest(conn, [Session("shared", "eve", messages=[Message(None, "user", "text", "hi")])], agent_id="eve")
    report = ingest(conn, [Session("solo", "ann", "first", messages=[
        Message("a1", "user", "text", "where is the runbook?")])], agent_id="ann")
    again = ingest(conn, [Session("solo", "ann", "second title", messages=[
        Message("a1", "user", "text", "where is the runbook?")])], agent_id="ann")
    assert (report.inserted, again.inserted) == (1, 0)
    assert conn.execute("select title from recall.sessions where session_id = 'solo'").fetchone()[0] == "second title"
    Worker(conn, FakeEmbedder()).run()
    assert conn.execute("select recall.summarize_sessions()").fetchone()[0] == 3
    summaries = dict(conn.execute("select agent_id, summary from recall.sessions where session_id = 'shared'"))
    assert "kubernetes" in summaries["ann"] and "postgres" in summaries["bob"]

    def complete(model, messages, **kw):
        return {"choices": [{"message": {"content": "Summary: " + messages[1]["content"][:60]}}]}
    written = _summarize.summarize(conn, model="fake/llm", only_stale=False, completion=complete)
    assert written.written == 3 and written.failed == 0
    rows = conn.execute("select agent_id, content from recall.chunks where kind = 'summary' "
                        "and session_id = 'shared' order by 1").fetchall()
    assert [a for a, _ in rows] == ["ann", "bob"]
    assert "kubernetes" in rows[0][1] and "postgres" in rows[1][1]
    # memories: one memories session per agent, numbered per agent
    for agent in ("ann", "bob"):
        conn.execute("select recall.remember(%s, 'the runbook is in the wiki')", [agent])
        conn.execute("select recall.remember(%s, 'the on-call rotates weekly')", [agent])
    mem = conn.execute("select agent_id, session_id, array_agg(first_seq order by first_seq) from recall.chunks "
                       "where kind = 'memory' group by 1, 2 order by 1").fetchall()
    assert mem == [("ann", "memories:ann", [1, 2]), ("bob", "memories:bob", [1, 2])]
    cid = conn.execute("select chunk_id from recall.chunks where agent_id = 'bob' and kind = 'turn_pair'").fetchone()[0]
    assert conn.execute("select recall.set_importance('bob', %s, 0.9)", [cid]).fetchone()[0] == pytest.approx(0.5)
    with pytest.raises(psycopg.errors.NoDataFound):
        conn.execute("select recall.set_importance('ann', %s, 0.9)", [cid])
    # show: each agent its own session of that id
    with Recall(db_url, migrate=False) as r:
        ann, bob = r.show("ann", "shared"), r.show("bob", "shared")
        assert (ann["agent_id"], bob["agent_id"]) == ("ann", "bob")
        assert "kubernetes" in ann["messages"][0]["content"] and "postgres" in bob["messages"][0]["content"]
        with pytest.raises(NotFoundError, match="no session 'shared' for agent 'eve'"):
            r.show("eve", "shared")
