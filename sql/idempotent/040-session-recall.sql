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
language sql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
  with
  -- sessions to (re)summarize
  todo as (
    select s.session_id
    from recall.sessions s
    where (summarize_sessions.agent_id is null or s.agent_id = summarize_sessions.agent_id)
      and (not only_stale or s.summary_at is null or exists (
            select from recall.chunks c
            where c.session_id = s.session_id and c.embedded_at > s.summary_at))
  ),
  -- the centroid of each session's embedded chunks
  centroids as (
    select c.session_id, avg(c.embedding) as centroid
    from recall.chunks c
    join todo t using (session_id)
    where c.embedding is not null and c.kind <> 'summary'
    group by c.session_id
  ),
  -- the chunks of a session from most to least central
  central as (
    select c.session_id, c.first_seq, c.part, c.content,
           row_number() over (partition by c.session_id order by c.embedding <=> m.centroid, c.chunk_id) as r
    from recall.chunks c
    join centroids m using (session_id)
    where c.embedding is not null and c.kind in ('turn_pair', 'message')
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
  select count(*) from updated
$$;

-- session_recall_v1: two-stage, session-aware recall
create or replace function recall.session_recall_v1(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  n_sessions         int         default 5,
  token_budget       int         default null,
  exclude_session_id text        default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  half_life          interval    default '30 days',
  as_of              timestamptz default null,
  candidates         int         default 200,
  summary_weight     float8      default 0.5,
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

create or replace function recall.session_recall(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  n_sessions         int         default 5,
  token_budget       int         default null,
  exclude_session_id text        default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  half_life          interval    default '30 days',
  as_of              timestamptz default null,
  candidates         int         default 200,
  summary_weight     float8      default 0.5,
  session_weight     float8      default 0.5,
  dedup_similarity   float8      default 0.95)
returns table (
  chunk_id bigint, session_id text, kind text, content text, created_at timestamptz,
  score double precision, similarity double precision, text_rank double precision,
  recency double precision, importance double precision, n_tokens int,
  cumulative_tokens bigint, metadata jsonb, message_ids bigint[],
  session_rank int, session_score double precision)
language sql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
  select * from recall.session_recall_v1(
    agent_id, query_text, query_embedding, k, n_sessions, token_budget, exclude_session_id,
    filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
    dedup_similarity)
$$;

comment on function recall.session_recall is
  'The stable name of session-aware recall; calls recall.session_recall_v1 (see its comment).';

-- _is_failure: a chunk that records something going wrong: a tool result flagged as an
-- error, or text with the marks of a failure (a traceback, an error line, failing tests, a
-- non-zero exit code, a revert)
create or replace function recall._is_failure(kind text, content text, metadata jsonb)
returns boolean
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select coalesce((metadata->>'is_error')::boolean, false)
      or (kind in ('tool', 'turn_pair', 'message') and content ~* (
            'Traceback \(most recent call last\)|(^|\n)\s*(error|fatal|exception)\M[^\n]*:'
            || '|\m\d+ (failed|errors?)\M|\mFAILED\M|exit (code|status):? *[1-9]'
            || '|\mreverted\M|\mgit revert\M|\mrolled back\M'))
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
  related_query text := task_text;
  related_embedding vector := task_embedding;
begin
  if agent_id is null or agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if token_budget is null or token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', coalesce(token_budget::text, 'NULL')
      using errcode = '22023';
  end if;
  if recent_share < 0 or failure_share < 0 or recent_share + failure_share > 1 then
    raise exception 'recent_share and failure_share must be >= 0 and sum to at most 1'
      using errcode = '22023';
  end if;

  -- without a task, "related" means related to the latest work in scope: its summary, or
  -- the centroid of its embedded chunks
  if related_query is null and related_embedding is null then
    select s.summary_embedding, coalesce(s.summary, s.title)
      into related_embedding, related_query
    from recall.sessions s
    where s.agent_id = auto_context_v1.agent_id
      and (exclude_session_id is null or s.session_id <> exclude_session_id)
      and (auto_context_v1.project is null or s.project = auto_context_v1.project)
      and (auto_context_v1.branch is null or s.branch = auto_context_v1.branch)
    order by s.ended_at desc nulls last, s.started_at desc
    limit 1;
  end if;

  return query
  with
  -- Recent: the newest conversation chunks of this project and branch
  recent as (
    select c.chunk_id, 'recent'::text as section,
           power(0.5::float8, (greatest(extract(epoch from coalesce(as_of, now()) - c.created_at), 0)
                               / 86400 / 7)::float8) as score
    from recall.chunks c
    where c.agent_id = auto_context_v1.agent_id
      and c.metadata @> scope
      and c.kind in ('turn_pair', 'message')
      and (exclude_session_id is null or c.session_id <> exclude_session_id)
    order by c.created_at desc, c.chunk_id desc
    limit 20
  ),
  -- Related: hybrid recall for the task (or the latest work)
  related as (
    select h.chunk_id, 'related'::text as section, h.score
    from recall.hybrid_recall_v1(
      agent_id => auto_context_v1.agent_id, query_text => related_query,
      query_embedding => related_embedding, k => 30,
      exclude_session_id => exclude_session_id, as_of => as_of) h
    where related_query is not null or related_embedding is not null
  ),
  -- Failures to avoid: what went wrong before, most relevant (then newest) first
  failures as (
    select c.chunk_id, 'failures'::text as section,
           coalesce(1 - (c.embedding <=> related_embedding), 0)
           + 0.2 * power(0.5::float8, (greatest(extract(epoch from coalesce(as_of, now()) - c.created_at), 0)
                                      / 86400 / 30)::float8) as score
    from recall.chunks c
    where c.agent_id = auto_context_v1.agent_id
      and c.metadata @> scope
      and (exclude_session_id is null or c.session_id <> exclude_session_id)
      and recall._is_failure(c.kind, c.content, c.metadata)
    order by 3 desc, c.chunk_id desc
    limit 20
  ),
  -- each chunk once, in the first section that claims it (recent, failures, related)
  claimed as (
    select distinct on (u.chunk_id) u.chunk_id, u.section, u.score
    from (select *, 1 as prio from recent
          union all select *, 2 from failures
          union all select *, 3 from related) u
    order by u.chunk_id, u.prio
  ),
  -- each section fitted to its share of the budget (related gets the rest)
  shares as (
    select x.*, c.n_tokens, c.created_at,
           sum(c.n_tokens) over (partition by x.section order by x.score desc, c.created_at desc, x.chunk_id desc
                                 rows unbounded preceding) as section_tokens,
           case x.section when 'recent' then recent_share
                          when 'failures' then failure_share
                          else 1 - recent_share - failure_share end * token_budget as section_budget
    from claimed x
    join recall.chunks c on c.chunk_id = x.chunk_id
  ),
  kept as (
    select s.*, case s.section when 'recent' then 1 when 'related' then 2 else 3 end as section_order
    from shares s
    where s.section_tokens <= s.section_budget
  ),
  ordered as (
    select k.*, sum(k.n_tokens) over (order by k.section_order, k.score desc, k.created_at desc, k.chunk_id desc
                                      rows unbounded preceding) as cumulative_tokens,
           row_number() over (order by k.section_order, k.score desc, k.created_at desc, k.chunk_id desc) as pos
    from kept k
  )
  select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, o.score,
         case when c.embedding is not null and related_embedding is not null
              then 1 - (c.embedding <=> related_embedding) end,
         0::float8, 0::float8, c.importance::float8, c.n_tokens, o.cumulative_tokens, c.metadata,
         c.message_ids, o.section
  from ordered o
  join recall.chunks c on c.chunk_id = o.chunk_id
  order by o.pos;
end
$$;

comment on function recall.auto_context_v1 is $c$
auto_context v1 (frozen from its release): the context for the start of a session, in three
sections, each row labelled:
  recent   - the newest turn_pair/message chunks of this project and branch (metadata scope);
             score = 0.5 ^ (age / 7 days); share recent_share of the budget
  failures - chunks that record a failure: tool results flagged is_error, tracebacks, error
             lines, failing tests, non-zero exit codes, reverts (recall._is_failure); ranked by
             similarity to the task (or latest work) + 0.2 * 0.5 ^ (age / 30 days);
             share failure_share
  related  - recall.hybrid_recall_v1 for the task text/embedding, or, without a task, for the
             latest session in scope (its summary and summary embedding); the rest of the budget
A chunk appears once (recent before failures before related). Within a section rows stop at
its share; rows come ordered recent, related, failures; cumulative_tokens runs over all.
$c$;

create or replace function recall.auto_context(
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
language sql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
  select * from recall.auto_context_v1(agent_id, project, branch, task_text, task_embedding,
                                       token_budget, exclude_session_id, as_of, recent_share,
                                       failure_share)
$$;

comment on function recall.auto_context is
  'The stable name of the session-start context; calls recall.auto_context_v1 (see its comment).';

grant execute on all functions in schema recall to recall_agent, recall_admin;
