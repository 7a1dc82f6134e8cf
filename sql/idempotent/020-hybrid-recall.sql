-- 020-hybrid-recall
-- recall.hybrid_recall: the best pieces of one agent's past for a query, fitted to a budget.
--
-- Re-applied at every migrate. recall.hybrid_recall_v1 is frozen from its release on (its
-- hash is pinned in sql/frozen.txt); a new behaviour is a new version (_v2), and the stable
-- name recall.hybrid_recall moves to it.

-- text_scan_max_rows: agents of at most this many chunks are text-searched on their B-tree,
-- larger ones through the GIN index (the _text_arm functions; their built-in default is 2000,
-- chosen when the GIN index held only tsv and a small agent paid for every agent's postings).
-- With the (agent_id, tsv) GIN index of 004 the index path pays off from ~1000 chunks: at 100k
-- and 1M chunks, agents of 1000-2000 chunks answer the same rows 9-15% faster at p50
-- (docs/BENCHMARKS.md, sixth session). Set only where that index exists and the setting is
-- absent: a value a DBA wrote stays.
insert into recall.config (key, value)
select 'text_scan_max_rows', '1000'
where exists (select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace
              where n.nspname = 'recall' and c.relname = 'chunks_agent_tsv_idx' and c.relkind = 'i')
on conflict (key) do nothing;

-- _similarity: cosine similarity of a stored chunk embedding and a query embedding; NULL when
-- either is missing or all zeros (cosine undefined: pgvector's <=> gives NaN, and a NaN score
-- would sort before every real one)
create or replace function recall._similarity(chunk_embedding vector, query_embedding vector)
returns float8
language sql immutable parallel safe
set search_path to pg_catalog, public, pg_temp
as $$
  select case when chunk_embedding is null or query_embedding is null then null
              when vector_norm(chunk_embedding) = 0 or vector_norm(query_embedding) = 0 then null
              else 1 - (chunk_embedding <=> query_embedding) end
$$;

-- _text_query: the tsquery of a query text. Plain questions match any of their words (OR:
-- an agent's question rarely repeats every word of the answer); a query that uses websearch
-- operators ("quoted phrase", -word) is taken strictly, as websearch_to_tsquery reads it.
create or replace function recall._text_query(query_text text)
returns tsquery
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select case
    when query_text is null or btrim(query_text) = '' then null
    when query_text ~ '"|(^|\s)-\w' then websearch_to_tsquery('english', query_text)
    else (select string_agg(quote_literal(lexeme), ' | ')::tsquery
          from unnest(to_tsvector('english', query_text)))
  end
$$;

-- _check_recall_args: every bad argument is a clear error (SQLSTATE 22023), never a wrong answer
create or replace function recall._check_recall_args(
  agent_id text, query_text text, query_embedding vector, k int, token_budget int,
  min_similarity float8, filter jsonb, since timestamptz, until timestamptz,
  weights float8[], half_life interval, candidates int)
returns void
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
declare
  dim int;
begin
  if agent_id is null or agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if query_embedding is null and (query_text is null or btrim(query_text) = '') then
    raise exception 'nothing to search for: give query_text, query_embedding or both'
      using errcode = '22023';
  end if;
  if query_embedding is not null then
    select value::int into dim from recall.config where key = 'embedding_dim';
    if vector_dims(query_embedding) <> dim then
      raise exception 'query_embedding has % dimensions; this database stores %',
        vector_dims(query_embedding), dim using errcode = '22023';
    end if;
    if vector_norm(query_embedding) = 0 then
      raise exception 'query_embedding is all zeros: cosine similarity is undefined'
        using errcode = '22023';
    end if;
  end if;
  if k is null or k < 1 or k > 1000 then
    raise exception 'k must be between 1 and 1000, got %', coalesce(k::text, 'NULL')
      using errcode = '22023';
  end if;
  if token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', token_budget using errcode = '22023';
  end if;
  if candidates is null or candidates < 1 or candidates > 10000 then
    raise exception 'candidates must be between 1 and 10000, got %', coalesce(candidates::text, 'NULL')
      using errcode = '22023';
  end if;
  if min_similarity < -1 or min_similarity > 1 or min_similarity = 'NaN' then
    raise exception 'min_similarity must be between -1 and 1, got %', min_similarity
      using errcode = '22023';
  end if;
  if filter is not null and jsonb_typeof(filter) <> 'object' then
    raise exception 'filter must be a JSON object, got a JSON %', jsonb_typeof(filter)
      using errcode = '22023';
  end if;
  if since > until then
    raise exception 'since (%) is after until (%)', since, until using errcode = '22023';
  end if;
  if exists (select from unnest(weights) w where w is null or w < 0 or w = 'NaN' or w = 'Infinity') then
    raise exception 'weights must be finite and >= 0, got %', weights using errcode = '22023';
  end if;
  if half_life is null or half_life <= interval '0' then
    raise exception 'half_life must be a positive interval, got %', coalesce(half_life::text, 'NULL')
      using errcode = '22023';
  end if;
end
$$;

-- _text_arm: the top n chunks of one agent by full-text rank (GIN index on tsv)
create or replace function recall._text_arm(
  p_agent_id text, p_query tsquery, p_n int, p_exclude_session_id text, p_filter jsonb,
  p_kinds text[], p_since timestamptz, p_until timestamptz)
returns table (chunk_id bigint, rank real)
language sql stable rows 100
set search_path to pg_catalog, pg_temp
as $$
  select c.chunk_id, ts_rank_cd(c.tsv, p_query, 1) as rank
  from recall.chunks c
  where p_query is not null
    and c.tsv @@ p_query
    and c.agent_id = p_agent_id
    and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
    and (p_filter is null or c.metadata @> p_filter)
    and (p_kinds is null or c.kind = any (p_kinds))
    and (p_since is null or c.created_at >= p_since)
    and (p_until is null or c.created_at < p_until)
  order by 2 desc, c.chunk_id
  limit p_n
$$;

-- _finish: the last step of every recall function. Given candidates and their scores:
-- order them (score desc, then newer first, then higher chunk_id), drop near-duplicates among
-- the best max(4k, 40) (a chunk goes when a better one has the same text, or an embedding
-- within dedup_similarity cosine; an all-zero embedding is near nothing: its cosine is
-- undefined, and NaN >= x is true in PostgreSQL), keep at most k, and stop at the first row
-- whose running token total (cumulative_tokens) would exceed token_budget.
create or replace function recall._finish(
  p_ids bigint[], p_scores double precision[], p_k int, p_budget int, p_dedup double precision)
returns table (chunk_id bigint, score double precision, pos bigint, cumulative_tokens bigint)
language sql stable
set search_path to pg_catalog, public, pg_temp
as $$
  with
  -- the candidates with what the step needs to know of them
  cand as (
    select u.chunk_id, u.score, c.created_at, c.content, c.embedding, c.n_tokens
    from unnest(p_ids, p_scores) as u(chunk_id, score)
    join recall.chunks c on c.chunk_id = u.chunk_id
  ),
  -- the best max(4k, 40), in the final order
  top as (
    select x.*, row_number() over (order by x.score desc, x.created_at desc, x.chunk_id desc) as pos
    from cand x
    order by pos
    limit greatest(4 * p_k, 40)
  ),
  -- with each embedding's norm, computed once: zero or NULL means no cosine (see _similarity)
  normed as (
    select t.*, vector_norm(t.embedding) as norm
    from top t
  ),
  -- a candidate goes when a better one has the same text or is within p_dedup cosine. The
  -- cosine is recall._similarity written out: up to ~80,000 pairs (k = 1000), and a call of a
  -- function with a pinned search_path is never inlined (~3 us each).
  distinct_ as (
    select t.*
    from normed t
    where not exists (
      select from normed b
      where b.pos < t.pos
        and (b.content = t.content
             or (p_dedup <= 1 and b.norm > 0 and t.norm > 0
                 and 1 - (b.embedding <=> t.embedding) >= p_dedup)))
  ),
  -- running token total in the final order
  budgeted as (
    select d.chunk_id, d.score, d.pos,
           sum(d.n_tokens) over (order by d.pos rows unbounded preceding) as cumulative_tokens,
           row_number() over (order by d.pos) as rank
    from distinct_ d
  )
  select b.chunk_id, b.score, b.pos, b.cumulative_tokens
  from budgeted b
  where b.rank <= p_k and (p_budget is null or b.cumulative_tokens <= p_budget)
  order by b.pos
$$;

-- hybrid_recall_v1: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v1(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  token_budget       int         default null,
  exclude_session_id text        default null,
  min_similarity     float8       default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  vector_weight      float8       default 0.5,
  text_weight        float8       default 0.5,
  recency_weight     float8       default 0.025,
  importance_weight  float8       default 0.05,
  half_life          interval    default '30 days',
  candidates         int         default 100,
  as_of              timestamptz default null,
  dedup_similarity   float8       default 0.95)
returns table (
  chunk_id          bigint,
  session_id        text,
  kind              text,
  content           text,
  created_at        timestamptz,
  score             double precision,
  similarity        double precision,
  text_rank         double precision,
  recency           double precision,
  importance        double precision,
  n_tokens          int,
  cumulative_tokens bigint,
  metadata          jsonb,
  message_ids       bigint[])
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  tsq tsquery := recall._text_query(hybrid_recall_v1.query_text);
  now_ts timestamptz := coalesce(hybrid_recall_v1.as_of, now());
begin
  perform recall._check_recall_args(
    hybrid_recall_v1.agent_id, hybrid_recall_v1.query_text, hybrid_recall_v1.query_embedding,
    hybrid_recall_v1.k, hybrid_recall_v1.token_budget, hybrid_recall_v1.min_similarity,
    hybrid_recall_v1.filter, hybrid_recall_v1.since, hybrid_recall_v1.until,
    array[hybrid_recall_v1.vector_weight, hybrid_recall_v1.text_weight,
          hybrid_recall_v1.recency_weight, hybrid_recall_v1.importance_weight],
    hybrid_recall_v1.half_life, hybrid_recall_v1.candidates);

  return query
  with
  -- candidates from the vector index: nearest by cosine distance
  by_vector as (
    select v.chunk_id, v.distance
    from recall._vector_arm(hybrid_recall_v1.agent_id, hybrid_recall_v1.query_embedding,
                            hybrid_recall_v1.candidates, hybrid_recall_v1.exclude_session_id,
                            hybrid_recall_v1.filter, hybrid_recall_v1.kinds,
                            hybrid_recall_v1.since, hybrid_recall_v1.until) v
    where hybrid_recall_v1.query_embedding is not null
  ),
  -- candidates from the full-text index: best ts_rank_cd
  by_text as (
    select t.chunk_id, t.rank
    from recall._text_arm(hybrid_recall_v1.agent_id, tsq, hybrid_recall_v1.candidates,
                          hybrid_recall_v1.exclude_session_id, hybrid_recall_v1.filter,
                          hybrid_recall_v1.kinds, hybrid_recall_v1.since, hybrid_recall_v1.until) t
  ),
  -- each candidate once, with its four components
  components as (
    select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, c.n_tokens, c.metadata,
           c.message_ids,
           case when c.embedding is not null and hybrid_recall_v1.query_embedding is not null
                then 1 - (c.embedding <=> hybrid_recall_v1.query_embedding) end as similarity,
           -- text_rank = r / (r + 0.1), r = ts_rank_cd(tsv, query, 1): 0 without a match, -> 1
           case when tsq is not null and c.tsv @@ tsq
                then ts_rank_cd(c.tsv, tsq, 1) / (ts_rank_cd(c.tsv, tsq, 1) + 0.1)
                else 0 end::double precision as text_rank,
           power(0.5::double precision,
                 (greatest(extract(epoch from now_ts - c.created_at), 0)
                  / extract(epoch from hybrid_recall_v1.half_life))::double precision) as recency,
           c.importance::double precision as importance
    from recall.chunks c
    where c.chunk_id = any ((select array_agg(chunk_id) from by_vector)
                            || (select array_agg(chunk_id) from by_text))
  ),
  -- the weighted sum; a chunk below min_similarity is dropped
  scored as (
    select x.*,
           hybrid_recall_v1.vector_weight * coalesce(x.similarity, 0)
           + hybrid_recall_v1.text_weight * x.text_rank
           + hybrid_recall_v1.recency_weight * x.recency
           + hybrid_recall_v1.importance_weight * x.importance as score
    from components x
    where hybrid_recall_v1.min_similarity is null or x.similarity is null
       or x.similarity >= hybrid_recall_v1.min_similarity
  ),
  -- order, near-duplicate removal, k and the token budget: one shared step
  finished as (
    select f.*
    from recall._finish((select array_agg(x.chunk_id) from scored x),
                        (select array_agg(x.score) from scored x),
                        hybrid_recall_v1.k, hybrid_recall_v1.token_budget,
                        hybrid_recall_v1.dedup_similarity) f
  )
  select x.chunk_id, x.session_id, x.kind, x.content, x.created_at, x.score, x.similarity,
         x.text_rank, x.recency, x.importance, x.n_tokens, f.cumulative_tokens, x.metadata,
         x.message_ids
  from finished f
  join scored x on x.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.hybrid_recall_v1 is $c$
hybrid_recall v1 (frozen from its release): one agent's chunks ranked for a query.
Candidates: the top `candidates` chunks by cosine distance (exact scan for agents up to
recall.config exact_scan_max_rows chunks, else the ANN index with iterative scan) and the top
`candidates` by full-text rank; every filter (agent, exclude_session_id, filter @> metadata,
kinds, since <= created_at < until) applies inside both arms.
Components, each in [0, 1] (similarity in [-1, 1]):
  similarity = 1 - cosine distance (NULL without an embedding on either side)
  text_rank  = r / (r + 0.1), r = ts_rank_cd(tsv, q, 1); q = the query's words OR-ed, or
               websearch_to_tsquery when the text uses "phrases" or -exclusions; 0 = no match
  recency    = 0.5 ^ (age / half_life), age = as_of (default now()) - created_at, >= 0
  importance = the chunk's importance
score = vector_weight*similarity + text_weight*text_rank + recency_weight*recency
        + importance_weight*importance (a missing component counts 0).
Defaults, chosen on the LoCoMo development split (docs/BENCHMARKS.md): vector 0.5, text 0.5
(equal weights were best: text-only and dense-only are each ~0.6 recall@10, together more),
recency 0.025 with half_life 30 days (more recency cost recall there; this much did not),
importance 0.05; candidates 100 per arm (20 to 200 made no difference).
Rows with similarity < min_similarity are dropped. Among the best max(4k, 40), a row whose text
equals, or whose embedding is within dedup_similarity cosine of, a better row is dropped.
Order: score desc, created_at desc, chunk_id desc. cumulative_tokens = running sum of n_tokens
in that order; with token_budget, rows stop at the first that would exceed it. At most k rows.
$c$;

-- _recency: 0.5 ^ (age / half_life), age in seconds clamped at 0. Exactly 0 past 1000
-- half-lives (0.5^1000 ~ 1e-301): power() would raise 'value out of range: underflow' past
-- ~1075 (a 45-day-old chunk with half_life '1 hour', a year-1 timestamp with 30 days). An
-- infinite half_life means no decay: 1.
create or replace function recall._recency(age_seconds float8, half_life_seconds float8)
returns float8
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select case when half_life_seconds = 'Infinity' then 1::float8   -- no decay, even at an infinite age
              when greatest(age_seconds, 0) / half_life_seconds > 1000 then 0::float8
              else power(0.5::float8, greatest(age_seconds, 0) / half_life_seconds) end
$$;

-- _text_plan_v2: how hybrid_recall_v2 searches one agent's chunks for a query text: rank_q, the
-- tsquery that scores text_rank, and match_q, the tsquery whose matches the text arm ranks.
--
-- rank_q: like _text_query (the words OR-ed; websearch operators taken strictly), but a plain
-- question loses the words that occur in more than recall.config text_common_share (0.5) of
-- the agent's chunks, estimated on its newest text_df_sample (100) chunks: ts_rank_cd has no
-- inverse document frequency, so a word found nearly everywhere (in a chat, the two speakers'
-- names) rewards every chunk and crowds out the words that tell chunks apart (LoCoMo
-- recall@10 +0.04, docs/BENCHMARKS.md). When every word is that common, or the agent has
-- fewer than 20 chunks, nothing is dropped.
--
-- match_q: the words of rank_q expected in at most text_match_max_rows (5000) of the agent's
-- chunks (share in the sample x the agent's estimated size), or, when there is none, the
-- rarest one: ts_rank_cd costs ~12 us a chunk, and a 120,000-chunk agent may have 50,000
-- chunks holding one mid-frequency word. A chunk holding only such common words is then no
-- text candidate (it can still come by the vector arm, and is scored with rank_q). The
-- agent's size is estimated from the sample's time span against the agent's oldest chunk
-- (one B-tree probe; no count): the sample is the whole agent when it is not full.
-- agent_rows: that estimate (NULL when the query has no words to look up).
-- A websearch query is matched and ranked as written.
drop function if exists recall._text_plan_v2(text, text);   -- (a pre-release shape)
create or replace function recall._text_plan_v2(p_agent_id text, query_text text,
                                             out rank_q tsquery, out match_q tsquery,
                                             out agent_rows float8)
language sql stable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  with
  conf as (
    select coalesce(max(value::float8) filter (where key = 'text_common_share'), 0.5) as common_share,
           coalesce(max(value::int) filter (where key = 'text_df_sample'), 100) as sample_size,
           coalesce(max(value::float8) filter (where key = 'text_match_max_rows'), 5000) as match_max
    from recall.config
    where key in ('text_common_share', 'text_df_sample', 'text_match_max_rows')
  ),
  words as (
    select distinct w.lexeme, quote_literal(w.lexeme)::tsquery as q
    from unnest(to_tsvector('english', query_text)) w
    where query_text is not null and query_text !~ '"|(^|\s)-\w'
  ),
  -- the agent's newest chunks: the B-tree (agent_id, created_at) gives them in order
  sample as (
    select strip(c.tsv) as tsv, c.created_at
    from recall.chunks c
    where c.agent_id = p_agent_id and exists (select from words)
    order by c.created_at desc
    limit (select sample_size from conf)
  ),
  sampled as (
    select count(*) as n, min(created_at) as oldest_sampled, max(created_at) as newest
    from sample
  ),
  -- the agent's size: the sample itself when it is not full, else extrapolated over time
  size_ as (
    select case
      when s.n = 0 then null                -- nothing sampled (no words, or a websearch query)
      when s.n < conf.sample_size then s.n::float8
      else s.n * greatest(1, extract(epoch from s.newest - (select min(c.created_at) from recall.chunks c
                                                             where c.agent_id = p_agent_id))
                             / greatest(extract(epoch from s.newest - s.oldest_sampled), 1))::float8
    end as n
    from sampled s, conf
  ),
  share as (
    select w.lexeme,
           (select count(*) from sample s where s.tsv @@ w.q)::float8 / greatest(sampled.n, 1) as share
    from words w, sampled
  ),
  kept as (
    select s.lexeme, s.share, s.share * size_.n <= conf.match_max as matchable,
           row_number() over (order by s.share, s.lexeme) as rarity
    from share s, conf, size_
    where s.share <= conf.common_share
  ),
  plan as (
    select string_agg(quote_literal(lexeme), ' | ' order by lexeme)::tsquery as rank_q,
           coalesce(string_agg(quote_literal(lexeme), ' | ' order by lexeme) filter (where matchable),
                    max(quote_literal(lexeme)) filter (where rarity = 1))::tsquery as match_q
    from kept
  ),
  -- too few chunks to tell, or every word is common: every word, as _text_query makes it
  fallback as (
    select (select n from sampled) < 20 or (select rank_q from plan) is null as yes
  )
  select case when f.yes then recall._text_query(query_text) else p.rank_q end,
         case when f.yes then recall._text_query(query_text) else p.match_q end,
         (select n from size_)
  from plan p, fallback f
$$;

-- _text_query_v2: the tsquery hybrid_recall_v2 scores text_rank with (see _text_plan_v2)
create or replace function recall._text_query_v2(p_agent_id text, query_text text)
returns tsquery
language sql stable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select rank_q from recall._text_plan_v2(p_agent_id, query_text)
$$;

-- _text_arm_v2: the top n chunks of one agent by full-text rank under rank_q, among those
-- matching match_q. An agent of at most recall.config text_scan_max_rows (2000) chunks
-- (p_agent_rows, estimated by _text_plan_v2) is read on the B-tree (agent_id, created_at)
-- and each chunk tested: the GIN index on tsv covers every agent, and a common word's posting
-- list there (28,000 entries at 277,000 chunks, more at a million) costs 10-100 ms to read
-- for an agent whose 500 chunks are tested in ~1 ms. A larger agent goes through the GIN index.
drop function if exists recall._text_arm_v2(text, tsquery, tsquery, int, text, jsonb, text[],
                                            timestamptz, timestamptz);   -- (a pre-release shape)
create or replace function recall._text_arm_v2(
  p_agent_id text, p_match tsquery, p_rank tsquery, p_agent_rows float8, p_n int,
  p_exclude_session_id text, p_filter jsonb, p_kinds text[], p_since timestamptz,
  p_until timestamptz)
returns table (chunk_id bigint, rank real)
language sql stable rows 100
set search_path to pg_catalog, pg_temp
as $$
  with
  scan_max as (
    select coalesce((select value::float8 from recall.config where key = 'text_scan_max_rows'), 2000) as n
  ),
  hits as (
    -- a small agent: its rows by the B-tree, each tested (coalesce() keeps the GIN index out)
    select c.chunk_id, c.tsv
    from recall.chunks c
    where p_match is not null and p_agent_rows <= (select n from scan_max)
      and c.agent_id = p_agent_id
      and coalesce(c.tsv, ''::tsvector) @@ p_match
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filter is null or c.metadata @> p_filter)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
    union all
    -- a larger one (or one of unknown size): the GIN index
    select c.chunk_id, c.tsv
    from recall.chunks c
    where p_match is not null and not coalesce(p_agent_rows <= (select n from scan_max), false)
      and c.tsv @@ p_match
      and c.agent_id = p_agent_id
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filter is null or c.metadata @> p_filter)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
  )
  select h.chunk_id, ts_rank_cd(h.tsv, p_rank, 1) as rank
  from hits h
  order by 2 desc, h.chunk_id
  limit p_n
$$;

-- hybrid_recall_v2: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v2(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  token_budget       int         default null,
  exclude_session_id text        default null,
  min_similarity     float8       default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  vector_weight      float8       default 0.5,
  text_weight        float8       default 0.5,
  recency_weight     float8       default 0.025,
  importance_weight  float8       default 0.05,
  half_life          interval    default '30 days',
  candidates         int         default 100,
  as_of              timestamptz default null,
  dedup_similarity   float8       default 0.95)
returns table (
  chunk_id          bigint,
  session_id        text,
  kind              text,
  content           text,
  created_at        timestamptz,
  score             double precision,
  similarity        double precision,
  text_rank         double precision,
  recency           double precision,
  importance        double precision,
  n_tokens          int,
  cumulative_tokens bigint,
  metadata          jsonb,
  message_ids       bigint[])
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  tsq tsquery;
  match_q tsquery;
  agent_rows float8;
  now_ts timestamptz := coalesce(hybrid_recall_v2.as_of, now());
  half_life_s float8;
begin
  perform recall._check_recall_args(
    hybrid_recall_v2.agent_id, hybrid_recall_v2.query_text, hybrid_recall_v2.query_embedding,
    hybrid_recall_v2.k, hybrid_recall_v2.token_budget, hybrid_recall_v2.min_similarity,
    hybrid_recall_v2.filter, hybrid_recall_v2.since, hybrid_recall_v2.until,
    array[hybrid_recall_v2.vector_weight, hybrid_recall_v2.text_weight,
          hybrid_recall_v2.recency_weight, hybrid_recall_v2.importance_weight],
    hybrid_recall_v2.half_life, hybrid_recall_v2.candidates);
  if hybrid_recall_v2.dedup_similarity is null or hybrid_recall_v2.dedup_similarity = 'NaN' then
    raise exception 'dedup_similarity must be a number (above 1 turns de-duplication off), got %',
      coalesce(hybrid_recall_v2.dedup_similarity::text, 'NULL') using errcode = '22023';
  end if;
  half_life_s := extract(epoch from hybrid_recall_v2.half_life);
  select p.rank_q, p.match_q, p.agent_rows into tsq, match_q, agent_rows
  from recall._text_plan_v2(hybrid_recall_v2.agent_id, hybrid_recall_v2.query_text) p;

  return query
  with
  -- candidates from the vector index: nearest by cosine distance
  by_vector as (
    select v.chunk_id, v.distance
    from recall._vector_arm(hybrid_recall_v2.agent_id, hybrid_recall_v2.query_embedding,
                            hybrid_recall_v2.candidates, hybrid_recall_v2.exclude_session_id,
                            hybrid_recall_v2.filter, hybrid_recall_v2.kinds,
                            hybrid_recall_v2.since, hybrid_recall_v2.until) v
    where hybrid_recall_v2.query_embedding is not null
  ),
  -- candidates from the full-text index: best ts_rank_cd
  by_text as (
    select t.chunk_id, t.rank
    from recall._text_arm_v2(hybrid_recall_v2.agent_id, match_q, tsq, agent_rows, hybrid_recall_v2.candidates,
                             hybrid_recall_v2.exclude_session_id, hybrid_recall_v2.filter,
                             hybrid_recall_v2.kinds, hybrid_recall_v2.since, hybrid_recall_v2.until) t
  ),
  -- each candidate once, with its four components
  components as (
    select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, c.n_tokens, c.metadata,
           c.message_ids,
           recall._similarity(c.embedding, hybrid_recall_v2.query_embedding) as similarity,
           -- text_rank = r / (r + 0.1), r = ts_rank_cd(tsv, query, 1): 0 without a match, -> 1
           case when tsq is not null and c.tsv @@ tsq
                then ts_rank_cd(c.tsv, tsq, 1) / (ts_rank_cd(c.tsv, tsq, 1) + 0.1)
                else 0 end::double precision as text_rank,
           recall._recency(extract(epoch from now_ts - c.created_at)::float8, half_life_s) as recency,
           c.importance::double precision as importance
    from recall.chunks c
    where c.chunk_id = any ((select array_agg(chunk_id) from by_vector)
                            || (select array_agg(chunk_id) from by_text))
  ),
  -- the weighted sum; a chunk below min_similarity is dropped
  scored as (
    select x.*,
           hybrid_recall_v2.vector_weight * coalesce(x.similarity, 0)
           + hybrid_recall_v2.text_weight * x.text_rank
           + hybrid_recall_v2.recency_weight * x.recency
           + hybrid_recall_v2.importance_weight * x.importance as score
    from components x
    where hybrid_recall_v2.min_similarity is null or x.similarity is null
       or x.similarity >= hybrid_recall_v2.min_similarity
  ),
  -- order, near-duplicate removal, k and the token budget: one shared step
  finished as (
    select f.*
    from recall._finish((select array_agg(x.chunk_id) from scored x),
                        (select array_agg(x.score) from scored x),
                        hybrid_recall_v2.k, hybrid_recall_v2.token_budget,
                        hybrid_recall_v2.dedup_similarity) f
  )
  select x.chunk_id, x.session_id, x.kind, x.content, x.created_at, x.score, x.similarity,
         x.text_rank, x.recency, x.importance, x.n_tokens, f.cumulative_tokens, x.metadata,
         x.message_ids
  from finished f
  join scored x on x.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.hybrid_recall_v2 is $c$
hybrid_recall v2 (frozen from its release): one agent's chunks ranked for a query.
Candidates: the top `candidates` chunks by cosine distance (exact scan for agents up to
recall.config exact_scan_max_rows chunks, else the agent's own ANN index or the table's with
iterative scan) and the top `candidates` by full-text rank among the chunks holding one of
the query's rarer words (those expected in at most text_match_max_rows = 5000 of the agent's
chunks, else the rarest; recall._text_plan_v2); every filter (agent, exclude_session_id, filter @> metadata,
kinds, since <= created_at < until) applies inside both arms.
Components, each in [0, 1] (similarity in [-1, 1]):
  similarity = 1 - cosine distance (NULL without an embedding on either side, or when
               either is all zeros: cosine is undefined there)
  text_rank  = r / (r + 0.1), r = ts_rank_cd(tsv, q, 1); q = the query's words OR-ed, less
               the words found in more than half of the agent's chunks (estimated on its
               newest 100; recall._text_plan_v2), or websearch_to_tsquery when the text uses
               "phrases" or -exclusions; 0 = no match
  recency    = 0.5 ^ (age / half_life), age = as_of (default now()) - created_at, >= 0;
               exactly 0 past 1000 half-lives
  importance = the chunk's importance
score = vector_weight*similarity + text_weight*text_rank + recency_weight*recency
        + importance_weight*importance (a missing component counts 0).
Defaults, chosen on the LoCoMo development split (docs/BENCHMARKS.md): vector 0.5, text 0.5
(equal weights were best: text-only and dense-only are each ~0.6 recall@10, together more),
recency 0.025 with half_life 30 days (more recency cost recall there; this much did not),
importance 0.05; candidates 100 per arm (20 to 200 made no difference).
Rows with similarity < min_similarity are dropped. Among the best max(4k, 40), a row whose text
equals, or whose embedding is within dedup_similarity cosine of, a better row is dropped.
Order: score desc, created_at desc, chunk_id desc. cumulative_tokens = running sum of n_tokens
in that order; with token_budget, rows stop at the first that would exceed it. At most k rows.
Changes from v1: the document-frequency-aware text query (LoCoMo recall@10 0.762 -> 0.804,
session_recall@5 0.743 -> 0.787, docs/BENCHMARKS.md); recency never raises an underflow error
(v1 failed for chunks older than ~1075 half-lives); all-zero embeddings have similarity NULL
(v1: NaN, which sorted first); dedup_similarity NaN or NULL is refused.
$c$;

-- _text_plan_v3: _text_plan_v2's plan, with what _text_arm_v3 needs to weigh each word by its
-- inverse document frequency. rank_q, match_q and agent_rows are v2's (the words found in more
-- than text_common_share of the agent's chunks leave the query; match_q holds the words
-- expected in at most text_match_max_rows chunks, or the rarest), and:
--   lexemes  the words of rank_q (NULL for a websearch query, which is ranked as v2 ranks it)
--   idfs     each word's idf = ln(1 + (N - df + 0.5) / (df + 0.5)), N = agent_rows, df = its
--            share of the sampled chunks x N (exact when the sample is the whole agent)
--   avg_len  the mean number of distinct words (length(tsv)) of the sampled chunks
-- When the agent has fewer than 20 chunks, or every word is common, every word is kept (as in
-- v2); IDF, not dropping, then tells the words apart. The document frequencies come from the
-- sample rather than a count: on LoCoMo, exact counts gave recall@10 0.847 and
-- session_recall@5 0.824, the sample 0.845 and 0.821 (docs/BENCHMARKS.md); a count costs a
-- read of every chunk holding the word.
drop function if exists recall._text_plan_v3(text, text);   -- (a pre-release shape)
create or replace function recall._text_plan_v3(p_agent_id text, query_text text,
                                                out rank_q tsquery, out match_q tsquery,
                                                out agent_rows float8, out lexemes text[],
                                                out idfs float8[], out avg_len float8)
language sql stable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  with
  conf as (
    select coalesce(max(value::float8) filter (where key = 'text_common_share'), 0.5) as common_share,
           coalesce(max(value::int) filter (where key = 'text_df_sample'), 100) as sample_size,
           coalesce(max(value::float8) filter (where key = 'text_match_max_rows'), 5000) as match_max
    from recall.config
    where key in ('text_common_share', 'text_df_sample', 'text_match_max_rows')
  ),
  words as (
    select distinct w.lexeme, quote_literal(w.lexeme)::tsquery as q
    from unnest(to_tsvector('english', query_text)) w
    where query_text is not null and query_text !~ '"|(^|\s)-\w'
  ),
  -- the agent's newest chunks: the B-tree (agent_id, created_at) gives them in order
  sample as (
    select strip(c.tsv) as tsv, c.created_at
    from recall.chunks c
    where c.agent_id = p_agent_id and exists (select from words)
    order by c.created_at desc
    limit (select sample_size from conf)
  ),
  sampled as (
    select count(*) as n, min(created_at) as oldest_sampled, max(created_at) as newest,
           avg(length(tsv))::float8 as avg_len
    from sample
  ),
  -- the agent's size: the sample itself when it is not full, else extrapolated over time
  size_ as (
    select case
      when s.n = 0 then null
      when s.n < conf.sample_size then s.n::float8
      else s.n * greatest(1, extract(epoch from s.newest - (select min(c.created_at) from recall.chunks c
                                                             where c.agent_id = p_agent_id))
                             / greatest(extract(epoch from s.newest - s.oldest_sampled), 1))::float8
    end as n
    from sampled s, conf
  ),
  share as (
    select w.lexeme,
           (select count(*) from sample s where s.tsv @@ w.q)::float8 / greatest(sampled.n, 1) as share
    from words w, sampled
  ),
  -- too few chunks to tell, or every word is common: every word is kept, and matched
  fallback as (
    select (select n from sampled) < 20
           or not exists (select from share s, conf where s.share <= conf.common_share) as yes
  ),
  kept as (
    select s.lexeme, s.share,
           f.yes or s.share * size_.n <= conf.match_max as matchable,
           row_number() over (order by s.share, s.lexeme) as rarity,
           greatest(size_.n, 1) as n
    from share s, conf, size_, fallback f
    where f.yes or s.share <= conf.common_share
  ),
  plan as (
    select string_agg(quote_literal(lexeme), ' | ' order by lexeme)::tsquery as rank_q,
           coalesce(string_agg(quote_literal(lexeme), ' | ' order by lexeme) filter (where matchable),
                    max(quote_literal(lexeme)) filter (where rarity = 1))::tsquery as match_q,
           array_agg(lexeme order by lexeme) as lexemes,
           array_agg(ln(1 + (n - share * n + 0.5) / (share * n + 0.5)) order by lexeme) as idfs
    from kept
  )
  -- no word to look up (stop words only, or a websearch query): _text_query's tsquery
  select coalesce(p.rank_q, recall._text_query(query_text)),
         coalesce(p.match_q, recall._text_query(query_text)),
         (select n from size_), p.lexemes, p.idfs,
         (select s.avg_len from sampled s)
  from plan p
$$;

-- _text_arm_v3: the top p_n chunks of one agent by text_rank among those matching p_match, and
-- the text_rank of the chunks in p_also (the vector arm's candidates), in one pass.
--
-- text_rank = (sum of p_idfs over the words of p_lexemes the chunk holds) / (sum of p_idfs)
--             * 1.6 / (1.6 + 0.6 * length(tsv) / p_avg_len)
-- which is BM25 (k1 = 1.2, b = 0.5) with each word counted once, divided by its value for a
-- chunk of no length that holds every word: in [0, 1]. A websearch query (no lexemes) is ranked
-- as v2 ranks it: r / (r + 0.1), r = ts_rank_cd(tsv, p_rank, 1).
-- How hits are read (B-tree scan of a small agent, else the GIN index): as _text_arm_v2.
-- An agent estimated above recall.config text_pair_min_rows (10000) chunks, asked two or more
-- match words, is first searched for the chunks holding two different ones (one GIN scan of
-- 'a' & 'b' | 'a' & 'c' | ...); when at least p_n do, the chunks holding only one match word
-- w can score at most (idf(w) + the idf of the non-match words) / (sum of p_idfs) (the length
-- factor is < 1), and are read only for the words whose bound reaches the p_n-th best pair
-- score. The answer is the same, bit for bit; a large agent's text arm reads ~1/3 of its hits
-- (at 1M chunks, large agents: p50 8.1 -> 3.6 ms, p95 25 -> 10 ms; docs/BENCHMARKS.md).
drop function if exists recall._text_arm_v3(text, tsquery, tsquery, float8, text[], float8[], bool[], float8,
                                            int, bigint[], text, jsonb, text[], timestamptz,
                                            timestamptz);   -- (a pre-release shape)
create or replace function recall._text_arm_v3(
  p_agent_id text, p_match tsquery, p_rank tsquery, p_agent_rows float8, p_lexemes text[],
  p_idfs float8[], p_avg_len float8, p_n int, p_also bigint[],
  p_exclude_session_id text, p_filter jsonb, p_kinds text[], p_since timestamptz,
  p_until timestamptz)
returns table (chunk_id bigint, text_rank float8)
language sql stable rows 200
set search_path to pg_catalog, pg_temp
as $$
  with
  conf as (
    select coalesce(max(value::float8) filter (where key = 'text_scan_max_rows'), 2000) as scan_max,
           coalesce(max(value::float8) filter (where key = 'text_pair_min_rows'), 10000) as pair_min
    from recall.config
    where key in ('text_scan_max_rows', 'text_pair_min_rows')
  ),
  words as (
    select u.i, quote_literal(u.lexeme)::tsquery as q, u.idf,
           p_match @> quote_literal(u.lexeme)::tsquery as matched
    from unnest(p_lexemes, p_idfs) with ordinality as u(lexeme, idf, i)
  ),
  total as (select sum(w.idf order by w.i) as idf from words w),
  wq as (
    select array_agg(w.q order by w.i) as q, array_agg(w.idf order by w.i) as idf, count(*) as n
    from words w
  ),
  -- an agent estimated above text_pair_min_rows chunks: first the chunks holding two different
  -- match words ('a' & 'b' | 'a' & 'c' | ...: one GIN scan)
  pair_q as (
    select string_agg(format('(%s & %s)', a.q, b.q), ' | ')::tsquery as q
    from words a join words b on a.i < b.i
    where a.matched and b.matched and p_agent_rows > (select pair_min from conf)
  ),
  pair_hits as materialized (
    select c.chunk_id, c.tsv
    from recall.chunks c
    where c.tsv @@ (select q from pair_q)
      and c.agent_id = p_agent_id
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filter is null or c.metadata @> p_filter)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
  ),
  pairs as (select count(*) >= p_n as yes from pair_hits),
  -- the chunks to score: the hits (or, with enough of them, the pair hits), then the other
  -- arm's candidates
  cands as (
    select h.chunk_id, h.tsv, true as hit
    from pair_hits h
    where (select yes from pairs)
    union all
    -- a small agent: its rows by the B-tree, each tested (coalesce() keeps the GIN index out)
    select c.chunk_id, c.tsv, true
    from recall.chunks c
    where p_match is not null and p_agent_rows <= (select scan_max from conf)
      and not (select yes from pairs)
      and c.agent_id = p_agent_id
      and coalesce(c.tsv, ''::tsvector) @@ p_match
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filter is null or c.metadata @> p_filter)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
    union all
    -- a larger one (or one of unknown size): the GIN index
    select c.chunk_id, c.tsv, true
    from recall.chunks c
    where p_match is not null and not coalesce(p_agent_rows <= (select scan_max from conf), false)
      and not (select yes from pairs)
      and c.tsv @@ p_match
      and c.agent_id = p_agent_id
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filter is null or c.metadata @> p_filter)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
    union all
    select c.chunk_id, c.tsv, false
    from recall.chunks c
    where c.chunk_id = any (p_also) and c.agent_id = p_agent_id
  ),
  -- each candidate once: the idf of the words it holds, its length, and for a websearch query
  -- its ts_rank_cd. Up to 12 words the idf sum is written out (a subquery or a join with the
  -- words costs ~1.3 us more a candidate); a word not held adds an exact 0, so the sum is bit
  -- for bit the ordered sum over the words held; none held gives 0 (scored as NULL is)
  held as (
    select c.chunk_id, c.hit,
           case when (select n from wq) <= 12 then
             case when c.tsv @@ (select q from wq)[1] then (select idf from wq)[1] else 0 end +
             case when c.tsv @@ (select q from wq)[2] then (select idf from wq)[2] else 0 end +
             case when c.tsv @@ (select q from wq)[3] then (select idf from wq)[3] else 0 end +
             case when c.tsv @@ (select q from wq)[4] then (select idf from wq)[4] else 0 end +
             case when c.tsv @@ (select q from wq)[5] then (select idf from wq)[5] else 0 end +
             case when c.tsv @@ (select q from wq)[6] then (select idf from wq)[6] else 0 end +
             case when c.tsv @@ (select q from wq)[7] then (select idf from wq)[7] else 0 end +
             case when c.tsv @@ (select q from wq)[8] then (select idf from wq)[8] else 0 end +
             case when c.tsv @@ (select q from wq)[9] then (select idf from wq)[9] else 0 end +
             case when c.tsv @@ (select q from wq)[10] then (select idf from wq)[10] else 0 end +
             case when c.tsv @@ (select q from wq)[11] then (select idf from wq)[11] else 0 end +
             case when c.tsv @@ (select q from wq)[12] then (select idf from wq)[12] else 0 end
           else (select sum(w.idf order by w.i) from words w where c.tsv @@ w.q) end as idf,
           length(c.tsv) as len,
           case when p_lexemes is null and c.tsv @@ p_rank then ts_rank_cd(c.tsv, p_rank, 1) end as cd
    from cands c
  ),
  scored as materialized (
    select h.chunk_id, h.hit,
           case
             when p_lexemes is not null then
               coalesce(h.idf / nullif((select idf from total), 0)
                        * 1.6 / (1.6 + 0.6 * h.len / greatest(p_avg_len, 1)), 0)
             when h.cd is not null then h.cd / (h.cd + 0.1)
             else 0
           end::float8 as text_rank
    from held h
  ),
  -- with the pair hits only: the p_n-th best of them. A chunk holding one match word w (and
  -- any of the non-match words) scores below (idf(w) + their idf) / total (the length factor
  -- 1.6 / (1.6 + 0.6 len / avg_len) is < 1), so only the words whose bound reaches that score
  -- can bring a chunk into the top p_n: those chunks are read too. The answer is v3's.
  kth as (
    select s.text_rank as s
    from scored s
    where s.hit and (select yes from pairs)
    order by s.text_rank desc, s.chunk_id
    offset p_n - 1 limit 1
  ),
  nonmatch as (select coalesce(sum(w.idf), 0) as idf from words w where not w.matched),
  single_q as (
    select string_agg(w.q::text, ' | ')::tsquery as q
    from words w, kth, total, nonmatch
    where w.matched and (w.idf + nonmatch.idf) / nullif(total.idf, 0) >= kth.s * (1 - 1e-9)
  ),
  singles as (
    select c.chunk_id,
           coalesce((select sum(w.idf order by w.i) from words w where c.tsv @@ w.q)
                    / nullif((select idf from total), 0)
                    * 1.6 / (1.6 + 0.6 * length(c.tsv) / greatest(p_avg_len, 1)), 0)::float8 as text_rank
    from recall.chunks c
    where c.tsv @@ (select q from single_q)
      and not c.tsv @@ (select q from pair_q)
      and c.agent_id = p_agent_id
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filter is null or c.metadata @> p_filter)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
  ),
  best as (
    select x.chunk_id, x.text_rank
    from (select s.chunk_id, s.text_rank from scored s where s.hit
          union all
          select g.chunk_id, g.text_rank from singles g) x
    order by x.text_rank desc, x.chunk_id
    limit p_n
  )
  select b.chunk_id, b.text_rank from best b
  union
  select s.chunk_id, s.text_rank from scored s where not s.hit
$$;

-- hybrid_recall_v3: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v3(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  token_budget       int         default null,
  exclude_session_id text        default null,
  min_similarity     float8       default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  vector_weight      float8       default 0.5,
  text_weight        float8       default 0.5,
  recency_weight     float8       default 0.025,
  importance_weight  float8       default 0.05,
  half_life          interval    default '30 days',
  candidates         int         default 100,
  as_of              timestamptz default null,
  dedup_similarity   float8       default 0.95)
returns table (
  chunk_id          bigint,
  session_id        text,
  kind              text,
  content           text,
  created_at        timestamptz,
  score             double precision,
  similarity        double precision,
  text_rank         double precision,
  recency           double precision,
  importance        double precision,
  n_tokens          int,
  cumulative_tokens bigint,
  metadata          jsonb,
  message_ids       bigint[])
language plpgsql volatile security invoker
-- generic plans for the statements inside (the vector arm's EXECUTE is planned at each call
-- regardless): custom plans of the text plan's and the arms' queries cost ~0.5-1.5 ms to make
set plan_cache_mode to force_generic_plan
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  plan record;
  vector_ids bigint[];
  now_ts timestamptz := coalesce(hybrid_recall_v3.as_of, now());
  half_life_s float8;
begin
  perform recall._check_recall_args(
    hybrid_recall_v3.agent_id, hybrid_recall_v3.query_text, hybrid_recall_v3.query_embedding,
    hybrid_recall_v3.k, hybrid_recall_v3.token_budget, hybrid_recall_v3.min_similarity,
    hybrid_recall_v3.filter, hybrid_recall_v3.since, hybrid_recall_v3.until,
    array[hybrid_recall_v3.vector_weight, hybrid_recall_v3.text_weight,
          hybrid_recall_v3.recency_weight, hybrid_recall_v3.importance_weight],
    hybrid_recall_v3.half_life, hybrid_recall_v3.candidates);
  if hybrid_recall_v3.dedup_similarity is null or hybrid_recall_v3.dedup_similarity = 'NaN' then
    raise exception 'dedup_similarity must be a number (above 1 turns de-duplication off), got %',
      coalesce(hybrid_recall_v3.dedup_similarity::text, 'NULL') using errcode = '22023';
  end if;
  half_life_s := extract(epoch from hybrid_recall_v3.half_life);
  select * into plan from recall._text_plan_v3(hybrid_recall_v3.agent_id, hybrid_recall_v3.query_text);

  -- candidates from the vector index: nearest by cosine distance
  if hybrid_recall_v3.query_embedding is not null then
    select array_agg(v.chunk_id) into vector_ids
    from recall._vector_arm(hybrid_recall_v3.agent_id, hybrid_recall_v3.query_embedding,
                            hybrid_recall_v3.candidates, hybrid_recall_v3.exclude_session_id,
                            hybrid_recall_v3.filter, hybrid_recall_v3.kinds,
                            hybrid_recall_v3.since, hybrid_recall_v3.until) v;
  end if;

  return query
  with
  -- candidates from the full-text arm, and the text_rank of every candidate
  by_text as (
    select t.chunk_id, t.text_rank
    from recall._text_arm_v3(hybrid_recall_v3.agent_id, plan.match_q, plan.rank_q, plan.agent_rows,
                             plan.lexemes, plan.idfs, plan.avg_len,
                             hybrid_recall_v3.candidates, vector_ids,
                             hybrid_recall_v3.exclude_session_id, hybrid_recall_v3.filter,
                             hybrid_recall_v3.kinds, hybrid_recall_v3.since, hybrid_recall_v3.until) t
  ),
  -- each candidate read once, with its four components (recall._similarity and recall._recency
  -- written out: a function with a pinned search_path is never inlined, ~3 us a call)
  components as materialized (
    select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, c.n_tokens, c.metadata,
           c.message_ids, c.embedding,
           case when c.embedding is null or hybrid_recall_v3.query_embedding is null then null
                when vector_norm(c.embedding) = 0 or vector_norm(hybrid_recall_v3.query_embedding) = 0 then null
                else 1 - (c.embedding <=> hybrid_recall_v3.query_embedding) end as similarity,
           coalesce(t.text_rank, 0)::double precision as text_rank,
           case when half_life_s = 'Infinity' then 1::float8
                when greatest(extract(epoch from now_ts - c.created_at)::float8, 0) / half_life_s > 1000 then 0::float8
                else power(0.5::float8, greatest(extract(epoch from now_ts - c.created_at)::float8, 0) / half_life_s)
           end as recency,
           c.importance::double precision as importance
    from recall.chunks c
    left join by_text t on t.chunk_id = c.chunk_id
    where c.chunk_id = any (coalesce(vector_ids, '{}') || (select array_agg(b.chunk_id) from by_text b))
  ),
  -- the weighted sum; a chunk below min_similarity is dropped
  scored as (
    select x.*,
           hybrid_recall_v3.vector_weight * coalesce(x.similarity, 0)
           + hybrid_recall_v3.text_weight * x.text_rank
           + hybrid_recall_v3.recency_weight * x.recency
           + hybrid_recall_v3.importance_weight * x.importance as score
    from components x
    where hybrid_recall_v3.min_similarity is null or x.similarity is null
       or x.similarity >= hybrid_recall_v3.min_similarity
  ),
  -- recall._finish's steps, on the rows already read: the best max(4k, 40) in the final order
  -- (score desc, created_at desc, chunk_id desc) ...
  top as (
    select x.*, row_number() over (order by x.score desc, x.created_at desc, x.chunk_id desc) as pos
    from scored x
    order by pos
    limit greatest(4 * hybrid_recall_v3.k, 40)
  ),
  normed as materialized (
    select t.*, vector_norm(t.embedding) as norm
    from top t
  ),
  -- ... a row goes when a better one has the same text or is within dedup_similarity cosine ...
  distinct_ as (
    select t.*
    from normed t
    where not exists (
      select from normed b
      where b.pos < t.pos
        and (b.content = t.content
             or (hybrid_recall_v3.dedup_similarity <= 1 and b.norm > 0 and t.norm > 0
                 and 1 - (b.embedding <=> t.embedding) >= hybrid_recall_v3.dedup_similarity)))
  ),
  -- ... the running token total, k and the budget
  budgeted as (
    select d.*,
           sum(d.n_tokens) over (order by d.pos rows unbounded preceding) as cumulative_tokens,
           row_number() over (order by d.pos) as rnk
    from distinct_ d
  )
  select b.chunk_id, b.session_id, b.kind, b.content, b.created_at, b.score, b.similarity,
         b.text_rank, b.recency, b.importance, b.n_tokens, b.cumulative_tokens, b.metadata,
         b.message_ids
  from budgeted b
  where b.rnk <= hybrid_recall_v3.k
    and (hybrid_recall_v3.token_budget is null or b.cumulative_tokens <= hybrid_recall_v3.token_budget)
  order by b.pos;
end
$$;

comment on function recall.hybrid_recall_v3 is $c$
hybrid_recall v3: one agent's chunks ranked for a query.
Candidates: the top `candidates` chunks by cosine distance (exact scan for agents up to
recall.config exact_scan_max_rows chunks, else the agent's own ANN index or the table's with
iterative scan) and the top `candidates` by text_rank among the chunks holding one of the
query's rarer words (those expected in at most text_match_max_rows = 5000 of the agent's
chunks, else the rarest; recall._text_plan_v3); every filter (agent, exclude_session_id,
filter @> metadata, kinds, since <= created_at < until) applies inside both arms.
Components, each in [0, 1] (similarity in [-1, 1]):
  similarity = 1 - cosine distance (NULL without an embedding on either side, or when
               either is all zeros)
  text_rank  = BM25 with inverse document frequency within the agent, each word counted once,
               scaled to [0, 1] (recall._text_arm_v3):
               (sum of idf(w) over the query words w the chunk holds) / (sum over all of them)
               * 1.6 / (1.6 + 0.6 * length(tsv) / the agent's mean length(tsv));
               idf(w) = ln(1 + (N - df + 0.5) / (df + 0.5)), N the agent's chunks, df those
               holding w (estimated on its newest 100 chunks). The query words: the query's words less those found in more than
               half of the agent's chunks (estimated on its newest 100). A query with
               "phrases" or -exclusions is matched as websearch_to_tsquery reads it and ranked
               r / (r + 0.1), r = ts_rank_cd(tsv, q, 1), as in v2. 0 = no match.
  recency    = 0.5 ^ (age / half_life), age = as_of (default now()) - created_at, >= 0;
               exactly 0 past 1000 half-lives
  importance = the chunk's importance
score = vector_weight*similarity + text_weight*text_rank + recency_weight*recency
        + importance_weight*importance (a missing component counts 0).
Defaults, chosen on the LoCoMo development split (docs/BENCHMARKS.md): vector 0.5, text 0.5,
recency 0.025 with half_life 30 days, importance 0.05; candidates 100 per arm.
Rows with similarity < min_similarity are dropped. Among the best max(4k, 40), a row whose text
equals, or whose embedding is within dedup_similarity cosine of, a better row is dropped.
Order: score desc, created_at desc, chunk_id desc. cumulative_tokens = running sum of n_tokens
in that order; with token_budget, rows stop at the first that would exceed it. At most k rows.
Changes from v2: text_rank is BM25 with IDF (v2: ts_rank_cd, which has none, so a chunk
matching one common word could outrank one matching the rarest): LoCoMo recall@10 0.812 ->
0.845, session_recall@5 0.803 -> 0.821, MRR 0.649 -> 0.713 (docs/BENCHMARKS.md).
$c$;

-- the stable name recall.hybrid_recall is defined in 060-recall-v4.sql (it calls v4)

grant execute on all functions in schema recall to recall_agent, recall_admin;
