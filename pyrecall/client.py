"""The Python client: remember sessions, recall what matters. Each method is one SQL call;
ranking happens in the database (recall.hybrid_recall, recall.session_recall,
recall.auto_context), never here."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector, register_vector_async

from . import _config, _db, _ingest, _migrate
from ._embed import Embedder, get_embedder
from ._errors import ConfigError, EmbeddingError, MissingDependencyError, PyrecallError
from ._worker import EmbedReport, Worker
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
    section: str | None = None   # auto_context only: recent | related | failures


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
    return _ingest.clean_text(value) if isinstance(value, str) else value


def _args(agent_id: str, query: str | None, embedding, k: int, token_budget: int | None,
          exclude_session_id: str | None, filter: dict | None, kinds: Sequence[str] | None,
          since: datetime | None, until: datetime | None, options: dict) -> dict:
    args = {"agent_id": _text(agent_id), "query_text": _text(query), "query_embedding": embedding,
            "k": k, "token_budget": token_budget, "exclude_session_id": _text(exclude_session_id),
            # JSON text, cast in SQL: cleaned as metadata is, and too deep a filter is a ConfigError
            "filter": _ingest.clean_json(filter) if filter is not None else None,
            "kinds": [_text(x) for x in kinds] if kinds is not None else None,
            "since": since, "until": until}
    allowed = {"min_similarity", "vector_weight", "text_weight", "recency_weight",
               "importance_weight", "half_life", "candidates", "as_of", "dedup_similarity"}
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
         "filter": "jsonb"}


def _call(function: str, args: dict) -> str:
    names = ", ".join(f"{k} => %({k})s" + (f"::{CASTS[k]}" if k in CASTS else "") for k in args)
    return f"select * from recall.{function}({names})"


def _usable(vector) -> np.ndarray | None:
    """The query vector, or None when it holds NaN/infinity or only zeros (a provider fault:
    no cosine can be computed with it)."""
    v = np.asarray(vector, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return v if v.ndim == 1 and np.isfinite(v).all() and v.any() else None


def _memories(rows) -> list[Memory]:
    return [Memory(*row[: len(COLUMNS)]) if len(row) == len(COLUMNS)
            else Memory(*row[: len(COLUMNS)], section=row[len(COLUMNS)]) for row in rows]


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

    # -- remember
    def add_session(self, session_id: str, agent_id: str, *, title: str | None = None,
                    project: str | None = None, branch: str | None = None,
                    started_at: datetime | None = None, metadata: dict | None = None) -> None:
        """Create a session (or update its title, project, branch, metadata)."""
        _ingest.ingest(self.conn, [Session(session_id, agent_id, title, project, branch,
                                           started_at, None, metadata or {}, [])],
                       agent_id=agent_id, keep_empty=True)

    def add_messages(self, session_id: str, messages: Iterable[Message | dict], *,
                     agent_id: str | None = None) -> _ingest.IngestReport:
        """Append messages (dicts with role, content, and optionally kind, created_at,
        importance, metadata, external_id) in one transaction, COPY-fast. A message already
        stored is skipped. The session is created if missing (``agent_id`` then required)."""
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
        return _ingest.ingest(self.conn, sessions, agent_id=agent_id)

    def embed_pending(self, *, batch_size: int = 64, agent_id: str | None = None) -> EmbedReport:
        """Embed every pending chunk with the configured model."""
        return Worker(self.conn, self.embedder, batch_size=batch_size, agent=agent_id).run()

    # -- recall
    def _query_embedding(self, query: str | None):
        """The query's vector, or None with the reason when the provider cannot give one."""
        if not query or not query.strip():
            return None, None
        try:
            vector = _usable(self.embedder.embed([_text(query)])[0])
        except (EmbeddingError, MissingDependencyError, ImportError, OSError) as exc:
            log.warning("query embedding failed, recalling by keywords only: %s", exc)
            return None, f"query embedding failed ({exc}); keyword search only"
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
        embedding, note = self._query_embedding(query)
        args = _args(agent_id, query, embedding, k, token_budget, exclude_session_id, filter,
                     kinds, since, until, options)
        rows = self.conn.execute(_call("hybrid_recall", args), args).fetchall()
        return RecallResult(query, _memories(rows), "hybrid" if embedding is not None else "keyword", note)

    def session_recall(self, agent_id: str, query: str, *, k: int = 10, sessions: int | None = None,
                       token_budget: int | None = None, exclude_session_id: str | None = None,
                       filter: dict | None = None, **options) -> RecallResult:
        """Two-stage recall: the best sessions first, then the best chunks inside them."""
        embedding, note = self._query_embedding(query)
        args = _args(agent_id, query, embedding, k, token_budget, exclude_session_id, filter,
                     None, None, None, {})
        if sessions is not None:
            args["n_sessions"] = sessions
        args.update(options)
        rows = self.conn.execute(_call("session_recall", args), args).fetchall()
        return RecallResult(query, _memories(rows), "hybrid" if embedding is not None else "keyword", note)

    def auto_context(self, agent_id: str, *, project: str | None = None, branch: str | None = None,
                     task: str | None = None, token_budget: int = 4000,
                     exclude_session_id: str | None = None) -> RecallResult:
        """The session-start context: recent work, what relates to the task, failures to avoid."""
        embedding, note = self._query_embedding(task)
        args = {"agent_id": _text(agent_id), "project": _text(project), "branch": _text(branch),
                "task_text": _text(task), "task_embedding": embedding, "token_budget": token_budget,
                "exclude_session_id": _text(exclude_session_id)}
        rows = self.conn.execute(_call("auto_context", args), args).fetchall()
        return RecallResult(task, _memories(rows), "hybrid" if embedding is not None else "keyword", note)

    # -- forget
    def forget(self, *, agent_id: str, session_id: str | None = None) -> int:
        """Delete a session, or everything of an agent, with its messages and chunks."""
        if session_id is not None:
            cur = self.conn.execute("delete from recall.sessions where session_id = %s and agent_id = %s",
                                    [session_id, agent_id])
        else:
            with self.conn.transaction():
                self.conn.execute("delete from recall.source_files where agent_id = %s", [agent_id])
                cur = self.conn.execute("delete from recall.sessions where agent_id = %s", [agent_id])
        return cur.rowcount


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

    @classmethod
    async def connect(cls, dsn: str | None = None, **kwargs) -> AsyncRecall:
        url = _db.resolve_dsn(dsn)
        try:
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        except psycopg.OperationalError as exc:
            raise PyrecallError(f"cannot connect to PostgreSQL: {str(exc).strip()}") from exc
        await register_vector_async(conn)
        return cls(conn, **kwargs)

    async def close(self) -> None:
        await self.conn.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder(self._model)
        return self._embedder

    async def _query_embedding(self, query: str | None):
        if not query or not query.strip():
            return None, None
        try:
            vector = _usable((await self.embedder.aembed([_text(query)]))[0])
        except (EmbeddingError, MissingDependencyError, ImportError, OSError) as exc:
            log.warning("query embedding failed, recalling by keywords only: %s", exc)
            return None, f"query embedding failed ({exc}); keyword search only"
        if vector is None:
            log.warning("query embedding unusable (NaN, infinity or all zeros), recalling by keywords only")
            return None, "query embedding unusable (NaN, infinity or all zeros); keyword search only"
        return vector, None

    async def add_messages(self, session_id: str, messages: Iterable[Message | dict], *,
                           agent_id: str) -> int:
        """Append messages to a session (created if missing); returns how many were new."""
        msgs = [_ingest.as_message(m) for m in messages]
        session_id, agent_id = _text(session_id), _text(agent_id)
        # the ids the sync path gives (a hash of the message, not of the time it is stored):
        # adding the same messages again is a no-op here too
        ids = _ingest._stable_ids(Session(session_id, agent_id, messages=msgs))
        rows = [[session_id, agent_id, _text(ext), m.role, m.kind, _ingest.clean_text(m.content),
                 m.created_at, _ingest.storable_importance(m.importance), _ingest.clean_json(m.metadata or {})]
                for m, ext in zip(msgs, ids, strict=True)]
        async with self.conn.transaction():
            await self.conn.execute(
                "insert into recall.sessions (session_id, agent_id) values (%s, %s) on conflict do nothing",
                [session_id, agent_id])
            async with self.conn.cursor() as cur:
                await cur.executemany(
                    "insert into recall.messages (session_id, agent_id, external_id, role, kind, content, "
                    "created_at, importance, metadata) values (%s, %s, %s, %s, %s, %s, "
                    "coalesce(%s, now()), coalesce(%s, 0.5), %s::jsonb)",
                    rows, returning=False)
                return cur.rowcount

    async def recall(self, agent_id: str, query: str, *, k: int = 10, token_budget: int | None = None,
                     exclude_session_id: str | None = None, filter: dict | None = None,
                     kinds: Sequence[str] | None = None, since: datetime | None = None,
                     until: datetime | None = None, **options) -> RecallResult:
        """See :meth:`Recall.recall`."""
        embedding, note = await self._query_embedding(query)
        args = _args(agent_id, query, embedding, k, token_budget, exclude_session_id, filter,
                     kinds, since, until, options)
        cur = await self.conn.execute(_call("hybrid_recall", args), args)
        rows = await cur.fetchall()
        return RecallResult(query, _memories(rows), "hybrid" if embedding is not None else "keyword", note)
