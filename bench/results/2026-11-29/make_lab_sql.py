"""lab_sql(): scratch copies of release 13's fill and auto_context (recall._lab_*) made from
sql/released/v13.sql, each with one change, so that each change is timed on its own
(mcp_fill_lab.py loads them; generated at each run, never stored)."""

from pathlib import Path

HERE = Path(__file__).resolve().parent
V13 = (HERE.parents[2] / "sql/released/v13.sql").read_text()


def function(name: str) -> str:
    start = V13.index(f"create or replace function recall.{name}(")
    return V13[start:V13.index("\n$$;\n", start) + 5]


FILL, AUTO = function("_fill_v13"), function("auto_context_v13")

OLD_PREV = """             case when lag(m.seq) over (partition by m.session_id order by m.seq) = m.seq - 1
                  then m.seq - 1
                  else (select max(m2.seq) from recall.messages m2
                        where m2.agent_id = p_agent_id and m2.session_id = m.session_id
                          and m2.seq < m.seq and m2.kind = 'text') end as prev_seq"""
assert OLD_PREV in FILL

VARIANTS = {
    # the text message before a turn matters only when it is a turn of the pool (only those can
    # be taken): the pool's previous turn of the session, when no text message lies between
    "a": """             recall._lab_prev(p_agent_id, m.session_id, m.seq,
                              lag(m.seq) over (partition by m.session_id order by m.seq)) as prev_seq""",
    # no lookup at all (a bound: wrong rows where tool calls part turns)
    "none": """             lag(m.seq) over (partition by m.session_id order by m.seq) as prev_seq""",
}

PREV_FN = """
create or replace function recall._lab_prev(p_agent_id text, p_session_id text, p_seq int, p_lag int)
returns int language sql stable set search_path to pg_catalog, public, pg_temp as $f$
  select case when p_lag is null then null
              when p_lag = p_seq - 1 then p_lag
              when not exists (select from recall.messages m2
                               where m2.agent_id = p_agent_id and m2.session_id = p_session_id
                                 and m2.seq > p_lag and m2.seq < p_seq and m2.kind = 'text')
              then p_lag end
$f$;
"""


def lab_sql() -> str:
    out = [PREV_FN]
    for tag, prev in VARIANTS.items():
        out.append(FILL.replace("recall._fill_v13(", f"recall._lab_fill_{tag}(").replace(OLD_PREV, prev))
        out.append(AUTO.replace("recall.auto_context_v13(", f"recall._lab_auto_context_{tag}(")
                   .replace("recall._fill_v13(", f"recall._lab_fill_{tag}(")
                   .replace("auto_context_v13.", f"_lab_auto_context_{tag}."))
    return "\n".join(out)
