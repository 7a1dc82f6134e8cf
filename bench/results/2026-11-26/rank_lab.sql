-- Scratch ranking functions for issue 19 (bench/results/2026-11-26/rank_lab.py loads this file
-- on its own bench database; never part of a migration).

-- _lab_cost: the tokens of the passages the messages make: runs of adjacent seq in a session,
-- each "[date]\n" + "Speaker: text" joined by blank lines, times p_ratio tokens a character
create or replace function recall._lab_cost(p_sess text[], p_seq int[], p_len int[],
                                            p_at timestamptz[], p_ratio float8)
returns int
language sql immutable
as $$
  select coalesce(sum(t.tokens), 0)::int
  from (
    select ceil((char_length(to_char(min(x.at) at time zone 'UTC', 'FMDD FMMonth YYYY')) + 3
                 + sum(x.len) + 2 * (count(*) - 1)) * p_ratio) as tokens
    from (select u.s, u.q, u.l as len, u.a as at,
                 u.q - row_number() over (partition by u.s order by u.q) as grp
          from unnest(p_sess, p_seq, p_len, p_at) as u(s, q, l, a)) x
    group by x.s, x.grp
  ) t
$$;

-- lab_msg: rank messages (turns) by the windows of v4's pool that hold them (best score +
-- gamma x second best) and their own text match (lam x BM25-like share of the query's idf);
-- fill the budget greedily with the best messages (and ctx neighbours on each side), adjacent
-- messages of a session forming one dated passage, each message paid once.
create or replace function recall.lab_msg(
  agent_id text, query_text text default null, query_embedding vector default null,
  k int default 10, as_of timestamptz default null, token_budget int default null,
  gamma float8 default 0.5, lam float8 default 0.0, ctx int default 0,
  vector_weight float8 default 0.5, text_weight float8 default 0.5)
returns table (session_id text, message_ids bigint[], n_tokens int, score float8)
language plpgsql volatile
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  plan record;
  ratio float8;
  c_id bigint[]; c_sess text[]; c_seq int[]; c_len int[]; c_at timestamptz[]; c_s float8[];
  h_id bigint[] := '{}'; h_sess text[] := '{}'; h_seq int[] := '{}'; h_len int[] := '{}';
  h_at timestamptz[] := '{}'; h_s float8[] := '{}';
  n_id bigint[]; n_sess text[]; n_seq int[]; n_len int[]; n_at timestamptz[];
  total int;
  used int := 0;
begin
  select * into plan from recall._text_plan_v3(lab_msg.agent_id, lab_msg.query_text);
  with
  ranked as materialized (
    select r.chunk_id, r.score, r.message_ids, r.n_tokens, char_length(r.content) as chars
    from recall.hybrid_recall_v4(agent_id => lab_msg.agent_id, query_text => lab_msg.query_text,
                                 query_embedding => lab_msg.query_embedding, k => lab_msg.k,
                                 as_of => lab_msg.as_of, vector_weight => lab_msg.vector_weight,
                                 text_weight => lab_msg.text_weight) r
  ),
  per_msg as (
    select u.id, r.score from ranked r cross join unnest(r.message_ids) as u(id)
  ),
  agg as (
    select p.id, max(p.score) as s1, (array_agg(p.score order by p.score desc))[2] as s2
    from per_msg p group by p.id
  ),
  msgs as (
    select m.message_id, m.session_id, m.seq, m.created_at,
           char_length(coalesce(m.metadata->>'speaker', initcap(m.role)) || ': ' || m.content) as len,
           a.s1 + lab_msg.gamma * coalesce(a.s2, 0)
           + case when lab_msg.lam > 0 and plan.lexemes is not null then
               lab_msg.lam * coalesce((select sum(w.idf) from unnest(plan.lexemes, plan.idfs) as w(lx, idf)
                                 where (select t.tsv from public.lab_msg_tsv t where t.message_id = m.message_id)
                                       @@ quote_literal(w.lx)::tsquery), 0)
                           / nullif((select sum(x) from unnest(plan.idfs) x), 0)
             else 0 end as s
    from agg a join recall.messages m on m.message_id = a.id
  )
  select (select sum(r.n_tokens)::float8 / nullif(sum(r.chars), 0) from ranked r),
         array_agg(x.message_id order by x.s desc, x.message_id), array_agg(x.session_id order by x.s desc, x.message_id),
         array_agg(x.seq order by x.s desc, x.message_id), array_agg(x.len order by x.s desc, x.message_id),
         array_agg(x.created_at order by x.s desc, x.message_id), array_agg(x.s order by x.s desc, x.message_id)
    into ratio, c_id, c_sess, c_seq, c_len, c_at, c_s
  from msgs x;
  if c_id is null or token_budget is null then
    return;
  end if;
  for i in 1 .. cardinality(c_id) loop
    if c_id[i] = any (h_id) then
      continue;
    end if;
    select array_agg(m.message_id), array_agg(m.session_id), array_agg(m.seq),
           array_agg(char_length(coalesce(m.metadata->>'speaker', initcap(m.role)) || ': ' || m.content)),
           array_agg(m.created_at)
      into n_id, n_sess, n_seq, n_len, n_at
    from recall.messages m
    where m.session_id = c_sess[i] and m.seq between c_seq[i] - ctx and c_seq[i] + ctx
      and m.kind = 'text' and not m.message_id = any (h_id);
    total := recall._lab_cost(h_sess || n_sess, h_seq || n_seq, h_len || n_len, h_at || n_at, ratio);
    if total <= token_budget then
      h_id := h_id || n_id; h_sess := h_sess || n_sess; h_seq := h_seq || n_seq;
      h_len := h_len || n_len; h_at := h_at || n_at;
      h_s := h_s || array_fill(c_s[i], array[cardinality(n_id)]);
      used := total;
    end if;
    exit when used >= token_budget - 5;
  end loop;
  return query
  select min(x.s), array_agg(x.id order by x.q),
         recall._lab_cost(array_agg(x.s), array_agg(x.q), array_agg(x.l), array_agg(x.a), ratio),
         max(x.sc)
  from (select u.*, u.q - row_number() over (partition by u.s order by u.q) as grp
        from unnest(h_id, h_sess, h_seq, h_len, h_at, h_s) as u(id, s, q, l, a, sc)) x
  group by x.s, x.grp
  order by max(x.sc) desc;
end
$$;

-- lab_mmr: v4's pool re-ordered greedily (MMR): the next chunk is the best by
-- score - mu x (its highest cosine to a chunk already chosen) - nu x (chosen chunks of its
-- session), over the first n_mmr of the pool (the rest keep their order); then v5's fill.
drop function if exists recall.lab_mmr(text, text, vector, int, timestamptz, int, float8, float8, int);
create or replace function recall.lab_mmr(
  agent_id text, query_text text default null, query_embedding vector default null,
  k int default 10, as_of timestamptz default null, token_budget int default null,
  mu float8 default 0.0, nu float8 default 0.0, n_mmr int default 40, adj float8 default 0.0)
returns table (session_id text, message_ids bigint[], n_tokens int)
language plpgsql volatile
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  p_id bigint[]; p_s float8[]; p_sess text[]; p_lo int[]; p_hi int[];
  touch float8[];        -- per candidate: 1 when it overlaps or touches a chosen chunk
  sim float8[];          -- n x n cosines, row-major
  n int;
  sel int[] := '{}';
  pen float8[];          -- per candidate: its highest cosine to a chosen one
  cnt float8[];          -- per candidate: chosen chunks of its session
  best int; bv float8; v float8;
begin
  create temp table if not exists lab_pool (i int, chunk_id bigint, score float8, session_id text, embedding vector, lo int, hi int) on commit drop;
  truncate lab_pool;
  insert into lab_pool
  select r.ordinality, r.chunk_id, r.score, r.session_id, c.embedding,
         (select min(m.seq) from recall.messages m where m.message_id = any (r.message_ids)),
         (select max(m.seq) from recall.messages m where m.message_id = any (r.message_ids))
  from recall.hybrid_recall_v4(agent_id => lab_mmr.agent_id, query_text => lab_mmr.query_text,
                               query_embedding => lab_mmr.query_embedding, k => lab_mmr.k,
                               as_of => lab_mmr.as_of) with ordinality as r
  join recall.chunks c on c.chunk_id = r.chunk_id;
  select array_agg(p.chunk_id order by p.i), array_agg(p.score order by p.i), array_agg(p.session_id order by p.i),
         array_agg(p.lo order by p.i), array_agg(p.hi order by p.i)
    into p_id, p_s, p_sess, p_lo, p_hi from lab_pool p;
  if p_id is null then
    return;
  end if;
  n := least(n_mmr, cardinality(p_id));
  select array_agg(coalesce(1 - (a.embedding <=> b.embedding), 0) order by a.i, b.i) into sim
  from lab_pool a cross join lab_pool b where a.i <= n and b.i <= n;
  pen := array_fill(0::float8, array[n]);
  cnt := array_fill(0::float8, array[n]);
  touch := array_fill(0::float8, array[n]);
  for step in 1 .. n loop
    best := null; bv := null;
    for i in 1 .. n loop
      if i = any (sel) then continue; end if;
      v := p_s[i] - mu * pen[i] - nu * cnt[i] + adj * touch[i];
      if bv is null or v > bv then bv := v; best := i; end if;
    end loop;
    sel := sel || best;
    for i in 1 .. n loop
      pen[i] := greatest(pen[i], sim[(best - 1) * n + i]);
      if p_sess[i] = p_sess[best] then cnt[i] := cnt[i] + 1; end if;
      if p_sess[i] = p_sess[best] and p_lo[i] <= p_hi[best] + 1 and p_lo[best] <= p_hi[i] + 1 then touch[i] := 1; end if;
    end loop;
  end loop;
  sel := sel || array(select i from generate_series(n + 1, cardinality(p_id)) i);
  return query
  select ch.session_id, coalesce(f.message_ids, ch.message_ids), f.n_tokens
  from recall._fill_v5(array(select p_id[i] from unnest(sel) with ordinality u(i, o) order by o),
                       token_budget) f
  join recall.chunks ch on ch.chunk_id = f.chunk_id
  order by f.pos;
end
$$;
