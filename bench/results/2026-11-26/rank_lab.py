"""Ranking ideas for issue 19, measured against hybrid_recall_v5 at equal token budgets.

One load of the LoCoMo dev split into an embedded PostgreSQL kept between runs, then each
scratch SQL function (bench/results/2026-11-26/rank_lab.sql, loaded before every run) asked
every question at every budget, scored exactly as `pyrecall bench locomo` scores (its
evaluate_budgets: the function fills the budget itself; evidence recall = the share of the
question's evidence turns among the turns of the rows' message_ids).

    python rank_lab.py setup                       # start the server, load, embed (once)
    python rank_lab.py eval hybrid_recall_v5 'lab_x:{"w": 0.3}' ...
    python rank_lab.py stop

Each result is appended to rank_lab.jsonl beside this file (name, options, figures).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from pyrecall import _db, _migrate
from pyrecall._embed import get_embedder
from pyrecall.bench import locomo

HERE = Path(__file__).resolve().parent
DATA = Path("/work/shared/data/locomo/locomo-dev.json")
LAB = Path("/tmp/rank-lab")
PG = LAB / "pg"
BUDGETS = (250, 500, 1000, 2000)


def setup() -> None:
    LAB.mkdir(exist_ok=True)
    url = _db.start(PG, settings={"shared_buffers": "512MB", "fsync": "off"})
    dataset = locomo.load_file(DATA)
    embedder = get_embedder("local/all-MiniLM-L6-v2")
    with _db.connect(url) as conn:
        _migrate.migrate(conn, dim=embedder.dim)
    with locomo._connect(url) as conn:
        print(locomo.load(conn, dataset, embedder))
    emb = locomo.embed_questions(embedder, dataset.questions)
    np.save(LAB / "questions.npy", np.stack(emb))
    (LAB / "url").write_text(url)


def evaluate(specs: list[str]) -> None:
    url = (LAB / "url").read_text()
    dataset = locomo.load_file(DATA)
    emb = list(np.load(LAB / "questions.npy"))
    with locomo._connect(url) as conn:
        conn.execute((HERE / "rank_lab.sql").read_text())
        for spec in specs:
            name, _, opts = spec.partition(":")
            options = json.loads(opts) if opts else {}
            locomo.FUNCTIONS.add(name)
            method = locomo.Method(spec, function=name, options=options)
            t = time.perf_counter()
            got = locomo.evaluate_budgets(conn, dataset.questions, emb, [method], BUDGETS)[spec]
            secs = time.perf_counter() - t
            rec = [got[str(b)]["recall"] for b in BUDGETS]
            tok = [got[str(b)]["tokens"] for b in BUDGETS]
            mh = got["1000"]["by_category"]["1"]["recall"]
            cats = {b: "/".join(f"{got[str(b)]['by_category'][c]['recall']:.3f}" for c in "1234")
                    for b in BUDGETS}
            print(f"{spec:60s} " + " ".join(f"{r:.3f}" for r in rec)
                  + f"  mh@1000 {mh:.3f}  tok " + "/".join(f"{x:.0f}" for x in tok)
                  + f"  ({secs:.0f} s)", flush=True)
            with open(HERE / "rank_lab.jsonl", "a") as f:
                f.write(json.dumps({"spec": spec, "recall": rec, "tokens": tok,
                                    "multi_hop_1000": mh, "by_category": cats,
                                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "figures": got}) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup()
    elif sys.argv[1] == "stop":
        _db.stop(PG)
    else:
        evaluate(sys.argv[2:])
