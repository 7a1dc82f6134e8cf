-- 050-memories
-- Curated memories: recall.remember, recall.forget_memory, recall.pin_memory, recall.memories.
--
-- Re-applied at every migrate. A memory is a chunk of kind 'memory' in the agent's session
-- 'memories:<agent_id>' (sql/incremental/007-memories.sql): findable by keywords the moment it
-- is stored, by meaning once embedded (by the worker, like every chunk, or at once when the
-- caller passes the embedding), ranked with the transcripts by recall v4 (060-recall-v4.sql).
-- Every function runs as the caller (SECURITY INVOKER): row-level security applies, so a role
-- bound to one agent (recall.bind_agent) reaches that agent's memories only. A memory id that is
-- unknown, of another agent, or no memory is refused alike (SQLSTATE P0002, no_data_found):
-- nothing tells another agent's memory from a missing one.

-- _memory_not_found: the one error for an id that is not a memory of the agent
create or replace function recall._memory_not_found(p_agent_id text, p_memory_id bigint)
returns void
language plpgsql immutable
set search_path to pg_catalog, pg_temp
as $$
begin
  raise exception 'memory % not found for agent %', coalesce(p_memory_id::text, 'NULL'),
    quote_literal(p_agent_id)
    using errcode = 'P0002',
          hint = 'List the agent''s memories with recall.memories(agent_id) (pyrecall memories).';
end
$$;

-- _check_memory_agent: agent_id is required
create or replace function recall._check_memory_agent(p_agent_id text)
returns void
language plpgsql immutable
set search_path to pg_catalog, pg_temp
as $$
begin
  if p_agent_id is null or p_agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
end
$$;

-- _memory_session: the agent's memories session ('memories:<agent_id>', title 'Memories'),
-- created when missing
create or replace function recall._memory_session(p_agent_id text)
returns text
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  sid text := 'memories:' || p_agent_id;
begin
  insert into recall.sessions (session_id, agent_id, title)
  values (sid, p_agent_id, 'Memories')
  on conflict do nothing;
  -- a session of that name stored before 006 by another agent (the name check is NOT VALID)
  perform from recall.sessions s where s.agent_id = p_agent_id and s.session_id = sid;
  if not found then
    raise exception 'session % belongs to another agent: agent % cannot store memories',
      quote_literal(sid), quote_literal(p_agent_id) using errcode = '23514';
  end if;
  return sid;
end
$$;

-- remember: store a curated memory; see the COMMENT below for the contract
create or replace function recall.remember(
  agent_id        text,
  content         text,
  kind            text        default 'note',
  importance      float8      default 0.7,
  metadata        jsonb       default '{}',
  project         text        default null,
  supersedes      bigint      default null,
  embedding       vector      default null,
  pinned          boolean     default false,
  embedding_model text        default null)
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_variable
declare
  old recall.chunks;
  sid text;
  seq int;
  meta jsonb;
  dim int;
  new_id bigint;
begin
  perform recall._check_memory_agent(remember.agent_id);
  if remember.content is null or btrim(remember.content, E' \t\r\n') = '' then
    raise exception 'empty content: a memory needs text' using errcode = '22023';
  end if;
  if remember.kind is null or remember.kind not in ('note', 'fact', 'decision', 'preference') then
    raise exception 'unknown memory kind %: expected one of note, fact, decision, preference',
      coalesce(quote_literal(remember.kind), 'NULL') using errcode = '22023';
  end if;
  if remember.importance is null or remember.importance = 'NaN'
     or remember.importance < 0 or remember.importance > 1 then
    raise exception 'importance must be between 0 and 1, got %',
      coalesce(remember.importance::text, 'NULL') using errcode = '22023';
  end if;
  if remember.metadata is not null and jsonb_typeof(remember.metadata) <> 'object' then
    raise exception 'metadata must be a JSON object, got a JSON %', jsonb_typeof(remember.metadata)
      using errcode = '22023';
  end if;
  if remember.pinned is null then
    raise exception 'pinned must be true or false, not NULL' using errcode = '22023';
  end if;
  -- no credential is kept (009-secrets.sql); a vector of the text that held one is dropped with
  -- it (the worker embeds the text stored). Redacted here, not only by the chunk's trigger, so
  -- that the same memory told again is found below.
  if recall.redact(remember.content) is distinct from remember.content then
    remember.content := recall.redact(remember.content);
    remember.embedding := null;
  end if;
  if remember.embedding is not null then
    select value::int into dim from recall.config where key = 'embedding_dim';
    if vector_dims(remember.embedding) <> dim then
      raise exception 'embedding has % dimensions; this database stores %',
        vector_dims(remember.embedding), dim using errcode = '22023';
    end if;
    if vector_norm(remember.embedding) = 0 then
      raise exception 'embedding is all zeros: cosine similarity is undefined' using errcode = '22023';
    end if;
  end if;

  -- the memory replaced: the agent's, current (row-level security hides other agents' rows)
  if remember.supersedes is not null then
    select c.* into old
    from recall.chunks c
    where c.chunk_id = remember.supersedes and c.agent_id = remember.agent_id and c.kind = 'memory'
    for update;
    if not found then
      perform recall._memory_not_found(remember.agent_id, remember.supersedes);
    end if;
    if old.valid_until is not null then
      raise exception 'memory % was already superseded at %: supersede the memory that replaced it',
        remember.supersedes, old.valid_until using errcode = '22023';
    end if;
  end if;

  sid := recall._memory_session(remember.agent_id);
  -- numbered within the session (the chunks' key is session, agent, kind, first_seq, part);
  -- the session row's lock serialises concurrent remembers of one agent
  perform from recall.sessions s where s.agent_id = remember.agent_id and s.session_id = sid
  for no key update;

  -- the same memory held already (the same kind and project, the same text but for case and
  -- spacing, still true): its id, nothing stored twice (an agent told the same thing in every
  -- session keeps one memory of it); asked pinned, it is pinned, and given a vector while it has
  -- none, it takes it. A correction (supersedes) is always a new memory.
  if remember.supersedes is null then
    select c.chunk_id into new_id
    from recall.chunks c
    where c.agent_id = remember.agent_id and c.session_id = sid and c.kind = 'memory'
      and c.memory_kind = remember.kind
      and (c.valid_until is null or c.valid_until > now())
      and coalesce(c.metadata->>'project', '') = coalesce(nullif(remember.project, ''), '')
      and lower(btrim(regexp_replace(c.content, '\s+', ' ', 'g')))
          = lower(btrim(regexp_replace(remember.content, '\s+', ' ', 'g')))
    order by c.chunk_id
    limit 1;
    if new_id is not null then
      update recall.chunks c
         set pinned = true
       where c.agent_id = remember.agent_id and c.chunk_id = new_id and remember.pinned and not c.pinned;
      if remember.embedding is not null then
        update recall.chunks c
           set embedding = remember.embedding, embedding_model = remember.embedding_model,
               embedded_at = now(), embed_attempts = 0, embed_error = null, embed_after = null
         where c.agent_id = remember.agent_id and c.chunk_id = new_id and c.embedding is null;
      end if;
      return new_id;
    end if;
  end if;

  select coalesce(max(c.first_seq), 0) + 1 into seq
  from recall.chunks c where c.agent_id = remember.agent_id and c.session_id = sid and c.kind = 'memory';

  -- the project: as given, else that of the memory replaced
  meta := coalesce(remember.metadata, '{}')
          || jsonb_strip_nulls(jsonb_build_object('project',
               coalesce(nullif(remember.project, ''), old.metadata->>'project')));

  insert into recall.chunks
    (agent_id, session_id, kind, first_seq, part, message_ids, content, n_tokens, created_at,
     importance, metadata, embedding, embedding_model, embedded_at,
     memory_kind, pinned, supersedes, valid_from)
  values
    (remember.agent_id, sid, 'memory', seq, 0, '{}', remember.content,
     recall._estimate_tokens(remember.content), now(), remember.importance, meta,
     remember.embedding,
     case when remember.embedding is not null then remember.embedding_model end,
     case when remember.embedding is not null then now() end,
     remember.kind, remember.pinned or coalesce(old.pinned, false), remember.supersedes, now())
  returning chunk_id into new_id;

  -- the replaced memory stops being true now
  if remember.supersedes is not null then
    update recall.chunks c set valid_until = now()
    where c.chunk_id = remember.supersedes and c.agent_id = remember.agent_id;
  end if;
  if remember.embedding is null then
    perform pg_notify('recall_chunks', 'pending');    -- wake a listening worker
  end if;
  return new_id;
end
$$;

comment on function recall.remember(text, text, text, float8, jsonb, text, bigint, vector, boolean, text) is $c$
Store a curated memory of agent_id and return its id (memory_id = its chunk_id).
kind: note | fact | decision | preference (default note); importance in [0, 1] (default 0.7);
metadata: a JSON object, kept in the chunk's metadata with project (as given, else that of the
memory superseded); pinned: always in auto_context's Pinned section (v4).
The memory is a chunk of kind 'memory' in the session 'memories:<agent_id>' (created when
missing): findable by keywords at once; by meaning once embedded, by the embedding worker, or
at once when `embedding` is given (embedding_model records its model).
The same memory held already (same kind and project, the same text but for case and spacing,
still true) is not stored twice: its id is returned (pinned when pinned is asked, given the
embedding when it has none); with supersedes a new memory is always stored.
supersedes: the id of a current memory of the agent that this one replaces: that memory's
valid_until becomes now() (it stays stored) and this one's valid_from is now(); the new one is
pinned when either is, and keeps the old one's project when none is given. Recall (v4) returns
a superseded memory only with an as_of before its replacement.
A credential in content is stored redacted (recall.redact: recall.secret_patterns), and the
embedding given with such a text is dropped (the worker embeds the text stored).
Errors: agent_id missing, empty content, unknown kind, importance out of [0, 1], metadata not
an object, a wrong-sized or all-zero embedding, superseding a memory already superseded: 22023.
supersedes not a memory of this agent (unknown, another agent's, not a memory): P0002.
$c$;

-- forget_memory: delete one memory; see the COMMENT below
create or replace function recall.forget_memory(agent_id text, memory_id bigint)
returns int
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_variable
declare
  n int;
begin
  perform recall._check_memory_agent(forget_memory.agent_id);
  delete from recall.chunks c
  where c.chunk_id = forget_memory.memory_id and c.agent_id = forget_memory.agent_id
    and c.kind = 'memory';
  get diagnostics n = row_count;
  if n = 0 then
    perform recall._memory_not_found(forget_memory.agent_id, forget_memory.memory_id);
  end if;
  -- a memory that replaced this one no longer points at it
  update recall.chunks c set supersedes = null
  where c.agent_id = forget_memory.agent_id and c.kind = 'memory'
    and c.supersedes = forget_memory.memory_id;
  return n;
end
$$;

comment on function recall.forget_memory(text, bigint) is $c$
Delete the memory memory_id of agent_id with its embedding (in its row) and its full-text
vector; returns 1. A newer memory that superseded it keeps its place (its `supersedes` is
cleared); a memory it superseded stays superseded. Unknown id, another agent's, or not a
memory: SQLSTATE P0002. To forget whole sessions, delete from recall.sessions.
$c$;

-- pin_memory: pin or unpin one memory
create or replace function recall.pin_memory(agent_id text, memory_id bigint, pinned boolean default true)
returns void
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_variable
begin
  perform recall._check_memory_agent(pin_memory.agent_id);
  if pin_memory.pinned is null then
    raise exception 'pinned must be true or false, not NULL' using errcode = '22023';
  end if;
  update recall.chunks c set pinned = pin_memory.pinned
  where c.chunk_id = pin_memory.memory_id and c.agent_id = pin_memory.agent_id and c.kind = 'memory';
  if not found then
    perform recall._memory_not_found(pin_memory.agent_id, pin_memory.memory_id);
  end if;
end
$$;

comment on function recall.pin_memory(text, bigint, boolean) is $c$
Pin (pinned true, the default) or unpin the memory memory_id of agent_id. Pinned memories that
are currently valid open auto_context (v4) in its Pinned section, before everything else,
within the token budget. Unknown id, another agent's, or not a memory: SQLSTATE P0002.
$c$;

-- memories: list an agent's memories; see the COMMENT below
create or replace function recall.memories(
  agent_id           text,
  project            text    default null,
  kind               text    default null,
  include_superseded boolean default false,
  pinned_only        boolean default false,
  max_rows           int     default 50)
returns table (
  memory_id     bigint,
  memory_kind   text,
  content       text,
  importance    double precision,
  pinned        boolean,
  metadata      jsonb,
  created_at    timestamptz,
  valid_from    timestamptz,
  valid_until   timestamptz,
  supersedes    bigint,
  superseded_by bigint,
  embedded      boolean,
  n_tokens      int)
language plpgsql stable security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_variable
begin
  perform recall._check_memory_agent(memories.agent_id);
  if memories.kind is not null and memories.kind not in ('note', 'fact', 'decision', 'preference') then
    raise exception 'unknown memory kind %: expected one of note, fact, decision, preference',
      quote_literal(memories.kind) using errcode = '22023';
  end if;
  if memories.max_rows is null or memories.max_rows < 1 or memories.max_rows > 10000 then
    raise exception 'max_rows must be between 1 and 10000, got %', coalesce(memories.max_rows::text, 'NULL')
      using errcode = '22023';
  end if;
  return query
  select c.chunk_id, c.memory_kind, c.content, c.importance::float8, c.pinned, c.metadata, c.created_at, c.valid_from, c.valid_until,
         c.supersedes,
         (select n.chunk_id from recall.chunks n
          where n.agent_id = memories.agent_id and n.kind = 'memory' and n.supersedes = c.chunk_id
          order by n.chunk_id limit 1),
         c.embedding is not null, c.n_tokens
  from recall.chunks c
  where c.agent_id = memories.agent_id and c.kind = 'memory'
    and (memories.project is null or c.metadata->>'project' = memories.project
         or not c.metadata ? 'project')
    and (memories.kind is null or c.memory_kind = memories.kind)
    and (coalesce(memories.include_superseded, false) or c.valid_until is null)
    and (not coalesce(memories.pinned_only, false) or c.pinned)
  order by c.created_at desc, c.chunk_id desc
  limit memories.max_rows;
end
$$;

comment on function recall.memories(text, text, text, boolean, boolean, int) is $c$
The memories of agent_id, newest first, at most max_rows (1..10000, default 50): memory_id,
memory_kind (note | fact | decision | preference), content, importance, pinned, metadata (with
its project), created_at, valid_from, valid_until (NULL while current), supersedes / superseded_by (the
memory it replaced / that replaced it), embedded (its embedding is stored), n_tokens.
project: the memories of that project and those of no project (what applies there); kind: of
that kind only; include_superseded: superseded memories too (default: current ones only);
pinned_only: pinned ones only.
$c$;

-- similar_memories: the agent's current memories like a text's vector; see the COMMENT below.
-- An exact scan of the agent's memories (an agent holds hundreds to thousands, not millions).
create or replace function recall.similar_memories(
  agent_id       text,
  embedding      vector,
  project        text    default null,
  min_similarity float8  default 0.6,
  k              int     default 3,
  exclude_id     bigint  default null)
returns table (memory_id bigint, memory_kind text, content text, similarity float8, pinned boolean)
language plpgsql stable security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_variable
begin
  perform recall._check_memory_agent(similar_memories.agent_id);
  if k is null or k < 1 or k > 100 then
    raise exception 'k must be between 1 and 100, got %', coalesce(k::text, 'NULL') using errcode = '22023';
  end if;
  if min_similarity is null or min_similarity = 'NaN' or min_similarity < -1 or min_similarity > 1 then
    raise exception 'min_similarity must be between -1 and 1, got %', coalesce(min_similarity::text, 'NULL')
      using errcode = '22023';
  end if;
  if similar_memories.embedding is null or vector_norm(similar_memories.embedding) = 0 then
    return;                                  -- nothing to compare with (a text not embedded)
  end if;
  return query
  select c.chunk_id, c.memory_kind, c.content,
         (1 - (c.embedding <=> similar_memories.embedding))::float8 as sim, c.pinned
  from recall.chunks c
  where c.agent_id = similar_memories.agent_id and c.session_id = 'memories:' || similar_memories.agent_id
    and c.kind = 'memory' and c.embedding is not null
    and vector_dims(c.embedding) = vector_dims(similar_memories.embedding)
    and (c.valid_until is null or c.valid_until > now())
    and (similar_memories.exclude_id is null or c.chunk_id <> similar_memories.exclude_id)
    and (similar_memories.project is null or c.metadata->>'project' is null
         or c.metadata->>'project' = similar_memories.project)
    and 1 - (c.embedding <=> similar_memories.embedding) >= min_similarity
  order by c.embedding <=> similar_memories.embedding, c.chunk_id
  limit k;
end
$$;

comment on function recall.similar_memories(text, vector, text, float8, int, bigint) is $c$
The agent's current memories (not superseded, embedded) whose cosine similarity to `embedding`
is at least min_similarity (default 0.6), most similar first, at most k (1-100, default 3):
memory_id, memory_kind, content, similarity, pinned. project: those of that project and
those of none. exclude_id: leave that memory out (the one just stored). What `remember` shows
after storing a memory, so that an agent sees the memory it may be repeating or correcting (and
passes supersedes). The bar: on 20 hand-written memories of a coding agent (all-MiniLM-L6-v2),
0.6 shows 95% of the same facts said in other words and 85% of updates of a fact, and none of
20 other facts of the same project (bench/results/2026-11-29b/similar_memories_lab.txt). A NULL
or all-zero embedding returns nothing. Errors: agent_id missing, k or min_similarity out of
range: 22023.$c$;
