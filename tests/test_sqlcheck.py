"""The SQL lint: splitting, destructive-statement guard, frozen releases."""

import shutil

import pytest

from pyrecall import _sqlcheck
from pyrecall._migrate import sql_dir


def test_shipped_sql_is_clean():
    assert _sqlcheck.check() == []


def test_split_keeps_dollar_bodies_whole():
    sql = "select 1;\ncreate function f() returns int language plpgsql as $$ begin return 1; end $$;\n-- c\nselect 'a;b';"
    assert [s.text for s in _sqlcheck.split(sql)] == [
        "select 1",
        "create function f() returns int language plpgsql as $$ begin return 1; end $$",
        "select 'a;b'",
    ]
    assert [s.line for s in _sqlcheck.split(sql)] == [1, 2, 4]


@pytest.mark.parametrize("sql,destructive", [
    ("drop table recall.x", True),
    ("DROP INDEX recall.i", True),
    ("truncate recall.chunks", True),
    ("delete from recall.chunks where true", True),
    ("alter table recall.chunks drop column embedding", True),
    ("alter table recall.chunks add column x int", False),
    ("create table recall.x (drop_count int)", False),
    ("select 'drop table x'", False),
    ("insert into recall.config values ('k', '1')", False),
])
def test_destructive_detection(sql, destructive):
    assert _sqlcheck.is_destructive(_sqlcheck.split(sql)[0]) is destructive


@pytest.fixture
def sql_copy(tmp_path):
    dst = tmp_path / "sql"
    shutil.copytree(sql_dir(), dst)
    return dst


def test_destructive_migration_needs_marker(sql_copy):
    f = sql_copy / "incremental" / "900-cleanup.sql"
    f.write_text("drop table recall.source_files;\n")
    assert _sqlcheck.check(sql_copy) == [
        f"{f}:1: destructive statement without the marker '-- pyrecall: destructive': drop table recall.source_files"]
    f.write_text("-- pyrecall: destructive (sync state is rebuilt by the next sync)\ndrop table recall.source_files;\n")
    assert _sqlcheck.check(sql_copy) == []


def test_unparseable_sql_reported(sql_copy):
    f = sql_copy / "idempotent" / "900-bad.sql"
    f.write_text("select (1 + ;\n")
    problems = _sqlcheck.check(sql_copy)
    assert len(problems) == 1 and problems[0].startswith(f"{f}:1: does not parse")


def test_frozen_release_edit_detected(sql_copy):
    (sql_copy / "idempotent" / "900-f.sql").write_text(
        "create or replace function recall.thing_v1() returns int language sql as 'select 1';\n")
    assert "function recall.thing_v1" in _sqlcheck.freeze(sql_copy)
    assert _sqlcheck.check(sql_copy) == []
    (sql_copy / "idempotent" / "900-f.sql").write_text(
        "create or replace function recall.thing_v1() returns int language sql as 'select 2';\n")
    problems = _sqlcheck.check(sql_copy)
    assert len(problems) == 1 and "released function recall.thing_v1 changed" in problems[0]
