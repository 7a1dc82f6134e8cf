"""Agent isolation, proven as a hostile agent would probe it.

Two agents, A and B, with the same kinds of history (turns, tools, failures, code, summaries,
embeddings, source files); B's texts carry a secret and B's vectors sit right on the query.
Agent A's login role then calls every function of schema ``recall`` (enumerated from pg_proc,
so a function added later is covered without touching this file) and touches every table.
What it observes must be *identical* whether or not B's data exists: rows, scores, counts,
error messages. That one comparison covers reading, counting, score leakage and inference
through errors at once. Statistics, role binding and the remaining, documented channels
(docs/SECURITY.md) have their own tests.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb
from test_upgrade import old_sql

from pyrecall import _migrate

AS_OF = datetime(2026, 6, 1, tzinfo=UTC)
DIM = 384
SECRET = "hunter2-secret-of-b"
PASSWORD = "pw-for-tests"
PUBLIC_FUNCTIONS = {"hybrid_recall", "hybrid_recall_v1", "hybrid_recall_v2", "session_recall",
                    "session_recall_v1", "session_recall_v2", "auto_context", "auto_context_v1",
                    "auto_context_v2", "summarize_sessions", "hybrid_recall_v4", "session_recall_v4",
                    "auto_context_v4", "remember", "forget_memory", "pin_memory", "memories",
                    "hybrid_recall_v6", "session_recall_v6", "auto_context_v6", "hybrid_recall_v7",
                    "session_recall_v8", "session_recall_v9", "hybrid_recall_v9", "hybrid_recall_v10",
                    "session_recall_v10", "auto_context_v10", "hybrid_recall_v11", "session_recall_v11",
                    "auto_context_v12", "hybrid_recall_v13", "session_recall_v13", "auto_context_v13",
                    "auto_context_v14", "auto_context_v15",
                    "embedding_model", "redact", "secrets_in", "redact_stored", "unforget_sessions",
                    "similar_memories", "agent_status"}
# v6's search runs as the owner, after checking the caller as the policies would
# (sql/released/v6.sql; tests/test_recall_v6.py): the only SECURITY DEFINER functions
DEFINER = ["recall._check_reader_v6(text)",
           "recall._recall_arms_v10(text,text,vector,integer,text,jsonb[],text[],"
           "timestamp with time zone,timestamp with time zone,timestamp with time zone,text)",
           "recall._recall_arms_v6(text,text,vector,integer,text,jsonb[],text[],"
           "timestamp with time zone,timestamp with time zone,timestamp with time zone,text)"]
ROW_TABLES = {"sessions", "messages", "chunks", "source_files", "recall_log", "forgotten_sessions"}


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


RNG = np.random.default_rng(11)
QUERY = unit(RNG.normal(size=DIM))


# ---------------------------------------------------------------- the world

def conversation(marker: str, sid: str):
    """(role, kind, content, metadata) of one session: every chunk kind, a failure, code."""
    return [
        ("user", "text", f"How do we deploy the docker stack? {marker}", {}),
        ("assistant", "text", f"Run docker compose up with the healthcheck. {marker}", {}),
        ("assistant", "tool_call", "Bash: pytest -q", {"tool_use_id": f"{sid}-t1", "tool_name": "Bash"}),
        ("tool", "tool_result", f"Traceback (most recent call last): deploy failed {marker}",
         {"tool_use_id": f"{sid}-t1", "is_error": True}),
        ("assistant", "thinking", f"The deploy failed because port 8080 was taken {marker}", {}),
        ("assistant", "text", f"Fixed it:\n```sh\ndocker compose up -d # {marker}\n```\nDone.", {}),
    ]


def build_world(conn, agents=("A", "B")):
    for agent in agents:
        marker = SECRET if agent == "B" else "alpha"
        for s in (1, 2):
            sid = f"{agent}-{s}"
            conn.execute("insert into recall.sessions (session_id, agent_id, title, project, branch, metadata) "
                         "values (%s, %s, %s, 'shop', 'main', %s)",
                         [sid, agent, f"deploy notes {marker}", Jsonb({"team": "core"})])
            for i, (role, kind, content, meta) in enumerate(conversation(marker, sid)):
                conn.execute("insert into recall.messages (session_id, role, kind, content, created_at, metadata) "
                             "values (%s, %s, %s, %s, %s, %s)",
                             [sid, role, kind, content, AS_OF - timedelta(days=10 * s, minutes=60 - i), Jsonb(meta)])
        conn.execute("insert into recall.source_files (path, agent_id, format, size, mtime) "
                     "values (%s, %s, 'jsonl', 10, %s)", [f"/home/{agent}/{marker}.jsonl", agent, AS_OF])
        conn.execute("insert into recall.recall_log (agent_id, function, latency_ms, n_rows, query_text) "
                     "values (%s, 'hybrid_recall', 2.5, 0, %s)", [agent, f"where is {marker}"])
        # a session forgotten (its id recorded in recall.forgotten_sessions), B's naming the secret
        conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, %s)", [f"{agent}-gone-{marker}", agent])
        conn.execute("delete from recall.sessions where session_id = %s", [f"{agent}-gone-{marker}"])
    # B's vectors sit on the query: were B visible, B would win every vector ranking
    for cid, agent in conn.execute("select chunk_id, agent_id from recall.chunks order by chunk_id").fetchall():
        noise = 0.02 if agent == "B" else 0.8
        vec = unit(QUERY + noise * RNG.normal(size=DIM) / np.sqrt(DIM) * 10)
        # B's model name carries the secret too (recall.embedding_model must not show it to A)
        model = f"test-{SECRET}" if agent == "B" else "test"
        conn.execute("update recall.chunks set embedding = %s, embedding_model = %s, embedded_at = %s "
                     "where chunk_id = %s", [vec, model, AS_OF, cid])
    conn.execute("select recall.summarize_sessions(only_stale => false)")


@pytest.fixture
def roles(conn):
    """Login roles (with a password, so that any server's authentication accepts them):
    agent (recall_agent, bound by the setting), admin (recall_admin), bound (bind_agent to A)."""
    suffix = uuid.uuid4().hex[:8]
    names = {k: f"sec_{k}_{suffix}" for k in ("agent", "admin", "bound")}
    conn.execute(f"create role {names['agent']} login password '{PASSWORD}' in role recall_agent")
    conn.execute(f"create role {names['admin']} login password '{PASSWORD}' in role recall_admin")
    conn.execute(f"create role {names['bound']} login password '{PASSWORD}'")
    conn.execute("select recall.bind_agent(%s, 'A')", [names["bound"]])
    yield names
    for name in names.values():
        conn.execute(f"drop owned by {name}")
        conn.execute(f"drop role {name}")


def login(db_url, role, agent=None):
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    info.update(user=role, password=PASSWORD)
    c = psycopg.connect(psycopg.conninfo.make_conninfo(**info), autocommit=True)
    register_vector(c)
    c.execute("set statement_timeout = '60s'")
    if agent is not None:
        c.execute("select set_config('recall.agent_id', %s, false)", [agent])
    return c


def fingerprint(conn) -> str:
    """One hash of every row of every table of schema recall (as the owner sees them)."""
    tables = [r[0] for r in conn.execute(
        "select relname from pg_class where relnamespace = 'recall'::regnamespace and relkind = 'r' "
        "order by 1").fetchall()]
    parts = [conn.execute(f"select md5(coalesce(string_agg(t::text, '|' order by t::text), '')) "
                          f"from recall.{t} t").fetchone()[0] for t in tables if t != "migrations"]
    return "".join(parts)


# ---------------------------------------------------------------- every function, generically

FUNCTIONS = """
select p.proname, p.oid::regprocedure::text, format_type(p.prorettype, null),
       p.pronargs, p.pronargdefaults, p.proargnames, p.proargmodes,
       array(select format_type(t, null) from unnest(p.proargtypes::oid[]) t)
from pg_proc p
where p.pronamespace = 'recall'::regnamespace and p.prokind = 'f'
order by 2"""


def by_name(target: str, chunk_ids: dict[str, list[int]]) -> dict[str, object]:
    """Argument values by parameter name, aimed at agent ``target``."""
    ids = chunk_ids[target]
    return {
        "agent_id": target, "p_agent_id": target,
        "query_text": "docker deploy failed", "task_text": "docker deploy failed",
        "query_embedding": QUERY, "task_embedding": QUERY,
        "session_ids": [f"{target}-1", f"{target}-2"], "from_seqs": [0, 0],
        "p_session_id": f"{target}-1", "p_seq": 3,
        "p_ids": ids, "p_scores": [1.0] * len(ids), "p_k": 10, "p_n": 10, "p_budget": None,
        "p_dedup": 0.95,
        "project": "shop", "branch": "main", "as_of": AS_OF, "only_stale": False,
        "exclude_session_id": None, "p_exclude_session_id": None, "p_filter": None, "p_kinds": None,
        "p_since": None, "p_until": None, "p_also": ids,
        "p_filters": None, "p_as_of": None, "p_project": None, "memory_id": ids[0], "p_memory_id": ids[0],
        "content": "docker deploy failed",
    }


BY_TYPE = {  # a value for a required parameter no name above covers
    "text": "docker", "integer": 3, "bigint": 1, "boolean": False, "double precision": 0.5, "real": 0.5,
    "jsonb": Jsonb({}), "interval": timedelta(days=30), "timestamp with time zone": AS_OF,
    "tsquery": "docker", "vector": QUERY, "text[]": ["docker"], "integer[]": [0],
    "bigint[]": [1], "double precision[]": [1.0], "boolean[]": [True],
}


def calls(conn, chunk_ids):
    """[(key, sql, params)]: each function of schema recall, aimed at A and at B."""
    out, seen = [], set()
    for name, signature, rettype, nargs, ndefaults, argnames, argmodes, argtypes in conn.execute(FUNCTIONS):
        if rettype == "trigger":
            continue  # not callable directly; they run inside the table statements tested below
        seen.add(name)
        names = [n for n, m in zip(argnames or [], argmodes or ["i"] * nargs, strict=False)
                 if m in ("i", "b", "v")] if argnames else []
        names += [f"${i + 1}" for i in range(len(names), nargs)]
        for target in ("A", "B"):
            values = by_name(target, chunk_ids)
            args, params = [], []
            for i, (arg, typ) in enumerate(zip(names, argtypes, strict=True)):
                required = i < nargs - ndefaults
                if arg in values and (values[arg] is not None or required):
                    value = values[arg]
                elif required:
                    assert typ in BY_TYPE, f"{signature}: add a test value for parameter {arg} ({typ})"
                    value = BY_TYPE[typ]
                else:
                    continue
                args.append(f"{arg} => %s::{typ}" if not arg.startswith("$") else f"%s::{typ}")
                params.append(value)
            out.append((f"{signature} -> {target}", f"select * from recall.{name}({', '.join(args)})", params))
    missing = PUBLIC_FUNCTIONS - seen
    assert not missing, f"public functions not found in pg_proc: {missing}"
    return out


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d(:\d\d)?)?")


def _plain(value):
    if isinstance(value, np.ndarray):
        return [round(float(x), 6) for x in value]
    if hasattr(value, "to_list"):
        return [round(float(x), 6) for x in value.to_list()]
    if isinstance(value, str):
        return _TIMESTAMP.sub("<ts>", value)   # vector_index_ddl stamps clock_timestamp()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def observe(conn, calls_) -> dict[str, tuple]:
    """What each call shows this connection: its rows, or its error (SQLSTATE and messages).
    Every call runs in a transaction that is rolled back: no call changes what the next sees."""
    seen = {}
    for key, sql_, params in calls_:
        try:
            with conn.transaction():
                rows = conn.execute(sql_, params).fetchall()
                if key.startswith("recall.index_info("):
                    # idx_scan counts every query that used the index, the prober's own included;
                    # size and reltuples move too: the probes' rolled-back inserts grow the index,
                    # and autovacuum/ANALYZE may re-estimate its rows between two looks
                    rows = [r[:5] + r[9:] for r in rows]
                if key.startswith("recall.storage_stats("):
                    # sizes on disk (the probes' rolled-back updates grow the heap too) and the
                    # planner's row estimate (pg_class.reltuples, readable by every role in the
                    # catalog anyway; autovacuum/ANALYZE move it between the two looks)
                    rows = sorted(r[:3] for r in rows)
                if key.startswith("recall._text_arm_"):
                    # a set of scored candidates (the callers order them): its row order follows
                    # the plan, which a re-estimate by autovacuum/ANALYZE between two looks can
                    # change (seen once in a fresh-clone run: the same rows in another order)
                    rows = sorted(rows)
                if key.startswith("recall.vector_search_curve("):
                    rows = [r[:-1] for r in rows]   # its last column is a time in ms
                if key.startswith("recall.remember("):
                    # a new memory's id: the next value of the chunks' identity (not rolled back)
                    rows = [[type(r[0]).__name__] for r in rows]
                seen[key] = ("rows", _plain(rows))
                raise psycopg.Rollback
        except psycopg.Error as exc:
            d = exc.diag
            seen[key] = ("error", exc.sqlstate, d.message_primary, d.message_detail, d.message_hint)
    return seen


def leaks(observed: dict[str, tuple]) -> list[str]:
    return [k for k, v in observed.items() if SECRET in repr(v)]


def delete_agent(conn, agent):
    conn.execute("delete from recall.sessions where agent_id = %s", [agent])
    conn.execute("delete from recall.source_files where agent_id = %s", [agent])


@pytest.mark.parametrize("arm", ["exact", "table index", "own index"])
def test_every_function_shows_agent_a_the_same_with_or_without_b(db_url, conn, roles, arm):
    build_world(conn)
    if arm == "table index":   # every agent past the exact-scan threshold: the shared HNSW index serves
        conn.execute("update recall.config set value = '1' where key = 'exact_scan_max_rows'")
        conn.execute("create index chunks_embedding_idx on recall.chunks using hnsw (embedding vector_cosine_ops)")
    if arm == "own index":     # each agent its own partial index (recall.create_vector_index)
        conn.execute("update recall.config set value = '1' where key = 'agent_index_min_rows'")
        conn.execute("select recall.create_vector_index('hnsw')")
        assert conn.execute("select count(*) from pg_index where indrelid = 'recall.chunks'::regclass "
                            "and indpred is not null and pg_get_indexdef(indexrelid) like '%hnsw%'").fetchone()[0] == 2
    chunk_ids = {a: [r[0] for r in conn.execute(
        "select chunk_id from recall.chunks where agent_id = %s order by chunk_id", [a])] for a in "AB"}
    probes = calls(conn, chunk_ids)
    before = fingerprint(conn)
    with login(db_url, roles["agent"], "A") as a, login(db_url, roles["bound"]) as bound, \
            login(db_url, roles["agent"]) as unset, login(db_url, roles["admin"]) as admin:
        seen_a, seen_bound, seen_unset = observe(a, probes), observe(bound, probes), observe(unset, probes)
        seen_admin = observe(admin, probes)
        assert fingerprint(conn) == before, "a probe changed the database"
        # the probes do reach B's data when allowed to: the admin sees the secret
        assert any(SECRET in repr(seen_admin[k]) for k in seen_admin if "hybrid_recall(" in k and k.endswith("B"))
        assert leaks(seen_a) == [] and leaks(seen_bound) == [] and leaks(seen_unset) == []
        # A sees its own history through the public functions ...
        for fn in ("hybrid_recall", "session_recall", "auto_context"):
            key = next(k for k in seen_a if k.startswith(f"recall.{fn}(") and k.endswith("-> A"))
            assert seen_a[key][0] == "rows" and len(seen_a[key][1]) > 0, key
        # ... and sees exactly the same when B's data does not exist at all
        delete_agent(conn, "B")
        assert observe(a, probes) == seen_a
        assert observe(bound, probes) == seen_bound
        # a role without the setting sees exactly what it sees in an empty database
        delete_agent(conn, "A")
        assert observe(unset, probes) == seen_unset


def test_enumerated_functions_include_the_public_ones(conn):
    names = {r[0] for r in conn.execute("select proname from pg_proc where pronamespace = 'recall'::regnamespace")}
    assert PUBLIC_FUNCTIONS | {"bind_agent", "bound_agent", "restrict_statistics"} <= names


def test_every_function_runs_as_the_caller_with_a_pinned_search_path(conn):
    """All but v6's two definer functions (DEFINER), which test_recall_v6 holds to the policies."""
    rows = conn.execute("""select p.oid::regprocedure::text, p.prosecdef, p.proconfig
                           from pg_proc p where p.pronamespace = 'recall'::regnamespace""").fetchall()
    assert len(rows) > 20
    definer = sorted(sig for sig, secdef, _ in rows if secdef)
    assert definer == DEFINER, "SECURITY DEFINER functions run with the owner's rights (no RLS)"
    for sig, _, config in rows:
        path = next((c.split("=", 1)[1] for c in config or [] if c.startswith("search_path=")), None)
        assert path is not None, f"{sig} has no search_path: a caller's schema could shadow what it calls"
        parts = [p.strip() for p in path.split(",")]
        assert parts[0] == "pg_catalog" and parts[-1] == "pg_temp", f"{sig}: search_path {path}"


# ---------------------------------------------------------------- every table

INSERT_B = {  # a row of agent B, for each table that has agent_id
    "sessions": ("insert into recall.sessions (session_id, agent_id) values ('B-new', 'B')",
                 psycopg.errors.InsufficientPrivilege),
    "messages": ("insert into recall.messages (session_id, agent_id, role, content) "
                 "values ('B-1', 'B', 'user', 'planted')", psycopg.errors.ForeignKeyViolation),
    "chunks": ("insert into recall.chunks (agent_id, session_id, kind, first_seq, message_ids, content, "
               "n_tokens, created_at) values ('B', 'B-1', 'message', 99, '{}', 'planted', 1, now())",
               psycopg.errors.InsufficientPrivilege),
    "source_files": ("insert into recall.source_files (path, agent_id, format, size, mtime) "
                     "values ('/planted', 'B', 'jsonl', 1, now())", psycopg.errors.InsufficientPrivilege),
    "recall_log": ("insert into recall.recall_log (agent_id, function, latency_ms, n_rows) "
                   "values ('B', 'hybrid_recall', 1, 0)", psycopg.errors.InsufficientPrivilege),
    "forgotten_sessions": ("insert into recall.forgotten_sessions (agent_id, session_id) values ('B', 'B-9')",
                           psycopg.errors.InsufficientPrivilege),
}


def test_every_table_with_agent_rows_is_row_secured(conn):
    rows = conn.execute("""select c.relname, c.relrowsecurity,
                                  array(select p.polname from pg_policy p where p.polrelid = c.oid order by 1)
                           from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attname = 'agent_id'
                           where c.relnamespace = 'recall'::regnamespace and c.relkind in ('r', 'p')""").fetchall()
    assert {r[0] for r in rows} == ROW_TABLES | {"agent_bindings"} and ROW_TABLES == set(INSERT_B)
    for table, rls, policies in rows:
        assert rls, f"recall.{table} has agent rows but no row-level security"
        if table == "agent_bindings":   # rows keyed by role: each role its own (see the binding tests)
            assert policies == ["admin_rows", "own_binding"], table
        else:
            assert policies == ["admin_rows", "agent_bound", "agent_rows"], table
    # what recall_agent may read besides them holds no agent data; nobody but the owner writes bindings
    readable = {r[0] for r in conn.execute(
        "select relname from pg_class where relnamespace = 'recall'::regnamespace and relkind in ('r', 'v', 'm') "
        "and has_table_privilege('recall_agent', oid, 'select')")}
    # (secret_patterns: the patterns every writer's trigger applies; written by the owner only)
    assert readable - ROW_TABLES == {"config", "agent_bindings", "secret_patterns"}
    for role in ("recall_agent", "recall_admin"):
        for privilege in ("insert", "update", "delete", "truncate"):
            assert not conn.execute("select has_table_privilege(%s, 'recall.secret_patterns', %s)",
                                    [role, privilege]).fetchone()[0], (role, privilege)
            assert not conn.execute("select has_table_privilege(%s, 'recall.agent_bindings', %s)",
                                    [role, privilege]).fetchone()[0], (role, privilege)


@pytest.mark.parametrize("who", ["setting", "bound"])
def test_agent_reads_counts_and_modifies_nothing_of_b(db_url, conn, roles, who):
    build_world(conn)
    before = {t: conn.execute(f"select count(*), md5(string_agg(x::text, '' order by x::text)) "
                              f"from recall.{t} x where agent_id = 'B'").fetchone() for t in ROW_TABLES}
    role, agent = (roles["agent"], "A") if who == "setting" else (roles["bound"], None)
    with login(db_url, role, agent) as c:
        assert c.execute("select recall.embedding_model('A'), recall.embedding_model('B')").fetchone() == (
            "test", None)
        for table, (insert, error) in INSERT_B.items():
            assert c.execute(f"select count(*) from recall.{table} where agent_id = 'B'").fetchone()[0] == 0
            assert c.execute(f"select count(distinct agent_id) from recall.{table}").fetchone()[0] == 1
            assert c.execute(f"update recall.{table} set agent_id = agent_id where agent_id = 'B'").rowcount == 0
            assert c.execute(f"delete from recall.{table} where agent_id = 'B'").rowcount == 0
            with pytest.raises(error):
                c.execute(insert)
            # A's own rows cannot be handed to B either
            with pytest.raises((psycopg.errors.InsufficientPrivilege, psycopg.errors.CheckViolation)):
                c.execute(f"update recall.{table} set agent_id = 'B' where agent_id = 'A'")
    after = {t: conn.execute(f"select count(*), md5(string_agg(x::text, '' order by x::text)) "
                             f"from recall.{t} x where agent_id = 'B'").fetchone() for t in ROW_TABLES}
    assert after == before


def test_admin_sees_all_and_no_setting_sees_nothing(db_url, conn, roles):
    build_world(conn)
    totals = {t: conn.execute(f"select count(*) from recall.{t}").fetchone()[0] for t in ROW_TABLES}
    with login(db_url, roles["admin"]) as admin, login(db_url, roles["agent"]) as unset:
        for t in ROW_TABLES:
            assert admin.execute(f"select count(*) from recall.{t}").fetchone()[0] == totals[t] > 0
            assert unset.execute(f"select count(*) from recall.{t}").fetchone()[0] == 0
        unset.execute("select set_config('recall.agent_id', '', false)")
        assert unset.execute("select count(*) from recall.chunks").fetchone()[0] == 0
        rows = admin.execute("select content from recall.hybrid_recall(agent_id => 'B', query_text => 'docker', "
                             "as_of => %s)", [AS_OF]).fetchall()
        assert any(SECRET in r[0] for r in rows)


def test_errors_reveal_no_row_of_another_agent(db_url, conn, roles):
    build_world(conn)
    with login(db_url, roles["agent"], "A") as c:
        # a session id is global: taking B's is refused, but the error shows no key or row
        with pytest.raises(psycopg.errors.UniqueViolation) as err:
            c.execute("insert into recall.sessions (session_id, agent_id) values ('B-1', 'A')")
        assert err.value.diag.message_detail is None
        # B's session and a session that does not exist look the same
        msgs = []
        for sid in ("B-1", "no-such-session"):
            with pytest.raises(psycopg.errors.ForeignKeyViolation) as err:
                c.execute("insert into recall.messages (session_id, role, content) values (%s, 'user', 'x')", [sid])
            msgs.append(err.value.diag.message_primary.replace(sid, "<id>"))
        assert msgs[0] == msgs[1]
        # and a row-level security refusal names the policy, never the row
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
            c.execute("insert into recall.sessions (session_id, agent_id) values ('C-1', 'B')")
        assert SECRET not in str(err.value) and err.value.diag.message_detail is None
    assert conn.execute("select agent_id, title from recall.sessions where session_id = 'B-1'").fetchone() == (
        "B", f"deploy notes {SECRET}")


def test_agent_cannot_plant_objects_or_read_catalog_statistics(db_url, conn, roles):
    with login(db_url, roles["agent"], "A") as c:
        for ddl in ("create table public.trap (x int)", "create table recall.trap (x int)",
                    "create function public.vector_dims(vector) returns int language sql as 'select 1'",
                    "create function recall.hybrid_recall(text) returns int language sql as 'select 1'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(ddl)
        for table in ("pg_statistic", "recall.migrations"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(f"select * from {table} limit 1")


# ---------------------------------------------------------------- statistics

def test_pg_stats_of_row_secured_tables_hidden_from_agents(db_url, conn, roles):
    build_world(conn)
    conn.execute("analyze recall.sessions, recall.messages, recall.chunks, recall.source_files, recall.recall_log, "
                 "recall.forgotten_sessions")
    owner_sees = conn.execute("select tablename, attname, most_common_vals::text from pg_stats "
                              "where schemaname = 'recall'").fetchall()
    assert {r[0] for r in owner_sees} >= ROW_TABLES
    assert any(r[1] == "agent_id" and "B" in (r[2] or "") for r in owner_sees)
    with login(db_url, roles["agent"], "A") as c, login(db_url, roles["bound"]) as b:
        for who in (c, b):
            assert who.execute("select count(*) from pg_stats where schemaname = 'recall' "
                               "and tablename = any(%s)", [list(ROW_TABLES)]).fetchone()[0] == 0
            assert who.execute("select count(*) from pg_stats_ext where schemaname = 'recall'").fetchone()[0] == 0


def estimate(c, where: str, params=()) -> float:
    plan = c.execute(f"explain (format json) select * from recall.chunks where {where}", params).fetchone()[0]
    return plan[0]["Plan"]["Plan Rows"]


def test_planner_estimates_leak_agent_sizes_unless_statistics_restricted(db_url, conn, roles):
    """PostgreSQL uses statistics through leakproof operators (text =) even under row-level
    security: an agent's EXPLAIN estimates reveal other agents' sizes and frequent values.
    recall.restrict_statistics() takes those values out of the statistics."""
    build_world(conn)
    conn.execute("insert into recall.messages (session_id, role, content) "
                 "select 'B-1', 'system', 'filler ' || g from generate_series(1, 400) g")
    conn.execute("analyze recall.chunks")
    b_text = conn.execute("select content from recall.chunks where agent_id = 'B' limit 1").fetchone()[0]
    with login(db_url, roles["agent"], "A") as c:
        assert estimate(c, "agent_id = 'B'") > 100 * estimate(c, "agent_id = 'nobody'")  # the leak
        restricted = {tuple(r) for r in conn.execute("select * from recall.restrict_statistics()")}
        assert {("chunks", "agent_id"), ("chunks", "content"), ("messages", "content"),
                ("sessions", "session_id"), ("source_files", "path")} <= restricted
        assert not {("chunks", "kind"), ("messages", "role")} & restricted
        conn.execute("analyze recall.chunks")
        assert estimate(c, "agent_id = 'B'") == estimate(c, "agent_id = 'nobody'")
        assert estimate(c, "content = %s", [b_text]) == estimate(c, "content = 'no such text'")
        left = conn.execute("select attname from pg_stats where schemaname = 'recall' and tablename = 'chunks' "
                            "and attname in ('agent_id', 'content', 'session_id', 'metadata', 'tsv')").fetchall()
        assert left == []
        # undo: the default statistics come back with the next ANALYZE
        conn.execute("select * from recall.restrict_statistics(false)")
        conn.execute("analyze recall.chunks")
        assert estimate(c, "agent_id = 'B'") > 100 * estimate(c, "agent_id = 'nobody'")
    # ... but never for the bindings, whose statistics are off for good (003-agent-bindings)
    assert conn.execute("select array_agg(attstattarget order by attnum) from pg_attribute "
                        "where attrelid = 'recall.agent_bindings'::regclass and attnum > 0 "
                        "and not attisdropped").fetchone()[0] == [0, 0, 0]


# ---------------------------------------------------------------- binding by role

def test_bound_role_sees_its_agent_whatever_it_sets(db_url, conn, roles):
    build_world(conn)
    with login(db_url, roles["bound"]) as c:
        # bound by its row of recall.agent_bindings, with no setting at all
        assert c.execute("select recall.bound_agent(), current_setting('recall.agent_id', true)").fetchone() in (
            ("A", None), ("A", ""))
        rows = c.execute("select distinct c.agent_id from recall.hybrid_recall(agent_id => 'A', query_text => 'docker', "
                         "query_embedding => %s) h join recall.chunks c using (chunk_id)", [QUERY]).fetchall()
        assert rows == [("A",)]
        for escape in ("set recall.agent_id = 'B'", "set role recall_agent", "reset role",
                       "select set_config('recall.agent_id', 'B', false)"):
            c.execute(escape)
            assert c.execute("select count(*) from recall.chunks where agent_id = 'B'").fetchone()[0] == 0
            # v6: asking for another agent's id is refused (v5 returned no row)
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not read the memories of agent 'B'"):
                c.execute("select count(*) from recall.hybrid_recall(agent_id => 'B', query_text => 'docker')")
        # with the setting pointing elsewhere it still sees A's rows: the binding wins, not B
        assert c.execute("select min(agent_id), max(agent_id) from recall.chunks").fetchone() == ("A", "A")
        for change in (f"alter role {roles['bound']} set recall.agent_id = 'B'",
                       f"alter role {roles['bound']} in database {conn.info.dbname} set recall.agent_id = 'B'",
                       "select recall.bind_agent(current_user, 'B')",
                       "select recall.unbind_agent(current_user)",
                       "update recall.agent_bindings set agent_id = 'B'",
                       "delete from recall.agent_bindings",
                       "insert into recall.agent_bindings (agent_role, agent_id) values (current_user::text::regrole, 'B')",
                       "truncate recall.agent_bindings"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(change)
        c.execute(f"alter role {roles['bound']} reset all")      # resets only what it may: not the binding
        c.execute(f"alter role {roles['bound']} reset recall.agent_id")   # there is no such setting: a no-op
        assert c.execute("select recall.bound_agent()").fetchone()[0] == "A"
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            c.execute("insert into recall.sessions (session_id, agent_id) values ('B-9', 'B')")
        c.execute("select set_config('recall.agent_id', 'B', false)")   # the setting agreeing with the row: still no
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            c.execute("insert into recall.sessions (session_id, agent_id) values ('B-9', 'B')")
    # a new connection still starts bound
    with login(db_url, roles["bound"]) as c:
        assert c.execute("select count(*), min(agent_id) from recall.chunks").fetchone()[1] == "A"


def test_unbind_returns_to_the_setting(db_url, conn, roles):
    build_world(conn)
    # a role-level recall.agent_id set by hand (it binds nothing now) names an agent to every
    # role: unbind_agent, like bind_agent, resets it
    conn.execute(f"alter role {roles['bound']} set recall.agent_id = 'A'")
    conn.execute("select recall.unbind_agent(%s)", [roles["bound"]])
    assert conn.execute("select count(*) from recall.agent_bindings").fetchone()[0] == 0
    assert conn.execute("select rolconfig from pg_roles where rolname = %s", [roles["bound"]]).fetchone()[0] is None
    with login(db_url, roles["bound"]) as c:
        assert c.execute("select recall.bound_agent()").fetchone()[0] is None
        assert c.execute("select count(*) from recall.chunks").fetchone()[0] == 0
        c.execute("set recall.agent_id = 'B'")
        assert c.execute("select min(agent_id), max(agent_id) from recall.chunks").fetchone() == ("B", "B")


@pytest.mark.parametrize("attrs,agent,error,message", [
    ("superuser", "A", psycopg.errors.InvalidParameterValue, "bypasses row-level security"),
    ("bypassrls", "A", psycopg.errors.InvalidParameterValue, "bypasses row-level security"),
    ("in role recall_admin", "A", psycopg.errors.InvalidParameterValue, "member of recall_admin"),
    ("", "", psycopg.errors.InvalidParameterValue, "agent_id is required"),
    ("", None, psycopg.errors.InvalidParameterValue, "agent_id is required"),
    (None, "A", psycopg.errors.UndefinedObject, "does not exist"),
])
def test_bind_agent_refuses_what_it_cannot_restrict(conn, attrs, agent, error, message):
    name = f"sec_bind_{uuid.uuid4().hex[:8]}"
    if attrs is not None:
        conn.execute(f"create role {name} login {attrs}")
    try:
        with pytest.raises(error, match=message):
            conn.execute("select recall.bind_agent(%s, %s)", [name, agent])
        if attrs is not None:
            assert conn.execute("select rolconfig from pg_roles where rolname = %s", [name]).fetchone()[0] is None
            assert conn.execute("select count(*) from recall.agent_bindings where agent_role::oid = "
                                "(select oid from pg_roles where rolname = %s)", [name]).fetchone()[0] == 0
    finally:
        if attrs is not None:
            conn.execute(f"drop role {name}")


def test_bind_agent_quotes_names(conn):
    name = f'sec "odd"; drop role x; -- {uuid.uuid4().hex[:6]}'
    conn.execute(sql.SQL("create role {} login").format(sql.Identifier(name)))
    try:
        # a leftover role setting, for this database: bind_agent resets it (quoting both names)
        conn.execute(sql.SQL("alter role {} in database {} set recall.agent_id = 'old'").format(
            sql.Identifier(name), sql.Identifier(conn.info.dbname)))
        conn.execute("select recall.bind_agent(%s, %s)", [name, "it's; drop table recall.chunks; --"])
        assert conn.execute("select count(*) from pg_db_role_setting s join pg_roles ro on ro.oid = s.setrole "
                            "where ro.rolname = %s", [name]).fetchone()[0] == 0
        assert conn.execute("select ro.rolname, b.agent_id from recall.agent_bindings b "
                            "join pg_roles ro on ro.oid = b.agent_role::oid").fetchall() == [
            (name, "it's; drop table recall.chunks; --")]
        assert conn.execute("select rolconfig from pg_roles where rolname = %s", [name]).fetchone()[0] is None
        assert conn.execute("select to_regclass('recall.chunks') is not null").fetchone()[0]
    finally:
        conn.execute(sql.SQL("drop owned by {}; drop role {}").format(
            sql.Identifier(name), sql.Identifier(name)))


OPAQUE = "zq7-agent-id-in-no-catalog"   # an agent id no catalog text holds by chance


def add_agent(conn, agent: str, n: int = 6) -> None:
    """An agent with n embedded chunks, as the owner writes them."""
    conn.execute("insert into recall.sessions (session_id, agent_id, title) values (%s, %s, 'notes')",
                 [f"{agent}-s", agent])
    for i in range(n):
        conn.execute("insert into recall.messages (session_id, role, content) values (%s, 'system', %s)",
                     [f"{agent}-s", f"note {i} of the agent"])
    for (cid,) in conn.execute("select chunk_id from recall.chunks where agent_id = %s", [agent]).fetchall():
        conn.execute("update recall.chunks set embedding = %s, embedding_model = 'test' where chunk_id = %s",
                     [unit(RNG.normal(size=DIM)), cid])


def catalog_texts_naming(c, needle: str) -> dict[str, int]:
    """Where the role of ``c`` can read ``needle`` in the catalog: rows of every relation of
    pg_catalog and information_schema it may select (each whole row as text: pg_indexes,
    pg_class names, pg_index predicates, pg_description comments, pg_stats, pg_roles, ...),
    what the catalog functions print (index definitions and predicates, comments, function
    bodies), and what recall tells every caller about its indexes and storage."""
    hits = {}
    rels = c.execute("select format('%I.%I', n.nspname, r.relname) from pg_class r "
                     "join pg_namespace n on n.oid = r.relnamespace "
                     "where n.nspname in ('pg_catalog', 'information_schema') and r.relkind in ('r', 'v', 'm') "
                     "and has_table_privilege(r.oid, 'select') order by 1").fetchall()
    assert len(rels) > 100
    printed = {
        "index definitions": "select pg_get_indexdef(i.indexrelid) || ' ' || coalesce(pg_get_expr(i.indpred, "
                             "i.indrelid), '') from pg_index i",
        "comments": "select obj_description(r.oid, 'pg_class') from pg_class r",
        "function bodies": "select pg_get_functiondef(p.oid) from pg_proc p "
                           "where p.pronamespace = 'recall'::regnamespace and p.prokind = 'f'",
        "recall.index_info()": "select t::text from recall.index_info() t",
        "recall.storage_stats()": "select t::text from recall.storage_stats() t",
        "recall.config": "select t::text from recall.config t",
    }
    queries = {rel: f"select t::text from {rel} t" for (rel,) in rels} | printed
    for where, query in queries.items():
        try:
            n = c.execute(f"select count(*) from ({query}) as x(text) where strpos(x.text, %s) > 0",
                          [needle]).fetchone()[0]
        except psycopg.Error:
            continue   # privileges checked row by row, or a view this platform lacks (NUMA)
        if n:
            hits[where] = n
    return hits


def test_catalog_does_not_name_other_agents(db_url, conn, roles):
    """An agent's own ANN index is a partial index; its name, predicate and comment carry a hash
    of the agent id, never the id, and no other catalog text an agent can read spells an agent
    id out (indexes built, tables analyzed, statistics not restricted). The hash is unsalted: a
    role that guesses an agent id can confirm it (documented in SECURITY.md)."""
    build_world(conn)
    add_agent(conn, OPAQUE)
    conn.execute("update recall.config set value = '1' where key = 'agent_index_min_rows'")
    conn.execute("select recall.create_vector_index('hnsw')")
    conn.execute("analyze")
    key = conn.execute("select recall._agent_key(%s)", [OPAQUE]).fetchone()[0]
    assert "pg_catalog.pg_indexes" in catalog_texts_naming(conn, key)   # the owner's scan sees the index
    with login(db_url, roles["agent"], "A") as c:
        assert catalog_texts_naming(c, OPAQUE) == {}
        seen = catalog_texts_naming(c, key)
        assert {"pg_catalog.pg_indexes", "pg_catalog.pg_class", "pg_catalog.pg_description",
                "index definitions", "comments"} <= set(seen), seen    # the scan reaches the index
        defs = [r[0] for r in c.execute("select c.relname || ' ' || pg_get_indexdef(i.indexrelid) from pg_index i "
                                        "join pg_class c on c.oid = i.indexrelid "
                                        "where i.indrelid = 'recall.chunks'::regclass and i.indpred is not null "
                                        "and pg_get_indexdef(i.indexrelid) like '%hnsw%'")]
        assert len(defs) == 3                                  # A's, B's and OPAQUE's
        assert not any("'A'" in d or "'B'" in d or OPAQUE in d for d in defs), defs
        guess = c.execute("select hashtextextended('B', 0)").fetchone()[0]
        assert sum(str(guess) in d for d in defs) == 1         # the residual channel: a guess confirmed


def test_role_bindings_do_not_name_agents(db_url, conn, roles):
    """A binding is a row of recall.agent_bindings (003-agent-bindings), not the role's setting
    recall.agent_id: pg_db_role_setting, pg_roles.rolconfig and pg_user.useconfig, which every
    role reads, no longer name bound agents, and neither do the table's statistics."""
    add_agent(conn, OPAQUE)
    name = f"sec_opaque_{uuid.uuid4().hex[:8]}"
    conn.execute(f"create role {name} login password '{PASSWORD}'")
    try:
        conn.execute("select recall.bind_agent(%s, %s)", [name, OPAQUE])
        conn.execute("analyze")
        # the owner sees the binding, but nothing of it in the role settings or the statistics
        assert conn.execute("select count(*) from recall.agent_bindings where agent_id = %s",
                            [OPAQUE]).fetchone()[0] == 1
        assert conn.execute("select count(*) from pg_db_role_setting s, unnest(s.setconfig) c "
                            "where strpos(c, %s) > 0", [OPAQUE]).fetchone()[0] == 0
        # ANALYZE keeps nothing of the table for the planner's estimates (an agent's EXPLAIN
        # ... where agent_id < '...' would otherwise search the histogram), though it ran
        stats = dict(conn.execute("select tablename, count(*) from pg_stats where schemaname = 'recall' "
                                  "group by 1").fetchall())
        assert "agent_bindings" not in stats and stats["chunks"] > 0
        with login(db_url, name) as own:
            assert own.execute("select count(*) from recall.chunks").fetchone()[0] == 6   # the binding works
        with login(db_url, roles["agent"], "A") as c:
            assert catalog_texts_naming(c, OPAQUE) == {}
        with login(db_url, roles["bound"]) as c:
            assert catalog_texts_naming(c, OPAQUE) == {}
    finally:
        conn.execute(f"drop owned by {name}")
        conn.execute(f"drop role {name}")


def test_bound_role_reads_only_its_own_binding(db_url, conn, roles):
    """recall.agent_bindings holds every binding; a role reads its own row (that of its current
    and of its login role) and no other, a role bound by the setting none, recall_admin all."""
    other = f"sec_other_{uuid.uuid4().hex[:8]}"
    conn.execute(f"create role {other} login password '{PASSWORD}'")
    try:
        conn.execute("select recall.bind_agent(%s, %s)", [other, OPAQUE])
        bindings = "select agent_role::text, agent_id from recall.agent_bindings order by 2"
        assert [r[1] for r in conn.execute(bindings)] == ["A", OPAQUE]
        settings = ("select count(*) from pg_db_role_setting s, unnest(s.setconfig) c "
                    "where c ilike 'recall.agent_id=%%'")
        with login(db_url, roles["bound"]) as c:
            assert c.execute(bindings).fetchall() == [(roles["bound"], "A")]
            assert c.execute("select count(*) from recall.agent_bindings where agent_id = %s",
                             [OPAQUE]).fetchone()[0] == 0
            assert c.execute(settings).fetchone()[0] == 0          # pg_db_role_setting names no agent
            assert c.execute("select count(*) from pg_roles where rolconfig::text ilike '%%recall.agent_id%%'"
                             ).fetchone()[0] == 0
            c.execute("set role recall_agent")                     # its login role's row, still only that
            assert c.execute(bindings).fetchall() == [(roles["bound"], "A")]
            c.execute("select set_config('recall.agent_id', %s, false)", [OPAQUE])
            assert c.execute(bindings).fetchall() == [(roles["bound"], "A")]
        with login(db_url, roles["agent"], "A") as c:
            assert c.execute(bindings).fetchall() == []
        with login(db_url, roles["admin"]) as c:
            assert [r[1] for r in c.execute(bindings)] == ["A", OPAQUE]
    finally:
        conn.execute(f"drop owned by {other}")
        conn.execute(f"drop role {other}")


# the binding as released before 003-agent-bindings: the role's setting recall.agent_id, read
# from the catalog by bound_agent() and required by the restrictive agent_bound policies
OLD_BINDING = """
create or replace function recall.bound_agent()
returns text
language sql stable security invoker parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select substr(c.setting, length('recall.agent_id=') + 1)
  from (values (1, current_user), (2, session_user)) as r(pref, rolname)
  join pg_roles ro on ro.rolname = r.rolname
  join pg_db_role_setting s on s.setrole = ro.oid
   and s.setdatabase in (0, (select d.oid from pg_database d where d.datname = current_database()))
  cross join lateral unnest(s.setconfig) as c(setting)
  where c.setting like 'recall.agent_id=%'
  order by r.pref, s.setdatabase desc
  limit 1
$$;
do $$
declare
  t text;
begin
  foreach t in array array['sessions', 'messages', 'chunks', 'source_files'] loop
    execute format(
      'create policy agent_bound on recall.%I as restrictive to recall_agent '
      'using ((select recall.bound_agent()) is null or agent_id = (select recall.bound_agent())) '
      'with check ((select recall.bound_agent()) is null or agent_id = (select recall.bound_agent()))',
      t);
  end loop;
end
$$;
"""


def test_role_setting_bindings_move_into_the_table(empty_db_url, tmp_path, monkeypatch):
    """An install from before 003-agent-bindings, with roles bound by their setting: migrating
    moves each binding into recall.agent_bindings and resets the setting, and each role sees
    exactly its agent afterwards, on a connection opened before the migration too."""
    real = _migrate.sql_dir()
    # the sql/ of the last commit before 003-agent-bindings, from the repository's history: its
    # 090-security binds by the role's setting (what OLD_BINDING below spells out)
    old = old_sql("3f62d61^", tmp_path)
    monkeypatch.setattr(_migrate, "sql_dir", lambda: old)
    suffix = uuid.uuid4().hex[:8]
    # bound cluster-wide to A; cluster-wide to A but to B in this database (which wins); to ''
    # (no agent at all); in another database only (not bound here: its setting is left alone)
    r = {k: f"sec_up_{k}_{suffix}" for k in ("a", "b", "empty", "elsewhere")}
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        _migrate.migrate(conn)
        assert conn.execute("select pg_get_functiondef('recall.bound_agent()'::regprocedure)").fetchone()[0] \
            .split("$function$")[1].strip() == OLD_BINDING.split("$$")[1].strip()
        dbname = conn.info.dbname
        for agent in ("A", "B"):
            conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, %s)", [f"{agent}-s", agent])
            conn.execute("insert into recall.messages (session_id, role, content) values (%s, 'user', %s)",
                         [f"{agent}-s", f"note of {agent}"])
        for name in r.values():
            conn.execute(f"create role {name} login password '{PASSWORD}' in role recall_agent")
        conn.execute(f"alter role {r['a']} set recall.agent_id = 'A'")
        conn.execute(f"alter role {r['b']} set recall.agent_id = 'A'")
        conn.execute(f"alter role {r['b']} in database {dbname} set recall.agent_id = 'B'")
        conn.execute(f"alter role {r['empty']} set recall.agent_id = ''")
        conn.execute(f"alter role {r['elsewhere']} in database template1 set recall.agent_id = 'A'")
        seen = "select coalesce(string_agg(distinct agent_id, ','), '') from recall.chunks"
        try:
            for key, agent in (("b", "B"), ("empty", "")):
                with login(empty_db_url, r[key]) as c:
                    assert c.execute(seen).fetchone()[0] == agent
            before = login(empty_db_url, r["a"])
            assert before.execute(seen).fetchone()[0] == "A"

            monkeypatch.setattr(_migrate, "sql_dir", lambda: real)
            assert "003-agent-bindings" in _migrate.migrate(conn).applied
            assert sorted(conn.execute("select agent_role::text, agent_id from recall.agent_bindings")) == sorted(
                [(r["a"], "A"), (r["b"], "B"), (r["empty"], "")])
            left = conn.execute("select ro.rolname, s.setdatabase = 0, s.setconfig from pg_db_role_setting s "
                                "join pg_roles ro on ro.oid = s.setrole where ro.rolname like %s",
                                [f"sec_up_%_{suffix}"]).fetchall()
            assert left == [(r["elsewhere"], False, ["recall.agent_id=A"])]   # another database's: kept
            # the connection opened before: its old setting no longer matters, the binding does
            assert before.execute(seen).fetchone()[0] == "A"
            before.execute("set recall.agent_id = 'B'")
            assert before.execute(seen).fetchone()[0] == "A"
            before.close()
            for key, agent in (("a", "A"), ("b", "B"), ("empty", "")):
                with login(empty_db_url, r[key]) as c:
                    assert c.execute("select current_setting('recall.agent_id', true)").fetchone()[0] in (None, "")
                    assert c.execute(seen).fetchone()[0] == agent
                    c.execute("select set_config('recall.agent_id', %s, false)", ["B" if agent == "A" else "A"])
                    assert c.execute(seen).fetchone()[0] == agent
                    assert c.execute("select count(*) from recall.agent_bindings").fetchone()[0] == 1
            with login(empty_db_url, r["elsewhere"]) as c:                     # not bound here
                c.execute("set recall.agent_id = 'B'")
                assert c.execute(seen).fetchone()[0] == "B"
        finally:
            for name in r.values():      # drop role drops its settings in every database too
                conn.execute(f"drop owned by {name}")
                conn.execute(f"drop role {name}")
