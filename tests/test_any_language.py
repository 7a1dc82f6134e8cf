"""Any language: `pyrecall db url` prints a URL every driver takes, and Node's pg driver calls
recall.hybrid_recall with it (examples/node/recall.mjs, the README's example)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from pyrecall import _db
from pyrecall._ingest import ingest
from pyrecall.cli import main
from pyrecall.importers import discord

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "node"
CHAT = ROOT / "tests" / "fixtures" / "discord_payments.json"


def test_db_url_prints_a_url_and_keywords_on_request():
    keywords = "user=postgres dbname=pyrecall host=/srv/pyrecall/pgdata port=5433"
    run = CliRunner().invoke(main, ["db", "url"], env={"PYRECALL_DSN": keywords})
    assert run.exit_code == 0, run.output
    assert run.output == "postgresql://postgres@/pyrecall?host=/srv/pyrecall/pgdata&port=5433\n"
    run = CliRunner().invoke(main, ["db", "url", "--keywords"], env={"PYRECALL_DSN": keywords})
    assert run.output == keywords + "\n"
    url = "postgresql://app:s%40cret@db.example.com:6432/mem?application_name=x&sslmode=require"
    run = CliRunner().invoke(main, ["db", "url"], env={"PYRECALL_DSN": url})
    assert run.output == url + "\n"
    run = CliRunner().invoke(main, ["db", "url"], env={"PYRECALL_DSN": "host=::1 dbname=m user=u"})
    assert run.output == "postgresql://u@[::1]/m\n"
    assert psycopg.conninfo.conninfo_to_dict(_db.as_url(url)) == psycopg.conninfo.conninfo_to_dict(url)


def test_embedded_url_names_the_socket_folder_and_port(db_url):
    """The URL of a server on a Unix socket, as `pyrecall db url` prints the embedded one:
    psycopg connects with it as with the keywords."""
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    if not str(info.get("host", "")).startswith("/"):
        pytest.skip("the test server is not on a Unix socket (PYRECALL_TEST_DSN or Docker)")
    port = _db.embedded_port(Path(info["host"]).parent) if info["host"].endswith("/pgdata") else None
    url = _db.as_url(db_url, port=port or 5432)
    assert url == f"postgresql://postgres@/{info['dbname']}?host={info['host']}&port={port or 5432}"
    if port is not None:     # the embedded server: the port is its socket's number
        assert (Path(info["host"]) / f".s.PGSQL.{port}").exists()
    with psycopg.connect(url) as conn:
        assert conn.execute("select current_database()").fetchone()[0] == info["dbname"]


@pytest.fixture(scope="module")
def node():
    """node, with the example's dependencies (npm ci, from its package-lock.json)."""
    exe = shutil.which("node")
    if exe is None:
        pytest.skip("node is not installed: the Node.js example cannot run")
    if not (EXAMPLE / "node_modules" / "pg").is_dir():
        npm = shutil.which("npm")
        assert npm, "node is installed without npm: cannot install the example's pg driver"
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=EXAMPLE,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    return exe


def test_node_pg_calls_hybrid_recall(node, conn, db_url):
    ingest(conn, discord.parse(CHAT).sessions, agent_id="support")
    url = _db.as_url(db_url)
    done = subprocess.run([node, "recall.mjs", "what did bob say about the refund webhook?", "support",
                           '{"channel": "payments"}'], cwd=EXAMPLE, env={"DATABASE_URL": url},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    expected = conn.execute(
        "select chunk_id::text, content from recall.hybrid_recall(agent_id => 'support', "
        "query_text => 'what did bob say about the refund webhook?', k => 5, token_budget => 1500, "
        "filter => '{\"channel\": \"payments\"}')").fetchall()
    assert [(r["chunk_id"], r["content"]) for r in rows] == [tuple(e) for e in expected]
    assert "bob: The refund webhook fails" in rows[0]["content"]
    assert rows[0]["metadata"]["messages"][0]["permalink"].startswith("https://discord.com/channels/")
