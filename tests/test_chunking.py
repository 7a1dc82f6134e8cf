"""In-database chunking: exact chunks for every kind, long text, idempotent re-insert."""

import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

T0 = "2026-03-01 10:00:00+00"


def add_session(conn, sid="s1", agent="a1", **kw):
    conn.execute(
        "insert into recall.sessions (session_id, agent_id, project, branch, metadata) "
        "values (%s, %s, %s, %s, %s)",
        [sid, agent, kw.get("project", "api"), kw.get("branch", "main"), kw.get("metadata", "{}")])


def add(conn, rows, sid="s1"):
    """rows: (role, kind, content[, metadata json]) inserted in one statement, a minute apart."""
    values, params = [], []
    for i, row in enumerate(rows):
        role, kind, content, meta = (*row, "{}")[:4]
        values.append("(%s, %s, %s, %s, %s::timestamptz + make_interval(mins => %s), %s)")
        params += [sid, role, kind, content, T0, i, meta]
    conn.execute("insert into recall.messages (session_id, role, kind, content, created_at, metadata) "
                 "values " + ", ".join(values), params)


def chunks(conn, sid="s1"):
    return conn.execute(
        "select kind, first_seq, part, content from recall.chunks "
        "where session_id = %s order by first_seq, kind, part", [sid]).fetchall()


def test_every_kind(conn):
    add_session(conn)
    add(conn, [
        ("system", "text", "You are a helpful agent."),
        ("user", "text", "How do I run the tests?"),
        ("assistant", "thinking", "Probably pytest."),
        ("assistant", "text", "Run:\n```bash\npytest -q\n```\nThat is all."),
        ("assistant", "tool_call", "Bash(pytest -q)", '{"tool_use_id": "t1"}'),
        ("tool", "tool_result", "2 passed", '{"tool_use_id": "t1", "is_error": false}'),
        ("assistant", "text", "All green."),
        ("user", "text", "Thanks!"),
    ])
    assert chunks(conn) == [
        ("message", 1, 0, "System: You are a helpful agent."),
        ("turn_pair", 2, 0, "User: How do I run the tests?\n\nAssistant: Run:\n```bash\npytest -q\n```\nThat is all."),
        ("thinking", 3, 0, "Probably pytest."),
        ("code", 4, 0, "Run:\n```bash\npytest -q\n```"),
        ("tool", 5, 0, "Bash(pytest -q)\n\nResult:\n2 passed"),
        ("message", 7, 0, "Assistant: All green."),
        ("message", 8, 0, "User: Thanks!"),
    ]
    row = conn.execute("select message_ids, metadata, n_tokens, embedding from recall.chunks "
                       "where kind = 'tool'").fetchone()
    assert row[0] == [5, 6]
    assert row[1] == {"project": "api", "branch": "main", "tool_use_id": "t1", "is_error": False}
    assert row[2] == 9 and row[3] is None  # ceil(35 chars / 4); pending embedding


def test_answer_arriving_later_turns_message_into_pair(conn):
    add_session(conn)
    add(conn, [("user", "text", "What port does the API use?")])
    assert chunks(conn) == [("message", 1, 0, "User: What port does the API use?")]
    add(conn, [("assistant", "thinking", "Check config."), ("assistant", "text", "Port 8080.")])
    assert chunks(conn) == [
        ("turn_pair", 1, 0, "User: What port does the API use?\n\nAssistant: Port 8080."),
        ("thinking", 2, 0, "Check config."),
    ]


def test_result_arriving_later_joins_its_call(conn):
    add_session(conn)
    add(conn, [("assistant", "tool_call", "Read(a.py)", '{"tool_use_id": "x"}'),
               ("assistant", "tool_call", "Read(b.py)", '{"tool_use_id": "y"}')])
    add(conn, [("tool", "tool_result", "B", '{"tool_use_id": "y"}'),
               ("tool", "tool_result", "A", '{"tool_use_id": "x"}')])
    assert chunks(conn) == [
        ("tool", 1, 0, "Read(a.py)\n\nResult:\nA"),
        ("tool", 2, 0, "Read(b.py)\n\nResult:\nB"),
    ]


def test_a_result_belongs_to_the_last_call_of_its_id_before_it(conn):
    """A result before any call of its id is no call's; a call takes the results of its id up to
    the next call of that id. Each message in one tool chunk, appended or chunked whole alike
    (found by test_chat_session_changed_anywhere_equals_chunking_it_whole: a call appended after
    a result of its id took that result too, chunked whole, so the result was in two chunks)."""
    for sid, chunking in (("s1", "{}"), ("c1", '{"chunking": "window"}')):
        add_session(conn, sid=sid, metadata=chunking)
        add(conn, [("user", "text", "a"), ("tool", "tool_result", "early", '{"tool_use_id": "t"}')], sid=sid)
        add(conn, [("assistant", "tool_call", "first", '{"tool_use_id": "t"}'),
                   ("tool", "tool_result", "one", '{"tool_use_id": "t"}')], sid=sid)
        add(conn, [("assistant", "tool_call", "second", '{"tool_use_id": "t"}')], sid=sid)
        add(conn, [("tool", "tool_result", "two", '{"tool_use_id": "t"}')], sid=sid)
        tools = [c[3] for c in chunks(conn, sid) if c[0] == "tool"]
        assert tools == ["Result:\nearly", "first\n\nResult:\none", "second\n\nResult:\ntwo"], sid
        before = chunks(conn, sid)
        assert conn.execute("select recall._rechunk(array['a1'], array[%s], array[-2147483648])",
                            [sid]).fetchone()[0] == 0
        assert chunks(conn, sid) == before


def test_results_without_ids_pair_with_the_call_before(conn):
    add_session(conn)
    add(conn, [("assistant", "tool_call", "ls"), ("tool", "tool_result", "a b"),
               ("tool", "tool_result", "orphan")])
    assert chunks(conn) == [("tool", 1, 0, "ls\n\nResult:\na b"), ("tool", 3, 0, "Result:\norphan")]


def test_long_message_split_into_overlapping_windows(conn):
    conn.execute("update recall.config set value = '100' where key = 'chunk_max_chars'")
    conn.execute("update recall.config set value = '20' where key = 'chunk_overlap_chars'")
    add_session(conn)
    body = "".join(chr(ord("a") + i % 26) for i in range(250))
    add(conn, [("assistant", "thinking", body)])
    got = chunks(conn)
    assert [(k, s, p) for k, s, p, _ in got] == [("thinking", 1, 0), ("thinking", 1, 1), ("thinking", 1, 2)]
    assert [c for *_, c in got] == [body[0:100], body[80:180], body[160:250]]


def test_exact_window_boundaries(conn):
    conn.execute("update recall.config set value = '100' where key = 'chunk_max_chars'")
    conn.execute("update recall.config set value = '20' where key = 'chunk_overlap_chars'")
    add_session(conn)
    add(conn, [("assistant", "thinking", "x" * 100), ("assistant", "thinking", "y" * 101),
               ("assistant", "thinking", "z" * 180), ("assistant", "thinking", "w" * 181)])
    counts = dict(conn.execute("select first_seq, count(*) from recall.chunks group by 1").fetchall())
    assert counts == {1: 1, 2: 2, 3: 2, 4: 3}


def test_two_code_blocks_numbered(conn):
    add_session(conn)
    add(conn, [("assistant", "text", "First:\n```py\na = 1\n```\nthen\n```sql\nselect 1;\n```")])
    code = [(p, c) for k, _, p, c in chunks(conn) if k == "code"]
    assert code == [(0, "First:\n```py\na = 1\n```"), (1, "then\n```sql\nselect 1;\n```")]


def test_reinsert_is_a_noop(conn):
    add_session(conn)
    rows = [("user", "text", "hello"), ("assistant", "text", "hi there")]
    add(conn, rows)
    before = conn.execute("select chunk_id, content from recall.chunks order by chunk_id").fetchall()
    conn.execute("update recall.chunks set embedding = array_fill(0.1, array[384])::vector")
    add(conn, rows)  # same content, same created_at: the same messages
    assert conn.execute("select count(*) from recall.messages").fetchone()[0] == 2
    assert conn.execute("select chunk_id, content from recall.chunks order by chunk_id").fetchall() == before
    assert conn.execute("select count(*) from recall.chunks where embedding is null").fetchone()[0] == 0


def test_reinsert_by_external_id_and_seq(conn):
    add_session(conn)
    ins = ("insert into recall.messages (session_id, external_id, seq, role, content) "
           "values ('s1', %s, %s, 'user', %s)")
    conn.execute(ins, ["u-1", None, "first"])
    conn.execute(ins, ["u-1", None, "first, re-sent later"])   # same external id: no-op
    conn.execute(ins, [None, 1, "first"])                      # same seq, same text: no-op
    assert conn.execute("select seq, external_id, content from recall.messages").fetchall() == [
        (1, "u-1", "first")]


def test_copy_of_many_sessions_chunks_each(conn):
    for s in ("a", "b", "c"):
        add_session(conn, sid=s)
    with conn.cursor().copy("copy recall.messages (session_id, role, content, created_at) from stdin") as cp:
        for s in ("a", "b", "c"):
            for i in range(50):
                cp.write_row([s, "user" if i % 2 == 0 else "assistant", f"{s} message {i}", f"2026-01-01 00:{i:02d}:00+00"])
    per = dict(conn.execute("select session_id, count(*) from recall.chunks group by 1").fetchall())
    assert per == {"a": 25, "b": 25, "c": 25}
    assert conn.execute("select count(distinct kind) from recall.chunks").fetchone()[0] == 1


def test_update_and_delete_rechunk(conn):
    add_session(conn)
    add(conn, [("user", "text", "q"), ("assistant", "text", "old answer")])
    conn.execute("update recall.chunks set embedding = array_fill(0.1, array[384])::vector")
    conn.execute("update recall.messages set content = 'new answer' where seq = 2")
    assert chunks(conn) == [("turn_pair", 1, 0, "User: q\n\nAssistant: new answer")]
    assert conn.execute("select embedding is null from recall.chunks").fetchone()[0] is True
    conn.execute("delete from recall.messages where seq = 2")
    assert chunks(conn) == [("message", 1, 0, "User: q")]


def test_session_metadata_flows_into_chunks(conn):
    add_session(conn, metadata='{"channel": "ops"}')
    add(conn, [("user", "text", "deploy?")])
    conn.execute("update recall.sessions set branch = 'release', metadata = '{\"channel\": \"dev\"}'")
    meta = conn.execute("select metadata from recall.chunks").fetchone()[0]
    assert meta == {"project": "api", "branch": "release", "channel": "dev"}


def test_session_spans_its_messages(conn):
    add_session(conn)
    add(conn, [("user", "text", "a"), ("assistant", "text", "b"), ("user", "text", "c")])
    span = conn.execute("select ended_at - started_at from recall.sessions").fetchone()[0]
    assert span.total_seconds() == 120


@pytest.mark.parametrize("n", [1, 2, 7])
def test_seq_is_dense_per_session(conn, n):
    add_session(conn)
    for i in range(n):
        add(conn, [("user", "text", f"m{i}")])
    assert [r[0] for r in conn.execute("select seq from recall.messages order by seq")] == list(range(1, n + 1))


def test_lone_tool_result_first_in_session(conn):
    add_session(conn)
    add(conn, [("tool", "tool_result", "orphan output")])
    assert chunks(conn) == [("tool", 1, 0, "Result:\norphan output")]


def test_speaker_name_labels_chunks(conn):
    add_session(conn)
    add(conn, [("user", "text", "Hi Mel!", '{"speaker": "Caroline"}'),
               ("assistant", "text", "Hey Caroline!", '{"speaker": "Melanie"}'),
               ("user", "text", "Anyone?")])
    assert [c for *_, c in chunks(conn)] == ["Caroline: Hi Mel!\n\nMelanie: Hey Caroline!", "User: Anyone?"]


def test_claude_code_turn_pairs_skip_thinking_and_tools(conn):
    add_session(conn)
    add(conn, [("user", "text", "fix the test"),
               ("assistant", "thinking", "look at it"),
               ("assistant", "tool_call", "Read(t.py)", '{"tool_use_id": "r1"}'),
               ("tool", "tool_result", "def test(): ...", '{"tool_use_id": "r1"}'),
               ("assistant", "text", "Fixed."),
               ("assistant", "text", "Anything else?")])
    assert [(k, s) for k, s, _, _ in chunks(conn)] == [
        ("turn_pair", 1), ("thinking", 2), ("tool", 3), ("message", 6)]
    assert chunks(conn)[0][3] == "User: fix the test\n\nAssistant: Fixed."


def test_window_chunking_for_chat_sessions(conn):
    add_session(conn, metadata='{"chunking": "window"}')
    add(conn, [("user", "text", "m1"), ("assistant", "text", "m2"), ("user", "text", "m3"),
               ("assistant", "thinking", "hmm"), ("assistant", "text", "m4"), ("user", "text", "m5"),
               ("assistant", "text", "m6"), ("user", "text", "m7")])
    got = [(k, s, c) for k, s, _, c in chunks(conn)]
    day = "[1 March 2026]\n"     # a window starts with its first message's date (UTC)
    assert got == [
        ("window", 1, day + "User: m1\n\nAssistant: m2\n\nUser: m3\n\nAssistant: m4"),
        ("window", 3, day + "User: m3\n\nAssistant: m4\n\nUser: m5\n\nAssistant: m6"),
        ("thinking", 4, "hmm"),
        ("window", 6, day + "User: m5\n\nAssistant: m6\n\nUser: m7"),
    ]
    # one more message: the short last window grows, nothing else moves
    ids_before = dict(conn.execute("select first_seq, chunk_id from recall.chunks").fetchall())
    add(conn, [("assistant", "text", "m8")])
    got = [(k, s, c) for k, s, _, c in chunks(conn)]
    assert got[-1] == ("window", 6, day + "User: m5\n\nAssistant: m6\n\nUser: m7\n\nAssistant: m8")
    assert len(got) == 4
    assert dict(conn.execute("select first_seq, chunk_id from recall.chunks").fetchall()) == ids_before


def test_switching_a_session_to_windows_rechunks_it(conn):
    add_session(conn)
    add(conn, [("user", "text", "a"), ("assistant", "text", "b"), ("user", "text", "c")])
    assert [k for k, *_ in chunks(conn)] == ["turn_pair", "message"]
    conn.execute("""update recall.sessions set metadata = '{"chunking": "window"}'""")
    assert [(k, c) for k, _, _, c in chunks(conn)] == [("window", "[1 March 2026]\nUser: a\n\nAssistant: b\n\nUser: c")]


def test_window_date_is_the_first_messages_utc_day_whatever_the_time_zone(conn):
    conn.execute("set timezone = 'Pacific/Kiritimati'")     # UTC+14: already 2 March there
    add_session(conn, metadata='{"chunking": "window"}')
    conn.execute("insert into recall.messages (session_id, role, content, created_at) values "
                 "('s1', 'user', 'late', '2026-03-01 23:59:30+00'), "
                 "('s1', 'assistant', 'next day', '2026-03-02 00:00:30+00')")
    assert [c for *_, c in chunks(conn)] == ["[1 March 2026]\nUser: late\n\nAssistant: next day"]


def _ingest_world(conn):
    """Sessions of every shape through pyrecall._ingest.ingest; what the database then holds."""
    from datetime import UTC, datetime, timedelta

    from pyrecall._ingest import ingest
    from pyrecall.importers._records import Message, Session

    t = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    talk = [Message(None, "user", "text", "How do we deploy?", t, 0.9, {"speaker": "Ana"}),
            Message("ext-1", "assistant", "thinking", "They mean staging.", None, None, {}),
            Message(None, "assistant", "tool_call", "kubectl get pods", t + timedelta(minutes=1), 1, {"tool_use_id": "t1"}),
            Message(None, "tool", "tool_result", "pod-a Running", datetime(2026, 3, 1, 10, 2), 0.0, {"tool_use_id": "t1"}),
            Message(None, "assistant", "text", "With ```make deploy```, then `kubectl`.", None, 0.25, {"n": [1, None]}),
            Message(None, "user", "text", "ünïcode ☃ and a long one " * 200, t, None, {})]
    report = ingest(conn, [Session("w1", None, "Deploy", "api", "main", t, None, {"channel": "ops"}, talk),
                           Session("w2", "other", None, None, None, None, None, {"chunking": "window"},
                                   [Message(None, "user", "text", f"chat {i}") for i in range(7)]),
                           Session("w3", None, "empty", None, None, None, None, {}, [])],
                    agent_id="a1", keep_empty=True)
    again = ingest(conn, [Session("w1", None, None, None, None, t, None, {}, talk)], agent_id="a1")
    return (report, again,
            conn.execute("select session_id, agent_id, title, project, branch, metadata, "
                         "case when started_at > now() - interval '1 hour' then 'now' else started_at::text end "
                         "from recall.sessions order by 1").fetchall(),
            conn.execute("select session_id, seq, agent_id, external_id, role, kind, content, "
                         "case when created_at > now() - interval '1 hour' then 'now' else created_at::text end, "
                         "importance, metadata "
                         "from recall.messages m order by 1, 2").fetchall(),
            conn.execute("select session_id, kind, first_seq, part, content, n_tokens, importance, metadata "
                         "from recall.chunks order by 1, 2, 3, 4").fetchall())


def test_ingest_from_arrays_equals_ingest_through_copy(conn, db_url, monkeypatch):
    """Small batches go as array parameters, large ones through COPY into staging tables: both
    write the same sessions, messages and chunks."""
    import psycopg

    from pyrecall import _ingest

    arrays = _ingest_world(conn)
    monkeypatch.setattr(_ingest, "ARRAY_BATCH_MAX_CHARS", -1)
    conn.execute("truncate recall.sessions cascade")
    with psycopg.connect(db_url, autocommit=True) as other:
        staged = _ingest_world(other)
    assert arrays[0].inserted == 13 and arrays[1].inserted == 0
    assert [len(x) for x in arrays[2:]] == [3, 13, len(arrays[4])] and len(arrays[4]) > 8
    assert arrays == staged


# --- chat sessions redone from their last windows ------------------------------------------

_CHAT = itertools.count()
_KINDS = st.sampled_from([("user", "text"), ("assistant", "text"), ("assistant", "thinking"),
                          ("assistant", "tool_call"), ("tool", "tool_result")])
_OPS = st.one_of(
    st.tuples(st.just("append"), st.lists(st.tuples(_KINDS, st.sampled_from(["a", "b b", "c ```x``` d"])),
                                          min_size=1, max_size=5)),
    st.tuples(st.just("delete"), st.integers(0, 60)),
    st.tuples(st.just("update"), st.integers(0, 60), st.sampled_from(["new", "other words"])),
    st.tuples(st.just("kind"), st.integers(0, 60), _KINDS),
)


def _chat_chunks(conn, sid):
    return conn.execute(
        "select kind, first_seq, part, content, message_ids, metadata, created_at, importance "
        "from recall.chunks where agent_id = 'a1' and session_id = %s order by kind, first_seq, part",
        [sid]).fetchall()


@settings(max_examples=int(os.environ.get("PYRECALL_FUZZ_EXAMPLES", "40")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(shape=st.sampled_from([(4, 2), (3, 1), (2, 2), (5, 3), (2, 3), (1, 1), (6, 4)]),
       start=st.integers(0, 30), ops=st.lists(_OPS, min_size=1, max_size=6))
def test_chat_session_changed_anywhere_equals_chunking_it_whole(conn, shape, start, ops):
    """Appending to, editing or deleting from a chat session redoes it from its first window
    that can change (not whole): whatever the change and the window shape, the chunks are
    those of chunking the whole session again (which then changes nothing)."""
    conn.execute("update recall.config set value = %s where key = 'window_messages'", [str(shape[0])])
    conn.execute("update recall.config set value = %s where key = 'window_stride'", [str(shape[1])])
    sid = f"chat{next(_CHAT)}"
    add_session(conn, sid=sid, metadata='{"chunking": "window"}')
    if start:
        add(conn, [(("user", "assistant")[i % 2], "text", f"m{i}") for i in range(start)], sid=sid)
    for op in ops:
        seqs = [r[0] for r in conn.execute(
            "select seq from recall.messages where session_id = %s order by seq", [sid])]
        if op[0] == "append":
            add(conn, [(role, kind, text, '{"tool_use_id": "t"}' if kind.startswith("tool") else "{}")
                       for (role, kind), text in op[1]], sid=sid)
        elif not seqs:
            continue
        elif op[0] == "delete":
            conn.execute("delete from recall.messages where session_id = %s and seq = %s",
                         [sid, seqs[op[1] % len(seqs)]])
        elif op[0] == "update":
            conn.execute("update recall.messages set content = %s where session_id = %s and seq = %s",
                         [op[2], sid, seqs[op[1] % len(seqs)]])
        else:
            conn.execute("update recall.messages set role = %s, kind = %s where session_id = %s and seq = %s",
                         [*op[2], sid, seqs[op[1] % len(seqs)]])
        got = _chat_chunks(conn, sid)
        changed = conn.execute("select recall._rechunk(array['a1'], array[%s], array[-2147483648])",
                               [sid]).fetchone()[0]
        assert (changed, _chat_chunks(conn, sid)) == (0, got), op


def test_appending_to_a_long_chat_redoes_its_last_windows_only(conn):
    add_session(conn, metadata='{"chunking": "window"}')
    add(conn, [(("user", "assistant")[i % 2], "text", f"m{i}") for i in range(100)])
    add(conn, [("assistant", "thinking", "hmm")])                     # seq 101, not a text message
    first = conn.execute("select chunk_id, xmin::text from recall.chunks where first_seq = 1").fetchone()
    # 100 text messages; a window (4, every 2) holding number 101 starts at 99 or later
    assert conn.execute("select recall._redo_from('a1', 's1', 102)").fetchone()[0] == 99
    assert conn.execute("select recall._redo_from('a1', 's1', 3)").fetchone()[0] == -2147483648
    add(conn, [("user", "text", "m100")])
    assert conn.execute("select chunk_id, xmin::text from recall.chunks where first_seq = 1").fetchone() == first
    got = [(k, s, c) for k, s, _, c in chunks(conn)][-3:]
    day = "[1 March 2026]\n"
    assert got == [("window", 97, day + "User: m96\n\nAssistant: m97\n\nUser: m98\n\nAssistant: m99"),
                   ("window", 99, day + "User: m98\n\nAssistant: m99\n\nUser: m100"),
                   ("thinking", 101, "hmm")]
