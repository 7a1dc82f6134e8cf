"""Incremental sync: only what changed is read; an appended line is read from the remembered
offset, a rewritten file from the start; a file's messages and its source_files row commit
together, so a run killed at any point and run again stores each message exactly once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pyrecall import _sync
from pyrecall.importers import PARSERS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def line(n: int, text: str, role: str = "user", sid: str = "sess-1") -> bytes:
    content = text if role == "user" else [{"type": "text", "text": text}]
    obj = {"type": role, "sessionId": sid, "uuid": f"{sid}-{n}", "parentUuid": None,
           "cwd": "/home/dev/app", "gitBranch": "main", "timestamp": f"2026-04-01T10:{n:02d}:00Z",
           "message": {"role": role, "content": content}}
    return (json.dumps(obj) + "\n").encode()


def bump_mtime(path: Path) -> None:
    """Make sure a rewrite is seen even on a file system with coarse timestamps."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


@pytest.fixture
def parsed(monkeypatch):
    """Every parse: (file name, start offset, end offset)."""
    calls = []

    def spy(fmt):
        inner = PARSERS[fmt]

        def parse(path, start_offset=0):
            result = inner(path, start_offset=start_offset)
            calls.append((Path(path).name, start_offset, result.end_offset))
            return result
        return parse

    monkeypatch.setattr(_sync, "PARSERS", {fmt: spy(fmt) for fmt in PARSERS})
    return calls


def source_row(conn, path: Path, agent="claude-code"):
    return conn.execute("select format, size, offset_done, messages from recall.source_files "
                        "where agent_id = %s and path = %s", [agent, str(path)]).fetchone()


def contents(conn) -> list[str]:
    return [r[0] for r in conn.execute("select content from recall.messages order by session_id, seq")]


def test_appended_line_is_read_from_the_offset_only(conn, tmp_path, parsed):
    f = tmp_path / "sess-1.jsonl"
    f.write_bytes(line(1, "how do we deploy?") + line(2, "with compose", "assistant"))
    size1 = f.stat().st_size
    _sync.index(conn, [tmp_path], agent_id="claude-code")
    assert source_row(conn, f) == ("claude_code", size1, size1, 2)

    extra = line(3, "and the health check?")
    with open(f, "ab") as fh:
        fh.write(extra)
    bump_mtime(f)
    report = _sync.sync(conn, agent_id="claude-code")

    [result] = report.files
    assert (result.status, result.start_offset, result.end_offset) == ("appended", size1, size1 + len(extra))
    assert result.bytes_read == len(extra)
    assert (result.messages, result.inserted) == (1, 1)
    # the parser was asked for the new bytes only: the file was not read again from 0
    assert parsed == [("sess-1.jsonl", 0, size1), ("sess-1.jsonl", size1, size1 + len(extra))]
    assert source_row(conn, f) == ("claude_code", size1 + len(extra), size1 + len(extra), 3)
    assert contents(conn) == ["how do we deploy?", "with compose", "and the health check?"]
    # the project stays the first cwd, the seq numbers go on
    assert conn.execute("select project, branch from recall.sessions").fetchone() == ("/home/dev/app", "main")
    assert [r[0] for r in conn.execute("select seq from recall.messages order by seq")] == [1, 2, 3]


def codex_line(kind: str, payload: dict, second: int) -> bytes:
    return (json.dumps({"timestamp": f"2026-04-01T10:00:{second:02d}Z", "type": kind,
                        "payload": payload}) + "\n").encode()


def codex_say(role: str, text: str, second: int) -> bytes:
    part = "output_text" if role == "assistant" else "input_text"
    return codex_line("response_item", {"type": "message", "role": role,
                                        "content": [{"type": part, "text": text}]}, second)


def test_growing_codex_rollout_is_read_from_the_offset(conn, tmp_path, parsed):
    day = tmp_path / "sessions" / "2026" / "04" / "01"
    day.mkdir(parents=True)
    f = day / "rollout-2026-04-01T10-00-00-0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee.jsonl"
    f.write_bytes(codex_line("session_meta", {"id": "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee",
                                              "cwd": "/home/dev/app", "git": {"branch": "main"}}, 0)
                  + codex_say("user", "why does the build fail on alpine?", 1))
    size1 = f.stat().st_size
    _sync.index(conn, [tmp_path / "sessions"], agent_id="claude-code")
    assert source_row(conn, f) == ("codex", size1, size1, 1)

    extra = (codex_line("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                                          "arguments": '{"command": ["make"]}'}, 2)
             + codex_line("response_item", {"type": "function_call_output", "call_id": "c1",
                                            "output": "Exit code: 2\nOutput:\nmusl: missing libstdc++"}, 3)
             + codex_say("assistant", "alpine lacks libstdc++", 4))
    with open(f, "ab") as fh:
        fh.write(extra + b'{"timestamp": "2026-04-01T10:00:05Z", "type": "respo')  # still being written
    bump_mtime(f)
    report = _sync.sync(conn, agent_id="claude-code")

    [result] = report.files
    assert (result.status, result.start_offset, result.end_offset, result.inserted) == (
        "appended", size1, size1 + len(extra), 3)
    assert contents(conn) == ["why does the build fail on alpine?", 'shell(command=["make"])',
                              "Exit code: 2\nOutput:\nmusl: missing libstdc++", "alpine lacks libstdc++"]
    # the appended lines name no session: they join the one the first line names
    assert conn.execute("select session_id, project, branch, metadata->>'source_agent' "
                        "from recall.sessions").fetchall() == [
        ("0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee", "/home/dev/app", "main", "codex")]
    assert conn.execute("select count(*) from recall.chunks where kind = 'tool' "
                        "and content like '%musl%'").fetchone()[0] == 1
    again = _sync.sync(conn, agent_id="claude-code")
    assert [(r.status, r.inserted) for r in again.files] == [("unchanged", 0)]


def gemini_record(obj: dict) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def test_growing_gemini_chat_is_read_from_the_offset(conn, tmp_path, parsed):
    chats = tmp_path / "tmp" / "9f86d081" / "chats"
    chats.mkdir(parents=True)
    f = chats / "session-2026-04-01T10-00-aaaa1111.jsonl"
    answer = {"id": "g1", "timestamp": "2026-04-01T10:00:05Z", "type": "gemini", "content": "running make"}
    f.write_bytes(gemini_record({"sessionId": "aaaa1111-2222", "projectHash": "9f86d081",
                                 "startTime": "2026-04-01T10:00:00Z"})
                  + gemini_record({"id": "u1", "timestamp": "2026-04-01T10:00:01Z", "type": "user",
                                   "content": [{"text": "why does make fail?"}]})
                  + gemini_record(answer))
    size1 = f.stat().st_size
    _sync.index(conn, [tmp_path / "tmp"], agent_id="claude-code")
    assert source_row(conn, f) == ("gemini", size1, size1, 2)

    # Gemini CLI writes the answer again with its tool call, then titles the chat
    call = {"id": "c1", "name": "run_shell_command", "args": {"command": "make"}, "status": "success",
            "result": [{"functionResponse": {"response": {"output": "cc: not found\nExit Code: 127"}}}]}
    extra = (gemini_record({**answer, "toolCalls": [call]})
             + gemini_record({"$set": {"summary": "make fails: no compiler"}}))
    with open(f, "ab") as fh:
        fh.write(extra)
    bump_mtime(f)
    report = _sync.sync(conn, agent_id="claude-code")

    [result] = report.files
    assert (result.status, result.start_offset, result.messages, result.inserted) == (
        "appended", size1, 3, 2)  # the answer's text again (stored already), the call, its result
    assert contents(conn) == ["why does make fail?", "running make", 'run_shell_command(command="make")',
                              "cc: not found\nExit Code: 127"]
    assert conn.execute("select session_id, title, metadata->>'source_agent' from recall.sessions").fetchall() == [
        ("aaaa1111-2222", "make fails: no compiler", "gemini")]


def test_unchanged_files_are_not_opened(conn, tmp_path, parsed):
    f = tmp_path / "a.jsonl"
    f.write_bytes(line(1, "hello"))
    _sync.index(conn, [tmp_path], agent_id="claude-code")
    parsed.clear()

    report = _sync.sync(conn, agent_id="claude-code")

    assert [r.status for r in report.files] == ["unchanged"]
    assert parsed == []


def test_partial_last_line_waits_for_its_end(conn, tmp_path, parsed):
    f = tmp_path / "a.jsonl"
    whole = line(1, "first") + line(2, "second one")
    f.write_bytes(whole[: len(line(1, "first")) + 20])  # a writer in the middle of line 2
    _sync.index(conn, [f], agent_id="claude-code")
    assert contents(conn) == ["first"]
    assert source_row(conn, f)[2] == len(line(1, "first"))

    f.write_bytes(whole)
    bump_mtime(f)
    report = _sync.sync(conn, agent_id="claude-code")

    assert [(r.status, r.start_offset, r.inserted) for r in report.files] == [
        ("appended", len(line(1, "first")), 1)]
    assert contents(conn) == ["first", "second one"]


def test_rewritten_or_truncated_file_is_read_again_from_the_start(conn, tmp_path, parsed):
    f = tmp_path / "a.jsonl"
    f.write_bytes(line(1, "old question") + line(2, "old answer", "assistant"))
    _sync.index(conn, [f], agent_id="claude-code")

    f.write_bytes(line(1, "new question"))          # shorter: truncated and rewritten
    bump_mtime(f)
    report = _sync.sync(conn, agent_id="claude-code")
    assert [(r.status, r.start_offset) for r in report.files] == [("rewritten", 0)]

    f.write_bytes(line(1, "same length, other text!!!") + line(2, "x" * 40, "assistant"))
    bump_mtime(f)
    report = _sync.sync(conn, agent_id="claude-code")
    assert [(r.status, r.start_offset) for r in report.files] == [("rewritten", 0)]
    assert parsed[-1][1] == 0
    assert source_row(conn, f)[2] == f.stat().st_size


def test_sync_finds_new_files_in_indexed_folders_and_forgets_gone_ones(conn, tmp_path):
    root = tmp_path / "projects"
    (root / "app").mkdir(parents=True)
    (root / "app" / "s1.jsonl").write_bytes(line(1, "one", sid="s1"))
    _sync.index(conn, [root], agent_id="claude-code")
    assert _sync.sync_roots(conn, "claude-code") == [root]

    (root / "app" / "s2.jsonl").write_bytes(line(1, "two", sid="s2"))
    (root / "app" / "s1.jsonl").unlink()
    report = _sync.sync(conn, agent_id="claude-code")

    assert sorted((Path(r.path).name, r.status) for r in report.files) == [("s2.jsonl", "new")]
    assert report.gone == [str(root / "app" / "s1.jsonl")]
    assert contents(conn) == ["one", "two"]  # forgetting a file keeps its memories
    assert source_row(conn, root / "app" / "s1.jsonl") is None


def test_sync_without_history_uses_the_agents_folders_or_says_what_to_do(conn, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(_sync.ConfigError) as exc:
        _sync.sync(conn, agent_id="claude-code")
    assert str(exc.value) == (
        "nothing to sync for agent 'claude-code': nothing was indexed before and none of "
        "~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp, ~/.cline/data/sessions, ~/.continue/sessions, "
        "~/.local/share/opencode/opencode.db (nor an editor extension's tasks) exists; run `pyrecall import "
        "PATH` first")

    projects = tmp_path / ".claude" / "projects" / "-home-dev-app"
    projects.mkdir(parents=True)
    (projects / "s1.jsonl").write_bytes(line(1, "from claude", sid="s1"))
    rollouts = tmp_path / ".codex" / "sessions" / "2026" / "04" / "01"
    rollouts.mkdir(parents=True)
    (rollouts / "rollout-1.jsonl").write_bytes(codex_say("user", "from codex", 1))
    report = _sync.sync(conn, agent_id="claude-code")
    assert report.inserted == 2
    assert sorted((r.format, r.status) for r in report.files) == [("claude_code", "new"), ("codex", "new")]
    # ~/.gemini/tmp does not exist: it is not remembered either
    assert _sync.sync_roots(conn, "claude-code") == [tmp_path / ".claude" / "projects",
                                                     tmp_path / ".codex" / "sessions"]


def test_sources_are_per_agent(conn, tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_bytes(line(1, "hello", sid="s-a"))
    _sync.index(conn, [f], agent_id="agent-a")
    assert _sync.sync_roots(conn, "agent-b") == []
    assert source_row(conn, f, "agent-a")[0] == "claude_code"


KILLER = textwrap.dedent("""
    import os, signal, sys
    from pyrecall import _db, _ingest, _sync

    real = _ingest.ingest
    calls = 0

    def ingest(conn, sessions, **kw):
        global calls
        calls += 1
        report = real(conn, sessions, **kw)
        if calls == int(sys.argv[3]):   # messages written, transaction not committed yet
            os.kill(os.getpid(), signal.SIGKILL)
        return report

    _ingest.ingest = ingest
    with _db.connect(sys.argv[1]) as conn:
        _sync.index(conn, [sys.argv[2]], agent_id="claude-code")
""")


def test_killed_mid_file_and_run_again_stores_each_message_once(conn, db_url, tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    for i in range(4):
        (folder / f"s{i}.jsonl").write_bytes(b"".join(
            line(n, f"message {n} of session {i}", "user" if n % 2 else "assistant", sid=f"s{i}")
            for n in range(1, 6)))
    script = tmp_path / "killer.py"
    script.write_text(KILLER)

    proc = subprocess.run([sys.executable, str(script), db_url, str(folder), "3"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    # two files committed whole; the third died inside its transaction: nothing of it stored
    deadline = time.monotonic() + 10
    while conn.execute("select count(*) from pg_stat_activity where datname = current_database() "
                       "and pid <> pg_backend_pid()").fetchone()[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert conn.execute("select count(*) from recall.messages").fetchone()[0] == 10
    assert conn.execute("select count(*) from recall.source_files where format <> 'folder'").fetchone()[0] == 2

    report = _sync.index(conn, [folder], agent_id="claude-code")

    assert sorted(r.status for r in report.files) == ["new", "new", "unchanged", "unchanged"]
    assert conn.execute("select count(*), count(distinct (session_id, external_id)) "
                        "from recall.messages").fetchone() == (20, 20)
    assert conn.execute("select sum(messages) from recall.source_files").fetchone()[0] == 20


def test_two_syncs_at_once_store_each_message_once(conn, db_url, tmp_path):
    import threading

    import psycopg

    for i in range(6):
        (tmp_path / f"s{i}.jsonl").write_bytes(b"".join(
            line(n, f"message {n} of {i}", sid=f"s{i}") for n in range(1, 4)))
    reports, errors = [], []

    def run():
        try:
            with psycopg.connect(db_url, autocommit=True) as c:
                reports.append(_sync.index(c, [tmp_path], agent_id="claude-code"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(r.inserted for r in reports) == [0, 18]
    assert all(r.count("failed") == 0 for r in reports)
    assert conn.execute("select count(*) from recall.messages").fetchone()[0] == 18


@pytest.mark.parametrize("name, fmt", [("chatgpt", "chatgpt"), ("claude_ai", "claude_ai")])
def test_a_chat_apps_export_is_imported_and_a_newer_one_adds_what_is_new(conn, tmp_path, name, fmt):
    """ChatGPT's and Claude.ai's conversations.json: each conversation a session of the app
    (source_agent), turn pairs; the next month's export (the same conversations, one answer
    more) adds that answer only."""
    src = HERE / "fixtures" / "importers" / name / "conversations.json"
    export = tmp_path / "export" / "conversations.json"
    export.parent.mkdir()
    export.write_bytes(src.read_bytes())
    (tmp_path / "export" / "user.json").write_text('{"id": "user-1", "email": "me@example.com"}')
    report = _sync.index(conn, [tmp_path / "export"], agent_id="me")
    by_file = {Path(f.path).name: f for f in report.files}
    assert by_file["conversations.json"].format == fmt and by_file["user.json"].status == "not-transcript"
    sessions = conn.execute("select session_id, title, metadata->>'source_agent' from recall.sessions "
                            "where agent_id = 'me' order by started_at").fetchall()
    assert sessions and {s[2] for s in sessions} == {fmt.replace("_", "-")}
    chunks = conn.execute("select kind, content from recall.chunks where agent_id = 'me'").fetchall()
    pairs = [c for k, c in chunks if k == "turn_pair"]
    assert pairs and all(c.startswith("User: ") and "\n\nAssistant: " in c for c in pairs)
    word = "PgBouncer" if fmt == "chatgpt" else "remote_addr"
    found = conn.execute("select content from recall.hybrid_recall('me', %s, k => 3)", [word]).fetchall()
    assert found and word in found[0][0]
    stored = conn.execute("select count(*) from recall.messages where agent_id = 'me'").fetchone()[0]
    # a newer export: one more answer in the first conversation
    doc = json.loads(src.read_text())
    if fmt == "chatgpt":
        conv = doc[0]
        conv["mapping"]["a2"]["children"] = ["u3"]
        conv["mapping"]["u3"] = {"id": "u3", "parent": "a2", "children": [], "message": {
            "id": "u3", "author": {"role": "user"}, "create_time": 1767262800.0,
            "content": {"content_type": "text", "parts": ["Thanks, deployed with default_pool_size=20."]},
            "recipient": "all"}}
        conv["current_node"] = "u3"
    else:
        doc[0]["chat_messages"].append({"uuid": "m6", "sender": "human", "text": "Deployed, thanks.",
                                        "created_at": "2026-02-03T08:30:00Z"})
    export.write_text(json.dumps(doc))
    again = _sync.index(conn, [tmp_path / "export"], agent_id="me")
    assert again.inserted == 1
    assert conn.execute("select count(*) from recall.messages where agent_id = 'me'").fetchone()[0] == stored + 1


def test_a_zip_archive_is_read_member_by_member(conn, tmp_path):
    """A chat app's export as it is e-mailed (a .zip): its .json/.jsonl members each read as a
    file (format detected), in one transaction; the archive remembered as one file, read again
    whole when it changes; a member that is no transcript reported by archive!member."""
    import zipfile

    chatgpt = (HERE / "fixtures" / "importers" / "chatgpt" / "conversations.json").read_text()
    claude_ai = (HERE / "fixtures" / "importers" / "claude_ai" / "conversations.json").read_text()

    def write(path, extra=None):
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("conversations.json", chatgpt if extra is None else extra)
            z.writestr("user.json", '{"id": "user-1"}')
            z.writestr("other/claude.json", claude_ai)
            z.writestr("__MACOSX/._conversations.json", "junk")
            z.writestr("chat.html", "<html></html>")
    archive = tmp_path / "export.zip"
    write(archive)
    report = _sync.index(conn, [archive], agent_id="me")
    [result] = report.files
    assert (result.status, result.format) == ("new", "zip")
    assert [(p.path, p.reason) for p in result.problems] == [
        (f"{archive}!user.json", "not a transcript (skipped)"),
        (f"{archive}!other/claude.json", "conversation 0c1d2e3f-0000-4000-8000-00000000000a: chat_messages[4]: "
                                         "unknown sender 'robot'")]
    assert result.inserted == 9 + 8 and result.sessions == 3
    assert conn.execute("select count(distinct metadata->>'source_agent') from recall.sessions "
                        "where agent_id = 'me'").fetchone()[0] == 2
    assert _sync.index(conn, [archive], agent_id="me").files[0].status == "unchanged"
    # next month's archive: one message more
    doc = json.loads(chatgpt)
    doc[1]["mapping"]["a"]["children"] = ["q2"]
    doc[1]["mapping"]["q2"] = {"id": "q2", "parent": "a", "children": [], "message": {
        "id": "q2", "author": {"role": "user"}, "create_time": 1767524500.0,
        "content": {"content_type": "text", "parts": ["And a dessert?"]}}}
    doc[1]["current_node"] = "q2"
    write(archive, json.dumps(doc))
    os.utime(archive, (time.time() + 5, time.time() + 5))
    again = _sync.index(conn, [archive], agent_id="me").files[0]
    assert (again.status, again.inserted) == ("updated", 1)
    # not a zip, and a zip with no transcript: said, nothing stored
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04 not really")
    with zipfile.ZipFile(tmp_path / "pictures.zip", "w") as z:
        z.writestr("a.png", b"\x89PNG")
    results = {Path(f.path).name: f for f in _sync.index(conn, [tmp_path / "broken.zip", tmp_path / "pictures.zip"],
                                                         agent_id="me").files}
    assert results["broken.zip"].status == "failed"
    assert "not a zip archive pyrecall can read" in results["broken.zip"].problems[0].reason
    assert results["pictures.zip"].status == "not-transcript"
    assert results["pictures.zip"].problems[0].reason == "no .json or .jsonl file in the archive (skipped)"


def test_folders_of_dependencies_are_passed_over(conn, tmp_path):
    """`pyrecall import ~/code`: the transcripts of the repositories, not the thousands of .json
    files of their node_modules, virtual environments and build caches."""
    code = tmp_path / "code"
    (code / "api").mkdir(parents=True)
    (code / "api" / ".aider.chat.history.md").write_text(
        "\n# aider chat started at 2026-03-10 09:15:02\n\n#### why does it fail?  \n\nmusl.\n\n")
    for junk in ("api/node_modules/left-pad", "api/env/lib", "api/target/debug", "api/src/__pycache__"):
        (code / junk).mkdir(parents=True)
        (code / junk / "package.json").write_text('{"name": "x"}')
    (code / "api" / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (code / "api" / "target" / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (code / "api" / "src" / "notes.json").write_text('{"not": "a transcript"}')
    report = _sync.index(conn, [code], agent_id="claude-code")
    assert sorted((Path(r.path).relative_to(code).as_posix(), r.status) for r in report.files) == [
        ("api/.aider.chat.history.md", "new"), ("api/src/notes.json", "not-transcript")]
    assert sorted(Path(p).relative_to(code).as_posix() for p in report.passed_over) == [
        "api/env", "api/node_modules", "api/src/__pycache__", "api/target"]
    assert report.as_dict()["passed_over"] == 4
    # a folder named on the command line is entered whatever its name
    again = _sync.index(conn, [code / "api" / "node_modules"], agent_id="claude-code")
    assert [Path(r.path).name for r in again.files] == ["package.json"]


def test_a_streamed_file_keeps_the_planners_statistics_up(conn, tmp_path, monkeypatch):
    """The batches of one file share a transaction autovacuum cannot see: the import analyzes
    the recall tables once the file has added more messages than the table held (each batch
    planned for the empty table took longer than the one before)."""
    from pyrecall.importers import jsonl
    monkeypatch.setattr(jsonl, "STREAM_MESSAGES", 10)
    monkeypatch.setattr(_sync, "SESSION_BATCH_MESSAGES", 10)
    analyzed = []
    real = _sync._Statistics.refresh

    def spy(self, added):
        before = self.added_then
        real(self, added)
        if self.added_then != before:
            analyzed.append((added, self.rows))
    monkeypatch.setattr(_sync._Statistics, "refresh", spy)
    f = tmp_path / "log.jsonl"
    f.write_text("".join(json.dumps({"session_id": f"s{i // 10}", "role": "user" if i % 2 == 0 else "assistant",
                                     "content": f"message {i} about the deploy"}) + "\n" for i in range(95)))
    report = _sync.index(conn, [f], agent_id="claude-code")
    assert report.inserted == 95 and report.problems == []
    # before the 2nd, 4th and 8th batch (what the file added since exceeded the table), counting
    # the file's rows, not yet committed
    assert analyzed == [(10, 10), (30, 30), (70, 70)]


def test_the_first_sync_finds_opencode_and_the_editor_extensions_tasks(conn, tmp_path, monkeypatch):
    """OpenCode's database (a file) and a Cline task in Cursor's storage, with nothing else."""
    monkeypatch.setenv("HOME", str(tmp_path))
    share = tmp_path / ".local" / "share" / "opencode"
    share.mkdir(parents=True)
    shutil.copy(HERE / "fixtures" / "importers" / "opencode" / "opencode.db", share / "opencode.db")
    tasks = tmp_path / ".config" / "Cursor" / "User" / "globalStorage" / "saoudrizwan.claude-dev" / "tasks"
    shutil.copytree(HERE / "fixtures" / "importers" / "cline" / "tasks", tasks)
    report = _sync.sync(conn, agent_id="claude-code")
    assert sorted((r.format, r.status) for r in report.files) == [("cline", "new"), ("opencode", "new")]
    assert report.inserted == 15 + 5
    # both remembered: the next sync reads them again, nothing new
    assert [(r.status, r.inserted) for r in _sync.sync(conn, agent_id="claude-code").files] == [
        ("unchanged", 0), ("unchanged", 0)]
