"""Pseudo-relevance feedback for issue 19 (2026-11-27, fourth session): rank_lab.py's harness
(bench/results/2026-11-26/rank_lab.py: its database, questions and scoring) with the scratch
functions of prf_lab.sql beside this file.

    python ../2026-11-26/rank_lab.py setup         # once: load and embed LoCoMo dev
    python prf_lab.py hybrid_recall_v7 'lab_prf:{"m": 3, "beta": 0.5}' ...

Each result is appended to prf_lab.jsonl beside this file.
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("rank_lab", HERE.parent / "2026-11-26" / "rank_lab.py")
rank_lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rank_lab)



# rank_lab reads HERE / "rank_lab.sql" and appends to HERE / "rank_lab.jsonl": point both here
rank_lab.HERE = HERE
(HERE / "rank_lab.sql").write_text((HERE / "prf_lab.sql").read_text())
try:
    rank_lab.evaluate(sys.argv[1:])
finally:
    (HERE / "rank_lab.sql").unlink()
    if (HERE / "rank_lab.jsonl").exists():
        with open(HERE / "prf_lab.jsonl", "a") as out:
            out.write((HERE / "rank_lab.jsonl").read_text())
        (HERE / "rank_lab.jsonl").unlink()
