"""What appending one message to a long session costs, by session length and chunking.

A session of N messages (user/assistant text of Zipf-drawn words) is stored in one call; then
messages are appended one at a time, each its own ``Recall.add_messages`` call (one
transaction: the insert, its triggers' chunking, the commit), as a live chat sync or an agent
writing turn by turn does. Reported per append: wall p50/p95 and the server backend's CPU time
(``/proc/PID/schedstat``, see bench/ingest.py), for a chat session (``chunking: window``) and
a Claude Code-style session (turn pairs). As the baseline, measured in the same run on the same
session: deriving the whole session again (``recall._rechunk`` from its start, which writes
nothing when nothing changed): what every append to a chat session cost before chat sessions
were redone from their last windows.

    >>> run([200], appends=5)["sessions"][0]["window"]["append_ms_p50"]  # doctest: +SKIP
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .. import _db
from ..client import Recall
from ._scratch import scratch_database
from .ingest import server_cpu_ns

AGENT = "bench-append"


def _text(rng: np.random.Generator, vocab: np.ndarray, words: int) -> str:
    return " ".join(vocab[np.minimum(rng.zipf(1.3, size=words), len(vocab)) - 1])


def _pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)), 2)


def run(lengths: list[int], appends: int = 30, words: int = 30, *, dsn: str | None = None,
        seed: int = 0) -> dict[str, Any]:
    """For each session length: append ``appends`` messages one by one to a chat session and
    to a turn-pair session of that length; the report."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(5000)])
    out: list[dict[str, Any]] = []
    with scratch_database(dsn) as url, Recall(url) as r, _db.connect(url) as probe:
        backend = r.conn.info.backend_pid

        def timed(fn) -> tuple[float, float | None]:
            s0, t0 = server_cpu_ns(probe, backend), time.perf_counter()
            fn()
            wall, s1 = (time.perf_counter() - t0) * 1000, server_cpu_ns(probe, backend)
            return wall, None if s0 is None or s1 is None else (s1 - s0) / 1e6

        for n in lengths:
            row: dict[str, Any] = {"messages": n}
            for chunking in ("window", "turn_pair"):
                sid = f"{chunking}-{n}"
                r.add_session(sid, AGENT, metadata={"chunking": "window"} if chunking == "window" else {})
                r.add_messages(sid, [{"role": ("user", "assistant")[i % 2], "content": _text(rng, vocab, words)}
                                     for i in range(n)], agent_id=AGENT)
                walls, cpus, whole_walls, whole_cpus = [], [], [], []
                for i in range(appends):
                    msg = {"role": ("user", "assistant")[(n + i) % 2], "content": _text(rng, vocab, words)}
                    w, c = timed(lambda msg=msg, sid=sid: r.add_messages(sid, [msg], agent_id=AGENT))
                    walls.append(w)
                    cpus.append(c)
                    # the baseline: the whole session derived again (changes nothing now)

                    def whole(sid=sid) -> None:
                        with r.conn.transaction():
                            r.conn.execute("select recall._rechunk(array[%s], array[%s], array[-2147483648])",
                                           [AGENT, sid])
                    w, c = timed(whole)
                    whole_walls.append(w)
                    whole_cpus.append(c)
                row[chunking] = {
                    "append_ms_p50": _pct(walls, 50), "append_ms_p95": _pct(walls, 95),
                    "append_server_cpu_ms_p50": None if None in cpus else _pct(cpus, 50),
                    "whole_ms_p50": _pct(whole_walls, 50),
                    "whole_server_cpu_ms_p50": None if None in whole_cpus else _pct(whole_cpus, 50),
                }
                row[chunking]["chunks"] = r.conn.execute(
                    "select count(*) from recall.chunks where agent_id = %s and session_id = %s",
                    [AGENT, sid]).fetchone()[0]
                a, b = row[chunking]["append_server_cpu_ms_p50"], row[chunking]["whole_server_cpu_ms_p50"]
                row[chunking]["whole_over_append"] = round(b / a, 1) if a and b else None
            out.append(row)
    return {"appends": appends, "words": words, "sessions": out}
