"""Upgrade from an old release to HEAD gives the schema a fresh install gives (timescale/pgai
style): the sql/ of a released commit is installed and filled with a conversation, HEAD's
migrate runs over it, and a catalog snapshot (functions with their bodies, settings and
comments; tables and columns; indexes; constraints; triggers; grants; policies) is compared
with a fresh install of HEAD. The data written before the upgrade is still there and found.

The old sql/ comes from the repository's own history (``git archive``): these are the commits
that released v1, v3 and the last state before sql/released/ existed.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import psycopg
import pytest
from conftest import drop_database, new_database
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector

from pyrecall import _migrate, _worker
from pyrecall._ingest import ingest
from pyrecall._worker import Worker
from pyrecall.importers._records import Message, Session

ROOT = Path(__file__).resolve().parent.parent
# the last commit before 010-agent-first-keys: its schema is what the keys migration upgrades
BEFORE_KEYS = "a70d3ef"
RELEASES = {
    "v1 (0911b0a)": "0911b0a4f2bc7663c0c42754d84485faf1f1adff",
    "v3 (dbf80ce)": "dbf80ce",
    "before sql/released (9de5f32)": "9de5f32",
    "before agent-first keys (a70d3ef)": BEFORE_KEYS,
}


def old_sql(rev: str, dest: Path) -> Path:
    try:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "sql"], capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"needs git and the repository's history (commit {rev}); "
                    f"a shallow clone or an unpacked wheel lacks it: {exc}")
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(dest, filter="data")
    return dest / "sql"


SNAPSHOT = {
    "functions": """
        select p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),
               p.prosrc, p.proconfig::text, p.prosecdef, p.provolatile, p.proparallel, p.proacl::text,
               obj_description(p.oid, 'pg_proc')
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = 'recall'""",
    "columns": """
        select table_name, column_name, data_type, udt_name, column_default, is_nullable
        from information_schema.columns where table_schema = 'recall'""",
    "relations": """
        select c.relname, c.relkind, c.relacl::text, c.relrowsecurity, c.relforcerowsecurity,
               obj_description(c.oid, 'pg_class')
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'recall' and c.relkind in ('r', 'v', 'm', 'p')""",
    "indexes": "select indexname, indexdef from pg_indexes where schemaname = 'recall'",
    "constraints": """
        select conrelid::regclass::text, conname, pg_get_constraintdef(oid)
        from pg_constraint where connamespace = 'recall'::regnamespace""",
    "triggers": """
        select tgrelid::regclass::text, tgname, pg_get_triggerdef(oid)
        from pg_trigger where not tgisinternal
          and tgrelid in (select oid from pg_class where relnamespace = 'recall'::regnamespace)""",
    "policies": "select tablename, policyname, permissive, roles::text, cmd, qual, with_check "
                "from pg_policies where schemaname = 'recall'",
    "types": """
        select t.typname, t.typtype from pg_type t
        where t.typnamespace = 'recall'::regnamespace and t.typtype in ('c', 'e', 'd')
          and not exists (select from pg_class c where c.oid = t.typrelid and c.relkind <> 'c')""",
    "config_keys": "select key from recall.config",
}


def snapshot(url: str) -> dict[str, set]:
    with psycopg.connect(url) as conn:
        return {name: set(conn.execute(q).fetchall()) for name, q in SNAPSHOT.items()}


def fill(url: str) -> None:
    """A small conversation written through the tables every release has."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("insert into recall.sessions (session_id, agent_id, title) "
                     "values ('s-old', 'agent-a', 'before the upgrade')")
        for seq, (role, text) in enumerate([
                ("user", "the nightly deploy failed with a certificate error on the gateway"),
                ("assistant", "renewed the gateway certificate and re-ran the deploy"),
                ("user", "thanks, the pipeline is green again")]):
            conn.execute("insert into recall.messages (session_id, agent_id, seq, external_id, role, content) "
                         "values ('s-old', 'agent-a', %s, %s, %s, %s)", [seq, f"m{seq}", role, text])


@pytest.mark.parametrize("rev", list(RELEASES.values()), ids=list(RELEASES))
def test_upgrade_from_a_release_equals_a_fresh_install(server_url, tmp_path, monkeypatch, rev):
    old = old_sql(rev, tmp_path)
    upgraded, fresh = new_database(server_url, template=None), new_database(server_url, template=None)
    try:
        with monkeypatch.context() as m:
            m.setattr(_migrate, "sql_dir", lambda: old)
            with psycopg.connect(upgraded, autocommit=True) as conn:
                _migrate.migrate(conn, dim=384)
        fill(upgraded)
        with psycopg.connect(upgraded, autocommit=True) as conn:
            report = _migrate.migrate(conn)
            assert report.applied == [f.name for f in _migrate.sql_files("incremental")
                                      if not (old / "incremental" / f"{f.name}.sql").exists()]
            # 011-message-tokens, 013-message-vectors: the messages written before are counted
            # and embedded once by the worker, which then removes the backfill keys (a fresh
            # install never had them)
            assert _worker.count_messages(conn, FakeEmbedder()) == 3
            assert conn.execute("select count(*) from recall.messages "
                                "where n_tokens is null or embedding is null").fetchone()[0] == 0
        with psycopg.connect(fresh, autocommit=True) as conn:
            _migrate.migrate(conn, dim=384)
        a, b = snapshot(upgraded), snapshot(fresh)
        differences = {part: (sorted(map(repr, a[part] - b[part]))[:3], sorted(map(repr, b[part] - a[part]))[:3])
                       for part in SNAPSHOT if a[part] != b[part]}
        if "functions" in differences:  # which fields of a function differ (the body aside)
            fa, fb = ({r[:2]: r for r in s["functions"]} for s in (a, b))
            for key in sorted(set(fa) & set(fb)):
                if fa[key] != fb[key]:
                    print(key, [(i, x, y) for i, (x, y) in enumerate(zip(fa[key], fb[key], strict=True))
                                if x != y and i != 3])
        for part, (only_a, only_b) in differences.items():
            print(part, "\n  only after the upgrade:", *only_a, "\n  only in a fresh install:", *only_b, sep="\n")
        assert differences == {}, "(only after the upgrade, only in a fresh install) per part"
        with psycopg.connect(upgraded) as conn:
            rows = conn.execute(
                "select session_id, content from recall.hybrid_recall('agent-a', 'certificate deploy')"
            ).fetchall()
        assert rows and rows[0][0] == "s-old" and "certificate" in rows[0][1]
    finally:
        drop_database(server_url, upgraded)
        drop_database(server_url, fresh)


# every table with agent rows, as rows of JSON: what the keys migration must keep, value for value
TABLES = ("sessions", "messages", "chunks", "source_files", "recall_log", "config", "agent_bindings")


def table_rows(conn: psycopg.Connection) -> dict[str, list]:
    return {t: [r[0] for r in conn.execute(f"select to_jsonb(x)::text from recall.{t} x order by 1")]
            for t in TABLES}


def fill_rich(url: str) -> dict:
    """Two agents' history as a user's database holds it before 010-agent-first-keys: sessions
    with messages (turns, a tool call, a code block), chunks embedded by the worker, a memory
    (pinned) and one superseded, summaries, an importance set by hand, a synced file, the recall
    log. Returns the ids the test looks for afterwards."""
    fake = FakeEmbedder()
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        for agent, topic in (("agent-a", "gateway certificate"), ("agent-b", "database vacuum")):
            # plain SQL, as any client writes (this code's ingest names the new keys)
            conn.execute("insert into recall.sessions (session_id, agent_id, title, project, branch) values "
                         "(%s, %s, %s, 'infra', 'main'), (%s, %s, 'another day', 'infra', null)",
                         [f"s-{agent}", agent, f"{topic} night", f"s-{agent}-2", agent])
            with conn.cursor() as cur:
                cur.executemany(
                    "insert into recall.messages (session_id, agent_id, external_id, role, kind, content, metadata) "
                    "values (%s, %s, %s, %s, %s, %s, %s)",
                    [(f"s-{agent}", agent, f"{agent}-m1", "user", "text", f"the nightly deploy failed: {topic} error", "{}"),
                     (f"s-{agent}", agent, f"{agent}-m2", "assistant", "text", f"fixed the {topic} and re-ran the deploy", "{}"),
                     (f"s-{agent}", agent, f"{agent}-m3", "assistant", "tool_call", f"run: check {topic}",
                      '{"tool_use_id": "t1"}'),
                     (f"s-{agent}", agent, f"{agent}-m4", "tool", "tool_result", f"{topic}: ok", '{"tool_use_id": "t1"}'),
                     (f"s-{agent}", agent, f"{agent}-m5", "user", "text",
                      f"show the config\n```ini\n[{topic}]\nrenew = monthly\n```", "{}"),
                     (f"s-{agent}-2", None, f"{agent}-n1", "user", "text", f"is the {topic} still fine?", "{}")])
            old = conn.execute("select recall.remember(%s, %s, 'fact', embedding => %s)",
                               [agent, f"the {topic} renews weekly", fake.vector(f"{topic} weekly")]).fetchone()[0]
            conn.execute("select recall.remember(%s, %s, 'fact', supersedes => %s, pinned => true)",
                         [agent, f"the {topic} renews on the first of the month", old])
        Worker(conn, fake).run()
        conn.execute("select recall.summarize_sessions()")
        conn.execute("select recall.set_importance(agent_id, chunk_id, 0.95) from recall.chunks "
                     "where agent_id = 'agent-a' and kind = 'code'")
        conn.execute("insert into recall.source_files (path, agent_id, format, size, mtime) "
                     "values ('/tmp/a.jsonl', 'agent-a', 'claude-code', 10, now())")
        conn.execute("insert into recall.config (key, value) values ('recall_log', 'true') "
                     "on conflict (key) do update set value = excluded.value")
        conn.execute("select recall.log_recall('agent-a', 'hybrid_recall', 1.5, 3, 'certificate')")
        return {"query": fake.vector("gateway certificate weekly")}


def test_upgrade_keeps_every_row_and_recall_finds_them(server_url, tmp_path, monkeypatch):
    """010-agent-first-keys on a database with data: every row of every table the same after,
    the new keys in place, recall (hybrid_recall and session_recall by their stable names,
    auto_context_v4 as the stable name called it then, and the memories) returns what it returned before, and writing goes on through the new ON CONFLICT targets."""
    old = old_sql(BEFORE_KEYS, tmp_path)
    url = new_database(server_url, template=None)
    try:
        with monkeypatch.context() as m:
            m.setattr(_migrate, "sql_dir", lambda: old)
            with psycopg.connect(url, autocommit=True) as conn:
                _migrate.migrate(conn, dim=384)
        ids = fill_rich(url)
        recall_sql = {
            "hybrid": "select chunk_id, session_id, kind, content, memory_id from recall.hybrid_recall("
                      "'agent-a', 'certificate deploy', %(q)s, k => 20)",
            "session": "select chunk_id, session_id, session_rank from recall.session_recall("
                       "'agent-a', 'certificate deploy', %(q)s)",
            # (by its name then, v4: the stable name now calls a later release, whose Recent and
            # Related are filled otherwise; tests/test_auto_context_v15.py)
            "auto": "select chunk_id, section, content from recall.auto_context_v4("
                    "'agent-a', 'infra', task_text => 'certificate', task_embedding => %(q)s)",
            "memories": "select memory_id, content, pinned from recall.memories('agent-a')",
        }
        with psycopg.connect(url, autocommit=True) as conn:
            register_vector(conn)
            before = table_rows(conn)
            found = {name: conn.execute(q, {"q": ids["query"]}).fetchall() for name, q in recall_sql.items()}
            report = _migrate.migrate(conn)
            assert report.applied == ["010-agent-first-keys", "011-message-tokens", "012-window-parts",
                                      "013-message-vectors", "014-secret-patterns",
                                      "015-forgotten-sessions"]
            after = table_rows(conn)
            # 011-message-tokens adds the messages' token counts (NULL until the worker counts),
            # 013-message-vectors their own vectors (NULL until the worker embeds them)
            added = {"n_tokens": None, "date_tokens": None, "embedding": None}
            assert all(json.loads(r).items() >= added.items() for r in after["messages"])
            after["messages"] = sorted(json.dumps({k: v for k, v in json.loads(r).items() if k not in added})
                                       for r in after["messages"])
            before["messages"] = sorted(json.dumps(json.loads(r)) for r in before["messages"])
            # recall.config gains the keys later files add (and their defaults move with the
            # migration); every key set before is kept, and a value set by hand is kept as it was
            config_before, config_after = before.pop("config"), after.pop("config")
            keys_of = lambda rows: {json.loads(r)["key"]: json.loads(r)["value"] for r in rows}  # noqa: E731
            assert keys_of(config_before).keys() <= keys_of(config_after).keys()
            assert keys_of(config_after)["recall_log"] == keys_of(config_before)["recall_log"]
            assert {t: len(r) for t, r in after.items()} == {t: len(r) for t, r in before.items()}
            assert after == before
            assert all(before[t] for t in ("sessions", "messages", "chunks", "source_files", "recall_log"))
            embedded = conn.execute("select count(*) filter (where embedding is not null), count(*) "
                                    "from recall.chunks").fetchone()
            assert embedded[0] == embedded[1] > 10
            assert conn.execute("select count(*) from recall.sessions where summary is not null").fetchone()[0] >= 4
            keys = dict(conn.execute(
                "select conname, pg_get_constraintdef(oid) from pg_constraint "
                "where conrelid in ('recall.sessions'::regclass, 'recall.messages'::regclass, "
                "'recall.chunks'::regclass, 'recall.recall_log'::regclass) and contype in ('p', 'u', 'f')"))
            assert keys["sessions_pkey"] == "PRIMARY KEY (agent_id, session_id)"
            assert keys["chunks_session_fkey"].startswith(
                "FOREIGN KEY (agent_id, session_id) REFERENCES recall.sessions(agent_id, session_id)")
            assert all("agent_id" in d for n, d in keys.items() if n != "sessions_session_id_key")
            # recall returns what it returned before, for the same data
            for name, q in recall_sql.items():
                assert conn.execute(q, {"q": ids["query"]}).fetchall() == found[name], name
            assert all(found.values()), {n: len(r) for n, r in found.items()}
            assert any(r[4] is not None for r in found["hybrid"])           # a memory among them
            assert {r[1] for r in found["hybrid"]} <= {"s-agent-a", "s-agent-a-2", "memories:agent-a"}
            assert {r[1] for r in found["auto"]} >= {"pinned"}
            # writing goes on: a new message rechunks (ON CONFLICT of the chunker), a re-import
            # upserts its session, a summary is written again, a memory is stored
            ingest(conn, [Session("s-agent-a", "agent-a", "gateway certificate night", messages=[
                Message("agent-a-m6", "assistant", "text", "the certificate is renewed until June")])],
                agent_id="agent-a")
            again = ingest(conn, [Session("s-agent-a", "agent-a", "renamed", messages=[
                Message("agent-a-m6", "assistant", "text", "the certificate is renewed until June")])],
                agent_id="agent-a")
            assert again.inserted == 0
            assert conn.execute("select title from recall.sessions where session_id = 's-agent-a'").fetchone()[0] \
                == "renamed"
            Worker(conn, FakeEmbedder()).run()
            assert conn.execute("select recall.summarize_sessions()").fetchone()[0] >= 1
            conn.execute("select recall.remember('agent-a', 'June is when the certificate expires')")
            rows = conn.execute("select content from recall.hybrid_recall('agent-a', 'certificate June')").fetchall()
            assert any("June" in r[0] for r in rows)
            # a session id stays unique across agents on one node
            with pytest.raises(psycopg.errors.UniqueViolation):
                conn.execute("insert into recall.sessions (session_id, agent_id) values ('s-agent-a', 'agent-b')")
    finally:
        drop_database(server_url, url)
