-- 007-memories
-- Curated memories: what an agent chose to keep, as chunks of kind 'memory'.
--
-- A memory is a chunk (kind 'memory') of the agent's own session 'memories:<agent_id>', so that
-- everything chunks have applies to it unchanged: both recall arms (the full-text vector is
-- generated at once, the embedding comes from the worker or the caller), the vector indexes,
-- row-level security, token counts and budget trimming. It has no messages (message_ids '{}'),
-- so re-chunking and the clean-up of orphaned chunks leave it alone (010-messages skips kind
-- 'memory' when it deletes what is derived no more). The columns below are NULL / false on
-- every other chunk:
--   memory_kind  note | fact | decision | preference
--   pinned       always in auto_context's Pinned section (v4)
--   supersedes   the memory this one replaced (no foreign key: the tables may be distributed
--                by agent_id with Citus, where chunk_id alone is no key; forget clears it)
--   valid_from   when it became true (its creation)
--   valid_until  when it stopped being true: set when a newer memory supersedes it. Recall (v4)
--                returns a memory only while it is valid (at as_of, when given).
-- The functions are in sql/idempotent/050-memories.sql; recall v4 in 060-recall-v4.sql.
--
-- Adding the columns rewrites nothing (NULL / constant defaults); the new check constraints
-- scan recall.chunks once (about a second per million chunks) under an ACCESS EXCLUSIVE lock.
-- Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a new file.
--
-- pyrecall: destructive (drops the check constraint on recall.chunks.kind to re-add it with 'memory'; no data)

alter table recall.chunks drop constraint chunks_kind_check;
alter table recall.chunks add constraint chunks_kind_check
  check (kind in ('turn_pair', 'window', 'thinking', 'code', 'tool', 'message', 'summary', 'memory'));

alter table recall.chunks
  add column memory_kind text,
  add column pinned      boolean not null default false,
  add column supersedes  bigint,
  add column valid_from  timestamptz,
  add column valid_until timestamptz;

-- the memory columns belong to memories, and a memory has them
alter table recall.chunks add constraint chunks_memory_check check (
  case when kind = 'memory'
       then memory_kind in ('note', 'fact', 'decision', 'preference') and valid_from is not null
            and (valid_until is null or valid_until >= valid_from)
       else memory_kind is null and not pinned and supersedes is null
            and valid_from is null and valid_until is null
  end);

-- an agent's memories, for listing them and for auto_context's Pinned section
create index chunks_memories_idx on recall.chunks (agent_id, created_at desc) where kind = 'memory';

-- the memories session of an agent is named after it, and only it may hold that name: session
-- ids are unique across agents, so another agent could otherwise take 'memories:<id>' first
-- and leave that agent unable to remember. NOT VALID: sessions stored before are not checked.
alter table recall.sessions add constraint sessions_memories_name_check
  check (session_id not like 'memories:%' or session_id = 'memories:' || agent_id) not valid;

-- the rows of recall v4 (060-recall-v4.sql): v3's columns, then the memory and its origin. Types,
-- not RETURNS TABLE: a column agent_id beside the argument agent_id is refused there.
create type recall.recall_row_v4 as
( chunk_id          bigint
, session_id        text
, kind              text
, content           text
, created_at        timestamptz
, score             double precision
, similarity        double precision
, text_rank         double precision
, recency           double precision
, importance        double precision
, n_tokens          int
, cumulative_tokens bigint
, metadata          jsonb
, message_ids       bigint[]
, memory_id         bigint          -- the memory's id (= chunk_id); NULL for transcript chunks
, agent_id          text
, session_title     text
, role              text            -- the roles of the chunk's messages, 'user+assistant'
, memory_kind       text            -- note | fact | decision | preference; NULL for transcripts
);

create type recall.session_recall_row_v4 as
( chunk_id          bigint
, session_id        text
, kind              text
, content           text
, created_at        timestamptz
, score             double precision
, similarity        double precision
, text_rank         double precision
, recency           double precision
, importance        double precision
, n_tokens          int
, cumulative_tokens bigint
, metadata          jsonb
, message_ids       bigint[]
, session_rank      int
, session_score     double precision
, memory_id         bigint
, agent_id          text
, session_title     text
, role              text
, memory_kind       text
);

create type recall.auto_context_row_v4 as
( chunk_id          bigint
, session_id        text
, kind              text
, content           text
, created_at        timestamptz
, score             double precision
, similarity        double precision
, text_rank         double precision
, recency           double precision
, importance        double precision
, n_tokens          int
, cumulative_tokens bigint
, metadata          jsonb
, message_ids       bigint[]
, section           text            -- pinned | recent | related | failures
, memory_id         bigint
, agent_id          text
, session_title     text
, role              text
, memory_kind       text
);
