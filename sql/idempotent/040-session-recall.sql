-- 040-session-recall
-- Session summaries, which session-aware retrieval ranks sessions by. The released versions of
-- recall.session_recall (two stages: the best sessions, then the best chunks inside them) and
-- recall.auto_context (the session-start context: recent work, related work, failures to avoid)
-- live in sql/released/; their stable names in 080-stable-names.sql.

-- _summarize_extractive: the extractive summary of the given sessions, made without an LLM.
-- The session's embedding is the centroid of its chunk embeddings; its summary is the text of
-- the chunks nearest that centroid (the most central ones), in conversation order. A session
-- whose summary an LLM wrote (summary_model other than 'extractive') keeps its text. Returns the
-- number of sessions updated (those with an embedded chunk). The sessions are named by agent
-- and id (agent_ids[i], session_ids[i]).
drop function if exists recall._summarize_extractive(text[], int);  -- before 010-agent-first-keys
create or replace function recall._summarize_extractive(agent_ids text[], session_ids text[], max_chars int)
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  n bigint;
begin
  with
  -- the centroid of each session's embedded chunks (curated memories are no conversation: the
  -- memories session gets no summary)
  centroids as (
    select c.agent_id, c.session_id, avg(c.embedding) as centroid
    from recall.chunks c
    where (c.agent_id, c.session_id) in (select * from unnest(_summarize_extractive.agent_ids,
                                                               _summarize_extractive.session_ids))
      and c.embedding is not null and c.kind not in ('summary', 'memory')
    group by c.agent_id, c.session_id
  ),
  -- the chunks of a session from most to least central
  central as (
    select c.agent_id, c.session_id, c.first_seq, c.part, c.content,
           row_number() over (partition by c.agent_id, c.session_id
                              order by c.embedding <=> m.centroid, c.chunk_id) as r
    from recall.chunks c
    join centroids m using (agent_id, session_id)
    where c.embedding is not null and c.kind in ('turn_pair', 'window', 'message')
  ),
  -- the central chunks, in conversation order, within max_chars
  picked as (
    select agent_id, session_id, string_agg(content, E'\n' order by first_seq, part) as summary
    from (select x.*, sum(char_length(x.content)) over (partition by x.agent_id, x.session_id order by x.r) as total
          from central x) y
    where y.r = 1 or y.total <= max_chars
    group by agent_id, session_id
  ),
  updated as (
    update recall.sessions s
       set summary_embedding = m.centroid,
           summary = case when s.summary_model is null or s.summary_model = 'extractive'
                          then left(p.summary, max_chars) else s.summary end,
           summary_model = coalesce(nullif(s.summary_model, 'extractive'), 'extractive'),
           summary_at = now()
      from centroids m
      left join picked p using (agent_id, session_id)
     where s.agent_id = m.agent_id and s.session_id = m.session_id
    returning 1
  )
  select count(*) into n from updated;
  return n;
end
$$;

-- summarize_sessions: the extractive summary (_summarize_extractive) of every session of the
-- agent (of every agent when agent_id is NULL). Returns the number of sessions updated;
-- only_stale: only those with chunks embedded since the last one.
create or replace function recall.summarize_sessions(
  agent_id text default null, only_stale boolean default true, max_chars int default 1200)
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
begin
  if max_chars is null or max_chars < 1 then
    raise exception 'max_chars must be a positive number of characters, got %',
      coalesce(max_chars::text, 'NULL') using errcode = '22023';
  end if;
  if only_stale is null then
    raise exception 'only_stale must be true or false, not NULL' using errcode = '22023';
  end if;
  return (
    select recall._summarize_extractive(coalesce(array_agg(s.agent_id), '{}'),
                                        coalesce(array_agg(s.session_id), '{}'), max_chars)
    from recall.sessions s
    where (summarize_sessions.agent_id is null or s.agent_id = summarize_sessions.agent_id)
      and (not only_stale or s.summary_at is null or exists (
            select from recall.chunks c
            where c.agent_id = s.agent_id and c.session_id = s.session_id and c.kind <> 'summary'
              and c.embedded_at > s.summary_at)));
end
$$;

-- summarize_quiet_sessions: what the embedding worker runs between batches. The sessions with
-- nothing new for `quiet` (their last message older than that) whose summary is stale (none
-- yet, chunks embedded since it was made, or, given `model`, made by another model) get their
-- extractive summary; returns their ids (at most max_sessions, the longest quiet first), for the
-- caller to have `model` rewrite the text. A session still being written to is left alone: its
-- summary is made once, when it goes quiet, not at every message.
create or replace function recall.summarize_quiet_sessions(
  quiet interval default '10 minutes', agent_id text default null, model text default null,
  max_chars int default 1200, max_sessions int default 50)
returns table (session_id text)
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  agents text[];
  ids text[];
begin
  if quiet is null or quiet < interval '0' then
    raise exception 'quiet must be a duration of at least 0, got %', coalesce(quiet::text, 'NULL')
      using errcode = '22023';
  end if;
  if max_chars is null or max_chars < 1 or max_sessions is null or max_sessions < 1 then
    raise exception 'max_chars and max_sessions must be positive' using errcode = '22023';
  end if;
  select array_agg(x.agent_id order by x.last_at, x.session_id),
         array_agg(x.session_id order by x.last_at, x.session_id) into agents, ids
  from (
    select s.agent_id, s.session_id, coalesce(s.ended_at, s.started_at) as last_at
    from recall.sessions s
    where (summarize_quiet_sessions.agent_id is null or s.agent_id = summarize_quiet_sessions.agent_id)
      and coalesce(s.ended_at, s.started_at) < now() - quiet
      and (s.summary_at is null
           or (summarize_quiet_sessions.model is not null
               and s.summary_model is distinct from summarize_quiet_sessions.model)
           or exists (select from recall.chunks c
                      where c.agent_id = s.agent_id and c.session_id = s.session_id and c.kind <> 'summary'
                        and c.embedded_at > s.summary_at))
      -- something to summarize: an embedded chunk of the conversation
      and exists (select from recall.chunks c
                  where c.agent_id = s.agent_id and c.session_id = s.session_id and c.embedding is not null
                    and c.kind not in ('summary', 'memory'))
    order by coalesce(s.ended_at, s.started_at), s.session_id
    limit max_sessions) x;
  if ids is null then
    return;
  end if;
  perform recall._summarize_extractive(agents, ids, max_chars);
  return query select u.id from unnest(ids) as u(id);
end
$$;

comment on function recall.summarize_quiet_sessions(interval, text, text, int, int) is
  'The extractive summary of the sessions quiet for `quiet` whose summary is stale (none, chunks embedded since, or another model''s when `model` is given); returns their ids, longest quiet first, at most max_sessions. 22023 for a bad argument.';
