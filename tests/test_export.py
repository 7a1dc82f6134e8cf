"""Export and import back: recall.export_agent / `pyrecall export` write all of an agent's memory
that cannot be derived again as JSON lines, `pyrecall import` (the generic JSONL importer and
recall.import_records) reads them into another database, and the agent's sessions, messages,
chunks, curated memories (pins, validity, what supersedes what) and importance set by hand are
then what they were; exported with vectors, the destination embeds only what the file could not
give it, and recalls the same rows. (Real databases; the hash embedder's vectors, these tests being about what is
carried, not about ranking.)"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from conftest import drop_database, new_database
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from test_security import login, roles  # noqa: F401 (roles: a fixture)

from pyrecall import _sync
from pyrecall._worker import Worker, count_pending
from pyrecall.cli import main
from pyrecall.client import Recall

HERE = Path(__file__).resolve().parent
SESSIONS = HERE.parent / "examples" / "sessions" / "acme-api"
DISCORD = HERE / "fixtures" / "importers" / "discord.json"
GENERIC = HERE / "fixtures" / "importers" / "generic.jsonl"
AGENT = "aria"


def build(conn) -> None:
    """Agent aria: four Claude Code sessions (turn pairs), a Discord chat (windows, session
    metadata), a generic JSONL session (another of its sessions names agent aria-devops);
    four curated memories, one superseding another, one pinned, one with metadata and a
    project; the importance of two transcript chunks set by hand; a session summary a model
    wrote (recall.save_summary) and an extractive one."""
    _sync.index(conn, [SESSIONS, DISCORD, GENERIC], agent_id=AGENT)
    remember = "select recall.remember(agent_id => %s, content => %s, kind => %s, pinned => %s, " \
               "metadata => %s, project => %s, supersedes => %s)"
    first = conn.execute(remember, [AGENT, "Base images: python:3.12-alpine", "decision", False,
                                    Jsonb({}), None, None]).fetchone()[0]
    conn.execute(remember, [AGENT, "Staging's load balancer checks port 8080", "fact", True,
                            Jsonb({"source": "ops", "checked": None}), "/home/dev/acme-api", None])
    conn.execute(remember, [AGENT, "Base images: python:3.12-slim; alpine only for pure Python", "decision",
                            False, Jsonb({}), None, first])
    conn.execute(remember, [AGENT, "Prefers short answers", "preference", False, Jsonb({}), None, None])
    for kind in ("window", "turn_pair"):
        chunk = conn.execute("select chunk_id from recall.chunks where agent_id = %s and kind = %s "
                             "order by session_id, first_seq desc limit 1", [AGENT, kind]).fetchone()[0]
        conn.execute("select recall.set_importance(%s, %s, %s)", [AGENT, chunk, 0.95 if kind == "window" else 0.1])
    first, second = [r[0] for r in conn.execute(
        "select session_id from recall.sessions where agent_id = %s and session_id not like 'memories:%%' "
        "order by started_at, session_id limit 2", [AGENT])]
    conn.execute("select recall.save_summary(%s, %s, %s, %s)",
                 [AGENT, first, "They added JWT login; the secret comes from the environment.", "fake/llm"])
    conn.execute("update recall.sessions set summary = 'made again', summary_model = 'extractive', "
                 "summary_at = now() where agent_id = %s and session_id = %s", [AGENT, second])


def snapshot(conn, agent: str = AGENT) -> dict:
    """What the agent holds that must survive, in database-independent terms (no row ids)."""
    q = lambda sql: conn.execute(sql, [agent]).fetchall()  # noqa: E731
    return {
        "sessions": q("select session_id, title, project, branch, started_at, ended_at, metadata "
                      "from recall.sessions where agent_id = %s order by session_id"),
        # (an extractive summary is made again there, by `pyrecall summarize`)
        "summaries": q("select session_id, summary, summary_model from recall.sessions "
                       "where agent_id = %s and summary_model <> 'extractive' order by session_id"),
        "messages": q("select session_id, seq, external_id, role, kind, content, created_at, importance, metadata "
                      "from recall.messages where agent_id = %s order by session_id, seq"),
        "chunks": q("select session_id, kind, first_seq, part, content, importance, importance_set_at, metadata "
                    "from recall.chunks where agent_id = %s and kind <> 'memory' "
                    "order by session_id, kind, first_seq, part"),
        "memories": q("select c.memory_kind, c.content, c.importance, c.pinned, c.metadata, c.created_at, "
                      "c.valid_from, c.valid_until, c.importance_set_at, o.content as supersedes "
                      "from recall.chunks c left join recall.chunks o on o.agent_id = c.agent_id and o.chunk_id = c.supersedes "
                      "where c.agent_id = %s and c.kind = 'memory' order by c.valid_from, c.content"),
    }


def write_export(url: str, path: Path, agent: str = AGENT, *, vectors: bool = False) -> list[dict]:
    with Recall(url) as r:
        header = r.export(agent, path, vectors=vectors)
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == header
    return lines


@pytest.fixture
def other_url(server_url, template_url):
    url = new_database(server_url)
    yield url
    drop_database(server_url, url)


def test_an_export_imported_into_another_database_is_the_agent_again(conn, db_url, other_url, tmp_path):
    build(conn)
    before = snapshot(conn)
    assert len(before["sessions"]) == 7 and len(before["memories"]) == 4     # 4 + chat + standup + memories
    assert sum(c[6] is not None for c in before["chunks"]) == 2
    lines = write_export(db_url, tmp_path / "aria.jsonl")
    header = lines[0]
    assert header["pyrecall_export"] == 1 and header["agent_id"] == AGENT
    assert (header["sessions"], header["messages"], header["memories"], header["importance"],
            header["summaries"]) == (6, len(before["messages"]), 4, 2, 1)
    assert len(lines) == 1 + header["messages"] + 4 + 2 + 1
    assert [x["summary_model"] for x in lines if x.get("record") == "summary"] == ["fake/llm"]
    # nothing of another agent: the generic file's first session is aria-devops'
    assert all(x.get("agent_id") == AGENT for x in lines)
    assert conn.execute("select count(*) from recall.messages where agent_id = 'aria-devops'").fetchone()[0] > 0

    with psycopg.connect(other_url, autocommit=True) as dest:
        report = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id="someone-else")
        assert report.problems == []
        assert (report.inserted, report.memories, report.importance, report.summaries) == (
            header["messages"], 4, 2, 1)
        assert snapshot(dest) == before
        assert dest.execute("select count(*) from recall.chunks").fetchone()[0] == conn.execute(
            "select count(*) from recall.chunks where agent_id = %s", [AGENT]).fetchone()[0]
        # the memories are pending embedding, like any new chunk; the chat is still chunked in windows
        assert dest.execute("select count(*) from recall.chunks where kind = 'memory' and embedding is null"
                            ).fetchone()[0] == 4
        assert dest.execute("select count(*) from recall.chunks where kind = 'window'").fetchone()[0] > 0
        # importing it again adds nothing and changes nothing
        again = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id="someone-else", full=True)
        assert (again.inserted, again.memories, again.importance, again.summaries, again.problems) == (
            0, 0, 0, 0, [])
        assert snapshot(dest) == before
        # and the export of the copy is the export of the original, but for its ids and times (a
        # summary's: when it was restored)
        copy = write_export(other_url, tmp_path / "copy.jsonl")
        strip = lambda xs: [{k: v for k, v in x.items()  # noqa: E731
                             if k not in ("memory_id", "supersedes", "exported_at", "summary_at")}
                            for x in xs]
        assert strip(copy) == strip(lines)


@pytest.mark.parametrize("piece, batch", [(1, 1), (3, 4), (7, 2)])
def test_an_export_read_a_piece_at_a_time_is_the_agent_again(conn, db_url, other_url, tmp_path, monkeypatch,
                                                             piece, batch):
    """`pyrecall import` reads a JSONL file as a stream (jsonl.stream: so many messages a piece,
    stored so many at a time): whatever the sizes, the destination holds what the source did."""
    from pyrecall.importers import jsonl
    build(conn)
    before = snapshot(conn)
    write_export(db_url, tmp_path / "aria.jsonl")
    monkeypatch.setattr(jsonl, "STREAM_MESSAGES", piece)
    monkeypatch.setattr(_sync, "SESSION_BATCH_MESSAGES", batch)
    with psycopg.connect(other_url, autocommit=True) as dest:
        report = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id="someone-else")
        assert report.problems == [] and report.inserted == len(before["messages"])
        assert snapshot(dest) == before
        again = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id="someone-else", full=True)
        assert (again.inserted, again.memories) == (0, 0) and snapshot(dest) == before


def vectors_of(conn, agent: str = AGENT) -> dict:
    q = lambda sql: conn.execute(sql, [agent]).fetchall()  # noqa: E731
    return {
        "chunks": q("select c.session_id, c.kind, c.first_seq, c.part, c.embedding::text, c.embedding_model, "
                    "c.n_tokens from recall.chunks c where c.agent_id = %s and c.kind <> 'memory' "
                    "order by 1, 2, 3, 4"),
        "memories": q("select content, embedding::text, embedding_model, n_tokens from recall.chunks "
                      "where agent_id = %s and kind = 'memory' order by content"),
        "messages": q("select session_id, seq, n_tokens, date_tokens, embedding::text from recall.messages "
                      "where agent_id = %s order by 1, 2"),
    }


def found(conn, query: str) -> list[tuple]:
    """hybrid_recall's rows for a query, in database-independent terms (no ids)."""
    v = FakeEmbedder().vector(query)
    return conn.execute("select session_id, kind, content, round(score::numeric, 9), n_tokens "
                        "from recall.hybrid_recall(%s, %s, %s, k => 10, token_budget => 600, "
                        "as_of => '2026-04-01')", [AGENT, query, v]).fetchall()


def test_with_vectors_the_destination_recalls_the_same_without_embedding(conn, db_url, other_url, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(_sync, "RECORDS_PER_CALL", 7)     # the records read again in many batches
    build(conn)
    Worker(conn, FakeEmbedder(), agent=AGENT).run()
    assert count_pending(conn, agent=AGENT) == 0
    lines = write_export(db_url, tmp_path / "aria.jsonl", vectors=True)
    header = lines[0]
    embedded = conn.execute("select count(*) from recall.chunks where agent_id = %s and kind not in "
                            "('memory', 'summary') and embedding is not null", [AGENT]).fetchone()[0]
    assert header["vectors"] == embedded > 0 and header["turns"] > 0
    assert sum(x.get("record") == "vector" for x in lines) == embedded
    # the model's summary carries its chunk's vector (and is found by it there)
    assert [bool(x.get("embedding")) for x in lines if x.get("record") == "summary"] == [True]
    # one vector edited to another dimension, one chunk's text hash changed: those two stay pending
    edited = [x for x in lines if x.get("record") == "vector"][:2]
    edited[0]["embedding"] = "[1,2,3]"
    edited[1]["content_md5"] = "0" * 32
    (tmp_path / "aria.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    with psycopg.connect(other_url, autocommit=True) as dest:
        register_vector(dest)
        report = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT)
        assert report.problems == []
        assert (report.vectors, report.turns, report.summaries) == (embedded - 2 + 1, header["turns"], 1)
        assert count_pending(dest, agent=AGENT) == report.pending == 2
        assert report.indexed == []                 # (an agent this small needs no index)
        Worker(dest, FakeEmbedder(), agent=AGENT).run()          # the two, embedded there
        assert vectors_of(dest) == vectors_of(conn)
        assert snapshot(dest) == snapshot(conn)
        for query in ("why did the alpine build fail?", "coupon deploy rollback", "JWT secret in tests"):
            assert found(dest, query) == found(conn, query) != []
        # again: nothing new
        again = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT, full=True)
        assert (again.inserted, again.memories, again.vectors, again.turns) == (0, 0, 0, 0)


def test_an_import_with_vectors_builds_the_index_the_agent_needs(conn, db_url, other_url, tmp_path):
    """The vectors restored, the agent is searched by meaning at once: past agent_index_min_rows
    it gets the vector index of its own the embedding job would build, then and there (with
    recall.config auto_vector_index false, not)."""
    from pyrecall import _index

    build(conn)
    Worker(conn, FakeEmbedder(), agent=AGENT).run()
    write_export(db_url, tmp_path / "aria.jsonl", vectors=True)
    ours = lambda c: [r for r in _index.index_info(c) if r["agent_id"] == AGENT]  # noqa: E731
    with psycopg.connect(other_url, autocommit=True) as dest:
        register_vector(dest)
        dest.execute("update recall.config set value = '5' where key = 'agent_index_min_rows'")
        dest.execute("update recall.config set value = 'false' where key = 'auto_vector_index'")
        off = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT)
        assert off.vectors > 5 and off.pending == 0 and off.indexed == [] and ours(dest) == []
        # on: the next import that restores vectors builds it
        dest.execute("update recall.config set value = 'true' where key = 'auto_vector_index'")
        dest.execute("update recall.chunks set embedding = null, embedding_model = null, embedded_at = null "
                     "where agent_id = %s and kind not in ('memory', 'summary')", [AGENT])
        on = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT, full=True)
        assert on.vectors == off.vectors - 1 and on.pending == 0      # (the summary's vector kept)
        assert [r["agent_id"] for r in on.indexed] == [AGENT] and on.as_dict()["indexed"][0]["index_rows"] > 5
        assert [r["index_name"] for r in ours(dest)] == [on.indexed[0]["index_name"]]


def test_an_exports_records_are_read_again_in_batches(conn, db_url, tmp_path):
    """jsonl.parse(keep_records=False) keeps the memories and counts the rest, which
    record_batches gives again, those parse accepted, in order, so many at a time."""
    from pyrecall.importers import jsonl

    build(conn)
    Worker(conn, FakeEmbedder(), agent=AGENT).run()
    lines = write_export(db_url, tmp_path / "aria.jsonl", vectors=True)
    exported = (tmp_path / "aria.jsonl").stat().st_size
    with (tmp_path / "aria.jsonl").open("a", encoding="utf-8") as f:     # one more, refused
        f.write(json.dumps({"record": "vector", "session_id": "s", "chunk_kind": "window"}) + "\n")
    whole = jsonl.parse(tmp_path / "aria.jsonl")
    light = jsonl.parse(tmp_path / "aria.jsonl", keep_records=False)
    rest = [x for x in whole.records if x["record"] != "memory"]
    assert [x["record"] for x in light.records] == ["memory"] * 4 and light.streamed == len(rest) > 80
    assert [p.line for p in light.problems] == [p.line for p in whole.problems] == [len(lines) + 1]
    batches = list(jsonl.record_batches(tmp_path / "aria.jsonl", 0, light.end_offset, 40))
    assert [len(b) for b in batches[:-1]] == [40] * (len(batches) - 1) and 0 < len(batches[-1]) <= 40
    assert [x for b in batches for x in b] == rest
    # only up to the end given (the end the parse reached: a line appended since is the next run's)
    assert [x for b in jsonl.record_batches(tmp_path / "aria.jsonl", 0, exported - 1, 10 ** 6)
            for x in b] == rest[:-1]


def test_supersedes_points_at_the_new_id_of_the_memory_it_replaced(conn, db_url, other_url, tmp_path):
    build(conn)
    write_export(db_url, tmp_path / "aria.jsonl")
    with psycopg.connect(other_url, autocommit=True) as dest:
        # ids there differ from ids here: another memory first
        dest.execute("select recall.remember('someone', 'unrelated')")
        _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT)
        rows = dest.execute("select m.content, m.valid_until is not null, o.content from recall.chunks m "
                            "left join recall.chunks o on o.chunk_id = m.supersedes "
                            "where m.agent_id = %s and m.kind = 'memory' order by m.chunk_id", [AGENT]).fetchall()
        assert [r[1] for r in rows] == [True, False, False, False]
        assert rows[2][2] == "Base images: python:3.12-alpine"
        # recall (v4 and later) returns a superseded memory only before its replacement
        current = dest.execute("select content from recall.memories(%s)", [AGENT]).fetchall()
        assert "Base images: python:3.12-alpine" not in {c for (c,) in current}
        assert {c for (c,) in current} >= {"Base images: python:3.12-slim; alpine only for pure Python"}


def test_a_record_that_cannot_be_restored_is_reported_and_the_rest_imported(other_url, tmp_path):
    good = {"record": "memory", "agent_id": AGENT, "memory_id": 7, "memory_kind": "fact",
            "content": "The VPN needs the second factor", "valid_from": "2026-03-01T10:00:00Z"}
    summary = {"record": "summary", "agent_id": AGENT, "session_id": "s-1", "summary": "They said hello.",
               "summary_model": "fake/llm", "summary_at": "2026-03-01T10:00:00Z"}
    lines = [
        {"pyrecall_export": 1, "agent_id": AGENT},
        {"session_id": "s-1", "agent_id": AGENT, "role": "user", "content": "hello", "external_id": "e1",
         "created_at": "2026-03-01T09:00:00Z", "session_metadata": {"chunking": "window"},
         "started_at": "2026-03-01T08:00:00Z"},
        {**good, "memory_id": 8, "memory_kind": "rumour"},
        good,
        {**good, "memory_id": 9, "content": "  "},
        {**good, "memory_id": 10, "valid_from": "yesterday"},
        {**good, "memory_id": 11, "valid_until": "2026-02-01T00:00:00Z"},
        {**good, "memory_id": 12, "importance": 3},
        {"record": "importance", "agent_id": AGENT, "session_id": "s-1", "chunk_kind": "window",
         "first_external_id": "e1", "part": 0, "importance": "high"},
        {"record": "importance", "agent_id": AGENT, "session_id": "s-1", "chunk_kind": "window",
         "first_external_id": "e1", "part": 0, "importance": 0.9, "set_at": "2026-03-02T00:00:00Z"},
        {"record": "photo", "agent_id": AGENT},
        # a message of another tool that has a field "record" is a message
        {"session_id": "s-1", "role": "assistant", "content": "noted", "record": "yes", "external_id": "e2"},
        {**summary, "summary": " "},
        {**summary, "summary_model": "extractive"},
        summary,
        {**summary, "session_id": "not-here"},        # its messages are not in the file: nothing
    ]
    path = tmp_path / "broken.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{not json\n", encoding="utf-8")
    with psycopg.connect(other_url, autocommit=True) as dest:
        report = _sync.index(dest, [path], agent_id=AGENT)
        reasons = {p.line: p.reason for p in report.problems}
        assert set(reasons) == {3, 5, 6, 7, 8, 9, 11, 13, 14, 17}, reasons
        assert "memory_kind 'rumour'" in reasons[3] and "without content" in reasons[5]
        assert "valid_from" in reasons[6] and "valid_until" in reasons[7] and "importance" in reasons[8]
        assert "importance" in reasons[9] and "unknown record 'photo'" in reasons[11]
        assert "without a summary" in reasons[13] and "extractive one is made again" in reasons[14]
        assert (report.inserted, report.memories, report.importance, report.summaries) == (2, 1, 1, 1)
        assert dest.execute("select s.summary, s.summary_model, c.content from recall.sessions s join recall.chunks c "
                            "using (agent_id, session_id) where c.kind = 'summary'").fetchall() == [
            ("They said hello.", "fake/llm", "Summary of session: They said hello.")]
        assert dest.execute("select content from recall.chunks where kind = 'memory'").fetchall() == [
            ("The VPN needs the second factor",)]
        # the session's own start and chunking came with its first line
        started, chunking, importance = dest.execute(
            "select s.started_at, s.metadata->>'chunking', c.importance from recall.sessions s "
            "join recall.chunks c on c.session_id = s.session_id where s.session_id = 's-1' and c.kind = 'window'").fetchone()
        assert (started.isoformat(), chunking, round(importance, 3)) == ("2026-03-01T08:00:00+00:00", "window", 0.9)


def test_a_models_summary_is_restored_unless_a_later_one_is_there(conn, db_url, other_url, tmp_path):
    """A session summary a model wrote is restored with its chunk, once; a summary a model wrote
    at the destination after it is kept, one written at the source later still replaces it."""
    build(conn)
    lines = write_export(db_url, tmp_path / "aria.jsonl")
    sid = next(x["session_id"] for x in lines if x.get("record") == "summary")
    save = "select recall.save_summary(%s, %s, %s, %s)"
    summary = lambda c: c.execute("select s.summary, s.summary_model, c.content from recall.sessions s "  # noqa: E731
                                  "join recall.chunks c using (agent_id, session_id) "
                                  "where s.agent_id = %s and s.session_id = %s and c.kind = 'summary'",
                                  [AGENT, sid]).fetchall()
    with psycopg.connect(other_url, autocommit=True) as dest:
        assert _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT).summaries == 1
        assert summary(dest) == summary(conn)
        dest.execute(save, [AGENT, sid, "Written there since.", "fake/other"])
        assert _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT, full=True).summaries == 0
        assert summary(dest)[0][:2] == ("Written there since.", "fake/other")
        conn.execute(save, [AGENT, sid, "Written here after that.", "fake/llm"])
        write_export(db_url, tmp_path / "aria.jsonl")
        assert _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT, full=True).summaries == 1
        assert summary(dest) == summary(conn)
        assert summary(dest)[0][2].endswith(': Written here after that.')


def test_forgotten_sessions_travel_with_the_export(conn, db_url, other_url, tmp_path):
    """A session forgotten at the source is forgotten at the destination: its transcript,
    imported there, does not bring it back; a session the destination holds stays (an import
    never deletes); a second import adds nothing."""
    build(conn)
    with psycopg.connect(other_url, autocommit=True) as dest:
        _sync.index(dest, [SESSIONS], agent_id=AGENT)              # the destination holds these
        gone, kept = [r[0] for r in dest.execute(
            "select session_id from recall.sessions where agent_id = %s order by started_at, session_id limit 2",
            [AGENT])]
        dest.execute("delete from recall.sessions where agent_id = %s and session_id = %s", [AGENT, gone])
        dest.execute("delete from recall.forgotten_sessions where agent_id = %s", [AGENT])
        for sid in (gone, kept):
            conn.execute("delete from recall.sessions where agent_id = %s and session_id = %s", [AGENT, sid])
        lines = write_export(db_url, tmp_path / "aria.jsonl")
        assert lines[0]["forgotten"] == 2
        assert sorted(x["session_id"] for x in lines if x.get("record") == "forgotten") == sorted([gone, kept])
        report = _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT)
        assert report.forgotten_records == 1                        # kept is held there: not recorded
        assert [r[0] for r in dest.execute("select session_id from recall.forgotten_sessions "
                                           "where agent_id = %s", [AGENT])] == [gone]
        assert dest.execute("select count(*) from recall.sessions where agent_id = %s and session_id = %s",
                            [AGENT, kept]).fetchone()[0] == 1
        again = _sync.index(dest, [SESSIONS], agent_id=AGENT, full=True)
        assert again.forgotten == 1 and again.inserted == 0
        assert dest.execute("select count(*) from recall.messages where agent_id = %s and session_id = %s",
                            [AGENT, gone]).fetchone()[0] == 0
        assert _sync.index(dest, [tmp_path / "aria.jsonl"], agent_id=AGENT, full=True).forgotten_records == 0


def test_save_summary_checks_its_arguments(conn):
    build(conn)
    sid = conn.execute("select session_id from recall.sessions where agent_id = %s and summary_model = 'extractive'",
                       [AGENT]).fetchone()[0]
    for args, error, message in [
            ((None, sid, "x", "m"), psycopg.errors.InvalidParameterValue, "agent_id and session_id are required"),
            ((AGENT, sid, " \n", "m"), psycopg.errors.InvalidParameterValue, "summary is empty"),
            ((AGENT, sid, "x", "extractive"), psycopg.errors.InvalidParameterValue, "model must name"),
            ((AGENT, sid, "x", None), psycopg.errors.InvalidParameterValue, "model must name"),
            ((AGENT, "nope", "x", "m"), psycopg.errors.NoDataFound, "agent aria has no session nope"),
            ((AGENT, f"memories:{AGENT}", "x", "m"), psycopg.errors.NoDataFound, "no session memories:aria")]:
        with pytest.raises(error, match=message):
            conn.execute("select recall.save_summary(%s, %s, %s, %s)", list(args))
    # kept: the text, the model, the chunk (its vector dropped only when its text changes)
    chunk = conn.execute("select recall.save_summary(%s, %s, 'Rotated the keys.', 'fake/llm')", [AGENT, sid]).fetchone()[0]
    conn.execute("update recall.chunks set embedding = array_fill(0.1, array[384])::vector where chunk_id = %s", [chunk])
    assert conn.execute("select recall.save_summary(%s, %s, 'Rotated the keys.', 'fake/llm')", [AGENT, sid]
                        ).fetchone()[0] == chunk
    assert conn.execute("select embedding is not null from recall.chunks where chunk_id = %s", [chunk]).fetchone()[0]
    conn.execute("select recall.save_summary(%s, %s, 'Rotated the keys twice.', 'fake/llm')", [AGENT, sid])
    assert conn.execute("select embedding is null, importance, metadata->>'summary_model' from recall.chunks "
                        "where chunk_id = %s", [chunk]).fetchone() == (True, 0.8, "fake/llm")
    assert conn.execute("select summary, summary_model from recall.sessions where agent_id = %s and session_id = %s",
                        [AGENT, sid]).fetchone() == ("Rotated the keys twice.", "fake/llm")


def test_a_newer_export_format_is_said_and_read_as_far_as_it_goes(other_url, tmp_path):
    path = tmp_path / "future.jsonl"
    path.write_text(json.dumps({"pyrecall_export": 2, "agent_id": AGENT}) + "\n"
                    + json.dumps({"session_id": "s-2", "role": "user", "content": "hi"}) + "\n", encoding="utf-8")
    with psycopg.connect(other_url, autocommit=True) as dest:
        report = _sync.index(dest, [path], agent_id=AGENT)
        assert [p.line for p in report.problems] == [1] and "newer" in report.problems[0].reason
        assert report.inserted == 1


def test_the_python_client_exports_to_a_stream_and_async(conn, db_url, tmp_path):
    import asyncio
    import io

    from pyrecall._errors import NotFoundError
    from pyrecall.client import AsyncRecall

    build(conn)
    stream = io.StringIO()
    with Recall(db_url) as r:
        header = r.export(AGENT, stream)
        with pytest.raises(NotFoundError, match="agent 'nobody' has no sessions or memories"):
            r.export("nobody", tmp_path / "nobody.jsonl")
    assert not (tmp_path / "nobody.jsonl").exists() and list(tmp_path.iterdir()) == []
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert lines[0] == header and len(lines) == 1 + header["messages"] + 4 + 2 + 1

    async def go():
        async with await AsyncRecall.connect(db_url) as a:
            return await a.export(AGENT, tmp_path / "async.jsonl")
    assert asyncio.run(go())["messages"] == header["messages"]
    again = [json.loads(x) for x in (tmp_path / "async.jsonl").read_text().splitlines()]
    assert [x for x in again if "exported_at" not in x] == [x for x in lines if "exported_at" not in x]


def test_import_records_checks_its_arguments(conn):
    for agent, records, message in [(None, Jsonb([]), "agent_id is required"),
                                    (AGENT, Jsonb({}), "must be a JSON array, got a JSON object"),
                                    (AGENT, Jsonb([{"record": "memory", "memory_kind": "fact"}]),
                                     "needs memory_kind, content and valid_from")]:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
            conn.execute("select * from recall.import_records(%s, %s)", [agent, records])
    assert conn.execute("select count(*) from recall.chunks").fetchone()[0] == 0
    assert conn.execute("select * from recall.import_records(%s, '[]')", [AGENT]).fetchone() == (0, 0, 0, 0, 0, 0)


def test_the_export_of_an_agent_role_is_its_own(conn, db_url, roles):  # noqa: F811 (a fixture)
    """Row-level security: an agent's role exports its own agent, and nothing of another
    (tests/test_security.py probes every function so; this is the export file's view)."""
    build(conn)
    with login(db_url, roles["agent"], AGENT) as agent:
        own = [r[0] for r in agent.execute("select recall.export_agent(%s)", [AGENT])]
        other = [r[0] for r in agent.execute("select recall.export_agent('aria-devops')")]
    everything = [r[0] for r in conn.execute("select recall.export_agent(%s)", [AGENT])]
    assert [x for x in own if "exported_at" not in x] == [x for x in everything if "exported_at" not in x]
    assert len(other) == 1 and other[0]["messages"] == 0
    # nor can it restore into another agent (the policies' WITH CHECK); into its own it can
    memory = {"record": "memory", "memory_kind": "fact", "content": "planted", "valid_from": "2026-03-01"}
    with login(db_url, roles["agent"], AGENT) as agent:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            agent.execute("select * from recall.import_records('aria-devops', %s)", [Jsonb([memory])])
        assert agent.execute("select memories from recall.import_records(%s, %s)",
                             [AGENT, Jsonb([memory])]).fetchone() == (1,)
    assert conn.execute("select count(*) from recall.chunks where content = 'planted'").fetchone()[0] == 1


def test_pyrecall_export_and_import_on_the_command_line(conn, db_url, other_url, tmp_path, monkeypatch):
    monkeypatch.delenv("PYRECALL_AGENT", raising=False)
    build(conn)
    out = tmp_path / "aria.jsonl"
    cli = lambda url, *args: CliRunner().invoke(main, [str(a) for a in args], env={"PYRECALL_DSN": url})  # noqa: E731
    result = cli(db_url, "export", "--agent-id", AGENT, "-o", out)
    assert result.exit_code == 0, result.output
    assert "exported agent 'aria': 6 session(s)" in result.output and "4 curated memories" in result.output
    assert json.loads(out.read_text().splitlines()[0])["pyrecall_export"] == 1
    assert list(tmp_path.iterdir()) == [out]                        # no temporary file left
    # to standard output: the same lines
    result = cli(db_url, "export", "--agent-id", AGENT)
    assert result.exit_code == 0
    printed = [json.loads(x) for x in result.stdout.splitlines()]
    assert [x for x in printed if "exported_at" not in x] == [
        x for x in map(json.loads, out.read_text().splitlines()) if "exported_at" not in x]
    # with --vectors: the counts of vectors said (nothing embedded here: none)
    result = cli(db_url, "export", "--agent-id", AGENT, "--vectors", "-o", tmp_path / "v.jsonl")
    assert result.exit_code == 0 and "vectors of 0 chunk(s)" in result.output
    (tmp_path / "v.jsonl").unlink()
    # an agent with nothing: an error, and no file
    result = cli(db_url, "export", "--agent-id", "nobody", "-o", tmp_path / "nobody.jsonl")
    assert result.exit_code == 1 and "agent 'nobody' has no sessions or memories" in result.output
    assert not (tmp_path / "nobody.jsonl").exists()
    # read back elsewhere
    result = cli(other_url, "import", out)
    assert result.exit_code == 0, result.output
    assert "restored: 4 curated memories, importance of 2 chunk(s)" in result.output
    assert "already stored  (agent aria)" in result.output      # the file's agent, not the default
    with psycopg.connect(other_url, autocommit=True) as dest:
        assert snapshot(dest) == snapshot(conn)
    # with the vectors: nothing left to embed, so no "next: pyrecall embed"; the index the agent
    # needs (past a threshold lowered here) built by the import and said
    Worker(conn, FakeEmbedder(), agent=AGENT).run()
    assert cli(db_url, "export", "--agent-id", AGENT, "--vectors", "-o", tmp_path / "v.jsonl").exit_code == 0
    with psycopg.connect(other_url, autocommit=True) as dest:
        dest.execute("update recall.config set value = '5' where key = 'agent_index_min_rows'")
    result = cli(other_url, "import", "--full", tmp_path / "v.jsonl")
    assert result.exit_code == 0, result.output
    assert "built the vector index of agent aria (" in result.output
    assert "next: `pyrecall embed`" not in result.output
