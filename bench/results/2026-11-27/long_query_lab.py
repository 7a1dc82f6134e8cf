"""Keyword recall's cost by the number of query words (found 2026-11-27, fifth session).

A query's text arm ranks the chunks holding its words; on an agent above text_pair_min_rows
(10,000) chunks it first looks up the chunks holding two different words: a tsquery of every
pair, n(n-1)/2 of them. A long query - the latest session's summary, which auto_context asks for
when it has no task (the SessionStart hook: `pyrecall recall --auto --hook`), or a pasted error
log - takes seconds. The same query cut to its K rarest lexemes (what a capped text plan would
keep) takes milliseconds: release v10's plan (recall._text_plan_v10) does that. Run on a `pyrecall bench latency --sizes 100000x1 --dsn URL --keep`
database (its sessions have summaries):

    .venv/bin/python bench/results/2026-11-27/long_query_lab.py "DSN" agent-00000
"""

import sys
import time

import psycopg


def timed(conn, sql, params, runs=3):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        conn.execute(sql, params).fetchall()
        out.append(time.perf_counter() - t)
    return " ".join(f"{x:.3f}" for x in out)


def main(dsn: str, agent: str) -> None:
    conn = psycopg.connect(dsn, autocommit=True)
    summary = conn.execute("select summary from recall.sessions where agent_id = %s and summary is not null "
                           "order by ended_at desc nulls last limit 1", [agent]).fetchone()[0]
    words = summary.replace("User:", "").replace("Assistant:", "").split()
    hybrid = "select * from recall.hybrid_recall_v9(agent_id => %s, query_text => %s, k => 10)"
    hybrid10 = hybrid.replace("_v9", "_v10")
    print(f"agent {agent}: {conn.execute('select count(*) from recall.chunks where agent_id = %s', [agent]).fetchone()[0]} chunks")
    for n in (4, 8, 16, 32, 64, len(words)):
        query = " ".join(words[:n])
        lexemes = conn.execute("select coalesce(array_length(lexemes, 1), 0) from recall._text_plan_v6(%s, %s)",
                               [agent, query]).fetchone()[0]
        print(f"first {n:3d} words ({lexemes:3d} lexemes kept by v6's plan): v9 {timed(conn, hybrid, [agent, query])} s, "
              f"v10 {timed(conn, hybrid10, [agent, query])} s")
    lexemes, idfs = conn.execute("select lexemes, idfs from recall._text_plan_v6(%s, %s)", [agent, summary]).fetchone()
    rarest = [w for w, _ in sorted(zip(lexemes, idfs, strict=True), key=lambda x: -x[1])]
    for k in (8, 16, 24, 32):
        print(f"the {k:2d} rarest lexemes (v9): {timed(conn, hybrid, [agent, ' '.join(rarest[:k])])} s")
    auto = "select * from recall.auto_context_v6(agent_id => %s, token_budget => 4000)"
    print(f"auto_context, no task (the latest session's summary as the related query): "
          f"v6 {timed(conn, auto, [agent], 2)} s, v10 {timed(conn, auto.replace('_v6', '_v10'), [agent], 2)} s")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
