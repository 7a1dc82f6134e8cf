-- citus/distribute
-- Spread the recall schema over a Citus cluster: every table by agent_id, co-located, so that
-- one agent's sessions, messages and chunks live on one node, and one recall touches one node.
--
-- Not applied by `pyrecall migrate`. Run it once on the coordinator, after `pyrecall migrate`
-- and after the citus extension exists on every node (docs/SCALING.md):
--
--   psql "$COORDINATOR_DSN" -v ON_ERROR_STOP=1 -f sql/citus/distribute.sql
--
-- It defines recall.distribute() and calls it. The procedure can be called again: each step
-- checks whether it is done (a half-distributed schema, after an error, is finished by the
-- next call).
--
-- What Citus requires, and what this does about it:
--   * A PRIMARY KEY or UNIQUE constraint of a distributed table must contain the
--     distribution column (each shard can only check uniqueness of its own rows). Today
--     recall.sessions has PRIMARY KEY (session_id): a session id is unique across agents. It
--     becomes PRIMARY KEY (agent_id, session_id): unique within an agent. Likewise
--     messages (message_id), (session_id, seq), (session_id, external_id) and chunks
--     (chunk_id), (session_id, kind, first_seq, part) gain agent_id in front. The identity
--     columns stay globally unique anyway (Citus hands out bigint identity ranges per node).
--   * A foreign key between distributed tables must include the distribution column: the
--     messages -> sessions and chunks -> sessions keys become (agent_id, session_id).
--   * So ON CONFLICT targets must name the new keys: pyrecall/_ingest.py's
--     `on conflict (session_id)` and 010-messages.sql's `on conflict (session_id, kind,
--     first_seq, part)` need agent_id added (a code change to make in the release that
--     supports Citus; this script stops with a clear error until it is made).
--   * recall.config is read by every recall: a reference table (a copy on every node).
--   * The chunking triggers on recall.messages write into recall.chunks for the same agent,
--     so into the co-located shard: allowed with citus.enable_unsafe_triggers (set below).
--   * hybrid_recall (and every public recall function with an agent_id argument) is
--     delegated to the node holding the agent: create_distributed_function(...,
--     distribution_arg_name => 'agent_id', colocate_with => 'recall.chunks'). The helpers it
--     calls (recall._vector_arm, ...) are distributed without an argument: their definition
--     is propagated to every node.
--   * Query-time knobs must be set with ALTER DATABASE on every node: a session's SET on
--     the coordinator does not reach the worker that runs a delegated call.
--
-- pyrecall: destructive (drops and re-creates the key constraints, in one transaction)

create or replace procedure recall.distribute(shard_count int default 32)
language plpgsql
set search_path to pg_catalog, public, pg_temp
as $$
declare
  c record;
  f record;
  knob record;
begin
  if not exists (select from pg_extension where extname = 'citus') then
    raise exception 'the citus extension is not installed in this database'
      using errcode = '0A000', hint = 'CREATE EXTENSION citus on the coordinator and every worker first.';
  end if;
  -- the ON CONFLICT targets of the code must already name agent_id (see the header)
  if exists (select from pg_proc p
             where p.pronamespace = 'recall'::regnamespace
               and p.prosrc ~* 'on conflict \(session_id, kind, first_seq, part\)') then
    raise exception 'recall''s chunking still uses ON CONFLICT (session_id, kind, first_seq, part); '
                    'it must be ON CONFLICT (agent_id, session_id, kind, first_seq, part) before distributing'
      using errcode = '0A000', hint = 'Upgrade pyrecall to a release that supports Citus, then run this again.';
  end if;

  -- 1. keys that contain agent_id (skipped where done)
  if (select array_agg(a.attname::text order by k.ord)
      from pg_constraint x, unnest(x.conkey) with ordinality k(attnum, ord)
      join pg_attribute a on a.attrelid = 'recall.sessions'::regclass and a.attnum = k.attnum
      where x.conrelid = 'recall.sessions'::regclass and x.contype = 'p') = array['session_id'] then
    -- foreign keys to sessions first, then the primary and unique keys
    for c in select conrelid::regclass as tbl, conname from pg_constraint
             where contype = 'f' and confrelid = 'recall.sessions'::regclass
    loop
      execute format('alter table %s drop constraint %I', c.tbl, c.conname);
    end loop;
    for c in select conrelid::regclass as tbl, conname, contype,
                    (select array_agg(a.attname::text order by k.ord)
                     from unnest(x.conkey) with ordinality k(attnum, ord)
                     join pg_attribute a on a.attrelid = x.conrelid and a.attnum = k.attnum) as cols
             from pg_constraint x
             where conrelid in ('recall.sessions'::regclass, 'recall.messages'::regclass, 'recall.chunks'::regclass)
               and contype in ('p', 'u')
             order by conrelid::regclass::text desc   -- sessions last: the others do not need it
    loop
      if 'agent_id' = any (c.cols) then
        continue;
      end if;
      execute format('alter table %s drop constraint %I', c.tbl, c.conname);
      execute format('alter table %s add constraint %I %s (agent_id, %s)', c.tbl, c.conname,
                     case c.contype when 'p' then 'primary key' else 'unique' end,
                     (select string_agg(quote_ident(x), ', ') from unnest(c.cols) x));
    end loop;
    alter table recall.messages add constraint messages_session_fkey
      foreign key (agent_id, session_id) references recall.sessions (agent_id, session_id) on delete cascade;
    alter table recall.chunks add constraint chunks_session_fkey
      foreign key (agent_id, session_id) references recall.sessions (agent_id, session_id) on delete cascade;
  end if;

  -- 2. the tables: config everywhere, the rest by agent_id, co-located
  perform set_config('citus.shard_count', shard_count::text, true);
  if not exists (select from pg_dist_partition where logicalrelid = 'recall.config'::regclass) then
    perform create_reference_table('recall.config');
  end if;
  -- role bindings (recall.bind_agent): read by the row-level security on every node
  if to_regclass('recall.agent_bindings') is not null and not exists (
       select from pg_dist_partition where logicalrelid = 'recall.agent_bindings'::regclass) then
    perform create_reference_table('recall.agent_bindings');
  end if;
  if not exists (select from pg_dist_partition where logicalrelid = 'recall.sessions'::regclass) then
    perform create_distributed_table('recall.sessions', 'agent_id');
  end if;
  if not exists (select from pg_dist_partition where logicalrelid = 'recall.messages'::regclass) then
    perform create_distributed_table('recall.messages', 'agent_id', colocate_with => 'recall.sessions');
  end if;
  if not exists (select from pg_dist_partition where logicalrelid = 'recall.chunks'::regclass) then
    perform create_distributed_table('recall.chunks', 'agent_id', colocate_with => 'recall.sessions');
  end if;
  if not exists (select from pg_dist_partition where logicalrelid = 'recall.source_files'::regclass) then
    perform create_distributed_table('recall.source_files', 'agent_id', colocate_with => 'recall.sessions');
  end if;

  -- 3. functions: the public ones with an agent_id argument are delegated to the agent's node;
  -- every other recall function is propagated (its definition on every node)
  for f in select p.oid::regprocedure as sig,
                  'agent_id' = any (p.proargnames) and p.proname !~ '^_' as delegated
           from pg_proc p
           where p.pronamespace = 'recall'::regnamespace and p.prokind = 'f'
             and not exists (select from pg_dist_object o
                             where o.classid = 'pg_proc'::regclass and o.objid = p.oid
                               and o.distribution_argument_index is not null)
  loop
    if f.delegated then
      perform create_distributed_function(f.sig::text, distribution_arg_name => 'agent_id',
                                          colocate_with => 'recall.chunks');
    else
      perform create_distributed_function(f.sig::text);
    end if;
  end loop;

  -- 4. settings every node needs (ALTER DATABASE: new sessions, workers included)
  for knob in select * from (values
      ('citus.enable_unsafe_triggers', 'on'),          -- the chunking triggers (co-located writes)
      ('citus.propagate_set_commands', 'local'))       -- SET LOCAL recall.agent_id reaches workers (RLS)
    as k(name, value)
  loop
    execute format('alter database %I set %s = %L', current_database(), knob.name, knob.value);
    perform run_command_on_workers(format('alter database %I set %s = %L', current_database(), knob.name, knob.value));
  end loop;
  -- the query knobs already set on the coordinator's database, copied to the workers
  for knob in select split_part(cfg, '=', 1) as name, substr(cfg, strpos(cfg, '=') + 1) as value
              from pg_db_role_setting r, unnest(r.setconfig) cfg
              where r.setdatabase = (select oid from pg_database where datname = current_database())
                and r.setrole = 0 and cfg ~ '^(hnsw|diskann)\.'
  loop
    perform run_command_on_workers(format('alter database %I set %s = %L', current_database(), knob.name, knob.value));
  end loop;

  raise notice 'recall is distributed by agent_id over % shards; hybrid_recall runs on the node of its agent', shard_count;
end
$$;

call recall.distribute();
