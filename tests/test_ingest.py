"""Importer fixtures through the ingestion path into PostgreSQL: exactly the sessions, messages
and chunk kinds expected, nothing twice on re-import, and bad input reported with file:line
while the rest lands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pyrecall import _sync
from pyrecall._ingest import ARRAY_BATCH_MAX_MESSAGES, ingest
from pyrecall.importers import parse_any
from pyrecall.importers._records import Message, Session

HERE = Path(__file__).resolve().parent
IMPORTERS = HERE / "fixtures" / "importers"
CLI = HERE / "fixtures" / "cli"

U, A, T = "user", "assistant", "tool"

# fixture -> (format, {session_id: (agent, title, project, branch, [(role, kind)], {chunk kind: n})},
#             problem lines)
CASES = {
    "claude_code/session.jsonl": ("claude_code", {
        "5f1c2d9e-7a3b-4c8d-9e0f-1a2b3c4d5e6f": (
            "claude-code", "Fix failing login test (expired token fixture)", "/home/dev/invoices",
            "fix/login-test",
            [(U, "text"), (A, "thinking"), (A, "text"), (A, "tool_call"), (T, "tool_result"),
             (A, "tool_call"), (T, "tool_result"), (A, "tool_call"), (T, "tool_result"),
             (A, "text"), (U, "text"), (A, "text")],
            {"code": 1, "message": 1, "thinking": 1, "tool": 3, "turn_pair": 2}),
    }, [7, 13]),
    "codex/rollout-2026-03-04T10-15-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl": ("codex", {
        "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b": (
            "claude-code", None, "/home/dev/billing", "fix/export-timeout",
            [(U, "text"), (A, "thinking"), (A, "text"), (A, "tool_call"), (T, "tool_result"),
             (A, "thinking"), (A, "tool_call"), (T, "tool_result"), (A, "tool_call"), (T, "tool_result"),
             (A, "text"), (U, "text")],
            {"message": 2, "thinking": 2, "tool": 3, "turn_pair": 1}),
    }, [15, 18]),
    "gemini/session-2026-03-05T14-00-7c1e9a20.jsonl": ("gemini", {
        "7c1e9a20-5d4b-4f3e-9a8b-1c2d3e4f5a6b": (
            "claude-code", "Nightly report MemoryError on the March CSV", "/home/dev/reports", None,
            [(U, "text"), (A, "thinking"), (A, "text"), (A, "tool_call"), (T, "tool_result"),
             (A, "tool_call"), (T, "tool_result"), (A, "thinking"), (A, "tool_call"), (T, "tool_result"),
             ("system", "text"), (A, "tool_call"), (T, "tool_result"), (A, "text"), (U, "text")],
            {"message": 3, "thinking": 2, "tool": 4, "turn_pair": 1}),
    }, [7]),
    "gemini/session-2026-02-20T09-30-3b5d0f11.json": ("gemini_json", {
        "3b5d0f11-8e7a-4c6b-b5a4-9d8c7b6a5f40": (
            "claude-code", "Flaky websocket reconnect test", None, None,
            [(U, "text"), (A, "thinking"), (A, "tool_call"), (T, "tool_result"), (A, "text")],
            {"thinking": 1, "tool": 1, "turn_pair": 1}),
    }, [69]),
    "generic.jsonl": ("jsonl", {
        "deploy-2026-02-10": ("aria-devops", "Staging rollout v2.3", "shop", "release/2.3",
                              [(U, "text"), (A, "thinking"), (A, "tool_call"), (T, "tool_result"),
                               (A, "text")],
                              {"thinking": 1, "tool": 1, "turn_pair": 1}),
        "standup-2026-02-11": ("claude-code", None, None, None, [(U, "text"), (A, "text")],
                               {"turn_pair": 1}),
    }, []),
    "openai_chat.json": ("openai_chat", {
        "chat-backup-0212": ("claude-code", "Nightly backup job fails on S3 upload", None, None,
                             [("system", "text"), (U, "text"), (A, "tool_call"), (T, "tool_result"),
                              (A, "text")],
                             {"message": 1, "tool": 1, "turn_pair": 1}),
    }, []),
    "discord.json": ("discord", {
        "discord:1150000000000000002": ("claude-code", "#incidents", None, None,
                                        [(U, "text"), (A, "text"), (U, "text"), (U, "text")],
                                        {"window": 1}),
    }, [181]),
}


def db_state(conn):
    sessions = {r[0]: r[1:] for r in conn.execute(
        "select session_id, agent_id, title, project, branch from recall.sessions")}
    messages: dict[str, list] = {}
    for sid, seq, role, kind, content in conn.execute(
            "select session_id, seq, role, kind, content from recall.messages order by session_id, seq"):
        messages.setdefault(sid, []).append((seq, role, kind, content))
    chunks: dict[str, dict] = {}
    for sid, kind, n in conn.execute(
            "select session_id, kind, count(*) from recall.chunks group by 1, 2"):
        chunks.setdefault(sid, {})[kind] = n
    return sessions, messages, chunks


@pytest.mark.parametrize("name", list(CASES))
def test_fixture_lands_exactly(conn, tmp_path, name):
    fmt, expected, problem_lines = CASES[name]
    path = tmp_path / Path(name).name
    shutil.copy(IMPORTERS / name, path)

    report = _sync.index(conn, [path], agent_id="claude-code")

    [result] = report.files
    assert (result.status, result.format) == ("new", fmt)
    assert sorted(p.line for p in result.problems) == problem_lines
    assert all(p.path == str(path) for p in result.problems)
    sessions, messages, chunks = db_state(conn)
    assert set(sessions) == set(expected)
    parsed = {s.session_id: s for s in parse_any(path).sessions}
    for sid, (agent, title, project, branch, kinds, chunk_kinds) in expected.items():
        assert sessions[sid] == (agent, title, project, branch)
        assert [(role, kind) for _, role, kind, _ in messages[sid]] == kinds
        # numbered from 1 in file order, with the text the parser read
        assert [seq for seq, *_ in messages[sid]] == list(range(1, len(kinds) + 1))
        assert [c for *_, c in messages[sid]] == [m.content for m in parsed[sid].messages]
        assert chunks[sid] == chunk_kinds
    assert result.messages == result.inserted == sum(len(v[4]) for v in expected.values())


def test_reimport_adds_nothing(conn):
    first = _sync.index(conn, [IMPORTERS], agent_id="claude-code")
    before = db_state(conn)
    chunk_ids = conn.execute("select array_agg(chunk_id order by chunk_id) from recall.chunks").fetchone()

    again = _sync.index(conn, [IMPORTERS], agent_id="claude-code", full=True)

    # 12 Claude Code, 12 Codex, 15 + 5 Gemini CLI, 7 JSONL, 5 OpenAI chat, 4 Discord, 9 ChatGPT,
    # 8 Claude.ai, 13 aider, 15 + 5 Cline, 7 + 5 Continue and 5 OpenCode messages (Continue's
    # sessions.json, outside ~/.continue/sessions, is a file of its own: no transcript)
    assert first.inserted == 127 and first.count("new") == 15 and first.count("not-transcript") == 2
    assert again.count("reread") == 15
    assert (again.messages, again.inserted) == (127, 0)
    assert db_state(conn) == before
    assert conn.execute("select array_agg(chunk_id order by chunk_id) from recall.chunks").fetchone() == chunk_ids


def test_sessions_keep_their_agent(conn, tmp_path):
    shutil.copy(IMPORTERS / "generic.jsonl", tmp_path / "a.jsonl")
    _sync.index(conn, [tmp_path / "a.jsonl"], agent_id="claude-code")

    report = _sync.index(conn, [IMPORTERS / "generic.jsonl"], agent_id="other-bot")

    [result] = report.files
    assert result.status == "failed"
    assert str(result.problems[0]) == (
        f"{IMPORTERS / 'generic.jsonl'}: session 'standup-2026-02-11' already belongs to agent "
        "'claude-code'; a session keeps the agent it was first stored under")
    assert conn.execute("select count(*) from recall.sessions where agent_id = 'other-bot'").fetchone()[0] == 0


def write_lines(path: Path, objs: list) -> None:
    path.write_bytes(b"".join(o if isinstance(o, bytes) else (json.dumps(o) + "\n").encode() for o in objs))


def cc_line(sid: str, n: int, kind: str, content, **extra) -> dict:
    message = {"role": kind, "content": content}
    return {"type": kind, "sessionId": sid, "uuid": f"{sid}-{n}", "cwd": "/p", "gitBranch": "main",
            "timestamp": f"2026-04-01T10:00:{n:02d}Z", "message": message, **extra}


def test_bad_input_is_reported_with_file_and_line_and_the_rest_lands(conn, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    write_lines(folder / "transcript.jsonl", [
        cc_line("s1", 1, "user", "first question"),
        b'{"type": "user", "sessionId": "s1", "message": {"role": "us\n',               # line 2
        b"\x00\xff\xfe binary junk \x89PNG\n",                                          # line 3
        cc_line("s1", 4, "assistant", [{"type": "hologram", "data": 1}]),               # line 4
        cc_line("s1", 5, "assistant", [{"type": "text", "text": "first answer"}]),
        cc_line("s1", 6, "user", "second question"),
    ])
    (folder / "junk.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "cut.json").write_text('[{"role": "user", "content": "kept"}, {"role": "assistant", "con')
    (folder / "notes.txt").write_text("not a transcript suffix: never read")

    report = _sync.index(conn, [folder], agent_id="claude-code")

    by_name = {Path(f.path).name: f for f in report.files}
    assert set(by_name) == {"transcript.jsonl", "junk.json", "empty.jsonl", "cut.json"}
    t = by_name["transcript.jsonl"]
    assert t.status == "new" and t.inserted == 3
    assert [(p.line, p.reason.split(":")[0]) for p in t.problems] == [
        (2, "invalid JSON"), (3, "NUL bytes removed"), (3, "invalid UTF-8 replaced by U+FFFD"),
        (3, "invalid JSON"), (4, "block 0")]
    assert str(t.problems[0]).startswith(f"{folder / 'transcript.jsonl'}:2: invalid JSON")
    assert by_name["junk.json"].status == "not-transcript"
    assert by_name["empty.jsonl"].status == "not-transcript"
    assert by_name["cut.json"].status == "new" and by_name["cut.json"].inserted == 1
    assert any(p.line == 1 and "invalid JSON" in p.reason for p in by_name["cut.json"].problems)
    rows = conn.execute("select content from recall.messages order by session_id, seq").fetchall()
    assert [r[0] for r in rows] == ["kept", "first question", "first answer", "second question"]
    # the next run does not read anything again, but says again which files are no transcripts
    again = _sync.index(conn, [folder], agent_id="claude-code")
    assert again.count("unchanged") == 2 and again.inserted == 0
    assert {Path(p.path).name: p.reason for p in again.problems} == {
        "junk.json": "not a transcript (skipped)", "empty.jsonl": "empty file (skipped)"}
    assert [Path(p).name for p in report.ignored] == ["notes.txt"] == [
        Path(p).name for p in again.ignored]


def _chat(session_id: str, n: int) -> Session:
    return Session(session_id, messages=[Message(None, U if i % 2 == 0 else A, "text", f"{session_id} says {i}")
                                         for i in range(n)])


def test_batches_in_one_transaction_each_staged_once(conn):
    """Two COPY-sized batches in one transaction (a bulk load calls ingest once per agent):
    the second reads its own rows only. Before, the staging tables still held the first's rows
    until the commit, so every message of the first went through the row trigger again (refused
    as a duplicate: a cost that grew with the calls in the transaction) and a message deleted in
    between came back."""
    n = ARRAY_BATCH_MAX_MESSAGES + 1          # staged by COPY, not sent as arrays
    conn.execute("set track_functions = 'pl'")
    with conn.transaction():
        first = ingest(conn, [_chat("load-a", n)], agent_id="agent-a")
        conn.execute("delete from recall.messages where session_id = 'load-a' and seq > 2")
        second = ingest(conn, [_chat("load-b", n)], agent_id="agent-b")
        third = ingest(conn, [_chat("load-c", n)], agent_id="agent-c")
        trigger_calls = conn.execute(
            "select calls from pg_stat_xact_user_functions "
            "where schemaname = 'recall' and funcname = '_message_before_insert'").fetchone()[0]
    assert (first.inserted, second.inserted, third.inserted) == (n, n, n)
    assert trigger_calls == 3 * n             # each message once
    counts = dict(conn.execute("select session_id, count(*) from recall.messages group by 1").fetchall())
    assert counts == {"load-a": 2, "load-b": n, "load-c": n}
    chunks = dict(conn.execute("select session_id, count(*) from recall.chunks group by 1").fetchall())
    assert chunks == {"load-a": 1, "load-b": (n + 1) // 2, "load-c": (n + 1) // 2}
