"""A large aider chat history imported, then synced after one more exchange (2026-12-02).

    .venv/bin/python bench/results/2026-12-02/aider_lab.py [SESSIONS] [EXCHANGES]

Writes a synthetic .aider.chat.history.md (SESSIONS sessions of EXCHANGES request/answer pairs,
each with aider's notes, an edit block and a /run now and then) into a temporary folder, then,
into a throwaway embedded database: `pyrecall import` of the folder (wall time, peak RSS of the
process), the same file appended with one exchange and `pyrecall sync` (what a session-start hook
runs), and `pyrecall sync` again with nothing new. Prints one line per step.
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PYRECALL = str(ROOT / ".venv" / "bin" / "pyrecall")
WORDS = ("pool connection timeout retry deploy staging docker compose health endpoint migration "
         "index query cursor export invoice token refresh cache redis worker queue test fixture "
         "settings logging metrics alpine slim wheel build cron backup").split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def exchange(rng: random.Random, i: int) -> str:
    out = ["\n#### " + sentence(rng, 14) + "  \n"]
    if i % 5 == 4:
        out.append("\n#### /run pytest -q  \n> Add 0.4k tokens of command output to the chat? (Y)es/(N)o [Yes]: y  \n"
                   "> Added 18 lines of output to the chat.  \n")
    body = " ".join(sentence(rng, 12) for _ in range(6))
    code = "\n".join(f"    x{j} = {rng.choice(WORDS)}({j})" for j in range(8))
    out.append(f"\n{body}\n\napp/{rng.choice(WORDS)}.py\n```python\n<<<<<<< SEARCH\n{code}\n=======\n{code}\n"
               f"    return x0\n>>>>>>> REPLACE\n```\n\n")
    out.append(f"> Tokens: 8.1k sent, 420 received. Cost: $0.03 message, $0.40 session.  \n"
               f"> Applied edit to app/{rng.choice(WORDS)}.py  \n> Commit {rng.randrange(16**7):07x} "
               f"{sentence(rng, 6)}  \n")
    return "".join(out)


def history(sessions: int, exchanges: int, rng: random.Random) -> str:
    parts = []
    for s in range(sessions):
        day = 1 + s // 24
        parts.append(f"\n# aider chat started at 2026-{1 + day // 28:02d}-{1 + day % 28:02d} "
                     f"{s % 24:02d}:00:00\n\n> Aider v0.86.1  \n> Main model: sonnet with diff edit format  \n"
                     "> Git repo: .git with 120 files  \n")
        parts.extend(exchange(rng, i) for i in range(exchanges))
    return "".join(parts)


def run(args: list[str], env: dict) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the child, its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    p = subprocess.run([PYRECALL, *args], env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024, (p.stdout + p.stderr).strip().replace("\n", " | ")


def main() -> None:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    exchanges = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp, "code", "api")
        repo.mkdir(parents=True)
        f = repo / ".aider.chat.history.md"
        f.write_text(history(sessions, exchanges, rng))
        env = {**os.environ, "PYRECALL_DATA_DIR": str(Path(tmp, "data"))}
        subprocess.run([PYRECALL, "db", "start"], env=env, capture_output=True, check=True)
        try:
            subprocess.run([PYRECALL, "migrate"], env=env, capture_output=True, check=True)
            print(f"file: {f.stat().st_size / 1e6:.1f} MB, {sessions} sessions x {exchanges} exchanges, "
                  f"load {os.getloadavg()[0]:.1f}")
            wall, rss, out = run(["import", str(Path(tmp, "code"))], env)
            print(f"import: {wall:.1f} s, peak RSS {rss:.0f} MB: {out}")
            with open(f, "a") as fh:
                fh.write(exchange(rng, 1))
            wall, _, out = run(["sync"], env)
            print(f"sync after one exchange: {wall:.2f} s: {out}")
            wall, _, out = run(["sync"], env)
            print(f"sync, nothing new: {wall:.2f} s: {out}")
        finally:
            subprocess.run([PYRECALL, "db", "stop"], env=env, capture_output=True)


if __name__ == "__main__":
    main()
