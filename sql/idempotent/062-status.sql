-- pyrecall: what one agent's memory holds, at a glance (`pyrecall status`).
--
-- Not a retrieval function (nothing here ranks): counts an agent's rows, as the caller may see
-- them (SECURITY INVOKER: under row-level security an agent's role counts its own agent only,
-- another agent's as empty), each by the agent's index.

-- agent_status: one row of counts and dates for an agent; see the COMMENT below
create or replace function recall.agent_status(agent_id text)
returns table (
  sessions      bigint,
  messages      bigint,
  chunks        bigint,
  embedded      bigint,
  pending       bigint,
  failing       bigint,
  memories      bigint,
  pinned        bigint,
  first_at      timestamptz,
  last_at       timestamptz,
  sources       jsonb,
  models        jsonb,
  files         bigint,
  file_problems bigint,
  last_sync     timestamptz,
  forgotten     bigint,
  vector_path   text)
language sql stable security invoker
set search_path to pg_catalog, pg_temp
as $$
  with
  -- sessions, their span, and how many each coding agent or app wrote (metadata.source_agent)
  -- (the memories session, which holds curated memories, is no conversation)
  s as (
    select count(*) as n, min(x.started_at) as first_at, max(coalesce(x.ended_at, x.started_at)) as last_at
    from recall.sessions x
    where x.agent_id = agent_status.agent_id and x.session_id <> 'memories:' || agent_status.agent_id
  ),
  by_source as (
    select coalesce(jsonb_object_agg(y.source, y.n), '{}') as sources
    from (select coalesce(x.metadata->>'source_agent', '(unknown)') as source, count(*) as n
          from recall.sessions x
          where x.agent_id = agent_status.agent_id and x.session_id <> 'memories:' || agent_status.agent_id
          group by 1) y
  ),
  m as (
    select count(*) as n from recall.messages x where x.agent_id = agent_status.agent_id
  ),
  -- chunks of the conversations (memories apart), embedded or waiting for `pyrecall embed`
  -- (failing: its embedding failed at least once since its text last changed)
  c as (
    select count(*) filter (where x.kind <> 'memory') as n,
           count(x.embedding) filter (where x.kind <> 'memory') as embedded,
           count(*) filter (where x.embedding is null) as pending,
           count(*) filter (where x.embedding is null and x.embed_attempts > 0) as failing,
           count(*) filter (where x.kind = 'memory' and (x.valid_until is null or x.valid_until > now())) as memories,
           count(*) filter (where x.kind = 'memory' and x.pinned
                            and (x.valid_until is null or x.valid_until > now())) as pinned
    from recall.chunks x
    where x.agent_id = agent_status.agent_id
  ),
  -- the models that made its vectors (more than one space: the agent needs a re-embed)
  by_model as (
    select coalesce(jsonb_object_agg(y.model, y.n), '{}') as models
    from (select x.embedding_model as model, count(*) as n
          from recall.chunks x
          where x.agent_id = agent_status.agent_id and x.embedding is not null and x.embedding_model is not null
          group by 1) y
  ),
  -- the transcript files `pyrecall import` / `sync` read for it (folders remembered apart)
  f as (
    select count(*) filter (where x.format <> 'folder') as n,
           count(*) filter (where x.format <> 'folder' and x.problems > 0) as problems,
           max(x.synced_at) as last_sync
    from recall.source_files x
    where x.agent_id = agent_status.agent_id
  ),
  g as (
    select count(*) as n from recall.forgotten_sessions x where x.agent_id = agent_status.agent_id
  )
  select s.n, m.n, c.n, c.embedded, c.pending, c.failing, c.memories, c.pinned, s.first_at, s.last_at,
         by_source.sources, by_model.models, f.n, f.problems, f.last_sync, g.n,
         -- the way recall._vector_arm finds its nearest chunks (as recall.agent_stats says it)
         -- (nothing of an agent whose rows the caller may not see: not even whether it has an index)
         case
           when not exists (select from recall.chunks x
                            where x.agent_id = agent_status.agent_id and x.embedding is not null)
             then 'none (nothing embedded)'
           when (select i.index_oid from recall._agent_vector_index(agent_status.agent_id) i) is not null
             then 'own index'
           when c.embedded <= coalesce((select value::int from recall.config where key = 'exact_scan_max_rows'), 20000)
             then 'exact'
           when (select i.index_oid from recall._table_vector_index() i) is not null then 'table index'
           else 'exact (large: refresh the indexes)'
         end
  from s, by_source, m, c, by_model, f, g
$$;

comment on function recall.agent_status(text) is $c$
What an agent's memory holds, in one row: sessions (conversations; the memories session
aside) and messages; chunks of the conversations, embedded, and pending embedding (memories
included) of which failing (an embedding that failed since the text changed); current curated
memories and the pinned ones; the span of its sessions (first_at .. last_at); sources: sessions
per coding agent or app that wrote them ({"claude-code": 12, "aider": 3}); models: embedded
chunks per model; the transcript files imported for it, those with problems, and when one was
last read; sessions forgotten (not stored again); vector_path: how recall finds its nearest
chunks ('own index', 'exact', 'table index', 'exact (large: refresh the indexes)', or 'none
(nothing embedded)', which is all an agent whose rows the caller may not see shows). Counts
what the caller may see (row-level security). Every count by the agent's indexes: an agent of a
million chunks in a fraction of a second. `pyrecall status` prints it with what to do next.
$c$;
