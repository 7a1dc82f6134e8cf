"""Row-level security: a recall_agent member bound to agent A sees and writes only A's rows."""

import uuid

import psycopg
import pytest


@pytest.fixture
def roles(conn):
    """Two login roles: one in recall_agent, one in recall_admin (dropped afterwards)."""
    suffix = uuid.uuid4().hex[:8]
    agent, admin = f"agent_login_{suffix}", f"admin_login_{suffix}"
    conn.execute(f"create role {agent} login in role recall_agent")
    conn.execute(f"create role {admin} login in role recall_admin")
    yield agent, admin
    conn.execute(f"drop owned by {agent}, {admin}")
    conn.execute(f"drop role {agent}")
    conn.execute(f"drop role {admin}")


@pytest.fixture
def two_agents(conn):
    for agent in ("A", "B"):
        conn.execute("insert into recall.sessions (session_id, agent_id) values (%s, %s)", [f"{agent}-s", agent])
        conn.execute("insert into recall.messages (session_id, role, content) values "
                     "(%s, 'user', %s), (%s, 'assistant', %s)",
                     [f"{agent}-s", f"secret of {agent}", f"{agent}-s", f"answer for {agent}"])


def as_role(db_url, role, agent=None):
    c = psycopg.connect(db_url, autocommit=True)
    c.execute(f"set role {role}")
    if agent is not None:
        c.execute("select set_config('recall.agent_id', %s, false)", [agent])
    return c


COUNTS = ["select count(*) from recall.sessions", "select count(*) from recall.messages",
          "select count(*) from recall.chunks"]


def test_agent_reads_only_its_rows(db_url, roles, two_agents):
    with as_role(db_url, roles[0], "A") as c:
        assert [c.execute(q).fetchone()[0] for q in COUNTS] == [1, 2, 1]
        assert {r[0] for r in c.execute("select agent_id from recall.chunks")} == {"A"}
        assert c.execute("select count(*) from recall.chunks where content like '%%of B%%'").fetchone()[0] == 0


def test_agent_cannot_write_other_agents_rows(db_url, roles, two_agents, conn):
    with as_role(db_url, roles[0], "A") as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            c.execute("insert into recall.sessions (session_id, agent_id) values ('B-2', 'B')")
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="session 'B-s' does not exist"):
            c.execute("insert into recall.messages (session_id, agent_id, role, content) "
                      "values ('B-s', 'B', 'user', 'injected')")
        assert c.execute("update recall.messages set content = 'x' where agent_id = 'B'").rowcount == 0
        assert c.execute("delete from recall.chunks where agent_id = 'B'").rowcount == 0
        assert c.execute("delete from recall.sessions where agent_id = 'B'").rowcount == 0
    assert conn.execute("select count(*) from recall.messages where agent_id = 'B'").fetchone()[0] == 2
    assert conn.execute("select count(*) from recall.chunks where agent_id = 'B'").fetchone()[0] == 1


def test_agent_writes_its_own_and_chunking_runs_as_it(db_url, roles, two_agents, conn):
    with as_role(db_url, roles[0], "A") as c:
        c.execute("insert into recall.sessions (session_id, agent_id) values ('A-2', 'A')")
        c.execute("insert into recall.messages (session_id, role, content) values ('A-2', 'user', 'new q')")
        assert c.execute("select count(*) from recall.chunks where session_id = 'A-2'").fetchone()[0] == 1
    assert conn.execute("select agent_id from recall.chunks where session_id = 'A-2'").fetchone()[0] == "A"


def test_no_setting_sees_nothing(db_url, roles, two_agents):
    with as_role(db_url, roles[0]) as c:
        assert [c.execute(q).fetchone()[0] for q in COUNTS] == [0, 0, 0]
        c.execute("select set_config('recall.agent_id', '', false)")
        assert [c.execute(q).fetchone()[0] for q in COUNTS] == [0, 0, 0]


def test_admin_sees_all(db_url, roles, two_agents):
    with as_role(db_url, roles[1]) as c:
        assert [c.execute(q).fetchone()[0] for q in COUNTS] == [2, 4, 2]


def test_bound_role_sees_its_agent_without_a_setting(db_url, roles, two_agents, conn):
    """bind_agent binds through recall.agent_bindings: a session that SETs ROLE to the bound role
    sees its agent with no setting, and no setting moves it to another agent."""
    conn.execute("select recall.bind_agent(%s, 'A')", [roles[0]])
    with as_role(db_url, roles[0]) as c:
        assert [c.execute(q).fetchone()[0] for q in COUNTS] == [1, 2, 1]
        c.execute("select set_config('recall.agent_id', 'B', false)")
        assert {r[0] for r in c.execute("select agent_id from recall.messages")} == {"A"}
    conn.execute("select recall.unbind_agent(%s)", [roles[0]])
    with as_role(db_url, roles[0]) as c:
        assert [c.execute(q).fetchone()[0] for q in COUNTS] == [0, 0, 0]


def test_session_cannot_change_agent(conn, two_agents):
    with pytest.raises(psycopg.errors.CheckViolation, match="agent_id of a session cannot change"):
        conn.execute("update recall.sessions set agent_id = 'A' where session_id = 'B-s'")
