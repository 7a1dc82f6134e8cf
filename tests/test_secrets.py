"""Credentials never enter memory (sql/idempotent/009-secrets.sql): recall.redact() over every
text written (messages by INSERT and COPY, session titles and summaries, curated memories),
recall.redact_stored() for what was stored before a pattern existed, the checks on
recall.secret_patterns, and `pyrecall secrets`. Every key below is made up, in the shape of the
real ones."""

from __future__ import annotations

import asyncio
import json
import uuid

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrecall import _migrate
from pyrecall.cli import main
from pyrecall.client import AsyncRecall, Recall

GITHUB = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"          # 36 after the prefix
OPENAI = "sk-proj-" + "Xy9Zq1Wv2Ut3Sr4Qp5On6Ml7Kj8Ih9Gf0Ed_cB"
AWS_ID = "AKIA" + "Q7XZ2LMNB4RT6YPW"

# (text, what must be gone from it)
CAUGHT = [
    (f"here is my key {OPENAI} ok", OPENAI),
    ("export ANTHROPIC_API_KEY=sk-ant-api03-AbCdEf0123456789-XyZ_abcdefgh", "AbCdEf0123456789"),
    (f"AWS key {AWS_ID} and", AWS_ID),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq81KEYz", "wJalrXUtnFEMI"),
    (f"token {GITHUB} here", GITHUB),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
     "github_pat_11ABCDEFG"),
    ("glpat-xxxxXXXX1234567890ab", "glpat-xxxxXXXX1234567890ab"),
    ("sk_live_51H8abcdEFGH1234ijkl", "51H8abcdEFGH1234ijkl"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("post to https://hooks.slack.com/services/T0000AAAA/B0000BBBB/XXXXXXXXXXXXXXXXXXXXXXXX now",
     "XXXXXXXXXXXXXXXXXXXXXXXX"),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "SyA1234567890abcdef"),
    ("//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdefghij"),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz01234567", "hf_abcdefghij"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "dozjgNryP4J3jVmNHl0w5N"),
    ("DATABASE_URL=postgresql://app:s3cr3tPass@db.example.com:5432/app", "s3cr3tPass"),
    ("curl -H 'Authorization: Bearer abcdef0123456789abcdef' https://api", "abcdef0123456789abcdef"),
    ("PGPASSWORD=Tr0ub4dor3x psql -h db", "Tr0ub4dor3x"),
    ('{"api_key": "a1b2c3d4e5f6g7h8"}', "a1b2c3d4e5f6g7h8"),
    ("SECRET_KEY_BASE=9f8e7d6c5b4a3210fedcba", "9f8e7d6c5b4a3210fedcba"),
    ("X-Api-Key: 0123abcd4567efgh", "0123abcd4567efgh"),
    ("kubectl create secret generic x --from-literal=password=abc123def", "abc123def"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nQyNTUxOQ==\n"
     "-----END OPENSSH PRIVATE KEY-----\nafter", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"),
    ("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nMIIEpAIBAAKCAQEAz\n-----END RSA PRIVATE KEY-----",
     "MIIEpAIBAAKCAQEAz"),
    ("access_token=ya29.a0AfH6SMBx3kLm9QwErTy_uIoP1aSdFgHjKl", "a0AfH6SMBx3kLm9QwErTy"),
    ("cut off: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "MIIEvQIBADANBgkq"),
]

# code, configuration and chat that hold no credential: unchanged
LEFT = [
    "risk-assessment-framework-v2-final-2024", "token = tokenizer.encode(x)",
    "api_key = settings.openai_api_key", "token_budget=1500", "max_tokens = 4096",
    "tokenizer_name = 'bert-base-uncased-v2'", "password = os.environ.get('PW')",
    "headers = {'Authorization': f'Bearer {token}'}", "secrets.token_hex(32)",
    "git@github.com:org/repo.git", "http://localhost:8080/@foo", "export OPENAI_API_KEY=$OPENAI_API_KEY",
    "password: <your password here>", "I told Caroline my password is a secret", "scikit-learn sk-learn",
    "https://example.com/path?a=1", "the token: used for auth",
    "session_token = request.cookies.get('session')",
    "def sign(private_key: PKCS7PrivateKeyTypes, data: bytes) -> bytes:",
    "see https://github.com/pgvector/pgvector#hnsw for the index",
    "MLKEM768X25519PrivateKey = rust_openssl.hpke.MLKEM768X25519PrivateKey",
    "api_key = config.api_key_v2",
]


def redact(conn, text):
    return conn.execute("select recall.redact(%s)", [text]).fetchone()[0]


@pytest.mark.parametrize(("text", "secret"), CAUGHT, ids=[t[:24] for t, _ in CAUGHT])
def test_each_shipped_pattern_replaces_its_credential(conn, text, secret):
    out = redact(conn, text)
    assert secret not in out
    assert "[REDACTED" in out
    assert redact(conn, out) == out                       # a fixed point: read again, stored alike
    assert conn.execute("select count(*) from recall.secrets_in(%s)", [text]).fetchone()[0] >= 1
    assert conn.execute("select count(*) from recall.secrets_in(%s)", [out]).fetchone()[0] == 0


@pytest.mark.parametrize("text", LEFT)
def test_text_without_credentials_is_left_as_it_is(conn, text):
    assert redact(conn, text) == text
    assert conn.execute("select count(*) from recall.secrets_in(%s)", [text]).fetchone()[0] == 0


def test_what_stays_around_a_credential_is_kept(conn):
    text = f"Use {GITHUB} for the CI job, then run `gh release create v1.2`."
    assert redact(conn, text) == "Use [REDACTED:github_token] for the CI job, then run `gh release create v1.2`."
    assert redact(conn, None) is None


WORDS = st.sampled_from(["key", "token", "password", "=", ": ", "://", "@", "sk-", "ghp_", "AKIA", "eyJ",
                         "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "'", '"', " ", "\n",
                         "abc", "123", "Q7XZ2LMNB4RT6YPW", "user:", "Authorization: Bearer ", "_", "-", ".",
                         "[REDACTED]", "x9y8z7w6v5u4t3s2r1"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(WORDS, max_size=30), planted=st.sampled_from([GITHUB, OPENAI, AWS_ID, None]))
def test_redact_is_idempotent_and_a_planted_credential_never_survives(conn, pieces, planted):
    text = "".join(pieces)
    if planted:
        text = f"{text} {planted} {text}"
    once = redact(conn, text)
    assert redact(conn, once) == once
    if planted:
        assert planted not in once


def test_every_way_in_stores_the_redacted_text(db_url, conn):
    """add_messages (COPY), a plain INSERT, a session's title, a summary, a curated memory: the
    credential is in no table; the same message read again is found stored."""
    msgs = [{"role": "user", "content": f"deploy with token {GITHUB}", "created_at": "2026-03-01T10:00:00Z"},
            {"role": "assistant", "content": "Done. DATABASE_URL=postgresql://app:hunter2x9@db/app works",
             "created_at": "2026-03-01T10:01:00Z"}]
    with Recall(db_url) as r:
        r.add_session("s1", "ci", title=f"deploy with {OPENAI}")
        assert r.add_messages("s1", msgs, agent_id="ci").inserted == 2
        assert r.add_messages("s1", msgs, agent_id="ci").inserted == 0        # the same messages again: stored
        mem = r.conn.execute("select recall.remember('ci', %s, 'fact')", [f"The CI key is {AWS_ID}"]).fetchone()[0]
        again = r.conn.execute("select recall.remember('ci', %s, 'fact')", [f"the CI key is  {AWS_ID}"]).fetchone()[0]
        assert again == mem                                            # told again: the same memory
    conn.execute("insert into recall.messages (session_id, role, content) values ('s1', 'tool', %s)",
                 [f"AKIA env: {AWS_ID}"])
    conn.execute("update recall.sessions set summary = %s where session_id = 's1'", [f"used {GITHUB}"])
    dump = json.dumps([conn.execute(f"select * from recall.{t}").fetchall()
                       for t in ("messages", "chunks", "sessions")], default=str)
    for secret in (GITHUB, OPENAI, AWS_ID, "hunter2x9"):
        assert secret not in dump
    assert conn.execute("select content from recall.chunks where chunk_id = %s", [mem]).fetchone()[0] \
        == "The CI key is [REDACTED:aws_access_key]"
    assert conn.execute("select title, summary from recall.sessions where session_id = 's1'").fetchone() \
        == ("deploy with [REDACTED:api_key]", "used [REDACTED:github_token]")


def test_a_vector_given_with_a_credential_is_dropped(conn):
    """remember's embedding is of the text the caller had: with a credential in it, the vector
    goes with the credential and the worker embeds the text stored; a clean text keeps it."""
    v = np.ones(384, dtype=np.float32) / np.sqrt(384)
    dirty = conn.execute("select recall.remember('ci', %s, embedding => %s::vector)",
                         [f"key {GITHUB}", str(v.tolist())]).fetchone()[0]
    clean = conn.execute("select recall.remember('ci', 'no key here', embedding => %s::vector)",
                         [str(v.tolist())]).fetchone()[0]
    rows = dict(conn.execute("select chunk_id, embedding is not null from recall.chunks where chunk_id in (%s, %s)",
                             [dirty, clean]).fetchall())
    assert rows == {dirty: False, clean: True}


def test_an_agent_role_writes_through_the_patterns(db_url, conn):
    """The triggers run as the caller: a recall_agent member reads the patterns it needs."""
    role = f"agent_login_{uuid.uuid4().hex[:8]}"
    conn.execute(f"create role {role} login in role recall_agent")
    try:
        with psycopg.connect(db_url, autocommit=True) as c:
            c.execute(f"set role {role}")
            c.execute("select set_config('recall.agent_id', 'A', false)")
            c.execute("insert into recall.sessions (session_id, agent_id) values ('A-1', 'A')")
            c.execute("insert into recall.messages (session_id, role, content) values ('A-1', 'user', %s)",
                      [f"my token is {GITHUB}"])
            assert c.execute("select content from recall.messages").fetchone()[0] == \
                "my token is [REDACTED:github_token]"
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("update recall.secret_patterns set enabled = false")
    finally:
        conn.execute(f"drop owned by {role}")
        conn.execute(f"drop role {role}")


def stored_before_the_pattern(db_url, conn) -> None:
    """Agent 'ci' and 'other' store an acme key while no pattern knows it; then one is added."""
    with Recall(db_url) as r:
        for agent in ("ci", "other"):
            r.add_session(f"{agent}-1", agent, title="acme_0123456789abcdef0123456789abcdef setup")
            r.add_messages(f"{agent}-1", [
                {"role": "user", "content": "how do I call acme?", "created_at": "2026-03-01T10:00:00Z"},
                {"role": "assistant", "content": "with acme_0123456789abcdef0123456789abcdef in the header",
                 "created_at": "2026-03-01T10:01:00Z"}], agent_id=agent)
        r.conn.execute("select recall.remember('ci', 'acme key: acme_0123456789abcdef0123456789abcdef')")
        r.conn.execute("update recall.chunks set embedding = %s::vector, embedded_at = now(), "
                       "embedding_model = 'test' where agent_id = 'ci'",
                       [str((np.ones(384) / np.sqrt(384)).tolist())])
    conn.execute("insert into recall.secret_patterns (name, pattern, replacement, hints) "
                 r"values ('acme_key', '\macme_[a-z0-9]{32}\M', '[REDACTED:acme_key]', '{acme_}')")


def test_redact_stored_rewrites_what_came_before_the_pattern(db_url, conn):
    stored_before_the_pattern(db_url, conn)
    key = "acme_0123456789abcdef0123456789abcdef"
    dry = conn.execute("select * from recall.redact_stored('ci', dry_run => true)").fetchall()
    assert dry == [("acme_key", 1, 1, 1, 0, ["ci-1"])]   # pattern, messages, sessions, memories, queries, sessions of the messages
    assert conn.execute("select count(*) from recall.messages where content like %s", [f"%{key}%"]).fetchone()[0] == 2
    assert conn.execute("select * from recall.redact_stored('ci')").fetchall() == dry
    ci = json.dumps([conn.execute(f"select * from recall.{t} where agent_id = 'ci'").fetchall()
                     for t in ("messages", "chunks", "sessions")], default=str)
    assert key not in ci and "[REDACTED:acme_key]" in ci
    # the chunks of the changed message were derived again: their vectors are to be made again
    pending = conn.execute("select kind, count(*) from recall.chunks where agent_id = 'ci' and embedding is null "
                           "group by kind order by kind").fetchall()
    assert pending == [("memory", 1), ("turn_pair", 1)]
    # the other agent's rows are not the caller's business
    assert conn.execute("select count(*) from recall.messages where agent_id = 'other' and content like %s",
                        [f"%{key}%"]).fetchone()[0] == 1
    assert conn.execute("select * from recall.redact_stored('ci')").fetchall() == []     # nothing left
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="agent_id is required"):
        conn.execute("select * from recall.redact_stored(null)")


def test_redact_stored_from_python(db_url, conn):
    stored_before_the_pattern(db_url, conn)
    with Recall(db_url) as r:
        assert r.redact(f"x {GITHUB}") == "x [REDACTED:github_token]"
        assert r.redact_stored("other", dry_run=True) == [
            {"pattern": "acme_key", "messages": 1, "sessions": 1, "memories": 0, "queries": 0, "session_ids": ["other-1"]}]

    async def run():
        async with await AsyncRecall.connect(db_url) as ar:
            return await ar.redact("y acme_0123456789abcdef0123456789abcdef"), await ar.redact_stored("other")
    text, rows = asyncio.run(run())
    assert text == "y [REDACTED:acme_key]"
    assert rows == [{"pattern": "acme_key", "messages": 1, "sessions": 1, "memories": 0, "queries": 0, "session_ids": ["other-1"]}]


@pytest.mark.parametrize(("pattern", "replacement", "hints", "error"), [
    ("(unclosed", "[X]", None, "invalid regular expression"),
    ("x*", "[X]", None, "matches the empty string"),
    (r"\[X\]", "[X]", None, "matches it again"),
    ("abc", "[X]", "{ABC}", "hints are non-empty lower-case"),
])
def test_a_bad_pattern_is_refused_with_its_reason(conn, pattern, replacement, hints, error):
    with pytest.raises(psycopg.Error, match=error):
        conn.execute("insert into recall.secret_patterns (name, pattern, replacement, hints) values ('mine', %s, %s, %s)",
                     [pattern, replacement, hints])


def test_a_shipped_pattern_turned_off_stays_off_after_migrate(db_url, conn):
    conn.execute("update recall.secret_patterns set enabled = false, pattern = 'changed' where name = 'jwt'")
    _migrate.migrate(conn)
    assert conn.execute("select enabled, pattern <> 'changed' from recall.secret_patterns where name = 'jwt'"
                        ).fetchone() == (False, True)
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    assert redact(conn, jwt) == jwt


def test_cli_secrets(db_url, conn):
    runner = CliRunner()
    out = runner.invoke(main, ["secrets", "check", "--dsn", db_url], input=f"export GH={GITHUB}\nhello\n")
    assert out.exit_code == 0, out.output
    assert out.stdout == "export GH=[REDACTED:github_token]\nhello\n"
    assert "found 1 github_token" in out.stderr
    out = runner.invoke(main, ["secrets", "check", "--json", "--dsn", db_url], input="nothing here")
    assert json.loads(out.stdout) == {"text": "nothing here", "found": {}}
    out = runner.invoke(main, ["secrets", "patterns", "--json", "--dsn", db_url])
    names = {p["name"]: p for p in json.loads(out.stdout)}
    assert {"private_key", "github_token", "assignment", "url_password"} <= set(names)
    assert all(p["builtin"] and p["enabled"] for p in names.values())
    stored_before_the_pattern(db_url, conn)
    out = runner.invoke(main, ["secrets", "redact", "--dry-run", "--all-agents", "--json", "--dsn", db_url])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"dry_run": True, "found": [
        {"agent_id": "ci", "pattern": "acme_key", "messages": 1, "sessions": 1, "memories": 1, "queries": 0, "session_ids": ["ci-1"]},
        {"agent_id": "other", "pattern": "acme_key", "messages": 1, "sessions": 1, "memories": 0, "queries": 0, "session_ids": ["other-1"]}]}
    out = runner.invoke(main, ["secrets", "redact", "--agent-id", "ci", "--dsn", db_url])
    assert out.exit_code == 0, out.output
    assert "agent 'ci': redacted 1 messages, 1 sessions, 1 memories (acme_key)" in out.stdout
    assert "next: pyrecall embed" in out.stdout
    out = runner.invoke(main, ["secrets", "redact", "--agent-id", "ci", "--dsn", db_url])
    assert out.stdout.strip() == "no credential found in the memory of agent 'ci'"
    out = runner.invoke(main, ["remember", f"CI uses {GITHUB}", "--no-embed", "--json", "--agent-id", "ci",
                               "--dsn", db_url])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["redacted"] == ["github_token"]


def test_an_upgraded_database_is_told_to_redact_what_it_stored_before(server_url, tmp_path, monkeypatch):
    """A database of the release before redaction (26aab1d) holding a key: `pyrecall migrate`
    leaves the stored rows as they are and says how to redact them; `secrets redact` does."""
    from conftest import drop_database, new_database
    from test_upgrade import old_sql

    old = old_sql("26aab1d", tmp_path)
    url = new_database(server_url, template=None)
    try:
        with monkeypatch.context() as m:
            m.setattr(_migrate, "sql_dir", lambda: old)
            with psycopg.connect(url, autocommit=True) as c:
                _migrate.migrate(c, dim=384)
                c.execute("insert into recall.sessions (session_id, agent_id) values ('s', 'ci')")
                c.execute("insert into recall.messages (session_id, role, content) values ('s', 'user', %s)",
                          [f"token {GITHUB}"])
        runner = CliRunner()
        # pyrecall upgraded, its database not yet: a new command says what to do, in one line
        early = runner.invoke(main, ["secrets", "check", "--dsn", url], input="x")
        assert early.exit_code == 1
        assert early.output.strip().endswith("(the database's schema may be older than this pyrecall: "
                                             "run `pyrecall migrate`)")
        out = runner.invoke(main, ["migrate", "--dsn", url])
        assert out.exit_code == 0, out.output
        assert "014-secret-patterns" in out.output and "pyrecall secrets redact --all-agents --dry-run" in out.output
        with psycopg.connect(url, autocommit=True) as c:
            stored = lambda: c.execute("select string_agg(content, ' ') from recall.chunks").fetchone()[0]  # noqa: E731
            assert GITHUB in stored()                             # migrate rewrote nothing
            out = runner.invoke(main, ["secrets", "redact", "--all-agents", "--dsn", url])
            assert "agent 'ci': redacted 1 messages (github_token)" in out.output
            assert GITHUB not in stored() and "[REDACTED:github_token]" in stored()
        assert "pyrecall secrets redact" not in runner.invoke(main, ["migrate", "--dsn", url]).output
    finally:
        drop_database(server_url, url)
