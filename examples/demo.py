"""The main job of pyrecall, end to end (run by `make demo`, after `pyrecall db start` and
`pyrecall migrate`):

1. import the four sample Claude Code sessions of examples/sessions/ (an agent working on
   "acme-api": JWT auth, a Docker deploy that failed twice, a flaky test, a migration);
2. embed them with the local model (all-MiniLM-L6-v2, offline) and summarize each session;
3. print the context a new session would start with, for the task "deploy the API to staging";
4. answer "how did we fix the docker deployment?";
5. expand its best answer: what was said before and after it in its session.

Each step is the `pyrecall` command shown, run in this process so that the model is loaded
once. Running the demo again imports nothing twice.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from pyrecall.cli import main

HERE = Path(__file__).resolve().parent
SESSIONS = HERE / "sessions"
# where the sample sessions ran (their `cwd` and `gitBranch`): the scope of --auto
PROJECT, BRANCH = "/home/dev/acme-api", "feature/auth"


def run(*args: str) -> None:
    shown = " ".join(shlex.quote(a) for a in args)
    print(f"\n\033[1m$ pyrecall {shown}\033[0m" if sys.stdout.isatty() else f"\n$ pyrecall {shown}",
          flush=True)
    started = time.perf_counter()
    try:
        main.main(list(args), prog_name="pyrecall", standalone_mode=False)
    except SystemExit as exc:  # a command that sets its exit status
        if exc.code not in (0, None):
            raise
    sys.stdout.flush()
    print(f"({time.perf_counter() - started:.1f} s)", flush=True)


def _best_chunk(query: str) -> int | None:
    """The id of the first memory `pyrecall recall QUERY` gave (the model is loaded already)."""
    from pyrecall.client import Recall

    with Recall(migrate=False) as r:
        found = r.recall("claude-code", query, k=1).memories
    return found[0].chunk_id if found else None


def main_demo() -> None:
    rel = SESSIONS.relative_to(Path.cwd()) if SESSIONS.is_relative_to(Path.cwd()) else SESSIONS
    run("import", str(rel))
    run("embed")
    run("summarize")
    run("sessions")
    run("recall", "--auto", "--task-text", "deploy the API to staging", "--project", PROJECT,
        "--branch", BRANCH, "--token-budget", "2000", "--format", "context")
    run("recall", "how did we fix the docker deployment?", "-k", "3")
    best = _best_chunk("how did we fix the docker deployment?")
    if best is not None:
        run("expand", str(best), "--token-budget", "600")
    run("status")
    print("\nTry: pyrecall recall \"why did the alpine build fail?\" --by-session\n"
          "Yours: pyrecall import ~/.claude/projects && pyrecall embed  (see README.md for the "
          "Claude Code hook)")


if __name__ == "__main__":
    main_demo()
