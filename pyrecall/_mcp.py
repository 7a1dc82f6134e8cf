"""``pyrecall mcp``: the agent's memory as Model Context Protocol tools.

Built on the official ``mcp`` SDK (its ``MCPServer``, FastMCP's successor). The server acts for
one agent and can never read or write another's rows: every call runs in a transaction as the
``recall_agent`` role with ``recall.agent_id`` set to that agent, so PostgreSQL's row-level
security filters every statement (and a login role bound with ``recall.bind_agent`` must be
bound to the same agent, or the server refuses to serve). The arguments it passes name the
agent too; they are not what isolates it.

The embedding model is loaded once and the connections are kept open between calls: a call
costs one query embedding and one SQL function call. A connection the server lost (database
restart) fails before anything ran and is replaced: the next call reconnects.

Tools (each returns structured content and a short text rendering): ``recall``, ``context``,
``sessions``, ``remember``, ``forget``.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

import psycopg
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pgvector.psycopg import register_vector
from pydantic import BaseModel, Field, ValidationError

from . import _db, _migrate, _render
from ._embed import Embedder, get_embedder
from ._errors import ConfigError, DatabaseError, PyrecallError, one_line
from .client import Memory, Recall, RecallResult

log = logging.getLogger("pyrecall.mcp")

INSTRUCTIONS = """\
pyrecall: long-term memory across sessions. `recall` searches memories and past sessions by
meaning and keywords; `context` gives the session-start summary (pinned memories, recent work,
related work, failures to avoid); `expand` gives what was said around one of their results
(before and after it in its session); `sessions` lists recent sessions. `remember` stores a fact,
decision or preference for later sessions (`supersedes=<id>` corrects an older one, `pin=true`
keeps it in every context); `memories` lists those kept, `pin` pins or unpins one, `forget`
deletes one by id. Results carry ids."""

CONNECT_TIMEOUT = 5  # seconds to wait for PostgreSQL before a call fails with one line
POOL_SIZE = 4        # connections kept open between calls


# ---------------------------------------------------------------- errors

# ---------------------------------------------------------------- connections bound to the agent

AS_AGENT = ("select set_config('role', 'recall_agent', true), "
            "set_config('recall.agent_id', %s, true)")


def check_role(conn: psycopg.Connection, agent: str) -> None:
    """Refuse a login role that cannot be bound to ``agent``: one that cannot act as
    recall_agent, or one bound with recall.bind_agent to another agent (its binding wins over
    the setting, whatever the server asks). Leaves the connection as it found it."""
    user = conn.execute("select session_user").fetchone()[0]
    try:
        with conn.transaction():
            conn.execute(AS_AGENT, [agent])
            bound = conn.execute("select recall.bound_agent()").fetchone()[0]
    except psycopg.errors.InsufficientPrivilege:
        raise ConfigError(
            f"the database role {user!r} cannot act as recall_agent, so the server cannot be "
            f"bound to agent {agent!r} by row-level security: grant recall_agent to {user} (or "
            f"bind it: select recall.bind_agent('{user}', '{agent}'))") from None
    except (psycopg.errors.InvalidParameterValue, psycopg.errors.UndefinedFunction,
            psycopg.errors.InvalidSchemaName):
        raise ConfigError("the database has no recall schema (or an old one): run "
                          "`pyrecall migrate`") from None
    if bound is not None and bound != agent:
        raise ConfigError(f"the database role {user!r} is bound to agent {bound!r}, not "
                          f"{agent!r}: serve that agent (--agent-id {bound}) or log in as another role")


class Pool:
    """A few connections kept open between calls (``size``: also the most calls at once; more
    wait their turn); each call runs in a transaction bound to the agent.

    ``connection()`` begins a transaction and sets, for that transaction only, the role
    ``recall_agent`` (row-secured: a superuser or the owner loses its bypass) and the setting
    ``recall.agent_id``: every statement of the call is filtered by row-level security, and
    nothing outlives the transaction (a transaction-mode pooler such as PgBouncer may hand the
    server connection to someone else afterwards). A connection the server closed (restart,
    idle timeout) fails at ``begin``, before anything ran: it is dropped and the call goes on
    a new one, so the call after a database restart just reconnects. Thread-safe.
    """

    def __init__(self, dsn: str, agent: str, *, size: int = POOL_SIZE,
                 connect_timeout: int = CONNECT_TIMEOUT):
        self.dsn, self.agent, self.size = dsn, agent, size
        self.connect_timeout = connect_timeout
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)   # at most `size` calls at once; others wait

    def _connect(self) -> psycopg.Connection:
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=self.connect_timeout)
        except psycopg.OperationalError as exc:
            raise DatabaseError(f"cannot connect to PostgreSQL: {one_line(exc)}") from None
        try:
            register_vector(conn)
            check_role(conn, self.agent)
        except BaseException:
            conn.close()
            raise
        return conn

    def _begin(self) -> psycopg.Connection:
        """A connection in a transaction bound to the agent (a reused one that turns out
        dead is replaced)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            fresh = conn is None
            if fresh:
                conn = self._connect()
            try:
                conn.execute("begin")
                conn.execute(AS_AGENT, [self.agent])
                return conn
            except psycopg.OperationalError as exc:
                conn.close()
                if fresh:
                    raise DatabaseError(f"cannot connect to PostgreSQL: {one_line(exc)}") from None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self._slots:
            conn = self._begin()
            try:
                yield conn
                conn.execute("commit")
            except BaseException:
                if not (conn.closed or conn.broken):
                    try:
                        conn.execute("rollback")
                    except psycopg.Error:
                        conn.close()
                raise
            finally:
                self._give_back(conn)

    def _give_back(self, conn: psycopg.Connection) -> None:
        if conn.closed or conn.broken or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.close()
            return
        with self._lock:
            if len(self._idle) < self.size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class _Client(Recall):
    """The Python client on a pooled connection (its methods, not its connection handling).
    No warm-up before the first recall (Recall._warm_backend): the pool's connections serve
    call after call."""

    _warmed = True

    def __init__(self, conn: psycopg.Connection, embedder: Embedder):  # noqa: D107
        self.dsn = None
        self.conn = conn
        self._embedder = embedder
        self._model = embedder.model


def _one_torch_thread() -> None:
    """A query is a few words: one thread embeds it in milliseconds, and torch's thread team
    only adds waiting, badly so on a busy machine (several times the one-thread latency on
    2 shared cores: bench/LOG.md). Only this server's process is affected."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


class Backend:
    """What the tools share: the agent, the warm embedding model and the connection pool.

    The database is found (and the embedded server started) at the first use, not when the
    server is built: a stdio server must not let a child process write to its stdout before
    the SDK has diverted it.
    """

    def __init__(self, dsn: str | None, agent: str, *, model: str | None = None,
                 embedder: Embedder | None = None, pool_size: int = POOL_SIZE):
        if not agent or not agent.strip():
            raise ConfigError("an agent id is required (--agent-id or $PYRECALL_AGENT)")
        self.agent = agent
        self._dsn = dsn
        self.embedder = embedder or get_embedder(model)
        self.pool_size = pool_size
        self._pool: Pool | None = None
        self._lock = threading.Lock()
        self._warming = threading.Event()
        self.ready = threading.Event()

    @property
    def pool(self) -> Pool:
        with self._lock:
            if self._pool is None:
                dsn = _db.resolve_dsn(self._dsn)
                with _db.connect(dsn) as conn:  # the schema, where there is none yet (as Recall())
                    if _migrate.installed_dim(conn) is None:
                        _migrate.migrate(conn)
                self._pool = Pool(dsn, self.agent, size=self.pool_size)
            return self._pool

    def start_warming(self) -> None:
        """Warm up in a thread (once): the client's handshake is not kept waiting."""
        if not self._warming.is_set():
            self._warming.set()
            threading.Thread(target=self.warm, name="pyrecall-warm", daemon=True).start()

    def warm(self) -> None:
        """Load the model and open a connection now rather than at the first call. Failures
        are logged, not raised: the calls report them."""
        if str(getattr(self.embedder, "model", "")).startswith("local/"):
            _one_torch_thread()
        try:
            with self.pool.connection():
                pass
        except (PyrecallError, psycopg.Error) as exc:
            log.warning("database not ready: %s", one_line(exc))
        try:
            self.embedder.embed(["warm up"])
        except Exception as exc:  # noqa: BLE001 - a provider's error of any kind; recall falls back
            log.warning("embedding model not ready: %s", one_line(exc))
        self.ready.set()

    @contextmanager
    def client(self) -> Iterator[_Client]:
        with self.pool.connection() as conn:
            yield _Client(conn, self.embedder)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()


# ---------------------------------------------------------------- tool results

class MemoryOut(BaseModel):
    id: int = Field(description="The row's id: a curated memory's id (for forget / supersedes), "
                                "else the transcript chunk's.")
    content: str
    score: float
    kind: str = Field(description="memory (curated), turn_pair, window, tool, ...")
    session_id: str
    created_at: str | None = Field(description="ISO 8601.")
    memory_id: int | None = Field(None, description="Set for a curated memory (= id).")
    memory_kind: str | None = Field(None, description="note, fact, decision or preference.")
    session_title: str | None = None
    section: str | None = Field(None, description="context only: pinned, recent, related or failures.")


class RecallOut(BaseModel):
    memories: list[MemoryOut]
    source: str = Field(description="hybrid (meaning + keywords) or keyword (no query embedding).")
    note: str | None = None


class ContextOut(BaseModel):
    markdown: str = Field(description="The context block for a prompt (empty: nothing to say).")
    memories: list[MemoryOut]
    source: str


class SimilarMemory(BaseModel):
    id: int
    kind: str
    content: str
    similarity: float = Field(description="Cosine similarity to the memory just stored (0.6 and up).")


class RememberOut(BaseModel):
    id: int = Field(description="The new memory's id.")
    similar: list[SimilarMemory] = Field(default_factory=list, description=(
        "The current memories most like this one: the same fact said before, or an older value "
        "of it: forget the repeat, or remember again with supersedes=ID to correct the old one."))
    redacted: list[str] = Field(default_factory=list, description=(
        "The kinds of credential found in content and stored replaced (api_key, private_key, ...): "
        "memory never keeps a credential."))


class ForgetOut(BaseModel):
    forgotten: int = Field(description="Memories deleted (1).")


class SessionOut(BaseModel):
    session_id: str
    title: str | None
    project: str | None
    branch: str | None
    started_at: str | None
    ended_at: str | None
    messages: int
    chunks: int


class SessionsOut(BaseModel):
    sessions: list[SessionOut]


class CuratedOut(BaseModel):
    id: int
    kind: str = Field(description="note, fact, decision or preference.")
    content: str
    importance: float
    pinned: bool
    project: str | None
    created_at: str | None = Field(description="ISO 8601.")
    superseded_by: int | None = Field(None, description="Set when a newer memory replaced it.")


class MemoriesOut(BaseModel):
    memories: list[CuratedOut]


class PinOut(BaseModel):
    id: int
    pinned: bool


class MessageOut(BaseModel):
    seq: int | None = Field(description="Its place in the session (none: a memory or summary).")
    speaker: str | None = Field(description="Who said it: the chat's speaker, else User/Assistant/Tool.")
    kind: str = Field(description="text, thinking, tool_call, tool_result (memory, summary: itself).")
    content: str
    created_at: str | None = Field(description="ISO 8601.")
    in_chunk: bool = Field(description="One of the expanded memory's own messages.")


class ExpandOut(BaseModel):
    session_id: str
    session_title: str | None = None
    messages: list[MessageOut]
    tokens: int = Field(description="Their tokens, within token_budget.")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _memory_out(m: Memory, infos: dict[str, _render.SessionInfo]) -> MemoryOut:
    info = infos.get(m.session_id)
    memory_id = getattr(m, "memory_id", None)
    return MemoryOut(id=m.chunk_id, content=m.content, score=round(float(m.score), 4), kind=m.kind,
                     session_id=m.session_id, created_at=_iso(m.created_at), memory_id=memory_id,
                     memory_kind=getattr(m, "memory_kind", None) if memory_id is not None else None,
                     session_title=getattr(m, "session_title", None) or (info.title if info else None),
                     section=_render.section_of(m))


def plain_schema(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """A tool's output schema as pydantic writes it, with the same meaning in the plainest
    terms: every ``$ref`` to ``$defs`` written out in place, and an optional field's
    ``anyOf: [{"type": T}, {"type": "null"}]`` written ``"type": [T, "null"]``. An SDK client
    checks every result against the schema (jsonschema, in Python): a recall of 10 memories
    took ~7 ms to check as pydantic writes it, ~10% of the call (bench/LOG.md).

    >>> plain_schema({"$defs": {"M": {"type": "object", "properties": {"a": {"anyOf": [
    ...     {"type": "string"}, {"type": "null"}], "title": "A"}}}},
    ...     "type": "array", "items": {"$ref": "#/$defs/M"}})
    {'type': 'array', 'items': {'type': 'object', 'properties': {'a': {'title': 'A', 'type': ['string', 'null']}}}}
    """
    if defs is None and isinstance(schema, dict):
        defs = schema.get("$defs", {})
    if isinstance(schema, list):
        return [plain_schema(s, defs) for s in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs and len(schema) == 1:
        return plain_schema(defs[ref[8:]], defs)
    out = {k: plain_schema(v, defs) for k, v in schema.items() if k != "$defs"}
    branches = out.get("anyOf")
    if (isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches
            and "type" not in out):
        other = branches[0] if branches[1] == {"type": "null"} else branches[1]
        if set(other) == {"type"} and isinstance(other["type"], str):
            del out["anyOf"]
            out["type"] = [other["type"], "null"]
    return out


def _result(text: str, out: BaseModel) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=out.model_dump(mode="json"))


def _recall_text(result: RecallResult, infos: dict[str, _render.SessionInfo]) -> str:
    if not result.memories:
        return f"nothing found (source={result.source})" + (f"; {result.note}" if result.note else "")
    lines = [f"{len(result.memories)} memories (source={result.source}"
             + (f"; {result.note}" if result.note else "") + ")"]
    for m in result.memories:
        label = _render._label(m, infos.get(m.session_id))
        lines.append(f"- [{m.chunk_id}] {label} · score {m.score:.3f}\n{_render._indent(m.content)}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the server

def _since(value: str | None) -> datetime | None:
    import click

    from .cli import parse_since

    try:
        return parse_since(value)
    except click.BadParameter as exc:
        raise ToolError(f"since: {exc.message}") from None


def _as_of(value: str | None) -> datetime | None:
    if value is None or not value.strip():
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(f"as_of: {value!r}: expected a date or time like 2026-01-01 or "
                        "2026-01-01T09:30:00+00:00") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _validation_line(tool: str, exc: ValidationError, arguments: dict) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "arguments"
    got = f" (got {arguments[where]!r})" if where in arguments else ""
    return f"invalid arguments for {tool}: {where}: {err['msg']}{got}"


# Arguments renamed to the SQL functions' parameter names: the former name is still accepted
# (not shown in the tool's schema); both at once is an error.
FORMER_NAMES = {"context": {"task": "task_text"}}


class RecallServer(MCPServer):
    """MCPServer that refuses unknown arguments and reports bad ones in one line."""

    async def call_tool(self, name, arguments, context=None):
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            arguments = dict(arguments or {})
            for old, new in FORMER_NAMES.get(name, {}).items():
                if old in arguments:
                    if new in arguments:
                        raise ToolError(f"{old} is the former name of {new}: give one of them")
                    arguments[new] = arguments.pop(old)
            known = set(tool.parameters.get("properties", {}))
            unknown = sorted(set(arguments) - known)
            if unknown:
                raise ToolError(f"unknown argument(s) for {name}: {', '.join(unknown)} "
                                f"(it takes {', '.join(sorted(known)) or 'none'})")
            try:
                tool.fn_metadata.validate_arguments(arguments)
            except ValidationError as exc:
                raise ToolError(_validation_line(name, exc, arguments)) from None
        return await super().call_tool(name, arguments, context)


def _guard(backend: Backend, fn: Callable[..., CallToolResult]) -> Callable[..., CallToolResult]:
    """Errors of a call -> a ToolError of one line (an MCP error result); the server goes on."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        backend.start_warming()
        backend.ready.wait(timeout=120)
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except (PyrecallError, psycopg.Error, ValueError) as exc:
            raise ToolError(one_line(exc)) from None
    return wrapper


def build_server(backend: Backend) -> RecallServer:
    """The MCP server for ``backend``'s agent, its tools registered."""
    @asynccontextmanager
    async def lifespan(_server):
        backend.start_warming()
        yield {}

    server = RecallServer("pyrecall", instructions=INSTRUCTIONS, version=_version(),
                          log_level="WARNING", lifespan=lifespan)
    agent = backend.agent
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def recall(
        query: Annotated[str, Field(description="What to look for, in words.")],
        k: Annotated[int, Field(ge=1, le=1000, description="At most this many memories.")] = 10,
        token_budget: Annotated[int | None, Field(ge=0, description="Stop when the memories "
                                                  "would exceed this many tokens.")] = None,
        project: Annotated[str | None, Field(description="Only this project (as recorded).")] = None,
        source_agent: Annotated[str | None, Field(description="Only sessions written by this coding "
                                                  "agent or chat app: claude-code, codex, gemini, "
                                                  "aider, cline, roo-code, continue, opencode, chatgpt, "
                                                  "claude-ai.")] = None,
        since: Annotated[str | None, Field(description="Only since then: 7d, 12h, 2w, or a "
                                           "date like 2026-01-01.")] = None,
        by_session: Annotated[bool, Field(description="The best sessions first, then their "
                                          "best memories.")] = False,
        as_of: Annotated[str | None, Field(description="Recall as things stood then (a date or "
                                           "time): memories superseded since come back, "
                                           "newer ones do not.")] = None,
    ) -> Annotated[CallToolResult, RecallOut]:
        """Search this agent's memory (its curated memories and past sessions) by meaning and
        keywords, ranked in the database by relevance, recency and importance. A memory
        that another has superseded is left out (unless as_of is before the change)."""
        if not query.strip():
            raise ToolError("query is empty: say what to look for")
        when = _since(since)
        options = {"as_of": then} if (then := _as_of(as_of)) is not None else {}
        filter_ = {k: v for k, v in (("project", project), ("source_agent", source_agent)) if v} or None
        with backend.client() as r:
            if by_session:
                result = r.session_recall(agent, query, k=k, token_budget=token_budget,
                                          filter=filter_, **({"since": when} if when else {}),
                                          **options)
            else:
                result = r.recall(agent, query, k=k, token_budget=token_budget, filter=filter_,
                                  since=when, **options)
            infos = r.session_infos(m.session_id for m in result.memories)
        out = RecallOut(memories=[_memory_out(m, infos) for m in result.memories],
                        source=result.source, note=result.note)
        return _result(_recall_text(result, infos), out)

    def context(
        task_text: Annotated[str | None, Field(description="What this session is about.")] = None,
        project: Annotated[str | None, Field(description="The project (as recorded).")] = None,
        branch: Annotated[str | None, Field(description="The git branch.")] = None,
        token_budget: Annotated[int, Field(ge=0, le=1_000_000)] = 4000,
    ) -> Annotated[CallToolResult, ContextOut]:
        """The session-start context: pinned memories first, then recent work on the project
        and branch, work related to the task, failures to avoid; as Markdown for the prompt,
        and its rows."""
        with backend.client() as r:
            result = r.auto_context(agent, project=project, branch=branch, task_text=task_text,
                                    token_budget=token_budget)
            infos = r.session_infos(m.session_id for m in result.memories)
        scope = {k: v for k, v in (("project", project), ("branch", branch)) if v}
        markdown = _render.to_context(result, infos=infos, auto=True, scope=scope)
        out = ContextOut(markdown=markdown, source=result.source,
                         memories=[_memory_out(m, infos) for m in result.memories])
        return _result(markdown or "nothing remembered for this context yet", out)

    def sessions(
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 20,
        project: Annotated[str | None, Field(description="Only this project.")] = None,
        source_agent: Annotated[str | None, Field(description="Only those written by this coding "
                                                  "agent or chat app: claude-code, codex, gemini, "
                                                  "aider, cline, roo-code, continue, opencode, chatgpt, "
                                                  "claude-ai.")] = None,
    ) -> Annotated[CallToolResult, SessionsOut]:
        """This agent's recent sessions, newest first, with their titles."""
        with backend.client() as r:
            rows = r.sessions(agent, project=project, limit=limit, source_agent=source_agent)
        out = SessionsOut(sessions=[
            SessionOut(session_id=s["session_id"], title=s["title"], project=s["project"],
                       branch=s["branch"], started_at=_iso(s["started_at"]),
                       ended_at=_iso(s["ended_at"]), messages=s["messages"], chunks=s["chunks"])
            for s in rows])
        text = "\n".join(f"- {s.session_id} · {(s.started_at or '?')[:10]} · "
                         f"{s.title or '(untitled)'}" + (f" ({s.project})" if s.project else "")
                         for s in out.sessions) or f"no sessions for agent {agent!r}"
        return _result(text, out)

    def expand(
        id: Annotated[int, Field(ge=1, description="The id of a memory recall or context "
                                 "returned.")],
        token_budget: Annotated[int, Field(ge=1, le=100_000, description="At most this many "
                                           "tokens.")] = 1000,
        with_tools: Annotated[bool, Field(description="Also the tool calls, their results and "
                                          "the reasoning around it, not only what was said.")] = False,
    ) -> Annotated[CallToolResult, ExpandOut]:
        """What was said around a memory that recall or context returned: its own messages,
        then those before and after it in its session, nearest first, within token_budget
        (the rest of an exchange: what was asked before, how it ended)."""
        kinds = ("text", "thinking", "tool_call", "tool_result") if with_tools else ("text",)
        with backend.client() as r:
            rows = r.expand(agent, id, token_budget=token_budget, kinds=kinds)
            infos = r.session_infos([rows[0]["session_id"]]) if rows else {}
        if not rows:
            raise ToolError(f"memory {id}: nothing of it fits in {token_budget} token(s)")
        info = infos.get(rows[0]["session_id"])
        out = ExpandOut(session_id=rows[0]["session_id"], session_title=info.title if info else None,
                        tokens=rows[-1]["cumulative_tokens"],
                        messages=[MessageOut(seq=m["seq"], speaker=m["speaker"], kind=m["kind"],
                                             content=m["content"], created_at=_iso(m["created_at"]),
                                             in_chunk=m["in_chunk"]) for m in rows])
        head = f"{out.session_title or out.session_id} ({len(rows)} messages, {out.tokens} tokens; " \
               f"memory {id}'s marked *)"
        body = "\n\n".join(f"{'*' if m.in_chunk else ' '} {m.speaker or m.kind}"
                            + (f" [{m.kind}]" if m.kind not in ("text", "memory", "summary") else "")
                            + f": {m.content}" for m in out.messages)
        return _result(f"{head}\n\n{body}", out)

    def remember(
        content: Annotated[str, Field(description="What to remember: a fact, a decision, a "
                                      "preference, in a sentence or a few.")],
        kind: Annotated[str, Field(description="note, fact, decision or preference.")] = "note",
        importance: Annotated[float | None, Field(ge=0, le=1, description="0..1 (default 0.7): "
                                                  "weighs in ranking.")] = None,
        project: Annotated[str | None, Field(description="The project it belongs to (none: "
                                             "every project).")] = None,
        supersedes: Annotated[int | None, Field(ge=1, description="The id of the memory this "
                                                "one corrects or replaces: it is kept, as no "
                                                "longer true, and no longer recalled.")] = None,
        pin: Annotated[bool, Field(description="Always put it first in context.")] = False,
    ) -> Annotated[CallToolResult, RememberOut]:
        """Store a memory for later sessions; findable by meaning and keywords at once. To
        correct one, pass the id of the memory it replaces as supersedes. The same memory said
        again (same kind and project, same text) is kept once: its id comes back."""
        if not content.strip():
            raise ToolError("content is empty: say what to remember")
        with backend.client() as r:
            memory_id = r.remember(agent, content, kind=kind, importance=importance,
                                   project=project, supersedes=supersedes, pin=pin)
            redacted = [p for (p,) in r.conn.execute("select pattern from recall.secrets_in(%s)", [content])]
            similar = [SimilarMemory(id=m["memory_id"], kind=m["memory_kind"], content=m["content"],
                                     similarity=round(m["similarity"], 3))
                       for m in r.similar_memories(agent, memory_id=memory_id, project=project)]
        text = (f"remembered: memory {memory_id}"
                + (f", replacing memory {supersedes}" if supersedes else "")
                + (", pinned" if pin else "")
                + (f" (stored with credentials replaced: {', '.join(redacted)})" if redacted else ""))
        if similar:
            text += ("\nsimilar memories (a repeat? forget it; an older value? remember again with "
                     "supersedes=ID):" + "".join(f"\n  #{m.id} ({m.similarity:.2f}) {m.kind}: {m.content}"
                                                  for m in similar))
        return _result(text, RememberOut(id=memory_id, redacted=redacted, similar=similar))

    def memories(
        project: Annotated[str | None, Field(description="Only those of this project (and of "
                                             "none).")] = None,
        kind: Annotated[str | None, Field(description="note, fact, decision or preference.")] = None,
        pinned_only: Annotated[bool, Field(description="Only the pinned ones.")] = False,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 50,
    ) -> Annotated[CallToolResult, MemoriesOut]:
        """This agent's curated memories (what remember stored and is still true), newest
        first, with their ids: to review them, correct one (remember with supersedes), pin or
        forget one."""
        if kind is not None and kind not in ("note", "fact", "decision", "preference"):
            raise ToolError(f"kind: {kind!r} is not one of note, fact, decision, preference")
        with backend.client() as r:
            rows = r.memories(agent, project=project, kind=kind, limit=limit, pinned_only=pinned_only)
        out = MemoriesOut(memories=[
            CuratedOut(id=m.memory_id, kind=m.kind, content=m.content, importance=round(float(m.importance), 4),
                       pinned=m.pinned, project=m.project, created_at=_iso(m.created_at),
                       superseded_by=m.superseded_by) for m in rows])
        text = "\n".join(f"- [{m.id}] {m.kind}{' · pinned' if m.pinned else ''}"
                         + (f" · {m.project}" if m.project else "") + f": {m.content}"
                         for m in out.memories) or "no curated memories"
        return _result(text, out)

    def pin(
        id: Annotated[int, Field(ge=1, description="The id of one of this agent's memories.")],
        pinned: Annotated[bool, Field(description="true: first in every context; false: no "
                                      "longer.")] = True,
    ) -> Annotated[CallToolResult, PinOut]:
        """Pin a memory (it opens every session-start context, within the budget), or unpin it."""
        with backend.client() as r:
            r.pin_memory(agent, id, pinned)
        return _result(f"{'pinned' if pinned else 'unpinned'} memory {id}", PinOut(id=id, pinned=pinned))

    def forget(
        id: Annotated[int, Field(ge=1, description="The id of one of this agent's memories "
                                 "(as recall or context show it).")],
    ) -> Annotated[CallToolResult, ForgetOut]:
        """Delete one memory for good (its embedding too). Only curated memories of this
        agent can be forgotten."""
        with backend.client() as r:
            n = r.forget_memory(agent, id)
        return _result(f"forgot memory {id}", ForgetOut(forgotten=n))

    server.add_tool(_guard(backend, recall), annotations=read_only)
    server.add_tool(_guard(backend, context), annotations=read_only)
    server.add_tool(_guard(backend, sessions), annotations=read_only)
    server.add_tool(_guard(backend, expand), annotations=read_only)
    server.add_tool(_guard(backend, memories), annotations=read_only)
    server.add_tool(_guard(backend, remember),
                    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                idempotent_hint=False, open_world_hint=False))
    server.add_tool(_guard(backend, pin),
                    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                idempotent_hint=True, open_world_hint=False))
    server.add_tool(_guard(backend, forget),
                    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                                idempotent_hint=True, open_world_hint=False))
    for tool in server._tool_manager.list_tools():
        tool.parameters["additionalProperties"] = False
        if tool.fn_metadata.output_schema is not None:   # read live by the SDK (FuncMetadata)
            tool.fn_metadata.output_schema = plain_schema(tool.fn_metadata.output_schema)
    return server


def _version() -> str:
    from . import __version__

    return __version__


# ---------------------------------------------------------------- transports

def parse_http(value: str) -> tuple[str, int]:
    """``127.0.0.1:8765`` / ``[::1]:8765`` / ``8765`` (loopback) -> (host, port)."""
    value = value.strip()
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http {value!r}: expected HOST:PORT, like 127.0.0.1:8765")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RequireToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = b""
            for name, value in scope.get("headers", []):
                if name == b"authorization":
                    given = value
            scheme, _, supplied = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(supplied.strip(), self.token):
                body = b'{"error": "missing or wrong bearer token"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve(backend: Backend, *, http: str | None = None, token: str | None = None) -> None:
    """Run the server until its client goes away (stdio) or it is interrupted (HTTP)."""
    server = build_server(backend)
    try:
        if http is None:
            server.run("stdio")
            return
        import anyio
        import uvicorn

        host, port = parse_http(http)
        if not is_loopback(host) and not token:
            raise ConfigError(f"--http {http}: an address other than loopback needs --token "
                              "(requests without it are refused)")
        app = server.streamable_http_app(host=host)
        if token:
            app = RequireToken(app, token)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning")
        print(f"pyrecall mcp: agent {backend.agent!r} on http://{_hostport(host, port)}/mcp"
              + (" (bearer token required)" if token else ""), file=sys.stderr, flush=True)
        anyio.run(uvicorn.Server(config).serve)
    finally:
        backend.close()


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
