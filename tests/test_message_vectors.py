"""recall.messages.embedding (sql/incremental/013-message-vectors.sql): each text message's own
vector, of the turn as a passage shows it ("Speaker: text"), written by the embed worker with
the turn's token counts; NULL again when the turn's text changes; a backfill for the messages
stored before; a provider that fails leaves the chunks embedded and the turns to a later run.
(About the worker's bookkeeping: the hash embedder, whose vector of a text the test knows.)"""

import numpy as np
from fake_embedder import FakeEmbedder
from test_message_tokens import seed

from pyrecall import _worker
from pyrecall._errors import EmbeddingError, TransientEmbeddingError
from pyrecall._worker import Worker, change_dimension, count_messages


def vectors(conn) -> dict:
    return {c: (None if v is None else np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v))
            for c, v in conn.execute(
        "select content, embedding from recall.messages order by message_id")}


def turn_vector(text: str) -> np.ndarray:
    return FakeEmbedder().vector(text)


def backfill_key(conn) -> bool:
    return conn.execute("select exists (select from recall.config "
                        "where key = 'message_vectors_backfill')").fetchone()[0]


def test_the_worker_embeds_each_turn_as_speaker_text(conn):
    seed(conn)
    assert all(v is None for v in vectors(conn).values())
    embedder = FakeEmbedder()
    Worker(conn, embedder).run()
    got = vectors(conn)
    assert np.allclose(got["I went hiking on Sunday"], turn_vector("Caroline: I went hiking on Sunday"))
    assert np.allclose(got["Where did you go?"], turn_vector("Melanie: Where did you go?"))
    assert np.allclose(got["use sorted(xs)"], turn_vector("Assistant: use sorted(xs)"))
    assert got["a tool said this"] is None         # a tool result is in no passage
    assert sum(v is not None for v in got.values()) == 6
    # each turn embedded once, after its chunks'; a one-turn chunk's turn not again (same text)
    assert embedder.seen.count("User: hello there") == 1
    turns = [t for t in embedder.seen if t.startswith(("Caroline: ", "Melanie: ", "User: ", "Assistant: "))
             and "\n" not in t]
    assert len(turns) == len(set(turns)) == 6
    # a second run embeds nothing again
    embedder.seen.clear()
    assert Worker(conn, embedder).run().embedded == 0 and embedder.seen == []


def test_writing_a_vector_rechunks_nothing_and_a_change_of_the_text_clears_it(conn):
    seed(conn)
    Worker(conn, FakeEmbedder()).run()
    chunks = conn.execute("select chunk_id, content, embedding is not null from recall.chunks "
                          "order by chunk_id").fetchall()
    assert all(e for *_, e in chunks)
    # the worker's own write: no chunk derived again, none back to pending
    conn.execute("update recall.messages set embedding = %s where content = 'Where did you go?'",
                 [turn_vector("x")])
    assert conn.execute("select chunk_id, content, embedding is not null from recall.chunks "
                        "order by chunk_id").fetchall() == chunks
    # the date is not in the turn's text: its vector stays (its counts do not)
    conn.execute("update recall.messages set created_at = created_at + interval '1 day' "
                 "where content = 'I went hiking on Sunday'")
    assert vectors(conn)["I went hiking on Sunday"] is not None
    # the speaker and the content are: unknown again, embedded again by the next run
    conn.execute("update recall.messages set metadata = '{\"speaker\": \"Caro\"}' "
                 "where content = 'I went hiking on Sunday'")
    conn.execute("update recall.messages set content = 'Up the hill' where content = 'Up the hill near the lake'")
    got = vectors(conn)
    assert got["I went hiking on Sunday"] is None and got["Up the hill"] is None
    assert got["Where did you go?"] is not None
    Worker(conn, FakeEmbedder()).run()
    got = vectors(conn)
    assert np.allclose(got["I went hiking on Sunday"], turn_vector("Caro: I went hiking on Sunday"))
    assert np.allclose(got["Up the hill"], turn_vector("Caroline: Up the hill"))
    # an update that sets the vector with the text keeps it
    conn.execute("update recall.messages set content = 'Up', embedding = %s where content = 'Up the hill'",
                 [turn_vector("mine")])
    assert np.allclose(vectors(conn)["Up"], turn_vector("mine"))


def test_the_backfill_of_messages_stored_before_one_agent_then_all(conn):
    seed(conn)
    Worker(conn, FakeEmbedder()).run()
    # as migration 013 leaves a database that held messages (embedded, counted, no vectors)
    conn.execute("update recall.messages set embedding = null")
    conn.execute("insert into recall.config (key, value) values ('message_vectors_backfill', 'true')")
    assert count_messages(conn, FakeEmbedder(), agent="b") == 1
    got = vectors(conn)
    assert np.allclose(got["hello there"], turn_vector("User: hello there"))
    assert got["I went hiking on Sunday"] is None and backfill_key(conn)
    assert count_messages(conn, FakeEmbedder()) == 5
    got = vectors(conn)
    assert sum(v is not None for v in got.values()) == 6 and got["a tool said this"] is None
    assert not backfill_key(conn)
    # the counts were there: the backfill kept them
    assert conn.execute("select count(*) from recall.messages where kind = 'text' and n_tokens is null").fetchone()[0] == 0
    # without the key: nothing to do
    conn.execute("update recall.messages set embedding = null where content = 'hello there'")
    assert count_messages(conn, FakeEmbedder()) == 0


class TurnsDown(FakeEmbedder):
    """Embeds chunks; unavailable for the turns (a text without a line break)."""

    def embed(self, texts):
        if all("\n" not in t for t in texts):
            raise TransientEmbeddingError("provider down for the turns (fake)")
        return super().embed(texts)


def test_a_provider_that_fails_the_turns_leaves_the_chunks_embedded_and_the_turns_to_a_later_run(conn):
    seed(conn)
    report = Worker(conn, TurnsDown()).run()
    assert report.failed == 0 and report.pending == 0
    assert report.counted >= 6         # the counts are written (the backfill at the end of the run tried again)
    # (a one-turn chunk's turn is given its chunk's vector: the same text)
    assert {c for c, v in vectors(conn).items() if v is not None} == {"hello there"}
    assert backfill_key(conn)
    # the next run (the provider back) embeds them through the backfill, then drops the key
    report = Worker(conn, FakeEmbedder()).run()
    assert report.embedded == 0 and report.counted == 5
    assert sum(v is not None for v in vectors(conn).values()) == 6
    assert not backfill_key(conn)


class RefusesOneTurn(FakeEmbedder):
    """Refuses a request holding one turn's text exactly (its chunk, longer, is embedded)."""

    def embed(self, texts):
        if "Melanie: Where did you go?" in texts:
            raise EmbeddingError("provider refused the input (fake)")
        return super().embed(texts)


def test_a_turn_the_provider_refuses_is_alone_in_keeping_no_vector(conn):
    seed(conn)
    embedder = RefusesOneTurn()
    report = Worker(conn, embedder).run()
    assert report.failed == 0 and report.counted == 6
    got = vectors(conn)
    assert got["Where did you go?"] is None
    assert sum(v is not None for v in got.values()) == 5    # the batch halved down to it
    assert not backfill_key(conn)       # refused for good, not unavailable: no backfill


def test_reembedding_embeds_the_turns_again_and_a_new_dimension_clears_them(conn):
    seed(conn)
    Worker(conn, FakeEmbedder()).run()
    Worker(conn, FakeEmbedder(model="fake/other", dim=384), reembed=True).run()
    assert np.allclose(vectors(conn)["hello there"], turn_vector("User: hello there"))
    conn.execute("update recall.messages set embedding = %s where content = 'hello there'", [turn_vector("y")])
    Worker(conn, FakeEmbedder(model="fake/third"), reembed=True).run()
    assert np.allclose(vectors(conn)["hello there"], turn_vector("User: hello there"))
    change_dimension(conn, 8)
    assert all(v is None for v in vectors(conn).values())


def test_turn_vectors_false_embeds_no_turn_until_it_is_true_again(conn):
    seed(conn)
    conn.execute("insert into recall.config (key, value) values ('turn_vectors', 'false')")
    embedder = FakeEmbedder()
    report = Worker(conn, embedder).run()
    assert report.embedded == 4 and report.counted == 6
    assert all(v is None for v in vectors(conn).values())
    assert all("\n" in t or t == "User: hello there" for t in embedder.seen)   # chunks only
    assert backfill_key(conn)           # what was left, for when it is true again
    assert count_messages(conn, FakeEmbedder()) == 0 and backfill_key(conn)
    conn.execute("update recall.config set value = 'true' where key = 'turn_vectors'")
    assert Worker(conn, FakeEmbedder()).run().counted == 6
    assert sum(v is not None for v in vectors(conn).values()) == 6 and not backfill_key(conn)


def test_the_backfill_goes_by_slices_from_where_it_stopped(conn, monkeypatch):
    """The long-running worker backfills at most BACKFILL_PASS older messages a pass (new chunks
    are not kept waiting behind hours of turns); the next pass goes on from the position kept
    in the key; a provider that is unavailable stops the slice without losing its place."""
    seed(conn)
    Worker(conn, FakeEmbedder()).run()
    conn.execute("update recall.messages set embedding = null")
    conn.execute("insert into recall.config (key, value) values ('message_vectors_backfill', 'true')")
    monkeypatch.setattr(_worker, "COUNT_BATCH", 2)
    done = lambda: sum(v is not None for v in vectors(conn).values())  # noqa: E731
    report = Worker(conn, FakeEmbedder()).run(backfill_limit=2)
    assert report.counted == 2 and report.backfill_left and done() == 2
    first_two = conn.execute("select max(message_id) from recall.messages where embedding is not null").fetchone()[0]
    assert conn.execute("select value from recall.config where key = 'message_vectors_backfill'").fetchone()[0] \
        == {"after": first_two}
    # unavailable: nothing embedded, the place kept, nothing more to do at once
    assert _worker.backfill(conn, TurnsDown(), limit=2) == (2, False)
    assert done() == 2
    assert conn.execute("select value from recall.config where key = 'message_vectors_backfill'").fetchone()[0] \
        == {"after": first_two}
    assert _worker.backfill(conn, FakeEmbedder(), limit=2) == (2, True) and done() == 4
    assert _worker.backfill(conn, FakeEmbedder()) == (2, False) and done() == 6
    assert not backfill_key(conn)
