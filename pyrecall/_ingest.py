"""The one ingestion path: sessions and their messages into PostgreSQL, COPY-fast.

Every importer, the Python client and the benchmarks write through :func:`ingest`. Rows are
copied into temporary staging tables and moved with one INSERT ... SELECT each, inside one
transaction: a batch lands whole or not at all (never a half-written session). Validation,
numbering, de-duplication and chunking happen in the database (sql/idempotent/010-messages.sql),
so a re-import adds nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import sql

from . import _db
from ._errors import ConfigError
from ._text import clean_json, clean_text
from .importers._records import Message, Session, content_id

# Where a batch is read from: array parameters (one per column, text as COPY would send it)
# for a batch of up to ARRAY_BATCH_MAX_MESSAGES messages and ARRAY_BATCH_MAX_CHARS characters
# of content, else temporary tables filled by COPY. The arrays save three round trips and the
# server CPU that emptying the temporary tables costs at every commit: most of a call that
# adds a few messages. COPY wins on large batches: the server reads rows while the client
# still writes them, and building the arrays costs the client more a message (bench/LOG.md).
ARRAY_BATCH_MAX_MESSAGES = 200
ARRAY_BATCH_MAX_CHARS = 16_000_000      # a parameter cannot exceed 1 GB

SESSION_ARRAYS = """(select u.session_id, u.agent_id, u.title, u.project, u.branch,
        u.started_at::timestamptz as started_at, u.ended_at::timestamptz as ended_at,
        u.metadata::jsonb as metadata
 from unnest(%(s_id)s::text[], %(s_agent)s::text[], %(s_title)s::text[], %(s_project)s::text[],
             %(s_branch)s::text[], %(s_started)s::text[], %(s_ended)s::text[], %(s_metadata)s::text[])
      as u(session_id, agent_id, title, project, branch, started_at, ended_at, metadata))"""

MESSAGE_ARRAYS = """(select u.ord, u.session_id, u.external_id, u.role, u.kind, u.content,
        u.created_at::timestamptz as created_at, u.importance::real as importance,
        u.metadata::jsonb as metadata
 from unnest(%(m_session)s::text[], %(m_external)s::text[], %(m_role)s::text[], %(m_kind)s::text[],
             %(m_content)s::text[], %(m_created)s::text[], %(m_importance)s::text[], %(m_metadata)s::text[])
      with ordinality as u(session_id, external_id, role, kind, content, created_at, importance, metadata, ord))"""

# The staging tables are emptied at commit, and at the start of every batch: a second ingest in
# the same transaction (a bulk load of many agents, one call per agent) must not read the rows
# of the first again (its statements would re-insert them all, each refused as a duplicate by
# the message trigger: a cost that grew with the number of calls in the transaction, and a
# message deleted in between would come back).
STAGE = """
create temp table if not exists pyrecall_stage_sessions
( session_id text, agent_id text, title text, project text, branch text,
  started_at timestamptz, ended_at timestamptz, metadata jsonb ) on commit delete rows;
create temp table if not exists pyrecall_stage_messages
( ord bigint, session_id text, external_id text, role text, kind text, content text,
  created_at timestamptz, importance real, metadata jsonb ) on commit delete rows;
truncate pyrecall_stage_sessions, pyrecall_stage_messages;
"""

UPSERT_SESSIONS = sql.SQL("""
insert into recall.sessions as s
  (session_id, agent_id, title, project, branch, started_at, ended_at, metadata)
select session_id, agent_id, title, project, branch, coalesce(started_at, now()), ended_at,
       coalesce(metadata, '{{}}')
from {sessions} st
on conflict (agent_id, session_id) do update
  set title    = coalesce(excluded.title, s.title),
      project  = coalesce(excluded.project, s.project),
      branch   = coalesce(excluded.branch, s.branch),
      metadata = s.metadata || excluded.metadata
  where (s.title, s.project, s.branch, s.metadata) is distinct from
        (coalesce(excluded.title, s.title), coalesce(excluded.project, s.project),
         coalesce(excluded.branch, s.branch), s.metadata || excluded.metadata)
""")

# a session id held by another agent (and not by this one: on a Citus cluster, where a session
# id is unique within its agent only, two agents may each hold one)
FOREIGN_SESSIONS = sql.SQL("""
select st.session_id, s.agent_id
from {sessions} st
join recall.sessions s using (session_id)
where s.agent_id <> st.agent_id
  and not exists (select from recall.sessions o where o.agent_id = st.agent_id and o.session_id = st.session_id)
limit 1
""")

INSERT_MESSAGES = sql.SQL("""
insert into recall.messages
  (session_id, agent_id, external_id, role, kind, content, created_at, importance, metadata)
select m.session_id, st.agent_id, m.external_id, m.role, m.kind, m.content,
       coalesce(m.created_at, st.started_at, now()), coalesce(m.importance, 0.5),
       coalesce(m.metadata, '{{}}')
from {messages} m
join {sessions} st using (session_id)
order by m.ord
""")


def _statements(sessions: sql.Composable, messages: sql.Composable) -> tuple[str, ...]:
    """FOREIGN_SESSIONS, UPSERT_SESSIONS and INSERT_MESSAGES reading from ``sessions`` and
    ``messages`` (the array parameters, or the staging tables), rendered once."""
    src = {"sessions": sessions, "messages": messages}
    return tuple(q.format(**src).as_string(None) for q in (FOREIGN_SESSIONS, UPSERT_SESSIONS, INSERT_MESSAGES))


FROM_ARRAYS = _statements(sql.SQL(SESSION_ARRAYS), sql.SQL(MESSAGE_ARRAYS))
FROM_STAGE = _statements(sql.Identifier("pyrecall_stage_sessions"), sql.Identifier("pyrecall_stage_messages"))


@dataclass
class IngestReport:
    sessions: int = 0
    messages: int = 0           # messages given
    inserted: int = 0           # of which new (the rest were already stored)
    forgotten: int = 0          # sessions given that were forgotten (deleted): not stored again

    def __add__(self, other: IngestReport) -> IngestReport:
        return IngestReport(self.sessions + other.sessions, self.messages + other.messages,
                            self.inserted + other.inserted, self.forgotten + other.forgotten)


def storable_importance(value: float | None) -> float | None:
    """An importance the ``real`` column stores: a float too small for float32 (6e-201, which
    is in 0..1 all the same) would make PostgreSQL refuse the whole batch, so it becomes 0."""
    if value is None:
        return None
    value = float(value)
    return 0.0 if 0 < abs(value) < 1e-30 else value


def _stable_ids(session: Session) -> list[str]:
    """External ids for messages the source gives none (importers._records.content_id)."""
    seen: Counter[str] = Counter()
    return [m.external_id or content_id(m, seen) for m in session.messages]


def ingest(conn: psycopg.Connection, sessions: Iterable[Session], *, agent_id: str,
           keep_empty: bool = False) -> IngestReport:
    """Write sessions and their messages in one transaction; return what was new.

    ``agent_id`` is used for sessions that do not name their own. A session without
    messages is written only with ``keep_empty`` (an importer's empty parse creates nothing).

    >>> ingest(conn, [Session("s1", messages=[Message(None, "user", "text", "hi")])],
    ...        agent_id="claude-code")  # doctest: +SKIP
    IngestReport(sessions=1, messages=1, inserted=1)
    """
    sessions = [s for s in sessions if s.messages or keep_empty]
    report = IngestReport(sessions=len(sessions))
    if not sessions:
        return report
    if not agent_id:
        raise ConfigError("an agent id is required to ingest sessions")
    rows = [(s, m, ext) for s in sessions for m, ext in zip(s.messages, _stable_ids(s), strict=True)]
    report.messages = len(rows)
    with conn.transaction(), conn.cursor() as cur:
        if (len(rows) <= ARRAY_BATCH_MAX_MESSAGES
                and sum(len(m.content) for _, m, _ in rows) <= ARRAY_BATCH_MAX_CHARS):
            s_params, m_params = _session_arrays(sessions, agent_id), _message_arrays(rows)
            m_params.update(s_params)
            foreign, upsert, insert = FROM_ARRAYS
        else:
            _stage(cur, sessions, rows, agent_id)
            s_params = m_params = None
            foreign, upsert, insert = FROM_STAGE
        # (on a Citus cluster a session id is an agent's own: no other agent's to clash with)
        clash = None if _db.distributed(conn) else cur.execute(foreign, s_params).fetchone()
        if clash:
            raise ConfigError(f"session {clash[0]!r} already belongs to agent {clash[1]!r}; "
                              "a session keeps the agent it was first stored under")
        given = {(clean_text(s.agent_id or agent_id), clean_text(s.session_id)) for s in sessions}
        # on a Citus cluster the INSERT ... SELECT's row count counts the rows the message trigger
        # skipped on the shards too (a message stored already, a forgotten session's): the
        # messages of these sessions are counted before and after instead
        stored = (_stored_messages(cur, given) if _db.distributed(conn) else None)
        cur.execute(upsert, s_params)
        cur.execute(insert, m_params)
        report.inserted = cur.rowcount if stored is None else _stored_messages(cur, given) - stored
        # a session deleted is not stored again (its rows are skipped in SQL:
        # sql/idempotent/059-retention.sql); told, so that "nothing new" is not a mystery (asked
        # only when some message was not stored: no query when all are new)
        if report.inserted < report.messages:
            report.forgotten = sum(tuple(r) in given for r in cur.execute(
                "select agent_id, session_id from recall.forgotten_sessions "
                "where agent_id = any (%s) and session_id = any (%s)",
                [sorted({a for a, _ in given}), sorted({sid for _, sid in given})]))
        if _db.distributed(conn):
            # a Citus cluster chunks from here, not in the message triggers (sql/citus/distribute.sql)
            cur.execute("select recall.chunk_sessions(%s, %s)",
                        [[clean_text(s.agent_id or agent_id) for s in sessions],
                         [clean_text(s.session_id) for s in sessions]])
    return report


def _stored_messages(cur, given: set[tuple[str, str]]) -> int:
    """How many messages the (agent, session) pairs hold (filtered by the agents: routed on Citus)."""
    by_agent: dict[str, list[str]] = {}
    for agent, sid in given:
        by_agent.setdefault(agent, []).append(sid)
    return sum(cur.execute("select count(*) from recall.messages where agent_id = %s and session_id = any (%s)",
                           [agent, sids]).fetchone()[0] for agent, sids in by_agent.items())


def _session_row(s: Session, agent_id: str) -> list:
    return [clean_text(s.session_id), clean_text(s.agent_id or agent_id), _opt(s.title), _opt(s.project),
            _opt(s.branch), s.started_at, s.ended_at, clean_json(s.metadata or {})]


def _message_row(s: Session, m: Message, ext: str) -> list:
    return [clean_text(s.session_id), clean_text(ext), m.role, m.kind, clean_text(m.content), m.created_at,
            storable_importance(m.importance), clean_json(m.metadata or {})]


def _text(value) -> str | None:
    """A value as COPY's text format writes it (what the arrays carry, cast back in SQL)."""
    if value is None or isinstance(value, str):
        return value
    return repr(value) if isinstance(value, float) else str(value)


def _columns(rows: list[list], names: list[str]) -> dict[str, list]:
    return {name: [_text(row[i]) for row in rows] for i, name in enumerate(names)}


def _session_arrays(sessions: list[Session], agent_id: str) -> dict[str, list]:
    return _columns([_session_row(s, agent_id) for s in sessions],
                    ["s_id", "s_agent", "s_title", "s_project", "s_branch", "s_started", "s_ended", "s_metadata"])


def _message_arrays(rows: list[tuple[Session, Message, str]]) -> dict[str, list]:
    return _columns([_message_row(*r) for r in rows],
                    ["m_session", "m_external", "m_role", "m_kind", "m_content", "m_created", "m_importance",
                     "m_metadata"])


def _stage(cur: psycopg.Cursor, sessions: list[Session], rows: list[tuple[Session, Message, str]],
           agent_id: str) -> None:
    """COPY a large batch into the temporary staging tables."""
    cur.execute(STAGE)
    with cur.copy("copy pyrecall_stage_sessions (session_id, agent_id, title, project, branch, "
                  "started_at, ended_at, metadata) from stdin") as cp:
        for s in sessions:
            cp.write_row(_session_row(s, agent_id))
    with cur.copy("copy pyrecall_stage_messages (ord, session_id, external_id, role, kind, "
                  "content, created_at, importance, metadata) from stdin") as cp:
        for i, r in enumerate(rows):
            cp.write_row([i, *_message_row(*r)])


def _opt(value: str | None) -> str | None:
    return clean_text(value) if value else None


def as_message(item: Message | dict) -> Message:
    """A Message from a Message or a dict with the same keys (role and content required)."""
    if isinstance(item, Message):
        return item
    if not isinstance(item, dict) or "content" not in item:
        raise ConfigError(f"a message needs at least 'role' and 'content', got {item!r:.80}")
    # wrong types are named here, before any row is written (not as a TypeError deep inside)
    for key in ("role", "kind", "content"):
        if key in item and not isinstance(item[key], str):
            raise ConfigError(f"message {key} must be text, got {type(item[key]).__name__}")
    created = item.get("created_at")
    if isinstance(created, str):
        try:
            created = datetime.fromisoformat(created)
        except ValueError:
            raise ConfigError(f"message created_at must be a datetime or ISO 8601 text, "
                              f"got {created!r:.40}") from None
    elif created is not None and not isinstance(created, datetime):
        raise ConfigError(f"message created_at must be a datetime, got {type(created).__name__}")
    importance = item.get("importance")
    if importance is not None and (isinstance(importance, bool) or not isinstance(importance, (int, float))):
        raise ConfigError(f"message importance must be a number between 0 and 1, got {importance!r:.40}")
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ConfigError(f"message metadata must be a dict, got {type(metadata).__name__}")
    ext = item.get("external_id") or item.get("id")
    return Message(external_id=None if ext is None else str(ext),
                   role=item.get("role", "user"), kind=item.get("kind", "text"),
                   content=item["content"], created_at=created,
                   importance=importance, metadata=metadata)
