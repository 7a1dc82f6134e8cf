"""Release v12: auto_context_v12 is v10's with Recent and Related filled as hybrid_recall_v11
fills a token budget (recall._fill_v12: turn by turn, passages, skip and go on, the best unit
trimmed): Recent over v10's newest chunks by recency, Related over v10's related chunks leaving
out every message Pinned, Recent or Failures shows; a failure Recent shows in full is left out.
Pinned is v10's. (The stable name calls v13: tests/test_recall_v13.py.) (SQL logic: the hash embedder's vectors.)"""

from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector
from test_recall_v5 import AGENT, call, chat_url  # noqa: F401 (chat_url: a fixture)
from test_recall_v7 import QUERIES, args_for, check_context

AS_OF = "2026-03-05"
BUDGETS = (20, 60, 150, 300, 600, 1500)


@pytest.fixture
def chat(chat_url):  # noqa: F811 (test_recall_v5's chat, fixtures by name)
    with psycopg.connect(chat_url, autocommit=True) as conn:
        register_vector(conn)
        yield conn


def context(conn, fn="auto_context_v12", task=None, **kw):
    args = {"agent_id": AGENT, "as_of": AS_OF, **kw}
    if task:
        args |= {"task_text": task, "task_embedding": args_for(task)["query_embedding"]}
    return call(conn, fn, **args)


def section(rows, name):
    return [r for r in rows if r["section"] == name]


def test_pinned_is_v10s_and_recent_and_related_change(chat):
    changed = {"recent": 0, "related": 0}
    left_out = 0
    for task in (None, *QUERIES):
        for budget in BUDGETS:
            for shares in ({}, {"recent_share": 0.6, "failure_share": 0.3}):
                v10 = context(chat, "auto_context_v10", task, token_budget=budget, **shares)
                v12 = context(chat, task=task, token_budget=budget, **shares)
                assert section(v12, "pinned") == section(v10, "pinned")
                # a failure (or resolution) Recent shows in full is left out; the others are v10's
                recent = {m for r in section(v12, "recent") for m in r["message_ids"]}
                for r in section(v12, "failures"):
                    assert not (r["message_ids"] and set(r["message_ids"]) <= recent)
                kept = {r["chunk_id"] for r in section(v12, "failures")}
                left_out += sum(r["chunk_id"] not in kept and set(r["message_ids"]) <= recent
                                for r in section(v10, "failures"))
                # the sections in v10's order: Pinned, Recent, Related, Failures
                order = {"pinned": 0, "recent": 1, "related": 2, "failures": 3}
                assert [order[r["section"]] for r in v12] == sorted(order[r["section"]] for r in v12)
                for name in changed:
                    changed[name] += section(v12, name) != section(v10, name)
    assert all(changed.values()), f"v12 changed no {changed} section: the test compares nothing"
    assert left_out, "no failure of v10's was shown by v12's Recent: the rule is untested"


def test_without_recent_the_failures_are_v10s(chat):
    seen = 0
    for task in (None, *QUERIES):
        for budget in BUDGETS:
            args = {"token_budget": budget, "recent_share": 0.0, "failure_share": 0.5}
            v10 = section(context(chat, "auto_context_v10", task, **args), "failures")
            v12 = section(context(chat, task=task, **args), "failures")
            assert [(r["chunk_id"], r["content"], r["n_tokens"]) for r in v12] == \
                [(r["chunk_id"], r["content"], r["n_tokens"]) for r in v10]
            seen += len(v12)
    assert seen


def test_recent_is_the_newest_turns_each_once(chat):
    """Recent: the fill over v10's twenty newest chunks, newest first, with their recency as
    score: a chat's turns each once (its windows overlap), adjacent turns one passage, turn
    pairs whole, within recent_share of the budget; it holds the newest turns v10's Recent
    holds, and more."""
    smaller = pairs = 0
    for budget in (60, 150, 300, 600, 1500, 10000):   # (10000: down to the chat's windows)
        v10 = section(context(chat, "auto_context_v10", token_budget=budget, recent_share=0.6), "recent")
        rows = section(context(chat, token_budget=budget, recent_share=0.6), "recent")
        held = [m for r in rows for m in r["message_ids"]]
        assert len(held) == len(set(held)) and sum(r["n_tokens"] for r in rows) <= 0.6 * budget
        # a turn pair whole (a question with its answer), unless it alone is trimmed to fit
        for r in rows:
            if r["kind"] == "turn_pair" and "trimmed_from_tokens" not in r["metadata"]:
                pairs += 1
                assert "merged_chunk_ids" not in r["metadata"] and len(r["message_ids"]) == 2
                assert r["content"] == chat.execute("select content from recall.chunks where chunk_id = %s",
                                                    [r["chunk_id"]]).fetchone()[0]
        shown_by_v10 = [m for r in v10 for m in r["message_ids"]]
        assert held and len(set(held)) >= len(set(shown_by_v10))
        smaller += len(shown_by_v10) > len(set(shown_by_v10)) or not v10   # a turn twice, or nothing
        newest = chat.execute("select max(message_id) from recall.messages m join recall.chunks c "
                              "on m.message_id = any (c.message_ids) where c.chunk_id = any (%s)",
                              [[r["chunk_id"] for r in v10] or [0]]).fetchone()[0]
        assert newest is None or newest in held
    assert smaller, "v10's Recent never paid a turn twice nor showed nothing: the test compares nothing"
    assert pairs, "Recent showed no turn pair"


def test_within_the_budget_and_no_message_shown_twice(chat):
    """The rows' n_tokens within token_budget, every message once over all sections (a turn
    Recent shows is not in Related), Related's passages written and counted as hybrid_recall's."""
    excluded = 0
    for task in QUERIES:
        for budget in BUDGETS:
            for recent_share in (0.3, 0.6):
                rows = context(chat, task=task, token_budget=budget, recent_share=recent_share)
                assert rows
                check_context(chat, rows, budget)
                shown = {m for r in rows if r["section"] != "related" for m in r["message_ids"] or ()}
                alone = context(chat, task=task, token_budget=budget, recent_share=0.0, failure_share=0.0)
                related_alone = {m for r in alone for m in r["message_ids"] or ()}
                excluded += bool(shown & related_alone)
    assert excluded, "Recent never showed a turn Related would take: the exclusion is untested"


@pytest.mark.parametrize("budget", BUDGETS)
def test_related_alone_is_hybrid_recall_v11s_context(chat, budget):
    """Nothing pinned, no Recent or Failures share: Related is v11's fill of the same search
    (k = max(60, budget / 25)) at the same budget, row for row."""
    for task in QUERIES:
        rows = context(chat, task=task, token_budget=budget, recent_share=0.0, failure_share=0.0)
        v11 = call(chat, "hybrid_recall_v11", **args_for(task, k=max(60, budget // 25)),
                   token_budget=budget, as_of=AS_OF)
        assert rows and {r["section"] for r in rows} == {"related"}
        keys = ("chunk_id", "content", "n_tokens", "message_ids", "cumulative_tokens", "metadata")
        assert [tuple(r[k] for k in keys) for r in rows] == [tuple(r[k] for k in keys) for r in v11]


def test_what_v10_leaves_unused_is_filled_and_the_best_trimmed_when_nothing_fits(chat):
    task = "migration timeout orders table"
    # 12 tokens: no whole chunk fits, v10 shows nothing; v12 a turn (of a pair) that fits
    assert context(chat, "auto_context_v10", task, token_budget=12, recent_share=0.0) == []
    rows = context(chat, task=task, token_budget=12, recent_share=0.0)
    assert len(rows) == 1 and "trimmed_from_tokens" not in rows[0]["metadata"]
    assert rows[0]["content"] == "Assistant: add a lock timeout to the orders migration"
    assert 0 < rows[0]["n_tokens"] <= 12
    # 3 tokens: not one turn fits; the best one trimmed to fit
    rows = context(chat, task=task, token_budget=3, recent_share=0.0)
    assert len(rows) == 1 and rows[0]["metadata"]["trimmed_from_tokens"] > 3 >= rows[0]["n_tokens"] > 0
    # at every budget v12 uses at least as much of it as v10 (skip what does not fit, go on),
    # unless it holds every message v10's Related holds (v10 pays the turns two overlapping
    # windows share twice; v12 once)
    more = 0
    for budget in BUDGETS:
        for t in QUERIES:
            v10, v12 = (context(chat, fn, t, token_budget=budget) for fn in ("auto_context_v10", "auto_context_v12"))
            used = [sum(r["n_tokens"] for r in rows) for rows in (v10, v12)]
            held = {m for r in v12 for m in r["message_ids"] or ()}
            assert used[1] >= used[0] or {m for r in section(v10, "related") for m in r["message_ids"]} <= held
            more += used[1] > used[0]
    assert more


def test_a_pinned_memory_comes_first_and_its_budget_is_not_given_twice(chat):
    with chat.transaction(force_rollback=True):
        chat.execute("select recall.remember(%s, 'always run the orders migration with a lock timeout', "
                     "pinned => true, embedding => %s)",
                     [AGENT, args_for("orders migration lock timeout")["query_embedding"]])
        for budget in (60, 300):   # (as of now: the memory is valid from now on)
            v10 = context(chat, "auto_context_v10", "migration timeout orders table", token_budget=budget, as_of=None)
            rows = context(chat, task="migration timeout orders table", token_budget=budget, as_of=None)
            assert rows[0]["section"] == "pinned" and section(rows, "pinned") == section(v10, "pinned")
            check_context(chat, rows, budget)


@pytest.mark.parametrize("args, message", [
    ({"token_budget": -1}, "token_budget"),
    ({"recent_share": 0.8, "failure_share": 0.4}, "recent_share"),
    ({"all_projects": None}, "all_projects"),
])
def test_bad_arguments_are_v10s_errors(chat, args, message):
    for fn in ("auto_context_v10", "auto_context_v12"):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
            context(chat, fn, "docker image", **args)
