"""Recall v6 (sql/released/v6.sql): v5's rows (auto_context: v4's), with the search
run as the schema owner after the function has checked, as the policies would, that the calling
role may read the agent; the rows then read as the caller under row-level security.

Proven here on two agents (test_security's world: B's texts hold a secret, B's vectors sit on
the query) plus curated memories (one superseded, one pinned, one of a project):
  * v6 == v5 row for row (ids, order, scores, every column) for the owner, recall_admin, a
    recall_agent role by the setting and a bound role, over filters, kinds, as_of, budgets;
  * for every kind of role, v6 refuses (42501) exactly the agents whose chunks the policies hide
    from it, and its SECURITY DEFINER parts refuse them too when called directly;
  * what a refused call shows: an error, no row; what an allowed one shows: that agent's rows.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest
from conftest import drop_database, new_database
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from test_security import AS_OF, PASSWORD, QUERY, SECRET, build_world, login

CASES = [dict(), dict(k=3), dict(kinds=["thinking", "tool_result", "memory"]),
         dict(filter={"team": "core"}), dict(filter={"tool_name": ["Bash", "Read"]}),
         dict(exclude_session_id="A-1"), dict(as_of=AS_OF - timedelta(days=5)),
         dict(token_budget=60), dict(token_budget=5), dict(turns_per_session=1, k=20),
         dict(vector_weight=0.9, text_weight=0.1, min_similarity=0.1)]
QUERIES = [("docker deploy failed", QUERY), ("port 8080 taken", None), (None, QUERY),
           ("the launch codes", None)]


def call(conn, fn, **kw):
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    kw = {k: Jsonb(v) if isinstance(v, dict) else v for k, v in kw.items()}
    cur = conn.execute(f"select * from recall.{fn}({names})", kw)
    return cur.fetchall()


@pytest.fixture(scope="module")
def world_url(server_url, template_url):
    url = new_database(server_url)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        build_world(conn)
        for agent in "AB":
            marker = SECRET if agent == "B" else "alpha"
            old = conn.execute("select recall.remember(%s, %s, kind => 'fact', embedding => %s)",
                               [agent, f"the launch codes are 1234 {marker}", QUERY]).fetchone()[0]
            conn.execute("update recall.chunks set valid_from = %s where chunk_id = %s",
                         [AS_OF - timedelta(days=30), old])
            new = conn.execute("select recall.remember(%s, %s, kind => 'fact', supersedes => %s)",
                               [agent, f"the launch codes are 9876 {marker}", old]).fetchone()[0]
            conn.execute("update recall.chunks set valid_from = %s where chunk_id = %s",
                         [AS_OF - timedelta(days=2), new])
            conn.execute("update recall.chunks set valid_until = %s where chunk_id = %s",
                         [AS_OF - timedelta(days=2), old])
            conn.execute("select recall.remember(%s, %s, pinned => true, project => 'shop')",
                         [agent, f"always run the docker healthcheck {marker}"])
    yield url
    drop_database(server_url, url)


@pytest.fixture(scope="module")
def who(world_url):
    """Login roles: agent (recall_agent, by the setting), bound (bind_agent to A), admin
    (recall_admin), neither (no membership), both (recall_admin and recall_agent, unbound), and
    bound_admin (bound to A, then made a member of recall_admin: bind_agent refuses that, a
    grant afterwards does not)."""
    suffix = uuid.uuid4().hex[:8]
    names = {k: f"v6_{k}_{suffix}" for k in ("agent", "bound", "admin", "neither", "both", "bound_admin")}
    with psycopg.connect(world_url, autocommit=True) as conn:
        for name in names.values():
            conn.execute(f"create role {name} login password '{PASSWORD}'")
        conn.execute(f"grant recall_agent to {names['agent']}, {names['both']}")
        conn.execute(f"grant recall_admin to {names['admin']}, {names['both']}")
        for k in ("bound", "bound_admin"):
            conn.execute("select recall.bind_agent(%s, 'A')", [names[k]])
        conn.execute(f"grant recall_admin to {names['bound_admin']}")
        yield names
        for name in names.values():
            conn.execute(f"drop owned by {name}")
            conn.execute(f"drop role {name}")


def owner(url):
    c = psycopg.connect(url, autocommit=True)
    register_vector(c)
    return c


def connect(world_url, who, caller):
    """(connection, the agents it reads) for a caller of the equality test."""
    if caller == "owner":
        return owner(world_url), "AB"
    if caller == "admin":
        return login(world_url, who["admin"]), "AB"
    if caller == "setting":
        return login(world_url, who["agent"], "A"), "A"
    return login(world_url, who["bound"], "B"), "A"   # bound to A: the setting B changes nothing


@pytest.mark.parametrize("caller", ["owner", "admin", "setting", "bound"])
def test_v6_rows_equal_v5(world_url, who, caller):
    conn, agents = connect(world_url, who, caller)
    seen = 0
    with conn:
        for agent in agents:
            for text, vector in QUERIES:
                for case in CASES:
                    args = dict(agent_id=agent, query_text=text, query_embedding=vector, **case)
                    sargs = {k: v for k, v in args.items() if k not in ("min_similarity",)}
                    with conn.transaction():    # one now() for all
                        assert call(conn, "hybrid_recall_v6", **args) == call(conn, "hybrid_recall_v5", **args)
                        v6 = call(conn, "session_recall_v6", **sargs)
                        assert v6 == call(conn, "session_recall_v5", **sargs)
                        # session_recall v9 (v6's rows without a budget; the turn fill with
                        # one), for every caller alike; so does v8 (v6's fill); the stable name
                        # calls v13 (tests/test_recall_v13.py), for every caller alike
                        v9 = call(conn, "session_recall_v9", **sargs)
                        stable = call(conn, "session_recall", **sargs)
                        assert stable == call(conn, "session_recall_v13", **sargs)
                        if sargs.get("token_budget") is None:
                            assert stable == v9 == v6 == call(conn, "session_recall_v8", **sargs)
                        # hybrid_recall v9 (v7's rows on one node: v6's without a budget, its
                        # turn fill with one), for every caller as for the owner
                        v7 = call(conn, "hybrid_recall_v7", **args)
                        assert v7 == call(conn, "hybrid_recall_v9", **args)
                        stable = call(conn, "hybrid_recall", **args)
                        assert stable == call(conn, "hybrid_recall_v13", **args)
                        if args.get("token_budget") is None:
                            assert stable == v7 == call(conn, "hybrid_recall_v6", **args)
                    seen += len(v6)
            for task in (None, "docker deploy failed"):
                for kw in (dict(), dict(project="shop"), dict(token_budget=120), dict(as_of=AS_OF)):
                    args = dict(agent_id=agent, task_text=task, **kw)
                    with conn.transaction():
                        v6 = call(conn, "auto_context_v6", **args)
                        assert v6 == call(conn, "auto_context_v4", **args)
                        # v12: v6's rows but for Recent and Related, filled turn by turn (and so
                        # the running token totals), for every caller alike; the stable name
                        # calls v15 (v12's with a question never without its answer, Recent
                        # in reading order and turn by turn)
                        v12 = call(conn, "auto_context_v12", **args)
                        assert call(conn, "auto_context", **args) == call(conn, "auto_context_v15", **args)
                        assert [r[:11] + r[12:] for r in v12 if r[14] not in ("recent", "related")] == \
                            [r[:11] + r[12:] for r in v6 if r[14] not in ("recent", "related")]
                    assert {r[16] for r in v6} == {agent}    # agent_id column
                    seen += len(v6)
    assert seen > 100


@pytest.mark.parametrize("caller", ["admin", "setting", "bound"])
def test_v7_fills_the_same_for_every_caller_that_may_read(world_url, who, caller):
    """hybrid_recall_v7's fill runs as the caller, under row-level security: each caller that
    may read an agent gets the owner's rows, budget or not."""
    conn, agents = connect(world_url, who, caller)
    seen = 0
    with conn, owner(world_url) as own:
        for agent in agents:
            for text, vector in QUERIES:
                for case in CASES:
                    args = dict(agent_id=agent, query_text=text, query_embedding=vector, **case)
                    as_of = dict(as_of=args.pop("as_of", AS_OF))   # one now() for both connections
                    mine = call(conn, "hybrid_recall_v7", **args, **as_of)
                    assert mine == call(own, "hybrid_recall_v7", **args, **as_of)
                    seen += len(mine)
    assert seen > 50


def refused(conn, sql, params=()):
    """The SQLSTATE of a call that fails, after checking it returned nothing; None if it ran."""
    try:
        with conn.transaction():
            conn.execute(sql, params).fetchall()
    except psycopg.Error as exc:
        return exc.sqlstate
    return None


CALLS = {
    "hybrid_recall": ("select * from recall.hybrid_recall(%s, 'docker deploy', %s)", True),
    "hybrid_recall budget": ("select * from recall.hybrid_recall(%s, 'docker deploy', %s, token_budget => 50)", True),
    "session_recall": ("select * from recall.session_recall(%s, 'docker deploy', %s)", True),
    "auto_context": ("select * from recall.auto_context(%s, task_text => 'docker deploy', task_embedding => %s)", True),
    "arms": ("select * from recall._recall_arms_v6(%s, 'docker deploy', %s, 100, null, null, null, null, null, null, null)", True),
    "check": ("select recall._check_reader_v6(%s)", False),
}


def visible(conn, agent) -> int:
    try:
        with conn.transaction():
            return conn.execute("select count(*) from recall.chunks where agent_id = %s", [agent]).fetchone()[0]
    except psycopg.Error:
        return 0


@pytest.mark.parametrize("role,setting,set_role,expected", [
    ("agent", "A", None, "A"), ("agent", "B", None, "B"), ("agent", None, None, ""), ("agent", "", None, ""),
    ("bound", None, None, "A"), ("bound", "B", None, "A"), ("bound", "B", "recall_agent", "A"),
    ("admin", None, None, "AB"), ("both", None, None, "AB"), ("both", "B", None, "AB"),
    ("both", "B", "recall_agent", "B"), ("both", "A", "recall_admin", "AB"),
    ("bound_admin", None, None, "A"), ("neither", "A", None, "")])
def test_v6_refuses_exactly_what_the_policies_hide(world_url, who, role, setting, set_role, expected):
    """Each role reads through v6 exactly the agents whose chunks it can count with a plain
    SELECT (row-level security): for the others every entry point, the SECURITY DEFINER ones
    called directly included, raises 42501 and shows no row."""
    with owner(world_url) as o:
        assert all(visible(o, a) > 0 for a in "AB")
    with login(world_url, who[role], setting) as c:
        if set_role:
            c.execute(f"set role {set_role}")
        readable = {a for a in "AB" if visible(c, a) > 0}
        assert readable == set(expected), (role, setting, set_role)
        for agent in "AB":
            for name, (sql, with_vector) in CALLS.items():
                params = [agent, QUERY] if with_vector else [agent]
                state = refused(c, sql, params)
                if agent in readable:
                    assert state is None, (name, agent)
                else:
                    assert state == "42501", (name, agent, state)
        # an allowed call shows its agent's rows only, the secret never
        for agent in readable:
            rows = c.execute("select agent_id, content from recall.hybrid_recall(%s, 'docker deploy launch codes', %s, k => 50)",
                             [agent, QUERY]).fetchall()
            assert rows and {r[0] for r in rows} == {agent}
            assert (SECRET in repr(rows)) == (agent == "B")


def test_bound_role_filters_as_of_and_memories_stay_isolated(world_url, who):
    """A role bound to A, whatever it passes (B's session excluded or named in a filter, as_of
    when B's old memory was true, kinds of memories): A's rows only, and B's id refused."""
    with login(world_url, who["bound"], "B") as c:
        for kw in (dict(filter={"team": "core"}), dict(as_of=AS_OF - timedelta(days=5), kinds=["memory"]),
                   dict(exclude_session_id="B-1"), dict(kinds=["memory"]), dict(token_budget=40)):
            rows = call(c, "hybrid_recall", agent_id="A", query_text="launch codes docker", query_embedding=QUERY,
                        k=50, **kw)
            assert rows and {r[15] for r in rows} == {"A"} and SECRET not in repr(rows), kw
            assert refused(c, "select * from recall.hybrid_recall(agent_id => %s, query_text => 'launch codes', "
                              "as_of => %s, kinds => array['memory'])", ["B", AS_OF - timedelta(days=5)]) == "42501"
        memories = call(c, "session_recall", agent_id="A", query_text="launch codes", k=50,
                        as_of=AS_OF - timedelta(days=5))
        assert any("1234 alpha" in r[3] for r in memories) and not any("9876" in r[3] for r in memories)
        pinned = call(c, "auto_context", agent_id="A", project="shop")
        assert [r[14] for r in pinned][:1] == ["pinned"] and SECRET not in repr(pinned)


def test_definer_functions_are_pinned_and_not_for_public(world_url):
    with owner(world_url) as c:
        rows = c.execute("""
            select p.oid::regprocedure::text, p.proconfig,
                   exists (select from aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                           where a.grantee = 0 and a.privilege_type = 'EXECUTE') as public_exec,
                   has_function_privilege('recall_agent', p.oid, 'execute'),
                   has_function_privilege('recall_admin', p.oid, 'execute')
            from pg_proc p where p.pronamespace = 'recall'::regnamespace and p.prosecdef
            order by 1""").fetchall()
    assert [r[0] for r in rows] == [
        "recall._check_reader_v6(text)",
        "recall._recall_arms_v10(text,text,vector,integer,text,jsonb[],text[],timestamp with time zone,"
        "timestamp with time zone,timestamp with time zone,text)",
        "recall._recall_arms_v6(text,text,vector,integer,text,jsonb[],text[],timestamp with time zone,"
        "timestamp with time zone,timestamp with time zone,text)"]
    for sig, config, public_exec, agent, admin in rows:
        assert any(c.startswith("search_path=pg_catalog") and c.endswith("pg_temp") for c in config), sig
        assert not public_exec and agent and admin, sig


@pytest.mark.parametrize("author,runner", [("bound", "admin"), ("admin", "bound")])
def test_another_roles_definer_function_gets_v5s_path(world_url, who, author, runner):
    """Called from a SECURITY DEFINER function of another role, v6 sees that the session's role
    is not its caller and takes v5's path (row-level security as the function's owner), so it
    answers as v5: a function of the role bound to A, run by an operator's session, finds none
    of B's rows; a function of the operator, run by the bound role's session, finds B's rows
    (v6's own check would have refused B: it sees the session's role)."""
    schema = f"definer_{uuid.uuid4().hex[:8]}"
    with owner(world_url) as o:
        o.execute(f"create schema {schema} authorization {who[author]}")
    try:
        with login(world_url, who[author]) as b:
            b.execute(f"""create function {schema}.peek(agent text, fn text) returns bigint
                          language plpgsql security definer set search_path to pg_catalog, public, pg_temp as $$
                          declare n bigint;
                          begin
                            execute format('select count(*) from recall.%I(%L, ''docker deploy launch codes'', k => 50)', fn, agent) into n;
                            return n;
                          end $$""")
            b.execute(f"grant usage on schema {schema} to {who[runner]}")
        with login(world_url, who[runner]) as r:
            for agent in "AB":
                v6, v5 = r.execute(f"select {schema}.peek(%s, 'hybrid_recall_v6'), {schema}.peek(%s, 'hybrid_recall_v5')",
                                   [agent, agent]).fetchone()
                assert v6 == v5
                assert (v6 > 0) == (agent == "A" or author == "admin"), (agent, v6)
    finally:
        with owner(world_url) as o:
            o.execute(f"drop schema {schema} cascade")


def test_two_agents_with_one_session_id_each_get_their_own_session(db_url):
    """As on a Citus cluster (UNIQUE (session_id) dropped; migration 010-agent-first-keys), two
    agents hold the session 'shared': v6 joins a chunk to its session by (agent_id, session_id),
    so each agent's rows come once, with its own session's title, and its auto_context names its
    own session only (a lookup by session id alone would return two titles, or fail)."""
    with owner(db_url) as c:
        c.execute("alter table recall.sessions drop constraint sessions_session_id_key")
        for agent, topic in (("ann", "kubernetes ingress"), ("bob", "postgres replication")):
            c.execute("insert into recall.sessions (session_id, agent_id, title, project) "
                      "values ('shared', %s, %s, 'infra')", [agent, f"{topic} night"])
            c.execute("insert into recall.messages (session_id, agent_id, role, content) "
                      "values ('shared', %s, 'user', %s), ('shared', %s, 'assistant', %s)",
                      [agent, f"the {topic} broke again", agent, f"fixed the {topic} config"])
        for agent, topic in (("ann", "kubernetes"), ("bob", "postgres")):
            rows = c.execute("select chunk_id, agent_id, session_title from recall.hybrid_recall_v6(%s, 'broke config again')",
                             [agent]).fetchall()
            assert rows and len({r[0] for r in rows}) == len(rows)
            assert {(r[1], r[2].split()[0]) for r in rows} == {(agent, topic)}
            rows = c.execute("select agent_id, session_title from recall.session_recall_v6(%s, 'broke config again')",
                             [agent]).fetchall()
            assert rows and {(r[0], r[1].split()[0]) for r in rows} == {(agent, topic)}
            rows = c.execute("select agent_id, session_title, content from recall.auto_context_v6(%s, project => 'infra')",
                             [agent]).fetchall()
            assert rows and {(r[0], r[1].split()[0]) for r in rows} == {(agent, topic)}
            assert all(topic in r[2] for r in rows)
