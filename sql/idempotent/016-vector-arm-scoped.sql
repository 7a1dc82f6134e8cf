-- 016-vector-arm-scoped
-- recall._vector_arm_scoped: recall._vector_arm (015-vector-arm.sql) with the row conditions of
-- recall v4 (sql/released/v4.sql) inside the search, so that n rows come back whenever n rows
-- qualify:
--   p_filters  metadata @> any (p_filters): a v4 filter as its disjuncts
--              (recall._filter_disjuncts_v4: any of several values, on the chunk or any of
--              its messages), NULL for none;
--   p_project  the chunks of that project and the memories of no project (auto_context_v4's
--              Related), NULL for all;
--   p_as_of    the validity of curated memories (sql/incremental/007-memories.sql): valid_until
--              NULL or after p_as_of, valid_from at or before it; NULL: the current ones.
-- Its contract is _vector_arm's (the exact top n by cosine distance among the rows passing the
-- conditions; listed in sql/released/shared.txt): which index, search width or scan answers is
-- a plan choice. Otherwise the same text, path for path: keep the two in step.
--
-- Re-applied at every migrate.

-- _vector_exact_scoped: recall._vector_exact with the scoped row conditions (see above)
create or replace function recall._vector_exact_scoped(
  p_agent_id text, p_query vector, p_n int, p_exclude_session_id text, p_filters jsonb[],
  p_kinds text[], p_since timestamptz, p_until timestamptz, p_as_of timestamptz, p_project text)
returns table (chunk_id bigint, distance double precision)
language sql stable rows 100
set search_path to pg_catalog, public, pg_temp
as $$
  select c.chunk_id, (c.embedding <=> p_query) + 0 as distance
  from recall.chunks c
  where c.agent_id = p_agent_id and c.embedding is not null
    and c.created_at >= coalesce(p_since, '-infinity') and c.created_at < coalesce(p_until, 'infinity')
    and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
    and (p_filters is null or c.metadata @> any (p_filters))
    and (p_project is null or c.metadata @> jsonb_build_object('project', p_project)
         or (c.kind = 'memory' and not c.metadata ? 'project'))
    and (c.valid_until is null or c.valid_until > p_as_of)
    and (p_as_of is null or c.valid_from is null or c.valid_from <= p_as_of)
    and (p_kinds is null or c.kind = any (p_kinds))
  order by 2, c.chunk_id
  limit p_n
$$;

-- _vector_arm_scoped: recall._vector_arm with the scoped row conditions (015-vector-arm.sql says
-- how a path is chosen; the ANN statement takes them as parameters $5, $8, $9)
create or replace function recall._vector_arm_scoped(
  p_agent_id text, p_query vector, p_n int, p_exclude_session_id text, p_filters jsonb[],
  p_kinds text[], p_since timestamptz, p_until timestamptz, p_as_of timestamptz, p_project text)
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
  n_rows int;
  max_tuples bigint;
  saved text[];
  ids bigint[];
  dists double precision[];
begin
  if p_query is null or p_n is null or p_n < 1 then
    return;
  end if;
  select
    coalesce(max(value::int) filter (where key = 'exact_scan_max_rows'), 20000),
    coalesce(max(value::int) filter (where key = 'agent_index_min_rows'), 2000),
    coalesce(max(value::int) filter (where key = 'ann_min_ef_search'), 200)
  into exact_max, own_min, ef_min
  from recall.config
  where key in ('exact_scan_max_rows', 'agent_index_min_rows', 'ann_min_ef_search');

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
                                                        p_filters, p_kinds, p_since, p_until, p_as_of, p_project);
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
                                                      p_filters, p_kinds, p_since, p_until, p_as_of, p_project);
      return;
    end if;
    -- 3. large agent without an index of its own: the whole-table index, iterative scan; the
    -- agent holds at least exact_max / reltuples of the table, so about n * reltuples /
    -- exact_max tuples must be scanned for n to pass (x4 for the other filters)
    max_tuples := ceil(4.0 * p_n * greatest((select reltuples from pg_class where oid = 'recall.chunks'::regclass), 1)
                       / greatest(exact_max, 1));
  end if;

  -- the query-time knobs for this one statement (see the header), previous values kept
  saved := array[current_setting('hnsw.ef_search', true), current_setting('hnsw.iterative_scan', true),
                 current_setting('hnsw.max_scan_tuples', true),
                 current_setting('diskann.query_search_list_size', true),
                 current_setting('diskann.query_rescore', true),
                 current_setting('enable_sort')];
  -- only the ANN index may order: the planner takes (agent_id = X) and the index's predicate
  -- (its key = K) for independent conditions, expects a few dozen rows, and for an agent of up
  -- to ~7,500 chunks chose the exact B-tree scan + sort over the agent's own HNSW index (3.1
  -- against 0.4 ms at 3,700 chunks). The index scan is bounded: an agent's own index holds
  -- only its chunks, and max_scan_tuples bounds the whole-table one.
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

  raise debug 'recall._vector_arm_scoped: agent %, path ANN via % (%), % = %, max_scan_tuples %',
    p_agent_id, idx_oid::regclass, idx_method,
    case when idx_method = 'diskann' then 'query_search_list_size' else 'ef_search' end,
    case when idx_method = 'diskann' then current_setting('diskann.query_search_list_size', true)
         else current_setting('hnsw.ef_search', true) end,
    current_setting('hnsw.max_scan_tuples', true);

  -- the agent id goes in as a literal, and its key (the predicate of its own index, see
  -- recall._agent_key): a partial index serves only a WHERE that implies its predicate
  agent_filter := format('c.agent_id = %L', p_agent_id)
    || case when own then ' and ' || recall._agent_key_predicate('c.agent_id', recall._agent_key(p_agent_id)) else '' end;
  execute format($q$
    select array_agg(a.chunk_id order by a.distance, a.chunk_id),
           array_agg(a.distance order by a.distance, a.chunk_id)
    from (select c.chunk_id, c.embedding <=> $1 as distance
          from recall.chunks c
          where %s
            and c.created_at >= coalesce($2, '-infinity') and c.created_at < coalesce($3, 'infinity')
            and ($4::text is null or c.session_id <> $4)
            and ($5::jsonb[] is null or c.metadata @> any ($5))
            and ($6::text[] is null or c.kind = any ($6))
            and ($9::text is null or c.metadata @> jsonb_build_object('project', $9::text)
                 or (c.kind = 'memory' and not c.metadata ? 'project'))
            and (c.valid_until is null or c.valid_until > $8)
            and ($8::timestamptz is null or c.valid_from is null or c.valid_from <= $8)
          order by c.embedding <=> $1
          limit $7) a$q$, agent_filter)
    into ids, dists
    using p_query, p_since, p_until, p_exclude_session_id, p_filters, p_kinds, p_n, p_as_of, p_project;

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
    return query select * from recall._vector_exact_scoped(p_agent_id, p_query, p_n, p_exclude_session_id,
                                                    p_filters, p_kinds, p_since, p_until, p_as_of, p_project);
    return;
  end if;
  return query select u.chunk_id, u.distance from unnest(ids, dists) with ordinality as u(chunk_id, distance, i)
               order by u.i;
end
$$;
