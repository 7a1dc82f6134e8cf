"""Queries of the int8 MiniLM against the fp32 model's stored vectors, on the LoCoMo dev split:
does the client's rule that both share one vector space (pyrecall._embed.vector_space) hold?

    PYTHONPATH=. HF_HUB_OFFLINE=1 python bench/results/2026-11-27/cross_model.py \
        [--data ../shared/data/locomo/locomo-dev.json] [--json out.json]

The dev split is loaded and embedded once by the default fp32 model (as `pyrecall bench
locomo` does); every question is embedded by the fp32 model and by the int8 one, and
hybrid_recall answers each at the budgets 250/500/1000/2000 with either query vector (the
same database, the same SQL): evidence recall per budget, as `bench locomo` scores it.
"""

from __future__ import annotations

import argparse
import json
import time

from pyrecall._embed import get_embedder
from pyrecall.bench import locomo
from pyrecall.bench._scratch import scratch_database


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data/locomo/locomo-dev.json")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    fp32 = get_embedder("local/all-MiniLM-L6-v2")
    int8 = get_embedder("local/all-MiniLM-L6-v2-int8")
    dataset = locomo.load_file(args.data, chunking="window")
    budgets = [250, 500, 1000, 2000]
    method = locomo.METHODS["hybrid_recall"]
    out = {"questions": len(dataset.questions), "budgets": budgets}
    t = time.perf_counter()
    with scratch_database(None, dim=fp32.dim) as url, locomo._connect(url) as conn:
        out["load"] = locomo.load(conn, dataset, fp32)
        for name, query_model in (("fp32 queries", fp32), ("int8 queries", int8)):
            embeddings = locomo.embed_questions(query_model, dataset.questions)
            scored = locomo.evaluate_budgets(conn, dataset.questions, embeddings, [method], budgets)
            out[name] = {b: {"recall": v["recall"], "tokens": v["tokens"],
                             "by_category": {c: r["recall"] for c, r in v["by_category"].items()}}
                         for b, v in scored["hybrid_recall"].items()}
            print(name, json.dumps(out[name]), flush=True)
    out["seconds"] = round(time.perf_counter() - t, 1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
