"""Migrations on a real server: from empty, re-run, concurrent, edited file, dimension."""

import shutil
import threading
from pathlib import Path

import psycopg
import pytest

from pyrecall import DimensionMismatchError, MigrationError, _migrate


def connect(url):
    return psycopg.connect(url, autocommit=True)


def tables(conn):
    return {r[0] for r in conn.execute(
        "select tablename from pg_tables where schemaname = 'recall'").fetchall()}


def test_from_empty_creates_schema_and_records(empty_db_url):
    with connect(empty_db_url) as conn:
        report = _migrate.migrate(conn)
        assert report.applied == [f.name for f in _migrate.sql_files("incremental")]
        assert {"sessions", "messages", "chunks", "config", "migrations", "source_files"} <= tables(conn)
        assert _migrate.installed_dim(conn) == 384
        typ = conn.execute("select format_type(atttypid, atttypmod) from pg_attribute "
                           "where attrelid = 'recall.chunks'::regclass and attname = 'embedding'").fetchone()[0]
        assert typ == "vector(384)"
        assert [s.state for s in _migrate.status(conn)] == ["applied"] * len(report.applied)


def test_rerun_is_a_noop(db_url):
    with connect(db_url) as conn:
        before = conn.execute("select name, applied_at from recall.migrations order by name").fetchall()
        report = _migrate.migrate(conn)
        assert report.applied == []
        assert conn.execute("select name, applied_at from recall.migrations order by name").fetchall() == before


def test_dry_run_writes_nothing(empty_db_url):
    with connect(empty_db_url) as conn:
        report = _migrate.migrate(conn, dry_run=True)
        assert report.pending == [f.name for f in _migrate.sql_files("incremental")] and report.applied == []
        assert conn.execute("select to_regnamespace('recall')").fetchone()[0] is None


def test_concurrent_migrators_apply_once(empty_db_url):
    errors, reports = [], []

    def run():
        try:
            with connect(empty_db_url) as conn:
                reports.append(_migrate.migrate(conn))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    n = len(_migrate.sql_files("incremental"))
    assert errors == []
    assert sorted(len(r.applied) for r in reports) == [0, 0, 0, n]
    with connect(empty_db_url) as conn:
        assert conn.execute("select count(*) from recall.migrations").fetchone()[0] == n


def test_custom_dim_then_other_dim_refused(empty_db_url):
    with connect(empty_db_url) as conn:
        _migrate.migrate(conn, dim=1536)
        assert _migrate.installed_dim(conn) == 1536
        _migrate.migrate(conn)  # no dim: the recorded one
        with pytest.raises(DimensionMismatchError, match=r"stores 1536-dimensional .* `pyrecall embed --reembed"):
            _migrate.migrate(conn, dim=384)


@pytest.mark.parametrize("dim", [0, -3, 16001])
def test_absurd_dim_refused(empty_db_url, dim):
    with connect(empty_db_url) as conn, pytest.raises(MigrationError, match="between 1 and 16000"):
        _migrate.migrate(conn, dim=dim)


@pytest.fixture
def sql_copy(tmp_path, monkeypatch):
    """A copy of sql/ that a test may edit; the runner reads it instead of the real one."""
    dst = tmp_path / "sql"
    shutil.copytree(_migrate.sql_dir(), dst)
    monkeypatch.setattr(_migrate, "sql_dir", lambda: dst)
    return dst


def test_edited_applied_migration_refused(db_url, sql_copy: Path):
    f = sql_copy / "incremental" / "001-schema.sql"
    f.write_text(f.read_text() + "\n-- an edit\n")
    with connect(db_url) as conn:
        with pytest.raises(MigrationError, match="001-schema was changed after it was applied"):
            _migrate.migrate(conn)
        assert {s.name: s.state for s in _migrate.status(conn)}["001-schema"] == "changed"
        assert {s.state for s in _migrate.status(conn) if s.name != "001-schema"} <= {"applied"}


def test_failed_migration_leaves_schema_as_it_was(db_url, sql_copy: Path):
    (sql_copy / "incremental" / "002-broken.sql").write_text(
        "create table recall.half_done (x int);\n"
        "alter table recall.chunks add column extra int;\n"
        "select 1/0;\n")
    with connect(db_url) as conn:
        with pytest.raises(MigrationError, match="002-broken failed and was rolled back: division by zero"):
            _migrate.migrate(conn)
        assert "half_done" not in tables(conn)
        cols = {r[0] for r in conn.execute("select attname from pg_attribute "
                                           "where attrelid = 'recall.chunks'::regclass").fetchall()}
        assert "extra" not in cols
        assert {s.name: s.state for s in _migrate.status(conn)}["002-broken"] == "pending"
        assert {s.state for s in _migrate.status(conn) if s.name != "002-broken"} == {"applied"}


def test_functions_reapplied_each_time(db_url, sql_copy: Path):
    (sql_copy / "idempotent" / "999-extra.sql").write_text(
        "create or replace function recall.test_answer() returns int language sql as 'select 42';\n")
    with connect(db_url) as conn:
        report = _migrate.migrate(conn)
        assert "999-extra" in report.functions
        assert conn.execute("select recall.test_answer()").fetchone()[0] == 42


def _chunk_indexes(conn):
    return {r[0]: r[1] for r in conn.execute(
        """select c.relname, pg_get_indexdef(i.indexrelid) from pg_index i
           join pg_class c on c.oid = i.indexrelid
           where i.indrelid = 'recall.chunks'::regclass""").fetchall()}


def test_text_index_holds_the_agent(db_url):
    """004: one GIN (agent_id, tsv) index serves an agent's text search; GIN (tsv) is gone."""
    with connect(db_url) as conn:
        idx = _chunk_indexes(conn)
        assert "chunks_tsv_idx" not in idx
        assert "USING gin (agent_id, tsv)" in idx["chunks_agent_tsv_idx"]
        sid = conn.execute("insert into recall.sessions (session_id, agent_id) "
                           "values ('s', 'a') returning session_id").fetchone()[0]
        conn.execute("""insert into recall.messages (session_id, role, content)
                        select %s, case when i %% 2 = 0 then 'user' else 'assistant' end,
                               case when i = 7 then 'the kubernetes rollout' else 'note ' || i end
                        from generate_series(0, 1999) i""", [sid])
        conn.execute("analyze recall.chunks")
        plan = "\n".join(r[0] for r in conn.execute(
            "explain select chunk_id from recall.chunks "
            "where agent_id = 'a' and tsv @@ 'kubernet'::tsquery").fetchall())
        assert "Bitmap Index Scan on chunks_agent_tsv_idx" in plan
        assert "(agent_id = 'a'::text)" in plan.split("chunks_agent_tsv_idx", 1)[1]
        assert conn.execute("select count(*) from recall.chunks "
                            "where agent_id = 'a' and tsv @@ 'kubernet'::tsquery").fetchone()[0] == 1


def test_embedded_chunk_keeps_its_text_vector_inline(db_url):
    """005: the worker's UPDATE that adds the embedding no longer pushes tsv out to TOAST."""
    words = " ".join(f"topic{i}word" for i in range(70))        # tsv of ~1 kB, as a long turn
    vec = "[" + ",".join(["0.05"] * 384) + "]"
    toasted = ("select pg_column_toast_chunk_id(tsv) is not null from recall.chunks "
               "where session_id = %s")
    with connect(db_url) as conn:
        assert conn.execute("select reloptions from pg_class "
                            "where oid = 'recall.chunks'::regclass").fetchone()[0] == [
                                "toast_tuple_target=8160"]

        def embedded_chunk(sid):
            conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, 'a')",
                         [sid])
            conn.execute("insert into recall.messages (session_id, role, content) "
                         "values (%s, 'user', %s), (%s, 'assistant', %s)",
                         [sid, words, sid, words.upper()])
            conn.execute("update recall.chunks set embedding = %s::vector where session_id = %s",
                         [vec, sid])
            return conn.execute(toasted, [sid]).fetchone()[0]

        assert embedded_chunk("inline") is False
        # without 005's setting the same row goes out of line, as before it
        conn.execute("alter table recall.chunks reset (toast_tuple_target)")
        assert embedded_chunk("toasted") is True
        # what docs/DBA.md tells a DBA to run for rows written before 005
        conn.execute("alter table recall.chunks set (toast_tuple_target = 8160)")
        conn.execute("vacuum full recall.chunks")
        assert conn.execute(toasted, ["toasted"]).fetchone()[0] is False


def test_text_index_migration_without_btree_gin_keeps_the_old_index(db_url):
    """Where btree_gin cannot be installed, 004 says so and leaves GIN (tsv) in place."""
    body = _migrate.sql_dir() / "incremental" / "004-agent-text-index.sql"
    with connect(db_url) as conn:
        conn.execute("drop index recall.chunks_agent_tsv_idx")
        conn.execute("drop extension btree_gin")
        conn.execute("create index chunks_tsv_idx on recall.chunks using gin (tsv)")
        # a migrating role that owns the tables but may not create extensions in the database
        conn.execute("drop role if exists pyrecall_t_owner")
        conn.execute("create role pyrecall_t_owner")
        conn.execute("grant usage on schema recall to pyrecall_t_owner")
        conn.execute("alter table recall.chunks owner to pyrecall_t_owner")
        dbname = conn.info.dbname
        conn.execute(f'revoke create on database "{dbname}" from public')
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        try:
            with conn.transaction():
                conn.execute("set local role pyrecall_t_owner")
                conn.execute(body.read_text())
        finally:
            conn.execute("alter table recall.chunks owner to postgres")
            conn.execute("drop owned by pyrecall_t_owner")
            conn.execute("drop role pyrecall_t_owner")
        assert any("btree_gin extension cannot be installed" in n for n in notices), notices
        idx = _chunk_indexes(conn)
        assert "chunks_tsv_idx" in idx and "chunks_agent_tsv_idx" not in idx
        assert not conn.execute("select from pg_extension where extname = 'btree_gin'").fetchone()


def _config(conn, key):
    row = conn.execute("select value #>> '{}' from recall.config where key = %s", [key]).fetchone()
    return row[0] if row else None


def test_text_scan_max_rows_follows_the_text_index_and_keeps_a_dbas_value(db_url):
    """Where the (agent_id, tsv) GIN index exists, migrate sets text_scan_max_rows 1000 (the
    functions' built-in 2000 suits the tsv-only index); a value set by hand survives migrate."""
    with connect(db_url) as conn:
        assert "chunks_agent_tsv_idx" in _chunk_indexes(conn)
        assert _config(conn, "text_scan_max_rows") == "1000"
        conn.execute("update recall.config set value = '3000' where key = 'text_scan_max_rows'")
        _migrate.migrate(conn)
        assert _config(conn, "text_scan_max_rows") == "3000"
        # without the agent's index (btree_gin refused, see below) the setting stays absent
        conn.execute("delete from recall.config where key = 'text_scan_max_rows'")
        conn.execute("drop index recall.chunks_agent_tsv_idx")
        conn.execute("create index chunks_tsv_idx on recall.chunks using gin (tsv)")
        _migrate.migrate(conn)
        assert _config(conn, "text_scan_max_rows") is None


def test_client_migrate_chooses_the_dimension_then_reports_nothing_to_do(empty_db_url):
    """Recall.migrate (what `pyrecall migrate` calls) on a client that installed nothing by
    itself: the dry run changes nothing, the first install records the dimension asked for,
    and migration_status then lists every migration as applied."""
    from pyrecall import Recall

    names = [f.name for f in _migrate.sql_files("incremental")]
    with Recall(empty_db_url, migrate=False) as r:
        dry = r.migrate(dim=8, dry_run=True)
        assert (dry.pending, dry.applied, r.dimension()) == (names, [], None)
        assert [s.state for s in r.migration_status()] == ["pending"] * len(names)
        assert r.migrate(dim=8).applied == names
        assert r.dimension() == 8
        assert [s.state for s in r.migration_status()] == ["applied"] * len(names)
        assert r.migrate().applied == []
        with pytest.raises(DimensionMismatchError, match="stores 8-dimensional embeddings; 16 was asked for"):
            r.migrate(dim=16)
