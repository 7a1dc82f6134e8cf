-- 015-vector-arm
-- recall._vector_arm: the nearest chunks of one agent, correct for agents of every size.
--
-- Re-applied at every migrate. Used by hybrid_recall, session_recall and auto_context.

-- _vector_arm: the top n chunks of one agent by cosine distance, all filters applied inside
-- the search so that n rows come back whenever n rows qualify.
--
-- How (decided per call, from the agent's size): an agent with at most
-- recall.config.exact_scan_max_rows embedded chunks is scanned exactly through the
-- (agent_id, created_at) B-tree — exact and fast at that size; a larger agent uses the ANN
-- index (see recall.create_vector_index) with pgvector's iterative scan, so that the agent
-- filter does not starve the result.
create or replace function recall._vector_arm(
  p_agent_id text, p_query vector, p_n int, p_exclude_session_id text, p_filter jsonb,
  p_kinds text[], p_since timestamptz, p_until timestamptz)
returns table (chunk_id bigint, distance double precision)
language plpgsql volatile rows 100
set search_path to pg_catalog, public, pg_temp
as $$
declare
  exact_max int := coalesce((select value::int from recall.config where key = 'exact_scan_max_rows'), 20000);
  agent_rows int;
begin
  -- the agent's embedded chunks, counted only up to the threshold (an index-only scan)
  select count(*) into agent_rows
  from (select 1 from recall.chunks c
        where c.agent_id = p_agent_id and c.embedding is not null
        limit exact_max + 1) x;

  if agent_rows <= exact_max or not exists (
       select from pg_index i join pg_class ix on ix.oid = i.indexrelid
       join pg_am am on am.oid = ix.relam
       where i.indrelid = 'recall.chunks'::regclass and am.amname in ('hnsw', 'diskann')) then
    -- exact: "+ 0" keeps the planner from answering the ORDER BY with the ANN index
    return query
      select c.chunk_id, (c.embedding <=> p_query) + 0 as distance
      from recall.chunks c
      where c.agent_id = p_agent_id and c.embedding is not null
        and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
        and (p_filter is null or c.metadata @> p_filter)
        and (p_kinds is null or c.kind = any (p_kinds))
        and (p_since is null or c.created_at >= p_since)
        and (p_until is null or c.created_at < p_until)
      order by 2, c.chunk_id
      limit p_n;
  else
    -- ANN with iterative scan: the index keeps yielding neighbours until n pass the filters
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
    perform set_config('hnsw.ef_search',
      greatest(p_n, coalesce(nullif(current_setting('hnsw.ef_search', true), '')::int, 40))::text, true);
    return query
      select a.chunk_id, a.distance
      from (select c.chunk_id, c.embedding <=> p_query as distance
            from recall.chunks c
            where c.agent_id = p_agent_id
              and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
              and (p_filter is null or c.metadata @> p_filter)
              and (p_kinds is null or c.kind = any (p_kinds))
              and (p_since is null or c.created_at >= p_since)
              and (p_until is null or c.created_at < p_until)
            order by c.embedding <=> p_query
            limit p_n) a
      order by a.distance, a.chunk_id;
  end if;
end
$$;
