"""`pyrecall status`: recall.agent_status counts exactly what an agent holds (and, under row-level
security, nothing of another agent), the coding agents' settings are read as far as they call
pyrecall, and the next steps follow from what is found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_embedder import FakeEmbedder
from test_security import login, roles  # noqa: F401 (roles: a fixture)

from pyrecall import _status, _sync
from pyrecall.cli import main
from pyrecall.client import Recall

HERE = Path(__file__).resolve().parent
AIDER = HERE / "fixtures" / "importers" / "aider" / ".aider.chat.history.md"


def build(db_url, tmp_path) -> None:
    """Agent A: two sessions of Claude Code's by hand, aider's two from a file, a broken JSONL file,
    three memories (one pinned, one superseded), a session forgotten, the embeddings of a few."""
    with Recall(db_url, embedder=FakeEmbedder()) as r:
        for sid in ("s1", "s2", "s3"):
            r.add_session(sid, "A", metadata={"source_agent": "claude-code"})
            r.add_messages(sid, [{"role": "user", "content": f"question of {sid}"},
                                 {"role": "assistant", "content": f"answer of {sid}"}], agent_id="A")
        r.forget(agent_id="A", session_id="s3")
        bad = tmp_path / "broken.jsonl"
        bad.write_text('{"role": "user", "content": "a line"}\n{not json}\n')
        _sync.index(r.conn, [AIDER, bad], agent_id="A")
        r.remember("A", "staging listens on 8080", kind="fact", pin=True)
        old = r.remember("A", "the pool holds 5 connections", kind="fact")
        r.remember("A", "the pool holds 20 connections", kind="fact", supersedes=old)
        r.add_session("b1", "B")
        r.add_messages("b1", [{"role": "user", "content": "B's secret"}], agent_id="B")
        r.conn.execute("update recall.chunks set embedding = %s, embedding_model = 'test' "
                       "where agent_id = 'A' and chunk_id in (select chunk_id from recall.chunks "
                       "where agent_id = 'A' and kind <> 'memory' order by chunk_id limit 3)",
                       [FakeEmbedder().vector("x")])


def test_agent_status_counts_what_the_agent_holds(conn, db_url, tmp_path):
    build(db_url, tmp_path)
    [row] = conn.execute("select * from recall.agent_status('A')").fetchall()
    names = [d.name for d in conn.execute("select * from recall.agent_status('A')").description]
    st = dict(zip(names, row, strict=True))
    want_chunks = conn.execute("select count(*) from recall.chunks where agent_id = 'A' and kind <> 'memory'"
                               ).fetchone()[0]
    assert st["sessions"] == 2 + 2 + 1                 # s1, s2, aider's two, the JSONL file's (s3 forgotten)
    assert st["sources"] == {"claude-code": 2, "aider": 2, "(unknown)": 1}
    assert st["messages"] == 4 + 13 + 1
    assert (st["chunks"], st["embedded"]) == (want_chunks, 3)
    assert st["pending"] == want_chunks - 3              # (the memories were embedded as they were kept)
    assert (st["memories"], st["pinned"], st["forgotten"]) == (2, 1, 1)
    assert (st["files"], st["file_problems"]) == (2, 1)
    # the memories embedded as they were kept, by the client's model
    assert st["models"] == {"test": 3, "fake/hash": 3} and st["vector_path"] == "exact" and st["failing"] == 0
    assert st["first_at"] <= st["last_at"] and st["last_sync"] is not None
    empty = dict(zip(names, conn.execute("select * from recall.agent_status('nobody')").fetchone(), strict=True))
    assert {k: v for k, v in empty.items() if v not in (0, None, {})} == {"vector_path": "none (nothing embedded)"}


def test_an_agents_role_sees_its_own_status_only(conn, db_url, tmp_path, roles):  # noqa: F811
    build(db_url, tmp_path)
    owner = conn.execute("select * from recall.agent_status('A')").fetchone()
    with login(db_url, roles["agent"], "B") as b:
        # A's counts through B's role: nothing, not even whether A's chunks are embedded
        seen = b.execute("select sessions, messages, chunks, memories, files, vector_path "
                         "from recall.agent_status('A')").fetchone()
        own = b.execute("select sessions, messages from recall.agent_status('B')").fetchone()
    assert seen == (0, 0, 0, 0, 0, "none (nothing embedded)") and own == (1, 1)
    with login(db_url, roles["agent"], "A") as a:
        assert a.execute("select * from recall.agent_status('A')").fetchone() == owner


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))


HOOK = "export PYRECALL_DATA_DIR=$HOME/.pyrecall; pyrecall sync >/dev/null 2>&1; pyrecall recall --auto --hook"


def test_the_coding_agents_settings_are_read_as_far_as_they_call_pyrecall(tmp_path):
    home = tmp_path
    write(home / ".claude" / "settings.json", {"hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": HOOK}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "pyrecall recall --hook"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}})
    write(home / ".claude.json", {"mcpServers": {"memory": {"command": "pyrecall", "args": ["mcp"]}}})
    write(home / ".codex" / "hooks.json", "{ broken json")
    write(home / ".codex" / "config.toml", '[mcp_servers.pyrecall]\ncommand = "pyrecall"\nargs = ["mcp"]\n')
    write(home / ".gemini" / "settings.json", {"hooks": "not an object", "mcpServers": {"x": "nor this"}})
    claude, codex, gemini = _status.wiring(home)
    assert (claude.hooks, claude.mcp, claude.data_dirs) == (["SessionStart", "UserPromptSubmit"], True,
                                                           ["$HOME/.pyrecall"])
    assert (codex.hooks, codex.mcp) == ([], True)
    assert (gemini.hooks, gemini.mcp) == ([], False)
    # the hook's memory is another than the one read: said; with PYRECALL_DSN the folder does not count
    monkey_home = str(home)
    import os
    old = os.environ.get("HOME")
    os.environ["HOME"] = monkey_home
    try:
        assert _status.other_memories([claude], home / "elsewhere", None) == [("Claude Code", "$HOME/.pyrecall")]
        assert _status.other_memories([claude], home / ".pyrecall", None) == []
        assert _status.other_memories([claude], home / "elsewhere", "postgresql://db/mem") == []
    finally:
        if old is not None:
            os.environ["HOME"] = old


BASE = {"sessions": 3, "pending": 0, "failing": 0, "models": {"local/all-MiniLM-L6-v2": 10},
        "file_problems": 0, "vector_path": "exact"}
MINILM = "local/all-MiniLM-L6-v2"
WIRED = [_status.Wiring("Claude Code", "x", hooks=["SessionStart"])]


@pytest.mark.parametrize("change, pending, model, wired, want", [
    ({}, 0, MINILM, WIRED, []),
    ({}, 2, MINILM, WIRED, ["the schema is older than this pyrecall (2 migration(s) pending): `pyrecall migrate`"]),
    ({"pending": 7, "failing": 2}, 0, MINILM, WIRED,
     ["7 chunk(s) wait to be embedded, 2 of them failed before (found by keywords until then): "
      "`pyrecall embed`, or keep `pyrecall worker` running"]),
    ({"models": {MINILM: 9, "local/all-MiniLM-L6-v2-int8": 1}}, 0, MINILM, WIRED, []),   # one vector space
    ({"models": {MINILM: 9, "openai/text-embedding-3-small": 1}}, 0, MINILM, WIRED,
     ["the vectors come from 2 models (local/all-MiniLM-L6-v2, openai/text-embedding-3-small): a query ranks "
      "one model's only: `pyrecall embed --reembed --model local/all-MiniLM-L6-v2`"]),
    ({}, 0, "openai/text-embedding-3-small", WIRED,
     ["the vectors are local/all-MiniLM-L6-v2's but the configured model is openai/text-embedding-3-small: "
      "recall goes by keywords; set PYRECALL_EMBED_MODEL=local/all-MiniLM-L6-v2, or `pyrecall embed --reembed`"]),
    ({"file_problems": 1}, 0, MINILM, WIRED,
     ["1 imported file(s) had problems at their last read (skipped or repaired lines): "
      "`pyrecall import --full PATH` lists them again"]),
    ({"vector_path": "exact (large: refresh the indexes)"}, 0, MINILM, WIRED,
     ["the agent is past the exact scan's size with no vector index: `pyrecall dba index`"]),
    ({}, 0, MINILM, [], ["no coding agent calls pyrecall yet: the SessionStart hook or `pyrecall mcp` (README)"]),
])
def test_next_steps(change, pending, model, wired, want):
    assert _status.next_steps({**BASE, **change}, pending_migrations=pending, model=model, wired=wired,
                              elsewhere=[]) == want


def test_pyrecall_status(conn, db_url, tmp_path, monkeypatch):
    build(db_url, tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYRECALL_EMBED_MODEL", "test")
    cli = lambda *args: CliRunner().invoke(main, list(args), env={"PYRECALL_DSN": db_url})  # noqa: E731
    result = cli("status", "--agent-id", "A")
    assert result.exit_code == 0, result.output
    lines = dict(line.split(None, 1) for line in result.output.splitlines() if not line.startswith(" "))
    assert lines["schema"] == "up to date"
    assert lines["agent"].startswith("A: 5 session(s) (aider 2, claude-code 2, (unknown) 1), 18 message(s), ")
    assert lines["memories"] == "2 curated (1 pinned); 1 session(s) forgotten"
    assert lines["files"].startswith("2 imported, 1 with problems; last read ")
    assert "embedded" in lines["chunks"] and "nearest by: exact" in lines["chunks"]
    assert "chunk(s) wait to be embedded" in lines["next"]
    assert "1 imported file(s) had problems" in result.output and "no coding agent calls pyrecall" in result.output
    doc = json.loads(cli("status", "--agent-id", "A", "--json").output)
    assert doc["memory"]["sessions"] == 5 and doc["schema"] == {"pending_migrations": 0}
    assert [w["agent"] for w in doc["wiring"]] == ["Claude Code", "Codex CLI", "Gemini CLI"]
    assert doc["model"] == {"configured": "test", "installed": None}
    # a schema whose functions are older than this pyrecall: said, not migrated
    conn.execute("drop function recall.agent_status(text)")
    old = cli("status", "--agent-id", "A")
    assert old.exit_code == 0 and "functions older than this pyrecall" in old.output
    assert "`pyrecall migrate`" in old.output
    assert conn.execute("select to_regproc('recall.agent_status')").fetchone()[0] is None


def test_docstring_examples():
    import doctest
    result = doctest.testmod(_status)
    assert result.failed == 0 and result.attempted >= 2


def test_the_agents_folders_no_sync_reads(tmp_path):
    codex, cline_dir, gemini = tmp_path / ".codex" / "sessions", tmp_path / ".cline" / "data" / "sessions", tmp_path / ".gemini" / "tmp"
    codex.mkdir(parents=True)
    cline_dir.mkdir(parents=True)
    # ~/.codex (a parent) is read, ~/.cline's sessions are not, ~/.gemini/tmp does not exist
    assert _status.unread_folders([codex, cline_dir, gemini], [tmp_path / ".codex", tmp_path / "notes.jsonl"]) == [cline_dir]
    steps = _status.next_steps(BASE, pending_migrations=0, model=MINILM, wired=WIRED, elsewhere=[], unread=[cline_dir])
    assert steps == [f"{cline_dir} holds sessions no sync of this agent reads: `pyrecall import '{cline_dir}'` "
                     "(then `pyrecall sync` keeps up with it)"]
