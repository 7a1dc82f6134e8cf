-- 065-recall-turns: a development function, not a release (issue 19): hybrid_recall_turns is
-- hybrid_recall_v5 whose token budget is filled turn by turn instead of chunk by chunk. The
-- stable names do not call it; it goes into the next release (hybrid_recall_v7 or a v6 that
-- takes it; sql/README.md) once measured there. Measured in docs/BENCHMARKS.md section 1 and
-- bench/LOG.md ("ranking ideas").
--
-- Why: a chat window holds 4 turns; the question's evidence is usually one of them. v5 pays for
-- the whole window, so at 250 tokens the context holds one or two windows. Ranking by windows
-- is good (a window's context helps both arms), so the turns keep their window's score, and a
-- turn that itself holds the query's rarer words moves up: a context of the best turns of
-- several windows, each paid once, adjacent turns of a session read as one passage.

-- _fill_turns: the context at p_budget tokens from chunks ranked best first (p_ids, with their
-- scores p_scores), turn by turn (hybrid_recall_turns' COMMENT gives the contract). Rows as
-- recall._fill_v5's: one per passage or whole chunk, in the order of its best unit; merged =
-- the chunks whose turns the passage holds; falls back to recall._fill_v5 (which trims) when
-- not one unit fits.
create or replace function recall._fill_turns(p_ids bigint[], p_scores float8[], p_budget int,
                                              p_lexemes text[], p_idfs float8[], p_weight float8)
returns table (chunk_id bigint, pos int, content text, n_tokens int, message_ids bigint[],
               merged bigint[], trimmed_from int, cumulative_tokens bigint)
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  ratio float8;
  u record;
  rk int := 0;
  h_msg bigint[] := '{}'; h_sess text[] := '{}'; h_seq int[] := '{}'; h_len int[] := '{}';
  h_at timestamptz[] := '{}'; h_dated boolean[] := '{}'; h_rank int[] := '{}'; h_chunk bigint[] := '{}';
  o_chunk bigint[] := '{}'; o_rank int[] := '{}'; o_tokens int[] := '{}';
  used_turns int := 0;
  used_other int := 0;
  total int;
begin
  if p_budget is null or p_budget < 1 or p_ids is null then
    return;
  end if;
  -- tokens per character of the chat chunks ranked (what a passage's n_tokens is estimated by)
  select sum(c.n_tokens)::float8 / nullif(sum(char_length(c.content)), 0) into ratio
  from recall.chunks c
  where c.chunk_id = any (p_ids) and c.kind in ('window', 'turn_pair', 'message');
  for u in
    with
    -- the query's words and their idf (recall._text_plan_v3's): a unit's own match is the share
    -- of their idf that its words hold, in [0, 1]
    words as (
      select quote_literal(w.lexeme)::tsquery as q, w.idf
      from unnest(p_lexemes, p_idfs) as w(lexeme, idf)
    ),
    pool as (
      select ch.chunk_id, ch.session_id, ch.kind, ch.n_tokens, ch.message_ids, ch.tsv, x.score, x.ord,
             ch.kind in ('window', 'turn_pair', 'message') and ch.part = 0
             and cardinality(ch.message_ids) > 0
             and not exists (select from recall.chunks o
                             where o.session_id = ch.session_id and o.kind = ch.kind
                               and o.first_seq = ch.first_seq and o.part > 0) as chat
      from unnest(p_ids, p_scores) with ordinality as x(id, score, ord)
      join recall.chunks ch on ch.chunk_id = x.id
    ),
    -- every turn of a chat chunk once, with the best chunk that holds it
    turns as (
      select distinct on (m.message_id) m.message_id, m.session_id, m.seq, m.created_at,
             char_length(recall._speaker(m.role, m.metadata) || ': ' || m.content) as len,
             p.chunk_id, p.ord, p.score, p.kind = 'window' as dated,
             to_tsvector('english', recall._speaker(m.role, m.metadata) || ' ' || m.content) as tsv
      from pool p
      cross join unnest(p.message_ids) as mid(id)
      join recall.messages m on m.message_id = mid.id
      where p.chat
      order by m.message_id, p.ord
    ),
    -- the units: turns, valued by their chunk's score plus p_weight x their own match of the
    -- query's words; other chunks (code, memories, parts of long windows) whole, valued alike
    units as (
      select t.message_id, t.session_id, t.seq, t.created_at, t.len, t.dated, t.chunk_id, t.ord,
             null::text as kind, null::int as n_tokens, null::bigint[] as chunk_message_ids,
             t.score + p_weight * (select coalesce(sum(w.idf) filter (where t.tsv @@ w.q) / nullif(sum(w.idf), 0), 0)
                                   from words w) as value
      from turns t
      union all
      select null, p.session_id, null, null, null, null, p.chunk_id, p.ord, p.kind, p.n_tokens,
             p.message_ids,
             p.score + p_weight * (select coalesce(sum(w.idf) filter (where p.tsv @@ w.q) / nullif(sum(w.idf), 0), 0)
                                   from words w)
      from pool p
      where not p.chat
    )
    select * from units order by value desc, ord, message_id nulls first
  loop
    rk := rk + 1;
    if u.message_id is null then
      -- a code block whose message the context holds already adds nothing (as v5)
      if u.kind = 'code' and u.chunk_message_ids <@ h_msg then
        continue;
      end if;
      if used_turns + used_other + u.n_tokens <= p_budget then
        o_chunk := o_chunk || u.chunk_id; o_rank := o_rank || rk; o_tokens := o_tokens || u.n_tokens;
        used_other := used_other + u.n_tokens;
      end if;
    else
      -- the tokens of the passages the turns held and this one make: each run of adjacent seq
      -- of a session one passage, as recall._passage_text_v5 writes it (a date line when dated,
      -- "Speaker: text" joined by blank lines), its characters times ratio, rounded up
      select coalesce(sum(p.tokens), 0)::int into total
      from (
        select greatest(1, ceil((case when bool_or(x.dated)
                                      then coalesce(char_length(to_char(min(x.at) at time zone 'UTC',
                                                                        'FMDD FMMonth YYYY')) + 3, 0)
                                      else 0 end
                                 + sum(x.len) + 2 * (count(*) - 1)) * ratio)) as tokens
        from (select h.s, h.len, h.at, h.dated, h.q - row_number() over (partition by h.s order by h.q) as grp
              from unnest(h_sess || u.session_id, h_seq || u.seq, h_len || u.len,
                          h_at || u.created_at, h_dated || u.dated) as h(s, q, len, at, dated)) x
        group by x.s, x.grp
      ) p;
      if total + used_other <= p_budget then
        h_msg := h_msg || u.message_id; h_sess := h_sess || u.session_id; h_seq := h_seq || u.seq;
        h_len := h_len || u.len; h_at := h_at || u.created_at; h_dated := h_dated || u.dated;
        h_rank := h_rank || rk; h_chunk := h_chunk || u.chunk_id;
        used_turns := total;
      end if;
    end if;
    -- fewer than 5 tokens left: no turn fits ("Name: ok" and its blank line)
    exit when used_turns + used_other >= p_budget - 5;
  end loop;
  if cardinality(h_msg) = 0 and cardinality(o_chunk) = 0 then
    return query select * from recall._fill_v5(p_ids, p_budget);
    return;
  end if;
  return query
  with
  runs as (
    select x.s, x.grp, array_agg(x.id order by x.q) as ids, min(x.rk) as best,
           (array_agg(x.ch order by x.rk))[1] as chunk_id,
           array(select distinct unnest(array_agg(x.ch))) as chunks, bool_or(x.dated) as dated
    from (select h.*, h.q - row_number() over (partition by h.s order by h.q) as grp
          from unnest(h_msg, h_sess, h_seq, h_rank, h_chunk, h_dated) as h(id, s, q, rk, ch, dated)) x
    group by x.s, x.grp
  ),
  texts as (
    select r.chunk_id, r.best, r.ids, r.chunks, recall._passage_text_v5(r.ids, r.dated) as body
    from runs r
  ),
  rows_ as (
    select t.chunk_id, t.best, t.body, greatest(1, ceil(char_length(t.body) * ratio))::int as tokens,
           t.ids, t.chunks
    from texts t
    union all
    select o.c, o.rk, null, o.t, null, null
    from unnest(o_chunk, o_rank, o_tokens) as o(c, rk, t)
  )
  select r.chunk_id, (row_number() over (order by r.best))::int, r.body, r.tokens, r.ids, r.chunks,
         null::int, (sum(r.tokens) over (order by r.best rows unbounded preceding))::bigint
  from rows_ r
  order by r.best;
end
$$;

-- hybrid_recall_turns: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_turns(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  token_budget       int         default null,
  exclude_session_id text        default null,
  min_similarity     float8      default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  vector_weight      float8      default 0.5,
  text_weight        float8      default 0.5,
  recency_weight     float8      default 0.025,
  importance_weight  float8      default 0.05,
  half_life          interval    default '30 days',
  candidates         int         default 100,
  as_of              timestamptz default null,
  dedup_similarity   float8      default 0.95,
  turns_per_session  int         default null,
  turn_text_weight   float8      default 0.2)
returns setof recall.recall_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
declare
  plan record;
begin
  if token_budget is null then
    return query select * from recall.hybrid_recall_v5(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session);
    return;
  end if;
  if token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', token_budget using errcode = '22023';
  end if;
  if turn_text_weight is null or turn_text_weight < 0 or turn_text_weight = 'NaN'
     or turn_text_weight = 'Infinity' then
    raise exception 'turn_text_weight must be finite and >= 0, got %',
      coalesce(turn_text_weight::text, 'NULL') using errcode = '22023';
  end if;
  select * into plan from recall._text_plan_v3(agent_id, query_text);
  -- v4's first k rows (ranked, de-duplicated), then the budget filled turn by turn
  return query
  with
  ranked as materialized (
    select r.*
    from recall._hybrid_recall_v4(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null)
      with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_turns((select array_agg(x.chunk_id order by x.ordinality) from ranked x),
                            (select array_agg(x.score order by x.ordinality) from ranked x),
                            token_budget, plan.lexemes, plan.idfs, turn_text_weight) f
  )
  select r.chunk_id, r.session_id, r.kind, coalesce(f.content, r.content), r.created_at, r.score,
         r.similarity, r.text_rank, r.recency, r.importance, f.n_tokens, f.cumulative_tokens,
         r.metadata || jsonb_strip_nulls(jsonb_build_object('merged_chunk_ids', to_jsonb(f.merged),
                                                            'trimmed_from_tokens', f.trimmed_from)),
         coalesce(f.message_ids, r.message_ids), r.memory_id, r.agent_id, r.session_title, r.role,
         r.memory_kind
  from filled f
  join ranked r on r.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.hybrid_recall_turns is $c$
hybrid_recall_turns (development, issue 19; not a release): recall.hybrid_recall_v5 (see its
comment and v4's: candidates, scores, de-duplication, order, k, memories, filters, rows) whose
token budget is filled turn by turn. Without token_budget the rows are v5's (= v4's).
token_budget: v4's first k rows, and the turns (messages) of its chat chunks (window, turn pair
or message, not a part of a longer one), each turn once, valued by the score of the best of
those chunks holding it plus turn_text_weight x the share of the query's word weight (the text
arm's idf) that the turn's own words ("Speaker text", english) hold; other rows (code, memories,
parts of long windows) are units whole, valued by their score plus turn_text_weight x their
words' share. Units are taken best value first into at most token_budget tokens, a unit that
does not fit is skipped and the fill goes on; it stops when fewer than 5 tokens are left.
The turns taken form passages: adjacent turns (seq) of a session are one passage, written as v5
writes one ("Speaker: text" joined by blank lines, headed by the date of its first turn when
its turns came from chat windows); its n_tokens is its characters times the tokens per
character of the chat chunks ranked, rounded up. One row per passage or whole unit, in the
order of its best unit: the row of the chunk that gave the passage its best turn (its id,
score, components; two passages may come from one chunk), with the passage's content, n_tokens,
message_ids (seq order) and metadata.merged_chunk_ids (the chunks whose turns it holds). When
not one unit fits, v5's fill (which trims the best chunk to fit). cumulative_tokens runs over
the rows returned.
$c$;
