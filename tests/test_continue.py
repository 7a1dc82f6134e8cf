"""Continue sessions (~/.continue/sessions/<id>.json): parsed exactly, its list of sessions read
with them (the time) and not reported as a file of its own, an edited session stored once per
message."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pyrecall import _sync
from pyrecall.importers import continue_dev, detect_format, iter_files, parse_any

HERE = Path(__file__).resolve().parent
SESSIONS = HERE / "fixtures" / "importers" / "continue" / "sessions"
SID = "4f6a2c1e-8b3d-4e5f-9a0b-1c2d3e4f5a6b"
SESSION = SESSIONS / f"{SID}.json"

WANT = [
    ("user", "text", "Cache hit rate dropped to 0 after today's deploy. Why?"),
    ("assistant", "thinking", "The key prefix changed from v1 to v2, so every old entry misses."),
    ("assistant", "text", "Let me look at the cache keys."),
    ("assistant", "tool_call", 'read_file(filepath="app/cache.py")'),
    ("tool", "tool_result", "KEY = f'v2:{user_id}'\nTTL = 3600"),
    ("assistant", "text", "The deploy changed the key prefix from `v1:` to `v2:`: every entry written before is "
                          "missed until it expires (TTL 1 h). Keep `v1:` or warm the cache."),
    ("user", "text", "ok, keep v1"),
]


def test_fixture_exactly():
    assert detect_format(SESSION) == "continue"
    result = parse_any(SESSION)
    assert result.format == "continue" and result.problems == []
    [s] = result.sessions
    assert [(m.role, m.kind, m.content) for m in s.messages] == WANT
    assert (s.session_id, s.title, s.project) == (SID, "Redis cache misses after deploy", "/home/dev/shop")
    assert s.metadata == {"source_agent": "continue", "mode": "agent", "model": "Claude Sonnet 4.5"}
    assert s.started_at.isoformat() == "2026-01-05T11:00:00+00:00"      # sessions.json's dateCreated
    assert all(m.created_at == s.started_at for m in s.messages)
    assert "KEY = f'v2" not in WANT[0][2]       # the attached file (contextItems) is no message
    assert [m.metadata for m in s.messages if m.kind.startswith("tool")] == [
        {"tool_name": "read_file", "tool_use_id": "call_1"}] * 2


def test_its_list_of_sessions_is_read_with_them(tmp_path):
    home = tmp_path / ".continue" / "sessions"
    shutil.copytree(SESSIONS, home)
    assert [p.name for p in iter_files([tmp_path / ".continue" / "sessions"])] == [SESSION.name]
    # a sessions.json elsewhere is a file like any other
    other = tmp_path / "elsewhere"
    shutil.copytree(SESSIONS, other)
    assert sorted(p.name for p in iter_files([other])) == sorted([SESSION.name, "sessions.json"])


def test_without_its_list_no_time_and_a_broken_list_said(tmp_path):
    shutil.copy(SESSION, tmp_path / SESSION.name)
    [s] = continue_dev.parse(tmp_path / SESSION.name).sessions
    assert s.started_at is None
    (tmp_path / "sessions.json").write_text("[{")
    result = continue_dev.parse(tmp_path / SESSION.name)
    assert [p.reason for p in result.problems] == ["not read (JSONDecodeError)"]


def test_an_edited_session_is_stored_once_per_message(conn, tmp_path):
    home = tmp_path / ".continue" / "sessions"
    shutil.copytree(SESSIONS, home)
    f = home / SESSION.name
    report = _sync.index(conn, [home], agent_id="claude-code")
    assert [(r.format, r.status, r.inserted) for r in report.files] == [("continue", "new", len(WANT))]
    assert report.problems == [] and report.ignored == []
    # the user edits their last message and asks again: Continue cuts the history there
    doc = json.loads(f.read_text())
    doc["history"] = doc["history"][:5] + [
        {"message": {"role": "user", "content": "warm the cache instead"}, "contextItems": []},
        {"message": {"role": "assistant", "content": "Run `make warm-cache` after each deploy."}, "contextItems": []}]
    f.write_text(json.dumps(doc))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 2_000_000_000))
    [r] = _sync.sync(conn, agent_id="claude-code").files
    assert (r.status, r.inserted) == ("updated", 2)
    got = [tuple(x) for x in conn.execute("select role, kind, content from recall.messages order by seq").fetchall()]
    assert got == WANT + [("user", "text", "warm the cache instead"),
                          ("assistant", "text", "Run `make warm-cache` after each deploy.")]
    kinds = dict(conn.execute("select kind, count(*) from recall.chunks group by kind").fetchall())
    assert kinds["tool"] == 1 and kinds["turn_pair"] >= 2 and kinds["thinking"] == 1
    assert conn.execute("select project, metadata->>'source_agent', started_at::text from recall.sessions"
                        ).fetchall() == [("/home/dev/shop", "continue", "2026-01-05 11:00:00+00")]


def test_a_session_continues_cli_wrote():
    """Continue's CLI 1.5.47 (`cn -p ... --auto` against a model server on loopback that calls its
    Read tool once, then answers): the tool's output is kept beside the call (toolCallStates), the
    placeholder title stands for none."""
    path = HERE / "fixtures" / "importers" / "continue" / "cn-1.5.47" / "121b4b0d-1b06-4629-a9bf-4061fc2be279.json"
    assert detect_format(path) == "continue"
    result = parse_any(path)
    [s] = result.sessions
    assert result.problems == []
    assert [(m.role, m.kind, m.content) for m in s.messages] == [
        ("user", "text", "What does app.py do?"),
        ("assistant", "text", "Let me read the file."),
        ("assistant", "tool_call", 'Read(filepath="app.py", path="app.py", file_path="app.py")'),
        ("tool", "tool_result", "Content of app.py:\nprint('hi')"),
        ("assistant", "text", "app.py prints a greeting: print('hi')."),
    ]
    assert s.messages[3].metadata == {"tool_use_id": "call_1", "is_error": False, "tool_name": "Read"}
    assert (s.title, s.project, s.started_at.isoformat()) == (
        "What does app.py do?", "/tmp/cnrepo", "2026-12-02T02:04:35.274000+00:00")


def test_a_result_kept_twice_is_read_once(tmp_path):
    """A tool's output both beside its call and as a tool message (the editor's sessions): once."""
    doc = {"sessionId": "s", "title": "t", "workspaceDirectory": "/w", "history": [
        {"message": {"role": "assistant", "content": "",
                     "toolCalls": [{"id": "c9", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
         "contextItems": [], "toolCallState": {"toolCallId": "c9", "status": "errored",
                                               "output": [{"content": "ls: permission denied"}]}},
        {"message": {"role": "tool", "content": "ls: permission denied", "toolCallId": "c9"}, "contextItems": []}]}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(doc))
    [s] = continue_dev.parse(f).sessions
    assert [(m.kind, m.content, m.metadata.get("is_error")) for m in s.messages] == [
        ("tool_call", "ls()", None), ("tool_result", "ls: permission denied", True)]
