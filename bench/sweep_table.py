"""Markdown table of a LoCoMo sweep file (bench/results/2026-11-22/locomo_sweep.jsonl): one row per
(variant, method), the last measurement of each.

    .venv/bin/python bench/sweep_table.py bench/results/2026-11-22/locomo_sweep.jsonl [REGEX]
"""

import json
import re
import sys

KEYS = ["recall@5", "recall@10", "recall@20", "all@10", "session_recall@5", "mrr"]


def main() -> None:
    rows = {}
    for line in open(sys.argv[1]):
        r = json.loads(line)
        rows[(r["variant"], r["method"])] = r
    pattern = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
    print("| variant | method | " + " | ".join(KEYS) + " | r@10 cat 1/2/3/4 |")
    print("|---|---|" + "---:|" * (len(KEYS) + 1))
    for (variant, method), r in rows.items():
        if pattern and not pattern.search(f"{variant} {method}"):
            continue
        cats = "/".join(f"{r['by_category'][c]['recall@10']:.2f}" for c in sorted(r["by_category"]))
        print(f"| {variant} | {method} | " + " | ".join(f"{r[k]:.3f}" for k in KEYS) + f" | {cats} |")


if __name__ == "__main__":
    main()
