"""Cline and Roo Code tasks: api_conversation_history.json parsed exactly (XML tool calls, results,
thinking, environment details left out), told from other chat JSON by its name, its sidecar files
read with it and not reported, a growing or rewound task stored once per message."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pyrecall import _sync
from pyrecall.importers import cline, detect_format, iter_files, parse_any

HERE = Path(__file__).resolve().parent
TASK = HERE / "fixtures" / "importers" / "cline" / "tasks" / "1767000000000"
HISTORY = TASK / cline.FILE_NAME

WANT = [
    ("user", "text", "tests/test_login.py::test_login_ok fails since this morning with a 401. Fix it."),
    ("assistant", "thinking", "A 401 in a login test usually means the token fixture. Run the test first."),
    ("assistant", "tool_call", 'execute_command(command="pytest tests/test_login.py -x -q", requires_approval="false")'),
    ("tool", "tool_result", "Command executed.\nOutput:\nF\n>       assert resp.status_code == 200\n"
                            "E       assert 401 == 200\n1 failed in 0.41s"),
    ("assistant", "text", "The test gets a 401. Let me read the fixture."),
    ("assistant", "tool_call", 'read_file(path="tests/conftest.py")'),
    ("tool", "tool_result", "@pytest.fixture\ndef token():\n    return make_token(user_id=1, expires_in=-1)"),
    ("assistant", "text", "The fixture makes a token that has already expired."),
    ("assistant", "tool_call", 'replace_in_file(path="tests/conftest.py", diff="""\n------- SEARCH\n'
                               '    return make_token(user_id=1, expires_in=-1)\n=======\n'
                               '    return make_token(user_id=1, expires_in=3600)\n+++++++ REPLACE\n""")'),
    ("tool", "tool_result", "The content was successfully saved to tests/conftest.py."),
    ("assistant", "tool_call", 'write_to_file(path="docs/NOTES.md", content="Tokens in fixtures must not be expired.")'),
    ("tool", "tool_result", "The tool execution failed with the following error:\n<error>\n"
                            "EACCES: permission denied, open 'docs/NOTES.md'\n</error>"),
    ("assistant", "text", "The token fixture created an already expired token (expires_in=-1); the server now checks "
                          "expiry. It now issues a token valid for an hour and both login tests pass."),
    ("user", "text", "Thanks! Why did it break today?"),
    ("assistant", "text", "Until yesterday the API did not check token expiry; today's release added the check."),
]


def test_fixture_exactly():
    assert detect_format(HISTORY) == "cline"
    result = parse_any(HISTORY)
    assert result.format == "cline" and result.problems == []
    [s] = result.sessions
    assert [(m.role, m.kind, m.content) for m in s.messages] == WANT
    assert (s.session_id, s.title, s.project) == (
        "cline-1767000000000", WANT[0][2], "/home/dev/invoices")
    assert s.metadata == {"source_agent": "cline", "model": "claude-sonnet-4-5"}
    assert (s.started_at.isoformat(), s.ended_at.isoformat()) == ("2026-01-02T09:00:05+00:00",
                                                                  "2026-01-02T09:02:05+00:00")
    everything = "\n".join(m.content for m in s.messages)
    assert "environment_details" not in everything and "VSCode" not in everything
    assert [m.metadata.get("is_error") for m in s.messages if m.kind == "tool_result"] == [False, False, False, True]
    assert [m.metadata.get("tool_use_id") for m in s.messages if m.kind != "text"][-4:] == [
        "toolu_01", "toolu_01", None, None]
    assert all(m.external_id is None for m in s.messages)   # identified by what they say


def test_the_same_list_under_another_name_is_another_format(tmp_path):
    other = tmp_path / "chat.json"
    shutil.copy(HISTORY, other)
    assert detect_format(other) == "openai_chat"


def test_a_task_folder_gives_one_transcript(tmp_path):
    assert [p.name for p in iter_files([TASK.parent])] == [cline.FILE_NAME]


def test_roo_code_and_a_task_without_times(tmp_path):
    task = tmp_path / "globalStorage" / "rooveterinaryinc.roo-cline" / "tasks" / "0193f1aa-2b3c-7d4e-8f90-a1b2c3d4e5f6"
    task.mkdir(parents=True)
    (task / cline.FILE_NAME).write_text(json.dumps([
        {"role": "user", "content": "<task>\nRename the config key\n</task>\n<environment_details>\n"
                                    "# Current Workspace Directory (/home/dev/roo) Files\n</environment_details>"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "A rename across files."},
                                          {"type": "text", "text": "Done."}]}]))
    (task / "ui_messages.json").write_text("{broken")
    result = cline.parse(task / cline.FILE_NAME)
    [s] = result.sessions
    assert (s.session_id, s.metadata, s.project, s.started_at) == (
        "roo-code-0193f1aa-2b3c-7d4e-8f90-a1b2c3d4e5f6", {"source_agent": "roo-code"}, "/home/dev/roo", None)
    assert [(m.kind, m.content) for m in s.messages] == [("text", "Rename the config key"),
                                                         ("thinking", "A rename across files."), ("text", "Done.")]
    assert [p.reason for p in result.problems] == ["not read (JSONDecodeError)"]


def test_a_cut_file_keeps_its_whole_messages(tmp_path):
    task = tmp_path / "tasks" / "1767000000001"
    task.mkdir(parents=True)
    data = HISTORY.read_text()
    (task / cline.FILE_NAME).write_text(data[:data.index('{"role": "assistant", "content": [{"type": "text", '
                                                         '"text": "The fixture makes')] + '{"role": "assi')
    result = cline.parse(task / cline.FILE_NAME)
    assert [m.content for m in result.sessions[0].messages] == [c for _, _, c in WANT[:7]]
    assert len(result.problems) == 1 and result.problems[0].reason.startswith("invalid JSON")


def rows(conn, sql, *args):
    return conn.execute(sql, args).fetchall()


def test_a_growing_and_rewound_task_is_stored_once_per_message(conn, tmp_path):
    task = tmp_path / "saoudrizwan.claude-dev" / "tasks" / "1767000000000"
    shutil.copytree(TASK, task)
    history = json.loads(HISTORY.read_text())
    (task / cline.FILE_NAME).write_text(json.dumps(history[:6]))
    report = _sync.index(conn, [tmp_path], agent_id="claude-code")
    assert [(r.format, r.status) for r in report.files] == [("cline", "new")]
    assert report.problems == [] and report.ignored == []          # the sidecars: read, not reported
    first = report.inserted

    def rewrite(messages, bump):
        f = task / cline.FILE_NAME
        f.write_text(json.dumps(messages))
        os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + bump * 2_000_000_000))

    rewrite(history, 1)                                             # the task went on
    [r] = _sync.sync(conn, agent_id="claude-code").files
    assert (r.status, r.inserted) == ("updated", len(WANT) - first)
    assert [(x[0], x[1], x[2]) for x in rows(conn, "select role, kind, content from recall.messages order by seq")] == WANT
    # rewound to a checkpoint, and taken another way: the new message is stored, nothing twice
    rewound = history[:10] + [{"role": "assistant", "content": "Let me check the permissions of docs/ first."}]
    rewrite(rewound, 2)
    [r] = _sync.sync(conn, agent_id="claude-code").files
    assert r.inserted == 1
    assert rows(conn, "select count(*), count(distinct (role, kind, content)) from recall.messages") == [
        (len(WANT) + 1, len(WANT) + 1)]
    # chunked as an agent's session: the failed write among the failures to avoid
    assert rows(conn, "select count(*) from recall.chunks where kind = 'tool' and (metadata->>'is_error')::bool "
                      "and content like %s", "%EACCES%") == [(1,)]
    assert rows(conn, "select session_id, project, title, metadata->>'source_agent' from recall.sessions") == [
        ("cline-1767000000000", "/home/dev/invoices", WANT[0][2], "cline")]


CLI = HERE / "fixtures" / "importers" / "cline" / "cli-3.0.65"


def test_a_session_clines_cli_wrote():
    """Cline's CLI 3.0.65 (`cline "..."` against a model server on loopback that calls its
    read_files tool once, then answers): <id>.messages.json with <id>.json beside it."""
    path = CLI / "1796177149015_ra6wq.messages.json"
    assert detect_format(path) == "cline"
    result = parse_any(path)
    assert result.problems == []
    [s] = result.sessions
    assert [(m.role, m.kind, m.content) for m in s.messages] == [
        ("user", "text", "What does app.py do?"),
        ("assistant", "text", "Let me read the file."),
        ("assistant", "tool_call", 'read_files(filepath="app.py", path="app.py", file_path="app.py")'),
        ("tool", "tool_result", "1 | print('hi')"),
        ("assistant", "text", "app.py prints a greeting: print('hi')."),
    ]
    assert (s.session_id, s.title, s.project, s.metadata) == (
        "cline-1796177149015_ra6wq", "What does app.py do?", "/tmp/clinerepo",
        {"source_agent": "cline", "model": "gpt-4o-mini"})
    assert s.messages[3].metadata == {"is_error": False, "tool_name": "read_files", "tool_use_id": "call_1"}
    assert s.messages[0].created_at.isoformat() == "2026-12-02T02:05:49.224000+00:00"
    assert (s.started_at.isoformat(), s.ended_at.isoformat()) == ("2026-12-02T02:05:49.020000+00:00",
                                                                  "2026-12-02T02:05:49.818000+00:00")
    # the meta file beside it is read with it, not on its own
    assert [p.name for p in iter_files([CLI])] == [path.name]


def test_a_failed_tool_of_clines_cli(tmp_path):
    (tmp_path / "s1.messages.json").write_text(json.dumps({"sessionId": "s1", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "<user_input mode=\"act\">run it</user_input>"}], "ts": 1},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "run_commands",
                                           "input": {"commands": ["make"]}}], "ts": 2},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "name": "run_commands",
                                      "content": [{"query": "make", "result": "make: *** No rule", "success": False},
                                                  {"query": "make test", "result": "ok", "success": True}]}],
         "ts": 3}]}))
    [s] = cline.parse(tmp_path / "s1.messages.json").sessions
    assert [(m.kind, m.content, m.metadata.get("is_error")) for m in s.messages] == [
        ("text", "run it", None), ("tool_call", 'run_commands(commands=["make"])', None),
        ("tool_result", "make:\nmake: *** No rule\nmake test:\nok", True)]
    assert s.project is None and s.session_id == "cline-s1"
