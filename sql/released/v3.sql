-- sql/released/v3.sql: release 3: hybrid_recall_v3 (BM25 within the agent: _text_plan_v3,
-- _text_arm_v3), session_recall_v3 and auto_context_v3 (v2's, over hybrid_recall_v3).
-- Never edit: the file's SHA-256 is pinned in sql/frozen.txt and `make lint`
-- (python -m pyrecall._sqlcheck) fails when it changes or when a function here reaches one that
-- is neither in this file, an older release, shared.sql nor sql/released/shared.txt.
-- sql/README.md says how a new version is released.

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

-- session_recall_v3: two-stage, session-aware recall (see the COMMENT below)
create or replace function recall.session_recall_v3(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  n_sessions         int         default 10,
  token_budget       int         default null,
  exclude_session_id text        default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  half_life          interval    default '30 days',
  as_of              timestamptz default null,
  candidates         int         default 200,
  summary_weight     float8      default 0.0,
  session_weight     float8      default 0.5,
  dedup_similarity   float8      default 0.95,
  vector_weight      float8      default 0.5,
  text_weight        float8      default 0.5,
  recency_weight     float8      default 0.025,
  importance_weight  float8      default 0.05)
returns table (
  chunk_id bigint, session_id text, kind text, content text, created_at timestamptz,
  score double precision, similarity double precision, text_rank double precision,
  recency double precision, importance double precision, n_tokens int,
  cumulative_tokens bigint, metadata jsonb, message_ids bigint[],
  session_rank int, session_score double precision)
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
begin
  if n_sessions is null or n_sessions < 1 or n_sessions > 100 then
    raise exception 'n_sessions must be between 1 and 100, got %', coalesce(n_sessions::text, 'NULL')
      using errcode = '22023';
  end if;
  if summary_weight is null or summary_weight < 0 or summary_weight in ('NaN', 'Infinity') then
    raise exception 'summary_weight must be finite and >= 0, got %', coalesce(summary_weight::text, 'NULL')
      using errcode = '22023';
  end if;
  if session_weight is null or not (session_weight between 0 and 1) then
    raise exception 'session_weight must be between 0 and 1, got %', coalesce(session_weight::text, 'NULL')
      using errcode = '22023';
  end if;
  if dedup_similarity is null or dedup_similarity = 'NaN' then
    raise exception 'dedup_similarity must be a number (above 1 turns de-duplication off), got %',
      coalesce(dedup_similarity::text, 'NULL') using errcode = '22023';
  end if;
  -- every other argument is checked by hybrid_recall_v3, with the same messages

  return query
  with
  -- stage 0: a wide pool of scored chunks, by hybrid_recall itself with the caller's weights
  -- (no budget, no de-duplication yet)
  pool as (
    select h.*
    from recall.hybrid_recall_v3(
      agent_id => session_recall_v3.agent_id, query_text => session_recall_v3.query_text,
      query_embedding => session_recall_v3.query_embedding, k => 1000,
      exclude_session_id => session_recall_v3.exclude_session_id,
      filter => session_recall_v3.filter, kinds => session_recall_v3.kinds,
      since => session_recall_v3.since, until => session_recall_v3.until,
      vector_weight => session_recall_v3.vector_weight, text_weight => session_recall_v3.text_weight,
      recency_weight => session_recall_v3.recency_weight,
      importance_weight => session_recall_v3.importance_weight,
      half_life => session_recall_v3.half_life, as_of => session_recall_v3.as_of,
      candidates => session_recall_v3.candidates,
      dedup_similarity => 2) h
  ),
  -- stage 1: each session by its best chunk and its best three (a missing one counts 0, so a
  -- session with one lucky chunk does not beat one that keeps talking about the question),
  -- plus its summary's similarity
  per_session as (
    select p.session_id,
           max(p.score) as best,
           sum(p.score) filter (where p.r <= 3) / 3 as top3
    from (select x.session_id, x.score,
                 row_number() over (partition by x.session_id order by x.score desc) as r
          from pool x) p
    group by p.session_id
  ),
  sessions_scored as (
    select ps.session_id,
           0.5 * ps.best + 0.5 * ps.top3
           + summary_weight * coalesce(recall._similarity(s.summary_embedding,
                                                          session_recall_v3.query_embedding), 0)
             as session_score
    from per_session ps
    join recall.sessions s on s.session_id = ps.session_id
  ),
  top_sessions as (
    select x.session_id, x.session_score,
           row_number() over (order by x.session_score desc, x.session_id)::int as session_rank
    from sessions_scored x
    order by session_rank
    limit n_sessions
  ),
  -- stage 2: the chunks of the chosen sessions, re-scored with their session's score
  reranked as (
    select p.*, t.session_rank, t.session_score,
           (1 - session_weight) * p.score + session_weight * t.session_score as final_score
    from pool p
    join top_sessions t on t.session_id = p.session_id
  ),
  finished as (
    select f.*
    from recall._finish((select array_agg(x.chunk_id) from reranked x),
                        (select array_agg(x.final_score) from reranked x),
                        session_recall_v3.k, session_recall_v3.token_budget,
                        session_recall_v3.dedup_similarity) f
  )
  select x.chunk_id, x.session_id, x.kind, x.content, x.created_at, f.score, x.similarity,
         x.text_rank, x.recency, x.importance, x.n_tokens, f.cumulative_tokens, x.metadata,
         x.message_ids, x.session_rank, x.session_score
  from finished f
  join reranked x on x.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.session_recall_v3 is $c$
session_recall v3: two-stage, session-aware recall.
1. A pool of scored chunks from recall.hybrid_recall_v3 with this call's weights
   (vector_weight, text_weight, recency_weight, importance_weight, half_life; `candidates` per
   arm; no budget and no de-duplication yet).
2. Each session of the pool gets session_score = 0.5 * its best chunk score + 0.5 * (the sum
   of its best three) / 3 + summary_weight * cosine(summary_embedding, query_embedding) (the
   summary embedding is the centroid of its chunks, see recall.summarize_sessions); the best
   n_sessions sessions are kept.
3. Their chunks are re-scored: score = (1 - session_weight) * chunk score + session_weight *
   session_score, then ordered, de-duplicated, cut to k and to token_budget as in
   hybrid_recall (recall._finish). session_rank / session_score tell where each row came from.
Changes from v2: the pool is hybrid_recall_v3's (text_rank is BM25 with IDF). LoCoMo
(defaults, docs/BENCHMARKS.md): recall@10 0.791 -> 0.827, session_recall@5 0.796 -> 0.817.
$c$;

-- auto_context_v3: what an agent should know at the start of a session (v2 with
-- hybrid_recall_v3, BM25, for Related: see the COMMENT)
create or replace function recall.auto_context_v3(
  agent_id           text,
  project            text        default null,
  branch             text        default null,
  task_text          text        default null,
  task_embedding     vector      default null,
  token_budget       int         default 4000,
  exclude_session_id text        default null,
  as_of              timestamptz default null,
  recent_share       float8      default 0.3,
  failure_share      float8      default 0.2)
returns table (
  chunk_id bigint, session_id text, kind text, content text, created_at timestamptz,
  score double precision, similarity double precision, text_rank double precision,
  recency double precision, importance double precision, n_tokens int,
  cumulative_tokens bigint, metadata jsonb, message_ids bigint[], section text)
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', auto_context_v3.project,
                                                      'branch', auto_context_v3.branch));
  related_query text := nullif(btrim(task_text), '');
  related_embedding vector := task_embedding;
  latest text;
  now_ts timestamptz := coalesce(as_of, now());
begin
  if agent_id is null or agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if token_budget is null or token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', coalesce(token_budget::text, 'NULL')
      using errcode = '22023';
  end if;
  if recent_share is null or failure_share is null or recent_share < 0 or failure_share < 0
     or recent_share + failure_share > 1 then
    raise exception 'recent_share and failure_share must be >= 0 and sum to at most 1'
      using errcode = '22023';
  end if;

  -- a branch with no history yet (just created): the history of its project instead
  if scope ? 'branch' and not exists (
       select from recall.chunks c
       where c.agent_id = auto_context_v3.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope: its summary (or
  -- title) as text, its summary embedding (or the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = auto_context_v3.agent_id
      and (exclude_session_id is null or s.session_id <> exclude_session_id)
      and (not scope ? 'project' or s.project = scope->>'project')
      and (not scope ? 'branch' or s.branch = scope->>'branch')
    order by s.ended_at desc nulls last, s.started_at desc, s.session_id desc
    limit 1;
    if latest is not null and related_embedding is null then
      select avg(c.embedding) into related_embedding
      from recall.chunks c
      where c.session_id = latest and c.embedding is not null and c.kind <> 'summary';
    end if;
  end if;

  return query
  with
  -- Recent: the newest conversation chunks of this project and branch
  recent as (
    select c.chunk_id, 'recent'::text as section,
           recall._recency(extract(epoch from now_ts - c.created_at)::float8, 7 * 86400) as score
    from recall.chunks c
    where c.agent_id = auto_context_v3.agent_id
      and c.metadata @> scope
      and c.kind in ('turn_pair', 'window', 'message', 'summary')
      and (exclude_session_id is null or c.session_id <> exclude_session_id)
    order by c.created_at desc, c.chunk_id desc
    limit 20
  ),
  -- Related: hybrid recall for the task, or for the latest work (then from other sessions:
  -- the latest one is Recent already). What the repository itself holds (files read, written
  -- or searched by a file tool) is left out, and other tool input/output counts 0.8 of its
  -- score, so that explanations and decisions come first.
  related as (
    select h.chunk_id, 'related'::text as section,
           h.score * case when h.kind = 'tool' then 0.8 else 1 end as score
    from recall.hybrid_recall_v3(
      agent_id => auto_context_v3.agent_id, query_text => related_query,
      query_embedding => related_embedding,
      k => least(1000, greatest(60, token_budget / 25)),
      exclude_session_id => exclude_session_id, as_of => as_of) h
    where (related_query is not null or related_embedding is not null)
      and h.session_id is distinct from latest
      and not (h.kind = 'tool' and h.metadata->>'tool_name' in
               ('Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit', 'NotebookRead', 'Glob',
                'Grep', 'LS'))
  ),
  -- Failures to avoid: what went wrong before, most relevant (then newest) first ...
  failed as (
    select c.chunk_id, c.session_id,
           coalesce(recall._similarity(c.embedding, related_embedding), 0)
           + 0.2 * recall._recency(extract(epoch from now_ts - c.created_at)::float8, 30 * 86400) as score,
           (select max(m.seq) from recall.messages m where m.message_id = any (c.message_ids)) as last_seq
    from recall.chunks c
    where c.agent_id = auto_context_v3.agent_id
      and c.metadata @> scope
      and (exclude_session_id is null or c.session_id <> exclude_session_id)
      and recall._is_failure(c.kind, c.content, c.metadata)
    order by 3 desc, c.chunk_id desc
    limit 10
  ),
  -- ... each followed by what the agent concluded from it: the first thinking or text of the
  -- assistant after it in its session (itself no failure)
  resolutions as (
    select f.chunk_id as failure_id, r.chunk_id, f.score
    from failed f
    cross join lateral (
      select c.chunk_id
      from recall.chunks c
      cross join lateral unnest(c.message_ids) as u(message_id)
      join recall.messages m on m.message_id = u.message_id
      where c.session_id = f.session_id
        and c.kind in ('thinking', 'message', 'turn_pair', 'window')
        and m.role = 'assistant' and m.seq > f.last_seq
        and not recall._is_failure(c.kind, c.content, c.metadata)
      order by m.seq, c.part
      limit 1) r
  ),
  -- the sections are filled one after the other, each from what the ones before left:
  -- Recent within its share of the budget ...
  recent_kept as (
    select x.*
    from (select r.chunk_id, r.section, r.score, r.chunk_id as grp_id, 0 as sub,
                 null::bigint as resolution_of, c.n_tokens,
                 sum(c.n_tokens) over (order by r.score desc, r.chunk_id desc
                                       rows unbounded preceding) as run
          from recent r
          join recall.chunks c on c.chunk_id = r.chunk_id) x
    where x.run <= token_budget * recent_share
  ),
  -- ... then Failures: each failure followed by its resolution (unless Recent shows it) ...
  failure_rows as (
    select f.chunk_id, 'failures'::text as section, f.score, f.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of
    from failed f
    where f.chunk_id not in (select chunk_id from recent_kept)
    union all
    (select distinct on (r.chunk_id) r.chunk_id, 'failures', r.score, r.failure_id, 1, r.failure_id
     from resolutions r
     where r.chunk_id not in (select chunk_id from recent_kept)
       and r.failure_id not in (select chunk_id from recent_kept)
       and r.chunk_id not in (select chunk_id from failed)
     order by r.chunk_id, r.score desc)
  ),
  failures_kept as (
    select x.*
    from (select f.*, c.n_tokens,
                 sum(c.n_tokens) over (order by f.score desc, f.grp_id desc, f.sub
                                       rows unbounded preceding) as run
          from failure_rows f
          join recall.chunks c on c.chunk_id = f.chunk_id) x
    where x.run <= token_budget * failure_share
  ),
  shown as (
    select chunk_id from recent_kept union all select chunk_id from failures_kept
  ),
  -- ... then Related, within the rest of the budget; a code block whose whole message is
  -- shown (as a message or turn pair, here or above) is left out
  related_rows as (
    select r.chunk_id, r.section, r.score, r.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of, c.n_tokens
    from related r
    join recall.chunks c on c.chunk_id = r.chunk_id
    where r.chunk_id not in (select chunk_id from shown)
      and not (c.kind = 'code' and exists (
            select from recall.chunks o
            where o.kind in ('turn_pair', 'window', 'message') and o.message_ids @> c.message_ids
              and (o.chunk_id in (select chunk_id from shown)
                   or o.chunk_id in (select chunk_id from related))))
  ),
  related_kept as (
    select x.*
    from (select r.*, sum(r.n_tokens) over (order by r.score desc, r.chunk_id desc
                                            rows unbounded preceding) as run
          from related_rows r) x
    where x.run <= token_budget - coalesce((select sum(n_tokens) from recent_kept), 0)
                                - coalesce((select sum(n_tokens) from failures_kept), 0)
  ),
  ordered as (
    select k.*,
           row_number() over (order by case k.section when 'recent' then 1 when 'related' then 2 else 3 end,
                                       k.score desc, k.grp_id desc, k.sub) as pos
    from (select chunk_id, section, score, grp_id, sub, resolution_of from recent_kept
          union all
          select chunk_id, section, score, grp_id, sub, resolution_of from failures_kept
          union all
          select chunk_id, section, score, grp_id, sub, resolution_of from related_kept) k
  )
  select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, o.score,
         recall._similarity(c.embedding, related_embedding),
         0::float8,
         recall._recency(extract(epoch from now_ts - c.created_at)::float8, 30 * 86400),
         c.importance::float8, c.n_tokens,
         sum(c.n_tokens) over (order by o.pos rows unbounded preceding),
         case when o.resolution_of is null then c.metadata
              else c.metadata || jsonb_build_object('resolution_of', o.resolution_of) end,
         c.message_ids, o.section
  from ordered o
  join recall.chunks c on c.chunk_id = o.chunk_id
  order by o.pos;
end
$$;

comment on function recall.auto_context_v3 is $c$
auto_context v3: the context for the start of a session, in three
sections, each row labelled. Scope: chunks whose metadata has this project and branch; a
branch with no history yet falls back to its project. The sections are filled in turn, each
from what the ones before did not show:
  recent   - the newest turn_pair/window/message/summary chunks in scope (at most 20), newest first;
             score = 0.5 ^ (age / 7 days); within recent_share of the budget
  failures - chunks that record a failure (recall._is_failure: a tool result flagged
             is_error, else a traceback, an error line, failing tests, a non-zero exit code,
             a revert), in scope, the best 10 by cosine similarity to the task (or latest work)
             + 0.2 * 0.5 ^ (age / 30 days); each followed by its resolution, the first
             assistant thinking/text after it in its session (metadata.resolution_of = the
             failure's chunk_id); within failure_share of the budget
  related  - recall.hybrid_recall_v3 for the task text/embedding, or, without a task, for the
             latest session in scope (its summary or title, and its summary embedding or the
             centroid of its chunks; that session's own chunks left out); chunks of file tools
             (Read, Write, Edit, MultiEdit, NotebookEdit, NotebookRead, Glob, Grep, LS: the
             repository holds that) left out, other tool chunks count 0.8 of their score, a
             code chunk whose message is shown whole left out; the budget the others left
Rows come ordered recent, related, failures, each by score; cumulative_tokens runs over all;
recency = 0.5 ^ (age / 30 days), 0 past 1000 half-lives (recall._recency).
Changes from v2: Related comes from recall.hybrid_recall_v3 (text_rank is BM25 with inverse
document frequency within the agent; LoCoMo recall@10 0.812 -> 0.845, docs/BENCHMARKS.md).
$c$;
