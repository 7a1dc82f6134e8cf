"""Release 13 on agent sessions: how often a context parts a question from its answer.

Claude Code sessions (`pyrecall.bench.sessions`: tasks, thinking, tool calls and results,
answers; plus the four sessions of examples/sessions) imported into a scratch database on the
server of $QA_DSN (else the embedded server of this checkout, `pyrecall db start`), embedded
with the local all-MiniLM-L6-v2 (chunks and turns). Queries: each generated session's task
(the user's first request) and a question about its error ("why did <error> happen?").
For each query and budget, release 11/12 against 13 (hybrid_recall, session_recall,
auto_context with the query as its task): contexts that show a question (the user turn of a
turn pair) without its answer, contexts that show a question and its answer in two rows, rows,
tokens, distinct text turns, and the time of a call (p50, alternating, the same connection).

    python bench/results/2026-11-28/qa_lab.py [n_sessions] > bench/results/2026-11-28/qa_lab.txt
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from pyrecall import _db
from pyrecall._embed import LocalEmbedder
from pyrecall.bench._scratch import scratch_database
from pyrecall.bench.sessions import write_sessions
from pyrecall.client import Recall

ROOT = Path(__file__).resolve().parents[3]
AGENT = "qa-lab"
BUDGETS = (250, 500, 1000, 2000)
PAIRS = [("hybrid_recall_v11", "hybrid_recall_v13"), ("session_recall_v11", "session_recall_v13"),
         ("auto_context_v12", "auto_context_v13")]


def call(conn, fn: str, query: str, vec, budget: int):
    if fn.startswith("auto_context"):
        sql = (f"select message_ids, n_tokens, section, kind, metadata from recall.{fn}(%s, task_text => %s, "
               "task_embedding => %s, token_budget => %s)")
    else:
        sql = (f"select message_ids, n_tokens, null, kind, metadata from recall.{fn}(%s, %s, %s, k => 60, "
               "token_budget => %s)")
    t = time.perf_counter()
    rows = conn.execute(sql, [AGENT, query, vec, budget]).fetchall()
    return rows, time.perf_counter() - t


def faults(rows, pairs, text_ids):
    """(a question without its answer, a question and its answer in two rows), turn rows only
    (passages and turn pairs; not a code block, a tool call or a trimmed unit)."""
    where = {}
    for i, (ids, _, _, kind, meta) in enumerate(rows):
        if "trimmed_from_tokens" in meta or not ("merged_chunk_ids" in meta or kind == "turn_pair"):
            continue
        for m in ids or ():
            where[m] = i
    all_ids = {m for ids, *_ in rows for m in ids or ()}
    alone = sum(q in where and a not in all_ids for q, a in pairs.items())
    apart = sum(q in where and a in where and where[q] != where[a] for q, a in pairs.items())
    turns = len(all_ids & text_ids)
    return alone, apart, turns


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    dsn = os.environ.get("QA_DSN") or _db.resolve_dsn(None)
    with scratch_database(dsn) as url:
        run(url, n)


def run(url: str, n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="qa-lab-"))
    write_sessions(tmp, n, seed=7)
    embedder = LocalEmbedder("local/all-MiniLM-L6-v2")
    with Recall(url, embedder=embedder) as r:
        r.import_([tmp, ROOT / "examples" / "sessions"], agent_id=AGENT)
        t = time.perf_counter()
        r.embed_pending(batch_size=64)
        print(f"# {n} generated sessions + examples/sessions, embedded in {time.perf_counter() - t:.0f} s")
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    pairs = dict(conn.execute(
        "select q.message_id, a.message_id from recall.chunks c "
        "join recall.messages q on q.agent_id = c.agent_id and q.message_id = any (c.message_ids) and q.role = 'user' "
        "join recall.messages a on a.agent_id = c.agent_id and a.message_id = any (c.message_ids) and a.role = 'assistant' "
        "where c.agent_id = %s and c.kind = 'turn_pair'", [AGENT]).fetchall())
    text_ids = {r[0] for r in conn.execute("select message_id from recall.messages where agent_id = %s "
                                           "and kind = 'text'", [AGENT])}
    tasks = [r[0] for r in conn.execute(
        "select distinct on (m.session_id) m.content from recall.messages m "
        "where m.agent_id = %s and m.role = 'user' and m.kind = 'text' order by m.session_id, m.seq", [AGENT])]
    errors = [r[0] for r in conn.execute(
        "select distinct substring(content from '([A-Za-z.]+(Error|Exception)[^\\n]{0,60})') from recall.messages "
        "where agent_id = %s and kind = 'tool_result' and content ~ '(Error|Exception)'", [AGENT]) if r[0]]
    queries = tasks + [f"why did {e} happen?" for e in errors[:40]]
    vecs = [np.asarray(v, dtype=np.float32) for v in embedder.embed(queries)]
    chunks, turns_n = conn.execute("select (select count(*) from recall.chunks where agent_id = %s), "
                                   "(select count(*) from recall.messages where agent_id = %s and kind = 'text')",
                                   [AGENT, AGENT]).fetchone()
    print(f"# {chunks} chunks, {turns_n} text turns, {len(pairs)} turn pairs; {len(queries)} queries "
          f"({len(tasks)} tasks, {len(queries) - len(tasks)} error questions); load {os.getloadavg()[0]:.1f}")
    print("# per pair of functions and budget: contexts with a question alone / with a question and its "
          "answer in two rows (of all contexts), rows, tokens, text turns (means), p50 ms")
    for old, new in PAIRS:
        for budget in BUDGETS:
            stats = {old: [], new: []}
            for q, v in zip(queries, vecs, strict=True):
                for fn in (old, new) if len(stats[old]) % 2 == 0 else (new, old):
                    rows, secs = call(conn, fn, q, v, budget)
                    if fn.startswith("auto_context"):
                        rows = [x for x in rows if x[2] == "related"]
                    alone, apart, turns = faults(rows, pairs, text_ids)
                    stats[fn].append((alone > 0, apart > 0, len(rows), sum(x[1] for x in rows), turns, secs))
            for fn in (old, new):
                s = stats[fn]
                col = list(zip(*s, strict=True))
                print(f"{fn:20} B={budget:5}  alone {sum(col[0]):3}/{len(s)}  apart {sum(col[1]):3}/{len(s)}  "
                      f"rows {statistics.mean(col[2]):5.1f}  tokens {statistics.mean(col[3]):6.0f}  "
                      f"turns {statistics.mean(col[4]):5.1f}  p50 {1000 * statistics.median(col[5]):6.1f} ms")
    conn.close()


if __name__ == "__main__":
    main()
