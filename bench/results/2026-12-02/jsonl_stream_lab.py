"""`pyrecall import` of a large generic JSONL file: resident memory and time, old code against new
(2026-12-02).

    .venv/bin/python bench/results/2026-12-02/jsonl_stream_lab.py make FILE [SESSIONS] [PER]
    .venv/bin/python bench/results/2026-12-02/jsonl_stream_lab.py run FILE TREE [TREE ...]

`make` writes SESSIONS sessions of PER messages (~60 words each, a fifth of the sessions
interleaved with the next, as a log of several agents' lines would be) in the export's line
format. `run` imports FILE into a new database of one embedded server once per TREE (a checkout
whose `pyrecall` package is used: this tree, or an older one in a git worktree), in the order
given, under `/usr/bin/time -v`, and prints wall time, peak RSS and the messages stored.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PY = str(ROOT / ".venv" / "bin" / "python")
WORDS = ("the pool connection timed out on staging because every request held it while the "
         "handler waited for redis so we raised max size to twenty and added a ten second "
         "acquire timeout then the export job streamed rows through a server side cursor").split()


def make(path: Path, sessions: int, per: int) -> None:
    rng = random.Random(3)
    with path.open("w", encoding="utf-8") as f:
        for s in range(0, sessions, 2):
            a, b = f"sess-{s:06d}", f"sess-{s + 1:06d}"
            mixed = s % 10 == 0                      # a fifth of the sessions interleaved by pairs
            order = ([a, b] * per) if mixed else ([a] * per + [b] * per)
            for i, sid in enumerate(order):
                f.write(json.dumps({
                    "session_id": sid, "role": "user" if i % 2 == 0 else "assistant",
                    "content": " ".join(rng.choice(WORDS) for _ in range(60)),
                    "created_at": f"2026-01-{1 + s % 28:02d}T10:{(i // 60) % 60:02d}:{i % 60:02d}Z",
                    "title": f"session {sid}", "project": "/home/dev/api"}) + "\n")


def run(path: Path, trees: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYRECALL_DATA_DIR": str(Path(tmp, "data"))}
        pyrecall = [PY, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); "
                              "from pyrecall.cli import run; run()"]
        subprocess.run([*pyrecall, str(ROOT), "db", "start"], env=env, check=True, capture_output=True)
        url = subprocess.run([*pyrecall, str(ROOT), "db", "url"], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
        try:
            for i, tree in enumerate(trees):
                db = f"lab_{i}"
                subprocess.run([*pyrecall, str(ROOT), "dba", "psql", "-c", f"create database {db}"],
                               env=env, capture_output=True)
                dsn = re.sub(r"/[^/?]+(\?|$)", f"/{db}\\1", url, count=1)
                denv = {**env, "PYRECALL_DSN": dsn}
                subprocess.run([*pyrecall, tree, "migrate"], env=denv, check=True, capture_output=True)
                p = subprocess.run(["/usr/bin/time", "-v", *pyrecall, tree, "import", str(path)],
                                   env=denv, capture_output=True, text=True)
                rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
                wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", p.stderr)
                stored = re.search(r"messages: (\d+) new", p.stdout)
                print(f"{tree}: rc {p.returncode}, wall {wall and wall.group(1)}, peak RSS "
                      f"{int(rss.group(1)) / 1024:.0f} MB, {stored and stored.group(1)} messages stored, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
                if p.returncode:
                    print(p.stdout[-2000:], p.stderr[-2000:])
        finally:
            subprocess.run([*pyrecall, str(ROOT), "db", "stop"], env=env, capture_output=True)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 10_000,
             int(sys.argv[4]) if len(sys.argv) > 4 else 20)
    else:
        run(Path(sys.argv[2]), sys.argv[3:])
