-- 020-hybrid-recall
-- Settings of hybrid recall that depend on the schema. The released versions of
-- recall.hybrid_recall live in sql/released/ (v1.sql, v2.sql, ...; their helpers in
-- shared.sql), the stable name in 080-stable-names.sql; sql/README.md says how to release one.

-- text_scan_max_rows: agents of at most this many chunks are text-searched on their B-tree,
-- larger ones through the GIN index (the _text_arm functions; their built-in default is 2000,
-- chosen when the GIN index held only tsv and a small agent paid for every agent's postings).
-- With the (agent_id, tsv) GIN index of 004 the index path pays off sooner, hence 1000 here
-- (figures in docs/DBA.md). Set only where that
-- index exists and the setting is absent: a value a DBA wrote stays.
insert into recall.config (key, value)
select 'text_scan_max_rows', '1000'
where exists (select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace
              where n.nspname = 'recall' and c.relname = 'chunks_agent_tsv_idx' and c.relkind = 'i')
on conflict (key) do nothing;
