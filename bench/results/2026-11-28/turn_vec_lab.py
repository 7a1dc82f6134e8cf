"""Issue 19, an idea not tried before: each turn's own embedding as a signal of the turn fill.

hybrid_recall_v9's fill values a turn by its chunk's score + 0.2 x the share of the query's idf
its own words hold (the turn's own *words*); the turn's own *meaning* (its vector against the
query's) is not used: turns have no vectors, chunks do. This lab embeds every text message as
the fill shows it ("Speaker: text") with the same model, and scores scratch copies of the fill:

- ``lab_hr_vec`` (mu): value + mu x cosine(turn, query)
- ``lab_hr_vec`` (mu, rel): value + mu x (cosine(turn, query) - cosine(chunk, query)): the turn's
  meaning relative to its chunk's (a turn that carries its window's match up, its neighbour down)
- ``lab_hr_vec`` (mu, mult): value + mu x cosine(turn, query) x the chunk's score (the bonus in
  proportion to the chunk's own standing: a distractor chunk's turns gain less)

The copies are made from sql/released/v9.sql's text by substitution (the same fill otherwise).
Uses rank_lab.py's database (``python ../2026-11-26/rank_lab.py setup`` first), scored by
rank_lab's evaluate (the function fills the budget; evidence recall at equal token budgets).

    python turn_vec_lab.py embed                     # the turns' vectors (once)
    python turn_vec_lab.py eval hybrid_recall_v9 'lab_hr_vec:{"mu": 0.2}' ...
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from pgvector.psycopg import register_vector

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent / "2026-11-26"))
import rank_lab  # noqa: E402

from pyrecall import _db, _migrate  # noqa: E402
from pyrecall._embed import get_embedder  # noqa: E402
from pyrecall.bench import locomo  # noqa: E402


def lab_sql() -> str:
    """The scratch fill and hybrid_recall, from v9's released text."""
    v9 = (ROOT / "sql/released/v9.sql").read_text()
    start = v9.index("create or replace function recall._fill_v9(")
    end = v9.index("-- hybrid_recall_v9: see the COMMENT")
    fill = v9[start:end]
    fill = fill.replace("recall._fill_v9(", "recall.lab_fill_vec(")
    # spk: a bonus for a turn whose speaker the query names (any of the query's words, the
    # common ones too: a chat's speakers are in most of its chunks, so the text plan drops them)
    fill = fill.replace("  best_text text;\nbegin\n",
                        "  best_text text;\n  q_all tsquery;\nbegin\n"
                        "  q_all := (select to_tsquery('english', string_agg(quote_literal(l), ' | '))\n"
                        "            from unnest(tsvector_to_array(to_tsvector('english', coalesce(p_query_text, ''))))"
                        " as l);\n")
    fill = fill.replace("p_query_text text, p_weight float8)",
                        "p_query_text text, p_weight float8, p_qvec vector, p_mu float8, p_rel boolean,"
                        " p_mult boolean, p_spk float8)")
    # each turn's cosine to the query, and its chunk's
    fill = fill.replace(
        "select ch.chunk_id, ch.session_id, ch.kind, ch.n_tokens, ch.message_ids, ch.tsv, x.score, x.ord,",
        "select ch.chunk_id, ch.session_id, ch.kind, ch.n_tokens, ch.message_ids, ch.tsv, x.score, x.ord,"
        " 1 - (ch.embedding <=> p_qvec) as ccos,")
    fill = fill.replace("p.kind = 'window' as dated, p.has_words",
                        "p.kind = 'window' as dated, p.has_words, p.ccos")
    fill = fill.replace(
        "             sp.who,\n",
        "             sp.who, 1 - (lv.embedding <=> p_qvec) as tcos,\n")
    fill = fill.replace(
        "      where m.kind = 'text'\n",
        "      left join recall.lab_msg_vec lv on lv.message_id = m.message_id\n"
        "      where m.kind = 'text'\n")
    fill = fill.replace(
        "t.score + coalesce(p_weight * ((select sum(w.idf) from words w\n"
        "                                             where t.tsv @@ w.q or sp.tsv @@ w.q) / total_idf), 0) as value",
        "t.score + coalesce(p_weight * ((select sum(w.idf) from words w\n"
        "                                             where t.tsv @@ w.q or sp.tsv @@ w.q) / total_idf), 0)"
        " + coalesce(p_mu * (t.tcos - case when p_rel then t.ccos else 0 end)"
        " * case when p_mult then greatest(t.score, 0) else 1 end, 0)"
        " + case when p_spk > 0 and to_tsvector('english', t.who) @@ q_all then p_spk else 0 end as value")
    assert fill.count("lab_msg_vec") == 1 and fill.count("p_mu *") == 1 and fill.count("p_mult") == 2, \
        "v9's text moved"
    start = v9.index("create or replace function recall.hybrid_recall_v9(")
    end = v9.index("comment on function recall.hybrid_recall_v9")
    hr = v9[start:end]
    hr = hr.replace("recall.hybrid_recall_v9(", "recall.lab_hr_vec(")
    hr = hr.replace("turn_text_weight   float8      default 0.2)",
                    "turn_text_weight   float8      default 0.2,\n  mu float8 default 0.2,"
                    " rel boolean default false, mult boolean default false, spk float8 default 0)")
    hr = hr.replace("recall._fill_v9(hybrid_recall_v9.agent_id,", "recall.lab_fill_vec(lab_hr_vec.agent_id,")
    hr = hr.replace("token_budget, query_text, turn_text_weight) f",
                    "token_budget, query_text, turn_text_weight, query_embedding, mu, rel, mult, spk) f")
    assert "lab_fill_vec" in hr and "query_embedding, mu, rel, mult, spk" in hr, "v9's text moved"
    return fill + "\n" + hr


def embed() -> None:
    url = (rank_lab.LAB / "url").read_text()
    embedder = get_embedder("local/all-MiniLM-L6-v2")
    with locomo._connect(url) as conn:
        register_vector(conn)
        conn.execute(f"create table if not exists recall.lab_msg_vec "
                     f"(message_id bigint primary key, embedding vector({embedder.dim}))")
        rows = conn.execute(
            """select m.message_id,
                      coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                               nullif(btrim(m.metadata->>'author'), ''), initcap(m.role)) || ': ' || m.content
               from recall.messages m
               where m.kind = 'text'
                 and not exists (select from recall.lab_msg_vec v where v.message_id = m.message_id)
               order by m.message_id""").fetchall()
        print(f"{len(rows)} turns to embed", flush=True)
        for i in range(0, len(rows), 256):
            batch = rows[i:i + 256]
            vecs = embedder.embed([t for _, t in batch])
            with conn.cursor().copy("copy recall.lab_msg_vec (message_id, embedding) from stdin") as cp:
                for (mid, _), v in zip(batch, vecs, strict=True):
                    cp.write_row((mid, np.asarray(v, dtype=np.float32)))
            conn.commit()
            print(i + len(batch), flush=True)


def setup_one_agent() -> None:
    """rank_lab's setup with every conversation in one agent (`bench locomo --one-agent`), in
    /tmp/rank-lab-one (LAB=one selects it for eval), migrated to this tree (its turns embedded
    by the worker: recall.messages.embedding; lab_msg_vec is filled from it)."""
    rank_lab.LAB, rank_lab.PG = ONE, ONE / "pg"
    ONE.mkdir(exist_ok=True)
    url = _db.start(rank_lab.PG, settings={"shared_buffers": "512MB", "fsync": "off"})
    dataset = locomo.load_file(rank_lab.DATA, one_agent="locomo")
    embedder = get_embedder("local/all-MiniLM-L6-v2")
    with _db.connect(url) as conn:
        _migrate.migrate(conn, dim=embedder.dim)
    with locomo._connect(url) as conn:
        print(locomo.load(conn, dataset, embedder))
        conn.execute("create table recall.lab_msg_vec as select message_id, embedding from recall.messages "
                     "where embedding is not null")
        conn.execute("alter table recall.lab_msg_vec add primary key (message_id)")
        conn.commit()
    np.save(ONE / "questions.npy", np.stack(locomo.embed_questions(embedder, dataset.questions)))
    (ONE / "url").write_text(url)


ONE = Path("/tmp/rank-lab-one")
LOG = HERE / "turn_vec_lab.jsonl"   # where evaluate writes (turn_arm_lab.py sets its own)


def evaluate(specs: list[str]) -> None:
    """rank_lab's evaluate, its results written beside this file (turn_vec_lab.jsonl)."""
    one = os.environ.get("LAB") == "one"
    lab = ONE if one else rank_lab.LAB
    url = (lab / "url").read_text()
    dataset = locomo.load_file(rank_lab.DATA, one_agent="locomo" if one else None)
    emb = list(np.load(lab / "questions.npy"))
    budgets = rank_lab.BUDGETS
    with locomo._connect(url) as conn:
        conn.execute(lab_sql())
        conn.commit()
        for spec in specs:
            name, _, opts = spec.partition(":")
            options = json.loads(opts) if opts else {}
            locomo.FUNCTIONS.add(name)
            method = locomo.Method(spec, function=name, options=options)
            t = time.perf_counter()
            got = locomo.evaluate_budgets(conn, dataset.questions, emb, [method], budgets)[spec]
            secs = time.perf_counter() - t
            rec = [got[str(b)]["recall"] for b in budgets]
            tok = [got[str(b)]["tokens"] for b in budgets]
            mh = got["1000"]["by_category"]["1"]["recall"]
            print(f"{'one ' if one else ''}{spec:50s} " + " ".join(f"{r:.3f}" for r in rec)
                  + f"  mh@1000 {mh:.3f}  tok " + "/".join(f"{x:.0f}" for x in tok)
                  + f"  ({secs:.0f} s)", flush=True)
            with open(LOG, "a") as f:
                f.write(json.dumps({"spec": spec, "one_agent": one, "recall": rec, "tokens": tok, "multi_hop_1000": mh,
                                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "figures": got}) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "embed":
        embed()
    elif sys.argv[1] == "setup-one":
        setup_one_agent()
    elif sys.argv[1] == "sql":
        print(lab_sql())
    else:
        evaluate(sys.argv[2:])
