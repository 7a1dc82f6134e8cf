-- 008-chunk-importance-set
-- recall.chunks.importance_set_at: when someone set the chunk's importance by hand
-- (recall.set_importance); NULL while it is derived from its messages (the highest of theirs).
--
-- The chunker (_rechunk) keeps an importance set by hand when it derives the chunk again (a
-- chat window is re-derived at every new message of its session): without this column it
-- could not tell a set value from a derived one. Adding a nullable column without a default
-- rewrites nothing (an instant ACCESS EXCLUSIVE lock).
-- Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a new file.
alter table recall.chunks add column importance_set_at timestamptz;
comment on column recall.chunks.importance_set_at is
  'When the importance was set by recall.set_importance (kept by re-chunking); NULL: derived from the messages.';
