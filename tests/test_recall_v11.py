"""Release v11: hybrid_recall_v11 and session_recall_v11 are v10's whose budget fill also values
each turn by its own vector (recall.messages.embedding, 013-message-vectors) and by its speaker:
its chunk's score s + turn_text_weight x its own words' idf share + turn_vector_weight x the
cosine of its vector to the query's (its chunk's while it has none) x max(s, 0) +
turn_speaker_weight when the query names its speaker. Weights 0: v10's rows. Without a budget:
v10's rows. (The stable names call v13: tests/test_recall_v13.py.) (SQL logic: the hash embedder's vectors, or vectors set
by hand.)"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from fake_embedder import FakeEmbedder
from pgvector.psycopg import register_vector
from test_recall_v5 import AGENT, CASES, call, chat_url  # noqa: F401 (chat_url: a fixture)
from test_recall_v7 import QUERIES, args_for, check_context

from pyrecall._worker import Worker

AS_OF = "2026-03-05"


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


def test_the_chat_has_its_turns_vectors(chat):
    """The fixture's worker run gave every text message its vector (else the tests below would
    compare v10 with itself)."""
    assert chat.execute("select count(*) filter (where embedding is null), count(*) "
                        "from recall.messages where kind = 'text'").fetchone() == (0, 28)


@pytest.mark.parametrize("case", CASES)
def test_weight_zero_or_no_budget_gives_v10s_rows(chat, case):
    differ = 0
    for q in QUERIES:
        for budget in (None, 40, 300):
            args = {**args_for(q, **case), "token_budget": budget, "as_of": AS_OF}
            for fn in ("hybrid_recall", "session_recall"):
                v10 = call(chat, f"{fn}_v10", **args)
                v11 = call(chat, f"{fn}_v11", **args)
                assert v10 and call(chat, f"{fn}_v11", **args, turn_vector_weight=0.0,
                                    turn_speaker_weight=0.0) == v10
                if budget is None:
                    assert v11 == v10
                differ += v11 != v10
    assert differ, "the turns' vectors changed no context: the tests compare nothing"


def test_contexts_keep_the_fills_contract(chat):
    """Whole turns, each once, passages of adjacent turns, within the budget, at any weight."""
    for q in QUERIES:
        for weight in (0.5, 3.0):
            for budget in (12, 40, 120, 300, 900):
                rows = call(chat, "hybrid_recall_v11", **args_for(q, k=30), token_budget=budget,
                            turn_vector_weight=weight, as_of=AS_OF)
                assert rows
                check_context(chat, rows, budget)


@pytest.mark.parametrize("weight", [-0.1, float("nan"), float("inf"), None])
def test_a_weight_that_is_not_finite_and_positive_is_refused(chat, weight):
    for fn in ("hybrid_recall_v11", "session_recall_v11"):
        for name in ("turn_vector_weight", "turn_speaker_weight"):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match=name):
                call(chat, fn, **args_for("docker image"), token_budget=100, **{name: weight})


DIM = 384


def unit(i: int, j: int | None = None) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    if j is not None:
        v[j] = 1.0
    return v / np.linalg.norm(v)


@pytest.fixture
def pair(conn):
    """One turn pair: the question (turn 1) and its answer (turn 2), each 10 tokens; the pair's
    vector between theirs; the query is the answer's direction."""
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s', 'a')")
    conn.execute("insert into recall.messages (session_id, role, content) values "
                 "('s', 'user', 'what did we pick'), ('s', 'assistant', 'the blue one')")
    Worker(conn, FakeEmbedder()).run()
    conn.execute("update recall.messages set n_tokens = 10, date_tokens = 3")
    conn.execute("update recall.chunks set embedding = %s", [unit(0, 1)])
    conn.execute("update recall.messages set embedding = %s where seq = 1", [unit(0)])   # (seq from 1)
    conn.execute("update recall.messages set embedding = %s where seq = 2", [unit(1)])
    assert conn.execute("select count(*) from recall.chunks").fetchone()[0] == 1
    return conn


def context(conn, **kw) -> list[str]:
    kw = {"query_embedding": unit(1), **kw}
    rows = call(conn, "hybrid_recall_v11", agent_id="a", token_budget=12, **kw)
    return [r["content"] for r in rows]


def test_of_a_chunks_turns_the_one_whose_own_vector_matches_the_query_is_taken(pair):
    # one turn fits: by the chunk's score alone (weight 0) the first, by its own vector the answer
    assert context(pair, turn_vector_weight=0.0) == ["User: what did we pick"]
    assert context(pair) == ["Assistant: the blue one"]
    # a turn without a vector is valued at its chunk's cosine (0.71): below a turn whose own is
    # the query's (1.0), above one whose own is orthogonal to it (0)
    pair.execute("update recall.messages set embedding = null where seq = 2")
    assert context(pair) == ["Assistant: the blue one"]
    pair.execute("update recall.messages set embedding = %s where seq = 1", [unit(1)])
    assert context(pair) == ["User: what did we pick"]
    # neither has one: both at the chunk's, the first taken (v10's order)
    pair.execute("update recall.messages set embedding = null")
    assert context(pair) == ["User: what did we pick"]
    # without a query vector the cosine adds nothing
    rows = call(pair, "hybrid_recall_v11", agent_id="a", query_text="blue", token_budget=12)
    assert [r["content"] for r in rows] == ["Assistant: the blue one"]   # (its own word)


def test_a_turn_whose_speaker_the_query_names_is_valued_higher(pair):
    """Both turns alike by chunk, words and vector; the query names the second's speaker (a word
    the text plan would drop in a chat where every chunk holds it), whatever its case or form."""
    pair.execute("update recall.messages set embedding = null")
    pair.execute("update recall.messages set metadata = '{\"speaker\": \"Melanie\"}' where seq = 2")
    assert context(pair, query_text="what did melanie's team pick") == ["Melanie: the blue one"]
    assert context(pair, query_text="what did melanie's team pick", turn_speaker_weight=0.0) == \
        ["User: what did we pick"]
    assert context(pair, query_text="what did the team pick") == ["User: what did we pick"]
    # an agent session's speakers are its roles: "the user" names the user's turns
    pair.execute("update recall.messages set metadata = '{}'")
    assert context(pair, query_text="what the assistant said") == ["Assistant: the blue one"]
