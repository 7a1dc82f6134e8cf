-- sql/released/v10.sql: release 10: hybrid_recall_v10, session_recall_v10 and auto_context_v10:
-- v9's, v9's and v6's with the text arm asked for the query's 16 rarest words at most. Never
-- edit: the file's SHA-256 is pinned in sql/frozen.txt and `make lint` (python -m
-- pyrecall._sqlcheck) fails when it changes or when a function here reaches one that is neither
-- in this file, an older release, shared.sql nor sql/released/shared.txt. sql/README.md says how
-- a new version is released.
--
-- Why (docs/RELIABILITY.md bug 8, found 2026-11-27): on an agent above text_pair_min_rows
-- (10,000) chunks the text arm (recall._text_arm_v6) first looks up the chunks holding two
-- different query words, a tsquery of every pair, then sums each candidate's idf word by word:
-- a query of n words costs ~n^2. auto_context without a task asks for the latest session's
-- summary: 81 words, 6.6 s at 100k chunks (the SessionStart hook); a pasted log as a query, the
-- same. v10's text plan (recall._text_plan_v10) keeps the max_words rarest of the words v6's
-- keeps (recall.config text_max_words, default 16; rarest by their share of the agent's newest
-- chunks, as v6 ranks them), so the arm's cost no longer grows with the query. A query of at most
-- 16 such words (every LoCoMo question: at most 15 words in all) has v6's plan, hence v9's and
-- v6's rows; a longer one is searched by its 16 rarest words.
--
-- The copies below are v6's and v9's functions with only their callees renamed to v10
-- (_text_plan_v10 <- _recall_arms_v10 <- _hybrid_recall_v10 <- hybrid_recall_v10,
-- _session_recall_v10 <- session_recall_v10, auto_context_v10): a released function cannot be
-- changed, so a new plan needs new callers. The text arm itself (recall._text_arm_v6), the
-- fills (recall._fill_v9, whose turn values still weigh every word of the query) and the
-- security model are v6's and v9's (recall._recall_arms_v10 is SECURITY DEFINER as v6's, its
-- EXECUTE granted in sql/idempotent/090-security.sql). Called from another role's SECURITY DEFINER function,
-- _hybrid_recall_v10 takes v4's path (recall._hybrid_recall_v4, v3's plan: every word) as v6 does.

-- _text_plan_v10: recall._text_plan_v6 keeping the max_words rarest words (see above)

create or replace function recall._text_plan_v10(p_agent_id text, query_text text,
                                                out rank_q tsquery, out match_q tsquery,
                                                out agent_rows float8, out lexemes text[],
                                                out idfs float8[], out avg_len float8)
language plpgsql stable
set search_path to pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  select * into rank_q, match_q, agent_rows, lexemes, idfs, avg_len
  from (
  with
  conf as (
    select coalesce(max(value::float8) filter (where key = 'text_common_share'), 0.5) as common_share,
           coalesce(max(value::int) filter (where key = 'text_df_sample'), 100) as sample_size,
           coalesce(max(value::float8) filter (where key = 'text_match_max_rows'), 5000) as match_max,
           coalesce(max(value::int) filter (where key = 'text_max_words'), 16) as max_words
    from recall.config
    where key in ('text_common_share', 'text_df_sample', 'text_match_max_rows', 'text_max_words')
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
  -- v10: the max_words rarest words only (v6 kept them all: a query of n words cost the text
  -- arm a lookup of n(n-1)/2 word pairs on a large agent, seconds for a session summary)
  plan as (
    select string_agg(quote_literal(lexeme), ' | ' order by lexeme)::tsquery as rank_q,
           coalesce(string_agg(quote_literal(lexeme), ' | ' order by lexeme) filter (where matchable),
                    max(quote_literal(lexeme)) filter (where rarity = 1))::tsquery as match_q,
           array_agg(lexeme order by lexeme) as lexemes,
           array_agg(ln(1 + (n - share * n + 0.5) / (share * n + 0.5)) order by lexeme) as idfs
    from kept, conf
    where kept.rarity <= greatest(conf.max_words, 1)
  )
  -- no word to look up (stop words only, or a websearch query): _text_query's tsquery
  select coalesce(p.rank_q, recall._text_query(query_text)),
         coalesce(p.match_q, recall._text_query(query_text)),
         (select n from size_), p.lexemes, p.idfs,
         (select s.avg_len from sampled s)
  from plan p
  ) x;
end
$$;

-- _recall_arms_v10: recall._recall_arms_v6 with recall._text_plan_v10
create or replace function recall._recall_arms_v10(
  p_agent_id text, p_query_text text, p_query vector, p_n int, p_exclude_session_id text,
  p_filters jsonb[], p_kinds text[], p_since timestamptz, p_until timestamptz,
  p_as_of timestamptz, p_project text)
returns table (chunk_id bigint, text_rank float8, by_text boolean)
language plpgsql volatile security definer rows 200
set plan_cache_mode to force_generic_plan
set search_path to pg_catalog, public, pg_temp
as $$
declare
  plan record;
  vector_ids bigint[];
begin
  perform recall._check_reader_v6(p_agent_id);
  select * into plan from recall._text_plan_v10(p_agent_id, p_query_text);
  if p_query is not null then
    select array_agg(v.chunk_id) into vector_ids
    from recall._vector_arm_scoped(p_agent_id, p_query, p_n, p_exclude_session_id, p_filters,
                               p_kinds, p_since, p_until, p_as_of, p_project) v;
  end if;
  return query
  select t.chunk_id, t.text_rank, true
  from recall._text_arm_v6(p_agent_id, plan.match_q, plan.rank_q, plan.agent_rows, plan.lexemes,
                           plan.idfs, plan.avg_len, p_n, vector_ids, p_exclude_session_id,
                           p_filters, p_kinds, p_since, p_until, p_as_of, p_project) t
  union all
  select u.id, null::float8, false
  from unnest(vector_ids) as u(id);
end
$$;

-- _hybrid_recall_v10: recall._hybrid_recall_v6 with its candidates from recall._recall_arms_v10
create or replace function recall._hybrid_recall_v10(
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
  scope_project      text        default null,
  p_labels           boolean     default true)
returns setof recall.recall_row_v4
language plpgsql volatile security invoker
set plan_cache_mode to force_generic_plan
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  filters jsonb[];
  now_ts timestamptz := coalesce(_hybrid_recall_v10.as_of, now());
  half_life_s float8;
  ids bigint[];
  t_ids bigint[];
  t_ranks float8[];
begin
  perform recall._check_recall_args(
    _hybrid_recall_v10.agent_id, _hybrid_recall_v10.query_text, _hybrid_recall_v10.query_embedding,
    _hybrid_recall_v10.k, _hybrid_recall_v10.token_budget, _hybrid_recall_v10.min_similarity,
    _hybrid_recall_v10.filter, _hybrid_recall_v10.since, _hybrid_recall_v10.until,
    array[_hybrid_recall_v10.vector_weight, _hybrid_recall_v10.text_weight,
          _hybrid_recall_v10.recency_weight, _hybrid_recall_v10.importance_weight],
    _hybrid_recall_v10.half_life, _hybrid_recall_v10.candidates);
  if _hybrid_recall_v10.dedup_similarity is null or _hybrid_recall_v10.dedup_similarity = 'NaN' then
    raise exception 'dedup_similarity must be a number (above 1 turns de-duplication off), got %',
      coalesce(_hybrid_recall_v10.dedup_similarity::text, 'NULL') using errcode = '22023';
  end if;
  if _hybrid_recall_v10.turns_per_session < 1 then
    raise exception 'turns_per_session must be at least 1, got %', _hybrid_recall_v10.turns_per_session
      using errcode = '22023';
  end if;
  filters := recall._filter_disjuncts_v4(_hybrid_recall_v10.filter);
  half_life_s := extract(epoch from _hybrid_recall_v10.half_life);

  -- called from another role's SECURITY DEFINER function: the session's role is not the caller,
  -- so the definer arms could not tell what the caller may read: v4's path, under row-level
  -- security throughout
  if current_user::text is distinct from recall._session_role_v6() then
    return query select * from recall._hybrid_recall_v4(
      _hybrid_recall_v10.agent_id, _hybrid_recall_v10.query_text, _hybrid_recall_v10.query_embedding,
      _hybrid_recall_v10.k, _hybrid_recall_v10.token_budget, _hybrid_recall_v10.exclude_session_id,
      _hybrid_recall_v10.min_similarity, _hybrid_recall_v10.filter, _hybrid_recall_v10.kinds,
      _hybrid_recall_v10.since, _hybrid_recall_v10.until, _hybrid_recall_v10.vector_weight,
      _hybrid_recall_v10.text_weight, _hybrid_recall_v10.recency_weight,
      _hybrid_recall_v10.importance_weight, _hybrid_recall_v10.half_life,
      _hybrid_recall_v10.candidates, _hybrid_recall_v10.as_of, _hybrid_recall_v10.dedup_similarity,
      _hybrid_recall_v10.turns_per_session, _hybrid_recall_v10.scope_project);
    return;
  end if;

  -- the candidates (the vector arm's and the text arm's ids, the text ranks), searched as the
  -- owner once the caller may read the agent (else 42501)
  select array_agg(a.chunk_id),
         array_agg(a.chunk_id) filter (where a.by_text),
         array_agg(a.text_rank) filter (where a.by_text)
    into ids, t_ids, t_ranks
  from recall._recall_arms_v10(_hybrid_recall_v10.agent_id, _hybrid_recall_v10.query_text,
                              _hybrid_recall_v10.query_embedding, _hybrid_recall_v10.candidates,
                              _hybrid_recall_v10.exclude_session_id, filters, _hybrid_recall_v10.kinds,
                              _hybrid_recall_v10.since, _hybrid_recall_v10.until,
                              _hybrid_recall_v10.as_of, _hybrid_recall_v10.scope_project) a;

  return query
  with
  by_text as (
    select u.chunk_id, u.text_rank from unnest(t_ids, t_ranks) as u(chunk_id, text_rank)
  ),
  -- each candidate read once, as the caller (row-level security), by primary key: `= any` of a
  -- parameter is leakproof, so the index serves
  components as materialized (
    select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, c.n_tokens, c.metadata,
           c.message_ids, c.embedding, c.agent_id, c.memory_kind,
           case when c.embedding is null or _hybrid_recall_v10.query_embedding is null then null
                when vector_norm(c.embedding) = 0 or vector_norm(_hybrid_recall_v10.query_embedding) = 0 then null
                else 1 - (c.embedding <=> _hybrid_recall_v10.query_embedding) end as similarity,
           coalesce(t.text_rank, 0)::double precision as text_rank,
           case when half_life_s = 'Infinity' then 1::float8
                when greatest(extract(epoch from now_ts - c.created_at)::float8, 0) / half_life_s > 1000 then 0::float8
                else power(0.5::float8, greatest(extract(epoch from now_ts - c.created_at)::float8, 0) / half_life_s)
           end as recency,
           c.importance::double precision as importance
    from recall.chunks c
    left join by_text t on t.chunk_id = c.chunk_id
    where c.agent_id = _hybrid_recall_v10.agent_id and c.chunk_id = any (ids)
  ),
  -- from here on v4's steps, unchanged: the weighted sum (min_similarity) ...
  scored as (
    select x.*,
           _hybrid_recall_v10.vector_weight * coalesce(x.similarity, 0)
           + _hybrid_recall_v10.text_weight * x.text_rank
           + _hybrid_recall_v10.recency_weight * x.recency
           + _hybrid_recall_v10.importance_weight * x.importance as score
    from components x
    where _hybrid_recall_v10.min_similarity is null or x.similarity is null
       or x.similarity >= _hybrid_recall_v10.min_similarity
  ),
  -- ... turns_per_session ...
  capped as (
    select x.*
    from (select s.*,
                 row_number() over (partition by s.session_id
                                    order by s.score desc, s.created_at desc, s.chunk_id desc) as in_session
          from scored s) x
    where _hybrid_recall_v10.turns_per_session is null or x.kind = 'memory'
       or x.in_session <= _hybrid_recall_v10.turns_per_session
  ),
  -- ... the best max(4k, 40) in the final order, de-duplicated ...
  top as (
    select x.*, row_number() over (order by x.score desc, x.created_at desc, x.chunk_id desc) as pos
    from capped x
    order by pos
    limit greatest(4 * _hybrid_recall_v10.k, 40)
  ),
  normed as materialized (
    select t.*, vector_norm(t.embedding) as norm
    from top t
  ),
  distinct_ as (
    select t.*
    from normed t
    where not exists (
      select from normed b
      where b.pos < t.pos
        and (b.content = t.content
             or (_hybrid_recall_v10.dedup_similarity <= 1 and b.norm > 0 and t.norm > 0
                 and 1 - (b.embedding <=> t.embedding) >= _hybrid_recall_v10.dedup_similarity)))
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
         b.message_ids,
         case when b.kind = 'memory' then b.chunk_id end,
         b.agent_id,
         case when p_labels then (select s.title from recall.sessions s
                                 where s.agent_id = _hybrid_recall_v10.agent_id
                                   and s.session_id = b.session_id) end,
         case when p_labels then
           (select string_agg(r.role, '+' order by r.first_at)
            from (select m.role, min(u.i) as first_at
                  from unnest(b.message_ids) with ordinality as u(message_id, i)
                  join recall.messages m on m.message_id = u.message_id
                  where m.agent_id = _hybrid_recall_v10.agent_id
                  group by m.role) r) end,
         b.memory_kind
  from budgeted b
  where b.rnk <= _hybrid_recall_v10.k
    and (_hybrid_recall_v10.token_budget is null or b.cumulative_tokens <= _hybrid_recall_v10.token_budget)
  order by b.pos;
end
$$;

-- _session_recall_v10: recall._session_recall_v6 with its pool from recall._hybrid_recall_v10
create or replace function recall._session_recall_v10(
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
  importance_weight  float8      default 0.05,
  turns_per_session  int         default null)
returns setof recall.session_recall_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  pool_rows recall.recall_row_v4[];
  cap_ids bigint[];
  cap_scores float8[];
  cap_ranks int[];
  cap_session_scores float8[];
  fin_ids bigint[];
  fin_scores float8[];
  fin_pos bigint[];
  fin_tokens bigint[];
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
  if turns_per_session < 1 then
    raise exception 'turns_per_session must be at least 1, got %', turns_per_session
      using errcode = '22023';
  end if;
  -- every other argument is checked by _hybrid_recall_v10, with the same messages

  -- stage 0: the pool (v4's), without labels; read first, in a statement of its own (on a
  -- Citus cluster the statement below runs on the agent's shard, where a call of another
  -- recall function that queries the tables cannot be nested)
  select array_agg(h) into pool_rows
  from recall._hybrid_recall_v10(
      agent_id => _session_recall_v10.agent_id, query_text => _session_recall_v10.query_text,
      query_embedding => _session_recall_v10.query_embedding, k => 1000,
      exclude_session_id => _session_recall_v10.exclude_session_id,
      filter => _session_recall_v10.filter, kinds => _session_recall_v10.kinds,
      since => _session_recall_v10.since, until => _session_recall_v10.until,
      vector_weight => _session_recall_v10.vector_weight, text_weight => _session_recall_v10.text_weight,
      recency_weight => _session_recall_v10.recency_weight,
      importance_weight => _session_recall_v10.importance_weight,
      half_life => _session_recall_v10.half_life, as_of => _session_recall_v10.as_of,
      candidates => _session_recall_v10.candidates,
      dedup_similarity => 2, p_labels => false) h;

  -- stages 1 and 2 and turns_per_session: v4's, unchanged (the candidates as arrays)
  with
  pool as (select u.* from unnest(pool_rows) as u),
  -- stages 1 and 2, turns_per_session and _finish: v4's, unchanged
  per_session as (
    select p.session_id,
           max(p.score) as best,
           sum(p.score) filter (where p.r <= 3) / 3 as top3
    from (select x.session_id, x.score,
                 row_number() over (partition by x.session_id order by x.score desc) as r
          from pool x
          where x.kind <> 'memory') p
    group by p.session_id
  ),
  sessions_scored as (
    select ps.session_id,
           0.5 * ps.best + 0.5 * ps.top3
           + summary_weight * coalesce(recall._similarity(s.summary_embedding,
                                                          _session_recall_v10.query_embedding), 0)
             as session_score
    from per_session ps
    join recall.sessions s on s.agent_id = _session_recall_v10.agent_id and s.session_id = ps.session_id
  ),
  top_sessions as (
    select x.session_id, x.session_score,
           row_number() over (order by x.session_score desc, x.session_id)::int as session_rank
    from sessions_scored x
    order by session_rank
    limit n_sessions
  ),
  reranked as (
    select p.*, t.session_rank, t.session_score,
           (1 - session_weight) * p.score + session_weight * t.session_score as final_score
    from pool p
    join top_sessions t on t.session_id = p.session_id
    where p.kind <> 'memory'
    union all
    select p.*, null::int, null::float8, p.score
    from pool p
    where p.kind = 'memory'
  ),
  capped as (
    select x.*
    from (select r.*,
                 row_number() over (partition by r.session_id
                                    order by r.final_score desc, r.created_at desc, r.chunk_id desc) as in_session
          from reranked r) x
    where _session_recall_v10.turns_per_session is null or x.kind = 'memory'
       or x.in_session <= _session_recall_v10.turns_per_session
  )
  select array_agg(x.chunk_id), array_agg(x.final_score), array_agg(x.session_rank),
         array_agg(x.session_score)
    into cap_ids, cap_scores, cap_ranks, cap_session_scores
  from capped x;

  -- _finish (v4's, for the chunks of agent_id)
  select array_agg(f.chunk_id order by f.pos), array_agg(f.score order by f.pos),
         array_agg(f.pos order by f.pos), array_agg(f.cumulative_tokens order by f.pos)
    into fin_ids, fin_scores, fin_pos, fin_tokens
  from recall._finish_v6(_session_recall_v10.agent_id, cap_ids, cap_scores, _session_recall_v10.k,
                         _session_recall_v10.token_budget, _session_recall_v10.dedup_similarity) f;

  -- the labels of the rows returned (v4 read them for the whole pool)
  return query
  select x.chunk_id, x.session_id, x.kind, x.content, x.created_at, f.score, x.similarity,
         x.text_rank, x.recency, x.importance, x.n_tokens, f.cumulative_tokens, x.metadata,
         x.message_ids, c.session_rank, c.session_score,
         x.memory_id, x.agent_id,
         (select s.title from recall.sessions s
          where s.agent_id = _session_recall_v10.agent_id and s.session_id = x.session_id),
         (select string_agg(r.role, '+' order by r.first_at)
          from (select m.role, min(u.i) as first_at
                from unnest(x.message_ids) with ordinality as u(message_id, i)
                join recall.messages m on m.message_id = u.message_id
                where m.agent_id = _session_recall_v10.agent_id
                group by m.role) r),
         x.memory_kind
  from unnest(fin_ids, fin_scores, fin_pos, fin_tokens) as f(chunk_id, score, pos, cumulative_tokens)
  join unnest(cap_ids, cap_ranks, cap_session_scores) as c(chunk_id, session_rank, session_score)
    on c.chunk_id = f.chunk_id
  join unnest(pool_rows) as x on x.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

-- On a Citus cluster (the extension is there: docs/SCALING.md) the search and the read of its
-- candidates are planned per call, as v6's are (sql/released/v6.sql says why). One node keeps
-- the generic plans.
do $$
begin
  if exists (select from pg_extension where extname = 'citus') then
    alter function recall._recall_arms_v10 set plan_cache_mode to auto;
    alter function recall._hybrid_recall_v10 set plan_cache_mode to auto;
  end if;
end
$$;

-- hybrid_recall_v10: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v10(
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
begin
  if token_budget is null then
    return query select * from recall._hybrid_recall_v10(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null);
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
  -- v6's first k rows, then the budget filled turn by turn (recall._fill_v9)
  return query
  with
  ranked as materialized (
    select r.*
    from recall._hybrid_recall_v10(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null)
      with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_v9(hybrid_recall_v10.agent_id,
                         (select array_agg(x.chunk_id order by x.ordinality) from ranked x),
                         (select array_agg(x.score order by x.ordinality) from ranked x),
                         token_budget, query_text, turn_text_weight) f
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

comment on function recall.hybrid_recall_v10 is $c$
hybrid_recall v10: recall.hybrid_recall_v9 (see its comment, v7's and v4's: candidates, scores,
order, k, filters, the budget filled turn by turn, rows, security) whose text arm is asked for
the query's rarest words only: at most recall.config text_max_words (default 16) of the words
v9 would look up, the rarest by their share of the agent's newest chunks. A query of at most that
many such words gets v9's rows; a longer one costs what 16 words cost (v9: ~n^2 word pairs on an
agent above 10,000 chunks). The token budget's turn values still weigh every word of the query.
$c$;

-- session_recall_v10: see the COMMENT below for the contract
create or replace function recall.session_recall_v10(
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
  importance_weight  float8      default 0.05,
  turns_per_session  int         default null,
  turn_text_weight   float8      default 0.2)
returns setof recall.session_recall_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
begin
  if token_budget is null then
    return query select * from recall._session_recall_v10(
      agent_id, query_text, query_embedding, k, n_sessions, null, exclude_session_id,
      filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
      dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
      turns_per_session);
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
  -- v6's rows (sessions first), the budget filled turn by turn as hybrid_recall_v7 fills it
  -- (recall._fill_v9), the rows then given in v6's order
  return query
  with
  ranked as materialized (
    select r.*
    from recall._session_recall_v10(
      agent_id, query_text, query_embedding, k, n_sessions, null, exclude_session_id,
      filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
      dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
      turns_per_session) with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_v9(session_recall_v10.agent_id,
                         (select array_agg(x.chunk_id order by x.ordinality) from ranked x),
                         (select array_agg(x.score order by x.ordinality) from ranked x),
                         token_budget, query_text, turn_text_weight) f
  )
  select r.chunk_id, r.session_id, r.kind, coalesce(f.content, r.content), r.created_at, r.score,
         r.similarity, r.text_rank, r.recency, r.importance, f.n_tokens,
         sum(f.n_tokens) over (order by r.ordinality, f.pos rows unbounded preceding)::bigint,
         r.metadata || jsonb_strip_nulls(jsonb_build_object('merged_chunk_ids', to_jsonb(f.merged),
                                                            'trimmed_from_tokens', f.trimmed_from)),
         coalesce(f.message_ids, r.message_ids), r.session_rank, r.session_score, r.memory_id,
         r.agent_id, r.session_title, r.role, r.memory_kind
  from filled f
  join ranked r on r.chunk_id = f.chunk_id
  order by r.ordinality, f.pos;
end
$$;

comment on function recall.session_recall_v10 is $c$
session_recall v10: recall.session_recall_v9 (see its comment and v6's: the pool, the sessions
ranked, k, n_sessions, the budget filled turn by turn, rows, security) with its pool from
hybrid recall v10's search: the query's text arm asked for at most recall.config text_max_words
(default 16) of its rarest words. A query of at most that many such words gets v9's rows.
$c$;

-- auto_context_v10: see the COMMENT below for the contract
create or replace function recall.auto_context_v10(
  agent_id           text,
  project            text        default null,
  branch             text        default null,
  task_text          text        default null,
  task_embedding     vector      default null,
  token_budget       int         default 4000,
  exclude_session_id text        default null,
  as_of              timestamptz default null,
  recent_share       float8      default 0.3,
  failure_share      float8      default 0.2,
  all_projects       boolean     default false)
returns setof recall.auto_context_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', auto_context_v10.project,
                                                      'branch', auto_context_v10.branch));
  related_query text := nullif(btrim(task_text), '');
  related_embedding vector := task_embedding;
  latest text;
  now_ts timestamptz := coalesce(as_of, now());
  memory_session text := 'memories:' || auto_context_v10.agent_id;
  pinned_tokens bigint;
  budget_left bigint;
  related_rows recall.recall_row_v4[];
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
  if all_projects is null then
    raise exception 'all_projects must be true or false, not NULL' using errcode = '22023';
  end if;
  -- the caller may read agent_id (else 42501), decided as the policies do; called from another
  -- role's SECURITY DEFINER function, row-level security alone decides (as in v4)
  if current_user::text = recall._session_role_v6() then
    perform recall._check_reader_v6(auto_context_v10.agent_id);
  end if;

  -- a branch with no history yet (just created): the history of its project instead
  if scope ? 'branch' and not exists (
       select from recall.chunks c
       where c.agent_id = auto_context_v10.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope (the memories
  -- session is no work session): its summary (or title) as text, its summary embedding (or
  -- the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = auto_context_v10.agent_id
      and s.session_id <> memory_session
      and (exclude_session_id is null or s.session_id <> exclude_session_id)
      and (not scope ? 'project' or s.project = scope->>'project')
      and (not scope ? 'branch' or s.branch = scope->>'branch')
    order by s.ended_at desc nulls last, s.started_at desc, s.session_id desc
    limit 1;
    if latest is not null and related_embedding is null then
      select avg(c.embedding) into related_embedding
      from recall.chunks c
      where c.agent_id = auto_context_v10.agent_id and c.session_id = latest
        and c.embedding is not null and c.kind <> 'summary';
    end if;
  end if;

  -- Pinned: the agent's pinned memories valid now (at as_of), of this project or of none,
  -- most important (then newest) first, as many as the whole budget holds; the other sections
  -- share what they leave
  select coalesce(max(x.run), 0) into pinned_tokens
  from (select sum(c.n_tokens) over (order by c.importance desc, c.created_at desc, c.chunk_id desc
                                     rows unbounded preceding) as run
        from recall.chunks c
        where c.agent_id = auto_context_v10.agent_id and c.kind = 'memory' and c.pinned
          and (c.valid_until is null or c.valid_until > auto_context_v10.as_of)
          and (auto_context_v10.as_of is null or c.valid_from <= auto_context_v10.as_of)
          and (auto_context_v10.project is null or not c.metadata ? 'project'
               or c.metadata->>'project' = auto_context_v10.project)) x
  where x.run <= token_budget;
  budget_left := token_budget - pinned_tokens;

  -- Related's search, in a statement of its own (on a Citus cluster the statement below runs on
  -- the agent's shard, where a call of another recall function that queries the tables cannot
  -- be nested): hybrid recall v10's search (v6's with v10's text plan) for the task, or for the latest work
  if related_query is not null or related_embedding is not null then
    select array_agg(h) into related_rows
    from recall._hybrid_recall_v10(
      agent_id => auto_context_v10.agent_id, query_text => related_query,
      query_embedding => related_embedding,
      k => least(1000, greatest(60, token_budget / 25)),
      exclude_session_id => exclude_session_id, as_of => as_of,
      scope_project => case when auto_context_v10.all_projects then null
                            else auto_context_v10.project end,
      p_labels => false) h;
  end if;

  return query
  with
  -- Pinned (see above)
  pinned_kept as (
    select x.chunk_id, 'pinned'::text as section, x.score, x.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of, x.n_tokens
    from (select c.chunk_id, c.importance::float8 as score, c.n_tokens,
                 sum(c.n_tokens) over (order by c.importance desc, c.created_at desc, c.chunk_id desc
                                       rows unbounded preceding) as run
          from recall.chunks c
          where c.agent_id = auto_context_v10.agent_id and c.kind = 'memory' and c.pinned
            and (c.valid_until is null or c.valid_until > auto_context_v10.as_of)
            and (auto_context_v10.as_of is null or c.valid_from <= auto_context_v10.as_of)
            and (auto_context_v10.project is null or not c.metadata ? 'project'
                 or c.metadata->>'project' = auto_context_v10.project)) x
    where x.run <= token_budget
  ),
  -- Recent: the newest conversation chunks of this project and branch
  recent as (
    select c.chunk_id, 'recent'::text as section,
           recall._recency(extract(epoch from now_ts - c.created_at)::float8, 7 * 86400) as score
    from recall.chunks c
    where c.agent_id = auto_context_v10.agent_id
      and c.metadata @> scope
      and c.kind in ('turn_pair', 'window', 'message', 'summary')
      and (exclude_session_id is null or c.session_id <> exclude_session_id)
    order by c.created_at desc, c.chunk_id desc
    limit 20
  ),
  -- Related: hybrid recall v10's search for the task, or for the latest work (then from other sessions:
  -- the latest one is Recent already), in the project when one is given (with the memories
  -- of no project), agent-wide with all_projects. What the repository itself holds (files
  -- read, written or searched by a file tool) is left out, and other tool input/output counts
  -- 0.8 of its score, so that explanations and decisions come first.
  related as (
    select h.chunk_id, 'related'::text as section,
           h.score * case when h.kind = 'tool' then 0.8 else 1 end as score
    from unnest(related_rows) as h
    where h.session_id is distinct from latest
      and not (h.kind = 'tool' and h.metadata->>'tool_name' in
               ('Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit', 'NotebookRead', 'Glob',
                'Grep', 'LS'))
  ),
  -- Failures to avoid: what went wrong before, most relevant (then newest) first ...
  failed as (
    select c.chunk_id, c.session_id,
           coalesce(recall._similarity(c.embedding, related_embedding), 0)
           + 0.2 * recall._recency(extract(epoch from now_ts - c.created_at)::float8, 30 * 86400) as score,
           (select max(m.seq) from recall.messages m
            where m.agent_id = auto_context_v10.agent_id and m.message_id = any (c.message_ids)) as last_seq
    from recall.chunks c
    where c.agent_id = auto_context_v10.agent_id
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
      where c.agent_id = auto_context_v10.agent_id and c.session_id = f.session_id and m.agent_id = auto_context_v10.agent_id
        and c.kind in ('thinking', 'message', 'turn_pair', 'window')
        and m.role = 'assistant' and m.seq > f.last_seq
        and not recall._is_failure(c.kind, c.content, c.metadata)
      order by m.seq, c.part
      limit 1) r
  ),
  -- the sections after Pinned are filled one after the other, each from what the ones before
  -- left of budget_left: Recent within its share ...
  recent_kept as (
    select x.*
    from (select r.chunk_id, r.section, r.score, r.chunk_id as grp_id, 0 as sub,
                 null::bigint as resolution_of, c.n_tokens,
                 sum(c.n_tokens) over (order by r.score desc, r.chunk_id desc
                                       rows unbounded preceding) as run
          from recent r
          join recall.chunks c on c.agent_id = auto_context_v10.agent_id and c.chunk_id = r.chunk_id) x
    where x.run <= budget_left * recent_share
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
          join recall.chunks c on c.agent_id = auto_context_v10.agent_id and c.chunk_id = f.chunk_id) x
    where x.run <= budget_left * failure_share
  ),
  shown as (
    select chunk_id from pinned_kept union all
    select chunk_id from recent_kept union all select chunk_id from failures_kept
  ),
  -- ... then Related, within the rest of the budget; a code block whose whole message is
  -- shown (as a message or turn pair, here or above) is left out. The chat chunks shown or
  -- related are read once, by primary key (v4 searched the agent's chunks for each code block:
  -- ~600 ms for 160 related rows at 20k chunks)
  shown_chat as materialized (
    select o.message_ids
    from recall.chunks o
    where o.chunk_id in (select chunk_id from shown union all select chunk_id from related)
      and o.agent_id = auto_context_v10.agent_id
      and o.kind in ('turn_pair', 'window', 'message')
  ),
  related_rows as (
    select r.chunk_id, r.section, r.score, r.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of, c.n_tokens
    from related r
    join recall.chunks c on c.agent_id = auto_context_v10.agent_id and c.chunk_id = r.chunk_id
    where r.chunk_id not in (select chunk_id from shown)
      and not (c.kind = 'code' and exists (
            select from shown_chat o where o.message_ids @> c.message_ids))
  ),
  related_kept as (
    select x.*
    from (select r.*, sum(r.n_tokens) over (order by r.score desc, r.chunk_id desc
                                            rows unbounded preceding) as run
          from related_rows r) x
    where x.run <= budget_left - coalesce((select sum(n_tokens) from recent_kept), 0)
                               - coalesce((select sum(n_tokens) from failures_kept), 0)
  ),
  ordered as (
    select k.*,
           row_number() over (order by case k.section when 'pinned' then 0 when 'recent' then 1
                                                      when 'related' then 2 else 3 end,
                                       k.score desc, k.grp_id desc, k.sub) as pos
    from (select chunk_id, section, score, grp_id, sub, resolution_of from pinned_kept
          union all
          select chunk_id, section, score, grp_id, sub, resolution_of from recent_kept
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
         c.message_ids, o.section,
         case when c.kind = 'memory' then c.chunk_id end,
         c.agent_id, s.title,
         (select string_agg(r.role, '+' order by r.first_at)
          from (select m.role, min(u.i) as first_at
                from unnest(c.message_ids) with ordinality as u(message_id, i)
                join recall.messages m on m.message_id = u.message_id
                where m.agent_id = auto_context_v10.agent_id
                group by m.role) r),
         c.memory_kind
  from ordered o
  join recall.chunks c on c.agent_id = auto_context_v10.agent_id and c.chunk_id = o.chunk_id
  left join recall.sessions s on s.agent_id = auto_context_v10.agent_id and s.session_id = c.session_id
  order by o.pos;
end
$$;

comment on function recall.auto_context_v10 is $c$
auto_context v10: recall.auto_context_v6 (see its comment and v4's: sections pinned, recent,
related, failures, budget, rows, security) with the Related section searched by v10's text plan:
the task text, or without a task the latest session's summary (or title), asked for at most
recall.config text_max_words (default 16) of its rarest words. v6 asked for all of them: a
summary of 81 words took 6.6 s at 100k chunks (docs/RELIABILITY.md bug 8). The same rows as v6
when the related query holds at most that many such words.
$c$;
