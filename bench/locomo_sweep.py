"""Parameter study on LoCoMo: one load, many ways of asking.

Loads the conversations once into a throwaway database (as `pyrecall bench locomo` does), and
in the same database, as separate agents, variants of the data that need an SQL change in the
product to be had for real (prototyped here through the data only):

  base     the product as it is (turn_pair chunks, see recall._rechunk)
  date     every turn's text starts with its session's date ("[8 May 2023] ...")
  single   one chunk per turn (every turn stored as a user message: no pairs)
  date+winNsM  both (any "date" and one "single"/"winNsM" combine)
  winNsM   windows of N consecutive turns every M turns (chunks written directly into
           recall.chunks after a normal ingest: a prototype of window chunking)

then asks every question with every configuration of a grid of public-function arguments
(weights, candidates, half_life, session_recall's summary_weight / session_weight /
n_sessions), and a query-side prototype (`idf`: the query text without the words that occur
in more than half of the agent's chunks, e.g. the two speakers' names).

    .venv/bin/python bench/locomo_sweep.py ../shared/data/locomo/locomo-dev.json \
        --out bench/results/2026-11-22/locomo_sweep.jsonl

Every row printed and written is one JSON object: variant, method name, options, scores.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

from pyrecall._embed import get_embedder
from pyrecall._ingest import ingest
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
                if "date" in variant and s.started_at:
                    m.content = f"[{s.started_at:%-d %B %Y}] {m.content}"
                if "single" in variant or "win" in variant:
                    m.role = "user"
            out.append(s)
        sessions[new_agent] = out
    questions = []
    for q in base.questions:
        new_agent = f"{q.agent_id}#{variant}"
        questions.append(replace(q, agent_id=new_agent, evidence_sessions={
            x.replace(q.agent_id, new_agent, 1) for x in q.evidence_sessions}))
    return locomo.Dataset(questions, base.n_unparseable, base.n_skipped, sessions)


def window_chunks(conn, agent_id: str, size: int, stride: int) -> int:
    """Replace the agent's chunks by windows of `size` consecutive messages every `stride`."""
    conn.execute("delete from recall.chunks where agent_id = %s", [agent_id])
    return conn.execute("""
        insert into recall.chunks (agent_id, session_id, kind, first_seq, part, message_ids,
                                   content, n_tokens, created_at, importance, metadata)
        select w.agent_id, w.session_id, 'message', w.seq, 0, w.ids, w.body,
               recall._estimate_tokens(w.body), w.created_at, 0.5, '{}'
        from (select m.agent_id, m.session_id, m.seq, m.created_at,
                     array_agg(n.message_id order by n.seq) as ids,
                     string_agg(recall._speaker(n.role, n.metadata) || ': ' || n.content, E'\\n\\n'
                                order by n.seq) as body
              from recall.messages m
              join recall.messages n on n.session_id = m.session_id
                                     and n.seq between m.seq and m.seq + %s - 1
              where m.agent_id = %s and (m.seq - 1) %% %s = 0
              group by 1, 2, 3, 4) w""", [size, agent_id, stride]).rowcount


def grid(groups: str = "defaults,weights,recency,candidates,session") -> list[Method]:
    """The configurations to ask, by group (comma-separated names)."""
    hl = {"half_life": NEUTRAL_HALF_LIFE}
    g: dict[str, list[Method]] = {"defaults": list(locomo.DEFAULT_METHODS)}
    # hybrid: text weight against vector weight 1, recency off (neutral half-life)
    g["weights"] = [Method(f"hybrid v=1 t={tw} r=0", options={
        "vector_weight": 1.0, "text_weight": tw, "recency_weight": 0.0,
        "importance_weight": 0.0, **hl}) for tw in (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)]
    # recency, as_of = the end of the conversation
    g["recency"] = [Method(f"hybrid v=1 t=0.5 r={rw} hl={days}d", options={
        "vector_weight": 1.0, "text_weight": 0.5, "recency_weight": rw,
        "importance_weight": 0.0, "half_life": days})
        for rw, days in itertools.product((0.05, 0.1), (30, 365))]
    # candidates per arm
    g["candidates"] = [Method(f"hybrid v=1 t=0.5 r=0 cand={cand}", options={
        "vector_weight": 1.0, "text_weight": 0.5, "recency_weight": 0.0,
        "importance_weight": 0.0, "candidates": cand, **hl}) for cand in (20, 50, 200)]
    # session_recall: its pool is hybrid_recall's default weights; recency off via half_life
    g["session"] = [Method(f"session sw={sw} sesw={sesw} n={n} r=0", function="session_recall",
                           options={"summary_weight": sw, "session_weight": sesw,
                                    "n_sessions": n, **hl})
                    for sw, sesw, n in itertools.product((0.0, 0.5, 1.0), (0.25, 0.5), (5, 10))]
    g["key"] = [*g["defaults"], Method("hybrid v=1 t=1 r=0", options={
        "vector_weight": 1.0, "text_weight": 1.0, "recency_weight": 0.0, "importance_weight": 0.0,
        **hl}), Method("session sw=0.5 sesw=0.5 n=5 r=0", function="session_recall",
                       options={"summary_weight": 0.5, "session_weight": 0.5, "n_sessions": 5, **hl})]
    # the defaults this study recommends (importance is constant on LoCoMo: no signal)
    g["recommend"] = [
        Method("rec hybrid v=.5 t=.5 r=.05 i=.1 hl=30d", options={
            "vector_weight": 0.5, "text_weight": 0.5, "recency_weight": 0.05,
            "importance_weight": 0.1, "half_life": 30}),
        Method("rec hybrid v=.5 t=.5 r=.025 i=.1 hl=30d", options={
            "vector_weight": 0.5, "text_weight": 0.5, "recency_weight": 0.025,
            "importance_weight": 0.1, "half_life": 30}),
        Method("rec session sw=.25 sesw=.5 n=10 hl=30d", function="session_recall", options={
            "summary_weight": 0.25, "session_weight": 0.5, "n_sessions": 10, "half_life": 30}),
        Method("rec session sw=0 sesw=.5 n=10 r=0", function="session_recall", options={
            "summary_weight": 0.0, "session_weight": 0.5, "n_sessions": 10, **hl}),
    ]
    return [m for name in groups.split(",") for m in g[name]]


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
    ap.add_argument("--url", default=None, help="an already loaded database: skip loading")
    ap.add_argument("--no-idf", action="store_true")
    ap.add_argument("--idf-only", action="store_true", help="base: only the idf query variant")
    ap.add_argument("--grid", default="defaults,weights,recency,candidates,session")
    args = ap.parse_args(argv)

    embedder = get_embedder("local/all-MiniLM-L6-v2")
    base = locomo.load_file(args.data, limit_conversations=args.limit_conversations)
    variants = {v: variant_dataset(base, v) for v in args.variants.split(",")}
    methods = [m for m in grid(args.grid) if not args.only or re.search(args.only, m.name)]
    out = open(args.out, "a") if args.out else None
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(scratch_database(args.dsn))
        conn = stack.enter_context(locomo._connect(url))
        t = time.perf_counter()
        for name, ds in variants.items():
            have = conn.execute("select count(*) from recall.chunks where agent_id = any(%s)",
                                [list(ds.sessions)]).fetchone()[0]
            if have:
                continue
            print(f"# loading {name}", file=sys.stderr, flush=True)
            m = re.search(r"win(\d+)s(\d+)", name)
            if m:
                for agent_id, sessions in ds.sessions.items():
                    ingest(conn, sessions, agent_id=agent_id)
                    window_chunks(conn, agent_id, int(m.group(1)), int(m.group(2)))
            print(f"# {name}: {locomo.load(conn, ds, embedder)}", file=sys.stderr, flush=True)
        print(f"# loaded in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        embeddings = locomo.embed_questions(embedder, base.questions)
        for name, ds in variants.items():
            asked = [(name, ds.questions, methods)]
            if (name == "base" or args.idf_only) and not args.no_idf:
                idf_q = idf_questions(conn, ds.questions, 0.5)
                asked.append((f"{name}+idf", idf_q, [m for m in methods if m.text]))
                if args.idf_only:
                    asked = asked[1:]
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
