"""A throwaway, migrated database for one benchmark run, dropped afterwards.

With a DSN: a new database on that server (the role must be allowed to create databases).
Without: a new embedded PostgreSQL in a temporary directory, stopped and removed at the end,
so a benchmark never touches the user's own memory.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

from .. import _db, _migrate
from .._errors import ConfigError


def _with_db(url: str, dbname: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**info)


@contextmanager
def scratch_database(dsn: str | None = None, *, dim: int = 384,
                     settings: dict[str, str] | None = None, keep: bool = False) -> Iterator[str]:
    """Yield the URL of a fresh database with the recall schema installed.

    ``keep`` (with a DSN only): leave the database on that server afterwards, to measure more
    on it (a throwaway embedded server is always removed).

    >>> with scratch_database() as url:  # doctest: +SKIP
    ...     psycopg.connect(url).execute("select count(*) from recall.chunks").fetchone()
    (0,)
    """
    if keep and not dsn:
        raise ConfigError("keeping the database needs a DSN (a throwaway embedded server is always removed)")
    if dsn:
        name = f"pyrecall_bench_{os.getpid()}"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        url = _with_db(dsn, name)
        try:
            _install(url, dim)
            yield url
        finally:
            if not keep:
                with psycopg.connect(dsn, autocommit=True) as admin:
                    admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
        return
    tmp = Path(tempfile.mkdtemp(prefix="pyrecall-bench-"))
    os.chmod(tmp, 0o755)  # the embedded server runs as its own OS user when we are root
    with _terminate_as_exit():
        try:
            url = _db.start(tmp, settings=settings)
            _install(url, dim)
            yield url
        finally:
            try:
                _db.stop(tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM and SIGHUP (a `kill`, a closed terminal, a CI job's timeout) end the benchmark as
    Ctrl-C does, through the ``finally`` that stops and removes its throwaway server; by default
    they ended the process at once and left the server running in /tmp. Exit status 128 + the
    signal, as a shell reports. The handlers before are put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum, frame):
        raise SystemExit(128 + signum)

    before = {sig: signal.signal(sig, leave) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _install(url: str, dim: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        _migrate.migrate(conn, dim=dim)
