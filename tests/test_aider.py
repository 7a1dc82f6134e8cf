"""Aider chat histories (.aider.chat.history.md): parsed exactly, found in folders, read again from
the start of their last session as they grow (each message stored once), chunked and recalled."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrecall import _sync
from pyrecall.importers import aider, detect_format, iter_files, parse_any

HERE = Path(__file__).resolve().parent
HISTORY = HERE / "fixtures" / "importers" / "aider" / ".aider.chat.history.md"


def local(text: str) -> datetime:
    """A start line's time as aider wrote it: the machine's local time (in UTC)."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").astimezone(UTC)


def start(t: str) -> str:
    return f"\n# aider chat started at {t}\n\n"


def note(*lines: str) -> str:
    return "".join(f"> {x}  \n" for x in lines)


def user(*lines: str) -> str:
    return "\n" + "  \n".join(f"#### {x}" for x in lines) + "  \n"


def answer(text: str) -> str:
    return "\n" + text.strip() + "\n\n"


FIRST = [
    ("user", "tool_call", "/add app/settings.py app/db.py"),
    ("tool", "tool_result", "Added app/db.py to the chat\nAdded app/settings.py to the chat"),
    ("user", "text", "The API times out connecting to Postgres on staging; the pool seems exhausted.\n"
                     "Raise the pool size and add a timeout."),
    ("assistant", "text", None),   # the answer: checked below
    ("system", "text", "Applied edit to app/db.py\n"
                       "Commit 3f2a9c1 fix: raise the connection pool to 20 with a 10 s timeout"),
    ("user", "tool_call", "!pytest -q tests/test_db.py"),
    ("tool", "tool_result", "Add 0.3k tokens of command output to the chat? (Y)es/(N)o/(D)on't ask again "
                            "[Yes]: y\nAdded 12 lines of output to the chat."),
    ("user", "text", "Thanks, that fixed it."),
    ("assistant", "text", "Good. The timeout also shows up in the logs as `PoolTimeout` now, which makes "
                          "the next exhaustion easy to spot."),
]
SECOND = [
    ("user", "text", "Add a /health endpoint that checks the database."),
    ("assistant", "text", None),
    ("system", "text", "Applied edit to app/main.py\nCommit 9b1e4d0 feat: /health checks the database"),
    ("user", "tool_call", "/undo"),
    # aider's lines after /undo end the file: left for the next read (they may still be written)
]


def test_fixture_exactly():
    assert detect_format(HISTORY) == "aider"
    result = parse_any(HISTORY)
    assert result.format == "aider" and result.problems == []
    data = HISTORY.read_bytes()
    # the next read starts at the last session's start line
    assert result.end_offset == data.rfind(b"\n# aider chat started at") + 1
    s1, s2 = result.sessions
    for session, want in ((s1, FIRST), (s2, SECOND)):
        assert [(m.role, m.kind) for m in session.messages] == [(r, k) for r, k, _ in want]
        assert [m.content for m, (_, _, c) in zip(session.messages, want, strict=True) if c is not None] == [
            c for _, _, c in want if c is not None]
    # the model's own Markdown stays in its answer: a level-4 heading and a quote (no trailing
    # double space), and its edit block
    reply = s1.messages[3].content
    assert reply.startswith("The pool is created with `max_size=5`")
    assert "#### Why 20" in reply and "> Postgres on staging allows 100 connections" in reply
    assert "<<<<<<< SEARCH" in reply and reply.endswith(">>>>>>> REPLACE\n```")
    assert "\n\n" in reply                      # its paragraphs kept
    # no banner and no token counts among the messages; the banner is the session's metadata
    everything = "\n".join(m.content for s in result.sessions for m in s.messages)
    assert "Tokens:" not in everything and "Aider v" not in everything and "Repo-map" not in everything
    assert s1.metadata == s2.metadata == {"source_agent": "aider", "aider_version": "0.86.1",
                                          "model": "anthropic/claude-sonnet-4-20250514"}
    assert (s1.title, s2.title) == ("The API times out connecting to Postgres on staging; the pool seems "
                                    "exhausted.", "Add a /health endpoint that checks the database.")
    assert s1.project == s2.project == str(HISTORY.absolute().parent)
    assert (s1.started_at, s2.started_at) == (local("2026-03-10 09:15:02"), local("2026-03-12 16:40:11"))
    assert all(m.created_at == s.started_at for s in result.sessions for m in s.messages)
    assert [m.metadata.get("tool_name") for m in s1.messages if m.kind == "tool_call"] == ["add", "run"]
    # ids: the session's own, then the place in it
    assert s1.session_id != s2.session_id and s1.session_id.startswith("aider-")
    assert [m.external_id for m in s2.messages] == [f"{s2.session_id}#{i}" for i in range(4)]


def test_read_again_from_the_offset_gives_the_same_ids():
    whole = parse_any(HISTORY)
    tail = aider.parse(HISTORY, start_offset=whole.end_offset)
    assert [(s.session_id, [(m.external_id, m.content) for m in s.messages]) for s in tail.sessions] == [
        (whole.sessions[-1].session_id, [(m.external_id, m.content) for m in whole.sessions[-1].messages])]
    assert tail.end_offset == whole.end_offset


@pytest.mark.parametrize("text, fmt", [
    (start("2026-01-01 10:00:00") + user("hello"), "aider"),
    ("\n\n" + start("2026-01-01 10:00:00"), "aider"),
    ("# aider chat started at yesterday\n", None),          # no time: not aider's line
    ("# My notes\n\n" + start("2026-01-01 10:00:00"), None),  # a Markdown file that quotes one
    ('{"role": "user", "content": "# aider chat started at 2026-01-01 10:00:00"}\n', "jsonl"),
])
def test_detection(tmp_path, text, fmt):
    f = tmp_path / "history.md"
    f.write_text(text)
    assert detect_format(f) == fmt


def test_found_in_a_folder_by_its_name(tmp_path):
    repo = tmp_path / "code" / "api"
    (repo / ".git").mkdir(parents=True)
    shutil.copy(HISTORY, repo / aider.FILE_NAME)
    (repo / ".git" / aider.FILE_NAME).write_text("in a hidden folder: not entered")
    (repo / "README.md").write_text("# api\n")
    assert [p.relative_to(tmp_path).as_posix() for p in iter_files([tmp_path])] == [
        "code/api/.aider.chat.history.md"]


def test_broken_bytes_are_repaired_and_reported(tmp_path):
    f = tmp_path / aider.FILE_NAME
    f.write_bytes(start("2026-01-01 10:00:00").encode() + b"#### caf\xe9 ol\x00e  \n"
                  + answer("ok").encode())
    result = aider.parse(f)
    [s] = result.sessions
    assert [(m.role, m.content) for m in s.messages] == [("user", "caf\ufffd ole"), ("assistant", "ok")]
    assert sorted((p.line, p.reason) for p in result.problems) == [
        (4, "NUL bytes removed"), (4, "invalid UTF-8 replaced by U+FFFD")]


def test_an_offset_not_at_a_start_line_reads_the_file_again(tmp_path):
    # the file was rewritten under the same first bytes: what is at the offset is not where a
    # session starts, so the whole file is read (its messages stored already are skipped)
    f = tmp_path / aider.FILE_NAME
    f.write_text(start("2026-01-01 10:00:00") + user("first question") + answer("first answer"))
    whole = aider.parse(f)
    again = aider.parse(f, start_offset=whole.end_offset + 5)
    assert [[m.external_id for m in s.messages] for s in again.sessions] == [
        [m.external_id for m in s.messages] for s in whole.sessions]


def test_an_output_of_several_lines_is_one_note(tmp_path):
    """aider writes a multi-line output (/diff's, a commit message with a body) as one quoted line
    whose two spaces come at its very end."""
    f = tmp_path / aider.FILE_NAME
    f.write_text(start("2026-01-01 10:00:00") + user("fix it") + answer("done") + note("Applied edit to a.py")
                 + "> Commit 1a2b3c4 fix: a\n\nThe body of the commit.  \n"
                 + user("/diff") + "> diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2  \n"
                 + user("thanks") + answer("> a quote opening an answer stays the answer's"))
    [s] = aider.parse(f).sessions
    assert [(m.role, m.kind, m.content) for m in s.messages] == [
        ("user", "text", "fix it"), ("assistant", "text", "done"),
        ("system", "text", "Applied edit to a.py\nCommit 1a2b3c4 fix: a\n\nThe body of the commit."),
        ("user", "tool_call", "/diff"),
        ("tool", "tool_result", "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2"),
        ("user", "text", "thanks"), ("assistant", "text", "> a quote opening an answer stays the answer's")]


def test_windows_line_endings(tmp_path):
    """aider writes the platform's line endings: CRLF on Windows, the same messages."""
    f = tmp_path / aider.FILE_NAME
    f.write_bytes(HISTORY.read_bytes().replace(b"\n", b"\r\n"))
    assert detect_format(f) == "aider"
    crlf, lf = aider.parse(f), aider.parse(HISTORY)
    assert [[(m.role, m.kind, m.content.replace("\r", "")) for m in s.messages] for s in crlf.sessions] == [
        [(m.role, m.kind, m.content) for m in s.messages] for s in lf.sessions]
    assert all("\r" not in m.content for s in crlf.sessions for m in s.messages)
    tail = aider.parse(f, start_offset=crlf.end_offset)
    assert [s.session_id for s in tail.sessions] == [crlf.sessions[-1].session_id]


def test_two_sessions_started_in_the_same_second_stay_apart(tmp_path):
    f = tmp_path / aider.FILE_NAME
    f.write_text(start("2026-01-01 10:00:00") + user("first") + start("2026-01-01 10:00:00") + user("second")
                 + answer("ok"))
    a, b = aider.parse(f).sessions
    assert a.session_id != b.session_id
    assert [m.content for m in a.messages] == ["first"] and [m.content for m in b.messages] == ["second", "ok"]


def test_a_session_of_the_same_second_read_from_its_offset_keeps_its_id(tmp_path, monkeypatch):
    f = tmp_path / aider.FILE_NAME
    f.write_text(start("2026-01-01 10:00:00") + user("first") + start("2026-01-01 10:00:00") + user("second")
                 + start("2026-01-01 10:00:00") + user("third"))
    whole = aider.parse(f)
    tail = aider.parse(f, start_offset=whole.end_offset)
    assert [s.session_id for s in tail.sessions] == [whole.sessions[2].session_id]
    # the file before the offset is read a piece at a time: a start line across two pieces counts
    real_open = open

    class Small:
        def __init__(self, fh):
            self.fh = fh

        def read(self, n):
            return self.fh.read(min(n, 7))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(aider, "open", lambda p, mode="r": Small(real_open(p, mode)), raising=False)
    assert aider._starts_before(f, whole.end_offset, "2026-01-01 10:00:00") == 2
    assert aider._starts_before(f, whole.end_offset, "2026-01-01 10:00:01") == 0


def test_blank_input_and_empty_sessions_store_nothing(tmp_path):
    f = tmp_path / aider.FILE_NAME
    f.write_text(start("2026-01-01 10:00:00") + note("Aider v0.86.1") + start("2026-01-02 10:00:00")
                 + user("<blank>") + user("real question") + answer("real answer"))
    [s] = aider.parse(f).sessions
    assert [m.content for m in s.messages] == ["real question", "real answer"]
    assert s.started_at == local("2026-01-02 10:00:00")


words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=12)
blocks = st.one_of(
    st.builds(lambda d: start(f"2026-01-{d:02d} 10:00:00"), st.integers(1, 28)),
    st.builds(lambda xs: user(*xs), st.lists(words, min_size=1, max_size=3)),
    st.builds(lambda c, xs: user(c + xs[0]), st.sampled_from(["/add ", "/run ", "!", "/undo"]),
              st.lists(words, min_size=1, max_size=1)),
    st.builds(lambda xs: note(*xs), st.lists(words, min_size=1, max_size=3)),
    # one of aider's outputs holding line breaks (a commit message with a body): two spaces at its end only
    st.builds(lambda xs: "> Commit 1a2b3c4 " + "\n\n".join(xs) + "  \n", st.lists(words, min_size=2, max_size=3)),
    st.builds(lambda xs: answer("\n\n".join(xs)), st.lists(words, min_size=1, max_size=3)),
)


def _histories(draw_blocks):
    """Blocks as aider writes them: never two answers in a row (aider writes its notes between);
    an output of several lines right after an input or another output (as /diff's, a commit's)."""
    out = []
    for b in draw_blocks:
        if out and not b.startswith(("\n#", ">")) and not out[-1].startswith(("\n#", ">")):
            continue
        if b.startswith("> Commit") and not (out and out[-1].startswith(("\n####", ">"))):
            continue
        out.append(b)
    return [start("2026-01-01 09:00:00")] + out


@settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(blocks, max_size=14), st.data())
def test_read_as_it_grows_equals_read_whole(tmp_path_factory, drawn, data):
    """A history synced after any of aider's writes stores what one read of the whole file
    stores: each message once, under the same id, with the same text (the database keeps the
    first message of an id and skips the rest, as here)."""
    parts = _histories(drawn)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(parts)), max_size=4)))) + [len(parts)]
    f = tmp_path_factory.mktemp("grow") / aider.FILE_NAME
    stored: dict[str, tuple] = {}
    offset = 0
    for cut in cuts:
        f.write_text("".join(parts[:cut]))
        result = aider.parse(f, start_offset=offset)
        for s in result.sessions:
            for m in s.messages:
                stored.setdefault(m.external_id, (s.session_id, m.role, m.kind, m.content))
        offset = result.end_offset
    whole = aider.parse(f)
    want = {m.external_id: (s.session_id, m.role, m.kind, m.content) for s in whole.sessions for m in s.messages}
    # what the whole read holds back (aider's lines at the very end) the growing one does too
    assert stored == want


# --------------------------------------------------------------------------- with the database


def rows(conn, sql, *args):
    return conn.execute(sql, args).fetchall()


def test_a_growing_history_is_stored_once(conn, tmp_path):
    repo = tmp_path / "api"
    repo.mkdir()
    f = repo / aider.FILE_NAME
    f.write_text(start("2026-03-10 09:15:02") + note("Aider v0.86.1", "Main model: gpt-5 with diff edit format")
                 + user("Why does the deploy fail on alpine?") + answer("musl has no wheel for asyncpg.")
                 + note("Tokens: 1k sent, 20 received."))
    report = _sync.index(conn, [tmp_path], agent_id="claude-code")
    [r] = report.files
    assert (r.format, r.status, r.inserted) == ("aider", "new", 2)
    sid = rows(conn, "select session_id from recall.sessions")[0][0]

    # the session goes on: a command and aider's answer to it, then a question being answered
    with open(f, "a") as fh:
        fh.write(user("/run docker compose build") + note("Add 1.2k tokens of command output to the chat? "
                                                          "(Y)es/(N)o [Yes]: y"))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 2_000_000_000))
    [r] = _sync.sync(conn, agent_id="claude-code").files
    # the command is stored; aider's line at the end waits: it may still be being written
    assert (r.status, r.inserted, r.start_offset) == ("appended", 1, 1)   # the start line's offset
    with open(f, "a") as fh:
        fh.write(note("Added 40 lines of output to the chat.") + user("Use python:3.12-slim then.")
                 + answer("Done: the image builds.") + start("2026-03-11 08:00:00") + user("Next task"))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 4_000_000_000))
    [r] = _sync.sync(conn, agent_id="claude-code").files
    assert (r.status, r.inserted) == ("appended", 4)
    got = rows(conn, "select m.session_id = %s, m.seq, m.role, m.kind, m.content from recall.messages m "
                     "join recall.sessions s using (agent_id, session_id) order by s.started_at, m.seq", sid)
    assert got == [
        (True, 1, "user", "text", "Why does the deploy fail on alpine?"),
        (True, 2, "assistant", "text", "musl has no wheel for asyncpg."),
        (True, 3, "user", "tool_call", "/run docker compose build"),
        (True, 4, "tool", "tool_result", "Add 1.2k tokens of command output to the chat? (Y)es/(N)o [Yes]: y\n"
                                         "Added 40 lines of output to the chat."),
        (True, 5, "user", "text", "Use python:3.12-slim then."),
        (True, 6, "assistant", "text", "Done: the image builds."),
        (False, 1, "user", "text", "Next task"),
    ]
    # the file's row counts each message once, and the next read starts at the last session
    assert rows(conn, "select format, messages, offset_done from recall.source_files where path = %s",
                str(f)) == [("aider", 7, f.read_bytes().rfind(b"\n# aider chat started at") + 1)]
    assert [(x.status, x.inserted) for x in _sync.sync(conn, agent_id="claude-code").files] == [("unchanged", 0)]
    full = _sync.index(conn, [tmp_path], agent_id="claude-code", full=True)
    assert (full.inserted, full.messages) == (0, 7)
    # chunked as an agent's session: question and answer pairs, the command with its result
    kinds = rows(conn, "select kind, count(*) from recall.chunks where session_id = %s group by kind order by kind", sid)
    assert kinds == [("tool", 1), ("turn_pair", 2)]
    assert rows(conn, "select project, metadata->>'source_agent', metadata->>'model', title from recall.sessions "
                      "where session_id = %s", sid) == [
        (str(repo), "aider", "gpt-5", "Why does the deploy fail on alpine?")]


def test_recalled_by_keywords_and_kept_to_its_source_agent(conn):
    _sync.index(conn, [HISTORY], agent_id="claude-code")
    recall = ("select content, metadata->>'source_agent' from recall.hybrid_recall("
              "agent_id => 'claude-code', query_text => %s, filter => %s::jsonb)")
    hits = rows(conn, recall, "connection pool exhausted timeout", '{"source_agent": "aider"}')
    assert hits and {agent for _, agent in hits} == {"aider"}
    assert any("max_size=20" in content for content, _ in hits[:3])
    assert rows(conn, recall, "connection pool exhausted timeout", '{"source_agent": "codex"}') == []


def test_a_history_aider_wrote():
    """aider 0.86.2 itself (`aider --message ...` against a model server on loopback that answers
    with a whole-file edit; and against none): its start-up lines as metadata, a request with
    its retries' errors, an answer, an edit applied and a commit whose message has several lines,
    a /run (aider's lines after it at the end of the file wait for the next read)."""
    path = HERE / "fixtures" / "importers" / "aider" / "aider-0.86.2.chat.history.md"
    assert detect_format(path) == "aider"
    result = aider.parse(path)
    assert result.problems == []
    got = [[(m.role, m.kind, m.content.splitlines()[0]) for m in s.messages] for s in result.sessions]
    assert got == [
        [("user", "text", "Explain app.py in one sentence"),
         ("system", "text", "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.")],
        [("user", "text", "Make it greet by name"),
         ("assistant", "text", "app.py prints a greeting. I'll make it greet by name."),
         ("system", "text", "Applied edit to app.py")],
        [("user", "tool_call", "/run echo hello")],
    ]
    commit = result.sessions[1].messages[2].content
    assert "Commit effdc10 app.py prints a greeting" in commit and commit.endswith("```")
    assert {s.metadata["model"] for s in result.sessions} == {"openai/gpt-4o-mini"}
    assert {s.metadata["aider_version"] for s in result.sessions} == {"0.86.2"}
    assert all("gitignore" not in m.content for s in result.sessions for m in s.messages)
