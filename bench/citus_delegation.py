"""What delegation to a Citus worker costs per call, against a single node, and queries/s with
1, 2 and 4 clients (docs/SCALING.md records the figures).

The call measured is recall.memories(agent) — a delegated recall function that runs on Citus
as it is (hybrid_recall, session_recall and auto_context do not yet: docs/SCALING.md). Both
servers get the same data: AGENTS agents with MEMORIES memories each (recall.remember). The
load is pgbench (the embedded server's), each transaction one call for a random agent.

    PYTHONPATH=. python bench/citus_delegation.py --cluster "$(pyrecall dba citus up | tail -1)"

Without --single, a single embedded server is started for the comparison (and stopped).
One machine: the coordinator, both workers and pgbench share its cores; this shows the
overhead of the extra hop, not how a cluster scales.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg

from pyrecall import _citus, _db, _migrate


def fill(url: str, agents: int, memories: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        have = conn.execute("select count(distinct agent_id) from recall.chunks "
                            "where agent_id like 'bench-%%' and kind = 'memory'").fetchone()[0]
        if have >= agents:
            return
        for a in range(agents):
            for m in range(memories):
                conn.execute("select recall.remember(%s, %s)",
                             [f"bench-{a}", f"bench memory {m} of agent {a}: the deploy key rotates on friday"])


def pgbench(url: str, agents: int, clients: int, seconds: int) -> tuple[float, float]:
    """(transactions per second, mean latency in ms) of pgbench on url."""
    tree = _citus.installed_tree() or _citus.embedded_tree()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(f"\\set a random(0, {agents - 1})\n"
                "select * from recall.memories('bench-' || :a);\n")
        script = f.name
    try:
        out = subprocess.run([str(tree / "bin" / "pgbench"), "-n", "-f", script, "-c", str(clients),
                              "-j", str(clients), "-T", str(seconds), url],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(script)
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
    latency = float(re.search(r"latency average = ([\d.]+) ms", out).group(1))
    return tps, latency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", required=True, help="the Citus coordinator's URL (distributed)")
    parser.add_argument("--single", help="a single node's URL (default: a throwaway embedded server)")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--memories", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    tmp = None
    single = args.single
    if single is None:
        tmp = Path(tempfile.mkdtemp(prefix="pyrecall-citus-bench-"))
        os.chmod(tmp, 0o755)
        single = _db.start(tmp, settings={"shared_buffers": "256MB"})
        with psycopg.connect(single, autocommit=True) as conn:
            _migrate.migrate(conn)
    try:
        for url in (single, args.cluster):
            fill(url, args.agents, args.memories)
        with psycopg.connect(args.cluster, autocommit=True) as conn:   # (in a transaction block: no delegation)
            plan = "\n".join(r[0] for r in conn.execute("explain select * from recall.memories('bench-0')"))
        assert "Task Count: 1" in plan, f"recall.memories is not delegated on {args.cluster}:\n{plan}"
        print(f"recall.memories(agent), {args.agents} agents x {args.memories} memories, "
              f"pgbench -T {args.seconds}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        print("| clients | single node q/s | single node ms | Citus q/s | Citus ms | overhead ms |")
        print("|---|---|---|---|---|---|")
        for clients in (1, 2, 4):
            s_tps, s_ms = pgbench(single, args.agents, clients, args.seconds)
            c_tps, c_ms = pgbench(args.cluster, args.agents, clients, args.seconds)
            print(f"| {clients} | {s_tps:.0f} | {s_ms:.2f} | {c_tps:.0f} | {c_ms:.2f} | {c_ms - s_ms:+.2f} |")
    finally:
        if tmp is not None:
            _db.stop(tmp)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
