"""Several coding agents in one memory: Claude Code, Codex CLI and Gemini CLI sessions imported
side by side, each session knowing which agent wrote it (metadata source_agent), recalled together
by meaning with the real local model, or kept apart with --source-agent."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import drop_database, new_database

from pyrecall import Recall, _sync
from pyrecall._embed import get_embedder
from pyrecall.cli import main

FIX = Path(__file__).resolve().parent / "fixtures" / "importers"
CLAUDE = FIX / "claude_code" / "session.jsonl"
CODEX_ID = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
CODEX = FIX / "codex" / f"rollout-2026-03-04T10-15-00-{CODEX_ID}.jsonl"
CLAUDE_ID = "5f1c2d9e-7a3b-4c8d-9e0f-1a2b3c4d5e6f"
GEMINI = FIX / "gemini" / "session-2026-03-05T14-00-7c1e9a20.jsonl"
GEMINI_DOC = FIX / "gemini" / "session-2026-02-20T09-30-3b5d0f11.json"
GEMINI_IDS = {"7c1e9a20-5d4b-4f3e-9a8b-1c2d3e4f5a6b", "3b5d0f11-8e7a-4c6b-b5a4-9d8c7b6a5f40"}
# the Codex session's failing test, asked in other words than the tool output's
FAILURE_QUERY = "Postgres killed the query for taking too long"


@pytest.fixture(scope="session")
def embedder():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    e = get_embedder("local/all-MiniLM-L6-v2")
    e.embed(["warm up"])
    return e


@pytest.fixture(scope="module")
def memory_url(server_url, template_url, embedder, tmp_path_factory):
    """Claude Code's, Codex's and Gemini CLI's transcripts in one agent's memory, embedded."""
    url = new_database(server_url)
    home = tmp_path_factory.mktemp("home")
    for name, files in (("claude", [CLAUDE]), ("codex", [CODEX]), ("gemini", [GEMINI, GEMINI_DOC])):
        (home / name).mkdir()
        for f in files:
            shutil.copy(f, home / name)
    with Recall(url, embedder=embedder) as r:
        report = _sync.index(r.conn, [home / "claude", home / "codex", home / "gemini"], agent_id="dev")
        assert [(f.format, f.inserted) for f in report.files] == [
            ("claude_code", 12), ("codex", 12), ("gemini_json", 5), ("gemini", 15)]
        assert r.embed_pending().embedded > 0
    yield url
    drop_database(server_url, url)


@pytest.fixture
def recall(memory_url, embedder):
    with Recall(memory_url, embedder=embedder) as r:
        yield r


def test_sessions_know_which_agent_wrote_them(recall):
    rows = dict(recall.conn.execute("select session_id, metadata->>'source_agent' from recall.sessions"))
    writers = {CODEX_ID: "codex", CLAUDE_ID: "claude-code", **dict.fromkeys(GEMINI_IDS, "gemini")}
    assert rows == writers
    # folded into every chunk's metadata, where recall's filter reads it
    chunks = recall.conn.execute("select session_id, metadata->>'source_agent' from recall.chunks").fetchall()
    assert len(chunks) > 20 and all(agent == writers[sid] for sid, agent in chunks)


def test_recall_finds_the_codex_tool_failure_by_meaning(recall):
    top = recall.recall("dev", FAILURE_QUERY, k=3)
    assert top.source == "hybrid"
    first = top.memories[0]
    assert (first.session_id, first.kind) == (CODEX_ID, "tool")
    assert "QueryCanceled" in first.content and "pytest tests/test_export.py" in first.content
    # by meaning: keywords alone (no query embedding) do not put it first
    keyword_only = recall.conn.execute(
        "select chunk_id from recall.hybrid_recall(agent_id => 'dev', query_text => %s, k => 10)",
        [FAILURE_QUERY]).fetchall()
    assert keyword_only[0][0] != first.chunk_id


@pytest.mark.parametrize("source_agent, sessions", [
    ("codex", {CODEX_ID}), ("claude-code", {CLAUDE_ID}), ("gemini", GEMINI_IDS), ("cursor", set())])
def test_recall_keeps_the_agents_apart_on_request(recall, source_agent, sessions):
    found = recall.recall("dev", "the failing test and how it was fixed", k=20,
                          filter={"source_agent": source_agent})
    assert {m.session_id for m in found.memories} == sessions


def test_cli_source_agent(memory_url, monkeypatch):
    monkeypatch.delenv("PYRECALL_EMBED_MODEL", raising=False)

    def run(*args):
        result = CliRunner().invoke(main, list(args), env={"PYRECALL_DSN": memory_url})
        assert result.exit_code == 0, result.output
        return result.output

    out = json.loads(run("recall", FAILURE_QUERY, "--agent", "dev", "--source-agent", "codex",
                         "--format", "json"))
    assert out["source_agent"] == "codex"
    assert out["memories"] and {m["session_id"] for m in out["memories"]} == {CODEX_ID}
    assert "QueryCanceled" in out["memories"][0]["content"]
    out = json.loads(run("recall", FAILURE_QUERY, "--agent", "dev", "--source-agent", "claude-code",
                         "--format", "json"))
    assert {m["session_id"] for m in out["memories"]} == {CLAUDE_ID}
    rows = json.loads(run("sessions", "--agent", "dev", "--source-agent", "codex", "--json"))
    assert [(s["session_id"], s["source_agent"], s["project"], s["branch"]) for s in rows] == [
        (CODEX_ID, "codex", "/home/dev/billing", "fix/export-timeout")]
    result = CliRunner().invoke(main, ["recall", "--auto", "--agent", "dev", "--source-agent", "codex"],
                                env={"PYRECALL_DSN": memory_url})
    assert result.exit_code == 2 and "drop --by-session/--kind/--since/--until/--filter/--source-agent" in result.output


def test_recall_finds_the_gemini_crash_by_meaning(recall):
    top = recall.recall("dev", "the monthly job ran out of RAM", k=3)
    assert top.memories[0].session_id in GEMINI_IDS   # the request that named the crash
    assert [m.kind for m in top.memories if "Unable to allocate 3.2 GiB" in m.content] == ["tool"]


@pytest.mark.parametrize("session_id, shown", [("a-new-session", True), (CODEX_ID, False)])
def test_session_start_hook_answers_codex_and_gemini_in_json(memory_url, monkeypatch, session_id, shown):
    """The SessionStart hook of Codex CLI and Gemini CLI: their event on stdin (cwd, session_id),
    the context as hookSpecificOutput.additionalContext on stdout, and nothing else there."""
    monkeypatch.delenv("PYRECALL_EMBED_MODEL", raising=False)
    event = {"session_id": session_id, "transcript_path": None, "cwd": "/home/dev/billing",
             "hook_event_name": "SessionStart", "source": "startup", "model": "gpt-5-codex",
             "permission_mode": "default"}
    result = CliRunner().invoke(main, ["recall", "--auto", "--hook", "--project", "/home/dev/billing",
                                       "--agent", "dev", "--format", "hook"],
                                input=json.dumps(event), env={"PYRECALL_DSN": memory_url})
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert set(answer) == {"hookSpecificOutput"}
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = answer["hookSpecificOutput"]["additionalContext"]
    # the project's Codex session, unless it is the session starting (then nothing is left)
    assert context.startswith("## Relevant memory") if shown else context == ""
    assert ("statement_timeout" in context) is shown
