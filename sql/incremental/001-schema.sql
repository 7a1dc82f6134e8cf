-- 001-schema
-- The tables of agent memory: sessions, their messages, and the chunks derived from them.
--
-- Run once, in a transaction, by `pyrecall migrate`, which sets `pyrecall.dim` (the embedding
-- dimension chosen at install) for this transaction. Released: never edit; change in a new file.

-- config: install-time facts other code reads (embedding dimension, chunking parameters)
create table recall.config
( key   text primary key
, value jsonb not null
);

insert into recall.config (key, value) values
  ('embedding_dim', to_jsonb(current_setting('pyrecall.dim')::int))
, ('chunk_max_chars', '1600')       -- a window of a long message: ~400 tokens
, ('chunk_overlap_chars', '200')    -- overlap between consecutive windows
, ('code_context_chars', '300')     -- text kept before a fenced code block
, ('exact_scan_max_rows', '20000')  -- agents up to this many embedded chunks: exact vector scan
, ('window_messages', '4')          -- window chunking: text messages per window ...
, ('window_stride', '2')            -- ... and a new window every this many
;

-- sessions: one conversation of one agent
create table recall.sessions
( session_id        text primary key check (session_id <> '')
, agent_id          text not null check (agent_id <> '')
, title             text
, project           text
, branch            text
, started_at        timestamptz not null default now()
, ended_at          timestamptz
, metadata          jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object')
, summary           text
, summary_embedding vector                     -- typed to vector(dim) below
, summary_model     text                       -- 'extractive' or the LLM that wrote it
, summary_at        timestamptz                -- when summary was made (stale: chunks newer)
, created_at        timestamptz not null default now()
);
create index sessions_agent_started_idx on recall.sessions (agent_id, started_at desc);

-- messages: what was said, thought, called and returned, in order within a session
create table recall.messages
( message_id  bigint generated always as identity primary key
, session_id  text not null references recall.sessions (session_id) on delete cascade
, agent_id    text not null
, seq         int not null
, external_id text not null                    -- the source's id, or a content hash
, role        text not null check (role in ('user', 'assistant', 'system', 'tool'))
, kind        text not null default 'text'
              check (kind in ('text', 'thinking', 'tool_call', 'tool_result'))
, content     text not null check (content <> '')
, created_at  timestamptz not null default now()
, importance  real not null default 0.5 check (importance >= 0 and importance <= 1)
, metadata    jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object')
, unique (session_id, seq)
, unique (session_id, external_id)
);
create index messages_agent_created_idx on recall.messages (agent_id, created_at);

-- chunks: the retrievable units, derived from messages in the database (see chunking)
create table recall.chunks
( chunk_id        bigint generated always as identity primary key
, agent_id        text not null
, session_id      text not null references recall.sessions (session_id) on delete cascade
, kind            text not null
                  check (kind in ('turn_pair', 'window', 'thinking', 'code', 'tool', 'message', 'summary'))
, first_seq       int not null                 -- seq of the message the chunk starts at
, part            int not null default 0       -- window number within a long message
, message_ids     bigint[] not null
, content         text not null
, n_tokens        int not null check (n_tokens > 0)
, created_at      timestamptz not null
, importance      real not null default 0.5 check (importance >= 0 and importance <= 1)
, metadata        jsonb not null default '{}'
, tsv             tsvector generated always as (to_tsvector('english', content)) stored
, embedding       vector                       -- typed to vector(dim) below; NULL = pending
, embedding_model text
, embedded_at     timestamptz
, embed_attempts  int not null default 0       -- failed attempts since the content changed
, embed_error     text                         -- the last failure, kept for the operator
, embed_after     timestamptz                  -- not retried before this (backoff)
, unique (session_id, kind, first_seq, part)
);
create index chunks_agent_created_idx on recall.chunks (agent_id, created_at desc);
create index chunks_tsv_idx on recall.chunks using gin (tsv);
create index chunks_metadata_idx on recall.chunks using gin (metadata jsonb_path_ops);
-- the embedding queue: pending chunks, oldest first
create index chunks_pending_idx on recall.chunks (chunk_id) where embedding is null;

-- the embedding dimension is chosen at install and fixed in the column types
do $$
declare
  dim int := current_setting('pyrecall.dim')::int;
begin
  if dim < 1 or dim > 16000 then
    raise exception 'embedding dimension must be between 1 and 16000, got %', dim
      using errcode = '22023';
  end if;
  execute format('alter table recall.chunks alter column embedding type vector(%s)', dim);
  execute format('alter table recall.sessions alter column summary_embedding type vector(%s)', dim);
end
$$;

-- source_files: what `pyrecall sync` has read of each transcript file
create table recall.source_files
( path        text not null
, agent_id    text not null
, format      text not null
, size        bigint not null
, mtime       timestamptz not null
, offset_done bigint not null default 0      -- bytes consumed (whole lines only)
, content_sha text                           -- of the first 64 KiB: a rewritten file restarts
, messages    int not null default 0
, problems    int not null default 0
, synced_at   timestamptz not null default now()
, primary key (agent_id, path)
);

-- roles: recall_agent sees one agent's rows (the setting recall.agent_id); recall_admin all
do $$
begin
  if not exists (select from pg_roles where rolname = 'recall_agent') then
    create role recall_agent nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'recall_admin') then
    create role recall_admin nologin;
  end if;
end
$$;

grant usage on schema recall to recall_agent, recall_admin;
grant select, insert, update, delete on
  recall.sessions, recall.messages, recall.chunks, recall.source_files
  to recall_agent, recall_admin;
grant select on recall.config to recall_agent, recall_admin;

alter table recall.sessions enable row level security;
alter table recall.messages enable row level security;
alter table recall.chunks enable row level security;
alter table recall.source_files enable row level security;

-- one policy per table and role: the agent's own rows; an unset setting matches nothing
create policy agent_rows on recall.sessions to recall_agent
  using (agent_id = current_setting('recall.agent_id', true))
  with check (agent_id = current_setting('recall.agent_id', true));
create policy agent_rows on recall.messages to recall_agent
  using (agent_id = current_setting('recall.agent_id', true))
  with check (agent_id = current_setting('recall.agent_id', true));
create policy agent_rows on recall.chunks to recall_agent
  using (agent_id = current_setting('recall.agent_id', true))
  with check (agent_id = current_setting('recall.agent_id', true));
create policy agent_rows on recall.source_files to recall_agent
  using (agent_id = current_setting('recall.agent_id', true))
  with check (agent_id = current_setting('recall.agent_id', true));

create policy admin_rows on recall.sessions to recall_admin using (true) with check (true);
create policy admin_rows on recall.messages to recall_admin using (true) with check (true);
create policy admin_rows on recall.chunks to recall_admin using (true) with check (true);
create policy admin_rows on recall.source_files to recall_admin using (true) with check (true);
