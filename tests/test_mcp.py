"""``pyrecall mcp``: the server driven by the MCP SDK's own client, over stdio, in a subprocess,
against a test database, with the real local model for embeddings."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

from pyrecall import _db, _migrate  # noqa: E402
from pyrecall._errors import ConfigError  # noqa: E402
from pyrecall._mcp import Pool, check_role, is_loopback, parse_http  # noqa: E402
from pyrecall.client import Recall  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ENV = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
TOOLS = {"recall", "context", "expand", "sessions", "remember", "memories", "pin", "forget"}


def server_params(dsn: str, agent: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "pyrecall.cli", "mcp", "--dsn", dsn, "--agent", agent, *extra],
                                 env=ENV, cwd=str(ROOT))


def drive(dsn: str, agent: str, scenario):
    """Start ``pyrecall mcp`` for ``agent``, connect the SDK client, run ``scenario(client)``."""
    async def main():
        async with Client(server_params(dsn, agent), read_timeout_seconds=120) as client:
            return await scenario(client)
    return asyncio.run(main())


def text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.fixture
def memories(db_url):
    """Two agents' sessions, embedded with the local model."""
    with Recall(db_url) as r:
        r.add_session("a-deploy", "A", title="Deploy to staging", project="api")
        r.add_messages("a-deploy", [
            {"role": "user", "content": "How do we ship the API to the staging host?"},
            {"role": "assistant", "content": "Run docker compose up -d on staging-1; the image is built in CI."}])
        r.add_session("a-auth", "A", title="Refresh tokens", project="web")
        r.add_messages("a-auth", [
            {"role": "user", "content": "Add refresh tokens to the login flow"},
            {"role": "assistant", "content": "Refresh tokens now rotate on every use and expire after 30 days."}])
        r.add_session("b-secret", "B", title="B's plan", project="api")
        r.add_messages("b-secret", [
            {"role": "user", "content": "Where do we deploy the zanzibar cluster?"},
            {"role": "assistant", "content": "The zanzibar cluster lives in the basement datacenter."}])
        r.embed_pending()
    return db_url


# ---------------------------------------------------------------- the tools

def test_tools_listed_and_each_answers(memories):
    async def scenario(c):
        listed = (await c.list_tools()).tools
        by_name = {t.name: t for t in listed}
        assert TOOLS <= set(by_name)
        for t in listed:
            assert t.output_schema and t.output_schema["type"] == "object", t.name
            assert "$ref" not in str(t.output_schema), t.name      # written out (plain_schema)
            assert t.input_schema.get("additionalProperties") is False, t.name
        assert by_name["recall"].input_schema["required"] == ["query"]
        # named as recall.auto_context names it; "task", its former name, is accepted unlisted
        assert "task_text" in by_name["context"].input_schema["properties"]
        assert "task" not in by_name["context"].input_schema["properties"]

        found = await c.call_tool("recall", {"query": "how is the service released to production?"})
        context = await c.call_tool("context", {"task_text": "release the service", "project": "api"})
        sessions = await c.call_tool("sessions", {})
        limited = await c.call_tool("sessions", {"limit": 1})
        by_project = await c.call_tool("recall", {"query": "tokens", "project": "web", "k": 1})
        by_session = await c.call_tool("recall", {"query": "docker staging", "by_session": True})
        recent = await c.call_tool("recall", {"query": "docker", "since": "1d", "token_budget": 1000})
        future = await c.call_tool("recall", {"query": "docker", "since": "2999-01-01"})
        return found, context, sessions, limited, by_project, by_session, recent, future

    found, context, sessions, limited, by_project, by_session, recent, future = drive(memories, "A", scenario)

    assert not found.is_error
    out = found.structured_content
    assert out["source"] == "hybrid"
    first = out["memories"][0]
    assert set(first) >= {"id", "content", "score", "kind", "session_id", "created_at"}
    assert first["session_id"] == "a-deploy" and "docker compose" in first["content"]
    assert "docker compose" in text(found) and f"[{first['id']}]" in text(found)

    assert not context.is_error
    ctx = context.structured_content
    assert ctx["markdown"].startswith("## Relevant memory") and "docker compose" in ctx["markdown"]
    assert text(context) == ctx["markdown"]
    assert {m["section"] for m in ctx["memories"]} <= {"recent", "related", "failures"}
    assert ctx["memories"] and all(m["session_id"].startswith("a-") for m in ctx["memories"])

    rows = sessions.structured_content["sessions"]
    assert {s["session_id"] for s in rows} == {"a-deploy", "a-auth"}
    assert {s["title"] for s in rows} == {"Deploy to staging", "Refresh tokens"}
    assert "Deploy to staging" in text(sessions)
    assert len(limited.structured_content["sessions"]) == 1

    assert [m["session_id"] for m in by_project.structured_content["memories"]] == ["a-auth"]
    assert by_session.structured_content["memories"][0]["session_id"] == "a-deploy"
    assert recent.structured_content["memories"]
    assert future.structured_content["memories"] == [] and "nothing found" in text(future)


def test_output_schemas_are_plain_and_mean_what_pydantic_wrote():
    """The published output schemas hold no $ref and no optional-field anyOf (an SDK client
    checks every result against them); each accepts and refuses the same instances as the
    schema pydantic writes for the tool's model."""
    import json

    import jsonschema

    from pyrecall._mcp import ContextOut, RecallOut, SessionsOut, plain_schema

    memory = {"id": 7, "content": "docker compose up", "score": 0.5, "kind": "window",
              "session_id": "s", "created_at": "2026-01-01T00:00:00+00:00", "memory_id": None,
              "memory_kind": None, "session_title": "Deploy", "section": None}
    session = {"session_id": "s", "title": None, "project": "api", "branch": None,
               "started_at": "2026-01-01", "ended_at": None, "messages": 2, "chunks": 1}
    cases = {
        RecallOut: [{"memories": [memory], "source": "hybrid", "note": None},
                    {"memories": [], "source": "keyword"},
                    {"memories": [memory | {"created_at": None, "memory_id": 3}], "source": "hybrid"}],
        ContextOut: [{"markdown": "", "memories": [memory | {"section": "pinned"}], "source": "hybrid"}],
        SessionsOut: [{"sessions": [session]}],
    }
    bad = {
        RecallOut: [{"memories": [{k: v for k, v in memory.items() if k != "content"}], "source": "x"},
                    {"memories": [memory | {"created_at": 3}], "source": "x"},
                    {"memories": [memory | {"memory_id": "3"}], "source": "x"},
                    {"memories": [memory], "source": None}],
        ContextOut: [{"markdown": None, "memories": [], "source": "x"}],
        SessionsOut: [{"sessions": [session | {"messages": None}]}],
    }
    for model, good in cases.items():
        original = model.model_json_schema()
        plain = plain_schema(original)
        assert "$ref" not in json.dumps(plain) and "anyOf" not in json.dumps(plain), model
        for schema in (original, plain):
            for instance in good:
                jsonschema.validate(instance, schema)
            for instance in bad[model]:
                with pytest.raises(jsonschema.ValidationError):
                    jsonschema.validate(instance, schema)


# ---------------------------------------------------------------- one agent, bound by the database

def test_server_sees_only_its_agent(memories):
    async def scenario(c):
        return (await c.call_tool("recall", {"query": "zanzibar cluster basement datacenter"}),
                await c.call_tool("sessions", {"limit": 100}),
                await c.call_tool("context", {"task": "zanzibar"}))   # the former name of task_text

    recall_b, sessions, context = drive(memories, "A", scenario)
    assert all(m["session_id"].startswith("a-") for m in recall_b.structured_content["memories"])
    assert "zanzibar" not in text(recall_b) and "zanzibar" not in text(context)
    assert {s["session_id"] for s in sessions.structured_content["sessions"]} == {"a-deploy", "a-auth"}

    found_by_b = drive(memories, "B", lambda c: c.call_tool("recall", {"query": "zanzibar"}))
    assert [m["session_id"] for m in found_by_b.structured_content["memories"]] == ["b-secret"]


def test_pool_connections_are_bound_by_row_level_security(memories):
    """Without any WHERE clause, a pooled connection sees only its agent's rows, and cannot
    write another agent's."""
    pool = Pool(memories, "A", size=1)
    try:
        with pool.connection() as conn:
            assert conn.execute("select array_agg(distinct agent_id) from recall.chunks").fetchone()[0] == ["A"]
            assert conn.execute("select current_user").fetchone()[0] == "recall_agent"
            assert conn.execute("select count(*) from recall.sessions").fetchone()[0] == 2
        with pytest.raises(psycopg.errors.InsufficientPrivilege), pool.connection() as conn:
            conn.execute("insert into recall.sessions (session_id, agent_id) values ('x', 'B')")
        # the role and the setting end with the call's transaction: the pooled connection
        # between calls is the login role's, with no agent set
        idle = pool._idle[0]
        assert idle.execute("select current_user <> 'recall_agent', "
                            "coalesce(current_setting('recall.agent_id', true), '')").fetchone() == (True, "")
        with pool.connection() as conn:   # and the next call is bound again
            assert conn.execute("select count(*) from recall.sessions").fetchone()[0] == 2
    finally:
        pool.close()


def test_pool_serves_at_most_size_calls_at_once(db_url):
    """Calls beyond the pool's size wait for a connection instead of opening more."""
    import threading

    pool = Pool(db_url, "A", size=2)
    pids, errors = [], []

    def call():
        try:
            with pool.connection() as c:
                pids.append(c.execute("select pg_backend_pid() from pg_sleep(0.2)").fetchone()[0])
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    pool.close()
    assert errors == [] and len(pids) == 6 and len(set(pids)) <= 2


@pytest.fixture
def login_role(conn):
    name = f"mcp_login_{os.getpid()}"
    conn.execute(f"drop role if exists {name}")
    conn.execute(f"create role {name} login")
    yield name
    conn.execute(f"drop owned by {name}")
    conn.execute(f"drop role {name}")


def _as(db_url: str, role: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    info["user"] = role
    return psycopg.conninfo.make_conninfo(**info)


def test_a_role_bound_to_another_agent_or_outside_recall_agent_is_refused(memories, conn, login_role):
    url = _as(memories, login_role)
    with psycopg.connect(url, autocommit=True) as c, pytest.raises(ConfigError, match="cannot act as recall_agent"):
        check_role(c, "A")
    conn.execute("select recall.bind_agent(%s, 'B')", [login_role])
    with psycopg.connect(url, autocommit=True) as c:
        with pytest.raises(ConfigError, match="bound to agent 'B', not 'A'"):
            check_role(c, "A")
    pool = Pool(url, "B")
    try:
        with pool.connection() as c:
            assert c.execute("select count(*) from recall.sessions").fetchone()[0] == 1
    finally:
        pool.close()
    # over MCP: one clear error line per call, and the server stays up
    async def scenario(c):
        return [await c.call_tool("sessions", {}) for _ in range(2)]
    for result in drive(url, "A", scenario):
        assert result.is_error and "bound to agent 'B', not 'A'" in text(result)
        assert len(text(result).splitlines()) == 1


# ---------------------------------------------------------------- curated memories

def _ids(result) -> list[int]:
    return [m["id"] for m in result.structured_content["memories"]]


def test_remember_recall_supersede_as_of_forget(memories, conn):
    lunch = "where does the team usually go to eat at noon?"

    async def scenario(c):
        out = {}
        first = await c.call_tool("remember", {"content": "Our favourite lunch spot is the Thai "
                                               "place on 5th Street.", "kind": "preference"})
        out["first"] = first
        old = first.structured_content["id"]
        out["found"] = await c.call_tool("recall", {"query": lunch})
        await asyncio.sleep(0.05)
        out["between"] = conn.execute("select clock_timestamp()").fetchone()[0]
        await asyncio.sleep(0.05)
        out["second"] = await c.call_tool("remember", {"content": "Our favourite lunch spot is now "
                                                       "the ramen bar by the station.",
                                                       "kind": "preference", "supersedes": old})
        out["after"] = await c.call_tool("recall", {"query": lunch})
        out["then"] = await c.call_tool("recall", {"query": lunch, "as_of": out["between"].isoformat()})
        new = out["second"].structured_content["id"]
        out["forget"] = await c.call_tool("forget", {"id": new})
        out["gone"] = await c.call_tool("recall", {"query": lunch})
        out["again"] = await c.call_tool("forget", {"id": new})
        return out

    out = drive(memories, "A", scenario)
    assert not out["first"].is_error and "remembered: memory" in text(out["first"])
    old = out["first"].structured_content["id"]
    # found by meaning: the query shares no word with the memory
    found = out["found"].structured_content
    assert found["source"] == "hybrid" and found["memories"][0]["id"] == old
    assert found["memories"][0]["memory_id"] == old and found["memories"][0]["kind"] == "memory"
    assert found["memories"][0]["memory_kind"] == "preference"

    new = out["second"].structured_content["id"]
    assert new != old and f"replacing memory {old}" in text(out["second"])
    after = _ids(out["after"])
    assert after[0] == new and old not in after
    then = _ids(out["then"])
    assert then[0] == old and new not in then
    # the old one is kept, valid until the replacement
    row = conn.execute("select valid_until is not null from recall.memories('A', include_superseded => true) "
                       "where memory_id = %s", [old]).fetchone()
    assert row == (True,)

    assert out["forget"].structured_content == {"forgotten": 1}
    assert new not in _ids(out["gone"])
    assert conn.execute("select count(*) from recall.chunks where chunk_id = %s", [new]).fetchone()[0] == 0
    assert out["again"].is_error and len(text(out["again"]).splitlines()) == 1


def test_pinned_memories_open_the_context(memories):
    async def scenario(c):
        pinned = await c.call_tool("remember", {"content": "Always run the test suite with nice -n 10.",
                                                "kind": "decision", "pin": True})
        await c.call_tool("remember", {"content": "The staging host is staging-1.", "kind": "fact"})
        return pinned, await c.call_tool("context", {"task_text": "deploy the API", "project": "api"})

    pinned, context = drive(memories, "A", scenario)
    rows = context.structured_content["memories"]
    assert rows[0]["id"] == pinned.structured_content["id"] and rows[0]["section"] == "pinned"
    markdown = context.structured_content["markdown"]
    assert markdown.index("Pinned") < markdown.index("nice -n 10") < markdown.index("docker compose")


def test_a_credential_told_to_remember_is_stored_replaced_and_said(memories, conn):
    key = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"

    async def scenario(c):
        return (await c.call_tool("remember", {"content": f"The CI token is {key}.", "kind": "fact"}),
                await c.call_tool("remember", {"content": "CI runs on the self-hosted runner.", "kind": "fact"}))

    told, plain = drive(memories, "A", scenario)
    assert told.structured_content["redacted"] == ["github_token"]
    assert text(told).endswith("(stored with credentials replaced: github_token)")
    assert plain.structured_content["redacted"] == []
    assert conn.execute("select content from recall.chunks where chunk_id = %s",
                        [told.structured_content["id"]]).fetchone()[0] == "The CI token is [REDACTED:github_token]."


def test_remember_shows_the_memories_it_may_repeat_or_correct(memories):
    """With the local model: an update of a preference is shown the memory it changes (to pass
    supersedes), another fact of the project is not shown it."""
    async def scenario(c):
        tabs = await c.call_tool("remember", {"content": "The user prefers tabs for indentation.",
                                              "kind": "preference"})
        spaces = await c.call_tool("remember", {"content": "The user now prefers four spaces for indentation.",
                                                "kind": "preference"})
        other = await c.call_tool("remember", {"content": "Pull requests need one approval.", "kind": "fact"})
        return tabs, spaces, other

    tabs, spaces, other = drive(memories, "A", scenario)
    first = tabs.structured_content["id"]
    assert [m["id"] for m in spaces.structured_content["similar"]] == [first]
    assert spaces.structured_content["similar"][0]["similarity"] >= 0.6
    assert f"#{first} (" in text(spaces) and "supersedes=ID" in text(spaces)
    assert tabs.structured_content["similar"] == [] and other.structured_content["similar"] == []


def test_recall_and_sessions_keep_to_one_source_agent(memories):
    """A memory holding several agents' or apps' sessions (Codex beside Claude Code, a ChatGPT
    export): recall and sessions keep to the one named."""
    with Recall(memories) as r:
        r.add_session("a-codex", "A", title="Codex: deploy script", project="api",
                      metadata={"source_agent": "codex"})
        r.add_messages("a-codex", [
            {"role": "user", "content": "Write the staging deploy script."},
            {"role": "assistant", "content": "deploy.sh runs docker compose pull and up -d on staging-1."}])
        r.embed_pending()

    async def scenario(c):
        return (await c.call_tool("recall", {"query": "deploy to staging", "source_agent": "codex"}),
                await c.call_tool("recall", {"query": "deploy to staging"}),
                await c.call_tool("sessions", {"source_agent": "codex"}))

    only, every, listed = drive(memories, "A", scenario)
    assert {m["session_id"] for m in only.structured_content["memories"]} == {"a-codex"}
    assert {m["session_id"] for m in every.structured_content["memories"]} >= {"a-codex", "a-deploy"}
    assert [s["session_id"] for s in listed.structured_content["sessions"]] == ["a-codex"]


def test_memories_lists_and_pin_pins_and_unpins(memories):
    """`memories`: the agent's curated memories, newest first, with ids; `pin` moves one into
    every context and out again."""
    async def scenario(c):
        first = (await c.call_tool("remember", {"content": "Deploys go out on Tuesdays.", "kind": "decision",
                                                "project": "api"})).structured_content["id"]
        second = (await c.call_tool("remember", {"content": "Prefers short answers.",
                                                 "kind": "preference"})).structured_content["id"]
        listed = await c.call_tool("memories", {})
        facts = await c.call_tool("memories", {"kind": "fact"})
        pinned = await c.call_tool("pin", {"id": first})
        only_pinned = await c.call_tool("memories", {"pinned_only": True})
        context = await c.call_tool("context", {"task_text": "anything", "project": "api"})
        unpinned = await c.call_tool("pin", {"id": first, "pinned": False})
        after = await c.call_tool("context", {"task_text": "anything", "project": "api"})
        return first, second, listed, facts, pinned, only_pinned, context, unpinned, after

    first, second, listed, facts, pinned, only_pinned, context, unpinned, after = drive(memories, "A", scenario)
    rows = listed.structured_content["memories"]
    assert [(m["id"], m["kind"], m["pinned"], m["project"]) for m in rows] == [
        (second, "preference", False, None), (first, "decision", False, "api")]
    assert f"- [{first}] decision · api: Deploys go out on Tuesdays." in text(listed)
    assert facts.structured_content["memories"] == [] and text(facts) == "no curated memories"
    assert not pinned.is_error and pinned.structured_content == {"id": first, "pinned": True}
    assert [m["id"] for m in only_pinned.structured_content["memories"]] == [first]
    assert [(m["id"], m["section"]) for m in context.structured_content["memories"]][0] == (first, "pinned")
    assert unpinned.structured_content == {"id": first, "pinned": False} and text(unpinned) == f"unpinned memory {first}"
    assert all(m["section"] != "pinned" for m in after.structured_content["memories"])


def test_another_agents_memory_is_refused(memories, conn):
    with Recall(memories) as r:
        theirs = r.remember("B", "B keeps the zanzibar keys in the blue vault.", kind="fact")

    async def scenario(c):
        return (await c.call_tool("forget", {"id": theirs}),
                await c.call_tool("remember", {"content": "the keys moved", "supersedes": theirs}),
                await c.call_tool("pin", {"id": theirs}),
                await c.call_tool("recall", {"query": "where are the zanzibar keys kept?"}),
                await c.call_tool("sessions", {}))

    forget, supersede, pin, recall, after = drive(memories, "A", scenario)
    for result in (forget, supersede, pin):
        assert result.is_error and len(text(result).splitlines()) == 1, text(result)
    assert theirs not in _ids(recall)
    assert not after.is_error
    assert conn.execute("select content from recall.chunks where chunk_id = %s", [theirs]).fetchone() == (
        "B keeps the zanzibar keys in the blue vault.",)
    # nothing was written for A by the refused supersede
    assert conn.execute("select count(*) from recall.memories('A')").fetchone()[0] == 0


def test_expand_gives_the_exchange_around_a_memory_of_its_agent_only(memories, conn):
    """The `expand` tool: what was said before and after a memory recall returned, in order,
    within its budget; another agent's chunk is refused like a missing one."""
    with Recall(memories) as r:
        r.add_session("a-long", "A", title="Rotate the deploy key", project="api")
        r.add_messages("a-long", [
            {"role": "user", "content": "The deploy key leaked in a CI log."},
            {"role": "assistant", "content": "Revoked it; CI now masks secrets."},
            {"role": "user", "content": "How do we rotate it from now on?"},
            {"role": "assistant", "content": "The vault job rotates the deploy key every Monday."},
            {"role": "user", "content": "And the old one?"},
            {"role": "assistant", "content": "Old keys stay valid one day, then are deleted."}])
    middle = conn.execute("select chunk_id from recall.chunks where session_id = 'a-long' "
                          "and content like '%%every Monday%%'").fetchone()[0]
    theirs = conn.execute("select chunk_id from recall.chunks where agent_id = 'B' limit 1").fetchone()[0]

    async def scenario(c):
        return (await c.call_tool("expand", {"id": middle}),
                await c.call_tool("expand", {"id": middle, "token_budget": 40, "with_tools": True}),
                await c.call_tool("expand", {"id": theirs}))

    whole, small, refused = drive(memories, "A", scenario)
    assert not whole.is_error
    out = whole.structured_content
    assert out["session_id"] == "a-long" and out["session_title"] == "Rotate the deploy key"
    assert [m["content"] for m in out["messages"]][0] == "The deploy key leaked in a CI log."
    assert len(out["messages"]) == 6 and [m["in_chunk"] for m in out["messages"]] == [False, False, True, True,
                                                                                      False, False]
    assert [m["speaker"] for m in out["messages"]] == ["User", "Assistant"] * 3
    assert "* Assistant: The vault job rotates" in text(whole) and out["tokens"] <= 1000
    # 40 tokens (estimated: not embedded yet): the pair (26), the answer before it (12); the
    # question after it (6 more) does not fit, and that side stops there
    assert [m["content"][:12] for m in small.structured_content["messages"]] == [
        "Revoked it; ", "How do we ro", "The vault jo"]
    assert small.structured_content["tokens"] == 38
    assert refused.is_error and f"agent A has no chunk {theirs}" in text(refused)


# ---------------------------------------------------------------- bad input

BAD = [
    ("recall", {"query": "docker", "bogus": 1}, "unknown argument(s) for recall: bogus"),
    ("recall", {"query": "docker", "k": 0}, "k: Input should be greater than or equal to 1"),
    ("recall", {"query": "docker", "k": "many"}, "k: Input should be a valid integer"),
    ("recall", {}, "query: Field required"),
    ("recall", {"query": "   "}, "query is empty"),
    ("recall", {"query": "docker", "since": "yesterday"}, "since: 'yesterday': expected a duration"),
    ("recall", {"query": "docker", "token_budget": -5}, "token_budget"),
    ("context", {"token_budget": "lots"}, "token_budget"),
    ("context", {"task": "a", "task_text": "b"}, "task is the former name of task_text: give one of them"),
    ("sessions", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("sessions", {"agent": "B"}, "unknown argument(s) for sessions: agent"),
    ("recall", {"query": "docker", "as_of": "last week"}, "as_of: 'last week'"),
    ("remember", {"content": ""}, "content is empty"),
    ("remember", {"content": "x", "kind": "gossip"}, "kind"),
    ("remember", {"content": "x", "importance": 2}, "importance: Input should be less than or equal to 1"),
    ("forget", {"id": 0}, "id: Input should be greater than or equal to 1"),
    ("forget", {"id": 999999}, "999999"),
    ("expand", {"id": 999999}, "agent A has no chunk 999999"),
    ("memories", {"kind": "gossip"}, "kind: 'gossip' is not one of"),
    ("pin", {"id": 999999}, "999999"),
    ("expand", {"id": 1, "token_budget": 0}, "token_budget: Input should be greater than or equal to 1"),
    ("nosuchtool", {}, "nosuchtool"),
]


def test_bad_arguments_give_one_line_errors_and_the_server_answers_next(memories):
    async def scenario(c):
        out = []
        for name, args, _ in BAD:
            try:
                result = await c.call_tool(name, args)
            except mcp.MCPError as exc:  # an unknown tool may be a protocol error
                out.append((True, str(exc)))
            else:
                out.append((result.is_error, text(result)))
            good = await c.call_tool("sessions", {})
            assert not good.is_error and len(good.structured_content["sessions"]) == 2
        return out

    for (is_error, message), (name, args, expected) in zip(drive(memories, "A", scenario), BAD, strict=True):
        assert is_error, (name, args)
        assert expected in message, (name, args, message)
        assert len(message.splitlines()) == 1 and "Traceback" not in message, message


# ---------------------------------------------------------------- the database goes away

@pytest.fixture
def own_server():
    """A throwaway embedded server that the test stops and starts."""
    tmp = Path(tempfile.mkdtemp(prefix="pyrecall-mcp-"))
    os.chmod(tmp, 0o755)
    settings = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
                "shared_buffers": "128MB", "max_connections": "30"}
    url = _db.start(tmp, settings=settings)
    with psycopg.connect(url, autocommit=True) as c:
        _migrate.migrate(c, dim=384)
    try:
        yield tmp, url, settings
    finally:
        _db.stop(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_database_restart_under_the_server_is_survived(own_server):
    tmp, url, settings = own_server
    with Recall(url) as r:
        r.add_messages("s", [{"role": "user", "content": "the deploy uses port 8443"}], agent_id="A")
        r.embed_pending()

    async def scenario(c):
        before = await c.call_tool("recall", {"query": "port"})
        await asyncio.to_thread(_db.stop, tmp)
        down = await c.call_tool("recall", {"query": "port"})
        down_again = await c.call_tool("sessions", {})
        assert await asyncio.to_thread(_db.start, tmp, settings=settings) == url
        after = await c.call_tool("recall", {"query": "port"})
        return before, down, down_again, after

    before, down, down_again, after = drive(url, "A", scenario)
    assert not before.is_error and before.structured_content["memories"]
    for result in (down, down_again):
        assert result.is_error and "cannot connect to PostgreSQL" in text(result)
        assert len(text(result).splitlines()) == 1
    assert not after.is_error
    assert after.structured_content["memories"] == before.structured_content["memories"]


# ---------------------------------------------------------------- HTTP

def test_http_address_parsing():
    assert parse_http("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http("8765") == ("127.0.0.1", 8765)
    assert parse_http("[::1]:9000") == ("::1", 9000)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    with pytest.raises(ConfigError):
        parse_http("127.0.0.1:http")


def test_cli_refuses_a_public_address_without_a_token(db_url):
    out = subprocess.run([sys.executable, "-m", "pyrecall.cli", "mcp", "--dsn", db_url,
                          "--http", "0.0.0.0:8765"], env={**os.environ, **ENV}, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "needs --token" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "pyrecall.cli", "mcp", "--dsn", db_url, "--token", "x"],
                         env={**os.environ, **ENV}, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--token goes with --http" in out.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_transport_refuses_requests_without_the_token(memories):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pyrecall.cli", "mcp", "--dsn", memories, "--agent", "A",
                             "--http", f"127.0.0.1:{port}"],
                            env={**os.environ, **ENV, "PYRECALL_MCP_TOKEN": "s3cret"}, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                refused = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                break
            except httpx2.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
                time.sleep(0.3)
        assert refused.status_code == 401
        wrong = httpx2.post(url, json={}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401

        async def main():
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=120)
            async with Client(streamable_http_client(url, http_client=http)) as c:
                return await c.call_tool("recall", {"query": "docker compose staging"})
        result = asyncio.run(main())
        assert not result.is_error
        assert result.structured_content["memories"][0]["session_id"] == "a-deploy"
    finally:
        proc.terminate()
        proc.wait(30)
