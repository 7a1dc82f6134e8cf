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
import subprocess
import tarfile
from pathlib import Path

import psycopg
import pytest
from conftest import drop_database, new_database

from pyrecall import _migrate

ROOT = Path(__file__).resolve().parent.parent
RELEASES = {
    "v1 (0911b0a)": "0911b0a4f2bc7663c0c42754d84485faf1f1adff",
    "v3 (dbf80ce)": "dbf80ce",
    "before sql/released (9de5f32)": "9de5f32",
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
