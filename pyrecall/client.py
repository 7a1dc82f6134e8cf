"""The Python client: remember sessions, recall what matters. Each method is one SQL call;
ranking happens in the database (recall.hybrid_recall, recall.session_recall,
recall.auto_context), never here."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg import sql
from psycopg.pq import TransactionStatus

from . import _config, _db, _migrate
from ._embed import Embedder, get_embedder, vector_space
from ._errors import (
    ConfigError,
    EmbeddingError,
    MissingDependencyError,
    NotFoundError,
    one_line,
)
from ._text import clean_json, clean_text

# Writing (_ingest, the importers' records) and embedding (_worker) are imported by the methods
# that use them: a one-shot `pyrecall recall` does without (bench/LOG.md 2026-11-27, third session).
if TYPE_CHECKING:
    from . import _ingest
    from ._migrate import MigrationReport, MigrationState
    from ._summarize import SummaryReport
    from ._sync import FileResult, SyncReport
    from ._worker import EmbedReport
    from .importers._records import Message, Session

log = logging.getLogger("pyrecall")

COLUMNS = ("chunk_id", "session_id", "kind", "content", "created_at", "score", "similarity",
           "text_rank", "recency", "importance", "n_tokens", "cumulative_tokens", "metadata",
           "message_ids")


@dataclass(frozen=True)
class Memory:
    """One recalled chunk, with the components of its score."""

    chunk_id: int
    session_id: str
    kind: str
    content: str
    created_at: datetime
    score: float
    similarity: float | None
    text_rank: float
    recency: float
    importance: float
    n_tokens: int
    cumulative_tokens: int
    metadata: dict
    message_ids: list[int]
    section: str | None = None   # auto_context only: pinned | recent | related | failures
    memory_id: int | None = None      # a curated memory's id (= chunk_id); None for transcripts
    agent_id: str | None = None
    session_title: str | None = None
    role: str | None = None           # the roles of the chunk's messages: "user+assistant"
    memory_kind: str | None = None    # note | fact | decision | preference (memories only)
    session_rank: int | None = None   # session_recall only
    session_score: float | None = None


@dataclass(frozen=True)
class CuratedMemory:
    """One memory an agent chose to keep (``Recall.memories``)."""

    memory_id: int
    kind: str                     # note | fact | decision | preference
    content: str
    importance: float
    pinned: bool
    metadata: dict
    created_at: datetime
    valid_from: datetime
    valid_until: datetime | None  # None while current; set when a newer memory superseded it
    supersedes: int | None
    superseded_by: int | None
    embedded: bool
    n_tokens: int

    @property
    def project(self) -> str | None:
        return self.metadata.get("project")


@dataclass(frozen=True)
class SessionInfo:
    """A session's title, project, branch, start, turns and time span (``Recall.session_infos``)."""

    session_id: str
    title: str | None
    project: str | None
    branch: str | None
    started_at: datetime | None
    turns: int | None = None             # as `pyrecall sessions` counts them
    span_seconds: float | None = None    # first to last message


# turns: a conversation's turns start at the user's text messages (as the chunker pairs them);
# in a chat between people (chunking = window) every text message is one. span: first to last
# message, in seconds.
SESSION_INFOS_SQL = """
select s.session_id, s.title, s.project, s.branch, s.started_at, m.turns,
       extract(epoch from coalesce(m.last_at, s.ended_at, s.started_at)
                          - coalesce(m.first_at, s.started_at))::float8
from recall.sessions s cross join lateral (
  select count(*) filter (where x.kind = 'text' and (x.role = 'user'
                          or s.metadata->>'chunking' = 'window')) as turns,
         min(x.created_at) as first_at, max(x.created_at) as last_at
  from recall.messages x where x.agent_id = s.agent_id and x.session_id = s.session_id) m
where s.session_id = any(%s)
"""

SESSIONS_SQL = """
select s.session_id, s.title, s.project, s.branch, s.metadata->>'source_agent' as source_agent,
       s.started_at, s.ended_at,
       m.messages, m.turns,
       extract(epoch from coalesce(m.last_at, s.ended_at, s.started_at)
                          - coalesce(m.first_at, s.started_at))::float8 as span_seconds,
       (select count(*) from recall.chunks c
         where c.agent_id = s.agent_id and c.session_id = s.session_id) as chunks,
       (select count(*) from recall.chunks c
         where c.agent_id = s.agent_id and c.session_id = s.session_id and c.embedding is null) as pending,
       s.summary
from (select * from recall.sessions s
      where s.agent_id = %(agent)s
        and (%(project)s::text is null or s.project = %(project)s)
        and (%(source_agent)s::text is null or s.metadata->>'source_agent' = %(source_agent)s)
        and (%(since)s::timestamptz is null or coalesce(s.ended_at, s.started_at) >= %(since)s)
      order by coalesce(s.ended_at, s.started_at) desc, s.session_id
      limit %(limit)s) s
cross join lateral (
  select count(*) as messages,
         count(*) filter (where x.kind = 'text'
                            and (x.role = 'user' or s.metadata->>'chunking' = 'window')) as turns,
         min(x.created_at) as first_at, max(x.created_at) as last_at
  from recall.messages x
  where x.agent_id = s.agent_id and x.session_id = s.session_id) m
order by coalesce(s.ended_at, s.started_at) desc, s.session_id
"""

SHOW_SESSION_SQL = ("select session_id, agent_id, title, project, branch, started_at, ended_at, "
                    "summary, summary_model, metadata from recall.sessions where agent_id = %s and session_id = %s")
EXPAND_SQL = "select * from recall.expand(%s, %s, %s, %s)"
FORGET_SESSIONS_SQL = ("select * from recall.forget_sessions(%(agent_id)s, %(before)s, %(project)s, "
                       "%(keep_marked)s, %(dry_run)s)")
REDACT_STORED_SQL = "select * from recall.redact_stored(%s, %s)"
SIMILAR_MEMORIES_SQL = "select * from recall.similar_memories(%s, %s::vector, %s, %s, %s)"
# (the memory's own vector, read in the call's argument: no second embedding of its text)
SIMILAR_TO_MEMORY_SQL = ("select * from recall.similar_memories(%s, (select c.embedding from recall.chunks c "
                         "where c.agent_id = %s and c.chunk_id = %s), %s, %s, %s, exclude_id => %s)")
FORGOTTEN_SQL = ("select session_id, forgotten_at from recall.forgotten_sessions where agent_id = %s "
                 "order by forgotten_at desc, session_id")
UNFORGET_SQL = "select * from recall.unforget_sessions(%s, %s) order by session_id"
MESSAGE_KINDS = ("text", "thinking", "tool_call", "tool_result")
SHOW_MESSAGES_SQL = ("select seq, role, kind, created_at, content, metadata from recall.messages "
                     "where agent_id = %s and session_id = %s order by seq")


def _expand_args(agent_id: str, chunk_id: int, token_budget: int, kinds: Sequence[str]) -> list:
    if isinstance(kinds, str):
        kinds = [kinds]
    unknown = [k for k in kinds if k not in MESSAGE_KINDS]
    if unknown:
        raise ConfigError(f"unknown message kind(s) {', '.join(map(repr, unknown))}: "
                          f"choose among {', '.join(MESSAGE_KINDS)}")
    return [_text(agent_id), chunk_id, token_budget, list(kinds)]


def _forget_args(agent_id: str, before: datetime, project: str | None, keep_marked: bool,
                 dry_run: bool) -> dict:
    if not isinstance(before, datetime):
        raise ConfigError(f"before must be a datetime, got {type(before).__name__}")
    return {"agent_id": _text(agent_id), "before": before if before.tzinfo else before.replace(tzinfo=UTC),
            "project": _text(project), "keep_marked": bool(keep_marked), "dry_run": bool(dry_run)}


def _similar_call(agent_id: str, memory_id: int | None, content: str | None, vector, project: str | None,
                  min_similarity: float, k: int) -> tuple[str, list]:
    """recall.similar_memories of a stored memory (by its own vector) or of a text's vector."""
    if (memory_id is None) == (content is None):
        raise ConfigError("give memory_id or content")
    if memory_id is not None:
        return SIMILAR_TO_MEMORY_SQL, [_text(agent_id), _text(agent_id), memory_id, _text(project),
                                       min_similarity, k, memory_id]
    return SIMILAR_MEMORIES_SQL, [_text(agent_id), vector, _text(project), min_similarity, k]


def _unforget_ids(session_ids) -> list[str] | None:
    if session_ids is None:
        return None
    if isinstance(session_ids, str):
        raise ConfigError("session_ids is a list of session ids, not one string")
    return [_text(s) for s in session_ids]


STATUS_SQL = "select * from recall.agent_status(%s)"


def _dicts(cur) -> list[dict]:
    names = [d.name for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


@dataclass
class RecallResult:
    """What a recall returned, and how: ``source`` is "hybrid" (meaning + keywords) or
    "keyword" (no query embedding: the provider failed or none was configured)."""

    query: str | None
    memories: list[Memory]
    source: str
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __iter__(self):
        return iter(self.memories)

    def __len__(self):
        return len(self.memories)

    def __getitem__(self, i):
        return self.memories[i]

    @property
    def tokens(self) -> int:
        return sum(m.n_tokens for m in self.memories)


def _text(value):
    """Text as stored: without NUL or lone surrogates, as ingestion cleans it (else a value
    stored cleaned could not be asked for, and PostgreSQL refuses NUL outright)."""
    return clean_text(value) if isinstance(value, str) else value


def _args(agent_id: str, query: str | None, embedding, k: int, token_budget: int | None,
          exclude_session_id: str | None, filter: dict | None, kinds: Sequence[str] | None,
          since: datetime | None, until: datetime | None, options: dict) -> dict:
    args = {"agent_id": _text(agent_id), "query_text": _text(query), "query_embedding": embedding,
            "k": k, "token_budget": token_budget, "exclude_session_id": _text(exclude_session_id),
            # JSON text, cast in SQL: cleaned as metadata is, and too deep a filter is a ConfigError
            "filter": clean_json(filter) if filter is not None else None,
            "kinds": [_text(x) for x in kinds] if kinds is not None else None,
            "since": since, "until": until}
    allowed = {"min_similarity", "vector_weight", "text_weight", "recency_weight",
               "importance_weight", "half_life", "candidates", "as_of", "dedup_similarity",
               "turns_per_session"}
    unknown = set(options) - allowed
    if unknown:
        raise ConfigError(f"unknown recall option(s): {', '.join(sorted(unknown))}")
    if isinstance(options.get("half_life"), (int, float)):
        try:
            options["half_life"] = timedelta(days=options["half_life"])
        except (OverflowError, ValueError) as exc:
            raise ConfigError(f"half_life must be a finite number of days, got {options['half_life']}") from exc
    args.update(options)
    return {k: v for k, v in args.items() if v is not None or k in ("query_embedding", "query_text")}


# parameters sent with their SQL type: a Python int too large for int4 would otherwise go as
# int8 and find no function ("function ... does not exist") instead of "integer out of range"
CASTS = {"k": "int", "token_budget": "int", "n_sessions": "int", "candidates": "int",
         "filter": "jsonb", "turns_per_session": "int", "metadata": "jsonb", "memory_id": "bigint",
         "supersedes": "bigint", "max_rows": "int", "importance": "float8", "chunk_id": "bigint"}


@functools.lru_cache(maxsize=512)
def _statement(function: str, names: tuple[str, ...], scalar: bool) -> str:
    """``select * from recall.<function>(name => %(name)s, ...)``, each argument by name and
    cast to its CASTS type, built with psycopg.sql (a name is an identifier, never spliced
    text); rendered once per function and argument list."""
    args = sql.SQL(", ").join(
        sql.SQL("{} => {}{}").format(sql.Identifier(n), sql.Placeholder(n),
                                     sql.SQL("::" + CASTS[n]) if n in CASTS else sql.SQL(""))
        for n in names)
    head = sql.SQL("select {}({})" if scalar else "select * from {}({})")
    return head.format(sql.Identifier("recall", function), args).as_string(None)


def _call(function: str, args: dict) -> str:
    return _statement(function, tuple(args), False)


def _call_scalar(function: str, args: dict) -> str:
    return _statement(function, tuple(args), True)


def _auto_args(agent_id, project, branch, task, embedding, token_budget, exclude_session_id,
               all_projects, as_of) -> dict:
    args = {"agent_id": _text(agent_id), "project": _text(project), "branch": _text(branch),
            "task_text": _text(task), "task_embedding": embedding, "token_budget": token_budget,
            "exclude_session_id": _text(exclude_session_id)}
    if all_projects:
        args["all_projects"] = True
    if as_of is not None:
        args["as_of"] = as_of
    return args


# the keyword options of recall.session_recall (beside the parameters session_recall names)
SESSION_RECALL_OPTIONS = {"kinds", "since", "until", "half_life", "as_of", "candidates",
                          "summary_weight", "session_weight", "dedup_similarity", "vector_weight",
                          "text_weight", "recency_weight", "importance_weight", "turns_per_session"}


def _session_options(options: dict) -> dict:
    unknown = set(options) - SESSION_RECALL_OPTIONS
    if unknown:
        raise ConfigError(f"unknown session_recall option(s): {', '.join(sorted(unknown))}")
    return options


def _renamed(new_name: str, new, old_name: str, old):
    """The value of a parameter given by its name (SQL's) or by its former name."""
    if old is None:
        return new
    if new is not None and new != old:
        raise ConfigError(f"give {new_name} or {old_name} (its former name), not both")
    return old


STORED_MODEL_SQL = "select recall.embedding_model(%s)"
MODEL_CHECK_SECONDS = 10.0  # how often a connection re-reads an agent's stored model
# per connection: agent -> (model, when read)
_stored_models: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _model_cache(conn) -> dict:
    try:
        cache = _stored_models.setdefault(conn, {})
    except TypeError:          # an object that cannot be weakly referenced: no cache
        return {}
    if len(cache) > 10_000:    # a connection that served very many agents
        cache.clear()
    return cache


def _cached(cache: dict, agent_id) -> tuple[bool, str | None]:
    hit = cache.get(agent_id)
    if hit is not None and time.monotonic() - hit[1] <= MODEL_CHECK_SECONDS:
        return True, hit[0]
    return False, None


def _model_note(stored: str | None, model: str) -> str | None:
    """The note of a recall whose query would be embedded by another model than the agent's
    stored vectors (None when they match or nothing is embedded yet)."""
    if stored is None or vector_space(stored) == vector_space(model):
        return None
    return (f"the agent's memories were embedded with {stored}, the query would be with {model}: "
            f"keyword search only (use the model {stored}, e.g. PYRECALL_EMBED_MODEL={stored}, "
            f"or re-embed them: pyrecall embed --reembed)")


def _stored_model(conn: psycopg.Connection, agent_id: str) -> str | None:
    """recall.embedding_model(agent_id), read again at most every MODEL_CHECK_SECONDS per
    connection; None on a database not migrated to it yet (inside the caller's transaction,
    in a savepoint: a failure there costs it nothing)."""
    cache = _model_cache(conn)
    hit, model = _cached(cache, agent_id)
    if hit:
        return model
    intrans = conn.info.transaction_status == TransactionStatus.INTRANS
    try:
        if intrans:
            with conn.transaction():
                model = conn.execute(STORED_MODEL_SQL, [agent_id]).fetchone()[0]
        else:
            model = conn.execute(STORED_MODEL_SQL, [agent_id]).fetchone()[0]
    except psycopg.errors.UndefinedFunction:
        if not intrans and not conn.autocommit:
            conn.rollback()
        return None
    cache[agent_id] = (model, time.monotonic())
    return model


async def _stored_model_async(conn: psycopg.AsyncConnection, agent_id: str) -> str | None:
    """See _stored_model."""
    cache = _model_cache(conn)
    hit, model = _cached(cache, agent_id)
    if hit:
        return model
    intrans = conn.info.transaction_status == TransactionStatus.INTRANS
    try:
        if intrans:
            async with conn.transaction():
                model = (await (await conn.execute(STORED_MODEL_SQL, [agent_id])).fetchone())[0]
        else:
            model = (await (await conn.execute(STORED_MODEL_SQL, [agent_id])).fetchone())[0]
    except psycopg.errors.UndefinedFunction:
        if not intrans and not conn.autocommit:
            await conn.rollback()
        return None
    cache[agent_id] = (model, time.monotonic())
    return model


def _usable(vector) -> np.ndarray | None:
    """The query vector, or None when it holds NaN/infinity or only zeros (a provider fault:
    no cosine can be computed with it)."""
    v = np.asarray(vector, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return v if v.ndim == 1 and np.isfinite(v).all() and v.any() else None


_MEMORY_FIELDS = {f.name for f in fields(Memory)}


@dataclass
class _Fetched:
    """Rows already fetched (async), with their cursor's description, for _memories."""

    description: list
    rows: list

    def fetchall(self):
        return self.rows


def _memories(cur) -> list[Memory]:
    """The rows of a recall function as Memory objects, by column name (v3 and v4 shapes)."""
    names = [d.name for d in cur.description]
    keep = [(i, n) for i, n in enumerate(names) if n in _MEMORY_FIELDS]
    return [Memory(**{n: row[i] for i, n in keep}) for row in cur.fetchall()]


def _not_found(exc: psycopg.errors.NoDataFound) -> NotFoundError:
    return NotFoundError(exc.diag.message_primary or str(exc).strip())


def _remember_args(agent_id: str, content: str, kind: str, importance: float | None,
                   metadata: dict | None, project: str | None, supersedes: int | None,
                   pin: bool) -> dict:
    args = {"agent_id": _text(agent_id), "content": _text(content), "kind": _text(kind),
            "metadata": clean_json(metadata) if metadata is not None else None,
            "project": _text(project), "supersedes": supersedes, "pinned": bool(pin)}
    if importance is not None:
        args["importance"] = importance
    return {k: v for k, v in args.items() if v is not None}


IMPORTANCE_SQL = "select importance from recall.chunks where chunk_id = %s and agent_id = %s"

MEMORIES_SQL = ("select * from recall.memories(agent_id => %(agent_id)s, project => %(project)s, "
                "kind => %(kind)s, include_superseded => %(include_superseded)s, "
                "pinned_only => %(pinned_only)s, max_rows => %(max_rows)s::int)")


def _memories_args(agent_id, project, kind, limit, include_superseded, pinned_only) -> dict:
    return {"agent_id": _text(agent_id), "project": _text(project), "kind": _text(kind),
            "include_superseded": include_superseded, "pinned_only": pinned_only, "max_rows": limit}


# ---------------------------------------------------------------- the recall log (opt-in)

LOG_CHECK_SECONDS = 10.0   # how often a connection re-reads whether the log is on
LOG_ON_SQL = ("select coalesce((select value = 'true'::jsonb from recall.config "
              "where key = 'recall_log'), false)")
LOG_SQL = "select recall.log_recall(%s, %s, %s, %s, %s, %s, %s)"
# a statement of its own (autocommit): its commit does not wait for the WAL flush (a log row
# lost in a crash is acceptable; waiting for the flush would add a disk's latency to recalls)
LOG_SQL_ASYNC = ("select set_config('synchronous_commit', 'off', true), "
                 "recall.log_recall(%s, %s, %s, %s, %s, %s, %s)")


@dataclass
class _LogSwitch:
    """Whether recall.config says to log recalls, as one connection last read it."""

    on: bool = False
    read_at: float | None = None

    def due(self) -> bool:
        return self.read_at is None or time.monotonic() - self.read_at > LOG_CHECK_SECONDS

    def seen(self, on) -> None:
        self.on, self.read_at = bool(on), time.monotonic()


# per connection (a pooled connection serves many short-lived clients)
_switches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _switch(conn) -> _LogSwitch:
    try:
        return _switches.setdefault(conn, _LogSwitch())
    except TypeError:          # an object that cannot be weakly referenced: its own switch
        return _LogSwitch()


def _log_params(function: str, agent_id: str, ms: float, rows: list, query: str | None,
                source: str) -> list:
    return [_text(agent_id), function, ms, len(rows), _text(query), source,
            sum(m.n_tokens or 0 for m in rows)]


def _log_failed(exc: Exception) -> None:
    log.warning("recall log: row not written (%s)", one_line(exc))


# the first recall's warm-up asks for this word (see Recall._warm_backend): one lexeme no text
# holds, so that the text arm finds nothing at once
WARM_UP_TEXT = "zzpyrecallwarmupzz"


class Recall:
    """Memory across sessions, for one database.

    >>> r = Recall()                      # the embedded database (started if needed)
    >>> r.add_session("s1", "aria", project="api")
    >>> r.add_messages("s1", [{"role": "user", "content": "How do we deploy?"},
    ...                       {"role": "assistant", "content": "docker compose up -d"}])
    >>> r.embed_pending()
    >>> for m in r.recall("aria", "deployment", token_budget=500):
    ...     print(m.score, m.content)
    """

    _warmed = False  # the first recall warms the server process (see _warm_backend)

    def __init__(self, dsn: str | None = None, *, model: str | None = None,
                 embedder: Embedder | None = None, migrate: bool = True):
        self.dsn = _db.resolve_dsn(dsn)
        self.conn = _db.connect(self.dsn)
        if migrate and _migrate.installed_dim(self.conn) is None:
            _migrate.migrate(self.conn)
            register_vector(self.conn)
        self._embedder = embedder
        self._model = model or (embedder.model if embedder else _config.embed_model())

    # -- lifecycle
    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder(self._model)
        return self._embedder

    # -- install, upgrade
    def migrate(self, *, dim: int | None = None, dry_run: bool = False) -> MigrationReport:
        """Create or upgrade the recall schema and re-apply every function (safe to run
        again, and beside another migrator: they serialise on a lock). ``dim``: the embedding
        dimension, chosen at first install (default 384); ``dry_run``: only report what would
        be applied. Open the client with ``migrate=False`` to choose ``dim`` yourself.

        >>> Recall(migrate=False).migrate(dim=1536).applied  # doctest: +SKIP
        ['001-schema', ...]
        """
        report = _migrate.migrate(self.conn, dim=dim, dry_run=dry_run)
        if not dry_run:
            register_vector(self.conn)
        return report

    def migration_status(self) -> list[MigrationState]:
        """Each run-once migration with its state: applied, pending, or changed since it was
        applied (a changed one is refused by :meth:`migrate`)."""
        return _migrate.status(self.conn)


    # -- remember
    def add_session(self, session_id: str, agent_id: str, *, title: str | None = None,
                    project: str | None = None, branch: str | None = None,
                    started_at: datetime | None = None, metadata: dict | None = None) -> None:
        """Create a session (or update its title, project, branch, metadata)."""
        from . import _ingest
        from .importers._records import Session

        _ingest.ingest(self.conn, [Session(session_id, agent_id, title, project, branch,
                                           started_at, None, metadata or {}, [])],
                       agent_id=agent_id, keep_empty=True)

    def add_messages(self, session_id: str, messages: Iterable[Message | dict], *,
                     agent_id: str | None = None) -> _ingest.IngestReport:
        """Append messages (dicts with role, content, and optionally kind, created_at,
        importance, metadata, external_id) in one transaction, COPY-fast. A message already
        stored is skipped. The session is created if missing (``agent_id`` then required)."""
        from . import _ingest
        from .importers._records import Session

        msgs = [_ingest.as_message(m) for m in messages]
        if agent_id is None:
            row = self.conn.execute("select agent_id from recall.sessions where session_id = %s",
                                    [session_id]).fetchone()
            if row is None:
                raise ConfigError(f"session {session_id!r} does not exist: pass agent_id to create it")
            agent_id = row[0]
        return _ingest.ingest(self.conn, [Session(session_id, agent_id, messages=msgs)], agent_id=agent_id)

    def ingest(self, sessions: Iterable[Session], *, agent_id: str) -> _ingest.IngestReport:
        """Write parsed sessions (from pyrecall.importers) in one transaction."""
        from . import _ingest

        return _ingest.ingest(self.conn, sessions, agent_id=agent_id)

    def embed_pending(self, *, batch_size: int = 64, agent_id: str | None = None,
                      since: datetime | None = None, filter: dict | None = None,
                      reembed: bool = False,
                      progress: Callable[[int], None] | None = None, index: bool | str = True,
                      index_progress: Callable[[dict], None] | None = None) -> EmbedReport:
        """Embed every pending chunk with the configured model, in batches claimed FOR UPDATE
        SKIP LOCKED (safe beside a running worker). ``agent_id``, ``since``, ``filter`` (as
        recall's): only those chunks; ``reembed``: also the chunks another model embedded;
        ``progress(n)`` is told each batch's size. Each batch is one transaction: Ctrl-C
        raises ``_worker.EmbedInterrupted`` (a KeyboardInterrupt) whose ``report`` counts the
        batches committed; the batch in flight stays pending.

        Then, with ``index`` (and recall.config auto_vector_index not false), an agent
        embedded for that now holds agent_index_min_rows (2000) embedded chunks or more and has
        no vector index of its own gets one, built concurrently (``report.indexed``; a row of
        ``recall.index_info()`` each; ``index_progress(row)`` is told the build's progress
        every 2 s): without it that agent's every recall scans all its chunks. ``index='all'``:
        every agent (``agent_id``'s alone, if given) that needs one, embedded for or not (one
        scan of the table: what `pyrecall embed` does, for a database that grew before)."""
        from ._worker import Worker

        return Worker(self.conn, self.embedder, batch_size=batch_size, agent=agent_id, since=since,
                      reembed=reembed, filter=filter, progress=progress, index=index,
                      index_progress=index_progress).run()

    def run_worker(self, *, batch_size: int = 64, agent_id: str | None = None,
                   idle_timeout: float = 30.0, summarize_after: timedelta | None = timedelta(minutes=10),
                   summary_model: str | None = None,
                   on_report: Callable[[EmbedReport], None] | None = None,
                   on_summary: Callable[[SummaryReport], None] | None = None,
                   stop: Callable[[], bool] | None = None) -> None:
        """Embed continuously: what is pending, then wait for new chunks (LISTEN/NOTIFY, or
        ``idle_timeout`` seconds for retries whose backoff ran out), until ``stop()`` is true
        or KeyboardInterrupt. Between passes, sessions quiet for ``summarize_after`` whose
        summary is stale are summarized: extractively in the database, then by
        ``summary_model`` (a litellm chat model; default $PYRECALL_SUMMARY_MODEL, ``""`` for
        none); ``summarize_after=None``: no summaries. Runs on its own connections to this
        client's database and reconnects when the server goes away; several workers can run
        at once. ``on_report`` is told each pass that found work, ``on_summary`` each pass
        that summarized something.

        >>> r.run_worker(batch_size=128, on_report=print)  # doctest: +SKIP
        """
        from . import _summarize, _worker

        embedder = self.embedder
        summarizer = None if summarize_after is None else _summarize.QuietSummarizer(
            summarize_after, agent_id=agent_id, model=summary_model)

        def summarize(conn):
            report = summarizer.run(conn)
            if on_summary is not None and report.extractive:
                on_summary(report)

        _worker.listen_loop(lambda: _db.connect(self.dsn),
                            # each worker's first run (at start, after a reconnect) also
                            # indexes the agents that grew before it ran
                            lambda conn: _worker.Worker(conn, embedder, batch_size=batch_size, agent=agent_id,
                                                index="all"),
                            idle_timeout=idle_timeout, stop=stop or (lambda: False),
                            on_report=on_report, between=None if summarizer is None else summarize)

    def mixed_vector_spaces(self, agent_ids: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """Agents whose embedded chunks come from models of more than one vector space (a
        model changed without ``embed_pending(reembed=True)``), with their chunks per model:
        ``{"aria": {"local/all-MiniLM-L6-v2": 1200, "openai/text-embedding-3-small": 40}}``.
        A query of one ranks the other's vectors as noise (the query's model check looks at
        the agent's newest chunk only). ``agent_ids``: those agents (their chunks read through
        the agent's index), else every agent (one scan of the table)."""
        rows = self.conn.execute(
            "select agent_id, embedding_model, count(*) from recall.chunks"
            " where embedding is not null and embedding_model is not null"
            " and (%(all)s or agent_id = any(%(agents)s))"
            " group by 1, 2 order by 1, 3 desc, 2",
            {"all": agent_ids is None, "agents": list(agent_ids or ())}).fetchall()
        models: dict[str, dict[str, int]] = {}
        for agent, model, n in rows:
            models.setdefault(agent, {})[model] = n
        return {agent: counts for agent, counts in models.items()
                if len({vector_space(m) for m in counts}) > 1}

    def count_pending(self, *, agent_id: str | None = None, since: datetime | None = None,
                      filter: dict | None = None, reembed: bool = False) -> int:
        """How many chunks :meth:`embed_pending` would embed now, with the same arguments."""
        from . import _worker

        return _worker.count_pending(self.conn, agent=agent_id, since=since, filter=filter,
                                     model=self.embedder.model if reembed else None)

    def cleanup(self, *, agent_id: str | None = None) -> int:
        """Remove chunks whose messages are gone (left by hand-made deletes); returns how many."""
        from . import _worker

        return _worker.cleanup(self.conn, agent=agent_id)

    def dimension(self) -> int | None:
        """The embedding dimension this database stores (None before the first install)."""
        return _migrate.installed_dim(self.conn)

    def change_dimension(self, dim: int) -> None:
        """Re-type the embedding columns to ``dim``: every stored embedding is deleted and the
        vector indexes are dropped (re-create them with recall.create_vector_index)."""
        from . import _worker

        _worker.change_dimension(self.conn, dim)

    # -- recall
    def _query_embedding(self, query: str | None, agent_id: str, warm: tuple[str, dict] | None = None):
        """The query's vector, or None with the reason when the provider cannot give one or
        its model is not the one of the agent's stored vectors. ``warm``: the recall
        (function, args) the vector is for, whose statements the server prepares while the
        vector is made, once per client (see _warm_backend)."""
        if not query or not query.strip():
            return None, None
        note = _model_note(_stored_model(self.conn, _text(agent_id)), self._model)
        if note:
            log.warning("%s", note)
            return None, note
        warming = self._warm_backend(*warm) if warm else None
        try:
            vector = _usable(self.embedder.embed([_text(query)])[0])
        except (EmbeddingError, MissingDependencyError, ImportError, OSError) as exc:
            log.warning("query embedding failed, recalling by keywords only: %s", exc)
            return None, f"query embedding failed ({exc}); keyword search only"
        finally:
            if warming is not None:
                warming.join()
        if vector is None:
            log.warning("query embedding unusable (NaN, infinity or all zeros), recalling by keywords only")
            return None, "query embedding unusable (NaN, infinity or all zeros); keyword search only"
        return vector, None

    def recall(self, agent_id: str, query: str, *, k: int = 10, token_budget: int | None = None,
               exclude_session_id: str | None = None, filter: dict | None = None,
               kinds: Sequence[str] | None = None, since: datetime | None = None,
               until: datetime | None = None, **options) -> RecallResult:
        """The best chunks of the agent's past for the query (recall.hybrid_recall).

        Options: min_similarity, vector_weight, text_weight, recency_weight,
        importance_weight, half_life (days or timedelta), candidates, as_of, dedup_similarity.
        """
        args = _args(agent_id, query, None, k, token_budget, exclude_session_id, filter,
                     kinds, since, until, options)
        embedding, note = self._query_embedding(query, agent_id, ("hybrid_recall", args))
        args["query_embedding"] = embedding
        return self._logged("hybrid_recall", args, agent_id, query, embedding, note)

    def _warm_backend(self, function: str, args: dict):
        """The first recall on this connection: run it in a thread while the query is
        embedded, without a vector and for a word found nowhere (WARM_UP_TEXT: the same
        statements on no rows, ~30 ms however large the agent), rolled back. A new server
        process reads the tables' and functions' definitions and plans the statements at its
        first recall (~25 ms of a one-shot `pyrecall recall`, bench/LOG.md 2026-11-27, fifth
        session); here it does so while the model loads. The thread's errors are ignored: the
        recall itself reports them."""
        if self._warmed:
            return None
        self._warmed = True
        args = {**args, **{key: WARM_UP_TEXT for key in ("query_text", "task_text") if key in args}}

        def run():
            try:
                with self.conn.transaction(force_rollback=True):
                    self.conn.execute(_call(function, args), args).fetchall()
            except Exception:  # noqa: BLE001 - the recall that follows reports its own errors
                pass

        thread = threading.Thread(target=run, name="pyrecall-warm", daemon=True)
        thread.start()
        return thread

    def _logged(self, function: str, args: dict, agent_id: str, query: str | None, embedding,
                note: str | None) -> RecallResult:
        """Run a recall function; log it when the recall log is on (recall.log_recall: one
        statement on the same connection, in a savepoint inside a transaction). A log row that
        cannot be written (a standby, another agent's id) is a warning, never an error."""
        start = time.perf_counter()
        rows = _memories(self.conn.execute(_call(function, args), args))
        ms = (time.perf_counter() - start) * 1000
        source = "hybrid" if embedding is not None else "keyword"
        switch = _switch(self.conn)
        try:
            if switch.due():
                switch.seen(self.conn.execute(LOG_ON_SQL).fetchone()[0])
            if switch.on:
                params = _log_params(function, agent_id, ms, rows, query, source)
                if self.conn.info.transaction_status == TransactionStatus.INTRANS:
                    with self.conn.transaction():
                        self.conn.execute(LOG_SQL, params)
                else:
                    self.conn.execute(LOG_SQL_ASYNC if self.conn.autocommit else LOG_SQL, params)
        except psycopg.Error as exc:
            _log_failed(exc)
        return RecallResult(query, rows, source, note)

    def session_recall(self, agent_id: str, query: str, *, k: int = 10, n_sessions: int | None = None,
                       token_budget: int | None = None, exclude_session_id: str | None = None,
                       filter: dict | None = None, **options) -> RecallResult:
        """Two-stage recall (recall.session_recall): the best ``n_sessions`` sessions first,
        then the best chunks inside them. (``sessions=`` is the former name of ``n_sessions``.)"""
        n_sessions = _renamed("n_sessions", n_sessions, "sessions", options.pop("sessions", None))
        options = _session_options(options)
        args = _args(agent_id, query, None, k, token_budget, exclude_session_id, filter,
                     None, None, None, {})
        if n_sessions is not None:
            args["n_sessions"] = n_sessions
        args.update(options)
        embedding, note = self._query_embedding(query, agent_id, ("session_recall", args))
        args["query_embedding"] = embedding
        return self._logged("session_recall", args, agent_id, query, embedding, note)

    def auto_context(self, agent_id: str, *, project: str | None = None, branch: str | None = None,
                     task_text: str | None = None, token_budget: int = 4000,
                     exclude_session_id: str | None = None, all_projects: bool = False,
                     as_of: datetime | None = None, task: str | None = None) -> RecallResult:
        """The session-start context (recall.auto_context): pinned memories, recent work, what
        relates to ``task_text`` (in the project; agent-wide with ``all_projects``), failures to
        avoid. (``task=`` is the former name of ``task_text``.)"""
        task = _renamed("task_text", task_text, "task", task)
        args = _auto_args(agent_id, project, branch, task, None, token_budget,
                          exclude_session_id, all_projects, as_of)
        embedding, note = self._query_embedding(task, agent_id, ("auto_context", args))
        args["task_embedding"] = embedding
        return self._logged("auto_context", args, agent_id, task, embedding, note)

    # -- curated memories
    def _memory_embedding(self, content: str, agent_id: str):
        """The content's vector and model now, or (None, None): the worker embeds it later
        (also when this client's model is not the one of the agent's stored vectors)."""
        note = _model_note(_stored_model(self.conn, _text(agent_id)), self._model)
        if note:
            log.warning("memory not embedded now (the worker will): %s", note)
            return None, None
        try:
            vector = _usable(self.embedder.embed([_text(content)])[0])
        except (EmbeddingError, ImportError, OSError, ConfigError) as exc:
            log.warning("memory not embedded now (the worker will): %s", exc)
            return None, None
        return (vector, self.embedder.model) if vector is not None else (None, None)

    def remember(self, agent_id: str, content: str, *, kind: str = "note",
                 importance: float | None = None, metadata: dict | None = None,
                 project: str | None = None, supersedes: int | None = None, pin: bool = False,
                 embed: bool = True) -> int:
        """Store a curated memory (recall.remember) and return its id. ``supersedes``: the id
        of the memory it replaces (kept, valid until now). Findable by keywords at once and,
        with ``embed`` (the configured model, now; else the worker, later), by meaning. The same
        memory held already (same kind, project and text, still true) is not stored twice: its
        id is returned.

        >>> mid = r.remember("aria", "Deploys go through ArgoCD, not kubectl", kind="fact")
        >>> r.remember("aria", "Deploys go through Flux", kind="fact", supersedes=mid)
        """
        args = _remember_args(agent_id, content, kind, importance, metadata, project, supersedes, pin)
        if embed and content and content.strip():
            vector, model = self._memory_embedding(content, agent_id)
            if vector is not None:
                args.update(embedding=vector, embedding_model=model)
        try:
            return self.conn.execute(_call_scalar("remember", args), args).fetchone()[0]
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None

    def similar_memories(self, agent_id: str, *, memory_id: int | None = None, content: str | None = None,
                         project: str | None = None, min_similarity: float = 0.6, k: int = 3) -> list[dict]:
        """The agent's current memories like one of its memories (``memory_id``: by its stored
        vector, itself left out) or like ``content`` (embedded now), most similar first
        (recall.similar_memories): memory_id, memory_kind, content, similarity, pinned.
        What an agent checks after remembering, to see what it may repeat or correct. Empty
        when there is no vector to compare (a memory not embedded yet)."""
        vector = None if content is None else self._memory_embedding(content, agent_id)[0]
        return _dicts(self.conn.execute(*_similar_call(agent_id, memory_id, content, vector, project,
                                                        min_similarity, k)))

    def forget_memory(self, agent_id: str, memory_id: int) -> int:
        """Delete one memory of the agent (recall.forget_memory); NotFoundError when it is
        unknown or another agent's."""
        args = {"agent_id": _text(agent_id), "memory_id": memory_id}
        try:
            return self.conn.execute(_call_scalar("forget_memory", args), args).fetchone()[0]
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None

    def set_importance(self, agent_id: str, chunk_id: int, importance: float | None) -> float:
        """Set the importance (0..1) of one of the agent's chunks (recall.set_importance): it
        weighs in every later recall and is kept when the chunk is re-derived; None returns it
        to the value derived from its messages. Returns the previous importance; NotFoundError
        when the agent has no such chunk."""
        args = {"agent_id": _text(agent_id), "chunk_id": chunk_id, "importance": importance}
        try:
            return self.conn.execute(_call_scalar("set_importance", args), args).fetchone()[0]
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None

    def importance(self, agent_id: str, chunk_id: int) -> float | None:
        """The importance (0..1) of one of the agent's chunks now; None when it has no such chunk."""
        row = self.conn.execute(IMPORTANCE_SQL, [chunk_id, _text(agent_id)]).fetchone()
        return row[0] if row else None

    def expand(self, agent_id: str, chunk_id: int, *, token_budget: int = 1000,
               kinds: Sequence[str] = ("text",)) -> list[dict]:
        """What was said around one of the agent's chunks (a ``chunk_id`` recall returned),
        within ``token_budget`` (recall.expand): the chunk's messages, then its session's other
        messages of ``kinds`` (text, thinking, tool_call, tool_result), nearest first, one
        before and one after in turn. Rows in order, each a dict: session_id, seq, message_id,
        role, kind, speaker, content, created_at, n_tokens, cumulative_tokens, in_chunk.
        NotFoundError when the agent has no such chunk.

        >>> [m["speaker"] for m in r.expand("aria", 15, token_budget=300)]  # doctest: +SKIP
        ['User', 'Assistant', 'User', 'Assistant']
        """
        try:
            return _dicts(self.conn.execute(EXPAND_SQL, _expand_args(agent_id, chunk_id, token_budget, kinds)))
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None

    def pin_memory(self, agent_id: str, memory_id: int, pinned: bool = True) -> None:
        """Pin (or, with ``pinned=False``, unpin) a memory: pinned ones open auto_context."""
        args = {"agent_id": _text(agent_id), "memory_id": memory_id, "pinned": bool(pinned)}
        try:
            self.conn.execute(_call_scalar("pin_memory", args), args)
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None

    def memories(self, agent_id: str, *, project: str | None = None, kind: str | None = None,
                 limit: int = 50, include_superseded: bool = False,
                 pinned_only: bool = False) -> list[CuratedMemory]:
        """The agent's memories, newest first (recall.memories); with ``project``, those of
        the project and of no project."""
        args = _memories_args(agent_id, project, kind, limit, include_superseded, pinned_only)
        return [CuratedMemory(*row) for row in self.conn.execute(MEMORIES_SQL, args).fetchall()]

    def status(self, agent_id: str) -> dict:
        """What the agent's memory holds (recall.agent_status): sessions, messages, chunks
        embedded and pending, memories, the span of its sessions, its sources and models, the
        files imported for it, and how recall finds its nearest chunks.

        >>> Recall(dsn).status("claude-code")["pending"]                   # doctest: +SKIP
        0
        """
        return _dicts(self.conn.execute(STATUS_SQL, [_text(agent_id)]))[0]

    def export(self, agent_id: str, out: str | os.PathLike | TextIO, *, vectors: bool = False) -> dict:
        """Write all of the agent's memory that cannot be derived again to ``out`` (a path, or
        a text stream), one JSON object a line (recall.export_agent): a header, its messages
        with their sessions, its curated memories, the importance set by hand and the session
        summaries a model wrote. A path is
        written whole or not at all (a file beside it, renamed over it at the end). Returns the
        header (the counts). ``vectors``: also each chunk's and message's vector and token
        counts, so that the destination (with the same model) need not embed again.
        :meth:`import_` reads such a file back, here or elsewhere.
        NotFoundError, nothing written, when the agent has no session and no memory.

        >>> r.export("aria", "aria.jsonl")["messages"]  # doctest: +SKIP
        1204
        """
        lines = self._export_lines(agent_id, vectors)
        header = next(lines)
        if not (header["sessions"] or header["memories"]):
            lines.close()
            raise NotFoundError(f"agent {agent_id!r} has no sessions or memories in this database: "
                                "nothing exported")
        if not isinstance(out, str | os.PathLike):
            for line in itertools.chain([header], lines):
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
            return header
        path = Path(out)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                for line in itertools.chain([header], lines):
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
            lines.close()
        return header

    def _export_lines(self, agent_id: str, vectors: bool = False) -> Iterator[dict]:
        """recall.export_agent's lines, read 2,000 at a time (a named cursor, in a transaction
        of its own: one snapshot of the agent)."""
        with self.conn.transaction(), self.conn.cursor(name="pyrecall_export") as cur:
            cur.itersize = 2000
            cur.execute("select line from recall.export_agent(%s, %s) as line", [agent_id, vectors])
            yield from (line for (line,) in cur)

    # -- import transcripts, summarize
    def import_(self, paths: Iterable[str | os.PathLike], *, agent_id: str, full: bool = False,
                progress: Callable[[Path, FileResult], None] | None = None,
                on_start: Callable[[int], None] | None = None) -> SyncReport:
        """Import transcript files, and every .jsonl/.json file under the folders named (the
        format of each is detected); the folders are remembered for :meth:`sync`. Unchanged
        files are skipped; ``full`` re-reads every file from its start. ``on_start(n)`` is told
        how many files there are, ``progress(path, result)`` is called after each. (``import``
        is a Python keyword, hence the underscore.)

        >>> r.import_(["~/.claude/projects"], agent_id="aria").inserted  # doctest: +SKIP
        101
        """
        from . import _sync

        return _sync.index(self.conn, paths, agent_id=agent_id, full=full, progress=progress,
                           on_start=on_start)

    def sync(self, paths: Iterable[str | os.PathLike] | None = None, *, agent_id: str,
             progress: Callable[[Path, FileResult], None] | None = None,
             on_start: Callable[[int], None] | None = None) -> SyncReport:
        """Import only what changed since the last run: new files, appended lines, rewritten
        files. Without ``paths``: what the agent imported before, else where Claude Code, Codex
        CLI and Gemini CLI keep their sessions."""
        from . import _sync

        return _sync.sync(self.conn, paths, agent_id=agent_id, progress=progress,
                          on_start=on_start)

    def summarize(self, *, agent_id: str | None = None, model: str | None = None,
                  only_stale: bool = True, max_chars: int = 1200) -> SummaryReport:
        """Summarize the sessions changed since their last summary (every one with
        ``only_stale=False``; every agent's without ``agent_id``): extractively in the
        database (recall.summarize_sessions), then, with ``model``, written by that chat model."""
        from . import _summarize

        return _summarize.summarize(self.conn, agent_id=agent_id, model=model,
                                    only_stale=only_stale, max_chars=max_chars)

    # -- sessions
    def sessions(self, agent_id: str, *, project: str | None = None,
                 since: datetime | None = None, limit: int = 50,
                 source_agent: str | None = None) -> list[dict]:
        """The agent's sessions, newest first, with their message, turn, chunk and pending
        counts and their time span (first to last message, in seconds); ``source_agent``: only
        the sessions that coding agent wrote (claude-code, codex, gemini)."""
        return _dicts(self.conn.execute(SESSIONS_SQL, {
            "agent": agent_id, "project": project, "since": since, "limit": limit,
            "source_agent": source_agent}))

    def resolve_session(self, agent_id: str, session_id: str) -> str:
        """The full id of the agent's session named by its id or a unique prefix of it (at
        least 4 characters, as ``pyrecall sessions`` shows them); NotFoundError otherwise."""
        exact = self.conn.execute("select 1 from recall.sessions where session_id = %s and agent_id = %s",
                                  [session_id, agent_id]).fetchone()
        if exact:
            return session_id
        like = session_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self.conn.execute("select session_id from recall.sessions where agent_id = %s "
                                 "and session_id like %s order by session_id limit 3",
                                 [agent_id, like]).fetchall()
        if len(rows) == 1 and len(session_id) >= 4:
            return rows[0][0]
        if len(rows) > 1:
            raise NotFoundError(f"session {session_id!r} is ambiguous for agent {agent_id!r}: "
                                f"{', '.join(r[0] for r in rows[:2])}, ...")
        raise NotFoundError(f"no session {session_id!r} for agent {agent_id!r}")

    def show(self, agent_id: str, session_id: str) -> dict:
        """One session (by id or unique prefix) with its messages in order, under
        ``"messages"``; NotFoundError when the agent has no such session."""
        session_id = self.resolve_session(agent_id, session_id)
        session = _dicts(self.conn.execute(SHOW_SESSION_SQL, [agent_id, session_id]))[0]
        return {**session, "messages": _dicts(self.conn.execute(SHOW_MESSAGES_SQL, [agent_id, session_id]))}

    def session_infos(self, session_ids: Iterable[str]) -> dict[str, SessionInfo]:
        """Title, project, branch, start, turns and time span of the sessions named (the
        labels of recall results)."""
        ids = sorted(set(session_ids))
        if not ids:
            return {}
        return {r[0]: SessionInfo(*r) for r in self.conn.execute(SESSION_INFOS_SQL, [ids]).fetchall()}

    # -- forget
    def forget_sessions(self, agent_id: str, before: datetime, *, project: str | None = None,
                        keep_marked: bool = True, dry_run: bool = False) -> list[dict]:
        """A retention policy (recall.forget_sessions): delete the agent's sessions last active
        before ``before`` with their messages, chunks and vectors (its curated memories stay;
        with ``project``, only that project's; ``keep_marked`` keeps a session holding a chunk
        whose importance was set by hand); returns them (session_id, title, started_at,
        ended_at, messages, chunks), oldest first. ``dry_run``: returns them, deletes nothing.

        >>> r.forget_sessions("aria", datetime.now(UTC) - timedelta(days=180))  # doctest: +SKIP
        """
        return _dicts(self.conn.execute(FORGET_SESSIONS_SQL, _forget_args(agent_id, before, project,
                                                                          keep_marked, dry_run)))

    def redact(self, text: str) -> str:
        """The text as memory would store it: every credential a pattern of
        recall.secret_patterns finds replaced (``[REDACTED:api_key]``; recall.redact).

        >>> r.redact("export OPENAI_API_KEY=sk-proj-...")  # doctest: +SKIP
        'export OPENAI_API_KEY=[REDACTED]'
        """
        return self.conn.execute("select recall.redact(%s)", [_text(text)]).fetchone()[0]

    def redact_stored(self, agent_id: str, *, dry_run: bool = False) -> list[dict]:
        """Redact what the agent stored before a pattern existed (recall.redact_stored): one dict
        per pattern that matched (pattern, messages, sessions, memories, queries: the rows that
        held it; session_ids: the sessions of those messages). The chunks of changed messages
        are derived again and wait for ``embed_pending``. ``dry_run``: count only."""
        with self.conn.transaction():
            rows = _dicts(self.conn.execute(REDACT_STORED_SQL, [_text(agent_id), bool(dry_run)]))
            changed = sorted({s for row in rows for s in row["session_ids"]})
            if changed and not dry_run and _db.distributed(self.conn):
                # a Citus cluster chunks from here (sql/citus/distribute.sql)
                self.conn.execute("select recall.chunk_sessions(%s, %s)", [[_text(agent_id)] * len(changed), changed])
        return rows

    def forget(self, *, agent_id: str, session_id: str | None = None) -> int:
        """Delete a session, or everything of an agent, with its messages and chunks. A session
        deleted is recorded as forgotten: a transcript read again does not bring it back
        (:meth:`unforget_sessions`). Everything of an agent is a new start: what sync remembers
        of files and which sessions were forgotten go too, so its transcripts are read again."""
        if session_id is not None:
            cur = self.conn.execute("delete from recall.sessions where session_id = %s and agent_id = %s",
                                    [session_id, agent_id])
        else:
            with self.conn.transaction():
                self.conn.execute("delete from recall.source_files where agent_id = %s", [agent_id])
                cur = self.conn.execute("delete from recall.sessions where agent_id = %s", [agent_id])
                self.conn.execute("delete from recall.forgotten_sessions where agent_id = %s", [agent_id])
        return cur.rowcount

    def forgotten_sessions(self, agent_id: str) -> list[dict]:
        """The agent's sessions deleted (session_id, forgotten_at), newest first: a transcript
        that holds one does not bring it back (recall.forgotten_sessions)."""
        return _dicts(self.conn.execute(FORGOTTEN_SQL, [_text(agent_id)]))

    def unforget_sessions(self, agent_id: str, session_ids: Sequence[str] | None = None) -> list[dict]:
        """Let forgotten sessions be stored again (all the agent's when ``session_ids`` is None);
        returns those let in. Their transcripts are stored when next imported
        (recall.unforget_sessions)."""
        return _dicts(self.conn.execute(UNFORGET_SQL, [_text(agent_id), _unforget_ids(session_ids)]))


class AsyncRecall:
    """The asyncio twin of :class:`Recall`.

    >>> async with await AsyncRecall.connect() as r:
    ...     result = await r.recall("aria", "deployment")
    """

    def __init__(self, conn: psycopg.AsyncConnection, *, model: str | None = None,
                 embedder: Embedder | None = None):
        self.conn = conn
        self._embedder = embedder
        self._model = model or (embedder.model if embedder else _config.embed_model())
        self._twin: Recall | None = None
        self._warmed = False  # the first recall warms the server process (see _warm_backend)

    @classmethod
    async def connect(cls, dsn: str | None = None, **kwargs) -> AsyncRecall:
        url = _db.resolve_dsn(dsn)
        try:
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        except psycopg.OperationalError as exc:
            again = _db.recovered_url(url)  # the embedded server, its database dropped by hand
            if again is None:
                raise _db.cannot_connect(exc) from exc
            try:
                conn = await psycopg.AsyncConnection.connect(again, autocommit=True)
            except psycopg.OperationalError as exc2:
                raise _db.cannot_connect(exc2) from exc2
        await register_vector_async(conn)
        return cls(conn, **kwargs)

    async def close(self) -> None:
        if self._twin is not None:
            await asyncio.to_thread(self._twin.close)
        await self.conn.close()

    async def _in_thread(self, method: str, *args, **kwargs):
        """Run Recall.<method> in a worker thread on a second, synchronous connection to the
        same database (opened at the first such call): the bulk paths (COPY ingestion, the
        embedding worker) are written once, for psycopg's synchronous connection."""
        if self._twin is None:
            info = self.conn.info
            dsn = psycopg.conninfo.make_conninfo(info.dsn, **({"password": info.password} if info.password else {}))
            self._twin = await asyncio.to_thread(Recall, dsn, model=self._model, embedder=self._embedder,
                                                 migrate=False)
        return await asyncio.to_thread(getattr(self._twin, method), *args, **kwargs)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder(self._model)
        return self._embedder

    async def _query_embedding(self, query: str | None, agent_id: str,
                               warm: tuple[str, dict] | None = None):
        """See :meth:`Recall._query_embedding`: the warm-up runs on this connection while the
        query is embedded (aembed leaves the event loop free)."""
        if not query or not query.strip():
            return None, None
        note = _model_note(await _stored_model_async(self.conn, _text(agent_id)), self._model)
        if note:
            log.warning("%s", note)
            return None, note
        warming = self._warm_backend(*warm) if warm else None
        try:
            vector = _usable((await self.embedder.aembed([_text(query)]))[0])
        except (EmbeddingError, MissingDependencyError, ImportError, OSError) as exc:
            log.warning("query embedding failed, recalling by keywords only: %s", exc)
            return None, f"query embedding failed ({exc}); keyword search only"
        finally:
            if warming is not None:
                await warming
        if vector is None:
            log.warning("query embedding unusable (NaN, infinity or all zeros), recalling by keywords only")
            return None, "query embedding unusable (NaN, infinity or all zeros); keyword search only"
        return vector, None

    # -- install, upgrade (on a worker thread, on the synchronous twin's connection)
    async def migrate(self, *, dim: int | None = None, dry_run: bool = False) -> MigrationReport:
        """See :meth:`Recall.migrate`."""
        return await self._in_thread("migrate", dim=dim, dry_run=dry_run)

    async def migration_status(self) -> list[MigrationState]:
        """See :meth:`Recall.migration_status`."""
        return await self._in_thread("migration_status")


    # -- remember
    async def add_session(self, session_id: str, agent_id: str, *, title: str | None = None,
                          project: str | None = None, branch: str | None = None,
                          started_at: datetime | None = None, metadata: dict | None = None) -> None:
        """See :meth:`Recall.add_session`."""
        await self._in_thread("add_session", session_id, agent_id, title=title, project=project,
                              branch=branch, started_at=started_at, metadata=metadata)

    async def add_messages(self, session_id: str, messages: Iterable[Message | dict], *,
                           agent_id: str | None = None) -> _ingest.IngestReport:
        """See :meth:`Recall.add_messages` (COPY-fast, on a worker thread)."""
        return await self._in_thread("add_messages", session_id, list(messages), agent_id=agent_id)

    async def ingest(self, sessions: Iterable[Session], *, agent_id: str) -> _ingest.IngestReport:
        """See :meth:`Recall.ingest`."""
        return await self._in_thread("ingest", list(sessions), agent_id=agent_id)

    async def embed_pending(self, *, batch_size: int = 64, agent_id: str | None = None,
                            since: datetime | None = None, filter: dict | None = None,
                            reembed: bool = False,
                            progress: Callable[[int], None] | None = None, index: bool | str = True,
                            index_progress: Callable[[dict], None] | None = None) -> EmbedReport:
        """See :meth:`Recall.embed_pending` (the embedding worker, on a worker thread)."""
        return await self._in_thread("embed_pending", batch_size=batch_size, agent_id=agent_id,
                                     since=since, filter=filter, reembed=reembed, progress=progress,
                                     index=index, index_progress=index_progress)

    async def run_worker(self, *, batch_size: int = 64, agent_id: str | None = None,
                         idle_timeout: float = 30.0,
                         summarize_after: timedelta | None = timedelta(minutes=10),
                         summary_model: str | None = None,
                         on_report: Callable[[EmbedReport], None] | None = None,
                         on_summary: Callable[[SummaryReport], None] | None = None,
                         stop: Callable[[], bool] | None = None) -> None:
        """See :meth:`Recall.run_worker` (on a worker thread: cancelling the awaiting task
        does not stop it, ``stop`` does; the callbacks run on that thread)."""
        await self._in_thread("run_worker", batch_size=batch_size, agent_id=agent_id,
                              idle_timeout=idle_timeout, summarize_after=summarize_after,
                              summary_model=summary_model, on_report=on_report,
                              on_summary=on_summary, stop=stop)

    async def count_pending(self, *, agent_id: str | None = None, since: datetime | None = None,
                            filter: dict | None = None, reembed: bool = False) -> int:
        """See :meth:`Recall.count_pending`."""
        return await self._in_thread("count_pending", agent_id=agent_id, since=since, filter=filter,
                                     reembed=reembed)

    async def mixed_vector_spaces(self, agent_ids: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """See :meth:`Recall.mixed_vector_spaces`."""
        return await self._in_thread("mixed_vector_spaces", None if agent_ids is None else list(agent_ids))

    async def cleanup(self, *, agent_id: str | None = None) -> int:
        """See :meth:`Recall.cleanup`."""
        return await self._in_thread("cleanup", agent_id=agent_id)

    async def dimension(self) -> int | None:
        """See :meth:`Recall.dimension`."""
        return await self._in_thread("dimension")

    async def change_dimension(self, dim: int) -> None:
        """See :meth:`Recall.change_dimension`."""
        await self._in_thread("change_dimension", dim)

    async def recall(self, agent_id: str, query: str, *, k: int = 10, token_budget: int | None = None,
                     exclude_session_id: str | None = None, filter: dict | None = None,
                     kinds: Sequence[str] | None = None, since: datetime | None = None,
                     until: datetime | None = None, **options) -> RecallResult:
        """See :meth:`Recall.recall`."""
        args = _args(agent_id, query, None, k, token_budget, exclude_session_id, filter,
                     kinds, since, until, options)
        embedding, note = await self._query_embedding(query, agent_id, ("hybrid_recall", args))
        args["query_embedding"] = embedding
        return await self._logged("hybrid_recall", args, agent_id, query, embedding, note)

    def _warm_backend(self, function: str, args: dict) -> asyncio.Task | None:
        """See :meth:`Recall._warm_backend`: the first recall by keywords for a word found
        nowhere, rolled back, as a task on this connection, once per client."""
        if self._warmed:
            return None
        self._warmed = True
        args = {**args, **{key: WARM_UP_TEXT for key in ("query_text", "task_text") if key in args}}

        async def run():
            try:
                async with self.conn.transaction(force_rollback=True):
                    await (await self.conn.execute(_call(function, args), args)).fetchall()
            except Exception:  # noqa: BLE001 - the recall that follows reports its own errors
                pass

        return asyncio.ensure_future(run())

    async def _logged(self, function: str, args: dict, agent_id: str, query: str | None,
                      embedding, note: str | None) -> RecallResult:
        """See :meth:`Recall._logged`."""
        start = time.perf_counter()
        cur = await self.conn.execute(_call(function, args), args)
        rows = _memories(_Fetched(cur.description, await cur.fetchall()))
        ms = (time.perf_counter() - start) * 1000
        source = "hybrid" if embedding is not None else "keyword"
        switch = _switch(self.conn)
        try:
            if switch.due():
                switch.seen((await (await self.conn.execute(LOG_ON_SQL)).fetchone())[0])
            if switch.on:
                params = _log_params(function, agent_id, ms, rows, query, source)
                if self.conn.info.transaction_status == TransactionStatus.INTRANS:
                    async with self.conn.transaction():
                        await self.conn.execute(LOG_SQL, params)
                else:
                    await self.conn.execute(LOG_SQL_ASYNC if self.conn.autocommit else LOG_SQL, params)
        except psycopg.Error as exc:
            _log_failed(exc)
        return RecallResult(query, rows, source, note)

    async def session_recall(self, agent_id: str, query: str, *, k: int = 10,
                             n_sessions: int | None = None, token_budget: int | None = None,
                             exclude_session_id: str | None = None, filter: dict | None = None,
                             **options) -> RecallResult:
        """See :meth:`Recall.session_recall`."""
        n_sessions = _renamed("n_sessions", n_sessions, "sessions", options.pop("sessions", None))
        options = _session_options(options)
        args = _args(agent_id, query, None, k, token_budget, exclude_session_id, filter,
                     None, None, None, {})
        if n_sessions is not None:
            args["n_sessions"] = n_sessions
        args.update(options)
        embedding, note = await self._query_embedding(query, agent_id, ("session_recall", args))
        args["query_embedding"] = embedding
        return await self._logged("session_recall", args, agent_id, query, embedding, note)

    async def auto_context(self, agent_id: str, *, project: str | None = None,
                           branch: str | None = None, task_text: str | None = None,
                           token_budget: int = 4000, exclude_session_id: str | None = None,
                           all_projects: bool = False, as_of: datetime | None = None,
                           task: str | None = None) -> RecallResult:
        """See :meth:`Recall.auto_context`."""
        task = _renamed("task_text", task_text, "task", task)
        args = _auto_args(agent_id, project, branch, task, None, token_budget,
                          exclude_session_id, all_projects, as_of)
        embedding, note = await self._query_embedding(task, agent_id, ("auto_context", args))
        args["task_embedding"] = embedding
        return await self._logged("auto_context", args, agent_id, task, embedding, note)

    # -- curated memories
    async def remember(self, agent_id: str, content: str, *, kind: str = "note",
                       importance: float | None = None, metadata: dict | None = None,
                       project: str | None = None, supersedes: int | None = None,
                       pin: bool = False, embed: bool = True) -> int:
        """See :meth:`Recall.remember`."""
        args = _remember_args(agent_id, content, kind, importance, metadata, project, supersedes, pin)
        note = None
        if embed and content and content.strip():
            note = _model_note(await _stored_model_async(self.conn, _text(agent_id)), self._model)
            if note:
                log.warning("memory not embedded now (the worker will): %s", note)
        if embed and content and content.strip() and not note:
            try:
                vector = _usable((await self.embedder.aembed([_text(content)]))[0])
            except (EmbeddingError, ImportError, OSError, ConfigError) as exc:
                log.warning("memory not embedded now (the worker will): %s", exc)
                vector = None
            if vector is not None:
                args.update(embedding=vector, embedding_model=self.embedder.model)
        try:
            cur = await self.conn.execute(_call_scalar("remember", args), args)
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None
        return (await cur.fetchone())[0]

    async def similar_memories(self, agent_id: str, *, memory_id: int | None = None, content: str | None = None,
                               project: str | None = None, min_similarity: float = 0.6, k: int = 3) -> list[dict]:
        """See :meth:`Recall.similar_memories`."""
        vector = None if content is None else _usable((await self.embedder.aembed([_text(content)]))[0])
        description, rows = await self._fetch(*_similar_call(agent_id, memory_id, content, vector, project,
                                                              min_similarity, k))
        return _dicts(_Fetched(description, rows))

    async def forget_memory(self, agent_id: str, memory_id: int) -> int:
        """See :meth:`Recall.forget_memory`."""
        args = {"agent_id": _text(agent_id), "memory_id": memory_id}
        try:
            cur = await self.conn.execute(_call_scalar("forget_memory", args), args)
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None
        return (await cur.fetchone())[0]

    async def set_importance(self, agent_id: str, chunk_id: int, importance: float | None) -> float:
        """See :meth:`Recall.set_importance`."""
        args = {"agent_id": _text(agent_id), "chunk_id": chunk_id, "importance": importance}
        try:
            cur = await self.conn.execute(_call_scalar("set_importance", args), args)
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None
        return (await cur.fetchone())[0]

    async def importance(self, agent_id: str, chunk_id: int) -> float | None:
        """See :meth:`Recall.importance`."""
        _, rows = await self._fetch(IMPORTANCE_SQL, [chunk_id, _text(agent_id)])
        return rows[0][0] if rows else None

    async def expand(self, agent_id: str, chunk_id: int, *, token_budget: int = 1000,
                     kinds: Sequence[str] = ("text",)) -> list[dict]:
        """See :meth:`Recall.expand`."""
        try:
            description, rows = await self._fetch(EXPAND_SQL, _expand_args(agent_id, chunk_id, token_budget, kinds))
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None
        return _dicts(_Fetched(description, rows))

    async def pin_memory(self, agent_id: str, memory_id: int, pinned: bool = True) -> None:
        """See :meth:`Recall.pin_memory`."""
        args = {"agent_id": _text(agent_id), "memory_id": memory_id, "pinned": bool(pinned)}
        try:
            await self.conn.execute(_call_scalar("pin_memory", args), args)
        except psycopg.errors.NoDataFound as exc:
            raise _not_found(exc) from None

    async def status(self, agent_id: str) -> dict:
        """See :meth:`Recall.status`."""
        cur = await self.conn.execute(STATUS_SQL, [_text(agent_id)])
        names = [d.name for d in cur.description]
        return dict(zip(names, await cur.fetchone(), strict=True))

    async def memories(self, agent_id: str, *, project: str | None = None, kind: str | None = None,
                       limit: int = 50, include_superseded: bool = False,
                       pinned_only: bool = False) -> list[CuratedMemory]:
        """See :meth:`Recall.memories`."""
        args = _memories_args(agent_id, project, kind, limit, include_superseded, pinned_only)
        cur = await self.conn.execute(MEMORIES_SQL, args)
        return [CuratedMemory(*row) for row in await cur.fetchall()]

    async def export(self, agent_id: str, out: str | os.PathLike | TextIO, *, vectors: bool = False) -> dict:
        """See :meth:`Recall.export`."""
        return await self._in_thread("export", agent_id, out, vectors=vectors)

    # -- import transcripts, summarize (on a worker thread: they commit file by file)
    async def import_(self, paths: Iterable[str | os.PathLike], *, agent_id: str, full: bool = False,
                      progress: Callable[[Path, FileResult], None] | None = None,
                      on_start: Callable[[int], None] | None = None) -> SyncReport:
        """See :meth:`Recall.import_`."""
        return await self._in_thread("import_", list(paths), agent_id=agent_id, full=full,
                                     progress=progress, on_start=on_start)

    async def sync(self, paths: Iterable[str | os.PathLike] | None = None, *, agent_id: str,
                   progress: Callable[[Path, FileResult], None] | None = None,
                   on_start: Callable[[int], None] | None = None) -> SyncReport:
        """See :meth:`Recall.sync`."""
        return await self._in_thread("sync", None if paths is None else list(paths),
                                     agent_id=agent_id, progress=progress, on_start=on_start)

    async def summarize(self, *, agent_id: str | None = None, model: str | None = None,
                        only_stale: bool = True, max_chars: int = 1200) -> SummaryReport:
        """See :meth:`Recall.summarize`."""
        return await self._in_thread("summarize", agent_id=agent_id, model=model,
                                     only_stale=only_stale, max_chars=max_chars)

    # -- sessions
    async def sessions(self, agent_id: str, *, project: str | None = None,
                       since: datetime | None = None, limit: int = 50,
                       source_agent: str | None = None) -> list[dict]:
        """See :meth:`Recall.sessions`."""
        return _dicts(_Fetched(*await self._fetch(SESSIONS_SQL, {
            "agent": agent_id, "project": project, "since": since, "limit": limit,
            "source_agent": source_agent})))

    async def resolve_session(self, agent_id: str, session_id: str) -> str:
        """See :meth:`Recall.resolve_session`."""
        return await self._in_thread("resolve_session", agent_id, session_id)

    async def show(self, agent_id: str, session_id: str) -> dict:
        """See :meth:`Recall.show`."""
        return await self._in_thread("show", agent_id, session_id)

    async def session_infos(self, session_ids: Iterable[str]) -> dict[str, SessionInfo]:
        """See :meth:`Recall.session_infos`."""
        ids = sorted(set(session_ids))
        if not ids:
            return {}
        _, rows = await self._fetch(SESSION_INFOS_SQL, [ids])
        return {r[0]: SessionInfo(*r) for r in rows}

    async def _fetch(self, query: str, params) -> tuple[list, list]:
        cur = await self.conn.execute(query, params)
        return cur.description, await cur.fetchall()

    # -- forget
    async def forget_sessions(self, agent_id: str, before: datetime, *, project: str | None = None,
                              keep_marked: bool = True, dry_run: bool = False) -> list[dict]:
        """See :meth:`Recall.forget_sessions`."""
        description, rows = await self._fetch(FORGET_SESSIONS_SQL, _forget_args(agent_id, before, project,
                                                                                 keep_marked, dry_run))
        return _dicts(_Fetched(description, rows))

    async def redact(self, text: str) -> str:
        """See :meth:`Recall.redact`."""
        cur = await self.conn.execute("select recall.redact(%s)", [_text(text)])
        return (await cur.fetchone())[0]

    async def redact_stored(self, agent_id: str, *, dry_run: bool = False) -> list[dict]:
        """See :meth:`Recall.redact_stored` (on a worker thread: on a Citus cluster it chunks
        again from the client, as add_messages does)."""
        return await self._in_thread("redact_stored", agent_id, dry_run=dry_run)

    async def forget(self, *, agent_id: str, session_id: str | None = None) -> int:
        """See :meth:`Recall.forget`."""
        async with self.conn.transaction():
            if session_id is not None:
                cur = await self.conn.execute(
                    "delete from recall.sessions where session_id = %s and agent_id = %s", [session_id, agent_id])
            else:
                await self.conn.execute("delete from recall.source_files where agent_id = %s", [agent_id])
                cur = await self.conn.execute("delete from recall.sessions where agent_id = %s", [agent_id])
                await self.conn.execute("delete from recall.forgotten_sessions where agent_id = %s", [agent_id])
        return cur.rowcount

    async def forgotten_sessions(self, agent_id: str) -> list[dict]:
        """See :meth:`Recall.forgotten_sessions`."""
        description, rows = await self._fetch(FORGOTTEN_SQL, [_text(agent_id)])
        return _dicts(_Fetched(description, rows))

    async def unforget_sessions(self, agent_id: str, session_ids: Sequence[str] | None = None) -> list[dict]:
        """See :meth:`Recall.unforget_sessions`."""
        description, rows = await self._fetch(UNFORGET_SQL, [_text(agent_id), _unforget_ids(session_ids)])
        return _dicts(_Fetched(description, rows))
