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

-- save_summary: see the COMMENT below
create or replace function recall.save_summary(
  agent_id text, session_id text, summary text, model text, summary_at timestamptz default null)
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_at timestamptz := coalesce(save_summary.summary_at, now());
  s recall.sessions;
  v_content text;
  v_tokens int;
  v_metadata jsonb;
  v_created timestamptz;
  v_chunk bigint;
begin
  if save_summary.agent_id is null or save_summary.agent_id = '' or save_summary.session_id is null
     or save_summary.session_id = '' then
    raise exception 'agent_id and session_id are required' using errcode = '22023';
  end if;
  if coalesce(btrim(save_summary.summary, E' \t\r\n'), '') = '' then
    raise exception 'summary is empty' using errcode = '22023';
  end if;
  if coalesce(btrim(save_summary.model), '') = '' or save_summary.model = 'extractive' then
    raise exception 'model must name what wrote the summary (''extractive'' is recall.summarize_sessions''s own), got %',
      coalesce(quote_literal(save_summary.model), 'NULL') using errcode = '22023';
  end if;
  update recall.sessions x
     set summary = save_summary.summary, summary_model = save_summary.model, summary_at = v_at
   where x.agent_id = save_summary.agent_id and x.session_id = save_summary.session_id
     and x.session_id <> 'memories:' || save_summary.agent_id
  returning x.* into s;
  if s.session_id is null then
    raise exception 'agent % has no session %', save_summary.agent_id, save_summary.session_id using errcode = 'P0002';
  end if;
  -- the chunk recall finds it by, embedded by the worker (its vector kept while its text is the same)
  v_content := 'Summary of session' || coalesce(' "' || nullif(s.title, '') || '"', '') || ': ' || save_summary.summary;
  v_tokens := recall._estimate_tokens(v_content);
  v_created := coalesce(s.ended_at, s.started_at);
  v_metadata := s.metadata || jsonb_strip_nulls(jsonb_build_object('project', s.project, 'branch', s.branch))
                || jsonb_build_object('summary_model', save_summary.model);
  insert into recall.chunks as c
    (agent_id, session_id, kind, first_seq, part, message_ids, content, n_tokens, created_at,
     importance, metadata)
  values (save_summary.agent_id, save_summary.session_id, 'summary', 0, 0, '{}', v_content, v_tokens, v_created, 0.8, v_metadata)
  on conflict (agent_id, session_id, kind, first_seq, part) do update
    set content = excluded.content, n_tokens = excluded.n_tokens, created_at = excluded.created_at,
        metadata = excluded.metadata,
        embedding = case when c.content = excluded.content then c.embedding end,
        embedding_model = case when c.content = excluded.content then c.embedding_model end,
        embedded_at = case when c.content = excluded.content then c.embedded_at end
  returning c.chunk_id into v_chunk;
  perform pg_notify('recall_chunks', 'pending');    -- wake a listening worker
  return v_chunk;
end
$$;

comment on function recall.save_summary(text, text, text, text, timestamptz) is $c$
Keep summary as the summary of the agent's session, written by model (an LLM's name, or whatever
wrote it: not 'extractive', the database's own from recall.summarize_sessions): in
recall.sessions (summary, summary_model, summary_at: summary_at, default now()) and as the
session's 'summary' chunk, 'Summary of session "<title>": <summary>', importance 0.8, with the
session's metadata, project and branch, which the embedding worker embeds (its vector kept while
its text is unchanged) and recall then finds like any memory. An extractive summary made later
keeps this text (it renews the session's embedding only). Returns the chunk's id. What
`pyrecall summarize --summarize-with MODEL` calls for each session; an export carries what it
kept. Errors: agent_id, session_id, summary or model missing, model 'extractive': 22023; no
such session (the memories session is none): P0002.
$c$;
