"""Where release 13's auto_context spends its extra time on `pyrecall bench mcp`'s 100k agent.

One build of the bench's data (`pyrecall bench mcp --chunks 100000 --tool context --centres
model`: the same generator, seed, model centres and queries) into an embedded PostgreSQL kept
between runs, then auto_context timed as the MCP server calls it (bound: role recall_agent,
row-level security, one pooled connection) for each function named, alternating call by call.
Scratch variants of the fill (recall._lab_*) are made by make_lab_sql.py beside this file.

    python mcp_fill_lab.py setup                 # start the server, build (once, ~6 min)
    python mcp_fill_lab.py time auto_context_v12 auto_context_v13 _lab_auto_context_x ...
    python mcp_fill_lab.py mcp 2 auto_context_v12 auto_context_v13   # from an MCP client, alternating
    python mcp_fill_lab.py stop
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from pyrecall import _config, _db, _migrate
from pyrecall._embed import get_embedder
from pyrecall._mcp import Pool
from pyrecall.bench import latency, load, mcp_latency
from pyrecall.client import _auto_args, _call

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_lab_sql import lab_sql  # noqa: E402

LAB = Path("/tmp/mcp-lab")
PG = LAB / "pg"
CALLS, WARMUP = 100, 10


def _plan():
    synth = latency.Synth(7)
    mcp_latency.model_centres(synth)
    agents = latency.plan_agents(synth, latency.agent_sizes(100_000, 1))
    largest = max(agents, key=lambda a: a.size)
    topics = [int(largest.topics[i % len(largest.topics)]) for i in range(CALLS + WARMUP)]
    return synth, agents, largest, [synth.query_text(t) for t in topics]


def setup() -> None:
    LAB.mkdir(exist_ok=True)
    url = _db.start(PG)
    synth, agents, largest, queries = _plan()
    with _db.connect(url) as conn:
        _migrate.migrate(conn, dim=384)
    built = load.build(url, synth, agents, print, model=_config.embed_model())
    print(built)
    vectors = get_embedder(None).embed(queries)
    np.save(LAB / "queries.npy", np.asarray(vectors, dtype=np.float32))
    (LAB / "queries.json").write_text(json.dumps(queries))
    (LAB / "agent").write_text(largest.agent_id)
    (LAB / "url").write_text(url)


def time_functions(functions: list[str], budget: int = 4000) -> None:
    url = (LAB / "url").read_text()
    agent = (LAB / "agent").read_text()
    queries = json.loads((LAB / "queries.json").read_text())
    vectors = list(np.load(LAB / "queries.npy"))
    with _db.connect(url) as conn:
        conn.execute(lab_sql())
        conn.commit()
    as_of = datetime.now(UTC)     # one instant: rows comparable call to call
    pool = Pool(url, agent, size=1)
    ms = {f: [] for f in functions}
    rows = {f: [] for f in functions}
    try:
        for i, (q, v) in enumerate(zip(queries, vectors, strict=True)):
            args = _auto_args(agent, None, None, q, v, budget, None, False, as_of)
            for f in (functions if i % 2 == 0 else functions[::-1]):
                call = _call(f, args)
                with pool.connection() as c:
                    t = time.perf_counter()
                    out = c.execute(call, args).fetchall()
                    el = (time.perf_counter() - t) * 1000
                if i >= WARMUP:
                    ms[f].append(el)
                    rows[f].append(out)
    finally:
        pool.close()
    print(f"load {os.getloadavg()[0]:.1f}, budget {budget}, {len(queries) - WARMUP} calls each")
    base = functions[0]
    for f in functions:
        s = sorted(ms[f])
        same = sum(a == b for a, b in zip(rows[f], rows[base], strict=True))
        print(f"{f:36s} p50 {statistics.median(s):6.1f}  p95 {s[int(0.95 * len(s))]:6.1f}  "
              f"mean {statistics.fmean(s):6.1f} ms  rows {statistics.fmean(len(r) for r in rows[f]):.1f}  "
              f"same rows as {base}: {same}/{len(rows[f])}")


def mcp(functions: list[str], rounds: int) -> None:
    """The context tool timed from a connected MCP client (the bench's _drive: a server over
    stdio, from this tree), the stable name recall.auto_context pointed at each function in
    turn (080's definition with another callee), alternating, ``rounds`` times."""
    import asyncio
    import re

    url = (LAB / "url").read_text()
    agent = (LAB / "agent").read_text()
    queries = json.loads((LAB / "queries.json").read_text())
    stable = (HERE.parents[2] / "sql/idempotent/080-stable-names.sql").read_text()
    start = stable.index("create or replace function recall.auto_context(")
    stable = stable[start:stable.index("\n$$;\n", start) + 5]
    with _db.connect(url) as conn:
        conn.execute(lab_sql())
        conn.commit()
    for r in range(rounds):
        for f in (functions if r % 2 == 0 else functions[::-1]):
            with _db.connect(url) as conn:
                conn.execute(re.sub(r"recall\.auto_context_v\d+\(", f"recall.{f}(", stable))
                conn.commit()
            out = asyncio.run(mcp_latency._drive(url, agent, queries, warmup=WARMUP, k=10,
                                                 token_budget=None, tool="context"))
            c = out["context_ms"]
            print(f"round {r} {f:28s} p50 {c['p50']:6.1f} p95 {c['p95']:6.1f} p99 {c['p99']:6.1f} "
                  f"rows {out['rows_per_call']}  load {os.getloadavg()[0]:.1f}", flush=True)
    with _db.connect(url) as conn:
        conn.execute(stable)
        conn.commit()


def stop() -> None:
    _db.stop(PG)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cmd, *rest = sys.argv[1:]
    if cmd == "setup":
        setup()
    elif cmd == "time":
        budget = int(os.environ.get("BUDGET", "4000"))
        time_functions(rest, budget)
    elif cmd == "mcp":
        mcp(rest[1:], int(rest[0]))
    elif cmd == "stop":
        stop()
