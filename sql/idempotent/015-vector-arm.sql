-- 015-vector-arm
-- recall._vector_arm: the nearest chunks of one agent, correct for agents of every size.
--
-- Re-applied at every migrate. Used by hybrid_recall, session_recall and auto_context. The
-- indexes it uses are built by recall.create_vector_index / vector_index_ddl (030-vector-index.sql).

-- The row conditions every function here applies inside the search (so that n rows come back
-- whenever n rows qualify):
--   p_exclude_session_id, p_kinds, p_since/p_until  as their names say;
--   p_filters   metadata @> any (p_filters): a filter as its disjuncts (recall v4's any of
--               several values, on the chunk or on any of its messages); NULL for none;
--   p_project   the chunks of that project and the memories of no project (auto_context v4's
--               Related); NULL for all;
--   p_as_of     the validity of curated memories (sql/incremental/007-memories.sql): valid_until
--               NULL or after p_as_of, valid_from at or before it; NULL: the current ones;
--   p_any_validity  true: every row whatever its validity (the releases before v4, which do
--               not know of memories, through recall._vector_arm / _vector_exact).
-- recall._vector_arm / _vector_exact are the same with one filter object, every project and
-- every validity: the shape that v1-v3 call.

-- _vector_exact_scoped: the exact top n of one agent: every chunk passing the conditions, its distance
-- computed, sorted. The B-tree (agent_id, created_at) finds the chunks (a since/until window
-- narrows the range scanned); "+ 0" keeps the planner from answering the ORDER BY with an ANN
-- index, whose answer is approximate.
drop function if exists recall._vector_exact_scoped(text, vector, int, text, jsonb[], text[],
  timestamptz, timestamptz, timestamptz, text);   -- (a pre-release shape)
create or replace function recall._vector_exact_scoped(
  p_agent_id text, p_query vector, p_n int, p_exclude_session_id text, p_filters jsonb[],
  p_kinds text[], p_since timestamptz, p_until timestamptz, p_as_of timestamptz, p_project text,
  p_any_validity boolean default false)
returns table (chunk_id bigint, distance double precision)
language plpgsql stable rows 100
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL, not SQL: Citus cannot plan a SQL-language function's query on a distributed
  -- table with parameters (docs/SCALING.md); the statement is v4's
  return query
  select c.chunk_id, (c.embedding <=> p_query) + 0 as distance
  from recall.chunks c
  where c.agent_id = p_agent_id and c.embedding is not null
    and c.created_at >= coalesce(p_since, '-infinity') and c.created_at < coalesce(p_until, 'infinity')
    and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
    and (p_filters is null or c.metadata @> any (p_filters))
    and (p_kinds is null or c.kind = any (p_kinds))
    and (p_project is null or c.metadata @> jsonb_build_object('project', p_project)
         or (c.kind = 'memory' and not c.metadata ? 'project'))
    and (p_any_validity
         or ((c.valid_until is null or c.valid_until > p_as_of)
             and (p_as_of is null or c.valid_from is null or c.valid_from <= p_as_of)))
  order by 2, c.chunk_id
  limit p_n;
end
$$;

-- _ef_search_for_rows: the search width a step table {"rows": width, ...} (recall.config
-- ann_ef_search_by_rows) gives an index of index_rows rows: the width of the largest key <=
-- index_rows; 0 when no key applies (or no table). Keys that are not whole numbers are ignored.
create or replace function recall._ef_search_for_rows(steps jsonb, index_rows bigint)
returns int
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select coalesce((select (s.value #>> '{}')::int
                   from jsonb_each(case when jsonb_typeof(steps) = 'object' then steps end) s
                   where s.key ~ '^\d{1,18}$' and s.key::bigint <= coalesce(index_rows, 0)
                     and s.value #>> '{}' ~ '^\d{1,9}$'
                   order by s.key::bigint desc
                   limit 1), 0)
$$;

-- _vector_arm_scoped: the top n chunks of one agent by cosine distance, every condition applied inside
-- the search, so that n rows come back whenever n rows qualify; ordered by distance, then
-- chunk_id. The contract is the TRUE top n; the ANN paths approach it (tests/test_filtered_ann.py
-- holds them to it; figures in docs/DBA.md) and fall back to the exact scan
-- whenever they cannot vouch for their answer.
--
-- The path, decided per call from the catalog and one cheap count (no planner guesswork):
--  1. The agent has an index of its own (a partial index `where hashtextextended(agent_id, 0)
--     = <hash>`, see recall._agent_key, built by recall.create_vector_index for agents with >=
--     recall.config agent_index_min_rows embedded chunks; found by name in the catalog):
--     ANN through it. Every row it sees is the agent's, so the agent filter costs nothing.
--     The query is planned with the agent id and its key as literals, so that the planner
--     can match the index's predicate, and with enable_sort off for that statement (else,
--     for an agent of a few thousand chunks, it preferred the exact B-tree + sort, far slower).
--     - With a since/until window holding at most agent_index_min_rows chunks (counted on the
--       B-tree, capped): exact over the window instead.
--  2. No index of its own: count the agent's chunks on the B-tree, stopping at
--     recall.config exact_scan_max_rows + 1 (an index-only scan). Up to that many: exact.
--  3. More, and a whole-table ANN index exists (scope 'table'/'both', or one made by hand):
--     ANN through it with iterative scan, so that the index keeps yielding neighbours until n
--     of them pass the agent filter; hnsw.max_scan_tuples is raised to what the agent's share
--     of the table requires. No such index: exact (correct, slower: run the index refresh).
--  Before an ANN path (1 or 3), when a condition that may be selective is given (a metadata
--  filter, a project, kinds) and the planner expects at most 4 x agent_index_min_rows rows to
--  pass every condition (EXPLAIN of that statement with the call's values): read the rows
--  passing them with their distances, stopping at agent_index_min_rows + 1 (the GIN index on
--  metadata, or the memories' index, when the condition is selective). Up to that many: the
--  top n of them, exact (a project without history, a rare speaker, kinds = memory:
--  0.1-1 ms), instead of an ANN scan that reads max_scan_tuples tuples to find few or none
--  and then an exact scan of the whole agent (0.23-0.44 s at 100k chunks, bench/LOG.md
--  2026-11-28). The estimate first: reading the rows of a condition that half the agent
--  passes costs more than it can save. The time window of path 1 is the same rule, counted on
--  the B-tree. Not on a Citus cluster (see `selective` below).
--  On an ANN path, when fewer than n rows came back, the scan gave up before the other
--  filters (session, metadata, kinds, window) let n through: the exact scan answers (with such
--  a condition, planned with its values, so that it may read only the rows passing it).
--
-- SET client_min_messages = debug1 shows the path taken, and the knobs, for each call.
--
-- Query-time knobs, honoured, never lowered: hnsw.ef_search / diskann.query_search_list_size
-- are raised to at least the search width for the size of the index searched, n, and
-- recall.config ann_min_ef_search (200). The width by size is the step table recall.config
-- ann_ef_search_by_rows ({"rows": width, ...}: the entry of the largest key <= the index's
-- reltuples, read from pg_class): an HNSW graph needs a wider search the more vectors it holds,
-- the more so when they are shaped like real embeddings (topic mixtures; figures in
-- docs/DBA.md). recall.tune_vector_search('{"ann_ef_search_by_rows":
-- "measure"}') measures it on the data at hand (recall.vector_search_curve). diskann.query_rescore to at least n;
-- hnsw.iterative_scan to relaxed_order unless the caller asked strict_order. A larger value
-- set by the caller (SET, SET LOCAL, ALTER ROLE/DATABASE ... SET) wins. The values are set
-- with set_config(..., true) for the ANN statement only and restored right after it: the
-- caller's transaction never sees them (on an error, the aborting transaction or savepoint
-- undoes them).
--
-- Far queries: when the ANN's best distance is beyond recall.config ann_far_distance (nothing
-- the agent holds is about the query), the search runs once more at the width
-- ann_far_ef_search unless it was already that wide. Such a query's neighbours are a near tie
-- of unrelated chunks that a narrow search misses (figures in docs/DBA.md, "Queries far from
-- all of an agent's topics"); the exact scan would be exact but costs with the agent. Either
-- key null: no second pass.
drop function if exists recall._vector_arm_scoped(text, vector, int, text, jsonb[], text[],
  timestamptz, timestamptz, timestamptz, text);   -- (a pre-release shape)
create or replace function recall._vector_arm_scoped(
  p_agent_id text, p_query vector, p_n int, p_exclude_session_id text, p_filters jsonb[],
  p_kinds text[], p_since timestamptz, p_until timestamptz, p_as_of timestamptz, p_project text,
  p_any_validity boolean default false)
returns table (chunk_id bigint, distance double precision)
language plpgsql volatile rows 100
set search_path to pg_catalog, public, pg_temp
as $$
declare
  idx_oid oid;
  idx_method name;
  own bool;
  agent_filter text;
  exact_max int;
  own_min int;
  ef_min int;
  ef_steps jsonb;
  far_dist double precision;
  far_ef int;
  far_pass bool := false;
  idx_rows bigint;
  n_rows int;
  max_tuples bigint;
  saved text[];
  ids bigint[];
  dists double precision[];
  -- (not on a Citus cluster: there this function runs delegated to the agent's worker, where
  -- an EXPLAIN of the query on recall.chunks makes Citus leave local execution, which it
  -- refuses in that transaction; the cluster keeps the ANN path and its exact fallback)
  selective constant bool := (p_filters is not null or p_project is not null or p_kinds is not null)
                             and not exists (select from pg_catalog.pg_extension where extname = 'citus');
  plan jsonb;
  -- every condition, on chunks c, as the statements below number their parameters: $1 the
  -- query, $2/$3 since/until, $4 the excluded session, $5 the filters, $6 the kinds, $7 n,
  -- $8 as_of, $9 the project, $10 any validity
  conditions constant text := $w$
              and c.created_at >= coalesce($2, '-infinity') and c.created_at < coalesce($3, 'infinity')
              and ($4::text is null or c.session_id <> $4)
              and ($5::jsonb[] is null or c.metadata @> any ($5))
              and ($6::text[] is null or c.kind = any ($6))
              and ($9::text is null or c.metadata @> jsonb_build_object('project', $9::text)
                   or (c.kind = 'memory' and not c.metadata ? 'project'))
              and ($10::boolean
                   or ((c.valid_until is null or c.valid_until > $8)
                       and ($8::timestamptz is null or c.valid_from is null or c.valid_from <= $8)))$w$;
  -- the rows passing every condition with their distances, planned with the values given
  -- (EXECUTE: a selective condition is read through its index); its last part either
  -- 'order by 2, c.chunk_id limit $7' (the exact top n) or 'limit m' (the first m passing)
  passing constant text := $q$
      select c.chunk_id, (c.embedding <=> $1) + 0 as distance
      from recall.chunks c
      where c.agent_id = %L and c.embedding is not null%s
      %s$q$;
begin
  if p_query is null or p_n is null or p_n < 1 then
    return;
  end if;
  select
    coalesce(max(value::int) filter (where key = 'exact_scan_max_rows'), 20000),
    coalesce(max(value::int) filter (where key = 'agent_index_min_rows'), 2000),
    coalesce(max(value::int) filter (where key = 'ann_min_ef_search'), 200),
    max(value::text) filter (where key = 'ann_ef_search_by_rows')::jsonb,
    max(value #>> '{}') filter (where key = 'ann_far_distance' and jsonb_typeof(value) = 'number')::double precision,
    max(value #>> '{}') filter (where key = 'ann_far_ef_search' and jsonb_typeof(value) = 'number')::numeric::int
  into exact_max, own_min, ef_min, ef_steps, far_dist, far_ef
  from recall.config
  where key in ('exact_scan_max_rows', 'agent_index_min_rows', 'ann_min_ef_search', 'ann_ef_search_by_rows',
                'ann_far_distance', 'ann_far_ef_search');

  select v.index_oid, v.method into idx_oid, idx_method from recall._agent_vector_index(p_agent_id) v;
  own := idx_oid is not null;
  if own then
    -- 1. the agent's own index, unless a time window leaves few rows to rank
    if p_since is not null or p_until is not null then
      select count(*) into n_rows
      from (select from recall.chunks c
            where c.agent_id = p_agent_id
              and c.created_at >= coalesce(p_since, '-infinity') and c.created_at < coalesce(p_until, 'infinity')
            limit own_min + 1) x;
      if n_rows <= own_min then
        raise debug 'recall._vector_arm_scoped: agent %, path exact (window of % rows)', p_agent_id, n_rows;
        return query select * from recall._vector_exact_scoped(p_agent_id, p_query, p_n, p_exclude_session_id,
                                                        p_filters, p_kinds, p_since, p_until, p_as_of, p_project, p_any_validity);
        return;
      end if;
    end if;
    max_tuples := 0;
  else
    -- 2. small agent: exact
    select count(*) into n_rows
    from (select from recall.chunks c where c.agent_id = p_agent_id limit exact_max + 1) x;
    select v.index_oid, v.method into idx_oid, idx_method from recall._table_vector_index() v;
    if n_rows <= exact_max or idx_oid is null then
      raise debug 'recall._vector_arm_scoped: agent %, path exact (% rows%)', p_agent_id,
        case when n_rows > exact_max then '> ' || exact_max else n_rows::text end,
        case when n_rows > exact_max then ', no ANN index: refresh the indexes' else '' end;
      return query select * from recall._vector_exact_scoped(p_agent_id, p_query, p_n, p_exclude_session_id,
                                                      p_filters, p_kinds, p_since, p_until, p_as_of, p_project, p_any_validity);
      return;
    end if;
    -- 3. large agent without an index of its own: the whole-table index, iterative scan; the
    -- agent holds at least exact_max / reltuples of the table, so about n * reltuples /
    -- exact_max tuples must be scanned for n to pass (x4 for the other filters)
    max_tuples := ceil(4.0 * p_n * greatest((select reltuples from pg_class where oid = 'recall.chunks'::regclass), 1)
                       / greatest(exact_max, 1));
  end if;

  -- a condition that few rows pass: exact over them (see the header). The planner's estimate
  -- first: reading the rows of a condition that half the agent passes (a bitmap of every row
  -- passing it: 12-15 ms at 50k rows) costs more than it can save
  if selective then
    execute format('explain (format json) select from recall.chunks c where c.agent_id = %L and c.embedding is not null%s',
                   p_agent_id, conditions)
      into plan
      using p_query, p_since, p_until, p_exclude_session_id, p_filters, p_kinds, p_n, p_as_of, p_project,
            p_any_validity;
    if (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8 <= 4 * own_min then
      execute format('select array_agg(x.chunk_id order by x.distance, x.chunk_id), '
                     'array_agg(x.distance order by x.distance, x.chunk_id) from (' || passing || ') x',
                     p_agent_id, conditions, 'limit ' || (own_min + 1))
        into ids, dists
        using p_query, p_since, p_until, p_exclude_session_id, p_filters, p_kinds, p_n, p_as_of, p_project,
              p_any_validity;
      n_rows := coalesce(cardinality(ids), 0);
      if n_rows <= own_min then
        raise debug 'recall._vector_arm_scoped: agent %, path exact (% rows pass the conditions)',
          p_agent_id, n_rows;
        return query select u.chunk_id, u.distance from unnest(ids[1:p_n], dists[1:p_n]) with ordinality
                       as u(chunk_id, distance, i)
                     order by u.i;
        return;
      end if;
    end if;
  end if;

  -- the search width for the size of the index searched (see the header)
  idx_rows := (select greatest(c.reltuples, 0)::bigint from pg_class c where c.oid = idx_oid);
  ef_min := greatest(ef_min, recall._ef_search_for_rows(ef_steps, idx_rows));

  -- the query-time knobs for this one statement (see the header), previous values kept
  saved := array[current_setting('hnsw.ef_search', true), current_setting('hnsw.iterative_scan', true),
                 current_setting('hnsw.max_scan_tuples', true),
                 current_setting('diskann.query_search_list_size', true),
                 current_setting('diskann.query_rescore', true),
                 current_setting('enable_sort')];
  -- only the ANN index may order: the planner takes (agent_id = X) and the index's predicate
  -- (its key = K) for independent conditions, expects a few dozen rows, and for an agent of a
  -- few thousand chunks chose the exact B-tree scan + sort over the agent's own HNSW index
  -- (several times slower). The index scan is bounded: an agent's own index holds
  -- only its chunks, and max_scan_tuples bounds the whole-table one.
  -- the agent id goes in as a literal, and its key (the predicate of its own index, see
  -- recall._agent_key): a partial index serves only a WHERE that implies its predicate
  agent_filter := format('c.agent_id = %L', p_agent_id)
    || case when own then ' and ' || recall._agent_key_predicate('c.agent_id', recall._agent_key(p_agent_id)) else '' end;
  loop
    perform set_config('enable_sort', 'off', true);
    if idx_method = 'diskann' then
      perform set_config('diskann.query_search_list_size',
        least(10000, greatest(coalesce(nullif(saved[4], '')::int, 100), ef_min, p_n))::text, true);
      perform set_config('diskann.query_rescore',
        least(1000, greatest(coalesce(nullif(saved[5], '')::int, 50), p_n))::text, true);
    else
      perform set_config('hnsw.ef_search',
        least(1000, greatest(coalesce(nullif(saved[1], '')::int, 40), ef_min, p_n))::text, true);
      perform set_config('hnsw.iterative_scan',
        case when saved[2] = 'strict_order' then 'strict_order' else 'relaxed_order' end, true);
      perform set_config('hnsw.max_scan_tuples',
        least(2147483647, greatest(coalesce(nullif(saved[3], '')::bigint, 20000), max_tuples))::text, true);
    end if;

    raise debug 'recall._vector_arm_scoped: agent %, path ANN via % (%, % rows), % = %, max_scan_tuples %',
      p_agent_id, idx_oid::regclass, idx_method, idx_rows,
      case when idx_method = 'diskann' then 'query_search_list_size' else 'ef_search' end,
      case when idx_method = 'diskann' then current_setting('diskann.query_search_list_size', true)
           else current_setting('hnsw.ef_search', true) end,
      current_setting('hnsw.max_scan_tuples', true);

    execute format($q$
      select array_agg(a.chunk_id order by a.distance, a.chunk_id),
             array_agg(a.distance order by a.distance, a.chunk_id)
      from (select c.chunk_id, c.embedding <=> $1 as distance
            from recall.chunks c
            where %s%s
            order by c.embedding <=> $1
            limit $7) a$q$, agent_filter, conditions)
      into ids, dists
      using p_query, p_since, p_until, p_exclude_session_id, p_filters, p_kinds, p_n, p_as_of, p_project,
            p_any_validity;
    -- a query far from everything the agent holds (its best distance beyond recall.config
    -- ann_far_distance): its neighbours are a near tie that a narrow search misses; once more,
    -- at the width ann_far_ef_search (see the header)
    exit when far_pass or far_dist is null or far_ef is null or coalesce(cardinality(ids), 0) = 0
              or dists[1] <= far_dist
              or least(far_ef, case when idx_method = 'diskann' then 10000 else 1000 end)
                 <= coalesce(nullif(current_setting(case when idx_method = 'diskann'
                      then 'diskann.query_search_list_size' else 'hnsw.ef_search' end, true), '')::int, 0);
    raise debug 'recall._vector_arm_scoped: agent %, best distance % > ann_far_distance %: again at width %',
      p_agent_id, round(dists[1]::numeric, 4), far_dist, far_ef;
    far_pass := true;
    ef_min := greatest(ef_min, far_ef);
  end loop;

  perform set_config('enable_sort', saved[6], true);
  if idx_method = 'diskann' then
    perform set_config('diskann.query_search_list_size', coalesce(saved[4], '100'), true);
    perform set_config('diskann.query_rescore', coalesce(saved[5], '50'), true);
  else
    perform set_config('hnsw.ef_search', coalesce(saved[1], '40'), true);
    perform set_config('hnsw.iterative_scan', coalesce(saved[2], 'off'), true);
    perform set_config('hnsw.max_scan_tuples', coalesce(saved[3], '20000'), true);
  end if;

  -- fewer than n rows: the scan gave up before the filters let n through (or fewer qualify):
  -- only the exact scan can say
  if coalesce(cardinality(ids), 0) < p_n then
    raise debug 'recall._vector_arm_scoped: agent %, ANN gave % of % rows: exact instead', p_agent_id,
      coalesce(cardinality(ids), 0), p_n;
    if selective then
      return query execute format(passing, p_agent_id, conditions, 'order by 2, c.chunk_id limit $7')
        using p_query, p_since, p_until, p_exclude_session_id, p_filters, p_kinds, p_n, p_as_of, p_project,
              p_any_validity;
      return;
    end if;
    return query select * from recall._vector_exact_scoped(p_agent_id, p_query, p_n, p_exclude_session_id,
                                                    p_filters, p_kinds, p_since, p_until, p_as_of, p_project, p_any_validity);
    return;
  end if;
  return query select u.chunk_id, u.distance from unnest(ids, dists) with ordinality as u(chunk_id, distance, i)
               order by u.i;
end
$$;

-- _vector_exact, _vector_arm: the shape v1-v3 call (released/shared.txt): one filter object,
-- every project, every row whatever its validity
create or replace function recall._vector_exact(
  p_agent_id text, p_query vector, p_n int, p_exclude_session_id text, p_filter jsonb,
  p_kinds text[], p_since timestamptz, p_until timestamptz)
returns table (chunk_id bigint, distance double precision)
language sql stable rows 100
set search_path to pg_catalog, public, pg_temp
as $$
  select * from recall._vector_exact_scoped(p_agent_id, p_query, p_n, p_exclude_session_id,
    case when p_filter is not null then array[p_filter] end, p_kinds, p_since, p_until,
    null, null, true)
$$;

create or replace function recall._vector_arm(
  p_agent_id text, p_query vector, p_n int, p_exclude_session_id text, p_filter jsonb,
  p_kinds text[], p_since timestamptz, p_until timestamptz)
returns table (chunk_id bigint, distance double precision)
language sql volatile rows 100
set search_path to pg_catalog, public, pg_temp
as $$
  select * from recall._vector_arm_scoped(p_agent_id, p_query, p_n, p_exclude_session_id,
    case when p_filter is not null then array[p_filter] end, p_kinds, p_since, p_until,
    null, null, true)
$$;
