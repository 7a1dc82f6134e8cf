"""OpenCode's database (~/.local/share/opencode/opencode.db): the sessions, messages and parts
OpenCode 1.18.33 wrote (against a model server on loopback; fixture), more kinds of part added
to a copy in its own schema, read again storing only what is new, SQLite's files beside it read
with it, a database of another program said."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

from pyrecall import _sync
from pyrecall.importers import detect_format, iter_files, opencode, parse_any

HERE = Path(__file__).resolve().parent
DB = HERE / "fixtures" / "importers" / "opencode" / "opencode.db"
SID = "ses_dcb7c5115ffeb5ojh3A9ApWp9L"


def test_what_opencode_wrote():
    assert detect_format(DB) == "opencode"
    result = parse_any(DB)
    assert result.problems == []
    [s] = result.sessions
    assert [(m.role, m.kind, m.content.splitlines()[0]) for m in s.messages] == [
        ("user", "text", '"What does app.py do?"'),
        ("assistant", "text", "Let me read the file."),
        ("assistant", "tool_call", 'read(filepath="app.py", path="app.py", file_path="app.py")'),
        ("tool", "tool_result", "The read tool was called with invalid arguments: SchemaError(Missing key"),
        ("assistant", "text", "app.py prints a greeting: print('hi')."),
    ]
    assert s.messages[3].metadata == {"tool_name": "read", "tool_use_id": "call_1", "is_error": True}
    assert (s.session_id, s.project, s.metadata) == (SID, "/tmp/ocrepo",
                                                     {"source_agent": "opencode", "model": "gpt-4o-mini"})
    assert s.started_at.isoformat() == "2026-12-02T02:09:34.955000+00:00"
    assert len({m.external_id for m in s.messages}) == 5      # each part its own id


def add_parts(db: Path, message_id: str, parts: list[dict], t0: int) -> None:
    with sqlite3.connect(db) as c:
        sid = c.execute("select session_id from message where id = ?", [message_id]).fetchone()[0]
        for i, p in enumerate(parts):
            c.execute("insert into part (id, message_id, session_id, time_created, time_updated, data) "
                      "values (?, ?, ?, ?, ?, ?)", [f"prt_test_{t0}_{i}", message_id, sid, t0 + i, t0 + i, json.dumps(p)])


def test_more_kinds_of_part_and_a_subagents_session(tmp_path):
    db = tmp_path / opencode.FILE_NAME
    shutil.copy(DB, db)
    answer = "msg_23483ba4c001zCM9QYOa3ELO7q"
    add_parts(db, answer, [
        {"type": "reasoning", "text": "The file holds one print call."},
        {"type": "tool", "tool": "bash", "callID": "c2", "state": {"status": "completed", "input": {"command": "python app.py"},
                                                                     "output": "hi"}},
        {"type": "text", "text": "Context the user did not write", "synthetic": True},
        {"type": "hologram"},
    ], 1796177379000)
    with sqlite3.connect(db) as c:
        row = c.execute("select * from session where id = ?", [SID]).fetchone()
        cols = [d[0] for d in c.execute("select * from session").description]
        child = dict(zip(cols, row, strict=True)) | {"id": "ses_child", "parent_id": SID, "title": "Explore the repo",
                                                      "time_created": 1796177380000}
        c.execute(f"insert into session ({', '.join(cols)}) values ({', '.join('?' * len(cols))})", list(child.values()))
        c.execute("insert into message (id, session_id, time_created, time_updated, data) values (?, ?, ?, ?, ?)",
                  ["msg_child", "ses_child", 1796177380001, 1796177380001, json.dumps({"role": "user"})])
    add_parts(db, "msg_child", [{"type": "text", "text": "List the files"}], 1796177380002)
    result = opencode.parse(db)
    main, child_session = result.sessions
    assert [(m.kind, m.content) for m in main.messages[-3:]] == [
        ("thinking", "The file holds one print call."), ("tool_call", 'bash(command="python app.py")'), ("tool_result", "hi")]
    assert main.messages[-1].metadata == {"tool_name": "bash", "tool_use_id": "c2", "is_error": False}
    assert (child_session.session_id, child_session.title, child_session.metadata["parent_session"]) == (
        "ses_child", "Explore the repo", SID)
    assert [p.reason for p in result.problems] == ["part prt_test_1796177379000_3: unknown part type 'hologram'"]


def test_read_again_stores_only_what_is_new(conn, tmp_path):
    share = tmp_path / ".local" / "share" / "opencode"
    share.mkdir(parents=True)
    db = share / opencode.FILE_NAME
    shutil.copy(DB, db)
    (share / "opencode.db-shm").write_bytes(b"")                  # SQLite's files beside it: read with it
    (share / "log").mkdir()
    (share / "log" / "opencode.log").write_text("INFO started\n")
    assert [p.name for p in iter_files([share])] == [opencode.FILE_NAME]
    report = _sync.index(conn, [share], agent_id="claude-code")
    assert [(r.format, r.status, r.inserted) for r in report.files] == [("opencode", "new", 5)]
    assert report.ignored == [str(share / "log" / "opencode.log")]
    add_parts(db, "msg_23483ba4c001zCM9QYOa3ELO7q", [{"type": "text", "text": "Anything else?"}], 1796177390000)
    os.utime(db, ns=(db.stat().st_atime_ns, db.stat().st_mtime_ns + 2_000_000_000))
    [r] = _sync.sync(conn, agent_id="claude-code").files
    assert (r.status, r.inserted) == ("updated", 1)
    assert conn.execute("select count(*), count(distinct external_id) from recall.messages").fetchone() == (6, 6)
    assert conn.execute("select kind, count(*) from recall.chunks where kind = 'tool' and (metadata->>'is_error')::bool "
                        "group by kind").fetchall() == [("tool", 1)]
    assert conn.execute("select project, metadata->>'source_agent' from recall.sessions").fetchall() == [
        ("/tmp/ocrepo", "opencode")]


def test_another_database_of_that_name(tmp_path):
    other = tmp_path / opencode.FILE_NAME
    with sqlite3.connect(other) as c:
        c.execute("create table notes (id integer primary key, body text)")
    result = opencode.parse(other)
    assert (result.sessions, [p.reason for p in result.problems]) == (
        [], ["not OpenCode's database: no message, part, session table"])
    junk = tmp_path / "x" / opencode.FILE_NAME
    junk.parent.mkdir()
    junk.write_text("not a database")
    assert detect_format(junk) is None
