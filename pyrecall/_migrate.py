"""Migrations: run-once table files and re-applied function files from ``sql/``.

- ``sql/incremental/NNN-name.sql`` run once each, in name order, each in its own transaction,
  recorded in ``recall.migrations`` with a SHA-256 of the file. A recorded file whose text has
  changed since is refused: released migrations never change.
- ``sql/idempotent/NNN-name.sql`` (``create or replace function ...``) run at every migrate,
  together in one transaction, after the incremental ones. The released versions,
  ``sql/released/shared.sql`` then ``v1.sql``, ``v2.sql``, ... (frozen: their SHA-256 is pinned
  in ``sql/frozen.txt``), run in the same transaction after the idempotent files numbered below
  ``RELEASED_BEFORE`` (the helpers they call) and before the others (the stable names, grants).
- Everything runs under one advisory lock, so two migrators at once are safe: the second waits
  and then finds nothing to do.
- On the coordinator of a Citus cluster whose schema is distributed (sql/citus/distribute.sql),
  the same files run statement by statement (Citus sends a DDL command on a distributed table
  to the workers with the whole query string: a file of several statements fails there) in
  Citus' sequential mode (DDL on shards, then functions, in one transaction), and
  ``sql/citus/distribute.sql`` follows the function files in their transaction: its
  definitions, then ``recall._distribute_tables()`` and ``recall._distribute_code()`` (a new
  table distributed by agent_id, new functions delegated, the cluster's triggers, policies and
  function settings put back). On a worker, migrate is refused: it names the coordinator.
- The embedding dimension is chosen at first install (``dim``, default 384) and recorded in
  ``recall.config``; asking for another later is refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import psycopg

from . import __version__
from ._config import DEFAULT_DIM
from ._errors import DimensionMismatchError, MigrationError

LOCK_KEY = 0x70797265_63616C6C  # "pyrecall"


@dataclass(frozen=True)
class SqlFile:
    name: str
    path: Path
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass
class MigrationReport:
    applied: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    dim: int | None = None
    dry_run: bool = False
    citus: bool = False  # the coordinator of a distributed schema: re-distributed too


@dataclass(frozen=True)
class MigrationState:
    name: str
    state: str  # applied | pending | changed
    applied_at: object | None


def sql_dir() -> Path:
    """The ``sql/`` folder: inside the installed wheel, else in the source checkout."""
    packaged = resources.files("pyrecall") / "sql"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parent.parent / "sql"
    if checkout.is_dir():
        return checkout
    raise MigrationError("the sql/ folder is missing from this installation of pyrecall")


RELEASED_BEFORE = "050"


def _release_key(path: Path) -> tuple[int, int]:
    """shared.sql first, then v1, v2, ..., v10, v11, ... in number order."""
    stem = path.stem
    return (0, 0) if stem == "shared" else (1, int(stem[1:]) if stem[1:].isdigit() else 10**6)


def sql_files(kind: str) -> list[SqlFile]:
    """The files of ``sql/<kind>/`` (``incremental``, ``released`` or ``idempotent``) in the
    order they run. ``idempotent`` includes the released files at their place (see above)."""
    folder = sql_dir() / kind
    if kind == "released":
        paths = sorted(folder.glob("*.sql"), key=_release_key)
        return [SqlFile(f"released/{p.stem}", p, p.read_text()) for p in paths]
    files = [SqlFile(p.stem, p, p.read_text()) for p in sorted(folder.glob("*.sql"))]
    if kind != "idempotent":
        return files
    before = [f for f in files if f.name < RELEASED_BEFORE]
    return before + sql_files("released") + [f for f in files if f.name >= RELEASED_BEFORE]


CITUS_FILE = "citus/distribute"


def citus_statements() -> list[str]:
    """The statements of sql/citus/distribute.sql but its CALL: the definitions."""
    from ._sqlcheck import split  # (sqlglot; _sqlcheck imports this module)

    text = (sql_dir() / "citus" / "distribute.sql").read_text()
    return [s.text for s in split(text) if not s.text.lstrip().lower().startswith("call ")]


def citus_distributed(conn: psycopg.Connection) -> str | None:
    """``coordinator`` or ``worker`` when this server is a node of a Citus cluster over which the
    recall schema is distributed; None otherwise (one node, or not distributed yet)."""
    if not conn.execute("select exists (select from pg_extension where extname = 'citus')").fetchone()[0]:
        return None
    if not conn.execute("select exists (select from pg_dist_partition "
                        "where logicalrelid = to_regclass('recall.sessions'))").fetchone()[0]:
        return None
    return "coordinator" if conn.execute("select citus_is_coordinator()").fetchone()[0] else "worker"


def _execute(conn: psycopg.Connection, f: SqlFile, cluster: bool) -> None:
    """Run a file: whole on one node, statement by statement on a cluster. Raises psycopg's
    error, with the line of the statement on a cluster."""
    if not cluster:
        conn.execute(f.text)
        return
    from ._sqlcheck import split

    for stmt in split(f.text):
        try:
            conn.execute(stmt.text)
        except psycopg.Error as exc:
            exc.add_note(f"line {stmt.line}")
            raise


def _failed(exc: psycopg.Error) -> str:
    notes = getattr(exc, "__notes__", None)
    return str(exc).strip() + (f" ({notes[-1]})" if notes else "")


def _bootstrap(conn: psycopg.Connection) -> None:
    conn.execute("create extension if not exists vector")
    available = conn.execute(
        "select 1 from pg_available_extensions where name = 'vectorscale'").fetchone()
    if available:
        conn.execute("create extension if not exists vectorscale cascade")
    conn.execute("create schema if not exists recall")
    conn.execute("""
        create table if not exists recall.migrations
        ( name       text primary key
        , checksum   text not null
        , version    text not null
        , applied_at timestamptz not null default now()
        )""")


def _recorded(conn: psycopg.Connection) -> dict[str, tuple[str, object]]:
    exists = conn.execute("select to_regclass('recall.migrations')").fetchone()[0]
    if exists is None:
        return {}
    rows = conn.execute("select name, checksum, applied_at from recall.migrations").fetchall()
    return {name: (checksum, at) for name, checksum, at in rows}


def installed_dim(conn: psycopg.Connection) -> int | None:
    """The embedding dimension recorded at install, or None before the first migrate."""
    if conn.execute("select to_regclass('recall.config')").fetchone()[0] is None:
        return None
    row = conn.execute("select value::int from recall.config where key = 'embedding_dim'").fetchone()
    return row[0] if row else None


def _check_unchanged(files: list[SqlFile], recorded: dict[str, tuple[str, object]]) -> None:
    for f in files:
        if f.name in recorded and recorded[f.name][0] != f.checksum:
            raise MigrationError(
                f"migration {f.name} was changed after it was applied "
                f"(recorded sha256 {recorded[f.name][0][:12]}, file {f.checksum[:12]}); "
                "released migrations never change: restore the file and put the change in a new one")


def _sequential(conn: psycopg.Connection) -> None:
    """Citus: one connection per node for the rest of the transaction, so that functions can be
    created and distributed after DDL on the shards (in parallel mode Citus refuses it)."""
    conn.execute("set local citus.multi_shard_modify_mode = 'sequential'")


def status(conn: psycopg.Connection) -> list[MigrationState]:
    """Each incremental migration: applied, pending, or changed since it was applied."""
    recorded = _recorded(conn)
    states = []
    for f in sql_files("incremental"):
        if f.name not in recorded:
            states.append(MigrationState(f.name, "pending", None))
        else:
            checksum, at = recorded[f.name]
            states.append(MigrationState(f.name, "applied" if checksum == f.checksum else "changed", at))
    return states


def migrate(conn: psycopg.Connection, *, dim: int | None = None, dry_run: bool = False) -> MigrationReport:
    """Bring the database to the schema of this pyrecall; re-apply every function.

    >>> with connect() as conn:  # doctest: +SKIP
    ...     migrate(conn, dim=384).applied
    ['001-schema']
    """
    if not conn.autocommit:
        raise MigrationError("migrate needs a connection in autocommit mode")
    if dim is not None and not 1 <= dim <= 16000:
        raise MigrationError(f"embedding dimension must be between 1 and 16000, got {dim}")
    report = MigrationReport(dry_run=dry_run)
    incremental, idempotent = sql_files("incremental"), sql_files("idempotent")
    conn.execute("select pg_advisory_lock(%s)", [LOCK_KEY])
    try:
        cluster = citus_distributed(conn)
        if cluster == "worker":
            raise MigrationError(
                "this server is a worker of a Citus cluster: run pyrecall migrate on the "
                "coordinator (it reaches every node)")
        report.citus = cluster == "coordinator"
        recorded = _recorded(conn)
        _check_unchanged(incremental, recorded)
        current = installed_dim(conn)
        if current is not None and dim is not None and dim != current:
            raise DimensionMismatchError(
                f"this database stores {current}-dimensional embeddings; {dim} was asked for. "
                "To switch to a model of another dimension, re-embed everything with "
                "`pyrecall embed --reembed --model MODEL`")
        report.dim = current or dim or DEFAULT_DIM
        report.pending = [f.name for f in incremental if f.name not in recorded]
        report.functions = [f.name for f in idempotent] + ([CITUS_FILE] if report.citus else [])
        if dry_run:
            return report
        try:
            _bootstrap(conn)
        except psycopg.Error as exc:   # (on Citus: the schema's DDL reaches every node)
            raise MigrationError(f"migrate could not begin, nothing was changed: {_failed(exc)}") from exc
        for f in incremental:
            if f.name in recorded:
                continue
            with conn.transaction():
                conn.execute("select set_config('pyrecall.dim', %s, true)", [str(report.dim)])
                if report.citus:
                    _sequential(conn)
                try:
                    _execute(conn, f, report.citus)
                except psycopg.Error as exc:
                    raise MigrationError(f"migration {f.name} failed and was rolled back: "
                                         f"{_failed(exc)}") from exc
                conn.execute(
                    "insert into recall.migrations (name, checksum, version) values (%s, %s, %s)",
                    [f.name, f.checksum, __version__])
            report.applied.append(f.name)
        with conn.transaction():
            deferred = None
            if report.citus:
                _sequential(conn)
                # the rechunk a migration asked for (010-messages) runs after the cluster's
                # definitions: with the one-node plan settings of the chunker Citus cannot plan it
                deferred = conn.execute("delete from recall.config where key = 'rechunk_pending' "
                                        "returning value::text").fetchone()
            for f in idempotent:
                try:
                    _execute(conn, f, report.citus)
                except psycopg.Error as exc:
                    raise MigrationError(f"function file {f.name} failed and was rolled back: "
                                         f"{_failed(exc)}") from exc
            if report.citus:
                try:
                    for stmt in citus_statements():
                        conn.execute(stmt)
                    conn.execute("select recall._distribute_tables()")
                    conn.execute("select recall._distribute_code()")
                    if deferred is not None:
                        conn.execute("insert into recall.config (key, value) values "
                                     "('rechunk_pending', %s::jsonb)", [deferred[0]])
                        conn.execute("select recall._rechunk_pending()")
                except psycopg.Error as exc:
                    raise MigrationError(f"sql/{CITUS_FILE}.sql failed and the function files were "
                                         f"rolled back: {_failed(exc)}") from exc
        return report
    finally:
        conn.execute("select pg_advisory_unlock(%s)", [LOCK_KEY])
