-- 004-agent-text-index
-- The full-text index holds the agent: GIN (agent_id, tsv) in place of GIN (tsv).
--
-- Every text search is one agent's (recall._text_arm*, hybrid_recall, session_recall,
-- auto_context). GIN (tsv) indexed every agent's chunks under each word, so a word's posting
-- list at a million chunks held tens of thousands of other agents' chunks, each fetched from
-- the heap only to be thrown away by the agent filter: a medium agent's text arm cost 10-40 ms
-- (docs/BENCHMARKS.md). With agent_id as the index's first column (the btree_gin extension
-- gives text a GIN operator class), the index intersects the agent's posting list with the
-- words' and the heap sees the agent's matching chunks only.
--
-- btree_gin is a contrib extension, trusted since PostgreSQL 13 (a role that may create in
-- the database may install it) and offered by the usual hosted services. Where it is not
-- installed and cannot be, the old index is kept and a NOTICE says so: recall stays correct,
-- only slower for large agents; docs/DBA.md gives the statements to run later.
--
-- CREATE INDEX holds a SHARE lock on recall.chunks while it builds: writes wait (about a
-- minute per million chunks on 2 cores). Run once, in a transaction, by `pyrecall migrate`.
-- Released: never edit; change in a new file.
--
-- pyrecall: destructive (drops the index chunks_tsv_idx, which the new one replaces; no data)
do $$
begin
  begin
    create extension if not exists btree_gin;
  exception when others then
    raise notice 'pyrecall: the btree_gin extension cannot be installed (%): recall.chunks keeps '
                 'its GIN (tsv) index; see docs/DBA.md to add GIN (agent_id, tsv) later', sqlerrm;
    return;
  end;
  create index chunks_agent_tsv_idx on recall.chunks using gin (agent_id, tsv);
  drop index recall.chunks_tsv_idx;
end
$$;
