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
--                                                         UNIQUE (session_id, kind, first_seq, part, agent_id)
--                FK (session_id) -> sessions              FK (agent_id, session_id) -> sessions
--   recall_log   PK (log_id)                              PK (log_id, agent_id)
--   source_files PK (agent_id, path)                      unchanged
--
-- Column order (Citus needs agent_id in a key at any position: a delegated call is routed by
-- its filter, not by an index): every index keeps the prefix its lookups use, so that every
-- plan of recall v1-v5 (released, never edited), which find messages by message_id and chunks
-- by chunk_id and by (session_id, kind, first_seq) without agent_id, stays as it was (plans and
-- estimates). agent_id comes right after session_id in the keys of messages: the message
-- trigger reads a session's last seq by (session_id, agent_id) (a backward scan of
-- (session_id, agent_id, seq)). sessions is agent-first: its key serves an agent's listings
-- and id prefixes, UNIQUE (session_id) the lookups by id.
--
-- A session belongs to one agent: statistics of that dependency let the planner estimate a
-- filter on both (the code names sessions by agent and id) as one on session_id, not as the
-- product of the two.
--
-- Session ids: on one node a session id stays unique across agents (UNIQUE (session_id)): the
-- released recall joins sessions by session_id alone, a message inserted without agent_id takes
-- its session's agent, and an import of another agent's session id is refused as before. A
-- Citus shard cannot check that constraint: recall.distribute() drops it, and there a session
-- id is unique within its agent only.
--
-- message_id and chunk_id stay identity columns: unique on one node as before (one sequence).
--
-- The new indexes are built once each (CREATE INDEX, not row by row) and the old ones dropped;
-- the foreign keys are checked by one join each: about 18 s for a million messages and a
-- million chunks on 2 cores (docs/DBA.md). Reads and writes of the four tables wait for the
-- end (ACCESS EXCLUSIVE locks).
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
  add constraint chunks_session_kind_first_seq_part_key unique (session_id, kind, first_seq, part, agent_id);

alter table recall.recall_log
  drop constraint recall_log_pkey,
  add constraint recall_log_pkey primary key (log_id, agent_id);

create statistics recall.messages_session_agent (dependencies) on session_id, agent_id from recall.messages;
create statistics recall.chunks_session_agent (dependencies) on session_id, agent_id from recall.chunks;
-- gathered now where there are rows (a sample: about a second a table at any size). Not on an
-- empty table: analyzed empty, it would be planned as empty, and a first bulk import of one
-- session (its per-row lookups planned once) would scan the table for every message.
do $$
begin
  if exists (select from recall.messages) then
    analyze recall.messages (session_id, agent_id);
  end if;
  if exists (select from recall.chunks) then
    analyze recall.chunks (session_id, agent_id);
  end if;
end
$$;

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
