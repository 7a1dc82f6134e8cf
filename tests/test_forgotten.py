"""A session deleted stays deleted (sql/incremental/015-forgotten-sessions.sql,
sql/idempotent/059-retention.sql): forget, a retention policy or a plain DELETE records the
session; storing it again (an import of the transcript that still holds it, a plain INSERT of the
session or of a message of it) is skipped without error, and said in the import's summary, until
recall.unforget_sessions; `forget --all` is a new start."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from pyrecall.cli import main
from pyrecall.client import AsyncRecall, Recall

AGENT = "keeper"


def messages(text: str) -> list[dict]:
    return [{"role": "user", "content": f"what broke in {text}?", "created_at": "2026-01-10T09:00:00Z"},
            {"role": "assistant", "content": f"the {text} deploy key expired", "created_at": "2026-01-10T09:05:00Z"}]


def counts(conn, sid: str) -> tuple[int, int, int]:
    return tuple(conn.execute(f"select count(*) from recall.{t} where session_id = %s", [sid]).fetchone()[0]
                 for t in ("sessions", "messages", "chunks"))


def test_a_forgotten_session_is_not_stored_again(db_url, conn):
    with Recall(db_url) as r:
        r.add_session("s1", AGENT)
        r.add_messages("s1", messages("s1"), agent_id=AGENT)
        assert counts(conn, "s1") == (1, 2, 1)
        assert r.forget(agent_id=AGENT, session_id="s1") == 1
        assert [row["session_id"] for row in r.forgotten_sessions(AGENT)] == ["s1"]
        # the transcript read again: nothing stored, and the report says why
        report = r.add_messages("s1", messages("s1") + messages("s1 again"), agent_id=AGENT)
        assert (report.inserted, report.forgotten) == (0, 1)
        assert counts(conn, "s1") == (0, 0, 0)
    # plain SQL, as any client writes: skipped, no error
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s1', %s)", [AGENT])
    conn.execute("insert into recall.messages (session_id, agent_id, role, content) values ('s1', %s, 'user', 'x')",
                 [AGENT])
    assert counts(conn, "s1") == (0, 0, 0)
    # another agent's session of another id is stored as ever; a missing session is still an error
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s2', %s)", [AGENT])
    assert counts(conn, "s2")[0] == 1
    with pytest.raises(Exception, match="session 'nope' does not exist"):
        conn.execute("insert into recall.messages (session_id, agent_id, role, content) "
                     "values ('nope', %s, 'user', 'x')", [AGENT])


def test_unforget_lets_it_in_again(db_url, conn):
    with Recall(db_url) as r:
        r.add_messages("s1", messages("s1"), agent_id=AGENT)
        r.add_messages("s2", messages("s2"), agent_id=AGENT)
        r.forget(agent_id=AGENT, session_id="s1")
        r.forget(agent_id=AGENT, session_id="s2")
        assert [row["session_id"] for row in r.unforget_sessions(AGENT, ["s1", "unknown"])] == ["s1"]
        assert r.add_messages("s1", messages("s1"), agent_id=AGENT).inserted == 2
        assert r.add_messages("s2", messages("s2"), agent_id=AGENT).inserted == 0
        assert [row["session_id"] for row in r.unforget_sessions(AGENT)] == ["s2"]
        assert r.forgotten_sessions(AGENT) == []
    with pytest.raises(Exception, match="agent_id is required"):
        conn.execute("select * from recall.unforget_sessions(null)")


def test_retention_records_what_it_deletes_and_memories_stay_rememberable(db_url, conn):
    with Recall(db_url) as r:
        for sid, day in (("jan", "2026-01-10"), ("mar", "2026-03-10")):
            r.add_session(sid, AGENT, started_at=datetime.fromisoformat(f"{day}T09:00:00+00:00"))
            r.add_messages(sid, [{**m, "created_at": f"{day}T09:0{i}:00Z"} for i, m in enumerate(messages(sid))],
                           agent_id=AGENT)
        r.conn.execute("select recall.remember(%s, 'Deploy keys expire after 90 days.')", [AGENT])
        gone = r.forget_sessions(AGENT, datetime(2026, 2, 1, tzinfo=UTC))
        assert [g["session_id"] for g in gone] == ["jan"]
        assert [row["session_id"] for row in r.forgotten_sessions(AGENT)] == ["jan"]
        # the memories session is never recorded: deleting it (as --all does) does not stop remember
        conn.execute("delete from recall.sessions where session_id = %s", [f"memories:{AGENT}"])
        assert [row["session_id"] for row in r.forgotten_sessions(AGENT)] == ["jan"]
        assert r.conn.execute("select recall.remember(%s, 'still works')", [AGENT]).fetchone()[0] > 0


def test_forget_all_is_a_new_start(db_url, conn):
    with Recall(db_url) as r:
        r.add_messages("s1", messages("s1"), agent_id=AGENT)
        r.forget(agent_id=AGENT, session_id="s1")
        r.add_messages("s2", messages("s2"), agent_id=AGENT)
        r.forget(agent_id=AGENT)
        assert r.forgotten_sessions(AGENT) == []
        assert r.add_messages("s1", messages("s1"), agent_id=AGENT).inserted == 2


def test_async_twins(db_url):
    async def run():
        async with await AsyncRecall.connect(db_url) as r:
            await r.add_messages("s1", messages("s1"), agent_id=AGENT)
            await r.forget(agent_id=AGENT, session_id="s1")
            listed = await r.forgotten_sessions(AGENT)
            back = await r.unforget_sessions(AGENT, ["s1"])
            return [x["session_id"] for x in listed], [x["session_id"] for x in back]
    assert asyncio.run(run()) == (["s1"], ["s1"])


def claude_code_line(n: int, text: str, sid: str) -> str:
    return json.dumps({"type": "user" if n % 2 == 0 else "assistant", "sessionId": sid, "uuid": f"{sid}-{n}",
                       "parentUuid": None, "cwd": "/home/dev/app", "gitBranch": "main",
                       "timestamp": f"2026-04-01T10:{n:02d}:00Z",
                       "message": {"role": "user" if n % 2 == 0 else "assistant", "content": text}}) + "\n"


def test_cli_forget_import_forgotten_unforget(db_url, conn, tmp_path: Path):
    """The whole story at the terminal: a transcript imported, its session forgotten, the file
    growing and synced, read again whole: the session stays out, the summary says so; unforget
    and import --full bring it back."""
    runner = CliRunner()
    env = {"PYRECALL_DSN": db_url, "PYRECALL_AGENT": AGENT}
    t = tmp_path / "proj" / "c0ffee.jsonl"
    t.parent.mkdir()
    t.write_text(claude_code_line(0, "how do we rotate the deploy key?", "c0ffee")
                 + claude_code_line(1, "with the vault job", "c0ffee"))

    def cli(*args):
        out = runner.invoke(main, list(args), env=env)
        assert out.exit_code == 0, out.output
        return out.output

    cli("import", str(t))
    assert counts(conn, "c0ffee") == (1, 2, 1)
    assert "forgot session c0ffee" in cli("forget", "--session", "c0ffee")
    with t.open("a") as f:
        f.write(claude_code_line(2, "and the refund webhook?", "c0ffee"))
    st = t.stat()
    os.utime(t, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    out = cli("import", "--full", str(t))
    assert "forgotten: 1 session(s) deleted before were not stored again" in out
    assert counts(conn, "c0ffee") == (0, 0, 0)
    assert "c0ffee" in cli("forgotten")
    assert json.loads(cli("forgotten", "--json"))["sessions"][0]["session_id"] == "c0ffee"
    bad = runner.invoke(main, ["unforget"], env=env)
    assert bad.exit_code == 2 and "give the forgotten session ids" in bad.output
    missing = runner.invoke(main, ["unforget", "nope"], env=env)
    assert missing.exit_code == 1 and "not forgotten: nope" in missing.output
    assert "1 session(s) of agent 'keeper' may be imported again" in cli("unforget", "c0ffee")
    cli("import", "--full", str(t))
    assert counts(conn, "c0ffee") == (1, 3, 2)
    assert "no session of agent 'keeper' is forgotten" in cli("forgotten")
