"""Bad input to recall.messages: a clear error naming the problem, and nothing half-written."""

import psycopg
import pytest

GOOD = ("s1", "user", "text", "fine", 0.5, "{}")

CASES = [  # (field overrides, error class, message)
    ({"role": "robot"}, psycopg.errors.CheckViolation,
     "unknown role 'robot': expected one of user, assistant, system, tool"),
    ({"role": None}, psycopg.errors.CheckViolation, "unknown role NULL"),
    ({"kind": "image"}, psycopg.errors.CheckViolation,
     "unknown kind 'image': expected one of text, thinking, tool_call, tool_result"),
    ({"content": ""}, psycopg.errors.CheckViolation, "empty content: a message needs text"),
    ({"content": " \n\t"}, psycopg.errors.CheckViolation, "empty content"),
    ({"content": None}, psycopg.errors.CheckViolation, "empty content"),
    ({"importance": 1.5}, psycopg.errors.CheckViolation, "importance must be between 0 and 1, got 1.5"),
    ({"importance": -0.1}, psycopg.errors.CheckViolation, "importance must be between 0 and 1, got -0.1"),
    ({"importance": float("nan")}, psycopg.errors.CheckViolation, "importance must be between 0 and 1, got NaN"),
    ({"metadata": "[1, 2]"}, psycopg.errors.CheckViolation, "metadata must be a JSON object, got a JSON array"),
    ({"session_id": "nope"}, psycopg.errors.ForeignKeyViolation,
     "session 'nope' does not exist: insert it into recall.sessions first"),
    ({"session_id": "other"}, psycopg.errors.CheckViolation,
     "message agent_id 'a1' differs from the agent of session 'other'"),
]


@pytest.fixture
def sessions(conn):
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s1', 'a1'), ('other', 'a2')")


@pytest.mark.parametrize("override,exc,message", CASES, ids=[c[2][:40] for c in CASES])
def test_bad_message_rejected_and_nothing_written(conn, sessions, override, exc, message):
    fields = dict(zip(["session_id", "role", "kind", "content", "importance", "metadata"], GOOD, strict=True))
    fields.update(override)
    bad = [fields[k] for k in ["session_id", "role", "kind", "content", "importance", "metadata"]]
    with pytest.raises(exc, match=message.replace("(", r"\(")):
        # one good row before the bad one: the whole statement must be undone
        conn.execute("insert into recall.messages (session_id, agent_id, role, kind, content, importance, metadata) "
                     "values (%s, 'a1', %s, %s, %s, %s, %s), (%s, 'a1', %s, %s, %s, %s, %s)", [*GOOD, *bad])
    assert conn.execute("select count(*) from recall.messages").fetchone()[0] == 0
    assert conn.execute("select count(*) from recall.chunks").fetchone()[0] == 0


@pytest.mark.parametrize("sql,exc,message", [
    ("insert into recall.sessions (session_id, agent_id) values ('', 'a')", psycopg.errors.CheckViolation, "sessions_session_id_check"),
    ("insert into recall.sessions (session_id, agent_id) values ('x', null)", psycopg.errors.NotNullViolation, "agent_id"),
    ("insert into recall.sessions (session_id, agent_id, metadata) values ('x', 'a', '3')", psycopg.errors.CheckViolation, "sessions_metadata_check"),
])
def test_bad_session_rejected(conn, sql, exc, message):
    with pytest.raises(exc, match=message):
        conn.execute(sql)
    assert conn.execute("select count(*) from recall.sessions").fetchone()[0] == 0


def test_seq_collision_with_other_content_is_an_error(conn, sessions):
    conn.execute("insert into recall.messages (session_id, seq, role, content) values ('s1', 1, 'user', 'a')")
    with pytest.raises(psycopg.errors.UniqueViolation, match="seq 1 of session 's1' already holds another message"):
        conn.execute("insert into recall.messages (session_id, seq, role, content) values ('s1', 1, 'user', 'b')")


def test_message_identity_cannot_change(conn, sessions):
    conn.execute("insert into recall.messages (session_id, role, content) values ('s1', 'user', 'a')")
    with pytest.raises(psycopg.errors.CheckViolation, match="cannot change"):
        conn.execute("update recall.messages set session_id = 'other', agent_id = 'a2'")


UPDATE_CASES = [c for c in CASES if "session" not in c[2]]   # (a message's session cannot change)


@pytest.mark.parametrize("override,exc,message", UPDATE_CASES, ids=[c[2][:40] for c in UPDATE_CASES])
def test_bad_update_rejected_and_nothing_changed(conn, sessions, override, exc, message):
    """An UPDATE is checked as an insert is (recall._check_message: the same sentence and
    SQLSTATE); a statement with one bad row is undone whole."""
    conn.execute("insert into recall.messages (session_id, agent_id, role, content) "
                 "values ('s1', 'a1', 'user', 'first'), ('s1', 'a1', 'assistant', 'second')")
    rows = "select seq, role, kind, content, importance, metadata, created_at from recall.messages order by seq"
    before = conn.execute(rows).fetchall()
    chunks = conn.execute("select chunk_id, content from recall.chunks order by 1").fetchall()
    (column, value), = override.items()
    with pytest.raises(exc, match="^" + message.replace("(", r"\(")) as err:
        conn.execute(f"update recall.messages set created_at = created_at + interval '1 hour', {column} = "
                     f"case when seq = 2 then %s else {column} end", [value])
    assert err.value.sqlstate == "23514"
    assert conn.execute(rows).fetchall() == before
    assert conn.execute("select chunk_id, content from recall.chunks order by 1").fetchall() == chunks
