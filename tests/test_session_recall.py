"""Session-aware recall on a fixture where the answer needs the right session.

tests/fixtures/cli/sessions.jsonl holds three sessions: a PostgreSQL 15 -> 16 upgrade whose
fix ("pg_upgrade hung ... we fixed it by stopping the old cluster") never says "timeout", and
two other sessions (a Redis cache, a CI pipeline) that each say "we fixed the timeout".
Asked "what fixed the timeout when we upgraded the database?", chunk-level hybrid recall puts
a CI chunk first (the words match); session_recall first picks the session that is about the
database upgrade (session_rank 1), and its answer is among the rows. Embeddings come from the real local model.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from conftest import drop_database, new_database
from pgvector.psycopg import register_vector

from pyrecall import _summarize, _sync
from pyrecall._embed import get_embedder
from pyrecall.cli import main
from pyrecall.client import Recall

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "cli" / "sessions.jsonl"
QUERY = "what fixed the timeout when we upgraded the database?"
AS_OF = datetime(2026, 5, 10, tzinfo=UTC)  # recency as of the week of the fixture


@pytest.fixture(scope="session")
def embedder():
    """The local all-MiniLM-L6-v2, loaded once for the whole run (offline)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    e = get_embedder("local/all-MiniLM-L6-v2")
    e.embed(["warm up"])
    return e


@pytest.fixture(scope="module")
def memory_url(server_url, template_url, embedder):
    """One database for the module: the fixture imported, embedded and summarized once."""
    url = new_database(server_url)
    with Recall(url, embedder=embedder) as r:
        assert _sync.index(r.conn, [FIXTURE], agent_id="ops").inserted == 20
        assert r.embed_pending().embedded == 10
        assert r.conn.execute("select recall.summarize_sessions()").fetchone()[0] == 3
    yield url
    drop_database(server_url, url)


@pytest.fixture
def recall(memory_url, embedder):
    with Recall(memory_url, embedder=embedder) as r:
        yield r


def test_hybrid_recall_alone_answers_from_the_wrong_session(recall):
    top = recall.recall("ops", QUERY, k=3, as_of=AS_OF)
    assert top.source == "hybrid"
    assert top[0].session_id in {"ci-timeouts", "redis-cache"}   # the words match there


def test_session_recall_picks_the_session_then_the_answer(recall):
    result = recall.session_recall("ops", QUERY, k=3, sessions=2, as_of=AS_OF)

    assert {m.session_id for m in result if m.session_rank == 1} == {"pg-upgrade"}
    answer = [m for m in result if "pg_upgrade hung waiting for the old server to stop" in m.content]
    assert len(answer) == 1 and answer[0].session_rank == 1
    ranks = recall.conn.execute(
        "select session_id, session_rank from recall.session_recall('ops', %s, %s, k => 10, "
        "n_sessions => 2, as_of => %s)",
        [QUERY, np.asarray(recall.embedder.embed([QUERY])[0], dtype=np.float32), AS_OF]).fetchall()
    assert dict(ranks)["pg-upgrade"] == 1
    assert len({sid for sid, _ in ranks}) == 2 and {r for _, r in ranks} == {1, 2}


def test_extractive_summaries(recall):
    rows = recall.conn.execute(
        "select session_id, summary_model, summary, summary_embedding is not null "
        "from recall.sessions order by session_id").fetchall()
    assert [(sid, model, has_vector) for sid, model, _, has_vector in rows] == [
        ("ci-timeouts", "extractive", True), ("pg-upgrade", "extractive", True),
        ("redis-cache", "extractive", True)]
    pg = dict((sid, text) for sid, _, text, _ in rows)["pg-upgrade"]
    assert "pg_upgrade" in pg and len(pg) <= 1200
    # nothing changed since: nothing to redo
    assert recall.conn.execute("select recall.summarize_sessions('ops')").fetchone()[0] == 0


def test_cli_by_session(memory_url):
    env = {"PYRECALL_DSN": memory_url, "PYRECALL_AGENT": "ops"}
    out = CliRunner().invoke(main, ["recall", QUERY, "--by-session", "--n-sessions", "2", "-k", "3",
                                    "--format", "json"], env=env)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert (doc["mode"], doc["source"], doc["agent"]) == ("session", "hybrid", "ops")
    assert {m["session_id"] for m in doc["memories"] if m["session_rank"] == 1} == {"pg-upgrade"}

    out = CliRunner().invoke(main, ["recall", QUERY, "--by-session", "--format", "context"], env=env)
    assert out.exit_code == 0, out.output
    headings = [x for x in out.output.splitlines() if x.startswith("### ")]
    assert headings[0] == "### Upgrade the database server from PostgreSQL 15 to 16 (2026-05-04)"


def fake_llm(monkeypatch, reply: str, *, seen: list | None = None, refuse: set | None = None) -> None:
    """litellm models "fakellm/..." answered in this process (a litellm custom provider): each
    prompt is appended to ``seen``; one holding a word of ``refuse`` (``"*"``: every prompt; the
    set may change during the test) fails with an authentication error; the others get
    ``reply``."""
    from pyrecall._embed import _litellm

    litellm = _litellm()  # imported as pyrecall imports it (settings read at import)

    class FakeLLM(litellm.CustomLLM):
        def completion(self, *args, **kwargs):
            text = kwargs["messages"][-1]["content"]
            if seen is not None:
                seen.append(text)
            if refuse and ("*" in refuse or any(word in text for word in refuse)):
                raise litellm.AuthenticationError("invalid key", llm_provider="fakellm", model="m")
            return litellm.completion(model="gpt-4o-mini", messages=kwargs["messages"], mock_response=reply)

    monkeypatch.setattr(litellm, "custom_provider_map",
                        [{"provider": "fakellm", "custom_handler": FakeLLM()}])


def test_llm_summaries_through_litellm(server_url, template_url, embedder, monkeypatch):
    """--summarize-with MODEL: the summary comes from the model (here a litellm custom provider
    in this process), is kept in the session and becomes a recallable `summary` chunk."""
    seen = []
    fake_llm(monkeypatch, "Upgraded PostgreSQL 15 to 16 with pg_upgrade.", seen=seen)
    url = new_database(server_url)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            register_vector(conn)
            _sync.index(conn, [FIXTURE], agent_id="ops")
            report = _summarize.summarize(conn, agent_id="ops", model="fakellm/summarizer")
            assert (report.written, report.failed) == (3, 0)
            assert "pg_upgrade hung waiting for the old server to stop" in "".join(seen)
            row = conn.execute("select summary, summary_model from recall.sessions "
                               "where session_id = 'pg-upgrade'").fetchone()
            assert row == ("Upgraded PostgreSQL 15 to 16 with pg_upgrade.", "fakellm/summarizer")
            chunk = conn.execute("select content, embedding is null from recall.chunks "
                                 "where session_id = 'pg-upgrade' and kind = 'summary'").fetchone()
            assert chunk == ('Summary of session "Upgrade the database server from PostgreSQL 15 '
                             'to 16": Upgraded PostgreSQL 15 to 16 with pg_upgrade.', True)
            # unchanged sessions are not sent again
            again = _summarize.summarize(conn, agent_id="ops", model="fakellm/summarizer")
            assert again.written == 0 and len(seen) == 3
            # the summary chunk is found by keywords at once
            hits = conn.execute("select kind from recall.hybrid_recall('ops', 'pg_upgrade summary')").fetchall()
            assert ("summary",) in hits
    finally:
        drop_database(server_url, url)


def test_summary_model_without_its_key_is_not_retried(monkeypatch):
    # litellm reports a missing key as a 500; retrying it only made `summarize` wait 3 s
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    from pyrecall._embed import _litellm

    litellm, calls = _litellm(), []
    real = litellm.completion

    def counted(**kwargs):
        calls.append(kwargs["model"])
        return real(**kwargs)

    monkeypatch.setattr(litellm, "completion", counted)
    complete = _summarize._litellm_completion()
    with pytest.raises(litellm.InternalServerError, match="OPENAI_API_KEY"):
        complete(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert calls == ["openai/gpt-4o-mini"]


def test_summarize_with_a_failing_model_says_what_each_session_keeps(server_url, template_url, embedder,
                                                                     monkeypatch):
    """`pyrecall summarize --summarize-with MODEL`: the extractive pass runs first (the session
    vectors); a session the model fails on keeps the summary it had, and the output says which,
    why, and that the next run tries it again; exit 1 when the model wrote none."""
    refuse = {"Redis"}
    fake_llm(monkeypatch, "What the model wrote.", refuse=refuse)
    url = new_database(server_url)
    try:
        with Recall(url, embedder=embedder) as r:
            _sync.index(r.conn, [FIXTURE], agent_id="ops")
            r.embed_pending()
            # a fourth session, later, with nothing embedded: no summary of any kind yet
            r.conn.execute("insert into recall.sessions (session_id, agent_id) values ('fresh', 'ops')")
            r.conn.execute("insert into recall.messages (session_id, agent_id, role, content) "
                           "values ('fresh', 'ops', 'user', 'Is Redis up yet?')")
            env = {"PYRECALL_DSN": url, "PYRECALL_AGENT": "ops"}

            def summarize(model):
                return CliRunner().invoke(main, ["summarize", "--summarize-with", model], env=env)

            def kept():
                return dict(r.conn.execute("select session_id, summary_model from recall.sessions"))

            some = summarize("fakellm/one")
            assert some.exit_code == 0, some.output
            assert some.stdout == "summarized: 3 session(s) extractively, 2 by fakellm/one, 2 failed\n"
            assert some.stderr == (
                "error: redis-cache: AuthenticationError: litellm.AuthenticationError: invalid key\n"
                "error: fresh: AuthenticationError: litellm.AuthenticationError: invalid key\n"
                "note: 2 session(s) not summarized by fakellm/one keep the summary they had "
                "(1 extractive, 1 none: nothing embedded yet); the next run tries 2 again\n")
            assert kept() == {"pg-upgrade": "fakellm/one", "redis-cache": "extractive",
                              "ci-timeouts": "fakellm/one", "fresh": None}

            refuse.add("*")  # now a bad key: after 3 failures the rest is not sent
            none = summarize("fakellm/two")
            assert none.exit_code == 1
            assert none.stdout == "summarized: 0 session(s) extractively, 0 by fakellm/two, 3 failed, 1 not tried\n"
            assert none.stderr.splitlines()[3:] == [
                "note: 1 session(s) not sent to fakellm/two: it failed on the first 3",
                "note: 4 session(s) not summarized by fakellm/two keep the summary they had "
                "(1 extractive, 2 by fakellm/one, 1 none: nothing embedded yet); the next run "
                "tries 4 again"]
            doc = json.loads(CliRunner().invoke(main, ["summarize", "--summarize-with", "fakellm/two",
                                                       "--json"], env=env).stdout)
            assert (doc["written"], doc["failed"], doc["not_tried"]) == (0, 3, 1)
            assert doc["kept"] == {"pg-upgrade": "fakellm/one", "redis-cache": "extractive",
                                   "ci-timeouts": "fakellm/one", "fresh": None}
    finally:
        drop_database(server_url, url)
