"""What the secret patterns (recall.secret_patterns, sql/idempotent/009-secrets.sql) catch in
text that holds no credentials, and what redaction costs.

Corpora (nothing here is a credential, so every match is a false positive, unless it is a test
fixture's or a documentation's example key, which the output shows for review):
  - LoCoMo's development split: every turn of every conversation (people's chat);
  - the Python sources installed in this environment (.venv site-packages, files under 256 kB):
    code, docstrings, tests, documentation, the text a coding agent's tool results hold.
For each corpus: texts, MB, the texts each pattern matches (with up to 3 matches shown, cut to
60 characters), and the server time of recall.redact over the whole corpus against a plain
length() over it (the same rows, one statement each). Then what it costs at ingest: the corpus
as messages (code cut in 1,500-character pieces, as a tool result's), Recall.add_messages 100 per
session, the server backend's CPU time per message with the patterns on and off, twice each
in turn (off = every row of recall.secret_patterns disabled), into fresh sessions each time.

    python secrets_lab.py ../shared/data/locomo/locomo-dev.json .venv/lib/python3.11/site-packages > secrets_lab.txt
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psycopg

from pyrecall.bench._scratch import scratch_database


def locomo_turns(path: str) -> list[str]:
    data = json.loads(Path(path).read_text())
    out = []
    for sample in data:
        conv = sample["conversation"]
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                out.extend(f"{t['speaker']}: {t['text']}" for t in turns)
    return out


def python_sources(root: str) -> list[str]:
    out = []
    for p in sorted(Path(root).rglob("*.py")):
        try:
            if p.stat().st_size < 256_000:
                out.append(p.read_text(errors="replace").replace("\x00", ""))
        except OSError:
            continue
    return out


def run(conn: psycopg.Connection, name: str, texts: list[str]) -> None:
    mb = sum(len(t.encode()) for t in texts) / 1e6
    conn.execute("create temp table corpus (id serial, body text) on commit preserve rows")
    with conn.cursor().copy("copy corpus (body) from stdin") as cp:
        for t in texts:
            cp.write_row((t,))
    conn.execute("analyze corpus")
    print(f"## {name}: {len(texts):,} texts, {mb:.1f} MB")
    rows = conn.execute(
        """select s.pattern, count(*), sum(s.matches)
           from corpus c cross join lateral recall.secrets_in(c.body) s
           group by s.pattern order by s.pattern""").fetchall()
    if not rows:
        print("no pattern matches any text")
    for pattern, n_texts, n_matches in rows:
        print(f"{pattern}: {n_texts} texts, {n_matches} matches")
        sample = conn.execute(
            """select m[1] from corpus c
               cross join lateral (select case when p.pattern like '(?i)%%' then '(?i)' else '' end
                                          || '(.{0,20}' || regexp_replace(p.pattern, '^[(][?]i[)]', '') || '.{0,10})' as re
                                   from recall.secret_patterns p where p.name = %s) q
               cross join lateral regexp_matches(c.body, q.re, 'g') m
               limit 3""", (pattern,)).fetchall()
        for (m,) in sample:
            print("   ", repr(m[:60]))
    for label, expr in (("length()", "length(body)"), ("recall.redact()", "length(recall.redact(body))")):
        best = None
        for _ in range(3):
            t0 = time.perf_counter()
            conn.execute(f"select sum({expr}) from corpus").fetchone()
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        print(f"{label}: {best:.2f} s ({best / len(texts) * 1e6:.1f} us/text, {mb / best:.1f} MB/s)")
    changed = conn.execute("select count(*) from corpus where recall.redact(body) <> body").fetchone()[0]
    print(f"texts changed by redact: {changed} of {len(texts):,}")
    conn.execute("drop table corpus")
    print()


def ingest_cost(url: str, name: str, texts: list[str]) -> None:
    from pyrecall import _db
    from pyrecall.bench.ingest import server_cpu_ns
    from pyrecall.client import Recall

    texts = texts[:20_000]
    per = 100
    out: dict[str, list[float]] = {"on": [], "off": []}
    with Recall(url) as r, _db.connect(url) as probe, psycopg.connect(url, autocommit=True) as owner:
        backend = r.conn.info.backend_pid
        for rnd in range(2):
            for state in ("on", "off"):
                owner.execute("update recall.secret_patterns set enabled = %s", [state == "on"])
                s0 = server_cpu_ns(probe, backend)
                for i in range(0, len(texts), per):
                    r.add_messages(f"{name}-{state}-{rnd}-{i}", [
                        {"role": "user" if j % 2 == 0 else "assistant", "content": t}
                        for j, t in enumerate(texts[i:i + per])], agent_id=f"lab-{state}-{rnd}")
                out[state].append((server_cpu_ns(probe, backend) - s0) / 1e3 / len(texts))
        owner.execute("update recall.secret_patterns set enabled = true")
    on, off = min(out["on"]), min(out["off"])
    print(f"ingest {name}, {len(texts):,} messages, server CPU us/message (best of 2): "
          f"patterns on {on:.0f}, off {off:.0f}, ratio {on / off:.2f} "
          f"(runs: on {', '.join(f'{x:.0f}' for x in out['on'])}; off {', '.join(f'{x:.0f}' for x in out['off'])})")


def main() -> None:
    locomo, site = sys.argv[1], sys.argv[2]
    with scratch_database() as url, psycopg.connect(url, autocommit=True) as conn:
        turns, code = locomo_turns(locomo), python_sources(site)
        run(conn, "LoCoMo dev turns", turns)
        run(conn, "Python sources (site-packages)", code)
        pieces = [t[i:i + 1500] for t in code for i in range(0, len(t), 1500) if t[i:i + 1500].strip()]
        ingest_cost(url, "chat", turns)
        ingest_cost(url, "code", pieces[::max(1, len(pieces) // 20_000)])


if __name__ == "__main__":
    main()
