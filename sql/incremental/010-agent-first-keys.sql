-- 010-agent-first-keys
-- Every key of the per-agent tables holds agent_id: the keys a Citus cluster distributed by
-- agent_id can enforce (each shard checks its own rows), on one node too (docs/SCALING.md).
--
--   table        before                                   after
--   sessions     PK (session_id)                          PK (agent_id, session_id)
--                                                         UNIQUE (session_id)  -- one node only, below
--   messages     PK (message_id)                          PK (message_id, agent_id)
--                UNIQUE (session_id, seq)                 UNIQUE (session_id, agent_id, seq)
--                UNIQUE (session_id, external_id)         UNIQUE (session_id, agent_id, external_id)
--                FK (session_id) -> sessions              FK (agent_id, session_id) -> sessions
--   chunks       PK (chunk_id)                            PK (chunk_id, agent_id)
--                UNIQUE (session_id, kind, first_seq, part)
--                                                         UNIQUE (session_id, agent_id, kind, first_seq, part)
--                FK (session_id) -> sessions              FK (agent_id, session_id) -> sessions
--   recall_log   PK (log_id)                              PK (log_id, agent_id)
--   source_files PK (agent_id, path)                      unchanged
--
-- Column order: a key's index keeps the column its lookups give alone first, so that every
-- plan keeps the index it had: recall v1-v5 (released, never edited) find messages by
-- message_id, chunks by chunk_id and by session_id without agent_id. agent_id comes second
-- (Citus needs it in the key, at any position; a delegated call routes by the filter, not by
-- the index). sessions is agent-first: its key serves the agent's listings and id prefixes.
--
-- Session ids: on one node a session id stays unique across agents (UNIQUE (session_id)): the
-- released recall joins sessions by session_id alone, a message inserted without agent_id takes
-- its session's agent, and an import of another agent's session id is refused as before. A
-- Citus shard cannot check that constraint: recall.distribute() drops it, and there a session
-- id is unique within its agent only.
--
-- message_id and chunk_id stay identity columns: unique on one node as before (one sequence).
--
-- The new indexes are built once each (CREATE INDEX, not row by row: a few seconds per million
-- chunks on 2 cores) and the old ones dropped; the foreign keys are checked by one join each.
-- Writes to the four tables wait for the end (ACCESS EXCLUSIVE locks); reads of chunks too.
-- Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a new file.
--
-- pyrecall: destructive (drops the key constraints of sessions, messages, chunks and recall_log to re-create them with agent_id; no data)

-- the foreign keys first: they depend on the sessions key
alter table recall.messages drop constraint messages_session_id_fkey;
alter table recall.chunks drop constraint chunks_session_id_fkey;

alter table recall.sessions
  drop constraint sessions_pkey,
  add constraint sessions_pkey primary key (agent_id, session_id),
  add constraint sessions_session_id_key unique (session_id);

alter table recall.messages
  drop constraint messages_pkey,
  drop constraint messages_session_id_seq_key,
  drop constraint messages_session_id_external_id_key,
  add constraint messages_pkey primary key (message_id, agent_id),
  add constraint messages_session_seq_key unique (session_id, agent_id, seq),
  add constraint messages_session_external_id_key unique (session_id, agent_id, external_id);

alter table recall.chunks
  drop constraint chunks_pkey,
  drop constraint chunks_session_id_kind_first_seq_part_key,
  add constraint chunks_pkey primary key (chunk_id, agent_id),
  add constraint chunks_session_kind_first_seq_part_key unique (session_id, agent_id, kind, first_seq, part);

alter table recall.recall_log
  drop constraint recall_log_pkey,
  add constraint recall_log_pkey primary key (log_id, agent_id);

-- a message or chunk whose agent is not its session's (written by hand, bypassing the
-- triggers) cannot keep its foreign key: say which, change nothing
do $$
begin
  alter table recall.messages add constraint messages_session_fkey foreign key (agent_id, session_id)
    references recall.sessions (agent_id, session_id) on delete cascade;
  alter table recall.chunks add constraint chunks_session_fkey foreign key (agent_id, session_id)
    references recall.sessions (agent_id, session_id) on delete cascade;
exception when foreign_key_violation then
  raise exception '010-agent-first-keys: %', sqlerrm
    using errcode = '23503',
          detail = 'A message or chunk has an agent_id other than its session''s.',
          hint = 'Set its agent_id to its session''s (or delete it), then run pyrecall migrate again.';
end
$$;
