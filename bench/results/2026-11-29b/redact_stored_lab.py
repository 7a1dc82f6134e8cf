"""What recall.redact_stored costs on a large agent: 100,000 messages (LoCoMo dev turns and
1,500-character pieces of this environment's Python sources, alternating sessions of 100), 50 of
them holding a credential of a pattern added afterwards (the DBA's case: a new pattern, then
`pyrecall secrets redact`). Times the dry run (counting) and the rewrite (counting, then the
updates, the changed sessions chunked again by the triggers), in a throwaway embedded database.

    python redact_stored_lab.py ../shared/data/locomo/locomo-dev.json .venv/lib/python3.11/site-packages
"""

from __future__ import annotations

import sys
import time

import psycopg

from pyrecall.bench._scratch import scratch_database
from pyrecall.client import Recall

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from secrets_lab import locomo_turns, python_sources  # noqa: E402

N = 100_000
KEY = "acme_0123456789abcdef0123456789abcdef"


def main() -> None:
    turns, code = locomo_turns(sys.argv[1]), python_sources(sys.argv[2])
    pieces = [t[i:i + 1500] for t in code for i in range(0, len(t), 1500) if t[i:i + 1500].strip()]
    texts = []
    while len(texts) < N:
        texts += turns[:100] + pieces[len(texts) % 5000:len(texts) % 5000 + 100]
        turns = turns[100:] + turns[:100]
    texts = texts[:N]
    for i in range(0, N, N // 50):
        texts[i] = f"{texts[i]} (the acme key is {KEY})"
    with scratch_database() as url, Recall(url) as r, psycopg.connect(url, autocommit=True) as c:
        t0 = time.perf_counter()
        for s in range(0, N, 100):
            r.add_messages(f"s{s // 100}", [{"role": "user" if j % 2 == 0 else "assistant", "content": t}
                                            for j, t in enumerate(texts[s:s + 100])], agent_id="big")
        print(f"ingested {N:,} messages in {time.perf_counter() - t0:.0f} s "
              f"({c.execute('select pg_size_pretty(sum(length(content))::bigint) from recall.messages').fetchone()[0]} of text)")
        c.execute("insert into recall.secret_patterns (name, pattern, replacement, hints) values "
                  r"('acme_key', '\macme_[a-z0-9]{32}\M', '[REDACTED:acme_key]', '{acme_}')")
        c.execute("vacuum analyze recall.messages, recall.chunks")
        for label, dry in (("dry run", True), ("rewrite", False)):
            t0 = time.perf_counter()
            rows = c.execute("select pattern, messages, cardinality(session_ids) from recall.redact_stored('big', %s)",
                             [dry]).fetchall()
            print(f"redact_stored {label}: {time.perf_counter() - t0:.2f} s -> {rows}")
        left = c.execute("select count(*) from recall.messages where content like %s", [f"%{KEY}%"]).fetchone()[0]
        chunks = c.execute("select count(*) from recall.chunks where content like %s", [f"%{KEY}%"]).fetchone()[0]
        print(f"messages still holding the key: {left}; chunks: {chunks}")


if __name__ == "__main__":
    main()
