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


def test_a_new_migration_must_run_on_citus_too(sql_copy):
    """Rule 5: what a distributed cluster refuses (tests/test_citus.py runs such migrations)."""
    f = sql_copy / "incremental" / "900-tokens.sql"
    f.write_text("alter table recall.messages add column n_tokens int check (n_tokens > 0);\n"
                 "alter table recall.messages add column date_tokens smallint,\n"
                 "  add column zz int references recall.config;\n"
                 "insert into recall.config (key, value) select 'k', 'true'::jsonb\n"
                 "where exists (select from recall.messages);\n")
    problems = _sqlcheck.check(sql_copy)
    assert [p.split(": ", 1)[0] for p in problems] == [f"{f}:1", f"{f}:2", f"{f}:4"]
    assert "name it" in problems[0] and "name it" in problems[1] and "select 1 from" in problems[2]
    f.write_text("alter table recall.messages add column n_tokens int\n"
                 "  constraint messages_n_tokens_check check (n_tokens > 0);\n"
                 "alter table recall.messages add column date_tokens smallint, add check (date_tokens > 0);\n"
                 "insert into recall.config (key, value) select 'k', 'true'::jsonb\n"
                 "where exists (select 1 from recall.messages);\n")
    assert _sqlcheck.check(sql_copy) == []
    # an upsert of recall.config (a reference table on a cluster; 012-window-parts met both)
    f.write_text("insert into recall.config (key, value) values ('k', '{}') on conflict (key) do update\n"
                 "  set value = case jsonb_typeof(recall.config.value) when 'array' then recall.config.value\n"
                 "  else jsonb_build_array(recall.config.value) end;\n")
    problems = _sqlcheck.check(sql_copy)
    assert len(problems) == 2 and "jsonb_build_array" in problems[0] and "CASE WHEN" in problems[1]
    f.write_text("insert into recall.config (key, value) values ('k', '{}') on conflict (key) do update\n"
                 "  set value = case when jsonb_typeof(recall.config.value) = 'array' then recall.config.value\n"
                 "  else '[]'::jsonb || recall.config.value end;\n")
    assert _sqlcheck.check(sql_copy) == []
    # a released (pinned) migration is not checked again: it cannot change
    f.write_text("alter table recall.messages add column n_tokens int check (n_tokens > 0);\n")
    assert len(_sqlcheck.check(sql_copy)) == 1
    _sqlcheck.freeze(sql_copy)
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


def test_released_files_are_pinned_whole(sql_copy):
    v1 = sql_copy / "released" / "v1.sql"
    v1.write_text(v1.read_text() + "\n-- a comment added later\n")
    problems = _sqlcheck.check(sql_copy)
    assert problems == [f"{sql_copy}/frozen.txt: released released/v1.sql changed "
                        f"(pinned {_sqlcheck.read_frozen(sql_copy)['released/v1.sql'][:12]}, now "
                        f"{_sqlcheck.frozen_items(sql_copy)['released/v1.sql'][:12]}); add a new version instead"]


def test_a_released_function_may_not_reach_current_code(sql_copy):
    """A release (v99, after the real ones, which stay as they are) calls a helper of sql/idempotent
    that is on no list: its behaviour could change under it."""
    (sql_copy / "idempotent" / "049-helper.sql").write_text(
        "create or replace function recall._helper(x int) returns int language sql as 'select x';\n")
    (sql_copy / "released" / "v99.sql").write_text(
        "create or replace function recall.thing_v99(x int) returns int language sql\n"
        "as $$ select recall._finish_like(x) + recall._helper(x) -- recall._ignored(x) in a comment\n$$;\n"
        "create or replace function recall._finish_like(x int) returns int language sql\n"
        "as $$ select recall._similarity(null, null)::int + recall._vector_arm_missing(x) $$;\n")
    problems = [p for p in _sqlcheck.check_call_chains(sql_copy)]
    assert sorted(problems) == sorted([
        f"{sql_copy}/released/v99.sql: recall.thing_v99 reaches recall._helper (from recall.thing_v99), which is "
        "neither in this release, an older one, shared.sql nor sql/released/shared.txt",
        f"{sql_copy}/released/v99.sql: recall.thing_v99 reaches recall._vector_arm_missing (from "
        "recall._finish_like), which is neither in this release, an older one, shared.sql nor "
        "sql/released/shared.txt",
        f"{sql_copy}/released/v99.sql: recall._finish_like reaches recall._vector_arm_missing (from "
        "recall._finish_like), which is neither in this release, an older one, shared.sql nor "
        "sql/released/shared.txt",
    ])
    # on the shared list, with a reason, it may
    with (sql_copy / "released" / "shared.txt").open("a") as f:
        f.write("recall._helper  contract: returns its argument\n"
                "recall._vector_arm_missing  contract: a test holds it\n")
    assert _sqlcheck.check_call_chains(sql_copy) == []


def test_shipped_released_versions_reach_only_frozen_code():
    assert _sqlcheck.check_call_chains(sql_dir()) == []
    shared = _sqlcheck.read_shared_list(sql_dir())
    assert set(shared) == {"_vector_arm", "_vector_exact", "_vector_arm_scoped", "_vector_exact_scoped"} \
        and all(shared.values())
