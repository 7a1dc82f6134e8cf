"""auto_context_v6's two speed-ups keep v4's rows (sql/released/v6.sql,
061-failures-index.sql), on a history the other tests lack: code blocks (a chat message holding a
fenced block, so that the block is also a 'code' chunk) and failures with their resolutions, in
several sessions of two projects.

  * the code blocks whose message Related or an earlier section shows are left out as v4 leaves
    them (v6 reads the chat chunks shown once; v4 searched the agent's chunks per code block);
  * the Failures section reads the partial index recall.chunks_failures_idx (the failures of an
    agent) and returns the same rows without it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from conftest import drop_database, new_database
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector

from pyrecall._ingest import ingest
from pyrecall._worker import Worker
from pyrecall.importers._records import Message, Session

T0 = datetime(2026, 10, 1, tzinfo=UTC)
TOPICS = ["deploy", "docker build", "database migration", "coupon endpoint", "cache warmup"]


def history() -> list[Session]:
    sessions = []
    for i in range(30):
        topic = TOPICS[i % len(TOPICS)]
        at = T0 + timedelta(days=i)
        msgs = [
            Message(None, "user", "text", f"how do we run the {topic}?"),
            Message(None, "assistant", "text",
                    f"For the {topic} run this:\n```sh\nmake {topic.replace(' ', '-')} ENV=staging\n```\n"
                    f"then check the {topic} logs."),
            Message(None, "assistant", "tool_call", f"Bash(command=\"make {topic}\")",
                    metadata={"tool_use_id": f"t{i}", "tool_name": "Bash"}),
            Message(None, "tool", "tool_result",
                    f"Traceback (most recent call last):\nerror: {topic} failed: port taken" if i % 3 == 0
                    else f"{topic}: ok", metadata={"tool_use_id": f"t{i}"}),
            Message(None, "assistant", "text",
                    f"The {topic} failed because port 8080 was taken; stopping the old container fixed it."
                    if i % 3 == 0 else f"The {topic} went through."),
            Message(None, "user", "text",
                    f"and the config of the {topic}?\n```ini\n[{topic}]\nretries = {i}\n```"),
            Message(None, "assistant", "text", f"The {topic} config looks right."),
        ]
        for j, m in enumerate(msgs):
            m.created_at = at + timedelta(minutes=j)
        sessions.append(Session(f"s{i:02d}", title=f"{topic} {i}", project="shop" if i % 4 else "infra",
                                branch="main", started_at=at, ended_at=at + timedelta(minutes=10),
                                messages=msgs))
    return sessions


@pytest.fixture(scope="module")
def dev_url(server_url, template_url):
    url = new_database(server_url)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        ingest(conn, history(), agent_id="dev")
        Worker(conn, FakeEmbedder()).run()
        conn.execute("analyze recall.chunks")
    yield url
    drop_database(server_url, url)


@pytest.fixture
def dev(dev_url):
    with psycopg.connect(dev_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


ARGS = [dict(), dict(project="shop"), dict(project="infra", branch="main"), dict(token_budget=300),
        dict(token_budget=120), dict(token_budget=1000), dict(exclude_session_id="s29"), dict(all_projects=True, project="shop"),
        dict(recent_share=0, failure_share=0.5)]
TASKS = [None, "docker build failed", "make deploy ENV=staging", "coupon endpoint config retries"]


def call(conn, fn, **kw):
    kw = {"agent_id": "dev", **kw}
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    return conn.execute(f"select * from recall.{fn}({names})", kw).fetchall()


def test_v6_equals_v4_with_code_blocks_and_failures(dev):
    kinds, sections, left_out = set(), set(), 0
    for task in TASKS:
        for args in ARGS:
            kw = dict(agent_id="dev", task_text=task, **args)
            with dev.transaction():    # one now() for both
                v6 = call(dev, "auto_context_v6", **kw)
                assert v6 == call(dev, "auto_context_v4", **kw), kw
            kinds |= {r[2] for r in v6}
            sections |= {r[14] for r in v6}
            if task and not args:
                # the path the fix touches ran: code blocks Related found, left out for their message
                code = {r[0] for r in dev.execute(
                    "select chunk_id from recall._hybrid_recall_v6('dev', %s, k => 160, p_labels => false) "
                    "where kind = 'code'", [task]).fetchall()}
                left_out += len(code - {r[0] for r in v6})
    assert {"code", "turn_pair", "tool"} <= kinds
    assert {"recent", "related", "failures"} <= sections
    assert left_out > 0


def test_failures_read_their_index_and_rows_do_not_depend_on_it(dev):
    plan = "\n".join(r[0] for r in dev.execute(
        "explain select c.chunk_id from recall.chunks c where c.agent_id = 'dev' "
        "and c.metadata @> '{\"project\": \"shop\"}' and recall._is_failure(c.kind, c.content, c.metadata)"))
    assert "chunks_failures_idx" in plan
    for task in (None, "docker build failed"):
        got = {}
        with dev.transaction():    # one now(); the index dropped, then back with the rollback
            got["index"] = call(dev, "auto_context_v6", task_text=task)
            dev.execute("drop index recall.chunks_failures_idx")
            got["none"] = call(dev, "auto_context_v6", task_text=task)
            raise psycopg.Rollback()
        assert got["none"] == got["index"]
        assert any(r[14] == "failures" for r in got["index"])
    assert dev.execute("select to_regclass('recall.chunks_failures_idx')").fetchone()[0]


def test_every_auto_context_is_planned_with_each_calls_values(dev):
    """PL/pgSQL's generic plan of auto_context's sections (kept from a session's sixth call on)
    read a whole project through the GIN index on metadata: 3-5x slower at 100k chunks
    (sql/idempotent/085-plan-settings.sql). Every released auto_context, a new one included,
    is planned per call; the rows of the sixth and later calls are the first call's."""
    versions = dev.execute(
        "select p.proname, coalesce('plan_cache_mode=force_custom_plan' = any (p.proconfig), false) "
        "from pg_proc p join pg_language l on l.oid = p.prolang "
        "where p.pronamespace = 'recall'::regnamespace and p.proname ~ '^auto_context_v[0-9]+$' "
        "and l.lanname = 'plpgsql' order by 1").fetchall()
    assert len(versions) >= 6 and all(custom for _, custom in versions), versions
    for kw in (dict(project="shop", task_text="docker build failed"), dict(project="infra")):
        with psycopg.connect(dev.info.dsn, autocommit=True) as conn:    # a session of its own
            register_vector(conn)
            answers = {repr(call(conn, "auto_context", as_of=T0 + timedelta(days=40), **kw))
                       for _ in range(7)}
        assert len(answers) == 1 and next(iter(answers)) != "[]", kw
