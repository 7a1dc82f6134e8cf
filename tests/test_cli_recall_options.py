"""pyrecall recall --filter/--until/--min-similarity/--weights and pyrecall embed --filter, on
a Discord export (four people and a bot in one channel), against a real database."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_cli import local_model, runner  # noqa: F401  (local_model: a fixture)

from pyrecall import _worker
from pyrecall.cli import build_filter, main

CHAT = Path(__file__).resolve().parent / "fixtures" / "discord_payments.json"


@pytest.fixture
def chat(db_url, local_model, monkeypatch):  # noqa: F811
    """`pyrecall ARGS --agent support` against a database holding the Discord export."""
    invoke = runner(db_url, monkeypatch)
    result = invoke("index", CHAT, "--agent", "support")
    assert result.exit_code == 0, result.output

    def run(*args, input=None, env=None):
        return invoke(*args, "--agent", "support", input=input, env=env)
    return run


def memories(run, *args):
    result = run("recall", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["memories"]


def test_filter_by_author_keeps_only_windows_where_they_speak(chat):
    got = memories(chat, "refund webhook", "--filter", "author=carol")
    assert got, "carol speaks first in two windows"
    assert all("carol" in [m["author"] for m in x["metadata"]["messages"]] for x in got)
    assert memories(chat, "refund webhook", "--filter", "author=nobody") == []
    # several keys: all must match
    assert memories(chat, "refund webhook", "--filter", "author=carol", "--filter", "channel=other") == []


def test_same_key_twice_is_sent_as_any_of(chat, monkeypatch):
    """The filter the client receives; the SQL's answer to it is hybrid_recall v4's (any of)."""
    from pyrecall.client import Recall

    seen = {}
    real = Recall.recall

    def spy(self, agent_id, query, **kw):
        seen.update(kw)
        return real(self, agent_id, query, **{**kw, "filter": None})
    monkeypatch.setattr(Recall, "recall", spy)
    result = chat("recall", "webhook", "--filter", "author=bob", "--filter", "author=carol",
                  "--filter", "is_error:=false", "--project", "p")
    assert result.exit_code == 0, result.output
    assert seen["filter"] == {"project": "p", "author": ["bob", "carol"], "is_error": False}


def test_filter_matches_any_message_and_any_of_the_values(chat):
    """hybrid_recall v4: a window matches when any of its messages has the value; the same key
    twice matches either value."""
    assert chat("embed").exit_code == 0     # every window a candidate (by meaning)

    def firsts(*args):
        return sorted(x["metadata"]["messages"][0]["seq"] for x in memories(chat, "refund webhook", *args))

    assert firsts("--filter", "author=bob") == [3, 5, 7, 9]          # bob never speaks first
    assert firsts("--filter", "author=PayBot") == [1]
    assert firsts("--filter", "author=bob", "--filter", "author=PayBot") == [1, 3, 5, 7, 9]
    link = "https://discord.com/channels/1160000000000000001/1160000000000000002/1300000000000000010"
    assert firsts("--filter", f"permalink={link}") == [7, 9]        # bob's answer, in two windows


def test_build_filter():
    assert build_filter([]) is None
    assert build_filter([("a", "1")]) == {"a": "1"}
    assert build_filter([("a", "1"), ("a", "1")]) == {"a": "1"}
    assert build_filter([("n", 3), ("a", "x")], {"project": "p"}) == {"project": "p", "n": 3, "a": "x"}


def test_until_and_since(chat):
    got = memories(chat, "refund webhook", "--until", "2026-03-10T09:20:00+00:00")
    assert got and all(x["created_at"] < "2026-03-10T09:20" for x in got)
    later = memories(chat, "refund webhook", "--since", "2026-03-10T09:20:00+00:00")
    assert later and all(x["created_at"] >= "2026-03-10T09:20" for x in later)
    assert {x["chunk_id"] for x in got}.isdisjoint(x["chunk_id"] for x in later)


def test_weights_and_min_similarity(chat):
    result = chat("embed")
    assert result.exit_code == 0, result.output
    by_importance = memories(chat, "refund webhook", "--weights", "0,0,0,1")
    assert by_importance and all(x["score"] == pytest.approx(x["importance"]) for x in by_importance)
    by_text = memories(chat, "refund webhook", "--weights", "0,1,0,0")
    assert all(x["score"] == pytest.approx(x["text_rank"]) for x in by_text)
    every = memories(chat, "the refund webhook is failing")
    floor = sorted(x["similarity"] for x in every)[len(every) // 2]
    close = memories(chat, "the refund webhook is failing", "--min-similarity", floor)
    assert close and len(close) < len(every) and all(x["similarity"] >= floor for x in close)


def test_embed_filter_embeds_only_the_matching_chunks(chat, db_url):
    import psycopg

    result = chat("embed", "--dry-run", "--json", "--filter", "author=bob")
    assert result.exit_code == 0, result.output
    # bob speaks in windows 3, 5, 7 and 9 (never first: only metadata.messages holds him)
    assert json.loads(result.stdout)["pending"] == 4
    result = chat("embed", "--json", "--filter", "author=bob", "--filter", "author=PayBot")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["embedded"] == 5
    with psycopg.connect(db_url) as conn:
        assert conn.execute("select first_seq from recall.chunks where embedding is null "
                            "order by 1").fetchall() == []
    result = chat("embed", "--dry-run", "--json", "--filter", "channel=payments")
    assert json.loads(result.stdout)["pending"] == 0


def test_filter_condition_refuses_an_empty_list():
    from pyrecall import ConfigError

    with pytest.raises(ConfigError, match="empty list matches nothing"):
        _worker.filter_condition({"author": []})


ERRORS = [
    (["mark", "12", "--importance", "1.5"], "1.5 is not in the range 0<=x<=1"),
    (["mark", "12"], "give either --importance X or --reset"),
    (["mark", "12", "--importance", "0.5", "--reset"], "give either --importance X or --reset"),
    (["mark", "x", "--reset"], "'x' is not a valid integer"),
    (["recall", "q", "--filter", "author"], "'author': expected KEY=VALUE"),
    (["recall", "q", "--filter", "=bob"], "'=bob': expected KEY=VALUE"),
    (["recall", "q", "--filter", "n:={bad"], "the value after := is not JSON"),
    (["recall", "q", "--weights", "1,2"], "'1,2': expected four numbers >= 0"),
    (["recall", "q", "--weights", "1,x,0,0"], "'1,x,0,0': expected four numbers"),
    (["recall", "q", "--weights", "0,0,0,0"], "not all 0"),
    (["recall", "q", "--weights", "1,-1,0,0"], "expected four numbers >= 0"),
    (["recall", "q", "--weights", "nan,1,0,0"], "expected four numbers >= 0"),
    (["recall", "q", "--min-similarity", "2"], "2.0 is not in the range -1<=x<=1"),
    (["recall", "q", "--until", "soon"], "'soon': expected a duration"),
    (["recall", "q", "--since", "2026-03-02", "--until", "2026-03-01"], "--until must be later than --since"),
    (["recall", "q", "--by-session", "--min-similarity", "0.2"], "--min-similarity goes with recall"),
    (["recall", "--auto", "--filter", "a=b"], "--auto chooses its own memories"),
    (["embed", "--filter", "channel"], "'channel': expected KEY=VALUE"),
]


@pytest.mark.parametrize("args, message", ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_malformed_values_are_one_line_with_status_2(args, message):
    result = CliRunner().invoke(main, args, env={"PYRECALL_DSN": "postgresql://nobody@/none?host=/nonexistent"})
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [x for x in result.output.splitlines() if x.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], result.output


def test_sessions_carry_turns_and_time_span(chat, db_url):
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("insert into recall.sessions (session_id, agent_id, title) values ('talk', 'support', 'Talk')")
        conn.execute("""insert into recall.messages (session_id, role, kind, content, created_at) values
            ('talk', 'user', 'text', 'deploy?', '2026-03-11 10:00+00'),
            ('talk', 'assistant', 'tool_call', 'kubectl apply', '2026-03-11 10:01+00'),
            ('talk', 'tool', 'tool_result', 'ok', '2026-03-11 10:02+00'),
            ('talk', 'assistant', 'text', 'done', '2026-03-11 10:03+00'),
            ('talk', 'user', 'text', 'thanks', '2026-03-11 12:05+00')""")
    result = chat("sessions", "--json")
    assert result.exit_code == 0, result.output
    got = {s["session_id"]: (s["turns"], s["messages"], s["span_seconds"]) for s in json.loads(result.stdout)}
    assert got == {"talk": (2, 5, 7500.0),                                 # 2h05
                   "discord:1160000000000000002": (12, 12, 33 * 60.0)}     # a chat: every message
    # and each recall result carries its session's
    row = memories(chat, "refund webhook", "-k", "1")[0]
    assert (row["session_turns"], row["session_span_seconds"]) == (12, 33 * 60.0)
    table = chat("sessions", env={"COLUMNS": "120"})
    assert table.exit_code == 0, table.output
    head = next(line for line in table.stdout.splitlines() if "started" in line).split()
    row = next(line for line in table.stdout.splitlines() if line.lstrip().startswith("talk")).split()
    assert head[:4] == ["id", "started", "span", "title"] and row[:3] == ["talk", "2026-03-11", "2h05"]
    assert head[-4:] == ["turns", "msgs", "chunks", "pending"] and row[-4:-2] == ["2", "5"]


def test_mark_sets_and_resets_a_chunks_importance(chat, db_url):
    import psycopg

    table = chat("recall", "refund webhook", "-k", "1", env={"COLUMNS": "200"})
    chunk_id = int(re.search(r"chunk (\d+)", table.stdout).group(1))
    result = chat("mark", chunk_id, "--importance", "0.9")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"chunk {chunk_id}: importance 0.50 -> 0.90\n"
    top = memories(chat, "refund webhook", "--weights", "0,0,0,1", "-k", "1")[0]
    assert (top["chunk_id"], top["importance"]) == (chunk_id, pytest.approx(0.9))
    result = chat("mark", chunk_id, "--reset", "--json")
    assert json.loads(result.stdout) == {"chunk_id": chunk_id, "agent": "support", "previous": pytest.approx(0.9),
                                         "importance": 0.5, "set": False}
    with psycopg.connect(db_url) as conn:
        other = conn.execute("insert into recall.sessions (session_id, agent_id) values ('x', 'other') "
                             "returning session_id").fetchone()
        conn.execute("insert into recall.messages (session_id, role, content) values ('x', 'user', 'hi')")
        theirs = conn.execute("select chunk_id from recall.chunks where agent_id = 'other'").fetchone()[0]
        conn.commit()
    assert other
    result = chat("mark", theirs, "--importance", "0.1")
    assert result.exit_code == 1 and result.output == f"Error: agent 'support' has no chunk {theirs}\n"
