-- sql/released/v1.sql: release 1 of the public recall functions: hybrid_recall_v1,
-- session_recall_v1, auto_context_v1.
-- Never edit: the file's SHA-256 is pinned in sql/frozen.txt and `make lint`
-- (python -m pyrecall._sqlcheck) fails when it changes or when a function here reaches one that
-- is neither in this file, an older release, shared.sql nor sql/released/shared.txt.
-- sql/README.md says how a new version is released.

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
