"""Several coding agents in one memory: Claude Code and Codex CLI sessions imported side by
side, each session knowing which agent wrote it (metadata source_agent), recalled together
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
    """Claude Code's and Codex's transcripts in one agent's memory, embedded."""
    url = new_database(server_url)
    home = tmp_path_factory.mktemp("home")
    (home / "claude").mkdir()
    (home / "codex").mkdir()
    shutil.copy(CLAUDE, home / "claude")
    shutil.copy(CODEX, home / "codex")
    with Recall(url, embedder=embedder) as r:
        report = _sync.index(r.conn, [home / "claude", home / "codex"], agent_id="dev")
        assert [(f.format, f.inserted) for f in report.files] == [("claude_code", 12), ("codex", 12)]
        assert r.embed_pending().embedded > 0
    yield url
    drop_database(server_url, url)


@pytest.fixture
def recall(memory_url, embedder):
    with Recall(memory_url, embedder=embedder) as r:
        yield r


def test_sessions_know_which_agent_wrote_them(recall):
    rows = recall.conn.execute("select session_id, metadata->>'source_agent' from recall.sessions "
                               "order by 1").fetchall()
    assert rows == [(CODEX_ID, "codex"), (CLAUDE_ID, "claude-code")]
    # folded into every chunk's metadata, where recall's filter reads it
    assert recall.conn.execute("select count(*) from recall.chunks where metadata->>'source_agent' "
                               "is distinct from case session_id when %s then 'codex' else 'claude-code' end",
                               [CODEX_ID]).fetchone()[0] == 0


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
    ("codex", {CODEX_ID}), ("claude-code", {CLAUDE_ID}), ("gemini", set())])
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
    assert result.exit_code == 2 and "drop --by-session/--kind/--since/--source-agent" in result.output
