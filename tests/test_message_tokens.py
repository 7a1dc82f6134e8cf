"""recall.messages.n_tokens / date_tokens (sql/incremental/011-message-tokens.sql): NULL at
insert (ingestion computes nothing more), the embedding model's count once the embed worker has
run, of the turn exactly as a passage holds it; a change of the text makes them unknown again,
and the worker's count re-derives no chunk."""

from fake_embedder import FakeEmbedder

from pyrecall._worker import Worker, count_messages


class WordPieces(FakeEmbedder):
    """The fake vectors, and a count that tells texts apart: characters, not words."""

    def count_tokens(self, text: str) -> int:
        return len(text)


def seed(conn):
    conn.execute("insert into recall.sessions (session_id, agent_id, metadata) values "
                 "('chat', 'a', '{\"chunking\": \"window\"}'), ('code', 'a', '{}'), ('other', 'b', '{}')")
    conn.execute(
        "insert into recall.messages (session_id, role, content, created_at, metadata) values "
        "('chat', 'user', 'I went hiking on Sunday', '2023-05-08 10:00+00', '{\"speaker\": \"Caroline\"}'),"
        "('chat', 'assistant', 'Where did you go?', '2023-05-08 10:01+00', '{\"speaker\": \"Melanie\"}'),"
        "('chat', 'user', 'Up the hill near the lake', '2023-05-08 10:02+00', '{\"speaker\": \"Caroline\"}'),"
        "('code', 'user', 'how do I sort a list', '2024-12-25 08:00+00', '{}'),"
        "('code', 'assistant', 'use sorted(xs)', '2024-12-25 08:01+00', '{}')")
    conn.execute("insert into recall.messages (session_id, role, kind, content) values "
                 "('code', 'tool', 'tool_result', 'a tool said this')")
    conn.execute("insert into recall.messages (session_id, role, content) values ('other', 'user', 'hello there')")


def counts(conn):
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        "select content, n_tokens, date_tokens from recall.messages order by message_id")}


def test_null_at_insert_then_the_models_count_of_the_turn_as_a_passage_holds_it(conn):
    seed(conn)
    assert set(counts(conn).values()) == {(None, None)}
    report = Worker(conn, WordPieces()).run()
    assert report.counted == 6          # the text messages; a tool result is in no passage
    got = counts(conn)
    assert got["I went hiking on Sunday"] == (len("Caroline: I went hiking on Sunday\n\n"),
                                              len("[8 May 2023]\n"))
    assert got["use sorted(xs)"] == (len("Assistant: use sorted(xs)\n\n"), len("[25 December 2024]\n"))
    assert got["a tool said this"] == (None, None)
    # what the passage text is made of: the same characters as recall._passage_text_v6 writes
    text = conn.execute("select recall._passage_text_v6('a', array_agg(message_id), true) "
                        "from recall.messages where session_id = 'chat'").fetchone()[0]
    assert len(text) == len("[8 May 2023]\n") + sum(
        got[c][0] for c in ("I went hiking on Sunday", "Where did you go?", "Up the hill near the lake")) - 2
    # a second run counts nothing again
    assert Worker(conn, WordPieces()).run().counted == 0


def test_the_backfill_of_messages_stored_before_one_agent_then_all(conn):
    seed(conn)
    # as migration 011 leaves a database that held messages
    conn.execute("insert into recall.config (key, value) values ('message_tokens_backfill', 'true')")
    assert count_messages(conn, WordPieces(), agent="b") == 1
    assert counts(conn)["hello there"] == (len("User: hello there\n\n"), len(conn.execute(
        "select '[' || to_char(created_at at time zone 'UTC', 'FMDD FMMonth YYYY') || E']\\n' "
        "from recall.messages where content = 'hello there'").fetchone()[0]))
    assert counts(conn)["I went hiking on Sunday"] == (None, None)
    assert conn.execute("select count(*) from recall.config where key = 'message_tokens_backfill'").fetchone()[0] == 1
    assert count_messages(conn, WordPieces()) == 5
    assert counts(conn)["a tool said this"] == (None, None)
    assert conn.execute("select count(*) from recall.config where key = 'message_tokens_backfill'").fetchone()[0] == 0
    # without the key: nothing to do (the chunks' own embedding counts the new turns)
    conn.execute("update recall.messages set n_tokens = null where session_id = 'other'")
    assert count_messages(conn, WordPieces()) == 0


def test_a_change_of_the_text_makes_the_counts_unknown_and_a_count_rechunks_nothing(conn):
    seed(conn)
    Worker(conn, WordPieces()).run()
    chunks = conn.execute("select chunk_id, content, embedding is not null from recall.chunks "
                          "order by chunk_id").fetchall()
    assert all(e for _, _, e in chunks)
    # the worker's own write (the counts only): no chunk derived again, none back to pending
    conn.execute("update recall.messages set n_tokens = 9, date_tokens = 9 where session_id = 'chat'")
    assert conn.execute("select chunk_id, content, embedding is not null from recall.chunks "
                        "order by chunk_id").fetchall() == chunks
    # the speaker changes: the counts are unknown, the chunks re-derived
    conn.execute("update recall.messages set metadata = '{\"speaker\": \"Caro\"}' "
                 "where content = 'I went hiking on Sunday'")
    assert counts(conn)["I went hiking on Sunday"] == (None, None)
    assert counts(conn)["Where did you go?"] == (9, 9)
    assert Worker(conn, WordPieces()).run().counted == 1
    assert counts(conn)["I went hiking on Sunday"][0] == len("Caro: I went hiking on Sunday\n\n")
    # so does the date, and the content; an update that sets the counts keeps them
    conn.execute("update recall.messages set created_at = created_at + interval '1 day' "
                 "where content = 'Where did you go?'")
    assert counts(conn)["Where did you go?"] == (None, None)
    conn.execute("update recall.messages set content = 'Up the hill', n_tokens = 7, date_tokens = 3 "
                 "where content = 'Up the hill near the lake'")
    assert counts(conn)["Up the hill"] == (7, 3)


def test_reembedding_with_another_model_counts_again(conn):
    seed(conn)
    Worker(conn, WordPieces()).run()
    assert counts(conn)["hello there"][0] == len("User: hello there\n\n")

    report = Worker(conn, FakeEmbedder(model="fake/other"), reembed=True).run()
    assert report.embedded > 0 and report.counted == 6
    assert counts(conn)["hello there"] == (3, 3)     # FakeEmbedder counts words
