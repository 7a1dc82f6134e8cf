"""The embedding job: pending chunks (``embedding IS NULL``) get their vectors.

Work is claimed in batches with ``FOR UPDATE SKIP LOCKED`` inside a transaction that lasts
until the batch is written: several workers never embed the same chunk, and a worker that dies
mid-batch releases its claim with its connection, so the next run finds the chunks pending
again. A batch refused for what it holds is split until the failing chunk is found; that chunk
records the attempt and the error and is retried later with exponential backoff; the others go
on. A failure every request would meet (provider down, bad key, unknown model) is not split:
the whole batch records it, after one request.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from . import _db, _migrate
from ._embed import Embedder, input_may_be_at_fault
from ._errors import (
    ConfigError,
    DatabaseError,
    DimensionMismatchError,
    EmbeddingError,
    PyrecallError,
    TransientEmbeddingError,
    one_line,
)

log = logging.getLogger("pyrecall.worker")

CHANNEL = "recall_chunks"
BACKOFF_BASE_S = 30          # first retry after 30 s, then 60, 120, ... capped
BACKOFF_CAP_S = 6 * 3600
# A run that wrote at least this many chunks vacuums them: each write of an embedding is an
# UPDATE, which leaves the old row version behind, and until autovacuum comes (minutes, after
# 20% of a big table has changed) queries wade through them (hybrid_recall's p95 grew many
# times after embedding 100k chunks: bench/LOG.md). VACUUM (ANALYZE) also gives the planner
# the new statistics.
VACUUM_MIN_ROWS = 1000
# Messages counted per statement by count_messages (the backfill).
COUNT_BATCH = 1000
# Older messages the long-running worker (listen_loop) backfills per pass before it looks for
# new chunks again: embedding turns runs ~50/s with the local model on 2 cores, and a database
# of 1M messages upgraded to release 11 would otherwise keep new sessions waiting for hours.
BACKFILL_PASS = 2000
# A message's text as a passage holds it, and the date line of a passage it opens: what
# messages.n_tokens and date_tokens count (sql/incremental/011-message-tokens.sql; the passages
# of hybrid_recall_v7 are written from the same expressions).
_TURN_TEXT = "recall._speaker(m.role, m.metadata) || ': ' || m.content || E'\\n\\n'"
_DATE_LINE = "'[' || to_char(m.created_at at time zone 'UTC', 'FMDD FMMonth YYYY') || E']\\n'"


@dataclass
class EmbedReport:
    scanned: int = 0
    embedded: int = 0
    skipped: int = 0      # empty text: nothing to embed
    failed: int = 0       # attempts that failed (chunks stay pending, retried later)
    cleaned: int = 0
    pending: int = 0      # still pending at the end (dry run: what would be embedded)
    seconds: float = 0.0
    vacuumed: bool = False  # the run wrote VACUUM_MIN_ROWS chunks or more and vacuumed them
    counted: int = 0        # messages whose token counts (messages.n_tokens, date_tokens) it recorded
    backfill_left: bool = False  # a backfill of older messages (count_messages) has more to do at once
    # the agents' own vector indexes the run built (pyrecall._index.upkeep): recall.index_info rows
    indexed: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)  # the agents it embedded chunks of

    def as_dict(self) -> dict:
        return asdict(self)

    def add(self, other: EmbedReport) -> None:
        """Add the counts of ``other`` (one batch, once committed)."""
        for name in ("scanned", "embedded", "skipped", "failed", "counted"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors += other.errors


class _CommitGuard:
    """SIGINT held from ``arm()`` (the end of a batch's work) until the block ends (its commit
    done and counted): an interrupt that lands during the COMMIT round trip cannot leave a
    batch saved but uncounted. Before ``arm()`` SIGINT acts at once, as the program had it; a
    held one is delivered when the block ends (on an error too). Outside the main thread
    (signals are not delivered there) it does nothing."""

    def __enter__(self) -> _CommitGuard:
        self.armed = self.held = False
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def _handler(self, signum, frame) -> None:
        if self.armed:
            self.held = True
        else:
            self._deliver(signum, frame)

    def _deliver(self, signum=signal.SIGINT, frame=None) -> None:
        if callable(self.previous):
            self.previous(signum, frame)
        elif self.previous == signal.SIG_DFL:
            raise KeyboardInterrupt

    def arm(self) -> None:
        self.armed = True

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            if self.held:
                self._deliver()


class EmbedInterrupted(KeyboardInterrupt):
    """Ctrl-C during :meth:`Worker.run`: ``report`` counts the batches committed before it (the
    batch in flight was rolled back and stays pending)."""

    def __init__(self, report: EmbedReport):
        super().__init__()
        self.report = report


def filter_condition(filter: dict | None, column: str = "c.metadata") -> tuple[sql.Composable, list]:
    """SQL for a metadata filter, as hybrid_recall v4 reads one: every key must match; a key
    matches when the chunk's metadata holds the value, or one of its messages does (a chat
    window's ``metadata.messages``); a JSON array value matches when any element does. Each
    test is a containment (``@>``) that the GIN index on metadata serves.

    >>> filter_condition({"author": ["bob", "carol"]})[0].as_string().count("@>")
    4
    """
    if not filter:
        return sql.SQL("true"), []
    if not isinstance(filter, dict):
        raise ConfigError(f"a filter is a JSON object of metadata keys, got {type(filter).__name__}")
    col = sql.Identifier(*column.split("."))
    test = sql.SQL("{col} @> %s::jsonb or {col} @> %s::jsonb").format(col=col)
    parts, params = [], []
    for key, value in filter.items():
        options = value if isinstance(value, list) else [value]
        if not options:
            raise ConfigError(f"filter {key!r}: an empty list matches nothing")
        for v in options:
            params += [Jsonb({key: v}), Jsonb({"messages": [{key: v}]})]
        parts.append(sql.SQL("({})").format(sql.SQL(" or ").join([test] * len(options))))
    return sql.SQL(" and ").join(parts), params


def _where(agent: str | None, since: datetime | None, model: str | None,
           retry_now: bool = False, filter: dict | None = None) -> tuple[sql.Composable, list]:
    """The pending condition: no embedding (or, re-embedding, another model's), and not
    waiting out a backoff (retry_now: failed chunks too; empty ones never); only the chunks
    of ``agent``, since ``since``, matching ``filter`` (see filter_condition)."""
    cond = [sql.SQL("(c.embed_after is null or c.embed_after <= now() or c.embed_after < 'infinity')"
                    if retry_now else "(c.embed_after is null or c.embed_after <= now())")]
    params: list = []
    if model is None:
        cond.append(sql.SQL("c.embedding is null"))
    else:
        cond.append(sql.SQL("(c.embedding is null or c.embedding_model is distinct from %s)"))
        params.append(model)
    if agent is not None:
        cond.append(sql.SQL("c.agent_id = %s"))
        params.append(agent)
    if since is not None:
        cond.append(sql.SQL("c.created_at >= %s"))
        params.append(since)
    if filter:
        condition, values = filter_condition(filter)
        cond.append(condition)
        params += values
    return sql.SQL(" and ").join(cond), params


def count_pending(conn: psycopg.Connection, *, agent: str | None = None, since: datetime | None = None,
                  model: str | None = None, filter: dict | None = None) -> int:
    where, params = _where(agent, since, model, filter=filter)
    return conn.execute(sql.SQL("select count(*) from recall.chunks c where {}").format(where),
                        params).fetchone()[0]


def check_dimension(conn: psycopg.Connection, embedder: Embedder) -> None:
    installed = _migrate.installed_dim(conn)
    if installed is not None and embedder.dim != installed:
        raise DimensionMismatchError(
            f"model {embedder.model} gives {embedder.dim}-dimensional vectors but this database "
            f"stores {installed}; to switch, run `pyrecall embed --reembed --model {embedder.model}`")


def change_dimension(conn: psycopg.Connection, dim: int) -> None:
    """Re-type the embedding columns to vector(dim), dropping what no longer fits: every
    embedding, and the vector indexes (re-create them with recall.create_vector_index)."""
    with conn.transaction():
        indexes = conn.execute(
            "select n.nspname, c.relname from pg_index i join pg_class c on c.oid = i.indexrelid "
            "join pg_namespace n on n.oid = c.relnamespace "
            "join pg_am am on am.oid = c.relam where i.indrelid in ('recall.chunks'::regclass, "
            "'recall.sessions'::regclass) and am.amname in ('hnsw', 'ivfflat', 'diskann')").fetchall()
        for schema, name in indexes:
            conn.execute(sql.SQL("drop index {}").format(sql.Identifier(schema, name)))
        # a type modifier cannot be a parameter: the dimension goes in as a literal integer
        vector = sql.SQL("vector({})").format(sql.Literal(int(dim)))
        conn.execute(sql.SQL("alter table recall.chunks alter column embedding type {} using null")
                     .format(vector))
        conn.execute("update recall.chunks set embedding_model = null, embedded_at = null, "
                     "embed_attempts = 0, embed_error = null, embed_after = null")
        conn.execute(sql.SQL("alter table recall.sessions alter column summary_embedding type {} "
                             "using null").format(vector))
        if conn.execute("select exists (select from pg_attribute where attrelid = 'recall.messages'::regclass "
                        "and attname = 'embedding' and not attisdropped)").fetchone()[0]:
            conn.execute("update recall.messages set embedding = null where embedding is not null")
        conn.execute("update recall.config set value = to_jsonb(%s::int) where key = 'embedding_dim'", [dim])


def cleanup(conn: psycopg.Connection, *, agent: str | None = None) -> int:
    """Remove chunks whose messages are gone (left by hand-made deletes or an old bug).

    (Each chunk's messages looked up by its agent, without a set-returning function in the
    subquery: Citus runs it on every shard then, each shard on its own. On a cluster, where a
    DELETE of messages is not re-chunked by itself, ``recall.chunk_sessions`` re-derives the
    sessions instead: docs/SCALING.md.)"""
    cur = conn.execute(
        """delete from recall.chunks c
            where c.kind <> 'summary' and (%(agent)s::text is null or c.agent_id = %(agent)s)
              and not c.message_ids <@ array(select m.message_id from recall.messages m
                                             where m.agent_id = c.agent_id
                                               and m.message_id = any (c.message_ids))""",
        {"agent": agent})
    return cur.rowcount


def _vector_problem(vector, dim: int) -> tuple[np.ndarray | None, str | None]:
    """The vector as float32, or why it cannot be stored: wrong length, NaN or infinite
    (also after the cast to float32), all zeros."""
    try:
        with np.errstate(over="ignore"):              # a value past float32's range: inf, refused below
            v = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError):
        return None, "the provider answered something that is not a vector"
    if v.ndim != 1 or v.size != dim:
        return None, f"the provider answered a vector of {v.size} dimensions, expected {dim}"
    with np.errstate(over="ignore", invalid="ignore"):
        if not np.isfinite(v).all():
            return None, "the provider answered a vector with values that are not finite (NaN or infinity)"
    if not v.any():
        return None, "the provider answered a vector of all zeros: cosine similarity is undefined"
    return v, None


class Worker:
    """Embeds pending chunks with one embedder.

    >>> Worker(conn, get_embedder()).run()  # doctest: +SKIP
    EmbedReport(scanned=120, embedded=120, ...)
    """

    def __init__(self, conn: psycopg.Connection, embedder: Embedder, *, batch_size: int = 64,
                 agent: str | None = None, since: datetime | None = None, reembed: bool = False,
                 retry_now: bool = False, progress: Callable[[int], None] | None = None,
                 filter: dict | None = None, index: bool | str = True,
                 index_progress: Callable[[dict], None] | None = None):
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, not {batch_size}")
        self.conn, self.embedder, self.batch_size = conn, embedder, batch_size
        self.agent, self.since, self.filter = agent, since, filter
        filter_condition(filter)      # a malformed filter is refused before any work
        self.model_filter = embedder.model if reembed else None
        self.retry_now = retry_now
        self._after = 0
        self._scope = agent       # the agent the next claim is limited to (None: all)
        self._installed_dim: int | None = None
        self._has_message_tokens: bool | None = None
        self._has_message_vectors: bool | None = None
        self.progress = progress
        if index not in (True, False, "all"):
            raise ConfigError(f"index must be True, False or 'all', not {index!r}")
        self.index, self.index_progress = index, index_progress
        self._embedded_agents: set[str] = set()

    def run(self, *, max_batches: int | None = None, backfill_limit: int | None = None) -> EmbedReport:
        """Embed until nothing is pending (or max_batches); return the summary.
        ``backfill_limit``: at most this many older messages of a backfill (count_messages) this
        run (the long-running worker: new chunks are not kept waiting behind hours of turns)."""
        check_dimension(self.conn, self.embedder)
        report, start, batches = EmbedReport(), time.perf_counter(), 0
        self._embedded_agents = set()
        try:
            for scope in self._scopes():
                self._scope = scope
                self._after = 0   # one pass in chunk_id order: a chunk that failed waits for the next run
                while max_batches is None or batches < max_batches:
                    n = self.run_batch(report)
                    if n == 0:
                        break
                    batches += 1
            self._scope = self.agent
            counted, more = backfill(self.conn, self.embedder, agent=self.agent, limit=backfill_limit)
            report.counted += counted
            report.backfill_left = more
            report.vacuumed = self._vacuum(report)
            report.indexed = self._index_upkeep(report)
            report.agents = sorted(self._embedded_agents)
            report.pending = count_pending(self.conn, agent=self.agent, since=self.since,
                                           model=self.model_filter, filter=self.filter)
        except KeyboardInterrupt as exc:
            self._scope = self.agent
            report.seconds = time.perf_counter() - start
            raise EmbedInterrupted(report) from exc
        report.seconds = time.perf_counter() - start
        return report

    def _scopes(self) -> list[str | None]:
        """The agents to claim for, one after the other: the one asked for, else all at once;
        on a Citus cluster (recall.chunks distributed) each agent with pending chunks in
        turn, because a claim (FOR UPDATE SKIP LOCKED) must stay in one shard."""
        if self.agent is not None or not _db.distributed(self.conn):
            return [self.agent]
        where, params = _where(None, self.since, self.model_filter, self.retry_now, self.filter)
        return [r[0] for r in self.conn.execute(
            sql.SQL("select distinct c.agent_id from recall.chunks c where {} order by 1").format(where),
            params).fetchall()]

    def _vacuum(self, report: EmbedReport) -> bool:
        """VACUUM (ANALYZE) recall.chunks after a run that wrote many rows; not possible inside
        the caller's transaction (skipped there: autovacuum will come)."""
        written = report.embedded + report.failed + report.skipped
        if written < VACUUM_MIN_ROWS:
            return False
        if not self.conn.autocommit or self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            log.info("wrote %d chunks inside a transaction: not vacuumed (autovacuum will)", written)
            return False
        # A role that does not own the table gets a warning from PostgreSQL and no vacuum.
        self.conn.execute("vacuum (analyze) recall.chunks")
        return True

    def _index_upkeep(self, report: EmbedReport) -> list[dict]:
        """Build the vector index of their own that the agents embedded for have come to need,
        and any build cut short before (pyrecall._index.upkeep: with no agent embedded for,
        catalog lookups only; recall.config auto_vector_index false: never). With index
        'all', the first run looks at every agent (the worker's agent, if it has one) whatever
        it embedded: an agent that grew past the threshold before this upkeep existed, or
        while it was switched off, gets its index too (one scan of the table's embedded rows,
        grouped by agent); later runs only at the agents they embed for. An agent past
        agent_index_min_rows without one is ranked by an exact scan, whose cost grows with
        the agent. Skipped inside the caller's transaction (a concurrent build cannot run in
        one) and on a Citus cluster (`pyrecall dba index` there); a failed build is reported
        and the run goes on: the next one tries again."""
        if not self.index:
            return []
        if not self.conn.autocommit or self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return []
        if _db.distributed(self.conn):
            return []
        from . import _index

        agents: list[str] | None = sorted(self._embedded_agents)
        if self.index == "all":
            agents = None if self.agent is None else [self.agent]
            self.index = True  # once
        try:
            return _index.upkeep(self.conn, agents, progress=self.index_progress)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            message = f"vector index not built (recall scans exactly until it is): {one_line(exc)}"
            log.warning("%s", message)
            report.errors.append(message)
            return []

    def run_batch(self, report: EmbedReport) -> int:
        """Claim, embed and write one batch, in one transaction; return how many chunks it
        claimed. ``report`` is given the batch's counts once it is committed."""
        where, params = _where(self._scope, self.since, self.model_filter, self.retry_now, self.filter)
        batch = EmbedReport()
        with _CommitGuard() as guard:
            with self.conn.transaction():
                rows = self.conn.execute(
                    sql.SQL("select c.chunk_id, c.content from recall.chunks c where {} and c.chunk_id > %s "
                            "order by c.chunk_id limit %s for update skip locked").format(where),
                    [*params, self._after, self.batch_size]).fetchall()
                if not rows:
                    return 0
                self._after = rows[-1][0]
                batch.scanned += len(rows)
                empty = [cid for cid, text in rows if not text.strip()]
                if empty:  # nothing to embed: parked, never retried
                    self.conn.execute(sql.SQL("update recall.chunks c set embed_error = 'empty text', "
                                              "embed_after = 'infinity' where c.chunk_id = any(%s){}")
                                      .format(self._in_scope()), [empty, *self._scope_params()])
                    batch.skipped += len(empty)
                todo = [(cid, text) for cid, text in rows if text.strip()]
                if todo:
                    self._embed_rows(todo, batch)
                guard.arm()   # a Ctrl-C from here waits until the batch is committed and counted
            report.add(batch)   # (inside the guard: counted before a held Ctrl-C)
        if self.progress:
            self.progress(len(rows))
        return len(rows)

    def _embed_rows(self, rows: list[tuple[int, str]], report: EmbedReport) -> None:
        try:
            vectors = self.embedder.embed([text for _, text in rows])
            if len(vectors) != len(rows):
                raise EmbeddingError(f"{self.embedder.model}: sent {len(rows)} texts, got {len(vectors)} vectors")
        except (TransientEmbeddingError, EmbeddingError) as exc:
            if len(rows) > 1 and input_may_be_at_fault(exc):
                mid = len(rows) // 2          # find the chunk the provider refuses
                self._embed_rows(rows[:mid], report)
                self._embed_rows(rows[mid:], report)
                return
            self._record_failure([cid for cid, _ in rows], exc)
            report.failed += len(rows)
            report.errors.append(str(exc))
            if isinstance(exc, TransientEmbeddingError):
                log.warning("embedding provider unavailable, %d chunk(s) stay pending: %s", len(rows), exc)
            elif len(rows) > 1:
                log.warning("embedding failed for the whole batch (not split: any request would fail), "
                            "%d chunk(s) stay pending: %s",
                            len(rows), exc)
            return
        # a vector the database cannot store (NaN, infinity, wrong length) would abort the whole
        # batch, again at every run; an all-zero one has no cosine and would rank first (NaN).
        # Such a chunk fails alone, with the reason; the others are written.
        checked = [(row, *_vector_problem(v, self._dim())) for row, v in zip(rows, vectors, strict=True)]
        for (cid, _), _, problem in checked:
            if problem:
                self._record_failure([cid], EmbeddingError(f"{self.embedder.model}: {problem}"))
                report.failed += 1
                report.errors.append(problem)
        rows = [row for row, _, problem in checked if not problem]
        vectors = [v for _, v, problem in checked if not problem]
        if not rows:
            return
        tokens = [self.embedder.count_tokens(text) for _, text in rows]
        ids = [cid for cid, _ in rows]
        written = self.conn.execute(sql.SQL(
            """update recall.chunks c
                  set embedding = v.embedding, embedding_model = %s, embedded_at = now(),
                      n_tokens = greatest(v.n_tokens, 1), embed_attempts = 0, embed_error = null,
                      embed_after = null
                 from unnest(%s::bigint[], %s::vector[], %s::int[]) as v(chunk_id, embedding, n_tokens)
                where c.chunk_id = v.chunk_id{}
            returning c.agent_id""").format(self._in_scope()),
            [self.embedder.model, ids, vectors, tokens, *self._scope_params()])
        self._embedded_agents.update(agent for (agent,) in written)
        # the turns of the chat chunks embedded: their token counts and, once migrated
        # (013-message-vectors), their own vectors (all again when re-embedding)
        if self._message_tokens():
            has_vectors = self._message_vectors()
            report.counted += _turns(self.conn, self.embedder, self.conn.execute(sql.SQL(
                """select m.agent_id, m.message_id, {turn}, {date}, {need_vector}
                     from recall.chunks c
                     join recall.messages m on m.agent_id = c.agent_id and m.message_id = any(c.message_ids)
                    where c.chunk_id = any(%s){} and c.kind in ('window', 'turn_pair', 'message')
                      and m.kind = 'text' and (%s or m.n_tokens is null{or_vector})""").format(
                    self._in_scope(), turn=sql.SQL(_TURN_TEXT), date=sql.SQL(_DATE_LINE),
                    need_vector=sql.SQL("(%s or m.embedding is null)" if has_vectors else "false"),
                    or_vector=sql.SQL(" or m.embedding is null" if has_vectors else "")),
                [*([self.model_filter is not None] if has_vectors else []), ids, *self._scope_params(),
                 self.model_filter is not None]).fetchall(), dim=self._dim(), has_vectors=has_vectors,
                known={text.rstrip(): np.asarray(v, dtype=np.float32)
                       for (_, text), v in zip(rows, vectors, strict=True)})[0]
        report.embedded += len(rows)

    def _message_tokens(self) -> bool:
        """Whether the database has messages.n_tokens (migration 011-message-tokens): a
        database not migrated yet is embedded all the same."""
        if self._has_message_tokens is None:
            self._has_message_tokens = self.conn.execute(
                "select exists (select from pg_attribute where attrelid = 'recall.messages'::regclass "
                "and attname = 'n_tokens' and not attisdropped)").fetchone()[0]
        return self._has_message_tokens

    def _message_vectors(self) -> bool:
        """Whether the turns' own vectors are written: the database has messages.embedding
        (migration 013-message-vectors) and recall.config turn_vectors is not false."""
        if self._has_message_vectors is None:
            column = _has_message_vectors(self.conn)
            self._has_message_vectors = column and _turn_vectors_wanted(self.conn)
            if column and not self._has_message_vectors:
                # turn_vectors false: the turns embedded meanwhile are left to the backfill,
                # which waits until it is true again
                self.conn.execute("insert into recall.config (key, value) values "
                                  "('message_vectors_backfill', 'true') on conflict (key) do nothing")
        return self._has_message_vectors

    def _dim(self) -> int:
        if self._installed_dim is None:
            self._installed_dim = _migrate.installed_dim(self.conn) or self.embedder.dim
        return self._installed_dim

    def _record_failure(self, ids: list[int], exc: Exception) -> None:
        self.conn.execute(sql.SQL(
            """update recall.chunks c
                  set embed_attempts = embed_attempts + 1,
                      embed_error = left(%s, 1000),
                      embed_after = now() + least(%s * power(2, embed_attempts), %s) * interval '1 second'
                where c.chunk_id = any(%s){}""").format(self._in_scope()),
            [f"{type(exc).__name__}: {exc}", BACKOFF_BASE_S, BACKOFF_CAP_S, ids, *self._scope_params()])

    def _in_scope(self) -> sql.Composable:
        # the claimed agent in every write too: on Citus the write then goes to its shard only
        return sql.SQL(" and c.agent_id = %s") if self._scope is not None else sql.SQL("")

    def _scope_params(self) -> list:
        return [self._scope] if self._scope is not None else []


def _has_message_vectors(conn: psycopg.Connection) -> bool:
    """Whether the database has messages.embedding (013-message-vectors)."""
    return conn.execute(
        "select exists (select from pg_attribute where attrelid = 'recall.messages'::regclass "
        "and attname = 'embedding' and not attisdropped)").fetchone()[0]


def _turn_vectors_wanted(conn: psycopg.Connection) -> bool:
    """Unless recall.config turn_vectors is false, the job embeds the turns too (+18% embedding
    time on generated Claude Code sessions, +44% on LoCoMo's chat windows: docs/BENCHMARKS.md);
    without, the fill values each turn at its chunk's cosine."""
    return conn.execute("select coalesce((select value <> 'false'::jsonb from recall.config "
                        "where key = 'turn_vectors'), true)").fetchone()[0]


def _turns(conn: psycopg.Connection, embedder: Embedder, rows: list[tuple], *, dim: int,
           has_vectors: bool = True, known: dict[str, np.ndarray] | None = None) -> tuple[int, bool]:
    """Record messages.n_tokens and date_tokens of (agent_id, message_id, turn text, date line,
    needs a vector) rows by the embedder's count and, for those that need one, the turn's own
    vector (messages.embedding, 013-message-vectors), in one UPDATE; how many messages (each
    once), and whether the provider was unavailable. A turn whose text is in ``known`` (a
    one-turn chunk embedded in the same batch) is given that vector. When the provider fails,
    the counts are written and the vectors stay NULL, the config key message_vectors_backfill
    set for a later run (count_messages) to embed them; a vector
    that cannot be stored (NaN, all zeros) leaves that message's NULL (a reader then uses its
    chunk's). ``has_vectors``: whether the database has the column (a database not migrated
    yet is counted all the same)."""
    dates: dict[str, int] = {}
    by_agent: dict[str, dict[int, list]] = {}
    texts: dict[int, str] = {}
    for agent_id, message_id, turn, date, need_vector in rows:
        if date not in dates:
            dates[date] = max(1, embedder.count_tokens(date))
        mine = by_agent.setdefault(agent_id, {})
        if message_id not in mine:      # a turn in two windows of the batch: counted once
            mine[message_id] = [max(1, embedder.count_tokens(turn)), dates[date], None]
            if need_vector:
                texts[message_id] = turn.rstrip()
    vectors: dict[int, np.ndarray] = {}
    for message_id, text in list(texts.items()):
        if known and text in known:
            vectors[message_id] = known[text]
            del texts[message_id]
    unavailable = False
    if texts:
        got = _embed_turns(embedder, list(texts.values()))
        if got is None:
            unavailable = True
            conn.execute("insert into recall.config (key, value) values ('message_vectors_backfill', 'true') "
                         "on conflict (key) do nothing")
        else:
            for message_id, v in zip(texts, got, strict=True):
                checked, problem = (None, "refused") if v is None else _vector_problem(v, dim)
                if problem is None:
                    vectors[message_id] = checked
    for mine in by_agent.values():
        for message_id, entry in mine.items():
            entry[2] = vectors.get(message_id)
    # one statement per agent: on a Citus cluster each goes to the agent's shard; one UPDATE
    # of each row (one row version). A message that needs no vector (or got none) keeps its own.
    for agent_id, turns in by_agent.items():
        if not has_vectors:
            conn.execute(
                """update recall.messages m set n_tokens = v.n_tokens, date_tokens = v.date_tokens
                     from unnest(%s::bigint[], %s::int[], %s::smallint[]) as v(message_id, n_tokens, date_tokens)
                    where m.agent_id = %s and m.message_id = v.message_id""",
                [list(turns), [e[0] for e in turns.values()], [e[1] for e in turns.values()], agent_id])
            continue
        conn.execute(
            """update recall.messages m
                  set n_tokens = v.n_tokens, date_tokens = v.date_tokens,
                      embedding = coalesce(v.embedding, m.embedding)
                 from unnest(%s::bigint[], %s::int[], %s::smallint[], %s::text[]::vector[])
                      as v(message_id, n_tokens, date_tokens, embedding)
                where m.agent_id = %s and m.message_id = v.message_id""",
            [list(turns), [e[0] for e in turns.values()], [e[1] for e in turns.values()],
             [None if e[2] is None else _vector_text(e[2]) for e in turns.values()], agent_id])
    return sum(len(c) for c in by_agent.values()), unavailable


def _vector_text(v: np.ndarray) -> str:
    """pgvector's text form, so that the connection needs no registered vector type; a NULL
    among the vectors then stays one (an array of arrays cannot hold a NULL row)."""
    return "[" + ",".join(map(repr, np.asarray(v, dtype=np.float32).tolist())) + "]"


def _embed_turns(embedder: Embedder, texts: list[str]) -> list | None:
    """The turns' vectors, None for a turn the provider refuses (the batch halved until the
    refused one is alone, as the chunks' are); None for all when the provider is unavailable
    (the caller leaves them to the backfill)."""
    try:
        got = embedder.embed(texts)
        if len(got) != len(texts):
            raise EmbeddingError(f"{embedder.model}: sent {len(texts)} texts, got {len(got)} vectors")
        return list(got)
    except TransientEmbeddingError as exc:
        log.warning("the turns' own vectors of %d message(s) stay to embed (their chunks are "
                    "embedded; a recall uses the chunks' vectors meanwhile): %s", len(texts), exc)
        return None
    except EmbeddingError as exc:
        if len(texts) > 1 and input_may_be_at_fault(exc):
            mid = len(texts) // 2
            first, second = _embed_turns(embedder, texts[:mid]), _embed_turns(embedder, texts[mid:])
            return None if first is None or second is None else first + second
        log.warning("the turn's own vector was refused, %d message(s) keep their chunk's: %s", len(texts), exc)
        return [None] * len(texts)


BACKFILL_KEYS = ("message_tokens_backfill", "message_vectors_backfill")


def count_messages(conn: psycopg.Connection, embedder: Embedder, *, agent: str | None = None) -> int:
    """The messages stored before their token counts (migration 011-message-tokens) or their
    own vectors (013-message-vectors) existed, or whose vectors the provider failed to give:
    each migration sets a config key (message_tokens_backfill, message_vectors_backfill) when
    there were some, the worker the second when a provider failed. Count, and embed under the
    second key, the text messages missing them (``agent``'s only, if given), in message_id order,
    and remove the keys once all agents are done. Worker.run calls this (through backfill);
    nothing to do (one read of recall.config) once the keys are gone. How many messages it
    recorded."""
    return backfill(conn, embedder, agent=agent)[0]


def backfill(conn: psycopg.Connection, embedder: Embedder, *, agent: str | None = None,
             limit: int | None = None) -> tuple[int, bool]:
    """count_messages, at most ``limit`` messages (about: whole batches) when given; (how many,
    whether more is left to do at once: the limit reached; not when done, nor when the provider
    is unavailable, whose turns wait for a later run). For all agents the position reached is
    kept in the keys' value ({"after": message_id}): the next call goes on from there."""
    keys = {k: v for k, v in conn.execute("select key, value from recall.config where key = any(%s)",
                                          [list(BACKFILL_KEYS)]).fetchall()}
    if not keys:
        return 0, False
    has_vectors = _has_message_vectors(conn)
    vectors = "message_vectors_backfill" in keys and has_vectors and _turn_vectors_wanted(conn)
    if not vectors and "message_tokens_backfill" not in keys:
        return 0, False  # turn_vectors false: the vectors' backfill waits until it is true again
    dim = _migrate.installed_dim(conn) or embedder.dim
    after = 0
    if agent is None:
        after = min(int(v["after"]) if isinstance(v, dict) and "after" in v else 0 for v in keys.values())
    counted = 0
    while limit is None or counted < limit:
        with conn.transaction():
            rows = conn.execute(sql.SQL(
                """select m.agent_id, m.message_id, {turn}, {date}, {need_vector}
                     from recall.messages m
                    where m.message_id > %(after)s and ({missing}) and m.kind = 'text'
                      and (%(agent)s::text is null or m.agent_id = %(agent)s)
                    order by m.message_id
                    limit %(n)s""").format(
                    turn=sql.SQL(_TURN_TEXT), date=sql.SQL(_DATE_LINE),
                    need_vector=sql.SQL("m.embedding is null" if vectors else "false"),
                    missing=sql.SQL("m.n_tokens is null or m.embedding is null" if vectors
                                    else "m.n_tokens is null")),
                {"agent": agent, "after": after, "n": COUNT_BATCH}).fetchall()
            if not rows:
                if agent is None:   # (the vectors' key stays while turn_vectors is false: from the start)
                    conn.execute("delete from recall.config where key = any(%s)",
                                 [[k for k in BACKFILL_KEYS if vectors or k != "message_vectors_backfill"]])
                    conn.execute("update recall.config set value = 'true' where key = any(%s)",
                                 [list(BACKFILL_KEYS)])
                return counted, False
            n, down = _turns(conn, embedder, rows, dim=dim, has_vectors=has_vectors)
            counted += n
            if down:        # the provider is unavailable: these again at a later run
                return counted, False
            after = rows[-1][1]
            if agent is None:
                # (a value, not jsonb_build_object: on a Citus cluster recall.config is a reference
                # table, whose updates refuse functions that are not immutable)
                conn.execute("update recall.config set value = %s where key = any(%s)",
                             [Jsonb({"after": after}), list(BACKFILL_KEYS)])
    return counted, True


def listen_loop(connect: Callable[[], psycopg.Connection], make_worker: Callable[[psycopg.Connection], Worker],
                *, idle_timeout: float = 30.0, stop: Callable[[], bool] = lambda: False,
                on_report: Callable[[EmbedReport], None] | None = None,
                between: Callable[[psycopg.Connection], object] | None = None) -> None:
    """Run forever: embed what is pending, then sleep until a NOTIFY on recall_chunks (or
    idle_timeout, to pick up retries whose backoff ran out). Reconnects when the server goes
    away, with backoff. ``between`` runs after each pass (the session summaries of
    pyrecall._summarize.QuietSummarizer); its failure is logged, the loop goes on."""
    delay = 1.0
    while not stop():
        try:
            with connect() as conn:
                conn.execute(sql.SQL("listen {}").format(sql.Identifier(CHANNEL)))
                worker = make_worker(conn)
                delay = 1.0
                while not stop():
                    report = worker.run(backfill_limit=BACKFILL_PASS)
                    if on_report and (report.scanned or report.indexed):
                        on_report(report)
                    if between is not None:
                        try:
                            between(conn)
                        except psycopg.OperationalError:
                            raise
                        except (psycopg.Error, PyrecallError) as exc:
                            log.warning("between batches: %s", one_line(exc))
                    if report.backfill_left:
                        continue        # older messages left: on at once (new chunks first)
                    for _ in conn.notifies(timeout=idle_timeout, stop_after=1):
                        pass
        except (psycopg.OperationalError, DatabaseError) as exc:
            # DatabaseError: pyrecall._db.connect's "cannot connect" while the server is down
            log.warning("database unavailable (%s); reconnecting in %.0f s", str(exc).strip(), delay)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
