-- 061-failures-index: the failures of each agent, indexed, for auto_context's Failures section
-- (recall.auto_context_v6: `recall._is_failure(kind, content, metadata)` over every chunk of the
-- agent in scope was 1.6 s of its 1.7 s at 20k chunks, its regular expressions ~80 us a chunk).
-- A partial index on exactly that predicate: the planner reads only the failures, whatever
-- their share. Here and not in incremental/ because its predicate calls recall._is_failure
-- (released/shared.sql), which a fresh install creates after the incremental migrations; built
-- once (IF NOT EXISTS), at the first migrate that has this file: one pass of the regular
-- expressions over the table (2.6 s at 100k chunks), then one evaluation per chunk written.
create index if not exists chunks_failures_idx on recall.chunks (agent_id, created_at)
  where recall._is_failure(kind, content, metadata);
