"""recall.forget_sessions (`pyrecall forget --before`, Recall.forget_sessions): a retention
policy — an agent's sessions last active before a cut-off go with their messages, chunks and
vectors; its curated memories, another agent's sessions, and (unless asked) sessions holding a
chunk marked by hand stay."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import psycopg
import pytest
from click.testing import CliRunner

from pyrecall.cli import main
from pyrecall.client import AsyncRecall, Recall

AGENT = "keeper"


def fill(url) -> dict[str, int]:
    """Four sessions of AGENT (January, February, two in March, one of them in another
    project), one of another agent in January, two curated memories; the chunk ids of each."""
    with Recall(url) as r:
        for sid, agent, project, day in [("jan", AGENT, "api", "2026-01-10"), ("feb", AGENT, "api", "2026-02-10"),
                                         ("mar", AGENT, "api", "2026-03-10"), ("web", AGENT, "web", "2026-01-20"),
                                         ("other-jan", "other", "api", "2026-01-10")]:
            r.add_session(sid, agent, project=project, started_at=datetime.fromisoformat(f"{day}T09:00:00+00:00"))
            r.add_messages(sid, [
                {"role": "user", "content": f"what broke in {sid}?", "created_at": f"{day}T09:00:00Z"},
                {"role": "assistant", "content": f"the {sid} deploy key expired", "created_at": f"{day}T09:05:00Z"}],
                agent_id=agent)
        r.conn.execute("select recall.remember(%s, 'Deploy keys expire after 90 days.', 'fact')", [AGENT])
        return dict(r.conn.execute("select session_id, count(*) from recall.chunks group by 1").fetchall())


def sessions(conn, agent=AGENT) -> list[str]:
    return [r[0] for r in conn.execute("select session_id from recall.sessions where agent_id = %s "
                                       "order by 1", [agent])]


def test_old_sessions_go_with_their_rows_and_the_rest_stays(db_url, conn):
    chunks = fill(db_url)
    before = datetime(2026, 3, 1, tzinfo=UTC)
    dry = conn.execute("select session_id, messages, chunks from recall.forget_sessions(%s, %s, dry_run => true)",
                       [AGENT, before]).fetchall()
    assert dry == [("jan", 2, chunks["jan"]), ("web", 2, chunks["web"]), ("feb", 2, chunks["feb"])]
    assert sessions(conn) == ["feb", "jan", "mar", f"memories:{AGENT}", "web"]       # nothing gone yet
    # a chunk of February's marked by hand: kept, unless asked otherwise
    feb_chunk = conn.execute("select chunk_id from recall.chunks where session_id = 'feb' limit 1").fetchone()[0]
    conn.execute("select recall.set_importance(%s, %s, 0.9)", [AGENT, feb_chunk])
    only_api = conn.execute("select session_id from recall.forget_sessions(%s, %s, project => 'api')",
                            [AGENT, before]).fetchall()
    assert only_api == [("jan",)]
    assert sessions(conn) == ["feb", "mar", f"memories:{AGENT}", "web"]
    gone = conn.execute("select session_id from recall.forget_sessions(%s, %s, keep_marked => false)",
                        [AGENT, before]).fetchall()
    assert gone == [("web",), ("feb",)]
    assert sessions(conn) == ["mar", f"memories:{AGENT}"]
    # their messages and chunks went with them; the memory, March's and the other agent's stayed
    assert conn.execute("select count(*) from recall.messages where session_id in ('jan', 'feb', 'web')"
                        ).fetchone()[0] == 0
    assert conn.execute("select count(*) from recall.chunks where session_id in ('jan', 'feb', 'web')"
                        ).fetchone()[0] == 0
    assert conn.execute("select count(*) from recall.memories(%s)", [AGENT]).fetchone()[0] == 1
    assert sessions(conn, "other") == ["other-jan"]
    # nothing left to forget: no rows, nothing changes
    assert conn.execute("select * from recall.forget_sessions(%s, %s)", [AGENT, before]).fetchall() == []


@pytest.mark.parametrize("args, message", [
    ((None, "2026-01-01"), "agent_id is required"),
    ((AGENT, None), "before must be a time"),
    ((AGENT, "infinity"), "before must be a time"),
    ((AGENT, "2026-01-01", None, None), "keep_marked and dry_run must be true or false"),
])
def test_bad_arguments(conn, args, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        conn.execute(f"select * from recall.forget_sessions({', '.join(['%s'] * len(args))})", list(args))


def test_the_clients_and_the_command_line(db_url, conn, monkeypatch):
    monkeypatch.delenv("PYRECALL_AGENT", raising=False)
    fill(db_url)
    with Recall(db_url) as r:
        listed = r.forget_sessions(AGENT, datetime(2026, 2, 1), dry_run=True)      # naive: UTC
        assert [s["session_id"] for s in listed] == ["jan", "web"] and listed[0]["messages"] == 2

    async def go():
        async with await AsyncRecall.connect(db_url) as a:
            return await a.forget_sessions(AGENT, datetime(2026, 2, 1, tzinfo=UTC), project="web", dry_run=True)
    assert [s["session_id"] for s in asyncio.run(go())] == ["web"]

    cli = lambda *args, **kw: CliRunner().invoke(main, [*args, "--agent-id", AGENT],  # noqa: E731
                                                 env={"PYRECALL_DSN": db_url}, **kw)
    out = cli("forget", "--before", "2026-02-01", "--dry-run")
    assert out.exit_code == 0 and out.output.startswith(f"would forget 2 session(s) of agent '{AGENT}'")
    assert sessions(conn) == ["feb", "jan", "mar", f"memories:{AGENT}", "web"]
    # without --yes and no terminal to ask on: refused, nothing deleted
    out = cli("forget", "--before", "2026-02-01")
    assert out.exit_code == 2 and "add --yes to confirm" in out.output
    assert len(sessions(conn)) == 5
    out = cli("forget", "--before", "2026-02-01", "--yes", "--json")
    assert out.exit_code == 0, out.output
    assert [s["session_id"] for s in json.loads(out.output)["sessions"]] == ["jan", "web"]
    assert sessions(conn) == ["feb", "mar", f"memories:{AGENT}"]
    # every agent's (a DBA's job): the other agent's January session too
    out = cli("forget", "--before", "2025-01-01", "--all-agents", "--dry-run")
    assert out.exit_code == 0 and out.output == "would forget nothing: no session of the 2 agent(s) was last " \
                                                "active before 2025-01-01 00:00\n"
    out = cli("forget", "--before", "2026-02-01", "--all-agents", "--dry-run", "--json")
    assert [(s["agent_id"], s["session_id"]) for s in json.loads(out.output)["sessions"]] == [("other", "other-jan")]
    out = cli("forget", "--before", "2026-02-01", "--all-agents", "--yes")
    assert out.exit_code == 0 and out.output.startswith("forgot 1 session(s) of agent 'other'")
    assert sessions(conn, "other") == [] and sessions(conn) == ["feb", "mar", f"memories:{AGENT}"]
    out = cli("forget", "--before", "2026-02-01", "--all-agents", "--yes")     # (the other has none left)
    assert out.output.startswith(f"forgot 0 session(s) of agent '{AGENT}'")
    out = cli("forget", "--before", "2026-01-01", "--all-agents", "--dry-run")
    assert out.exit_code == 0 and out.output.startswith(f"would forget 0 session(s) of agent '{AGENT}'")
    # a duration: everything before 30 days ago (all of it, in 2026-11)
    out = cli("forget", "--before", "30d", "--yes")
    assert out.exit_code == 0 and "forgot 2 session(s)" in out.output and "curated memories stay" in out.output
    assert sessions(conn) == [f"memories:{AGENT}"]
    for args, message in [(("--before", "someday"), "expected a duration like 7d"),
                          (("--session", "x", "--project", "api"), "go with --before"),
                          (("--memory", "3", "--all-agents"), "go with --before"),
                          (("--before", "1d", "--session", "x"), "give one of")]:
        bad = cli("forget", *args)
        assert bad.exit_code == 2 and message in bad.output and "Traceback" not in bad.output
