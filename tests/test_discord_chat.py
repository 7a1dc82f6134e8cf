"""Discord chats in the database: every speaker named in a window's text, every message of a
window listed in its metadata, and old databases re-chunked by migration 006."""

import json
from pathlib import Path

import pytest

from pyrecall import _migrate
from pyrecall._ingest import ingest
from pyrecall.importers import discord

FIXTURE = Path(__file__).parent / "fixtures" / "discord_payments.json"
EXPORT = json.loads(FIXTURE.read_text())
SID = "discord:1160000000000000002"


@pytest.fixture
def chat(conn):
    ingest(conn, discord.parse(FIXTURE).sessions, agent_id="support")
    return conn


def windows(conn):
    return conn.execute("select first_seq, content, metadata, message_ids from recall.chunks "
                        "where session_id = %s and kind = 'window' order by first_seq", [SID]).fetchall()


def test_fixture_has_three_or_more_authors_in_one_window(chat):
    authors = [{m["author"] for m in meta["messages"]} for _, _, meta, _ in windows(chat)]
    assert max(len(a - {"PayBot"}) for a in authors) >= 3


def test_every_speaker_is_named_in_the_window_text(chat):
    rows = windows(chat)
    assert [s for s, *_ in rows] == [1, 3, 5, 7, 9]
    for _, content, meta, _ in rows:
        assert "User:" not in content and "Assistant:" not in content
        for m in meta["messages"]:
            said = next(x["content"] for x in EXPORT["messages"] if x["id"] == m["external_id"])
            assert f"{m['author']}: {said}" in content
    assert rows[-1][1] == (
        "[10 March 2026]\n"
        "carol: Any news on the payments incident from this morning?\n\n"
        "bob: The refund webhook fails because the signing secret was rotated; I put the new "
        "secret in Vault and redeployed.\n\n"
        "dave: Confirmed, the error rate is back to zero.\n\n"
        "alice: Closing the incident then. Thanks all.")


def recall_by_keywords(conn, query, k=3):
    return conn.execute(
        "select c.first_seq, c.content from recall.hybrid_recall('support', %s, null, k => %s) r "
        "join recall.chunks c using (chunk_id)", [query, k]).fetchall()


def test_what_did_bob_say_finds_bobs_window_by_name(chat):
    """Keywords only (no embedding): three windows speak of the refund webhook; the name in
    the question picks the one(s) where that person spoke."""
    rows = recall_by_keywords(chat, "what did bob say about the refund webhook?")
    assert {s for s, _ in rows[:2]} == {7, 9}       # the two windows holding bob's answer
    assert "bob: The refund webhook fails because the signing secret was rotated" in rows[0][1]
    assert recall_by_keywords(chat, "what did PayBot say about the refund webhook?")[0][0] == 1
    assert recall_by_keywords(chat, "what did dave say about the refund webhook?")[0][0] == 9


def test_window_metadata_lists_every_message(chat):
    by_id = {m["id"]: m for m in EXPORT["messages"]}
    link = "https://discord.com/channels/1160000000000000001/1160000000000000002/"
    for first_seq, _, meta, message_ids in windows(chat):
        msgs = meta["messages"]
        assert len(msgs) == len(message_ids)
        assert [m["seq"] for m in msgs] == list(range(first_seq, first_seq + len(msgs)))
        for m in msgs:
            src = by_id[m["external_id"]]
            assert m["author"] == src["author"]["name"]
            assert m["author_id"] == src["author"]["id"]
            assert m["permalink"] == link + src["id"]
            assert m["channel"] == "payments" and m["guild"] == "Acme Payments"
        # the window's own keys stay its first message's (what v1-v3 filters see)
        assert meta["author"] == msgs[0]["author"] and meta["permalink"] == msgs[0]["permalink"]
    last = windows(chat)[-1][2]["messages"]
    assert [m["external_id"] for m in last] == [f"13000000000000000{i:02d}" for i in (9, 10, 11, 12)]
    assert [m["author"] for m in last] == ["carol", "bob", "dave", "alice"]
    assert last[1]["reply_to"] == "1300000000000000009"
    # the database index serves a containment query on any message of a window
    hits = chat.execute("""select first_seq from recall.chunks
                           where metadata @> '{"messages": [{"author": "bob"}]}' order by 1""").fetchall()
    assert [h[0] for h in hits] == [3, 5, 7, 9]


def test_migration_006_rechunks_chat_sessions_of_an_old_database(chat):
    """A database chunked before 006: windows labelled 'User:' without a message list (made
    here by rewriting the chunks as the old chunker left them). migrate re-chunks them."""
    chat.execute("""update recall.chunks
                    set content = regexp_replace(content, '(^|\n\n)(alice|bob|carol|dave): ', '\\1User: ', 'g'),
                        metadata = metadata - 'messages',
                        embedding = array_fill(0.1, array[384])::vector, embedding_model = 'm',
                        embedded_at = now()
                    where kind = 'window'""")
    assert "bob:" not in " ".join(c for _, c, _, _ in windows(chat))
    chat.execute("delete from recall.migrations where name = '006-chat-speakers'")
    # a session that is not a chat keeps its chunks (and their embeddings) untouched
    chat.execute("insert into recall.sessions (session_id, agent_id) values ('cc', 'support')")
    chat.execute("insert into recall.messages (session_id, role, content, metadata) "
                 "values ('cc', 'user', 'hello', '{\"author\": \"zed\"}')")
    chat.execute("update recall.chunks set content = 'User: hello', embedding = array_fill(0.1, array[384])::vector "
                 "where session_id = 'cc'")
    report = _migrate.migrate(chat)
    assert report.applied == ["006-chat-speakers"]
    rows = windows(chat)
    assert rows[-1][1].startswith("[10 March 2026]\ncarol: Any news")
    assert all(len(meta["messages"]) == len(ids) for _, _, meta, ids in rows)
    pending = chat.execute("select count(*) filter (where embedding is null), count(*) from recall.chunks "
                           "where session_id = %s", [SID]).fetchone()
    assert pending == (5, 5)   # their text changed: embedded again
    assert chat.execute("select content, embedding is not null from recall.chunks "
                        "where session_id = 'cc'").fetchone() == ("User: hello", True)
    assert chat.execute("select count(*) from recall.config where key = 'rechunk_pending'").fetchone()[0] == 0
    # and a later migrate does nothing more
    before = chat.execute("select chunk_id, content from recall.chunks order by 1").fetchall()
    assert _migrate.migrate(chat).applied == []
    assert chat.execute("select chunk_id, content from recall.chunks order by 1").fetchall() == before



def test_each_part_of_a_long_window_names_the_speaker_it_starts_inside(conn):
    """A window longer than chunk_max_chars (1600) is cut into overlapping parts; a part that
    starts inside a message is headed by that message's speaker."""
    conn.execute("""insert into recall.sessions (session_id, agent_id, metadata)
                    values ('c', 'support', '{"chunking": "window"}')""")
    long = " ".join(f"word{i}" for i in range(600))          # ~4,900 characters
    conn.execute("insert into recall.messages (session_id, role, content, created_at, metadata) values "
                 "('c', 'user', 'short question', '2026-03-10 09:00+00', '{\"author\": \"alice\"}'), "
                 "('c', 'user', %s, '2026-03-10 09:01+00', '{\"author\": \"bob\"}'), "
                 "('c', 'user', 'thanks bob', '2026-03-10 09:02+00', '{\"author\": \"carol\"}')", [long])
    parts = [c for c, in conn.execute("select content from recall.chunks where session_id = 'c' "
                                      "order by first_seq, part")]
    assert len(parts) >= 3
    assert parts[0].startswith("[10 March 2026]\nalice: short question\n\nbob: word0 ")
    for p in parts[1:-1]:
        assert p.startswith("bob: ") and p[len("bob: "):] in long[1:]
    assert parts[-1].startswith("bob: ") and parts[-1].endswith("\n\ncarol: thanks bob")
    assert parts[-1][len("bob: "):].split("\n\ncarol:")[0] in long[1:]
    # each part lists the messages it holds (ids, and their metadata under "messages"), with the
    # first one's keys: a filter on carol matches the last part only
    rows = conn.execute(
        "select array(select m.seq from recall.messages m where m.message_id = any(c.message_ids) order by m.seq), "
        "array(select e->>'seq' from jsonb_array_elements(c.metadata->'messages') e)::int[], "
        "c.metadata->>'author' from recall.chunks c where c.session_id = 'c' order by c.first_seq, c.part").fetchall()
    assert rows[0] == ([1, 2], [1, 2], "alice")
    assert all(r == ([2], [2], "bob") for r in rows[1:-1])
    assert rows[-1] == ([2, 3], [2, 3], "bob")
    assert conn.execute("select count(*) from recall.chunks where session_id = 'c' "
                        "and metadata->'messages' @> '[{\"author\": \"carol\"}]'").fetchone()[0] == 1


@pytest.mark.parametrize("start, speaker", [(5, None), (6, "a"), (12, "a"), (13, None), (14, None),
                                            (15, None), (16, "b"), (24, None), (25, None), (90, None)])
def test_window_part_speaker(conn, start, speaker):
    """lens: a 5-character date line, then 'a' and 'b' with 10 characters each (blank line
    included): a's label at 5, the blank line at 13-14, b's label at 15."""
    assert conn.execute("select recall._window_part_speaker(array['a', 'b'], array[5, 10, 10], %s)",
                        [start]).fetchone()[0] == speaker


def test_migration_012_gives_the_parts_of_old_long_windows_their_own_messages(conn):
    """Parts of a long window as the chunker before 012 left them (every part listing every
    message, embedded): migrate lists each part's own messages and keeps the embeddings (the
    text did not change)."""
    conn.execute("""insert into recall.sessions (session_id, agent_id, metadata)
                    values ('c', 'support', '{"chunking": "window"}')""")
    long = " ".join(f"word{i}" for i in range(600))
    conn.execute("insert into recall.messages (session_id, role, content, metadata) values "
                 "('c', 'user', 'short question', '{\"author\": \"alice\"}'), "
                 "('c', 'user', %s, '{\"author\": \"bob\"}'), "
                 "('c', 'user', 'thanks bob', '{\"author\": \"carol\"}')", [long])
    right = conn.execute("select part, message_ids, metadata from recall.chunks order by part").fetchall()
    conn.execute("""update recall.chunks
                    set message_ids = (select array_agg(message_id order by seq) from recall.messages),
                        metadata = (select metadata from recall.chunks where part = 0)
                                   || jsonb_build_object('messages', (select jsonb_agg(metadata || jsonb_build_object(
                                        'seq', seq, 'external_id', external_id) order by seq) from recall.messages)),
                        embedding = array_fill(0.1, array[384])::vector, embedding_model = 'm', embedded_at = now()""")
    assert conn.execute("select part, message_ids, metadata from recall.chunks order by part").fetchall() != right
    conn.execute("delete from recall.migrations where name = '012-window-parts'")
    assert _migrate.migrate(conn).applied == ["012-window-parts"]
    assert conn.execute("select part, message_ids, metadata from recall.chunks order by part").fetchall() == right
    assert conn.execute("select bool_and(embedding is not null) from recall.chunks").fetchone()[0] is True


@pytest.mark.parametrize("start, length, members", [
    (0, 5, []), (0, 6, [1]), (12, 4, [1, 2]), (13, 2, []), (14, 1, []), (13, 3, [2]), (16, 100, [2]),
    (0, 100, [1, 2])])
def test_window_part_members(conn, start, length, members):
    """lens as above: a's label and text at 5-12, the blank line 13-14, b at 15-22."""
    assert conn.execute("select recall._window_part_members(array[5, 10, 10], %s, %s)",
                        [start, length]).fetchone()[0] == members
