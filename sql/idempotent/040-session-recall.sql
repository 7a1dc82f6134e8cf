-- 040-session-recall
-- Session-aware retrieval: session summaries, recall.session_recall (two stages: the best
-- sessions, then the best chunks inside them) and recall.auto_context (the session-start
-- context: recent work, related work, failures to avoid).
--
-- Re-applied at every migrate; session_recall_v1 and auto_context_v1 are frozen once released.

-- summarize_sessions: an extractive summary per session, made without an LLM. The session's
-- embedding is the centroid of its chunk embeddings; its summary is the text of the chunks
-- nearest that centroid (the most central ones), in conversation order. A session whose
-- summary an LLM wrote (summary_model other than 'extractive') keeps its text. Returns the
-- number of sessions updated; only_stale: only those with chunks embedded since the last one.
create or replace function recall.summarize_sessions(
  agent_id text default null, only_stale boolean default true, max_chars int default 1200)
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  n bigint;
begin
  if max_chars is null or max_chars < 1 then
    raise exception 'max_chars must be a positive number of characters, got %',
      coalesce(max_chars::text, 'NULL') using errcode = '22023';
  end if;
  if only_stale is null then
    raise exception 'only_stale must be true or false, not NULL' using errcode = '22023';
  end if;
  with
  -- sessions to (re)summarize
  todo as (
    select s.session_id
    from recall.sessions s
    where (summarize_sessions.agent_id is null or s.agent_id = summarize_sessions.agent_id)
      and (not only_stale or s.summary_at is null or exists (
            select from recall.chunks c
            where c.session_id = s.session_id and c.kind <> 'summary'
              and c.embedded_at > s.summary_at))
  ),
  -- the centroid of each session's embedded chunks (curated memories are no conversation: the
  -- memories session gets no summary)
  centroids as (
    select c.session_id, avg(c.embedding) as centroid
    from recall.chunks c
    join todo t using (session_id)
    where c.embedding is not null and c.kind not in ('summary', 'memory')
    group by c.session_id
  ),
  -- the chunks of a session from most to least central
  central as (
    select c.session_id, c.first_seq, c.part, c.content,
           row_number() over (partition by c.session_id order by c.embedding <=> m.centroid, c.chunk_id) as r
    from recall.chunks c
    join centroids m using (session_id)
    where c.embedding is not null and c.kind in ('turn_pair', 'window', 'message')
  ),
  -- the central chunks, in conversation order, within max_chars
  picked as (
    select session_id, string_agg(content, E'\n' order by first_seq, part) as summary
    from (select x.*, sum(char_length(x.content)) over (partition by x.session_id order by x.r) as total
          from central x) y
    where y.r = 1 or y.total <= max_chars
    group by session_id
  ),
  updated as (
    update recall.sessions s
       set summary_embedding = m.centroid,
           summary = case when s.summary_model is null or s.summary_model = 'extractive'
                          then left(p.summary, max_chars) else s.summary end,
           summary_model = coalesce(nullif(s.summary_model, 'extractive'), 'extractive'),
           summary_at = now()
      from centroids m
      left join picked p using (session_id)
     where s.session_id = m.session_id
    returning 1
  )
  select count(*) into n from updated;
  return n;
end
$$;

-- session_recall_v1: two-stage, session-aware recall
create or replace function recall.session_recall_v1(
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
  dedup_similarity   float8      default 0.95)
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
  if summary_weight < 0 or session_weight < 0 or session_weight > 1 then
    raise exception 'summary_weight must be >= 0 and session_weight between 0 and 1'
      using errcode = '22023';
  end if;

  return query
  with
  -- stage 0: a wide pool of scored chunks, by hybrid_recall itself (no budget, no dedup yet)
  pool as (
    select h.*
    from recall.hybrid_recall_v1(
      agent_id => session_recall_v1.agent_id, query_text => session_recall_v1.query_text,
      query_embedding => session_recall_v1.query_embedding, k => 1000,
      exclude_session_id => session_recall_v1.exclude_session_id,
      filter => session_recall_v1.filter, kinds => session_recall_v1.kinds,
      since => session_recall_v1.since, until => session_recall_v1.until,
      half_life => session_recall_v1.half_life, as_of => session_recall_v1.as_of,
      candidates => session_recall_v1.candidates, dedup_similarity => 2) h
  ),
  -- stage 1: each session by its best chunk, the mean of its best three, and its summary
  per_session as (
    select p.session_id,
           max(p.score) as best,
           avg(p.score) filter (where p.r <= 3) as top3
    from (select x.session_id, x.score,
                 row_number() over (partition by x.session_id order by x.score desc) as r
          from pool x) p
    group by p.session_id
  ),
  sessions_scored as (
    select ps.session_id,
           0.5 * ps.best + 0.5 * ps.top3
           + summary_weight * coalesce(case when s.summary_embedding is not null
                                             and session_recall_v1.query_embedding is not null
                                        then 1 - (s.summary_embedding <=> session_recall_v1.query_embedding)
                                        end, 0) as session_score
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
                        session_recall_v1.k, session_recall_v1.token_budget,
                        session_recall_v1.dedup_similarity) f
  )
  select x.chunk_id, x.session_id, x.kind, x.content, x.created_at, f.score, x.similarity,
         x.text_rank, x.recency, x.importance, x.n_tokens, f.cumulative_tokens, x.metadata,
         x.message_ids, x.session_rank, x.session_score
  from finished f
  join reranked x on x.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.session_recall_v1 is $c$
session_recall v1 (frozen from its release): two-stage, session-aware recall.
1. A pool of scored chunks from recall.hybrid_recall_v1 (default weights, `candidates` per arm).
2. Each session of the pool gets session_score = 0.5 * its best chunk score + 0.5 * the mean of
   its best three + summary_weight * cosine(summary_embedding, query_embedding) (the summary
   embedding is the centroid of its chunks, see recall.summarize_sessions); the best
   n_sessions sessions are kept.
3. Their chunks are re-scored: score = (1 - session_weight) * chunk score + session_weight *
   session_score, then ordered, de-duplicated, cut to k and to token_budget as in
   hybrid_recall (recall._finish). session_rank / session_score tell where each row came from.
$c$;

-- session_recall_v2: two-stage, session-aware recall (see the COMMENT below)
create or replace function recall.session_recall_v2(
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
  -- every other argument is checked by hybrid_recall_v2, with the same messages

  return query
  with
  -- stage 0: a wide pool of scored chunks, by hybrid_recall itself with the caller's weights
  -- (no budget, no de-duplication yet)
  pool as (
    select h.*
    from recall.hybrid_recall_v2(
      agent_id => session_recall_v2.agent_id, query_text => session_recall_v2.query_text,
      query_embedding => session_recall_v2.query_embedding, k => 1000,
      exclude_session_id => session_recall_v2.exclude_session_id,
      filter => session_recall_v2.filter, kinds => session_recall_v2.kinds,
      since => session_recall_v2.since, until => session_recall_v2.until,
      vector_weight => session_recall_v2.vector_weight, text_weight => session_recall_v2.text_weight,
      recency_weight => session_recall_v2.recency_weight,
      importance_weight => session_recall_v2.importance_weight,
      half_life => session_recall_v2.half_life, as_of => session_recall_v2.as_of,
      candidates => session_recall_v2.candidates,
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
                                                          session_recall_v2.query_embedding), 0)
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
                        session_recall_v2.k, session_recall_v2.token_budget,
                        session_recall_v2.dedup_similarity) f
  )
  select x.chunk_id, x.session_id, x.kind, x.content, x.created_at, f.score, x.similarity,
         x.text_rank, x.recency, x.importance, x.n_tokens, f.cumulative_tokens, x.metadata,
         x.message_ids, x.session_rank, x.session_score
  from finished f
  join reranked x on x.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.session_recall_v2 is $c$
session_recall v2 (frozen from its release): two-stage, session-aware recall.
1. A pool of scored chunks from recall.hybrid_recall_v2 with this call's weights
   (vector_weight, text_weight, recency_weight, importance_weight, half_life; `candidates` per
   arm; no budget and no de-duplication yet).
2. Each session of the pool gets session_score = 0.5 * its best chunk score + 0.5 * (the sum
   of its best three) / 3 + summary_weight * cosine(summary_embedding, query_embedding) (the
   summary embedding is the centroid of its chunks, see recall.summarize_sessions); the best
   n_sessions sessions are kept.
3. Their chunks are re-scored: score = (1 - session_weight) * chunk score + session_weight *
   session_score, then ordered, de-duplicated, cut to k and to token_budget as in
   hybrid_recall (recall._finish). session_rank / session_score tell where each row came from.
Changes from v1, measured on the LoCoMo development split (docs/BENCHMARKS.md): the pool
takes the caller's weights (v1 always used hybrid's defaults) and hybrid_recall_v2's text
query; the best three are summed over 3 (v1 took their mean, so a session with one chunk in
the pool scored its best twice and beat sessions with several good ones); NaN weights are
refused. LoCoMo (defaults): recall@10 0.735 -> 0.777, session_recall@5 0.743 -> 0.787.
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

-- the stable name recall.session_recall is defined in 060-recall-v4.sql (it calls v4)

-- _is_failure: a chunk that records something going wrong. A tool result that says whether it
-- failed (metadata.is_error, written by the Claude Code and OpenAI-style importers) is taken
-- at its word; other chunks by the marks of a failure in their text: a traceback, an error
-- line, failing tests, a non-zero exit code, a revert.
create or replace function recall._is_failure(kind text, content text, metadata jsonb)
returns boolean
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select case
    when kind = 'tool' and metadata ? 'is_error' then metadata->>'is_error' = 'true'
    else kind in ('tool', 'turn_pair', 'window', 'message') and (
           content ~* ('Traceback \(most recent call last\)|(^|\n)\s*(error|fatal|exception)\M[^\n]*:'
                       || '|\m[1-9][0-9]* (failed|errors?)\M|exit (code|status):? *[1-9]'
                       || '|\mreverted\M|\mgit revert\M|\mrolled back\M')
           or content ~ '\mFAILED\M')   -- pytest's verdict, in capitals only
  end
$$;

-- auto_context_v1: what an agent should know at the start of a session
create or replace function recall.auto_context_v1(
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
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', auto_context_v1.project,
                                                      'branch', auto_context_v1.branch));
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
       where c.agent_id = auto_context_v1.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope: its summary (or
  -- title) as text, its summary embedding (or the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = auto_context_v1.agent_id
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
           power(0.5::float8, (greatest(extract(epoch from now_ts - c.created_at), 0)
                               / 86400 / 7)::float8) as score
    from recall.chunks c
    where c.agent_id = auto_context_v1.agent_id
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
    from recall.hybrid_recall_v1(
      agent_id => auto_context_v1.agent_id, query_text => related_query,
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
           coalesce(1 - (c.embedding <=> related_embedding), 0)
           + 0.2 * power(0.5::float8, (greatest(extract(epoch from now_ts - c.created_at), 0)
                                      / 86400 / 30)::float8) as score,
           (select max(m.seq) from recall.messages m where m.message_id = any (c.message_ids)) as last_seq
    from recall.chunks c
    where c.agent_id = auto_context_v1.agent_id
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
         case when c.embedding is not null and related_embedding is not null
              then 1 - (c.embedding <=> related_embedding) end,
         0::float8,
         power(0.5::float8, (greatest(extract(epoch from now_ts - c.created_at), 0) / 86400 / 30)::float8),
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

comment on function recall.auto_context_v1 is $c$
auto_context v1 (frozen from its release): the context for the start of a session, in three
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
  related  - recall.hybrid_recall_v1 for the task text/embedding, or, without a task, for the
             latest session in scope (its summary or title, and its summary embedding or the
             centroid of its chunks; that session's own chunks left out); chunks of file tools
             (Read, Write, Edit, MultiEdit, NotebookEdit, NotebookRead, Glob, Grep, LS: the
             repository holds that) left out, other tool chunks count 0.8 of their score, a
             code chunk whose message is shown whole left out; the budget the others left
Rows come ordered recent, related, failures, each by score; cumulative_tokens runs over all;
recency = 0.5 ^ (age / 30 days).
$c$;

-- auto_context_v2: what an agent should know at the start of a session (v1 with
-- hybrid_recall_v2 for Related, and no underflow or NaN: see the COMMENT)
create or replace function recall.auto_context_v2(
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
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', auto_context_v2.project,
                                                      'branch', auto_context_v2.branch));
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
       where c.agent_id = auto_context_v2.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope: its summary (or
  -- title) as text, its summary embedding (or the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = auto_context_v2.agent_id
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
    where c.agent_id = auto_context_v2.agent_id
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
    from recall.hybrid_recall_v2(
      agent_id => auto_context_v2.agent_id, query_text => related_query,
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
    where c.agent_id = auto_context_v2.agent_id
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

comment on function recall.auto_context_v2 is $c$
auto_context v2 (frozen from its release): the context for the start of a session, in three
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
  related  - recall.hybrid_recall_v2 for the task text/embedding, or, without a task, for the
             latest session in scope (its summary or title, and its summary embedding or the
             centroid of its chunks; that session's own chunks left out); chunks of file tools
             (Read, Write, Edit, MultiEdit, NotebookEdit, NotebookRead, Glob, Grep, LS: the
             repository holds that) left out, other tool chunks count 0.8 of their score, a
             code chunk whose message is shown whole left out; the budget the others left
Rows come ordered recent, related, failures, each by score; cumulative_tokens runs over all;
recency = 0.5 ^ (age / 30 days), 0 past 1000 half-lives (recall._recency).
Changes from v1: Related comes from recall.hybrid_recall_v2 (its text query drops words found in
most of the agent's chunks); recency is never an underflow error (v1 failed for any agent with a
chunk older than ~20 years); a chunk whose embedding is all zeros has similarity NULL (v1: NaN).
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

-- the stable name recall.auto_context is defined in 060-recall-v4.sql (it calls v4)

grant execute on all functions in schema recall to recall_agent, recall_admin;
