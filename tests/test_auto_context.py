"""recall.auto_context: the session-start context in three sections, on fixtures with a
failure (tests/fixtures/cli: a migration that failed on main, a coupon endpoint on
feature/coupons, a crash in another project)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from conftest import drop_database, new_database

from pyrecall import _sync
from pyrecall.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "cli"
SHOP = "/home/dev/shop"
MAIN_SESSION = "a1111111-0000-4000-8000-000000000001"
COUPONS_SESSION = "b2222222-0000-4000-8000-000000000002"
REPORTS_SESSION = "c3333333-0000-4000-8000-000000000003"


@pytest.fixture(scope="module")
def shop_url(server_url, template_url):
    """One database for the module (its tests only read): the fixtures imported once."""
    url = new_database(server_url)
    paths = [FIXTURES / n for n in ("shop-main.jsonl", "shop-coupons.jsonl", "reports.jsonl")]
    with psycopg.connect(url, autocommit=True) as conn:
        report = _sync.index(conn, paths, agent_id="claude-code")
    assert report.inserted == 18 and not report.problems
    yield url
    drop_database(server_url, url)


@pytest.fixture
def shop(shop_url):
    with psycopg.connect(shop_url, autocommit=True) as conn:
        yield conn


def auto(conn, **args):
    args = {"agent_id": "claude-code", **args}
    names = ", ".join(f"{k} => %({k})s" for k in args)
    cur = conn.execute(f"select chunk_id, session_id, kind, content, section, metadata, n_tokens, "
                       f"cumulative_tokens from recall.auto_context({names})", args)
    return [dict(zip([d.name for d in cur.description], r, strict=True)) for r in cur.fetchall()]


FAILURE_CASES = [  # kind, content, metadata, is it a failure?
    ("tool", "Bash(command=\"make\")\n\nResult:\nok", {"is_error": True}, True),
    ("tool", "Result:\nERROR: something: but the tool said it worked", {"is_error": False}, False),
    ("tool", "Result:\nTraceback (most recent call last):\n  File \"x.py\"", {}, True),
    ("tool", "Result:\nerror: command 'gcc' failed", {}, True),
    ("tool", "Result:\n3 failed, 10 passed in 1.2s", {}, True),
    ("tool", "Result:\nFound 0 errors in 12 files", {}, False),
    ("tool", "Result:\n10 passed in 1.2s", {}, False),
    ("tool", "Result:\nFAILED tests/test_x.py::test_y", {}, True),
    ("turn_pair", "User: why?\n\nAssistant: the request failed once, then passed", {}, False),
    ("message", "Assistant: process exited with exit code: 2", {}, True),
    ("message", "Assistant: exit code 0, all good", {}, False),
    ("turn_pair", "User: undo it\n\nAssistant: I reverted the schema change", {}, True),
    ("thinking", "Traceback (most recent call last): is what I expect to see", {}, False),
    ("code", "```\nraise Exception('boom')\n```", {}, False),
]


def test_is_failure(shop):
    got = [shop.execute("select recall._is_failure(%s, %s, %s::jsonb)",
                        [kind, content, json.dumps(meta)]).fetchone()[0]
           for kind, content, meta, _ in FAILURE_CASES]
    assert got == [expected for *_, expected in FAILURE_CASES]


def test_sections_on_a_project_and_branch(shop):
    rows = auto(shop, project=SHOP, branch="main", token_budget=4000)

    sections = [r["section"] for r in rows]
    assert sections == sorted(sections, key=["recent", "related", "failures"].index)
    recent = [r for r in rows if r["section"] == "recent"]
    assert recent and {r["session_id"] for r in recent} == {MAIN_SESSION}
    assert {r["kind"] for r in recent} <= {"turn_pair", "message", "summary"}

    failures = [r for r in rows if r["section"] == "failures"]
    assert [r["kind"] for r in failures] == ["tool", "thinking"]
    failed, resolution = failures
    assert failed["session_id"] == MAIN_SESSION
    assert 'relation "orders_archive" does not exist' in failed["content"]
    assert resolution["content"].startswith("The discount migration depends on orders_archive")
    assert resolution["metadata"]["resolution_of"] == failed["chunk_id"]
    # the crash of the other project is not in this project's failures; its chunks may
    # be related work, never recent
    assert all(r["session_id"] != REPORTS_SESSION for r in rows if r["section"] != "related")
    # related, without a task: work related to the latest session, from other sessions
    assert all(r["session_id"] != MAIN_SESSION for r in rows if r["section"] == "related")

    # one running total over the rows, within the budget
    total = 0
    for r in rows:
        total += r["n_tokens"]
        assert r["cumulative_tokens"] == total
    assert total <= 4000
    assert len({r["chunk_id"] for r in rows}) == len(rows)


def test_budget_shares(shop):
    rows = auto(shop, project=SHOP, branch="main", token_budget=200, recent_share=0.5,
                failure_share=0.5)
    by = {s: sum(r["n_tokens"] for r in rows if r["section"] == s) for s in ("recent", "failures", "related")}
    assert by["recent"] <= 100 and by["failures"] <= 100 and sum(by.values()) <= 200
    assert auto(shop, project=SHOP, branch="main", token_budget=0) == []


def test_new_branch_falls_back_to_its_project(shop):
    rows = auto(shop, project=SHOP, branch="feature/brand-new", token_budget=4000)
    assert {r["session_id"] for r in rows if r["section"] == "recent"} == {MAIN_SESSION, COUPONS_SESSION}
    other_branch = auto(shop, project=SHOP, branch="feature/coupons", token_budget=4000)
    assert {r["session_id"] for r in other_branch if r["section"] == "recent"} == {COUPONS_SESSION}
    # no failure on that branch: the section is empty, never borrowed from main
    assert not [r for r in other_branch if r["section"] == "failures"]


def test_task_text_and_excluded_session(shop):
    rows = auto(shop, project=SHOP, branch="main", task_text="discount column migration",
                exclude_session_id=MAIN_SESSION, token_budget=4000)
    assert all(r["session_id"] != MAIN_SESSION for r in rows)
    # the task finds the work of another branch (keywords only here: no embeddings)
    rows = auto(shop, project=SHOP, branch="main", task_text="coupon codes endpoint",
                token_budget=4000)
    related = [r for r in rows if r["section"] == "related"]
    assert related and related[0]["session_id"] == COUPONS_SESSION


@pytest.mark.parametrize("args, message", [
    ({"agent_id": ""}, "agent_id is required"),
    ({"token_budget": -1}, "token_budget must be >= 0, got -1"),
    ({"recent_share": 0.9, "failure_share": 0.2},
     "recent_share and failure_share must be >= 0 and sum to at most 1"),
])
def test_bad_arguments(shop, args, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        auto(shop, **args)


def test_cli_context_markdown_has_the_sections(shop_url):
    result = CliRunner().invoke(main, ["recall", "--auto", "--project", SHOP, "--branch", "main"],
                                env={"PYRECALL_DSN": shop_url})

    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("## Relevant memory\n### Recent\n- 2026-04-01 · ")
    assert "### Failures to avoid" in out
    failures = out.split("### Failures to avoid\n", 1)[1]
    # each item names its chunk (what `pyrecall expand ID` and the MCP tool expand take)
    first = re.match(r'- 2026-04-01 · tool #(\d+) · "Orders table migration on main', failures)
    assert first, failures[:200]
    expanded = CliRunner().invoke(main, ["expand", first[1], "--json"], env={"PYRECALL_DSN": shop_url})
    assert expanded.exit_code == 0 and 'relation \\"orders_archive\\" does not exist' in expanded.output
    assert 'relation "orders_archive" does not exist' in failures
    assert "\n  - Then: The discount migration depends on orders_archive" in failures
    # a Markdown list: every line is an item, a nested item, indented content, or blank
    body = [x for x in out.splitlines() if not x.startswith("#")]
    assert all(x == "" or x.startswith(("- ", "  ")) for x in body)


def test_cli_hook_reads_claude_code_event(conn, db_url, tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True)
    lines = []
    for sid, n, text in (("old-session", 1, "We chose SQLite for the cache."),
                         ("current-session", 2, "Now we are switching to Redis.")):
        lines.append({"type": "user", "sessionId": sid, "uuid": f"u{n}", "cwd": str(repo),
                      "gitBranch": "trunk", "timestamp": f"2026-04-0{n}T10:00:00Z",
                      "message": {"role": "user", "content": text}})
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    _sync.index(conn, [tmp_path / "t.jsonl"], agent_id="claude-code")
    event = {"session_id": "current-session", "transcript_path": str(tmp_path / "t.jsonl"),
             "cwd": str(repo / "src"), "hook_event_name": "SessionStart", "source": "startup"}

    result = CliRunner().invoke(main, ["recall", "--auto", "--hook"], input=json.dumps(event),
                                env={"PYRECALL_DSN": db_url})

    assert result.exit_code == 0, result.output
    assert "We chose SQLite for the cache." in result.output
    assert "switching to Redis" not in result.output


def test_a_prompt_hook_recalls_what_is_like_the_prompt_and_nothing_else(conn, db_url, tmp_path):
    """`pyrecall recall --hook` without --auto, as a UserPromptSubmit hook: the prompt is the
    query (the real local model), in the repository's project, the current session left out;
    an unrelated prompt, a short one and a /command add nothing."""
    import subprocess

    from pyrecall._embed import get_embedder
    from pyrecall._worker import Worker

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True)
    lines = []
    for n, (sid, role, text) in enumerate([
            ("old", "user", "Which cache should the session store use?"),
            ("old", "assistant", "We chose SQLite for the session cache: one file, no server to run."),
            ("other", "user", "Rename the CSV export columns to snake_case."),
            ("other", "assistant", "Done: the export writes order_id, created_at and total_cents."),
            ("current", "user", "Now we are switching the session cache to Redis.")], start=1):
        lines.append({"type": role, "sessionId": sid, "uuid": f"u{n}", "cwd": str(repo), "gitBranch": "trunk",
                      "timestamp": f"2026-04-0{n}T10:00:00Z", "message": {"role": role, "content": text}})
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    _sync.index(conn, [tmp_path / "t.jsonl"], agent_id="claude-code")
    Worker(conn, get_embedder("local/all-MiniLM-L6-v2"), agent="claude-code").run()

    def hook(prompt, *args):
        event = {"session_id": "current", "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
                 "prompt": prompt}
        result = CliRunner().invoke(main, ["recall", "--hook", *args], input=json.dumps(event),
                                    env={"PYRECALL_DSN": db_url})
        assert result.exit_code == 0, result.output
        return result.stdout

    out = hook("which database did we pick for the session cache?")
    assert out.startswith("## Relevant memory (from earlier sessions")
    assert "We chose SQLite for the session cache" in out and "switching the session cache to Redis" not in out
    assert "snake_case" not in out                          # not like the prompt: left out
    as_json = json.loads(hook("which database did we pick for the session cache?", "--format", "hook"))
    assert as_json["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "SQLite" in as_json["hookSpecificOutput"]["additionalContext"]
    for prompt in ("write a haiku about autumn leaves please", "ok go on", "/compact the conversation now"):
        assert hook(prompt) == "", prompt
    # a lower bar lets the unrelated one through: the bar is what kept it out
    assert "snake_case" in hook("which database did we pick for the session cache?", "--min-similarity", "0")
