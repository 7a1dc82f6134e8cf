"""Session summaries kept current by the worker: a session quiet for a while whose summary is
stale is summarized between embedding batches (recall.summarize_quiet_sessions), extractively
by default, by a chat model when one is configured; a session still being written to waits."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner
from fake_embedder import FakeEmbedder

from pyrecall import _worker
from pyrecall import cli as cli_module
from pyrecall._summarize import QuietSummarizer
from pyrecall._worker import Worker, listen_loop


def talk(conn, sid, minutes_ago, texts, agent="a1"):
    conn.execute("insert into recall.sessions (session_id, agent_id, title) values (%s, %s, %s) "
                 "on conflict do nothing", [sid, agent, f"title {sid}"])
    for i, text in enumerate(texts):
        conn.execute("insert into recall.messages (session_id, role, content, created_at) "
                     "values (%s, %s, %s, now() - %s * interval '1 minute')",
                     [sid, "user" if i % 2 == 0 else "assistant", text, minutes_ago - i * 0.01])


def summaries(conn):
    return dict(conn.execute("select session_id, summary_model from recall.sessions "
                             "where summary is not null order by 1").fetchall())


def quiet(conn, minutes=10, model=None):
    return [r[0] for r in conn.execute(
        "select session_id from recall.summarize_quiet_sessions(%s * interval '1 minute', model => %s)",
        [minutes, model]).fetchall()]


@pytest.fixture
def world(conn):
    talk(conn, "old", 120, ["How do we rotate the signing secret?", "Vault, then redeploy the webhook."])
    talk(conn, "live", 1, ["Deploy is running now", "Watching the logs."])
    Worker(conn, FakeEmbedder()).run()
    return conn


def test_quiet_stale_sessions_only(world):
    assert quiet(world) == ["old"]
    assert summaries(world) == {"old": "extractive"}
    summary = world.execute("select summary, summary_embedding is not null from recall.sessions "
                            "where session_id = 'old'").fetchone()
    assert summary == ("User: How do we rotate the signing secret?\n\nAssistant: Vault, then redeploy the webhook.", True)
    assert quiet(world) == []                                  # current: nothing to do
    # a new message, embedded: stale again, but summarized only once the session is quiet
    talk(world, "old", 0, ["One more question?"])
    Worker(world, FakeEmbedder()).run()
    assert quiet(world) == []
    world.execute("update recall.sessions set ended_at = now() - interval '11 minutes' where session_id = 'old'")
    assert quiet(world) == ["old"]
    assert quiet(world, minutes=0) == ["live"]
    # a model configured: the sessions it has not written are stale for it
    assert sorted(quiet(world, minutes=0, model="fake/chat")) == ["live", "old"]


def test_bad_arguments(world):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="quiet must be a duration"):
        world.execute("select * from recall.summarize_quiet_sessions('-1 minute')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="must be positive"):
        world.execute("select * from recall.summarize_quiet_sessions(max_sessions => 0)")


def test_worker_loop_summarizes_between_batches(db_url, world):
    """The worker's loop (extractive): one pass embeds the new chunks, then summarizes the
    quiet session."""
    talk(world, "later", 60, ["Why did the export time out?", "The query lacked an index."])
    passes = []

    def between(conn):
        passes.append(QuietSummarizer(timedelta(minutes=10), model="").run(conn))

    def connect():
        conn = psycopg.connect(db_url, autocommit=True)
        from pgvector.psycopg import register_vector
        register_vector(conn)
        return conn

    thread = threading.Thread(target=listen_loop, args=(connect, lambda c: Worker(c, FakeEmbedder())),
                              kwargs={"idle_timeout": 0.1, "stop": lambda: len(passes) >= 1,
                                      "between": between})
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert passes[0].extractive == 2 and passes[0].written == 0
    assert summaries(world) == {"later": "extractive", "old": "extractive"}


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_client_run_worker_embeds_summarizes_and_stops(db_url, world, twin):
    """Recall.run_worker (what `pyrecall worker` calls), and its AsyncRecall twin: a pass
    embeds the new chunks and is reported, the quiet session is summarized and reported, and
    ``stop`` ends the loop."""
    import asyncio

    from pyrecall import AsyncRecall, Recall

    talk(world, "later", 60, ["Why did the export time out?", "The query lacked an index."])
    reports, summarized = [], []
    kwargs = {"idle_timeout": 0.1, "summary_model": "", "on_report": reports.append,
              "on_summary": summarized.append, "stop": lambda: len(summarized) >= 1}
    if twin == "sync":
        with Recall(db_url, embedder=FakeEmbedder()) as r:
            r.run_worker(**kwargs)
    else:
        async def go():
            async with await AsyncRecall.connect(db_url, embedder=FakeEmbedder()) as r:
                await r.run_worker(**kwargs)
        asyncio.run(go())
    assert [(p.embedded, p.pending) for p in reports] == [(1, 0)]   # one turn, one chunk
    assert summarized[0].extractive == 2
    assert summaries(world) == {"later": "extractive", "old": "extractive"}


def test_with_a_model_and_a_pause_when_it_keeps_failing(world):
    calls = []

    def good(**kw):
        calls.append(kw["model"])
        return {"choices": [{"message": {"content": "They rotated the secret in Vault."}}]}

    report = QuietSummarizer(timedelta(minutes=10), model="fake/chat", completion=good).run(world)
    assert (report.extractive, report.written, calls) == (1, 1, ["fake/chat"])
    assert summaries(world) == {"old": "fake/chat"}
    assert world.execute("select content from recall.chunks where kind = 'summary'").fetchone()[0] == (
        'Summary of session "title old": They rotated the secret in Vault.')

    def bad(**kw):
        calls.append("bad")
        raise RuntimeError("401 invalid key")

    world.execute("update recall.sessions set summary_model = 'extractive'")
    failing = QuietSummarizer(timedelta(minutes=10), model="fake/chat", completion=bad)
    first = failing.run(world)
    assert (first.failed, first.written) == (1, 0) and "401 invalid key" in first.errors[0]
    second = failing.run(world)          # paused: extractive only, the model is not called again
    assert second.failed == 0 and calls.count("bad") == 1


def test_model_from_the_environment(monkeypatch):
    monkeypatch.setenv("PYRECALL_SUMMARY_MODEL", "openai/gpt-4o-mini")
    assert QuietSummarizer(timedelta(minutes=1)).model == "openai/gpt-4o-mini"
    assert QuietSummarizer(timedelta(minutes=1), model="").model is None
    monkeypatch.delenv("PYRECALL_SUMMARY_MODEL")
    assert QuietSummarizer(timedelta(minutes=1)).model is None


def test_cli_worker_reports_summaries(db_url, world, monkeypatch):
    monkeypatch.setattr(cli_module, "_embedder", lambda model=None: FakeEmbedder())
    monkeypatch.delenv("PYRECALL_SUMMARY_MODEL", raising=False)
    real = _worker.listen_loop

    def loop(connect, make_worker, **kw):
        def between(conn):
            kw["between"](conn)
            raise KeyboardInterrupt            # Ctrl-C after the first pass
        return real(connect, make_worker, idle_timeout=kw["idle_timeout"], on_report=kw["on_report"],
                    between=between)
    monkeypatch.setattr(_worker, "listen_loop", loop)
    result = CliRunner().invoke(cli_module.main, ["worker", "--idle-timeout", "0.2", "--summarize-after", "5"],
                                env={"PYRECALL_DSN": db_url})
    assert result.exit_code == 0, result.output
    assert "summaries after 5 min quiet (extractive)" in result.stderr
    assert "summarized 1 quiet session(s)" in result.stdout
    assert summaries(world) == {"old": "extractive"}
