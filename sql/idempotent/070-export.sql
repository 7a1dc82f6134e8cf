-- 070-export
-- recall.export_agent: all of an agent's memory as JSON lines; recall.import_records: the lines
-- that are not messages, restored. Re-applied at every migrate.
--
-- What an agent has that nothing else can make again: its sessions and messages (chunks, token
-- counts and vectors are derived from them), its curated memories (kind 'memory' chunks: no
-- messages), and the importance set by hand on a transcript chunk (recall.set_importance).
-- export_agent gives them as JSON objects, one a line, in the generic JSONL format that
-- `pyrecall import` reads (pyrecall/importers/jsonl.py), so that an export is imported like any
-- transcript: into another database, another server, a Citus cluster, a newer pyrecall:
--   1. a header: {"pyrecall_export": 1, "agent_id", "exported_at", "sessions", "messages",
--      "memories", "importance", "summaries"} (the counts of what follows);
--   2. each message, sessions by started_at, messages by seq: session_id, agent_id, role,
--      kind, content, created_at, importance, metadata, external_id (the key that makes a
--      second import of the same lines add nothing); the first line of a session also holds
--      the session's title, project, branch, started_at, ended_at and session_metadata (its
--      chunking, the coding agent that wrote it, ...);
--   3. each curated memory, oldest first: {"record": "memory", memory_id (its id here: what
--      "supersedes" refers to), memory_kind, content, importance, pinned, metadata, created_at,
--      valid_from, valid_until, supersedes, importance_set_at};
--   4. each transcript chunk whose importance was set by hand: {"record": "importance",
--      session_id, chunk_kind, first_external_id (the chunk's first message, by its source key:
--      seqs are numbered again by the importing database), part, importance, set_at};
--   4b. each session summary a model wrote (recall.save_summary; an extractive one is made
--      again by `pyrecall summarize`): {"record": "summary", session_id, summary, summary_model,
--      summary_at}, with vectors => true also its chunk's embedding, embedding_model, n_tokens
--      and content_md5;
--   4c. each session forgotten (recall.forgotten_sessions: deleted, not to be stored again from
--      a transcript that still holds it): {"record": "forgotten", session_id, forgotten_at};
--   5. with vectors => true only: each embedded transcript chunk's vector, {"record": "vector",
--      session_id, chunk_kind, first_external_id, part, content_md5 (of the chunk's text: the
--      destination derives its chunks again, and a vector is given only to the same text),
--      embedding_model, n_tokens, embedding}, and each text message's own counts and vector,
--      {"record": "turn", session_id, external_id, n_tokens, date_tokens, embedding}; a memory's
--      line then holds its embedding, embedding_model and n_tokens too.
-- Not exported: what is derived (chunks, and without vectors => true their token counts and
-- vectors: `pyrecall embed` makes them again, with whatever model the destination uses),
-- extractive session summaries (`pyrecall summarize`), what sync remembers of files, the recall
-- log.
--
-- SECURITY INVOKER: an agent's role exports its own rows only (row-level security), and
-- restores into its own agent only.

-- (a first version, never released, took no vectors argument)
drop function if exists recall.export_agent(text);

-- top-level keys whose value is JSON null dropped (jsonb_strip_nulls would reach into metadata)
create or replace function recall._without_nulls(j jsonb)
returns jsonb
language sql immutable
set search_path to pg_catalog, pg_temp
as $$
  select coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
  from jsonb_each(j) as e
  where jsonb_typeof(e.value) <> 'null'
$$;

-- export_agent: see the COMMENT below
create or replace function recall.export_agent(agent_id text, vectors boolean default false)
returns setof jsonb
language plpgsql stable security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_variable
declare
  n_sessions bigint;
  n_messages bigint;
  n_memories bigint;
  n_importance bigint;
  n_summaries bigint;
  n_forgotten bigint;
  n_vectors bigint := 0;
  n_turns bigint := 0;
begin
  if agent_id is null or agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if vectors is null then
    raise exception 'vectors must be true or false, not NULL' using errcode = '22023';
  end if;
  select count(distinct m.session_id), count(*) into n_sessions, n_messages
  from recall.messages m where m.agent_id = export_agent.agent_id;
  select count(*) filter (where c.kind = 'memory'),
         count(*) filter (where c.kind <> 'memory' and c.importance_set_at is not null)
    into n_memories, n_importance
  from recall.chunks c
  where c.agent_id = export_agent.agent_id
    and (c.kind = 'memory' or c.importance_set_at is not null);
  select count(*) into n_summaries
  from recall.sessions s
  where s.agent_id = export_agent.agent_id and s.summary is not null and s.summary_model <> 'extractive';
  select count(*) into n_forgotten
  from recall.forgotten_sessions f where f.agent_id = export_agent.agent_id;
  if vectors then
    select count(*) into n_vectors
    from recall.chunks c
    where c.agent_id = export_agent.agent_id and c.embedding is not null
      and c.kind not in ('memory', 'summary');
    select count(*) into n_turns
    from recall.messages m
    where m.agent_id = export_agent.agent_id and (m.n_tokens is not null or m.embedding is not null);
  end if;

  return next recall._without_nulls(
    jsonb_build_object('pyrecall_export', 1, 'agent_id', agent_id, 'exported_at', now(),
                       'sessions', n_sessions, 'messages', n_messages,
                       'memories', n_memories, 'importance', n_importance,
                       'summaries', n_summaries, 'forgotten', n_forgotten,
                       'vectors', case when vectors then n_vectors end,
                       'turns', case when vectors then n_turns end));

  -- the messages, each session's first line with the session
  return query
  select recall._without_nulls(
           jsonb_build_object('session_id', m.session_id, 'agent_id', m.agent_id, 'role', m.role,
                              'kind', m.kind, 'content', m.content, 'created_at', m.created_at,
                              'importance', m.importance, 'metadata', m.metadata,
                              'external_id', m.external_id)
           || case when m.seq = first.seq
                   then jsonb_build_object('title', s.title, 'project', s.project, 'branch', s.branch,
                                           'started_at', s.started_at, 'ended_at', s.ended_at,
                                           'session_metadata', s.metadata)
                   else '{}'::jsonb end)
  from recall.sessions s
  join recall.messages m on m.agent_id = s.agent_id and m.session_id = s.session_id
  cross join lateral (select min(f.seq) as seq from recall.messages f
                      where f.agent_id = export_agent.agent_id and f.session_id = s.session_id) first
  where s.agent_id = export_agent.agent_id and m.agent_id = export_agent.agent_id
  order by s.started_at, s.session_id, m.seq;

  -- the curated memories, oldest first (a memory comes after the one it supersedes)
  return query
  select recall._without_nulls(
           jsonb_build_object('record', 'memory', 'agent_id', c.agent_id, 'memory_id', c.chunk_id,
                              'memory_kind', c.memory_kind, 'content', c.content,
                              'importance', c.importance, 'pinned', c.pinned, 'metadata', c.metadata,
                              'created_at', c.created_at, 'valid_from', c.valid_from,
                              'valid_until', c.valid_until, 'supersedes', c.supersedes,
                              'importance_set_at', c.importance_set_at)
           || case when vectors and c.embedding is not null
                   then jsonb_build_object('embedding', c.embedding::text,
                                           'embedding_model', c.embedding_model, 'n_tokens', c.n_tokens)
                   else '{}'::jsonb end)
  from recall.chunks c
  where c.agent_id = export_agent.agent_id and c.kind = 'memory'
  order by c.chunk_id;

  -- the importance set by hand on transcript chunks
  return query
  select jsonb_build_object('record', 'importance', 'agent_id', c.agent_id, 'session_id', c.session_id,
                            'chunk_kind', c.kind, 'first_external_id', m.external_id, 'part', c.part,
                            'importance', c.importance, 'set_at', c.importance_set_at)
  from recall.chunks c
  join recall.messages m on m.agent_id = c.agent_id and m.session_id = c.session_id and m.seq = c.first_seq
  where c.agent_id = export_agent.agent_id and m.agent_id = export_agent.agent_id
    and c.kind <> 'memory' and c.importance_set_at is not null
  order by c.session_id, c.first_seq, c.kind, c.part;

  -- the summaries a model wrote (with vectors, their chunk's vector)
  return query
  select recall._without_nulls(
           jsonb_build_object('record', 'summary', 'agent_id', s.agent_id, 'session_id', s.session_id,
                              'summary', s.summary, 'summary_model', s.summary_model,
                              'summary_at', s.summary_at)
           || case when vectors and c.embedding is not null
                   then jsonb_build_object('embedding', c.embedding::text, 'embedding_model', c.embedding_model,
                                           'n_tokens', c.n_tokens, 'content_md5', md5(c.content))
                   else '{}'::jsonb end)
  from recall.sessions s
  left join recall.chunks c on c.agent_id = s.agent_id and c.session_id = s.session_id
                           and c.kind = 'summary' and c.first_seq = 0 and c.part = 0
  where s.agent_id = export_agent.agent_id and s.summary is not null and s.summary_model <> 'extractive'
  order by s.started_at, s.session_id;

  -- the sessions forgotten
  return query
  select jsonb_build_object('record', 'forgotten', 'agent_id', f.agent_id, 'session_id', f.session_id,
                            'forgotten_at', f.forgotten_at)
  from recall.forgotten_sessions f
  where f.agent_id = export_agent.agent_id
  order by f.forgotten_at, f.session_id;

  if not vectors then
    return;
  end if;
  -- the chunks' vectors (a session's summary is made again by summarize: left out)
  return query
  select recall._without_nulls(
           jsonb_build_object('record', 'vector', 'agent_id', c.agent_id, 'session_id', c.session_id,
                              'chunk_kind', c.kind, 'first_external_id', m.external_id, 'part', c.part,
                              'content_md5', md5(c.content), 'embedding_model', c.embedding_model,
                              'n_tokens', c.n_tokens, 'embedding', c.embedding::text))
  from recall.chunks c
  join recall.messages m on m.agent_id = c.agent_id and m.session_id = c.session_id and m.seq = c.first_seq
  where c.agent_id = export_agent.agent_id and m.agent_id = export_agent.agent_id
    and c.embedding is not null and c.kind not in ('memory', 'summary')
  order by c.session_id, c.first_seq, c.kind, c.part;
  -- the turns' counts and own vectors
  return query
  select recall._without_nulls(
           jsonb_build_object('record', 'turn', 'agent_id', m.agent_id, 'session_id', m.session_id,
                              'external_id', m.external_id, 'n_tokens', m.n_tokens,
                              'date_tokens', m.date_tokens, 'embedding', m.embedding::text))
  from recall.messages m
  where m.agent_id = export_agent.agent_id and (m.n_tokens is not null or m.embedding is not null)
  order by m.session_id, m.seq;
end
$$;

comment on function recall.export_agent(text, boolean) is $c$
All the memory of agent_id that cannot be derived again, as JSON objects in order, one per line
of an export file (`pyrecall export`): a header {"pyrecall_export": 1, "agent_id", "exported_at"
and the counts of what follows}, then each message (sessions by started_at, messages by seq) as a
line of the generic JSONL format `pyrecall import` reads, the session's title, project, branch,
started_at, ended_at and session_metadata on its first line; then each curated memory
({"record": "memory", ...}, oldest first), each transcript chunk whose importance was set by
hand ({"record": "importance", ...}), each session summary a model wrote ({"record":
"summary", ...}: recall.save_summary) and each session forgotten ({"record": "forgotten", ...}:
recall.forgotten_sessions). vectors => true (`pyrecall export --vectors`) adds each
embedded transcript chunk's vector with its model, token count and the md5 of its text
({"record": "vector", ...}), each text message's counts and own vector ({"record": "turn", ...})
and each memory's and model summary's vector, so that the destination need not embed again. Not
exported: chunks and extractive summaries (made again by ingestion and `summarize`), and without vectors the vectors and token
counts (`pyrecall embed`). SECURITY INVOKER: an agent's role exports its own rows only. An agent
with nothing stored gives the header alone. Errors: agent_id missing, vectors NULL: 22023.
$c$;

-- _import_vector: a vector of an export in pgvector's text form, when it has this database's
-- dimension and a direction (NULL otherwise: the chunk or message then waits for the embedding job)
create or replace function recall._import_vector(p_text text, p_dim int)
returns vector
language plpgsql immutable
set search_path to pg_catalog, public, pg_temp
as $$
declare
  v vector;
begin
  if p_text is null then
    return null;
  end if;
  v := p_text::vector;
  if vector_dims(v) <> p_dim or vector_norm(v) = 0 or vector_norm(v) = 'NaN' then
    return null;
  end if;
  return v;
exception when others then    -- not a vector's text (a file edited by hand): no vector
  return null;
end
$$;

-- import_records: see the COMMENT below (its earlier released shapes returned no summaries, no
-- forgotten: dropped to be made again)
do $$
begin
  if exists (select from pg_proc p
             where p.oid = to_regprocedure('recall.import_records(text, jsonb)')
               and not ('forgotten' = any (p.proargnames))) then
    drop function recall.import_records(text, jsonb);
  end if;
end
$$;
create or replace function recall.import_records(agent_id text, records jsonb)
returns table (memories int, importance int, vectors int, turns int, summaries int, forgotten int)
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_variable
declare
  r jsonb;
  ids jsonb := '{}';          -- a memory's id in the export -> its id here
  existing bigint;
  new_id bigint;
  sid text;
  seq int;
  n_memories int := 0;
  n_importance int := 0;
  n int;
  v_importance real;
  v_set_at timestamptz;
  v_part int;
  v_vector vector;
  v_tokens int;
  v_date_tokens int;
  n_vectors int := 0;
  n_turns int := 0;
  n_summaries int := 0;
  n_forgotten int := 0;
  here_model text;
  here_summary text;
  here_at timestamptz;
  dim int;
begin
  perform recall._check_memory_agent(import_records.agent_id);
  if records is null or jsonb_typeof(records) <> 'array' then
    raise exception 'records must be a JSON array, got %', coalesce('a JSON ' || jsonb_typeof(records), 'NULL')
      using errcode = '22023';
  end if;
  select (c.value #>> '{}')::int into dim from recall.config c where c.key = 'embedding_dim';

  -- memories, in the order of their ids there (one that supersedes another comes after it)
  for r in
    select x.value from jsonb_array_elements(records) as x
    where x.value->>'record' = 'memory'
    order by (x.value->>'memory_id')::bigint nulls last
  loop
    if coalesce(r->>'memory_kind', '') not in ('note', 'fact', 'decision', 'preference')
       or coalesce(btrim(r->>'content', E' \t\r\n'), '') = '' or r->>'valid_from' is null then
      raise exception 'a memory record needs memory_kind, content and valid_from: %', left(r::text, 200)
        using errcode = '22023';
    end if;
    -- imported before (the same kind, text and start): the same memory
    select c.chunk_id into existing
    from recall.chunks c
    where c.agent_id = import_records.agent_id and c.kind = 'memory'
      and c.memory_kind = r->>'memory_kind' and c.content = r->>'content'
      and c.valid_from = (r->>'valid_from')::timestamptz
    limit 1;
    v_vector := recall._import_vector(r->>'embedding', dim);
    if existing is not null then
      ids := ids || jsonb_build_object(r->>'memory_id', existing);
      -- stored by an import without vectors: its vector now, if it has none yet
      if v_vector is not null then
        v_tokens := greatest(coalesce((r->>'n_tokens')::int, 1), 1);
        update recall.chunks c
           set embedding = v_vector, embedding_model = r->>'embedding_model', embedded_at = now(),
               n_tokens = v_tokens, embed_attempts = 0, embed_error = null, embed_after = null
         where c.agent_id = import_records.agent_id and c.chunk_id = existing and c.embedding is null;
        get diagnostics n = row_count;
        n_vectors := n_vectors + n;
      end if;
      continue;
    end if;
    sid := recall._memory_session(import_records.agent_id);
    perform from recall.sessions s where s.agent_id = import_records.agent_id and s.session_id = sid
    for no key update;
    select coalesce(max(c.first_seq), 0) + 1 into seq
    from recall.chunks c
    where c.agent_id = import_records.agent_id and c.session_id = sid and c.kind = 'memory';
    insert into recall.chunks
      (agent_id, session_id, kind, first_seq, part, message_ids, content, n_tokens, created_at,
       importance, metadata, memory_kind, pinned, supersedes, valid_from, valid_until,
       importance_set_at, embedding, embedding_model, embedded_at)
    values
      (import_records.agent_id, sid, 'memory', seq, 0, '{}', r->>'content',
       case when v_vector is not null and (r->>'n_tokens')::int > 0 then (r->>'n_tokens')::int
            else recall._estimate_tokens(r->>'content') end,
       coalesce((r->>'created_at')::timestamptz, (r->>'valid_from')::timestamptz),
       coalesce((r->>'importance')::real, 0.7), coalesce(r->'metadata', '{}'),
       r->>'memory_kind', coalesce((r->>'pinned')::boolean, false),
       (ids->>(r->>'supersedes'))::bigint,
       (r->>'valid_from')::timestamptz, (r->>'valid_until')::timestamptz,
       (r->>'importance_set_at')::timestamptz, v_vector,
       case when v_vector is not null then r->>'embedding_model' end,
       case when v_vector is not null then now() end)
    returning chunk_id into new_id;
    if r ? 'memory_id' then
      ids := ids || jsonb_build_object(r->>'memory_id', new_id);
    end if;
    n_memories := n_memories + 1;
  end loop;
  if n_memories > 0 then
    -- the memories session started with the agent's first memory (as remember made it)
    update recall.sessions s
       set started_at = (select min(c.created_at) from recall.chunks c
                         where c.agent_id = import_records.agent_id and c.session_id = sid)
     where s.agent_id = import_records.agent_id and s.session_id = sid;
    perform pg_notify('recall_chunks', 'pending');    -- wake a listening worker
  end if;

  -- importance set by hand: the chunk that starts at the message of that source key
  for r in
    select x.value from jsonb_array_elements(records) as x
    where x.value->>'record' = 'importance'
  loop
    -- the values first (a Citus cluster allows no stable function in a distributed UPDATE's CASE
    -- or COALESCE)
    v_importance := (r->>'importance')::real;
    v_set_at := coalesce((r->>'set_at')::timestamptz, now());
    v_part := coalesce((r->>'part')::int, 0);
    update recall.chunks c
       set importance = v_importance, importance_set_at = v_set_at
     where c.agent_id = import_records.agent_id and c.session_id = r->>'session_id'
       and c.kind = r->>'chunk_kind' and c.part = v_part
       -- the chunk starting at the message of that source key (none while it is missing)
       and c.first_seq = (select m.seq from recall.messages m
                          where m.agent_id = import_records.agent_id and m.session_id = r->>'session_id'
                            and m.external_id = r->>'first_external_id')
       and (c.importance is distinct from v_importance
            or (r ? 'set_at' and c.importance_set_at is distinct from v_set_at));
    get diagnostics n = row_count;
    n_importance := n_importance + n;
  end loop;

  -- a chunk's vector: the chunk of that kind and part starting at the message of that source
  -- key, when its text is the text the vector was made of and it has none yet (else it stays
  -- pending: the embedding job makes it)
  for r in
    select x.value from jsonb_array_elements(records) as x
    where x.value->>'record' = 'vector'
  loop
    v_vector := recall._import_vector(r->>'embedding', dim);
    continue when v_vector is null;
    v_part := coalesce((r->>'part')::int, 0);
    v_tokens := greatest(coalesce((r->>'n_tokens')::int, 1), 1);
    update recall.chunks c
       set embedding = v_vector, embedding_model = r->>'embedding_model', embedded_at = now(),
           n_tokens = v_tokens, embed_attempts = 0, embed_error = null, embed_after = null
     where c.agent_id = import_records.agent_id and c.session_id = r->>'session_id'
       and c.kind = r->>'chunk_kind' and c.part = v_part
       -- the chunk starting at the message of that source key (none while it is missing)
       and c.first_seq = (select m.seq from recall.messages m
                          where m.agent_id = import_records.agent_id and m.session_id = r->>'session_id'
                            and m.external_id = r->>'first_external_id')
       and c.embedding is null and md5(c.content) = r->>'content_md5';
    get diagnostics n = row_count;
    n_vectors := n_vectors + n;
  end loop;

  -- a message's counts and own vector, where it has none yet
  for r in
    select x.value from jsonb_array_elements(records) as x
    where x.value->>'record' = 'turn'
  loop
    v_vector := recall._import_vector(r->>'embedding', dim);
    v_tokens := (r->>'n_tokens')::int;
    v_date_tokens := (r->>'date_tokens')::int;
    update recall.messages m
       set n_tokens = coalesce(m.n_tokens, v_tokens), date_tokens = coalesce(m.date_tokens, v_date_tokens),
           embedding = coalesce(m.embedding, v_vector)
     where m.agent_id = import_records.agent_id and m.session_id = r->>'session_id'
       and m.external_id = r->>'external_id'
       and ((m.n_tokens is null and v_tokens is not null)
            or (m.date_tokens is null and v_date_tokens is not null)
            or (m.embedding is null and v_vector is not null));
    get diagnostics n = row_count;
    n_turns := n_turns + n;
  end loop;
  -- a session's summary written by a model: kept as recall.save_summary keeps one (its time: now,
  -- when this database's chunks are as new as it), unless the session here has it already or a
  -- model's made later; then its chunk's vector, where the chunk has the text it was made of
  for r in
    select x.value from jsonb_array_elements(records) as x
    where x.value->>'record' = 'summary'
  loop
    select s.summary_model, s.summary, s.summary_at into here_model, here_summary, here_at
    from recall.sessions s
    where s.agent_id = import_records.agent_id and s.session_id = r->>'session_id';
    continue when not found;                          -- its messages are not here
    if here_model is null or here_model = 'extractive'
       or (here_summary is distinct from r->>'summary'
           and here_at < coalesce((r->>'summary_at')::timestamptz, '-infinity')) then
      perform recall.save_summary(import_records.agent_id, r->>'session_id', r->>'summary',
                                  r->>'summary_model');
      n_summaries := n_summaries + 1;
    end if;
    v_vector := recall._import_vector(r->>'embedding', dim);
    continue when v_vector is null;
    v_tokens := greatest(coalesce((r->>'n_tokens')::int, 1), 1);
    update recall.chunks c
       set embedding = v_vector, embedding_model = r->>'embedding_model', embedded_at = now(),
           n_tokens = v_tokens, embed_attempts = 0, embed_error = null, embed_after = null
     where c.agent_id = import_records.agent_id and c.session_id = r->>'session_id'
       and c.kind = 'summary' and c.first_seq = 0 and c.part = 0
       and c.embedding is null and md5(c.content) = r->>'content_md5';
    get diagnostics n = row_count;
    n_vectors := n_vectors + n;
  end loop;
  -- a session forgotten there: recorded, unless this database holds the session (an import
  -- adds, it never deletes)
  for r in
    select x.value from jsonb_array_elements(records) as x
    where x.value->>'record' = 'forgotten'
  loop
    continue when coalesce(r->>'session_id', '') = ''
               or r->>'session_id' = 'memories:' || import_records.agent_id;
    continue when exists (select from recall.sessions s
                          where s.agent_id = import_records.agent_id and s.session_id = r->>'session_id');
    insert into recall.forgotten_sessions (agent_id, session_id, forgotten_at)
    values (import_records.agent_id, r->>'session_id',
            coalesce((r->>'forgotten_at')::timestamptz, now()))
    on conflict on constraint forgotten_sessions_pkey do nothing;
    get diagnostics n = row_count;
    n_forgotten := n_forgotten + n;
  end loop;
  return query select n_memories, n_importance, n_vectors, n_turns, n_summaries, n_forgotten;
end
$$;

comment on function recall.import_records(text, jsonb) is $c$
Restore into agent_id the records of an export (recall.export_agent) that are not messages,
given as a JSON array; returns how many memories were stored, how many chunks' importance was
set, how many chunks got their vector and how many messages their counts or vector. {"record": "memory"}: stored as it was (kind, text, importance, pinned, metadata,
created_at, valid_from, valid_until; embedded later by the worker), "supersedes" mapped to the
new id of the memory it names; a memory stored already (same kind, text and valid_from) is not
stored twice (given the record's vector if it has none: counted in vectors). {"record": "importance"}: set on the chunk of that kind and part starting at the
message of session_id with that external_id (after its messages are imported: skipped while it is
missing). {"record": "vector"}: the vector, model and token count of the chunk of that kind and
part starting at that message, when the chunk has no vector yet and its text has the md5 the
export gives (a destination chunking otherwise embeds its own chunks); {"record": "turn"}: a
message's n_tokens, date_tokens and own vector where it has none; {"record": "summary"}: a
session's summary written by a model, kept as recall.save_summary keeps it (summary_at: now)
unless the session has that summary, or a model's made after the record's summary_at, already;
its chunk's vector as a chunk's (counted in vectors); returned in summaries; {"record":
"forgotten"}: the session recorded as forgotten (recall.forgotten_sessions: a transcript that
holds it does not store it) unless this database holds it; returned in forgotten. A vector not of this
database's dimension (recall.config embedding_dim), all zeros or unreadable is not stored (that
chunk stays pending). Other records are ignored. Errors: agent_id missing, records not a JSON array, a memory
without kind, text or valid_from: 22023 (nothing of the call is kept).
$c$;
