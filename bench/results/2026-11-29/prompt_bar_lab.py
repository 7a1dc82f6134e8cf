"""How high a bar the prompt hook (`pyrecall recall --hook`, a UserPromptSubmit hook) should set:
what a similarity bar keeps of the memories a prompt needs, and what it lets through for a
prompt the memory has nothing for. LoCoMo's development split, all-MiniLM-L6-v2, each
conversation its own agent, chats in windows (`pyrecall bench locomo`'s load).

For each bar b (hybrid_recall's min_similarity, k 10, the hook's 1,500-token budget):
  - related: each question asked of its own conversation: the share of questions answered with
    something (a context not empty), and the evidence recall of the context;
  - other conversation: each question asked of the next conversation's agent (people's lives
    too, but not these people's: the memory has nothing for it): the share given something;
  - unrelated: a coding agent's prompts (below) asked of every conversation: the share given
    something.

    python prompt_bar_lab.py ../shared/data/locomo/locomo-dev.json > prompt_bar_lab.txt
"""

from __future__ import annotations

import sys

import numpy as np

from pyrecall._embed import get_embedder
from pyrecall.bench._scratch import scratch_database
from pyrecall.bench.locomo import _connect, embed_questions, load, load_file

BARS = (None, 0.25, 0.30, 0.35, 0.40, 0.45)
BUDGET = 1500
CODING = ["add a retry with exponential backoff to the http client",
          "why does pytest hang on the database fixture?", "rename the user_id column to account_id",
          "write a dockerfile for the api service", "the CI job fails on the lint step, fix it",
          "add pagination to the orders endpoint", "how do I profile this slow SQL query?",
          "migrate the config from YAML to TOML", "bump the python version to 3.12 in CI",
          "set up a pre-commit hook with ruff", "the websocket reconnect test is flaky",
          "add an index on orders.created_at", "refactor the auth middleware into a class",
          "why is the docker image 2 GB?", "write unit tests for the invoice parser",
          "the cron job runs twice on the first of the month", "enable gzip in nginx",
          "split the monolith's billing module into a package", "upgrade sqlalchemy to 2.0",
          "add type hints to the utils module"]


def ask(conn, agent, text, vector, as_of, bar):
    return conn.execute(
        "select session_id, message_ids, similarity from recall.hybrid_recall("
        "agent_id => %s, query_text => %s, query_embedding => %s, k => 10, token_budget => %s, "
        "as_of => %s, min_similarity => %s::float8)", [agent, text, vector, BUDGET, as_of, bar]).fetchall()


def main(path: str) -> None:
    dataset = load_file(path)
    embedder = get_embedder("local/all-MiniLM-L6-v2")
    agents = sorted(dataset.sessions)
    coding = [np.asarray(v, dtype=np.float32) for v in embedder.embed(CODING)]
    with scratch_database(None, dim=embedder.dim) as url, _connect(url) as conn:
        print(load(conn, dataset, embedder))
        vectors = embed_questions(embedder, dataset.questions)
        ids = dict(conn.execute("select message_id, external_id from recall.messages").fetchall())
        last = {a: max(q.as_of for q in dataset.questions if q.agent_id == a) for a in agents}
        print(f"{len(dataset.questions)} questions, {len(agents)} conversations, budget {BUDGET}")
        print("bar    related: answered  evidence | other conversation: given | unrelated: given")
        for bar in BARS:
            answered = recall = other = 0
            for q, v in zip(dataset.questions, vectors, strict=True):
                rows = ask(conn, q.agent_id, q.text, v, q.as_of, bar)
                answered += bool(rows)
                turns = {ids[m] for _, mids, _ in rows for m in mids or () if m in ids}
                recall += len(turns & set(q.evidence)) / len(q.evidence)
                nxt = agents[(agents.index(q.agent_id) + 1) % len(agents)]
                other += bool(ask(conn, nxt, q.text, v, last[nxt], bar))
            unrelated = sum(bool(ask(conn, a, t, v, last[a], bar))
                            for a in agents for t, v in zip(CODING, coding, strict=True))
            n = len(dataset.questions)
            print(f"{'none' if bar is None else bar:<6} {answered / n:17.3f} {recall / n:9.4f} | "
                  f"{other / n:24.3f} | {unrelated / (len(agents) * len(CODING)):16.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
