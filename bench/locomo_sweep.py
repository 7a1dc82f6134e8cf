"""Parameter study on LoCoMo: one load, many ways of asking.

Loads the conversations once into a throwaway database (as `pyrecall bench locomo` does), and
in the same database, as separate agents, variants of the data that need an SQL change in the
product to be had for real (prototyped here through the data only):

  base     the product as it is (turn_pair chunks, see recall._rechunk)
  date     every turn's text starts with its session's date ("[8 May 2023] ...")
  single   one chunk per turn (every turn stored as a user message: no pairs)

then asks every question with every configuration of a grid of public-function arguments
(weights, candidates, half_life, session_recall's summary_weight / session_weight /
n_sessions), and a query-side prototype (`idf`: the query text without the words that occur
in more than half of the agent's chunks, e.g. the two speakers' names).

    .venv/bin/python bench/locomo_sweep.py ../shared/data/locomo/locomo-dev.json \
        --out bench/results/locomo_sweep.jsonl

Every row printed and written is one JSON object: variant, method name, options, scores.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

from pyrecall._embed import get_embedder
from pyrecall.bench import locomo
from pyrecall.bench._scratch import scratch_database
from pyrecall.bench.locomo import Method

NEUTRAL_HALF_LIFE = 365 * 100  # days: recency ~ 1 for every chunk, i.e. no recency effect


def variant_dataset(base: locomo.Dataset, variant: str) -> locomo.Dataset:
    """The same conversations and questions under agent ids '<id>#<variant>', rewritten."""
    if variant == "base":
        return base
    sessions = {}
    for agent, sess in base.sessions.items():
        new_agent = f"{agent}#{variant}"
        out = []
        for s in copy.deepcopy(sess):
            s.agent_id = new_agent
            s.session_id = s.session_id.replace(agent, new_agent, 1)
            for m in s.messages:
                if variant == "date" and s.started_at:
                    m.content = f"[{s.started_at:%-d %B %Y}] {m.content}"
                elif variant == "single":
                    m.role = "user"
            out.append(s)
        sessions[new_agent] = out
    questions = []
    for q in base.questions:
        new_agent = f"{q.agent_id}#{variant}"
        questions.append(replace(q, agent_id=new_agent, evidence_sessions={
            x.replace(q.agent_id, new_agent, 1) for x in q.evidence_sessions}))
    return locomo.Dataset(questions, base.n_unparseable, base.n_skipped, sessions)


def grid() -> list[Method]:
    """The configurations asked of every variant."""
    methods = list(locomo.DEFAULT_METHODS)
    hl = {"half_life": NEUTRAL_HALF_LIFE}
    # hybrid: text weight against vector weight 1, recency off (neutral half-life)
    for tw in (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0):
        methods.append(Method(f"hybrid v=1 t={tw} r=0", options={
            "vector_weight": 1.0, "text_weight": tw, "recency_weight": 0.0,
            "importance_weight": 0.0, **hl}))
    # recency, as_of = the end of the conversation
    for rw, days in itertools.product((0.02, 0.05, 0.1), (30, 180, 365)):
        methods.append(Method(f"hybrid v=1 t=0.5 r={rw} hl={days}d", options={
            "vector_weight": 1.0, "text_weight": 0.5, "recency_weight": rw,
            "importance_weight": 0.0, "half_life": days}))
    # candidates per arm
    for cand in (20, 50, 200, 400):
        methods.append(Method(f"hybrid v=1 t=0.5 r=0 cand={cand}", options={
            "vector_weight": 1.0, "text_weight": 0.5, "recency_weight": 0.0,
            "importance_weight": 0.0, "candidates": cand, **hl}))
    # session_recall: its pool is hybrid_recall's default weights; recency via half_life
    for sw, sesw, n in itertools.product((0.0, 0.5, 1.0), (0.0, 0.25, 0.5, 0.75), (5, 10)):
        methods.append(Method(f"session sw={sw} sesw={sesw} n={n} r=0", function="session_recall",
                              options={"summary_weight": sw, "session_weight": sesw,
                                       "n_sessions": n, **hl}))
    for sw, sesw in itertools.product((0.0, 0.5), (0.25, 0.5)):
        methods.append(Method(f"session sw={sw} sesw={sesw} n=5 hl=30d", function="session_recall",
                              options={"summary_weight": sw, "session_weight": sesw,
                                       "n_sessions": 5}))
    return methods


def idf_questions(conn, questions: list[locomo.Question], max_df: float) -> list[locomo.Question]:
    """Questions whose text drops words found in more than max_df of the agent's chunks."""
    common: dict[str, set[str]] = {}
    for agent in {q.agent_id for q in questions}:
        n = conn.execute("select count(*) from recall.chunks where agent_id = %s", [agent]).fetchone()[0]
        rows = conn.execute(
            "select word from ts_stat(format('select tsv from recall.chunks where agent_id = %%L', %s::text)) "
            "where ndoc > %s", [agent, max_df * n]).fetchall()
        common[agent] = {w for (w,) in rows}
    out = []
    for q in questions:
        words = re.findall(r"[\w'-]+", q.text)
        stems = conn.execute(
            "select array(select lexeme from unnest(to_tsvector('english', w))) "
            "from unnest(%s::text[]) with ordinality x(w, i) order by i", [words]).fetchall()
        kept = [w for w, (s,) in zip(words, stems, strict=True)
                if not (s and all(x in common[q.agent_id] for x in s))]
        out.append(replace(q, text=" ".join(kept) or q.text))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--out", default=None)
    ap.add_argument("--variants", default="base,date,single")
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--only", default=None, help="regex on method names to run")
    args = ap.parse_args(argv)

    embedder = get_embedder("local/all-MiniLM-L6-v2")
    base = locomo.load_file(args.data, limit_conversations=args.limit_conversations)
    variants = {v: variant_dataset(base, v) for v in args.variants.split(",")}
    methods = [m for m in grid() if not args.only or re.search(args.only, m.name)]
    out = open(args.out, "a") if args.out else None
    with scratch_database(args.dsn) as url, locomo._connect(url) as conn:
        t = time.perf_counter()
        for name, ds in variants.items():
            print(f"# loading {name}", file=sys.stderr, flush=True)
            print(f"# {name}: {locomo.load(conn, ds, embedder)}", file=sys.stderr, flush=True)
        print(f"# loaded in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        embeddings = locomo.embed_questions(embedder, base.questions)
        for name, ds in variants.items():
            asked = [(name, ds.questions, methods)]
            if name == "base":
                idf_q = idf_questions(conn, ds.questions, 0.5)
                asked.append(("base+idf", idf_q, [m for m in methods if m.text]))
            for label, questions, ms in asked:
                for m in ms:
                    r = locomo.evaluate(conn, questions, embeddings, [m])[m.name]
                    row = {"variant": label, "method": m.name, "function": m.function,
                           "options": m.options, **{k: v for k, v in r.items()}}
                    line = json.dumps(row)
                    print(f"{label:10} {m.name:40} r@10={r['recall@10']:.3f} "
                          f"sr@5={r['session_recall@5']:.3f} mrr={r['mrr']:.3f}", flush=True)
                    if out:
                        out.write(line + "\n")
                        out.flush()


if __name__ == "__main__":
    Path("bench/results").mkdir(parents=True, exist_ok=True)
    main()
