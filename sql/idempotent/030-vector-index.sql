-- 030-vector-index
-- The ANN indexes of recall.chunks.embedding: choose, validate, build concurrently, inspect, drop.
--
-- Re-applied at every migrate. Recall is always for one agent, and one ANN index over every
-- agent answers "the nearest chunks OF THIS AGENT" badly: the graph search finds the nearest
-- chunks of everyone, and the agent filter throws most of them away (even for an agent holding
-- half the table; docs/DBA.md). So the layout is:
--
--   * an agent with at least recall.config agent_index_min_rows (2000) embedded chunks gets
--     an index of its own: a partial index on a hash of its id, named
--     recall.chunks_embedding_a_<64-bit hash of the agent id, in hex> (see _agent_key);
--   * a smaller agent needs none: recall._vector_arm scans its chunks exactly (B-tree on
--     agent_id, then the distance of each);
--   * scope 'table' or 'both' adds (or, 'table', only builds) one whole-table index,
--     recall.chunks_embedding_idx, for agents without one of their own (see _vector_arm).
--
-- The method is DiskANN (pgvectorscale's diskann) where the vectorscale extension is
-- installed, else HNSW (pgvector); cosine distance either way. What was asked last (method,
-- options, scope) is kept in recall.config 'vector_index', so that running the build again
-- with no arguments refreshes the layout: agents that grew past the threshold get their
-- index, agents that shrank below half of it lose theirs, up-to-date indexes are kept.
--
-- CREATE INDEX CONCURRENTLY cannot run inside a function or a transaction block, so the
-- concurrent build is offered as text: recall.vector_index_ddl() validates everything and
-- returns the statements, which the caller runs in order, each outside a transaction block
-- (`make index`, pyrecall._index.create_index(), or psql's \gexec):
--
--   select recall.vector_index_ddl('hnsw', '{"m": 16, "ef_construction": 64}') \gexec
--
-- recall.create_vector_index() runs the same statements without CONCURRENTLY, in the
-- caller's transaction: writes to recall.chunks wait until it commits, reads go on. Fine for
-- small tables and tests; on a live system use the statements.

insert into recall.config (key, value) values
  ('agent_index_min_rows', '2000')  -- agents with at least this many embedded chunks: own ANN index
, ('ann_min_ef_search', '200')      -- floor of hnsw.ef_search / diskann.query_search_list_size
, ('embedding_storage', '"main"')   -- STORAGE of the vector columns: main (inline) or external
, ('auto_vector_index', 'true')     -- the embedding job builds an agent's own index once it needs one
on conflict (key) do nothing;

-- ann_ef_search_by_rows: the search width by the size of the index searched (recall._vector_arm
-- takes the width of the largest key <= the index's rows; ann_min_ef_search stays the floor).
-- Measured on topic-mixture vectors at 1M chunks, agents of 2.5k-134k, and on an agent of 200k
-- (docs/DBA.md); the 500000 step is extrapolated. recall.tune_vector_search('{"ann_ef_search_by_rows":
-- "measure"}') re-measures it on your data (recall.vector_search_curve). A database still
-- holding the former default (2026-11-26, unmeasured above 100k) gets the new one; a table
-- written by hand or measured is kept.
insert into recall.config (key, value) values
  ('ann_ef_search_by_rows', '{"0": 200, "20000": 400, "100000": 600, "200000": 800, "500000": 1000}')  -- rows -> hnsw.ef_search
on conflict (key) do nothing;
update recall.config set value = '{"0": 200, "20000": 400, "100000": 600, "200000": 800, "500000": 1000}'
where key = 'ann_ef_search_by_rows' and value = '{"0": 200, "50000": 400, "200000": 600, "500000": 800}';

-- ann_far_distance, ann_far_ef_search: a query whose best ANN distance is beyond the first is
-- searched once more at the second width (recall._vector_arm, "Far queries"); null: never.
insert into recall.config (key, value) values
  ('ann_far_distance', '0.75')
, ('ann_far_ef_search', '1000')
on conflict (key) do nothing;

-- The vector columns' storage, as recall.config embedding_storage says (main by default).
-- pgvector declares vector with STORAGE external: once a chunk's row passes ~2 kB (a 384-dim
-- vector is 1.5 kB, plus the text and its tsvector) the vector is the first value moved out
-- to the TOAST table, and every exact distance then costs a TOAST fetch: several times the
-- CPU per chunk scanned of STORAGE main, where the text and tsvector go to TOAST instead and
-- the vector stays in the row (same total size; docs/DBA.md).
-- Applies to rows written from now on (the embedding worker writes every vector by UPDATE);
-- VACUUM FULL recall.chunks (`make vacuum FULL=1`) moves the existing ones. Vectors larger
-- than the row (1536 dims: 6 kB) go to TOAST whatever the storage.
do $$
declare
  wanted "char" := case (select value #>> '{}' from recall.config where key = 'embedding_storage')
                     when 'external' then 'e' else 'm' end;
  col record;
begin
  for col in select a.attrelid::regclass as tbl, a.attname
             from pg_attribute a
             where (a.attrelid, a.attname) in (('recall.chunks'::regclass, 'embedding'),
                                               ('recall.sessions'::regclass, 'summary_embedding'))
               and a.attstorage <> wanted
  loop
    execute format('alter table %s alter column %I set storage %s', col.tbl, col.attname,
                   case wanted when 'e' then 'external' else 'main' end);
  end loop;
end
$$;

-- helpers whose parameter agent_id became agent_key (CREATE OR REPLACE cannot rename one)
do $$
declare
  f regprocedure;
begin
  foreach f in array array[to_regprocedure('recall._index_build_ddl(text, text, text, text[], boolean)'),
                           to_regprocedure('recall._vector_index_built(text, text, boolean)')]
  loop
    if f is not null and exists (select from pg_proc where oid = f and 'agent_id' = any (proargnames)) then
      execute format('drop function %s', f);
    end if;
  end loop;
end
$$;

-- _vector_index_method: 'auto' | 'diskann' | 'hnsw' -> the access method to build with
create or replace function recall._vector_index_method(method text)
returns text
language plpgsql stable
set search_path to pg_catalog, pg_temp
as $$
declare
  have_vectorscale bool := exists (select from pg_extension where extname = 'vectorscale');
begin
  case lower(coalesce(method, 'auto'))
    when 'auto' then
      return case when have_vectorscale then 'diskann' else 'hnsw' end;
    when 'hnsw' then
      return 'hnsw';
    when 'diskann' then
      if not have_vectorscale then
        raise exception 'method diskann needs the vectorscale extension (pgvectorscale), which is not installed in this database'
          using errcode = '0A000',
                hint = 'Use the server of Dockerfile.postgres, or method hnsw (auto picks it here).';
      end if;
      return 'diskann';
    else
      raise exception 'method must be auto, diskann or hnsw, got "%"', method using errcode = '22023';
  end case;
end
$$;

-- _option_int: one integer option (a JSON number, or a string of digits), within [lo, hi]
create or replace function recall._option_int(options jsonb, key text, lo int, hi int)
returns int
language plpgsql immutable
set search_path to pg_catalog, pg_temp
as $$
declare
  v jsonb := options -> key;
begin
  if v is null then
    return null;
  end if;
  if not ((jsonb_typeof(v) = 'number' and v::text ~ '^-?\d{1,10}$')
          or (jsonb_typeof(v) = 'string' and v #>> '{}' ~ '^\s*-?\d{1,10}\s*$'))
     or (v #>> '{}')::numeric not between lo and hi then
    raise exception 'option % must be an integer between % and %, got %', key, lo, hi, v
      using errcode = '22023';
  end if;
  return (v #>> '{}')::int;
end
$$;

-- _vector_index_reloptions: the validated options as reloptions ('m=16', ...), in a fixed
-- order. Built from checked integers, numbers and a fixed list of words only: nothing the
-- caller wrote reaches the DDL as text. Unknown option or bad value: SQLSTATE 22023.
create or replace function recall._vector_index_reloptions(method text, options jsonb)
returns text[]
language plpgsql stable
set search_path to pg_catalog, pg_temp
as $$
declare
  opts jsonb := coalesce(options, '{}');
  allowed text[];
  bad text;
  out text[] := '{}';
  m int;
  efc int;
  layout text;
  dim int := (select value::int from recall.config where key = 'embedding_dim');
begin
  if jsonb_typeof(opts) <> 'object' then
    raise exception 'options must be a JSON object, got a JSON %', jsonb_typeof(opts)
      using errcode = '22023';
  end if;
  allowed := case method
    when 'hnsw' then array['m', 'ef_construction']
    when 'diskann' then array['num_neighbors', 'search_list_size', 'max_alpha', 'storage_layout',
                              'num_bits_per_dimension', 'num_dimensions']
  end;
  select k into bad from jsonb_object_keys(opts) k where k <> all (allowed) order by k limit 1;
  if bad is not null then
    raise exception 'unknown option "%" for a % index; valid options: %', bad, method,
      array_to_string(allowed, ', ') using errcode = '22023';
  end if;

  if method = 'hnsw' then
    -- pgvector's limits: 2 <= m <= 100, 4 <= ef_construction <= 1000, ef_construction >= 2 m
    m := recall._option_int(opts, 'm', 2, 100);
    efc := recall._option_int(opts, 'ef_construction', 4, 1000);
    if efc < 2 * coalesce(m, 16) then
      raise exception 'option ef_construction must be at least twice m, got ef_construction % and m %',
        efc, coalesce(m, 16) using errcode = '22023';
    end if;
    if m is not null then out := out || ('m=' || m); end if;
    if efc is not null then out := out || ('ef_construction=' || efc); end if;
    return out;
  end if;

  -- diskann: pgvectorscale's limits (its reloptions; num_neighbors < 10 fails at build time)
  if opts ? 'storage_layout' then
    layout := opts ->> 'storage_layout';
    if jsonb_typeof(opts -> 'storage_layout') <> 'string' or layout not in ('memory_optimized', 'plain') then
      raise exception 'option storage_layout must be memory_optimized or plain, got %', opts -> 'storage_layout'
        using errcode = '22023';
    end if;
    out := out || ('storage_layout=' || layout);
  end if;
  if opts ? 'num_neighbors' then
    out := out || ('num_neighbors=' || recall._option_int(opts, 'num_neighbors', 10, 1000));
  end if;
  if opts ? 'search_list_size' then
    out := out || ('search_list_size=' || recall._option_int(opts, 'search_list_size', 10, 1000));
  end if;
  if opts ? 'max_alpha' then
    if jsonb_typeof(opts -> 'max_alpha') not in ('number', 'string')
       or (opts ->> 'max_alpha') !~ '^\s*\d{1,3}(\.\d{1,6})?\s*$'
       or (opts ->> 'max_alpha')::numeric not between 1.0 and 5.0 then
      raise exception 'option max_alpha must be a number between 1.0 and 5.0, got %', opts -> 'max_alpha'
        using errcode = '22023';
    end if;
    out := out || ('max_alpha=' || trim((opts ->> 'max_alpha')::numeric::text));
  end if;
  if opts ? 'num_bits_per_dimension' then
    if layout = 'plain' then
      raise exception 'option num_bits_per_dimension applies to storage_layout memory_optimized only'
        using errcode = '22023';
    end if;
    out := out || ('num_bits_per_dimension=' || recall._option_int(opts, 'num_bits_per_dimension', 1, 32));
  end if;
  if opts ? 'num_dimensions' then
    out := out || ('num_dimensions=' || recall._option_int(opts, 'num_dimensions', 0, least(coalesce(dim, 5000), 5000)));
  end if;
  return out;
end
$$;

-- _agent_key: what the catalog knows of an agent with an index of its own: a 64-bit hash of
-- its id (hashtextextended, 16 hex digits), in the index's name and predicate. pg_class and
-- pg_index are readable by every role, so the agent id itself never appears there: another
-- agent cannot list who has an index, only confirm an id it already guessed. The predicate
-- spells the hash out with the built-in function, hashtextextended(agent_id, 0) = <bigint>
-- (recall._agent_key_predicate): it is evaluated at every insert into recall.chunks, once per
-- agent index, and costs little there (md5 costs several times more; a call of a recall
-- function more still).
-- Two agents with the same hash would share an index: correct still (the query also says
-- agent_id = ...), only the other's vectors in the graph.
create or replace function recall._agent_key(agent_id text)
returns text
language sql immutable parallel safe strict
set search_path to pg_catalog, pg_temp
as $$
  select lpad(to_hex(hashtextextended(agent_id, 0)), 16, '0')
$$;

-- _agent_key_predicate: the WHERE of the index of the agent of `agent_key`, on column `col`
create or replace function recall._agent_key_predicate(col text, agent_key text)
returns text
language sql immutable parallel safe strict
set search_path to pg_catalog, pg_temp
as $$
  select format('pg_catalog.hashtextextended(%s, 0) = %L::bigint', col, ('x' || agent_key)::bit(64)::bigint)
$$;

-- _agent_index_name: the name of an agent's own index
create or replace function recall._agent_index_name(agent_id text)
returns text
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select 'chunks_embedding_a_' || recall._agent_key(agent_id)
$$;

-- _agent_vector_index: the agent's own index if it exists and is valid (NULL otherwise), and
-- its access method. Catalog lookups by name and oid, through the catalogs' indexes:
-- microseconds. Even a hash collision could not give a wrong answer: the planner uses a
-- partial index only when the query's WHERE implies its predicate.
create or replace function recall._agent_vector_index(agent_id text, out index_oid oid, out method name)
language sql stable
set search_path to pg_catalog, pg_temp
as $$
  select i.indexrelid, substring(pg_get_indexdef(i.indexrelid) from ' USING (\w+) ')::name
  from pg_index i
  where i.indexrelid = to_regclass('recall.' || recall._agent_index_name(agent_id))
    and i.indisvalid
$$;

-- _table_vector_index: the whole-table index recall.chunks_embedding_idx (or, if someone built
-- another, any valid ANN index without a predicate), and its access method
create or replace function recall._table_vector_index(out index_oid oid, out method name)
language sql stable
set search_path to pg_catalog, pg_temp
as $$
  select x.indexrelid, x.am
  from (select i.indexrelid, substring(pg_get_indexdef(i.indexrelid) from ' USING (\w+) ')::name as am
        from pg_index i
        where i.indrelid = 'recall.chunks'::regclass and i.indisvalid and i.indpred is null) x
  where x.am in ('hnsw', 'diskann', 'ivfflat')
  order by x.indexrelid <> coalesce(to_regclass('recall.chunks_embedding_idx'), 0), x.indexrelid
  limit 1
$$;

-- _vector_indexes: every ANN index on recall.chunks, with the build record of its comment
create or replace function recall._vector_indexes()
returns table (index_oid oid, index_name name, method name, reloptions text[], is_partial bool,
               valid bool, note jsonb)
language sql stable
set search_path to pg_catalog, pg_temp
as $$
  select ix.oid, ix.relname, am.amname, coalesce(ix.reloptions, '{}'), i.indpred is not null,
         i.indisvalid, b.note
  from pg_index i
  join pg_class ix on ix.oid = i.indexrelid
  join pg_am am on am.oid = ix.relam
  left join lateral (
    select case when d.description ~ '^\s*\{' then d.description::jsonb end as note
    from pg_description d
    where d.objoid = ix.oid and d.classoid = 'pg_class'::regclass and d.objsubid = 0
  ) b on true
  where i.indrelid = 'recall.chunks'::regclass
    and am.amname in ('hnsw', 'diskann', 'ivfflat')
  order by ix.relname
$$;

-- _index_build_ddl: the statements that make recall.<name> an up-to-date index (nothing when
-- it already is one: valid, same method, same options). A new index is built beside the old
-- one as <name>_new and swapped in by renames, then the old one dropped, so that recall uses
-- an index all along; a left-over <name>_new (an interrupted concurrent build leaves it
-- INVALID) is dropped first.
create or replace function recall._index_build_ddl(
  name text, agent_key text, method text, reloptions text[], concurrent bool)
returns setof text
language plpgsql stable
set search_path to pg_catalog, pg_temp
as $$
declare
  cc text := case when concurrent then ' concurrently' else '' end;
  -- the operator class, qualified: the statement may run under any search_path
  opclass text := (select format('%I.vector_cosine_ops', n.nspname)
                   from pg_extension e join pg_namespace n on n.oid = e.extnamespace
                   where e.extname = 'vector');
  cur record;
begin
  select * into cur from recall._vector_indexes() v where v.index_name = name;
  if found and cur.valid and cur.method = method
     and (select array_agg(o order by o) from unnest(cur.reloptions) o)
         is not distinct from (select array_agg(o order by o) from unnest(reloptions) o)
     and (select pg_get_expr(i.indpred, i.indrelid) from pg_index i where i.indexrelid = cur.index_oid)
         is not distinct from (select format('(hashtextextended(agent_id, (0)::bigint) = %L::bigint)',
                                             ('x' || k)::bit(64)::bigint)
                               from (select agent_key where agent_key is not null) as x(k)) then
    return;
  end if;
  if to_regclass(format('recall.%I', name || '_new')) is not null then
    return next format('drop index%s if exists recall.%I', cc, name || '_new');
  end if;
  if to_regclass(format('recall.%I', name || '_old')) is not null then
    return next format('drop index%s if exists recall.%I', cc, name || '_old');
  end if;
  return next 'select recall._vector_index_build_start()';
  return next format('create index%s %I on recall.chunks using %s (embedding %s)%s%s',
    cc, name || '_new', method, opclass,
    case when cardinality(reloptions) > 0 then ' with (' || array_to_string(reloptions, ', ') || ')' else '' end,
    case when agent_key is not null then ' where ' || recall._agent_key_predicate('agent_id', agent_key) else '' end);
  return next format('select recall._vector_index_built(%L, %L, %L)', name || '_new', agent_key, concurrent);
  if found then
    return next format('alter index recall.%I rename to %I', name, name || '_old');
  end if;
  return next format('alter index recall.%I rename to %I', name || '_new', name);
  if found then
    return next format('drop index%s if exists recall.%I', cc, name || '_old');
  end if;
end
$$;

-- _vector_index_default_options: the options of a first build when none are given. HNSW:
-- ef_construction 128 (pgvector's default is 64). With 64, one per-agent graph of a large
-- benchmark (clustered vectors) left a cluster unreachable: a query found almost none of its
-- true neighbours whatever ef_search. Rebuilt with 128 it found them all, for a slightly
-- longer build (docs/DBA.md). A refresh keeps the options last built, so
-- an existing layout is not rebuilt by this default; explicit options, '{}' included, win.
create or replace function recall._vector_index_default_options(method text)
returns jsonb
language sql immutable
set search_path to pg_catalog, pg_temp
as $$
  select case when method = 'hnsw' then '{"ef_construction": 128}'::jsonb else '{}'::jsonb end
$$;

-- vector_index_ddl: the statements that bring the ANN indexes to the layout asked (see the
-- header), to run in order, each outside a transaction block. NULL arguments mean "as last
-- built" (recall.config 'vector_index'), else auto / '{}' / 'agents': with no arguments this
-- is the refresh to run after agents grew (nightly, or from `make index`).
--   method: auto | diskann | hnsw;  options: see _vector_index_reloptions;
--   scope: agents (one index per agent of agent_index_min_rows chunks or more) | table (one
--   whole-table index) | both;  concurrent: CREATE/DROP INDEX CONCURRENTLY.
create or replace function recall.vector_index_ddl(
  method text default null, options jsonb default null, scope text default null,
  concurrent bool default true)
returns setof text
language plpgsql stable
set search_path to pg_catalog, pg_temp
as $$
declare
  conf jsonb := (select value from recall.config where key = 'vector_index');
  am text := recall._vector_index_method(coalesce(method, conf ->> 'method', 'auto'));
  opts jsonb := coalesce(options, case when conf ->> 'method' = am then conf -> 'options' end,
                         recall._vector_index_default_options(am));
  sc text := lower(coalesce(scope, conf ->> 'scope', 'agents'));
  rel text[] := recall._vector_index_reloptions(am, opts);
  min_rows int := coalesce((select value::int from recall.config where key = 'agent_index_min_rows'), 2000);
  cc text := case when concurrent then ' concurrently' else '' end;
  a record;
begin
  if sc is null or sc not in ('agents', 'table', 'both') then
    raise exception 'scope must be agents, table or both, got "%"', scope using errcode = '22023';
  end if;

  -- the whole-table index
  if sc in ('table', 'both') then
    return query select * from recall._index_build_ddl('chunks_embedding_idx', null, am, rel, concurrent);
  elsif to_regclass('recall.chunks_embedding_idx') is not null then
    return next format('drop index%s if exists recall.chunks_embedding_idx', cc);
  end if;

  -- the agents' own indexes: build for agents at the threshold or above (largest first), keep
  -- those of agents still at half of it or more (no flapping), drop the others
  for a in
    with sizes as (
      select recall._agent_key(c.agent_id) as agent_key, count(*) as n
      from recall.chunks c
      where c.embedding is not null
      group by c.agent_id
      having count(*) >= min_rows / 2
    ),
    existing as (
      select v.index_name, substr(v.index_name, 20) as agent_key
      from recall._vector_indexes() v
      where v.index_name ~ '^chunks_embedding_a_[0-9a-f]{16}$'
    )
    select coalesce(s.agent_key, e.agent_key) as agent_key, coalesce(s.n, 0) as n,
           'chunks_embedding_a_' || coalesce(s.agent_key, e.agent_key) as index_name,
           e.index_name is not null as has_index
    from sizes s
    full join existing e on e.agent_key = s.agent_key
    order by n desc, agent_key
  loop
    if sc in ('agents', 'both') and (a.n >= min_rows or (a.has_index and a.n >= min_rows / 2)) then
      return query select * from recall._index_build_ddl(a.index_name, a.agent_key, am, rel, concurrent);
    elsif a.has_index then
      return next format('drop index%s if exists recall.%I', cc, a.index_name);
    end if;
  end loop;

  -- remember the layout, options as built (typed, canonical)
  return next format('select recall._vector_index_configured(%L, %L, %L)', am,
    coalesce((select jsonb_object_agg(split_part(o, '=', 1),
                                      case when split_part(o, '=', 2) ~ '^-?\d+(\.\d+)?$'
                                           then to_jsonb(split_part(o, '=', 2)::numeric)
                                           else to_jsonb(split_part(o, '=', 2)) end)
              from unnest(rel) o), '{}'), sc);
end
$$;

-- vector_index_upkeep_ddl: the statements that give an agent the index of its own it has come to
-- need: each of `agent_ids` (NULL: every agent) that holds agent_index_min_rows embedded chunks
-- or more and has no valid index of its own gets one, with the method and options last built
-- (recall.config 'vector_index'), else the defaults. Only what is missing is built: nothing is
-- dropped, rebuilt or re-optioned (that is the refresh, vector_index_ddl()). Nothing at all when
-- recall.config auto_vector_index is false, or when the layout last built is scope 'table' (the
-- DBA chose one whole-table index). The embedding job runs these statements after a run that
-- embedded chunks (pyrecall/_worker.py), so that an agent that outgrows the exact scan is
-- searched through an index without anyone running `make index`: without one, its vector arm
-- costs ~2-5 us a chunk (hybrid_recall p95 53.7 ms at 10.5k chunks, 160.7 ms at 53k).
-- A build cut short (an INVALID <name>_new left, no valid <name>) is built again by any call.
-- Each agent's count stops at the threshold (a B-tree range, capped): milliseconds per agent;
-- with an empty list, catalog lookups only.
create or replace function recall.vector_index_upkeep_ddl(
  agent_ids text[] default null, concurrent bool default true)
returns setof text
language plpgsql stable
set search_path to pg_catalog, pg_temp
as $$
declare
  conf jsonb := (select value from recall.config where key = 'vector_index');
  am text;
  rel text[];
  min_rows int := coalesce((select value::int from recall.config where key = 'agent_index_min_rows'), 2000);
  a record;
begin
  if (select value from recall.config where key = 'auto_vector_index') = 'false'::jsonb
     or lower(coalesce(conf ->> 'scope', 'agents')) = 'table' then
    return;
  end if;
  am := recall._vector_index_method(coalesce(conf ->> 'method', 'auto'));
  rel := recall._vector_index_reloptions(am, coalesce(case when conf ->> 'method' = am then conf -> 'options' end,
                                                      recall._vector_index_default_options(am)));
  for a in
    with unindexed as (
      -- the agents asked for that have no index of their own (a catalog lookup each)
      select distinct u.agent_id from unnest(agent_ids) u(agent_id)
      where u.agent_id is not null
        and (select v.index_oid from recall._agent_vector_index(u.agent_id) v) is null
    ),
    grown as (
      -- ... each counted up to the threshold
      select q.agent_id from unindexed q
      where (select count(*) from (select from recall.chunks c
                                   where c.agent_id = q.agent_id and c.embedding is not null
                                   limit min_rows) x) >= min_rows
      union all
      -- no list: every agent at the threshold without an index of its own
      select c.agent_id from recall.chunks c
      where agent_ids is null and c.embedding is not null
      group by c.agent_id
      having count(*) >= min_rows
         and (select v.index_oid from recall._agent_vector_index(c.agent_id) v) is null
    ),
    interrupted as (
      -- a build cut short (Ctrl-C, a crash, a failed concurrent build) leaves an INVALID
      -- <name>_new and no valid <name>: built again, whichever agents the caller names
      select substr(v.index_name, 20, 16) as agent_key
      from recall._vector_indexes() v
      where v.index_name ~ '^chunks_embedding_a_[0-9a-f]{16}_new$' and not v.valid
        and not exists (select from recall._vector_indexes() w
                        where w.index_name = left(v.index_name, 35) and w.valid)
    )
    select recall._agent_key(g.agent_id) as agent_key from grown g
    union
    select i.agent_key from interrupted i
    order by 1
  loop
    return query select * from recall._index_build_ddl('chunks_embedding_a_' || a.agent_key, a.agent_key,
                                                       am, rel, concurrent);
  end loop;
end
$$;

-- _vector_index_build_start: mark the start of one index build (a session setting, read by
-- _vector_index_built)
create or replace function recall._vector_index_build_start()
returns void
language sql volatile
set search_path to pg_catalog, pg_temp
as $$
  select set_config('pyrecall.index_build_started', clock_timestamp()::text, false)
$$;

-- _vector_index_built: record when and how fast an index was built, and for which agent key, as
-- the index's comment (it travels with the index through the renames, and goes away with it)
create or replace function recall._vector_index_built(index_name text, agent_key text, concurrent bool)
returns void
language plpgsql volatile
set search_path to pg_catalog, pg_temp
as $$
declare
  started timestamptz := nullif(current_setting('pyrecall.index_build_started', true), '')::timestamptz;
begin
  execute format('comment on index recall.%I is %L', index_name,
    jsonb_strip_nulls(jsonb_build_object(
      'agent_key', agent_key,
      'built_at', clock_timestamp(),
      'build_seconds', round(extract(epoch from clock_timestamp() - started)::numeric, 3),
      'concurrently', concurrent,
      'built_by', current_user))::text);
end
$$;

-- _vector_index_configured: remember the layout asked (recall.config 'vector_index'); NULL
-- method: forget it (after a drop)
create or replace function recall._vector_index_configured(method text, options jsonb, scope text)
returns void
language sql volatile
set search_path to pg_catalog, pg_temp
as $$
  delete from recall.config where key = 'vector_index' and method is null;
  insert into recall.config (key, value)
  select 'vector_index', jsonb_build_object('method', method, 'options', coalesce(options, '{}'),
                                            'scope', scope, 'at', now())
  where method is not null
  on conflict (key) do update set value = excluded.value;
$$;

-- create_vector_index: bring the ANN indexes to the layout asked now, in this transaction (not
-- concurrently; see the header), and return the statements it ran.
--   select * from recall.create_vector_index('hnsw', '{"m": 16, "ef_construction": 64}');
create or replace function recall.create_vector_index(
  method text default null, options jsonb default null, scope text default null)
returns setof text
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  stmt text;
begin
  for stmt in select * from recall.vector_index_ddl(method, options, scope, false) loop
    execute stmt;
    return next stmt;
  end loop;
end
$$;

-- drop_vector_index_ddl: the statements that drop every ANN index of recall.chunks (whoever
-- built it) and forget the layout; DROP INDEX CONCURRENTLY by default, so run each outside a
-- transaction block
create or replace function recall.drop_vector_index_ddl(concurrent bool default true)
returns setof text
language sql stable
set search_path to pg_catalog, pg_temp
as $$
  select format('drop index%s if exists recall.%I', case when concurrent then ' concurrently' else '' end,
                v.index_name)
  from recall._vector_indexes() v
  union all
  select 'select recall._vector_index_configured(null, null, null)'
$$;

-- drop_vector_index: drop every ANN index of recall.chunks now (in this transaction); returns
-- how many went. Recall stays correct without them (exact scans), only slower for large agents.
create or replace function recall.drop_vector_index()
returns int
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  stmt text;
  n int := 0;
begin
  for stmt in select * from recall.drop_vector_index_ddl(false) loop
    execute stmt;
    n := n + (stmt like 'drop %')::int;
  end loop;
  return n;
end
$$;

-- index_info: one row per ANN index of recall.chunks: the agent it serves (NULL: the whole
-- table; found by its key among the agent ids the caller may see), method, options, validity,
-- size, rows, scans since the statistics reset, and the build record of _vector_index_built
create or replace function recall.index_info()
returns table (index_name name, agent_id text, method name, options jsonb, valid bool,
               size_bytes bigint, size text, index_rows bigint, scans bigint, built_at timestamptz,
               build_seconds double precision, definition text)
language sql stable security invoker
set search_path to pg_catalog, pg_temp
as $$
  with keyed as (
    select v.index_name, substr(v.index_name, 20) as agent_key
    from recall._vector_indexes() v
    where v.index_name ~ '^chunks_embedding_a_[0-9a-f]{16}(_new|_old)?$'
  ),
  agents as (
    select a.agent_id, recall._agent_key(a.agent_id) as agent_key
    from (select distinct c.agent_id from recall.chunks c
          where exists (select from keyed)) a
  )
  select v.index_name,
         (select a.agent_id from keyed k join agents a on a.agent_key = left(k.agent_key, 16)
          where k.index_name = v.index_name limit 1),
         v.method,
         coalesce((select jsonb_object_agg(split_part(o, '=', 1),
                                           case when split_part(o, '=', 2) ~ '^-?\d+(\.\d+)?$'
                                                then to_jsonb(split_part(o, '=', 2)::numeric)
                                                else to_jsonb(split_part(o, '=', 2)) end)
                   from unnest(v.reloptions) o), '{}'),
         v.valid,
         pg_relation_size(v.index_oid), pg_size_pretty(pg_relation_size(v.index_oid)),
         greatest(ix.reltuples, 0)::bigint,
         s.idx_scan,
         (v.note ->> 'built_at')::timestamptz, (v.note ->> 'build_seconds')::double precision,
         pg_get_indexdef(v.index_oid)
  from recall._vector_indexes() v
  join pg_class ix on ix.oid = v.index_oid
  left join pg_stat_all_indexes s on s.indexrelid = v.index_oid
  order by v.is_partial, pg_relation_size(v.index_oid) desc, v.index_name
$$;

-- index_build_progress: the CREATE INDEX running on recall.chunks, as
-- pg_stat_progress_create_index reports it. pgvector's HNSW build reports the phase
-- "building index: loading tuples", the heap blocks scanned (blocks_done / blocks_total: the
-- percent below) and the tuples added so far (tuples_done; its tuples_total stays 0).
create or replace function recall.index_build_progress()
returns table (pid int, index_name name, phase text, tuples_done bigint, tuples_total bigint,
               blocks_done bigint, blocks_total bigint, percent numeric, elapsed interval)
language sql stable security invoker
set search_path to pg_catalog, pg_temp
as $$
  select p.pid, ix.relname, p.phase, p.tuples_done, p.tuples_total, p.blocks_done, p.blocks_total,
         round(100.0 * case when p.tuples_total > 0 then p.tuples_done::numeric / p.tuples_total
                            when p.blocks_total > 0 then p.blocks_done::numeric / p.blocks_total end, 1),
         clock_timestamp() - a.query_start
  from pg_stat_progress_create_index p
  left join pg_class ix on ix.oid = p.index_relid
  left join pg_stat_activity a on a.pid = p.pid
  where p.relid = 'recall.chunks'::regclass
$$;

-- vector_search_settings: the query-time knobs of the ANN indexes, their value in this session
-- and what ALTER DATABASE / ALTER ROLE ... SET made their default here
create or replace function recall.vector_search_settings()
returns table (name text, value text, database_default text, role_default text, floor text)
language sql stable security invoker
set search_path to pg_catalog, pg_temp
as $$
  with knobs(name, floor) as (
    values ('hnsw.ef_search', (select value #>> '{}' from recall.config where key = 'ann_min_ef_search')),
           ('hnsw.iterative_scan', 'relaxed_order'),
           ('hnsw.max_scan_tuples', null), ('hnsw.scan_mem_multiplier', null),
           ('diskann.query_search_list_size', (select value #>> '{}' from recall.config where key = 'ann_min_ef_search')),
           ('diskann.query_rescore', 'n (the rows asked)'))
  , defaults as (
    select r.setrole, split_part(cfg, '=', 1) as name, substr(cfg, strpos(cfg, '=') + 1) as value
    from pg_db_role_setting r, unnest(r.setconfig) cfg
    where r.setdatabase = (select oid from pg_database where datname = current_database())
       or r.setdatabase = 0
  )
  select k.name, current_setting(k.name, true),
         (select d.value from defaults d where d.name = k.name and d.setrole = 0),
         (select d.value from defaults d where d.name = k.name and d.setrole = (select oid from pg_roles where rolname = current_user)),
         k.floor
  from knobs k
$$;

-- vector_search_curve: recall@10 against the exact scan, and time, of the ANN search through
-- agents' own indexes at each search width of ef_values: for up to max_agents agents spread
-- over the sizes (the largest agent of each quarter-decade of size, largest first), `queries`
-- query vectors each: a chunk of the agent at random plus isotropic noise of the same norm
-- (cosine ~0.7 to it: near what answers it, away from every stored vector, as a question
-- sits). Slow by design (an exact
-- scan per query, over every chunk of the agent); recall.tune_vector_search uses it to fill
-- recall.config ann_ef_search_by_rows.
create or replace function recall.vector_search_curve(
  ef_values int[] default '{40,100,200,300,400,600,800,1000}', queries int default 20,
  max_agents int default 6)
returns table (index_name name, index_rows bigint, ef_search int, recall_at_10 double precision,
               ms_per_query double precision)
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
declare
  a record;
  q vector;
  truth bigint[];
  got bigint[];
  hits int[];
  ms double precision[];
  n_q int;
  t timestamptz;
  knob text;
  saved text[];
  stmt text;
begin
  if ef_values is null or cardinality(ef_values) = 0
     or exists (select from unnest(ef_values) e where e is null or e not between 1 and 1000) then
    raise exception 'ef_values must be search widths between 1 and 1000, got %', ef_values using errcode = '22023';
  end if;
  if queries is null or queries not between 1 and 1000 or max_agents is null or max_agents < 1 then
    raise exception 'queries must be between 1 and 1000 and max_agents at least 1' using errcode = '22023';
  end if;
  saved := array[current_setting('enable_sort'), current_setting('hnsw.ef_search', true),
                 current_setting('hnsw.iterative_scan', true),
                 current_setting('diskann.query_search_list_size', true)];
  for a in
    with own as (
      select x.agent_id, ix.relname, greatest(ix.reltuples, 0)::bigint as n,
             (select am.amname from pg_am am where am.oid = ix.relam) as method
      from (select distinct c.agent_id from recall.chunks c) x
      join pg_class ix on ix.relname = recall._agent_index_name(x.agent_id)
                      and ix.relnamespace = 'recall'::regnamespace
      join pg_index i on i.indexrelid = ix.oid and i.indisvalid)
    select o.* from (select distinct on (floor(4 * log(greatest(own.n, 1)))) own.*
                     from own order by floor(4 * log(greatest(own.n, 1))) desc, own.n desc) o
    order by o.n desc
    limit max_agents
  loop
    hits := array_fill(0, array[cardinality(ef_values)]);
    ms := array_fill(0::double precision, array[cardinality(ef_values)]);
    n_q := 0;
    knob := case when a.method = 'diskann' then 'diskann.query_search_list_size' else 'hnsw.ef_search' end;
    stmt := format('select array_agg(x.chunk_id) from (select c.chunk_id from recall.chunks c '
                   'where c.agent_id = %L and %s and c.embedding is not null '
                   'order by c.embedding <=> $1 limit 10) x',
                   a.agent_id, recall._agent_key_predicate('c.agent_id', recall._agent_key(a.agent_id)));
    for q in
      select c.embedding + array(select random_normal(0, vector_norm(c.embedding) / sqrt(vector_dims(c.embedding)))
                                 from generate_series(1, vector_dims(c.embedding)))::vector
      from (select c.embedding from recall.chunks c
            where c.agent_id = a.agent_id and c.embedding is not null
            order by random() limit queries) c
    loop
      select array_agg(e.chunk_id) into truth
      from recall._vector_exact(a.agent_id, q, 10, null, null, null, null, null) e;
      n_q := n_q + 1;
      perform set_config('enable_sort', 'off', true);
      perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
      for i in 1 .. cardinality(ef_values) loop
        perform set_config(knob, ef_values[i]::text, true);
        t := clock_timestamp();
        execute stmt into got using q;
        ms[i] := ms[i] + extract(epoch from clock_timestamp() - t) * 1000;
        hits[i] := hits[i] + (select count(*) from unnest(got) g where g = any (truth));
      end loop;
      perform set_config('enable_sort', saved[1], true);
    end loop;
    perform set_config('hnsw.ef_search', coalesce(saved[2], '40'), true);
    perform set_config('hnsw.iterative_scan', coalesce(saved[3], 'off'), true);
    if saved[4] is not null then
      perform set_config('diskann.query_search_list_size', saved[4], true);
    end if;
    if n_q > 0 then
      for i in 1 .. cardinality(ef_values) loop
        return query select a.relname, a.n, ef_values[i],
                            round(hits[i]::numeric / (10 * n_q), 4)::double precision,
                            round((ms[i] / n_q)::numeric, 3)::double precision;
      end loop;
    end if;
  end loop;
end
$$;

-- _ef_search_steps: the step table ann_ef_search_by_rows that a measured curve gives: for each
-- index measured (by size), the smallest width reaching target_recall (none reaches it: the
-- widest measured), never narrower than for a smaller index; keyed by the size of the next
-- smaller index measured (0 for the smallest), so that an agent between two measured sizes
-- gets the width of the larger.
create or replace function recall._ef_search_steps(target_recall double precision,
                                                   ef_values int[] default null, queries int default null)
returns jsonb
language sql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
  with curve as (
    select * from recall.vector_search_curve(coalesce(ef_values, '{40,100,200,300,400,600,800,1000}'),
                                             coalesce(queries, 20))
  ), best as (
    select c.index_rows, coalesce(min(c.ef_search) filter (where c.recall_at_10 >= target_recall),
                                  max(c.ef_search)) as ef
    from curve c group by c.index_name, c.index_rows
  ), steps as (
    select coalesce(lag(b.index_rows) over w, 0) as from_rows, max(b.ef) over w as ef
    from best b window w as (order by b.index_rows, b.ef)
  )
  select jsonb_object_agg(s.from_rows::text, s.ef) from steps s
$$;

-- tune_vector_search: persist query-time knobs for the database (or one role in it) with
-- ALTER DATABASE / ALTER ROLE ... IN DATABASE ... SET; a JSON null resets one. New sessions
-- see them (and Citus workers, which session SETs do not reach). One key is recall.config's,
-- for every role: ann_ef_search_by_rows, the search width by index size (a step table, or
-- "measure": measured now by recall.vector_search_curve for recall@10 >= target_recall, 0.99
-- by default; null: none, the floor ann_min_ef_search only).
--   select recall.tune_vector_search('{"hnsw.ef_search": 200}');
--   select recall.tune_vector_search('{"ann_ef_search_by_rows": "measure", "target_recall": 0.99}');
create or replace function recall.tune_vector_search(settings jsonb, role_name text default null)
returns setof text
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  k text;
  v jsonb;
  val text;
  target text;
  stmt text;
begin
  if settings is null or jsonb_typeof(settings) <> 'object' then
    raise exception 'settings must be a JSON object such as {"hnsw.ef_search": 200}' using errcode = '22023';
  end if;
  target := case when role_name is null then format('database %I', current_database())
                 else format('role %I in database %I', role_name, current_database()) end;
  for k, v in select * from jsonb_each(settings) e where e.key <> 'target_recall' loop
    if k = 'ann_ef_search_by_rows' then
      -- a recall.config key, not a setting: the search width by index size (see 015-vector-arm)
      if jsonb_typeof(v) = 'null' then
        delete from recall.config c where c.key = k;
        return next format('delete from recall.config where key = %L', k);
        continue;
      end if;
      if v = '"measure"' then
        v := recall._ef_search_steps(coalesce((settings ->> 'target_recall')::double precision, 0.99));
        if v is null then
          raise exception 'no agent has an index of its own to measure: build them first (recall.create_vector_index)'
            using errcode = '55000';
        end if;
      end if;
      if jsonb_typeof(v) <> 'object' or v = '{}'
         or exists (select from jsonb_each(v) e
                    where e.key !~ '^\d{1,18}$' or e.value #>> '{}' !~ '^\d{1,4}$'
                       or (e.value #>> '{}')::int not between 1 and 1000) then
        raise exception 'ann_ef_search_by_rows must be "measure", null or an object of rows -> width (1..1000) such as {"0": 200, "50000": 400}, got %', v
          using errcode = '22023';
      end if;
      insert into recall.config (key, value) values (k, v)
      on conflict (key) do update set value = excluded.value;
      return next format('recall.config ann_ef_search_by_rows = %s', v);
      continue;
    end if;
    if jsonb_typeof(v) = 'null' then
      val := null;
    elsif k = 'hnsw.iterative_scan' then
      val := v #>> '{}';
      if val not in ('off', 'relaxed_order', 'strict_order') then
        raise exception 'hnsw.iterative_scan must be off, relaxed_order or strict_order, got %', v
          using errcode = '22023';
      end if;
    elsif k = 'hnsw.ef_search' then
      val := recall._option_int(settings, k, 1, 1000);
    elsif k = 'hnsw.max_scan_tuples' then
      val := recall._option_int(settings, k, 1, 2147483647);
    elsif k = 'hnsw.scan_mem_multiplier' then
      val := recall._option_int(settings, k, 1, 1000);
    elsif k = 'diskann.query_search_list_size' then
      val := recall._option_int(settings, k, 1, 10000);
    elsif k = 'diskann.query_rescore' then
      val := recall._option_int(settings, k, 0, 1000);
    else
      raise exception 'unknown setting "%"; valid: hnsw.ef_search, hnsw.iterative_scan, hnsw.max_scan_tuples, hnsw.scan_mem_multiplier, diskann.query_search_list_size, diskann.query_rescore, ann_ef_search_by_rows', k
        using errcode = '22023';
    end if;
    stmt := case when val is null then format('alter %s reset %s', target, k)
                 else format('alter %s set %s = %L', target, k, val) end;
    execute stmt;
    return next stmt;
  end loop;
end
$$;

-- storage_stats: every table and index of the recall schema, largest first (`make stats`)
create or replace function recall.storage_stats()
returns table (relation name, kind text, table_name name, est_rows bigint, size_bytes bigint,
               size text, total_size text)
language sql stable security invoker
set search_path to pg_catalog, pg_temp
as $$
  select c.relname,
         case c.relkind when 'r' then 'table' when 'i' then 'index' end,
         coalesce(t.relname, c.relname),
         greatest(c.reltuples, 0)::bigint,
         pg_relation_size(c.oid),
         pg_size_pretty(pg_relation_size(c.oid)),
         case when c.relkind = 'r' then pg_size_pretty(pg_total_relation_size(c.oid)) end
  from pg_class c
  left join pg_index i on i.indexrelid = c.oid
  left join pg_class t on t.oid = i.indrelid
  where c.relnamespace = 'recall'::regnamespace and c.relkind in ('r', 'i')
  order by pg_relation_size(c.oid) desc, c.relname
$$;

-- embedding_stats: the embedding queue at a glance (`make stats`)
create or replace function recall.embedding_stats()
returns table (chunks bigint, embedded bigint, pending bigint, failing bigint,
               oldest_pending timestamptz, models jsonb)
language sql stable security invoker
set search_path to pg_catalog, pg_temp
as $$
  select count(*), count(c.embedding), count(*) - count(c.embedding),
         count(*) filter (where c.embedding is null and c.embed_attempts > 0),
         min(c.created_at) filter (where c.embedding is null),
         (select coalesce(jsonb_object_agg(m.model, m.n), '{}')
          from (select coalesce(embedding_model, '(none)') as model, count(*) as n
                from recall.chunks where embedding is not null group by 1) m)
  from recall.chunks c
$$;

-- embedding_model: the model that made an agent's stored vectors, so that a caller embeds its
-- query with the same one (a query vector of another model ranks nothing by meaning)
create or replace function recall.embedding_model(agent_id text)
returns text
language sql stable security invoker parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select c.embedding_model
  from recall.chunks c
  where c.agent_id = embedding_model.agent_id and c.embedding_model is not null
  order by c.created_at desc
  limit 1
$$;

comment on function recall.embedding_model(text) is $c$
The model (as the embedding job names it, e.g. local/all-MiniLM-L6-v2) of the agent's newest
embedded chunk; NULL when none is embedded (or the caller may not see the agent's rows: RLS
applies). A query vector must come from the same model (or one of the same vector space) for
the vector arm of hybrid_recall, session_recall and auto_context to mean anything: the Python
client checks it before embedding a query and recalls by keywords with a note when they
differ. One index probe (chunks_agent_created_idx).
$c$;

-- agent_stats: the largest agents (by chunks), with the path recall._vector_arm takes for each
create or replace function recall.agent_stats(max_agents int default 20)
returns table (agent_id text, sessions bigint, chunks bigint, embedded bigint, pending bigint,
               vector_path text)
language sql stable security invoker
set search_path to pg_catalog, pg_temp
as $$
  with per_agent as (
    select c.agent_id, count(*) as chunks, count(c.embedding) as embedded
    from recall.chunks c
    group by c.agent_id
    order by count(*) desc, c.agent_id
    limit max_agents
  )
  select a.agent_id,
         (select count(*) from recall.sessions s where s.agent_id = a.agent_id),
         a.chunks, a.embedded, a.chunks - a.embedded,
         case
           when (select index_oid from recall._agent_vector_index(a.agent_id)) is not null then 'own index'
           when a.chunks <= coalesce((select value::int from recall.config where key = 'exact_scan_max_rows'), 20000)
             then 'exact'
           when (select index_oid from recall._table_vector_index()) is not null then 'table index'
           else 'exact (large: refresh the indexes)'
         end
  from per_agent a
  order by a.chunks desc, a.agent_id
$$;
