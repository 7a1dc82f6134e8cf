"""Issue 19, after release 11: the turn's own vector weighed more, where it is safe.

v11's fill values a turn by its chunk's score + 0.2 x its words' idf share + 0.4 x cos(turn, q)
x the chunk's score + 0.2 when the query names its speaker. Diagnosed on the dev split
(/tmp/diag, bench/LOG.md): the first 200 chunks hold 0.984 of the evidence, the fill at 1000
tokens 0.862; multi-hop 0.957 in the pool, 0.623 held: its evidence turns sit in chunks ranked
20-120, each plainly about the question on its own ("John: I'm passionate about improving
education ..." in the 72nd chunk). Scratch copies of v11's fill (made from the released text)
add, per turn:

- ``plain``: + plain x cos(turn, q), the turn's own meaning whatever its chunk's standing
- ``gate``: the plain term only for a turn whose speaker the query names, or every turn when
  it names none (one agent's loss of a plain bonus was turns of other people close in meaning)
- ``prev`` / ``next``: + w x cos(neighbour turn, q) x the chunk's score (the question before
  an answer, the answer after a question)
- ``sib``: - sib x (the turn's place among the turns of its best chunk, by value, - 1): the best
  turn of each chunk first, its neighbours after (a list question's evidence is one turn in each
  of many chunks; the fill took whole top chunks, three non-evidence turns each)
- ``cb`` (``cbrel``): each chunk's score + cb x its best turn's cosine (minus its own)
- ``rr`` / ``rc``: + rr x rc / (rc + the turn's rank by its own cosine among the candidates'
  turns - 1): a rank-based bonus (reciprocal rank, as RRF fuses), whatever the cosines' scale

    python turn_arm_lab.py eval hybrid_recall_v11 'lab_hr12:{"plain": 0.3, "gate": true}' ...
    LAB=one python turn_arm_lab.py eval ...      # every conversation in one agent
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))
import turn_vec_lab  # noqa: E402


def lab_sql() -> str:
    """The scratch fill and hybrid_recall, from v11's released text."""
    v11 = (ROOT / "sql/released/v11.sql").read_text()
    start = v11.index("create or replace function recall._fill_v11(")
    end = v11.index("-- hybrid_recall_v11: see the COMMENT")
    fill = v11[start:end].replace("recall._fill_v11(", "recall.lab_fill12(")
    fill = fill.replace("p_speaker_weight float8)",
                        "p_speaker_weight float8, p_plain float8, p_gate boolean, p_prev float8,"
                        " p_next float8, p_sib float8, p_cb float8, p_cbrel boolean, p_rr float8, p_rc float8)")
    # cb: each chunk of the pool valued also by its best turn's cosine (a chunk is as near the
    # question as its nearest turn: a window diluted by three other turns is not pushed down)
    old_pool = "select ch.chunk_id, ch.session_id, ch.kind, ch.n_tokens, ch.message_ids, ch.tsv, x.score, x.ord,"
    new_pool = ("select ch.chunk_id, ch.session_id, ch.kind, ch.n_tokens, ch.message_ids, ch.tsv,\n"
                "             x.score + case when p_cb > 0 then p_cb * greatest(coalesce((select max(recall._similarity(\n"
                "               m.embedding, p_query_embedding)) from recall.messages m where m.agent_id = p_agent_id\n"
                "               and m.message_id = any (ch.message_ids) and m.kind = 'text'), 0)\n"
                "               - case when p_cbrel then coalesce(recall._similarity(ch.embedding, p_query_embedding), 0)"
                " else 0 end, 0) else 0 end as score, x.ord,")
    assert fill.count(old_pool) == 1 and fill.count("      order by mid.id, p.ord\n") == 1, "v11's text moved"
    fill = fill.replace(old_pool, new_pool)
    fill = fill.replace("      order by mid.id, p.ord\n", "      order by mid.id, case when p_cb > 0 then -p.score end, p.ord\n")
    old_sel = ("    select x.*, min(x.cost) over () as min_cost\n"
               "    from units x\n")
    new_sel = ("    select x.*, min(x.cost) over () as min_cost\n"
               "    from (select y.message_id, y.session_id, y.seq, y.tok, y.dtok, y.dated, y.chunk_id, y.ord, y.kind,\n"
               "                 y.cost, y.chunk_message_ids,\n"
               "                 y.value - case when y.message_id is not null and p_sib > 0 then p_sib * (row_number()\n"
               "                   over (partition by y.chunk_id, y.message_id is null order by y.value desc) - 1)\n"
               "                   else 0 end as value\n"
               "          from units y) x\n")
    assert fill.count(old_sel) == 1, "v11's text moved"
    fill = fill.replace(old_sel, new_sel)
    old = "             + case when nm.who is not null then p_speaker_weight else 0 end as value\n"
    new = ("             + case when nm.who is not null then p_speaker_weight else 0 end\n"
           "             + case when not p_gate or nm.who is not null or not exists (select from named)\n"
           "                    then coalesce(p_plain * t.cos, 0) else 0 end\n"
           "             + case when p_rr > 0 then p_rr * p_rc / (p_rc + (select count(*) from turns t2"
           " where t2.cos > t.cos)) else 0 end\n"
           "             + case when p_prev > 0 then coalesce(p_prev * greatest(t.score, 0) * (select t2.cos from turns t2"
           " where t2.session_id = t.session_id and t2.seq = t.seq - 1), 0) else 0 end\n"
           "             + case when p_next > 0 then coalesce(p_next * greatest(t.score, 0) * (select t2.cos from turns t2"
           " where t2.session_id = t.session_id and t2.seq = t.seq + 1), 0) else 0 end as value\n")
    assert fill.count(old) == 1, "v11's text moved"
    fill = fill.replace(old, new)
    start = v11.index("create or replace function recall.hybrid_recall_v11(")
    end = v11.index("comment on function recall.hybrid_recall_v11")
    hr = v11[start:end].replace("recall.hybrid_recall_v11(", "recall.lab_hr12(")
    hr = hr.replace("turn_speaker_weight float8     default 0.2)",
                    "turn_speaker_weight float8     default 0.2,\n  plain float8 default 0, gate boolean default false,"
                    " prev float8 default 0, next float8 default 0, sib float8 default 0,"
                    " cb float8 default 0, cbrel boolean default false, rr float8 default 0, rc float8 default 10)")
    hr = hr.replace("recall._fill_v11(hybrid_recall_v11.agent_id,", "recall.lab_fill12(lab_hr12.agent_id,")
    hr = hr.replace("query_embedding, turn_vector_weight, turn_speaker_weight) f",
                    "query_embedding, turn_vector_weight, turn_speaker_weight, plain, gate, prev, next, sib, cb,"
                    " cbrel, rr, rc) f")
    hr = hr.replace("hybrid_recall_v11.", "lab_hr12.")
    assert "lab_fill12(lab_hr12" in hr and "cbrel, rr, rc) f" in hr, "v11's text moved"
    # every older signature of the scratch functions dropped (a call by name would be ambiguous)
    drop = ("do $d$ declare f regprocedure; begin for f in select p.oid::regprocedure from pg_proc p"
            " where p.proname in ('lab_fill12', 'lab_hr12') loop execute 'drop function ' || f; end loop;"
            " end $d$;\n")
    return drop + fill + "\n" + hr


if __name__ == "__main__":
    turn_vec_lab.lab_sql = lab_sql
    turn_vec_lab.LOG = HERE / "turn_arm_lab.jsonl"
    if sys.argv[1] == "sql":
        print(lab_sql())
    else:
        turn_vec_lab.evaluate(sys.argv[2:])
