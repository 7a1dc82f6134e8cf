-- citus/distribute
-- Spread the recall schema over a Citus cluster: every table by agent_id, co-located, so that
-- one agent's sessions, messages and chunks live on one node, and one recall touches one node.
--
-- Run it once on the coordinator, after `pyrecall migrate` and after the citus and vector
-- extensions exist in the database on every node and the workers are added (`make citus-up`
-- does all of it; docs/SCALING.md):
--
--   psql "$COORDINATOR_DSN" -v ON_ERROR_STOP=1 -f sql/citus/distribute.sql
--
-- It defines recall.distribute() and calls it. The procedure can be called again: each step
-- checks whether it is done (a half-distributed schema, after an error, is finished by the
-- next call).
--
-- Upgrades: `pyrecall migrate` on the coordinator of a distributed schema runs this file too
-- (pyrecall/_migrate.py): every file statement by statement in Citus' sequential mode, and,
-- in the transaction of the function files, after them, this file's definitions and
-- recall._distribute_tables() + recall._distribute_code() (not its CALL). So what this file
-- changes for a cluster (the statement triggers, the policies, the functions' delegation and
-- settings, a new table distributed by agent_id) is put back or extended at every upgrade,
-- in the same commit as the new function bodies. Whatever a cluster needs beyond the one-node
-- files belongs here, and each step checks whether it is done (sql/README.md).
--
-- What Citus requires, and what this does about it:
--   * A PRIMARY KEY or UNIQUE constraint of a distributed table must contain the
--     distribution column, and a foreign key between distributed tables too: migration
--     010-agent-first-keys put agent_id in every key (and every ON CONFLICT target names
--     it). The one key without it, UNIQUE (session_id) of recall.sessions (a session id unique
--     across agents, checked on one node), is dropped here: on a cluster a session id is
--     unique within its agent.
--   * recall.config and recall.agent_bindings are read by every recall and by the row-level
--     security on every node: reference tables (a copy on every node).
--   * The triggers of recall.messages and recall.sessions run on the shards: allowed with
--     citus.enable_unsafe_triggers (set below). The row trigger is redefined to name the agent
--     in every subquery; the chunking moves out of the statement triggers into
--     recall.chunk_sessions, which the importers call on the coordinator (below).
--   * The recall functions whose first argument is agent_id (hybrid_recall, session_recall,
--     auto_context, their versions, the memory functions) are delegated to the node holding
--     the agent: create_distributed_function(..., distribution_arg_name => 'agent_id',
--     colocate_with => 'recall.sessions'). Every other function of the schema is propagated
--     (its definition on every node).
--   * Query-time knobs and recall.* settings are set with ALTER DATABASE on every node: a
--     session's SET on the coordinator does not reach the worker that runs a delegated call.
--
-- pyrecall: destructive (drops the one-node constraint UNIQUE (session_id) of recall.sessions)

-- Only on Citus: the functions below replace single-node ones (stop before them elsewhere).
do $$
begin
  if not exists (select from pg_extension where extname = 'citus') then
    raise exception 'the citus extension is not installed in this database'
      using errcode = '0A000', hint = 'CREATE EXTENSION citus on the coordinator and every worker first.';
  end if;
end
$$;

-- The message triggers on a cluster fire on the shard (on the agent's worker), where Citus
-- plans every query in them. The row trigger of sql/idempotent/010-messages.sql runs there as
-- it is: each of its subqueries names the agent (Citus routes a FOR UPDATE, and a correlated
-- subquery, only when each table is filtered by a value).

-- The chunking: not in the statement triggers on a cluster. There they would join their
-- transition table with the distributed tables (refused by Citus), and running the chunker
-- from inside a trigger on a shard needs a nested distributed execution that fans out to
-- every worker (it crashed a worker here). recall.chunk_sessions, called by the importers on
-- the coordinator after their insert (pyrecall/_ingest.py), chunks the sessions instead; a
-- client that inserts messages with plain SQL calls it too (docs/SCALING.md). (`pyrecall
-- migrate` puts the single-node statement triggers back with 010-messages, then these in the
-- same transaction.)
create or replace function recall._messages_after_insert()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  return null;   -- on a Citus cluster: recall.chunk_sessions
end
$$;

create or replace function recall._messages_after_change()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  return null;   -- on a Citus cluster: recall.chunk_sessions
end
$$;

create or replace function recall._messages_after_update()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  return null;   -- on a Citus cluster: recall.chunk_sessions
end
$$;

create or replace function recall._sessions_after_update()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  return null;   -- on a Citus cluster: recall.chunk_sessions
end
$$;

-- chunk_sessions: (re)chunk whole sessions of the given agents (one session per pair of
-- array elements) from the coordinator, and stretch each session over its messages' times;
-- the number of chunks written or removed. What the message triggers do on one node.
create or replace function recall.chunk_sessions(agent_ids text[], session_ids text[])
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  if cardinality(agent_ids) is distinct from cardinality(session_ids) then
    raise exception 'agent_ids and session_ids must have the same length' using errcode = '22023';
  end if;
  update recall.sessions s
     set started_at = least(s.started_at, x.first_at),
         ended_at   = greatest(s.ended_at, x.last_at)
    from (select m.agent_id, m.session_id, min(m.created_at) as first_at, max(m.created_at) as last_at
          from recall.messages m
          where m.agent_id = any (agent_ids) and m.session_id = any (session_ids)
          group by m.agent_id, m.session_id) x
   where s.agent_id = x.agent_id and s.session_id = x.session_id
     and (s.started_at > x.first_at or s.ended_at is null or s.ended_at < x.last_at);
  return recall._rechunk(agent_ids, session_ids, array_fill(-2147483648, array[cardinality(session_ids)]));
end
$$;

-- _distributed_tables: the tables of the schema that are (to be) distributed by agent_id, in
-- the order they are distributed (recall.sessions first: the others are co-located with it and
-- reference it). Every table of the schema but recall.migrations (migrate's record, on the
-- coordinator only) and the reference tables recall.config, recall.agent_bindings and
-- recall.secret_patterns; a new
-- table of a later migration is one of them: it must have an agent_id column.
create or replace function recall._distributed_tables()
returns regclass[]
language sql stable
set search_path to pg_catalog, pg_temp
as $$
  select array_agg(t.oid::regclass order by t.oid <> 'recall.sessions'::regclass, t.oid)
  from pg_class t
  where t.relnamespace = 'recall'::regnamespace and t.relkind in ('r', 'p') and not t.relispartition
    and t.oid not in ('recall.migrations'::regclass, 'recall.config'::regclass,
                      'recall.agent_bindings'::regclass, 'recall.secret_patterns'::regclass)
    -- (not a shard: the coordinator holds the shards of the reference tables)
    and not exists (select from pg_dist_shard ds
                    where t.relname = (select c.relname from pg_class c where c.oid = ds.logicalrelid)
                                      || '_' || ds.shardid)
$$;

-- _distribute_tables: steps 1-3 below (keys, policies, tables); each checks whether it is
-- done. In one transaction (recall.distribute commits after it; `pyrecall migrate` on a
-- distributed cluster runs it in the transaction of the function files, in Citus' sequential
-- mode).
create or replace function recall._distribute_tables(shard_count int default null)
returns void
language plpgsql volatile
set search_path to pg_catalog, pg_temp
as $$
declare
  c record;
  tbl regclass;
  tables regclass[] := recall._distributed_tables();
begin
  -- 1. keys: the one-node UNIQUE (session_id) goes; every other key must hold agent_id
  if exists (select from pg_constraint where conrelid = 'recall.sessions'::regclass
                                         and conname = 'sessions_session_id_key') then
    alter table recall.sessions drop constraint sessions_session_id_key;
  end if;
  for c in select x.conrelid::regclass as tbl, x.conname
           from pg_constraint x
           where x.conrelid = any (tables)
             and x.contype in ('p', 'u', 'f')
             and not exists (select from unnest(x.conkey) k(attnum)
                             join pg_attribute a on a.attrelid = x.conrelid and a.attnum = k.attnum
                             where a.attname = 'agent_id')
  loop
    raise exception 'constraint % of % does not contain agent_id: Citus cannot enforce it', c.conname, c.tbl
      using errcode = '0A000', hint = 'Every key of a table distributed by agent_id holds agent_id (migration 010-agent-first-keys).';
  end loop;
  for c in select t.t as tbl from unnest(tables) t(t)
           where not exists (select from pg_attribute a where a.attrelid = t.t and a.attname = 'agent_id'
                                                         and not a.attisdropped)
  loop
    raise exception 'table % has no agent_id column: it cannot be distributed by agent', c.tbl
      using errcode = '0A000', hint = 'Give it agent_id, or make it a reference table in sql/citus/distribute.sql.';
  end loop;

  -- 2. row-level security without subqueries (Citus refuses them in the policies of its
  -- tables): the bound agent is read by a call of recall.bound_agent() instead of an InitPlan
  -- (same rows; evaluated per scan instead of once per statement), a role's own binding by
  -- to_regrole instead of a lookup in pg_roles
  for c in select p.polname, p.polrelid::regclass as tbl,
                  pg_get_expr(p.polqual, p.polrelid) as qual,
                  pg_get_expr(p.polwithcheck, p.polrelid) as chk
           from pg_policy p
           where p.polrelid = any (tables || 'recall.agent_bindings'::regclass || 'recall.config'::regclass)
             and (pg_get_expr(p.polqual, p.polrelid) ~* 'select'
                  or coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '') ~* 'select')
  loop
    if c.tbl = 'recall.agent_bindings'::regclass and c.polname = 'own_binding' then
      c.qual := '(agent_role)::oid in (to_regrole(quote_ident(current_user::text))::oid, '
                'to_regrole(quote_ident(session_user::text))::oid)';
    else
      c.qual := regexp_replace(c.qual, '\(\s*SELECT recall\.bound_agent\(\) AS bound_agent\)', 'recall.bound_agent()', 'g');
      c.chk := regexp_replace(c.chk, '\(\s*SELECT recall\.bound_agent\(\) AS bound_agent\)', 'recall.bound_agent()', 'g');
    end if;
    if c.qual ~* 'select' or coalesce(c.chk, '') ~* 'select' then
      raise exception 'policy % of % has a subquery, which Citus does not allow: %', c.polname, c.tbl, c.qual
        using errcode = '0A000';
    end if;
    execute format('alter policy %I on %s using (%s)%s', c.polname, c.tbl, c.qual,
                   case when c.chk is not null then format(' with check (%s)', c.chk) else '' end);
  end loop;

  -- 3. the tables: config, bindings and secret patterns everywhere, the rest by agent_id, co-located
  if shard_count is not null then
    perform set_config('citus.shard_count', shard_count::text, true);
  end if;
  perform set_config('citus.enable_unsafe_triggers', 'on', true);   -- the message triggers
  if not exists (select from pg_dist_partition where logicalrelid = 'recall.config'::regclass) then
    perform create_reference_table('recall.config');
  end if;
  if not exists (select from pg_dist_partition where logicalrelid = 'recall.agent_bindings'::regclass) then
    perform create_reference_table('recall.agent_bindings');
  end if;
  if not exists (select from pg_dist_partition where logicalrelid = 'recall.secret_patterns'::regclass) then
    perform create_reference_table('recall.secret_patterns');   -- read by the triggers on the workers
  end if;
  foreach tbl in array tables loop
    if not exists (select from pg_dist_partition where logicalrelid = tbl) then
      if tbl = 'recall.sessions'::regclass then
        perform create_distributed_table(tbl, 'agent_id');
      else
        perform create_distributed_table(tbl, 'agent_id', colocate_with => 'recall.sessions');
      end if;
    end if;
  end loop;
end
$$;

-- _distribute_code: steps 4-5 below (functions, settings), and the settings of single
-- functions that a `create or replace` of sql/idempotent puts back to their one-node values.
-- In a transaction that has not written shards in parallel.
create or replace function recall._distribute_code()
returns void
language plpgsql volatile
set search_path to pg_catalog, pg_temp
as $$
declare
  f record;
  knob record;
  db text := current_database();
begin
  perform set_config('citus.enable_unsafe_triggers', 'on', true);
  -- 4. functions: those whose first argument is agent_id run on the agent's node (delegated);
  -- every other function of the schema is propagated (its definition on every node). Not
  -- delegated: the administration functions, which write reference tables or grant roles.
  for f in select p.oid::regprocedure as sig,
                  p.proargnames[1] = 'agent_id' and p.pronargs > 0
                    and p.proname not in ('bind_agent', 'unbind_agent', 'log_recall',
                                          '_reset_role_agent_setting') as delegated
           from pg_proc p
           where p.pronamespace = 'recall'::regnamespace and p.prokind = 'f'
             and not exists (select from pg_depend d
                             where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
           order by p.oid
  loop
    if f.delegated then
      if not exists (select from pg_dist_object o
                     where o.classid = 'pg_proc'::regclass and o.objid = f.sig::oid
                       and o.distribution_argument_index is not null) then
        perform create_distributed_function(f.sig, distribution_arg_name => 'agent_id',
                                            colocate_with => 'recall.sessions');
      end if;
    elsif not exists (select from pg_dist_object o
                      where o.classid = 'pg_proc'::regclass and o.objid = f.sig::oid) then
      perform create_distributed_function(f.sig);
    end if;
  end loop;

  -- the statement triggers of the distributed tables do nothing on a cluster (the chunking's
  -- are redefined above; a new one, of a later release, too): a statement trigger fires on
  -- the shard, where joining its transition table with a distributed table is refused and
  -- calling the chunker needs a nested distributed execution. Their work is done from the
  -- coordinator (recall.chunk_sessions). A function that a row trigger uses too stops here.
  for f in select t.tgfoid::regprocedure as sig, bool_or(t.tgtype & 1 = 1) as also_row
           from pg_trigger t
           where t.tgrelid = any (recall._distributed_tables()) and not t.tgisinternal
             and t.tgfoid in (select t2.tgfoid from pg_trigger t2
                              where t2.tgrelid = t.tgrelid and not t2.tgisinternal and t2.tgtype & 1 = 0)
           group by t.tgfoid
  loop
    if f.also_row then
      raise exception 'trigger function % runs for rows and for statements: give each its own', f.sig
        using errcode = '0A000';
    end if;
    if (select prosrc from pg_proc where oid = f.sig::oid) !~ 'on a Citus cluster: recall\.chunk_sessions' then
      raise notice 'statement trigger function % does nothing on a Citus cluster', f.sig;
      execute format('create or replace function %s returns trigger language plpgsql volatile '
                     'security invoker set search_path to pg_catalog, pg_temp as %L', f.sig,
                     E'\nbegin\n  return null;   -- on a Citus cluster: recall.chunk_sessions\nend\n');
    end if;
  end loop;

  -- the row-level security reads the bound agent from recall.agent_bindings, a reference
  -- table: on a worker, inside a query on a shard, Citus refuses that read as a nested
  -- distributed query unless allowed. Allowed for this one function (a read of the node's own
  -- copy of a reference table, which no shard move affects); ALTER FUNCTION reaches every node.
  if not exists (select from pg_proc where oid = 'recall.bound_agent()'::regprocedure
                                      and 'citus.allow_nested_distributed_execution=on' = any (proconfig)) then
    alter function recall.bound_agent() set citus.allow_nested_distributed_execution = on;
  end if;
  -- plan settings: Citus cannot plan a generic plan of a query on a distributed table that
  -- takes parameters ("could not create distributed plan ... parameters in SQL functions").
  --  * a function set to force_generic_plan on one node (the chunker, which
  --    recall.chunk_sessions calls with the agents as values; the searches of v3 and v4) plans
  --    per call on a cluster: auto, under which Citus makes custom plans (v6 does the same for
  --    its own in sql/released/v6.sql);
  --  * a SQL-language function that queries a distributed table (the text plans and arms of
  --    v1-v5, _finish, the statistics) is planned with the call's values: force_custom_plan
  --    (PostgreSQL 18 plans a SQL function's statements through the plan cache; the setting
  --    also keeps it from being inlined into its caller's query)
  -- (the released files are not changed: these are settings of their functions on a cluster,
  -- put back by every migrate after a create or replace undoes them)
  for f in select p.oid::regprocedure as sig,
                  case when l.lanname = 'sql' then 'force_custom_plan' else 'auto' end as mode
           from pg_proc p join pg_language l on l.oid = p.prolang
           where p.pronamespace = 'recall'::regnamespace and p.prokind = 'f'
             and ('plan_cache_mode=force_generic_plan' = any (p.proconfig)
                  or (l.lanname = 'sql' and p.prosrc ~ ('\mrecall\.(' || (
                        select string_agg(c.relname, '|') from pg_class c
                        where c.oid = any (recall._distributed_tables())) || ')\M')
                      and not coalesce('plan_cache_mode=force_custom_plan' = any (p.proconfig), false)))
  loop
    execute format('alter function %s set plan_cache_mode = %s', f.sig, f.mode);
  end loop;

  -- 5. settings every node needs (ALTER DATABASE: new sessions, workers included)
  for knob in select * from (values
      ('citus.enable_unsafe_triggers', 'on'),          -- the message triggers (co-located writes)
      ('citus.propagate_set_commands', 'local'))       -- SET LOCAL recall.agent_id reaches workers (RLS)
    as k(name, value)
  loop
    execute format('alter database %I set %s = %L', db, knob.name, knob.value);
    perform run_command_on_workers(format('alter database %I set %s = %L', db, knob.name, knob.value));
  end loop;
  -- the query knobs and recall settings of the coordinator's database, copied to the workers
  for knob in select split_part(cfg, '=', 1) as name, substr(cfg, strpos(cfg, '=') + 1) as value
              from pg_db_role_setting r, unnest(r.setconfig) cfg
              where r.setdatabase = (select oid from pg_database where datname = db)
                and r.setrole = 0 and cfg ~ '^(hnsw|ivfflat|diskann|recall)\.'
  loop
    perform run_command_on_workers(format('alter database %I set %s = %L', db, knob.name, knob.value));
  end loop;
end
$$;

-- (no SET search_path: a procedure with one cannot COMMIT; every name is qualified, and
-- pg_catalog, where Citus' functions are, is searched first)
create or replace procedure recall.distribute(shard_count int default 32)
language plpgsql
as $$
begin
  if not exists (select from pg_extension where extname = 'citus') then
    raise exception 'the citus extension is not installed in this database'
      using errcode = '0A000', hint = 'CREATE EXTENSION citus on the coordinator and every worker first.';
  end if;
  if not exists (select from pg_dist_node where noderole = 'primary' and shouldhaveshards) then
    raise exception 'this Citus cluster has no node for shards'
      using errcode = '0A000', hint = 'Add the workers first: select citus_add_node(host, port).';
  end if;
  -- the agent-first keys (migration 010-agent-first-keys) must be there
  if to_regclass('recall.migrations') is null
     or not exists (select from recall.migrations where name = '010-agent-first-keys') then
    raise exception 'the recall schema has no agent-first keys yet'
      using errcode = '0A000', hint = 'Run pyrecall migrate (a release with 010-agent-first-keys) on the coordinator first.';
  end if;
  perform recall._distribute_tables(shard_count);
  -- the functions' metadata cannot be written in a transaction that wrote shards in parallel
  commit;
  perform recall._distribute_code();
  raise notice 'recall is distributed by agent_id over % shards; the recall functions run on the node of their agent', shard_count;
end
$$;

call recall.distribute();
