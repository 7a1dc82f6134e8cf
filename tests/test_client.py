"""The Python client end to end: real database, real local embedding model."""

import asyncio
import socket
import time
from datetime import UTC, datetime

import psycopg
import pytest
from fake_embedder import FakeEmbedder

from pyrecall import ConfigError, NotFoundError
from pyrecall import client as client_module
from pyrecall._embed import get_embedder
from pyrecall.client import AsyncRecall, Memory, Recall

T = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

CONVERSATIONS = {
    "deploy": [("user", "How did we deploy the API container?"),
               ("assistant", "We build the image with docker compose and run it behind nginx on port 8080.")],
    "auth": [("user", "Which library handles the login tokens?"),
             ("assistant", "PyJWT signs the access tokens; refresh tokens are stored hashed in Postgres.")],
    "food": [("user", "Any idea for dinner?"),
             ("assistant", "A mushroom risotto with parmesan would be nice.")],
}


@pytest.fixture(scope="session")
def local_embedder():
    return get_embedder("local/all-MiniLM-L6-v2")


@pytest.fixture
def client(db_url, local_embedder):
    with Recall(db_url, embedder=local_embedder) as r:
        for sid, turns in CONVERSATIONS.items():
            r.add_session(sid, "aria", project="acme-api", branch="main")
            r.add_messages(sid, [{"role": role, "content": text, "created_at": T} for role, text in turns])
        yield r


def test_add_messages_is_idempotent_and_chunks(client):
    again = client.add_messages("deploy", [{"role": role, "content": text, "created_at": T}
                                           for role, text in CONVERSATIONS["deploy"]])
    assert (again.messages, again.inserted) == (2, 0)
    assert client.conn.execute("select count(*) from recall.chunks").fetchone()[0] == 3


def test_recall_by_meaning_after_embedding(client):
    report = client.embed_pending()
    assert (report.embedded, report.pending) == (3, 0)
    result = client.recall("aria", "shipping the service in a container", k=2)
    assert result.source == "hybrid" and result.note is None
    assert isinstance(result[0], Memory) and result[0].session_id == "deploy"
    assert result[0].similarity is not None and result[0].kind == "turn_pair"


def test_recall_budget_and_filters(client):
    client.embed_pending()
    result = client.recall("aria", "tokens", token_budget=10_000, filter={"project": "acme-api"},
                           kinds=["turn_pair"], half_life=7)
    assert result.tokens == result[-1].cumulative_tokens
    assert client.recall("aria", "tokens", filter={"project": "other"}).memories == []


def test_keyword_fallback_when_provider_is_down(db_url):
    with socket.socket() as s:                 # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = get_embedder("openai/text-embedding-3-small", api_base=f"http://127.0.0.1:{port}/v1",
                        api_key="test", dim=384, max_attempts=2, timeout=2)
    with Recall(db_url, embedder=down) as r:
        r.add_session("s", "bob")
        r.add_messages("s", [{"role": "user", "content": "the nginx reverse proxy config"}])
        result = r.recall("bob", "nginx proxy")
    assert result.source == "keyword"
    assert "query embedding failed" in result.note
    assert [m.session_id for m in result] == ["s"]


def test_query_of_another_model_recalls_by_keywords_and_says_which(client, db_url, monkeypatch):
    # the agent's chunks are MiniLM's; a query vector of another model would rank noise by
    # "meaning": it is not even computed, the recall goes by keywords and says what to do
    monkeypatch.setattr(client_module, "MODEL_CHECK_SECONDS", 0.0)  # read at every recall
    client.embed_pending()
    other = FakeEmbedder(model="openai/text-embedding-3-small")
    with Recall(db_url, embedder=other) as r:
        for result in (r.recall("aria", "docker compose nginx"),
                       r.session_recall("aria", "docker compose nginx"),
                       r.auto_context("aria", task_text="docker compose nginx")):
            assert result.source == "keyword"
            assert result.note.startswith("the agent's memories were embedded with "
                                          "local/all-MiniLM-L6-v2, the query would be with "
                                          "openai/text-embedding-3-small: keyword search only")
            assert "pyrecall embed --reembed" in result.note
        assert r.recall("aria", "docker compose nginx")[0].session_id == "deploy"
        assert r.recall("nobody", "docker").note is None  # nothing embedded: nothing to compare
        # a memory is not embedded now by the other model (the worker embeds it with the agent's)
        mid = r.remember("aria", "Deploys go through ArgoCD")
        assert r.conn.execute("select embedding is null, embedding_model from recall.chunks "
                              "where chunk_id = %s", [mid]).fetchone() == (True, None)
        # inside the caller's transaction, on a database without the function (not migrated
        # to this version): no check, and the transaction goes on
        sessions = r.conn.execute("select count(*) from recall.sessions").fetchone()[0]
        with r.conn.transaction():
            r.conn.execute("drop function recall.embedding_model(text)")
            assert r.recall("aria", "docker compose nginx").source == "hybrid"
            assert r.conn.execute("select count(*) from recall.sessions").fetchone()[0] == sessions
            raise psycopg.Rollback  # the function back
    assert other.seen == ["docker", "docker compose nginx"]  # only where there was nothing to vet

    async def go():
        other = FakeEmbedder(model="fake/other")
        async with await AsyncRecall.connect(db_url, embedder=other) as a:
            mid = await a.remember("aria", "Releases are tagged by CI")
            return await a.recall("aria", "docker compose nginx"), mid, other.seen

    result, mid, seen = asyncio.run(go())
    assert result.source == "keyword" and "embedded with local/all-MiniLM-L6-v2" in result.note
    assert seen == []
    assert client.conn.execute("select embedding is null from recall.chunks where chunk_id = %s",
                               [mid]).fetchone() == (True,)
    assert client.embed_pending().embedded == 2  # both memories, by the agent's model


def test_query_of_the_int8_model_ranks_against_the_fp32_vectors(client, db_url):
    # the int8 MiniLM is the same model quantised (one vector space): no note, by meaning
    client.embed_pending()
    with Recall(db_url, model="local/all-MiniLM-L6-v2-int8") as r:
        result = r.recall("aria", "shipping the service in a container", k=1)
    assert result.source == "hybrid" and result.note is None
    assert result[0].session_id == "deploy"


def test_unknown_option_and_missing_session(client):
    with pytest.raises(ConfigError, match="unknown recall option"):
        client.recall("aria", "x", weight=1)
    with pytest.raises(ConfigError, match="session 'nope' does not exist: pass agent_id"):
        client.add_messages("nope", [{"role": "user", "content": "hi"}])


def test_async_twin(client, db_url, local_embedder):
    client.embed_pending()

    async def go():
        async with await AsyncRecall.connect(db_url, embedder=local_embedder) as r:
            new = await r.add_messages("async-s", [{"role": "user", "content": "a brand new note about kafka"}],
                                       agent_id="aria")
            return new, await r.recall("aria", "Which library signs login tokens?", k=1)

    new, result = asyncio.run(go())
    assert new.inserted == 1
    assert result.source == "hybrid" and result[0].session_id == "auth"


def test_async_recall_is_a_real_twin_of_recall():
    """Every public method of Recall is on AsyncRecall with the same parameters (names, kinds,
    defaults) and return annotation, and is a coroutine there."""
    import inspect

    def public(cls):
        return {n: f for n, f in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}

    sync, async_ = public(Recall), public(AsyncRecall)
    assert set(sync) - set(async_) == set()
    for name, fn in sync.items():
        assert inspect.iscoroutinefunction(async_[name]), name
        assert inspect.signature(async_[name]) == inspect.signature(fn), name


def test_async_twin_writes_embeds_and_forgets(db_url, local_embedder):
    async def go():
        async with await AsyncRecall.connect(db_url, embedder=local_embedder) as r:
            await r.add_session("tw-1", "twin", title="the twin", project="api")
            report = await r.add_messages("tw-1", [
                {"role": "user", "content": "the staging deploy needs the VPN up first"},
                {"role": "assistant", "content": "noted: connect the VPN, then deploy to staging"}])
            embedded = await r.embed_pending(agent_id="twin")
            by_session = await r.session_recall("twin", "what must be up before deploying?", k=2)
            listed = [(s["session_id"], s["messages"]) for s in await r.sessions("twin")]
            shown = await r.show("twin", "tw-1")
            infos = await r.session_infos(["tw-1"])
            gone = await r.forget(agent_id="twin", session_id="tw-1")
            after = await r.recall("twin", "VPN staging deploy")
            return report, embedded, by_session, gone, after, (listed, shown, infos)

    report, embedded, by_session, gone, after, (listed, shown, infos) = asyncio.run(go())
    assert listed == [("tw-1", 2)] and len(shown["messages"]) == 2
    assert shown["title"] == infos["tw-1"].title == "the twin"
    assert (report.messages, report.inserted) == (2, 2)
    assert embedded.embedded >= 1
    assert by_session.source == "hybrid" and by_session[0].session_id == "tw-1"
    assert gone == 1 and len(after) == 0


def test_forget_session_and_agent(client):
    assert client.forget(agent_id="aria", session_id="food") == 1
    assert client.conn.execute("select count(*) from recall.chunks where session_id = 'food'").fetchone()[0] == 0
    assert client.forget(agent_id="aria") == 2
    assert client.conn.execute("select count(*) from recall.messages").fetchone()[0] == 0


def test_the_client_imports_syncs_summarizes_and_lists_what_the_cli_shows(client, tmp_path):
    """import_/sync/summarize/sessions/show: the methods behind the CLI commands of those names."""
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text('{"role": "user", "content": "Where do the nightly backups go?"}\n'
                          '{"role": "assistant", "content": "To the s3 bucket acme-backups."}\n')
    imported = client.import_([tmp_path], agent_id="aria")
    assert (imported.inserted, imported.count("new")) == (2, 1)
    assert client.sync(agent_id="aria").count("unchanged") == 1      # the folder was remembered
    assert client.summarize(agent_id="aria").extractive == 0         # nothing embedded yet
    listed = {s["session_id"]: s for s in client.sessions("aria")}
    assert {"deploy", "auth", "food"} < set(listed)
    assert (listed["auth"]["messages"], listed["auth"]["turns"], listed["auth"]["pending"]) == (2, 1, 1)
    shown = client.show("aria", "auth")
    assert [(m["seq"], m["role"]) for m in shown["messages"]] == [(1, "user"), (2, "assistant")]
    assert shown["project"] == "acme-api" and client.resolve_session("aria", "depl") == "deploy"
    assert client.session_infos(["auth", "auth"])["auth"].turns == 1
    with pytest.raises(NotFoundError, match="no session 'nope' for agent 'aria'"):
        client.show("aria", "nope")
    with pytest.raises(NotFoundError, match="no session 'dep' for agent 'aria'"):
        client.resolve_session("aria", "dep")                         # a prefix of 4 at least
    with pytest.raises(NotFoundError, match="no session 'auth' for agent 'bob'"):
        client.resolve_session("bob", "auth")


def test_what_pyrecall_embed_asks_the_client(client):
    """count_pending, embed_pending with since/filter, cleanup, dimension: the calls of `pyrecall embed`."""
    assert client.dimension() == 384
    assert client.count_pending(agent_id="aria") == 3
    assert client.count_pending(agent_id="aria", filter={"channel": "none"}) == 0
    later = client.embed_pending(agent_id="aria", since=datetime(2026, 3, 2, tzinfo=UTC))
    assert (later.embedded, client.count_pending(agent_id="aria")) == (0, 3)
    seen = []
    assert client.embed_pending(agent_id="aria", progress=seen.append).embedded == 3 and sum(seen) == 3
    assert (client.count_pending(agent_id="aria"), client.cleanup(agent_id="aria")) == (0, 0)


def test_parameters_named_as_in_sql_and_their_former_names(client):
    """session_recall's n_sessions and auto_context's task_text, as the SQL functions name them;
    sessions= and task= (their former names) still work, and both at once is a mistake."""
    def ids(result):
        return [m.chunk_id for m in result]

    by_sql_name = client.session_recall("aria", "login tokens", n_sessions=1)
    assert ids(by_sql_name) == ids(client.session_recall("aria", "login tokens", sessions=1))
    assert {m.session_id for m in by_sql_name} == {"auth"}
    context = client.auto_context("aria", project="acme-api", task_text="login tokens")
    assert ids(context) == ids(client.auto_context("aria", project="acme-api", task="login tokens"))
    with pytest.raises(ConfigError, match="give n_sessions or sessions .its former name., not both"):
        client.session_recall("aria", "x", n_sessions=1, sessions=2)
    with pytest.raises(ConfigError, match="give task_text or task .its former name., not both"):
        client.auto_context("aria", task_text="a", task="b")
    with pytest.raises(ConfigError, match="unknown session_recall option.s.: weight"):
        client.session_recall("aria", "x", weight=1)


class WatchingEmbedder(FakeEmbedder):
    """FakeEmbedder's vectors; while it embeds a query it watches, from a connection of its
    own, what the client's server process runs, until that process has rolled a statement back
    (the client's warm-up) or ``wait`` seconds have passed."""

    def __init__(self, url: str, pid: int, wait: float):
        super().__init__()
        self.url, self.pid, self.wait, self.saw = url, pid, wait, []

    def embed(self, texts):
        with psycopg.connect(self.url, autocommit=True) as watch:
            deadline = time.monotonic() + self.wait
            while time.monotonic() < deadline and "ROLLBACK" not in self.saw:
                self.saw.append(watch.execute("select query from pg_stat_activity where pid = %s",
                                              [self.pid]).fetchone()[0])
                time.sleep(0.002)
        return super().embed(texts)


@pytest.mark.parametrize("call", ["recall", "session_recall", "auto_context"])
def test_first_recall_warms_the_server_process_while_the_query_is_embedded(client, db_url, call):
    """A new server process reads the tables' and functions' definitions and plans at its first
    recall (~25 ms of a one-shot `pyrecall recall`): the client's first recall runs the same
    call by keywords, rolled back, while the query is embedded. Once per client; the same rows."""
    with Recall(db_url, embedder=FakeEmbedder()) as r:
        r.embed_pending()  # the agent's vectors are the watcher's model's
        watcher = WatchingEmbedder(db_url, r.conn.info.backend_pid, wait=10)
        r._embedder = watcher

        def run():
            if call == "auto_context":
                return r.auto_context("aria", task_text="docker compose nginx", token_budget=500)
            return getattr(r, call)("aria", "docker compose nginx", token_budget=500)

        first = run()
        assert watcher.saw[-1] == "ROLLBACK"  # the warm-up ran to its end while embedding
        watcher.saw, watcher.wait = [], 0.3
        second = run()
        assert "ROLLBACK" not in watcher.saw and watcher.saw  # no second warm-up
        assert first.source == second.source == "hybrid"
        assert [(m.chunk_id, m.content, m.n_tokens) for m in first] == \
               [(m.chunk_id, m.content, m.n_tokens) for m in second]
        assert r.conn.execute("select count(*) from recall.sessions").fetchone()[0] == 3


@pytest.mark.parametrize("call", ["recall", "session_recall", "auto_context"])
def test_the_async_clients_first_recall_warms_the_server_process_too(client, db_url, call):
    """AsyncRecall's first recall: the same warm-up, a task on its connection while the query
    is embedded in a worker thread (as the local model's aembed does)."""
    class Threaded(WatchingEmbedder):
        async def aembed(self, texts):
            return await asyncio.to_thread(self.embed, texts)

    with Recall(db_url, embedder=FakeEmbedder()) as r:
        r.embed_pending()

    async def go():
        async with await AsyncRecall.connect(db_url, embedder=FakeEmbedder()) as a:
            watcher = Threaded(db_url, a.conn.info.backend_pid, wait=10)
            a._embedder = watcher

            async def run():
                if call == "auto_context":
                    return await a.auto_context("aria", task_text="docker compose nginx", token_budget=500)
                return await getattr(a, call)("aria", "docker compose nginx", token_budget=500)

            first, saw = await run(), watcher.saw
            watcher.saw, watcher.wait = [], 0.3
            return first, saw, await run(), watcher.saw

    first, saw, second, saw_again = asyncio.run(go())
    assert saw[-1] == "ROLLBACK"                       # the warm-up ran to its end while embedding
    assert "ROLLBACK" not in saw_again and saw_again   # once per client
    assert first.source == second.source == "hybrid"
    assert [(m.chunk_id, m.content, m.n_tokens) for m in first] == \
           [(m.chunk_id, m.content, m.n_tokens) for m in second]
    with Recall(db_url, embedder=FakeEmbedder()) as r:
        assert [(m.chunk_id, m.content) for m in first] == [(m.chunk_id, m.content) for m in (
            r.auto_context("aria", task_text="docker compose nginx", token_budget=500) if call == "auto_context"
            else getattr(r, call)("aria", "docker compose nginx", token_budget=500))]


def test_a_failed_warm_up_leaves_the_callers_transaction_going(client, db_url):
    with Recall(db_url, embedder=FakeEmbedder()) as r, r.conn.transaction():
        r.add_session("mine", "aria")
        r._warm_backend("hybrid_recall", {"agent_id": "aria", "query_text": "docker",
                                          "query_embedding": None, "k": -1}).join()  # refused
        assert r.conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert r._warm_backend("hybrid_recall", {}) is None  # once per client
        assert r.recall("aria", "docker compose nginx").source == "hybrid"
        assert r.conn.execute("select count(*) from recall.sessions where session_id = 'mine'"
                              ).fetchone()[0] == 1


def test_the_warm_up_asks_for_a_word_found_nowhere(client, db_url):
    """The warm-up runs the recall's own statements on no rows: its cost does not grow with the
    agent (a keyword recall of the question itself would rank every match once more)."""
    with Recall(db_url, embedder=FakeEmbedder()) as r:
        sent, real = [], r.conn.execute

        def spy(query, params=None, **kw):
            sent.append((query, params))
            return real(query, params, **kw)
        r.conn.execute = spy
        assert r.auto_context("aria", task_text="docker compose nginx").source == "hybrid"
    warm = [(q, p) for q, p in sent if isinstance(p, dict) and p.get("task_text") == client_module.WARM_UP_TEXT]
    assert len(warm) == 1 and warm[0][1]["task_embedding"] is None
    for function in ("hybrid_recall", "session_recall"):
        args = {"agent_id": "aria", "query_text": client_module.WARM_UP_TEXT, "query_embedding": None}
        assert client.conn.execute(client_module._call(function, args), args).fetchall() == []
    assert client.recall("aria", "docker").memories  # (where a real word finds chunks)
