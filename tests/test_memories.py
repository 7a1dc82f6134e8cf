"""Curated memories: recall.remember / forget_memory / pin_memory / memories, in SQL and from
Python (Recall, AsyncRecall); ranked with the transcripts by recall v4."""

import asyncio
import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest
from fake_embedder import FakeEmbedder

from pyrecall import NotFoundError
from pyrecall._embed import get_embedder
from pyrecall._worker import Worker, cleanup
from pyrecall.client import AsyncRecall, CuratedMemory, Recall, RecallResult


def remember(conn, agent, content, **kw):
    args = {"agent_id": agent, "content": content, **kw}
    names = ", ".join(f"{k} => %({k})s" for k in args)
    return conn.execute(f"select recall.remember({names})", args).fetchone()[0]


def hybrid(conn, agent, query, **kw):
    args = {"agent_id": agent, "query_text": query, **kw}
    names = ", ".join(f"{k} => %({k})s" for k in args)
    cur = conn.execute(f"select * from recall.hybrid_recall({names})", args)
    cols = [d.name for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def chunk(conn, chunk_id):
    cur = conn.execute("select * from recall.chunks where chunk_id = %s", [chunk_id])
    row = cur.fetchone()
    return dict(zip([d.name for d in cur.description], row, strict=True)) if row else None


# ---------------------------------------------------------------- SQL

def test_remember_is_found_by_keywords_at_once(conn):
    mid = remember(conn, "aria", "The staging database lives on db-7.internal, port 6432",
                   kind="fact", project="acme")
    c = chunk(conn, mid)
    assert (c["kind"], c["memory_kind"], c["session_id"], c["pinned"], c["importance"]) == (
        "memory", "fact", "memories:aria", False, pytest.approx(0.7))
    assert c["embedding"] is None and c["valid_until"] is None and c["valid_from"] is not None
    assert c["metadata"] == {"project": "acme"} and c["message_ids"] == []
    rows = hybrid(conn, "aria", "where is the staging database?")
    assert [r["chunk_id"] for r in rows] == [mid]
    r = rows[0]
    assert (r["memory_id"], r["agent_id"], r["session_title"], r["role"], r["memory_kind"]) == (
        mid, "aria", "Memories", None, "fact")
    assert conn.execute("select title, agent_id from recall.sessions where session_id = 'memories:aria'"
                        ).fetchone() == ("Memories", "aria")


def test_the_same_memory_is_kept_once(conn):
    """Remembering what the agent holds already (same kind and project, the same text but for
    case and spacing, still true) returns its id and stores nothing; pinned when asked, given a
    vector when it has none. Another kind, project or agent, or a superseded memory, is another."""
    first = remember(conn, "aria", "Deploys go out on Tuesdays.", kind="decision", project="acme")
    count = lambda: conn.execute("select count(*) from recall.chunks where kind = 'memory'").fetchone()[0]  # noqa: E731
    assert remember(conn, "aria", "Deploys go out on Tuesdays.", kind="decision", project="acme") == first
    assert remember(conn, "aria", "  deploys go OUT\non   Tuesdays. ", kind="decision", project="acme") == first
    assert count() == 1 and chunk(conn, first)["pinned"] is False
    assert remember(conn, "aria", "Deploys go out on Tuesdays.", kind="decision", project="acme", pinned=True) == first
    assert chunk(conn, first)["pinned"] is True and count() == 1
    vector = FakeEmbedder().vector("Deploys go out on Tuesdays.")
    assert remember(conn, "aria", "Deploys go out on Tuesdays.", kind="decision", project="acme",
                    embedding=vector, embedding_model="fake/hash") == first
    assert chunk(conn, first)["embedding_model"] == "fake/hash"
    others = [remember(conn, "aria", "Deploys go out on Tuesdays.", kind="fact", project="acme"),
              remember(conn, "aria", "Deploys go out on Tuesdays.", kind="decision", project="web"),
              remember(conn, "aria", "Deploys go out on Tuesdays.", kind="decision"),
              remember(conn, "aria", "Deploys go out on Thursdays.", kind="decision", project="acme"),
              remember(conn, "bob", "Deploys go out on Tuesdays.", kind="decision", project="acme")]
    assert len({first, *others}) == 6 and count() == 6
    # corrected, then said again: the old one is no longer true, so this is a new memory
    newer = remember(conn, "aria", "Deploys go out on Wednesdays.", kind="decision", project="acme",
                     supersedes=first)
    again = remember(conn, "aria", "Deploys go out on Tuesdays.", kind="decision", project="acme")
    assert again not in (first, newer) and count() == 8


def test_remember_with_an_embedding_is_embedded_at_once(conn):
    fake = FakeEmbedder()
    vec = fake.vector("tabs")
    mid = remember(conn, "aria", "Prefers tabs over spaces", kind="preference",
                   embedding=vec, embedding_model="fake/hash")
    c = chunk(conn, mid)
    assert c["embedding"] is not None and c["embedding_model"] == "fake/hash" and c["embedded_at"]
    rows = hybrid(conn, "aria", None, query_embedding=vec)
    assert rows[0]["memory_id"] == mid and rows[0]["similarity"] == pytest.approx(1.0, abs=1e-6)


def test_memory_is_embedded_by_the_normal_worker(conn):
    mid = remember(conn, "aria", "Release notes go in CHANGES.md")
    report = Worker(conn, FakeEmbedder(), agent="aria").run()
    assert report.embedded == 1
    assert chunk(conn, mid)["embedding_model"] == "fake/hash"


BAD = [
    (dict(content="   "), "22023", "empty content: a memory needs text"),
    (dict(content=None), "22023", "empty content: a memory needs text"),
    (dict(kind="opinion"), "22023", "unknown memory kind 'opinion': expected one of note, fact, decision, preference"),
    (dict(importance=1.5), "22023", "importance must be between 0 and 1, got 1.5"),
    (dict(importance=-0.1), "22023", "importance must be between 0 and 1, got -0.1"),
    (dict(metadata="[1]"), "22023", "metadata must be a JSON object, got a JSON array"),
    (dict(agent_id=""), "22023", "agent_id is required"),
    (dict(supersedes=999999), "P0002", "memory 999999 not found for agent 'aria'"),
]


@pytest.mark.parametrize("args, sqlstate, message", BAD)
def test_remember_refuses_bad_input(conn, args, sqlstate, message):
    kw = {"content": "a memory", **args}
    agent = kw.pop("agent_id", "aria")
    with pytest.raises(psycopg.Error, match="^" + message.replace("(", r"\(")) as e:
        remember(conn, agent, **kw)
    assert e.value.sqlstate == sqlstate
    assert conn.execute("select count(*) from recall.chunks where kind = 'memory'").fetchone()[0] == 0


def test_supersedes_and_as_of(conn):
    old = remember(conn, "aria", "The deploy tool is kubectl apply", kind="fact", project="acme", pinned=True)
    conn.execute("update recall.chunks set created_at = created_at - interval '2 days', "
                 "valid_from = valid_from - interval '2 days' where chunk_id = %s", [old])
    before = conn.execute("select now() - interval '1 day'").fetchone()[0]
    new = remember(conn, "aria", "The deploy tool is ArgoCD", kind="fact", supersedes=old)
    o, n = chunk(conn, old), chunk(conn, new)
    assert o["valid_until"] == n["valid_from"] and n["supersedes"] == old
    # the new one inherits the project and the pin
    assert n["metadata"] == {"project": "acme"} and n["pinned"]
    # default: the current one only
    assert [r["memory_id"] for r in hybrid(conn, "aria", "deploy tool")] == [new]
    # as_of before the change: the old one and not the new
    assert [r["memory_id"] for r in hybrid(conn, "aria", "deploy tool", as_of=before)] == [old]
    # as_of before either existed: none
    assert hybrid(conn, "aria", "deploy tool", as_of=before - timedelta(days=5)) == []
    # as_of after the change: the new one
    after = conn.execute("select now() + interval '1 minute'").fetchone()[0]
    assert [r["memory_id"] for r in hybrid(conn, "aria", "deploy tool", as_of=after)] == [new]
    # an old one cannot be superseded twice
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"memory {old} was already superseded"):
        remember(conn, "aria", "The deploy tool is Flux", supersedes=old)
    # the list: current by default, both with include_superseded
    cur = conn.execute("select memory_id, superseded_by, valid_until is null from recall.memories('aria')")
    assert cur.fetchall() == [(new, None, True)]
    rows = conn.execute("select memory_id, supersedes, superseded_by from recall.memories("
                        "'aria', include_superseded => true)").fetchall()
    assert rows == [(new, old, None), (old, None, new)]


def test_forget_memory(conn):
    old = remember(conn, "aria", "Lint with flake8")
    new = remember(conn, "aria", "Lint with ruff", supersedes=old)
    assert conn.execute("select recall.forget_memory('aria', %s)", [new]).fetchone()[0] == 1
    assert chunk(conn, new) is None
    assert hybrid(conn, "aria", "lint ruff") == []
    # the one it replaced stays superseded; forgetting it clears the link of nothing left
    assert chunk(conn, old)["valid_until"] is not None
    new2 = remember(conn, "aria", "Lint with pylint")
    newer = remember(conn, "aria", "Lint with ruff and mypy", supersedes=new2)
    conn.execute("select recall.forget_memory('aria', %s)", [new2])
    assert chunk(conn, newer)["supersedes"] is None
    with pytest.raises(psycopg.errors.NoDataFound, match=f"memory {new} not found for agent 'aria'"):
        conn.execute("select recall.forget_memory('aria', %s)", [new])


def test_transcript_chunks_are_no_memories(conn):
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s1', 'aria')")
    conn.execute("insert into recall.messages (session_id, role, content) values ('s1', 'user', 'hello')")
    cid = conn.execute("select chunk_id from recall.chunks where session_id = 's1'").fetchone()[0]
    for sql in ("select recall.forget_memory('aria', %s)", "select recall.pin_memory('aria', %s, true)"):
        with pytest.raises(psycopg.errors.NoDataFound, match=f"memory {cid} not found"):
            conn.execute(sql, [cid])
    assert chunk(conn, cid) is not None


def test_other_agents_memory_refused_plain_connection(conn):
    theirs = remember(conn, "bob", "Bob's secret: the vault key is in 1Password")
    for sql in ("select recall.forget_memory('aria', %s)", "select recall.pin_memory('aria', %s, true)",
                "select recall.remember('aria', 'x', supersedes => %s)"):
        with pytest.raises(psycopg.errors.NoDataFound, match=f"memory {theirs} not found for agent 'aria'"):
            conn.execute(sql, [theirs])
    c = chunk(conn, theirs)
    assert c is not None and not c["pinned"] and c["valid_until"] is None
    assert hybrid(conn, "aria", "vault key secret") == []


@pytest.fixture
def agent_role(conn):
    role = f"mem_agent_{uuid.uuid4().hex[:8]}"
    conn.execute(f"create role {role} login in role recall_agent")
    yield role
    conn.execute(f"drop owned by {role}")
    conn.execute(f"drop role {role}")


def test_rls_bound_role_reaches_its_memories_only(db_url, conn, agent_role):
    theirs = remember(conn, "bob", "Bob pinned fact", pinned=True)
    conn.execute("select recall.bind_agent(%s, 'aria')", [agent_role])
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute(f"set role {agent_role}")
        c.execute("select set_config('recall.agent_id', 'bob', false)")   # no way out of the binding
        mine = remember(c, "aria", "Aria remembers the runbook URL", pinned=True)
        assert [r["memory_id"] for r in hybrid(c, "aria", "runbook URL")] == [mine]
        # bob's id, even asked as bob: invisible, refused as unknown
        for agent in ("aria", "bob"):
            with pytest.raises(psycopg.errors.NoDataFound, match=f"memory {theirs} not found"):
                c.execute("select recall.forget_memory(%s, %s)", [agent, theirs])
            with pytest.raises(psycopg.errors.NoDataFound):
                c.execute("select recall.pin_memory(%s, %s, false)", [agent, theirs])
        assert c.execute("select count(*) from recall.memories('bob')").fetchone()[0] == 0
        # writing as another agent is refused by row-level security
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            remember(c, "bob", "planted")
        assert c.execute("select recall.forget_memory('aria', %s)", [mine]).fetchone()[0] == 1
    assert chunk(conn, theirs)["pinned"] is True
    assert conn.execute("select count(*) from recall.chunks where agent_id = 'bob'").fetchone()[0] == 1


def test_memories_session_name_is_the_agents_own(conn):
    with pytest.raises(psycopg.errors.CheckViolation, match="sessions_memories_name_check"):
        conn.execute("insert into recall.sessions (session_id, agent_id) values ('memories:aria', 'bob')")


def test_memories_survive_rechunking_reimport_and_cleanup(conn):
    mid = remember(conn, "aria", "Keep the changelog short")
    # a session update of the memories session re-chunks it from its start ...
    conn.execute("update recall.sessions set metadata = '{\"x\": 1}' where session_id = 'memories:aria'")
    # ... an imported session re-imported, changed ...
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('imp', 'aria')")
    conn.execute("insert into recall.messages (session_id, role, content) values ('imp', 'user', 'q'), "
                 "('imp', 'assistant', 'a')")
    conn.execute("delete from recall.messages where session_id = 'imp'")
    conn.execute("insert into recall.messages (session_id, role, content) values ('imp', 'user', 'q2')")
    # ... and the worker's clean-up of chunks whose messages are gone
    cleanup(conn, agent="aria")
    assert chunk(conn, mid) is not None


def test_pin_and_list(conn):
    a = remember(conn, "aria", "Always answer in English", kind="preference")
    b = remember(conn, "aria", "acme uses Python 3.12", kind="fact", project="acme")
    c = remember(conn, "aria", "other uses Go", kind="fact", project="other")
    conn.execute("select recall.pin_memory('aria', %s)", [a])
    assert chunk(conn, a)["pinned"]
    ids = lambda sql, *p: [r[0] for r in conn.execute(sql, p).fetchall()]  # noqa: E731
    assert ids("select memory_id from recall.memories('aria')") == [c, b, a]
    assert ids("select memory_id from recall.memories('aria', project => 'acme')") == [b, a]
    assert ids("select memory_id from recall.memories('aria', kind => 'fact')") == [c, b]
    assert ids("select memory_id from recall.memories('aria', pinned_only => true)") == [a]
    assert ids("select memory_id from recall.memories('aria', max_rows => 1)") == [c]
    conn.execute("select recall.pin_memory('aria', %s, false)", [a])
    assert ids("select memory_id from recall.memories('aria', pinned_only => true)") == []
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown memory kind 'x'"):
        conn.execute("select * from recall.memories('aria', kind => 'x')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="pinned must be true or false"):
        conn.execute("select recall.pin_memory('aria', %s, null)", [a])


# ---------------------------------------------------------------- Python, real local model

@pytest.fixture(scope="session")
def local_embedder():
    return get_embedder("local/all-MiniLM-L6-v2")


@pytest.fixture
def client(db_url, local_embedder):
    with Recall(db_url, embedder=local_embedder) as r:
        r.add_session("s1", "aria", project="acme")
        r.add_messages("s1", [{"role": "user", "content": "Any idea for dinner?"},
                              {"role": "assistant", "content": "A mushroom risotto with parmesan."}])
        r.embed_pending()
        yield r


def test_client_remember_is_found_by_meaning(client):
    mid = client.remember("aria", "Our production PostgreSQL cluster is upgraded every spring",
                          kind="fact", project="acme")
    listed = client.memories("aria")
    assert isinstance(listed[0], CuratedMemory)
    assert [(m.memory_id, m.kind, m.embedded, m.project) for m in listed] == [(mid, "fact", True, "acme")]
    # no word in common: found by meaning, embedded at once by the client's model
    result = client.recall("aria", "when do we update the database servers?", k=3)
    assert result.source == "hybrid"
    top = result[0]
    assert (top.memory_id, top.chunk_id, top.kind, top.memory_kind, top.agent_id, top.session_title) == (
        mid, mid, "memory", "fact", "aria", "Memories")
    assert top.text_rank == 0 and top.similarity > 0.3
    transcript = next(m for m in result if m.memory_id is None)
    assert transcript.role == "user+assistant" and transcript.agent_id == "aria"


def test_client_memory_without_embedding_is_embedded_by_the_worker(client):
    mid = client.remember("aria", "The office wifi password rotates monthly", embed=False)
    assert not client.memories("aria")[0].embedded
    assert client.embed_pending().embedded == 1
    assert client.recall("aria", "network credentials change", k=1)[0].memory_id == mid


def test_client_supersede_as_of_forget_pin(client):
    old = client.remember("aria", "Deploys run with kubectl apply", kind="decision")
    t = datetime.now(UTC)
    new = client.remember("aria", "Deploys run through ArgoCD", kind="decision", supersedes=old)
    ids = lambda res: [m.memory_id for m in res if m.memory_id is not None]  # noqa: E731
    assert ids(client.recall("aria", "how do deploys run")) == [new]
    assert ids(client.recall("aria", "how do deploys run", as_of=t)) == [old]
    client.pin_memory("aria", new)
    ctx = client.auto_context("aria", project="acme", token_budget=500)
    assert ctx[0].section == "pinned" and ctx[0].memory_id == new
    client.pin_memory("aria", new, pinned=False)
    assert all(m.section != "pinned" for m in client.auto_context("aria", project="acme"))
    assert client.forget_memory("aria", new) == 1
    assert ids(client.recall("aria", "how do deploys run")) == []
    with pytest.raises(NotFoundError, match=f"memory {new} not found for agent 'aria'"):
        client.forget_memory("aria", new)
    with pytest.raises(NotFoundError, match=f"memory {new} not found"):
        client.pin_memory("aria", new)
    with pytest.raises(NotFoundError, match=f"memory {new} not found"):
        client.remember("aria", "x", supersedes=new)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown memory kind 'opinion'"):
        client.remember("aria", "x", kind="opinion")


def test_async_client(db_url, local_embedder):
    async def run():
        async with await AsyncRecall.connect(db_url, embedder=local_embedder) as r:
            mid = await r.remember("aria", "The build cache lives in S3", kind="fact", pin=True)
            assert [m.memory_id for m in await r.memories("aria", pinned_only=True)] == [mid]
            found = await r.recall("aria", "where is the build cache stored?")
            assert found[0].memory_id == mid and found[0].memory_kind == "fact"
            ctx = await r.auto_context("aria", token_budget=100)
            assert [(m.section, m.memory_id) for m in ctx] == [("pinned", mid)]
            await r.pin_memory("aria", mid, pinned=False)
            assert await r.memories("aria", pinned_only=True) == []
            assert await r.forget_memory("aria", mid) == 1
            with pytest.raises(NotFoundError):
                await r.forget_memory("aria", mid)
    asyncio.run(run())


# ---------------------------------------------------------------- CLI

def test_cli_remember_list_pin_forget(db_url, local_embedder, monkeypatch):
    from click.testing import CliRunner

    from pyrecall.cli import main
    monkeypatch.delenv("PYRECALL_AGENT", raising=False)
    monkeypatch.delenv("PYRECALL_EMBED_MODEL", raising=False)

    def run(*args):
        return CliRunner().invoke(main, [str(a) for a in args], env={"PYRECALL_DSN": db_url})

    out = run("remember", "Staging deploys go through ArgoCD", "--kind", "fact", "--agent", "aria",
              "--project", "acme", "--json")
    assert out.exit_code == 0, out.output
    old = json.loads(out.output)["id"]
    out = run("remember", "Staging deploys go through Flux", "--kind", "fact", "--agent", "aria",
              "--supersedes", old, "--pin")
    assert out.exit_code == 0, out.output
    new = int(re.match(r"remembered memory (\d+) \(fact, pinned, superseding \d+\)", out.output).group(1))
    out = run("memories", "--agent", "aria")
    assert out.exit_code == 0 and f"{new}" in out.output and "pinned, acme" in out.output
    assert f"{old} " not in out.output
    out = run("memories", "--agent", "aria", "--all", "--json")
    listed = {m["memory_id"]: m for m in json.loads(out.output)}
    assert listed[old]["superseded_by"] == new and listed[new]["project"] == "acme"
    # found by meaning (embedded at once), the old one only as of before the change
    out = run("recall", "how do we ship to staging?", "--agent", "aria", "--format", "json")
    assert [m["memory_id"] for m in json.loads(out.output)["memories"]] == [new]
    # a time while the old one was true: between its valid_from and its valid_until (the two
    # remember calls may be well under a second apart)
    since_, until_ = (datetime.fromisoformat(listed[old][k]) for k in ("valid_from", "valid_until"))
    out = run("recall", "how do we ship to staging?", "--agent", "aria", "--format", "json",
              "--as-of", (since_ + (until_ - since_) / 2).isoformat())
    assert [m["memory_id"] for m in json.loads(out.output)["memories"]] == [old]
    out = run("recall", "--auto", "--agent", "aria", "--project", "acme", "--all-projects")
    assert out.exit_code == 0 and out.output.startswith("## Relevant memory\n### Pinned\n")
    assert f"fact #{new}" in out.output and "Flux" in out.output
    out = run("pin", new, "--off", "--agent", "aria")
    assert out.output == f"unpinned memory {new}\n"
    out = run("forget", "--memory", new, "--agent", "aria")
    assert out.exit_code == 0 and out.output.startswith(f"forgot memory {new}")
    # the one it replaced stays superseded, by a memory no longer there (not "by None")
    out = run("memories", "--agent", "aria", "--all")
    assert out.exit_code == 0 and re.fullmatch(
        rf"\s+{old}  \S+  \[fact, acme, superseded \S+ \S+ by a forgotten memory\]  "
        r"Staging deploys go through ArgoCD\n", out.output), out.output
    for args in (("forget", "--memory", new, "--agent", "aria"), ("pin", new, "--agent", "aria")):
        out = run(*args)
        assert out.exit_code == 1 and out.output == f"Error: memory {new} not found for agent 'aria'\n"
    out = run("remember", "x", "--kind", "opinion")
    assert out.exit_code == 2 and "'opinion' is not one of" in out.output
    out = run("remember", "  ", "--agent", "aria", "--no-embed")
    assert out.exit_code == 1 and out.output == "Error: empty content: a memory needs text\n"
    out = run("forget", "--memory", 1, "--session", "s")
    assert out.exit_code == 2 and "give one of --session SESSION, --memory ID, --before WHEN or --all" in out.output
    out = run("recall", "x", "--all-projects")
    assert out.exit_code == 2 and "--all-projects goes with --auto" in out.output


def test_cli_recall_turns_per_session(db_url, local_embedder, monkeypatch):
    from click.testing import CliRunner

    from pyrecall.cli import main
    monkeypatch.delenv("PYRECALL_EMBED_MODEL", raising=False)
    with Recall(db_url, embedder=local_embedder) as r:
        for s in ("s1", "s2"):
            r.add_messages(s, [{"role": "user", "content": f"deploy question {i} in {s}"}
                               for i in range(4)], agent_id="aria")
    out = CliRunner().invoke(main, ["recall", "deploy question", "--agent", "aria", "--format", "json",
                                    "--turns-per-session", "1"], env={"PYRECALL_DSN": db_url})
    assert out.exit_code == 0, out.output
    assert sorted(m["session_id"] for m in json.loads(out.output)["memories"]) == ["s1", "s2"]


def test_render_context_public_helper(client):
    from pyrecall import render_context
    mid = client.remember("aria", "Dinner on Fridays is always risotto", kind="preference", pin=True)
    block = render_context(client.auto_context("aria", task="what do we cook for dinner?"))
    assert block.startswith("## Relevant memory\n### Pinned\n")
    assert f"preference #{mid}" in block and "Dinner on Fridays" in block
    assert "### Recent" in block and "mushroom risotto" in block
    listed = render_context(client.recall("aria", "risotto dinner"), heading="## Memory")
    assert listed.startswith("## Memory\n- ") and "### " not in listed
    assert render_context(RecallResult("q", [], "keyword")) == ""


def test_similar_memories_by_their_vectors(conn):
    """recall.similar_memories (vectors set by the test: SQL logic): current memories of the
    agent only, at or above the bar, of the project or of none, the memory itself left out,
    most similar first; a memory not embedded compares with nothing."""
    def vec(*xs):
        v = np.zeros(384, dtype=np.float32)
        v[:len(xs)] = xs
        return str((v / np.linalg.norm(v)).tolist())
    rem = "select recall.remember(%s, %s, 'fact', project => %s, embedding => %s::vector)"
    tabs = conn.execute(rem, ["A", "Indent with tabs", None, vec(1, 0.1)]).fetchone()[0]
    spaces = conn.execute(rem, ["A", "Indent with four spaces", "api", vec(1, 0.3)]).fetchone()[0]
    web = conn.execute(rem, ["A", "Indent with two spaces", "web", vec(1, 0.2)]).fetchone()[0]
    conn.execute(rem, ["A", "Deploy on Tuesdays", None, vec(0, 1)])
    conn.execute(rem, ["B", "Indent with tabs too", None, vec(1, 0.1)])
    old = conn.execute(rem, ["A", "Indent with three spaces", None, vec(1, 0.15)]).fetchone()[0]
    conn.execute("select recall.remember('A', 'Indent with three tabs', 'fact', supersedes => %s)", [old])
    q = "select memory_id, similarity > 0.9 from recall.similar_memories('A', %s::vector, %s, exclude_id => %s)"
    assert [r[0] for r in conn.execute(q, [vec(1, 0.1), "api", tabs]).fetchall()] == [spaces]
    assert [r[0] for r in conn.execute(q, [vec(1, 0.1), None, None]).fetchall()] == [tabs, web, spaces]
    assert conn.execute("select count(*) from recall.similar_memories('A', %s::vector, k => 1)",
                        [vec(1, 0.1)]).fetchone()[0] == 1
    assert conn.execute("select count(*) from recall.similar_memories('A', null)").fetchone()[0] == 0
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="k must be between 1 and 100"):
        conn.execute("select * from recall.similar_memories('A', %s::vector, k => 0)", [vec(1)])


def test_similar_memories_from_python(db_url):
    """Recall/AsyncRecall.similar_memories: by a stored memory's own vector (itself left out) or
    by a text embedded now (the hash embedder: the same text, the same vector)."""
    with Recall(db_url, embedder=FakeEmbedder()) as r:
        first = r.remember("aria", "Prefers tabs over spaces", kind="preference")
        second = r.remember("aria", "Prefers tabs over spaces!", kind="preference")
        by_text = r.similar_memories("aria", content="Prefers tabs over spaces")
        assert by_text[0]["memory_id"] == first and by_text[0]["similarity"] == pytest.approx(1.0, abs=1e-6)
        assert first not in [m["memory_id"] for m in r.similar_memories("aria", memory_id=first, min_similarity=-1)]
        assert second in [m["memory_id"] for m in r.similar_memories("aria", memory_id=first, min_similarity=-1)]
        with pytest.raises(Exception, match="give memory_id or content"):
            r.similar_memories("aria")

    async def run():
        async with await AsyncRecall.connect(db_url, embedder=FakeEmbedder()) as ar:
            return await ar.similar_memories("aria", content="Prefers tabs over spaces")
    assert asyncio.run(run())[0]["memory_id"] == first
