-- 090-security
-- Agent isolation beyond the setting: agents bound by role, and planner statistics kept private.
--
-- Re-applied at every migrate. The tables' row-level security comes from 001-schema: members
-- of recall_agent see the rows whose agent_id equals the setting recall.agent_id. A setting can
-- be changed by whoever runs SQL on the connection, so it isolates agents only when the
-- application owns the connection. This file adds:
--   * binding by role: `select recall.bind_agent('aria_login', 'aria-devops')` makes the role a
--     member of recall_agent and records the binding in recall.agent_bindings (003-agent-bindings),
--     which only the owner writes and in which each role reads only its own row. A bound role
--     sees its agent's rows and nothing else, whatever it SETs, and cannot list other bindings.
--     (Before 003 the binding was the role's setting recall.agent_id, which every role can read
--     in pg_db_role_setting: a role-level recall.agent_id binds nothing any more, it is only a
--     default of the setting);
--   * recall.restrict_statistics(): stops ANALYZE from keeping values of the text columns in
--     pg_statistic, where the planner's row estimates (EXPLAIN) would reveal them. See
--     docs/SECURITY.md.

-- bound_agent: the agent the current role is bound to, else the one the session's login role is
-- bound to (SET ROLE to a role without a binding keeps the login role's); NULL when neither is
-- bound. SET cannot change it: it is read from recall.agent_bindings, which only the owner
-- writes. An empty agent_id binds to no agent at all (fail closed). SECURITY INVOKER: the
-- caller's own row is all it needs, and the table's policy own_binding lets each role read
-- exactly the rows of its current and login roles. The same text is in
-- sql/incremental/003-agent-bindings.sql (it switched the policies to the table at once).
-- The roles' oids come from to_regrole, not a join with pg_roles: on a Citus cluster
-- recall.agent_bindings is a reference table, and a join of it with a catalog view is planned
-- as a distributed query that reads pg_authid (refused to agents).
create or replace function recall.bound_agent()
returns text
language sql stable security invoker parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select b.agent_id
  from recall.agent_bindings b
  where b.agent_role::oid in (to_regrole(quote_ident(current_user::text))::oid,
                              to_regrole(quote_ident(session_user::text))::oid)
  order by b.agent_role::oid <> to_regrole(quote_ident(current_user::text))::oid   -- the current role's first
  limit 1
$$;

comment on function recall.bound_agent() is
  'The agent the current (else the login) role is bound to in recall.agent_bindings; NULL if unbound.';

-- a bound member of recall_agent sees only its bound agent, whatever recall.agent_id says:
-- a restrictive policy, AND-ed with the permissive agent_rows policy (001-schema; since
-- 003-agent-bindings it takes the bound agent first, the setting only for unbound roles).
-- Unbound members are unaffected (bound_agent() is NULL). The sub-selects make each call an
-- InitPlan: evaluated once per statement, not per row. Created once; a later change must
-- ALTER POLICY.
do $$
declare
  t text;
begin
  foreach t in array array['sessions', 'messages', 'chunks', 'source_files'] loop
    if not exists (select from pg_policies
                   where schemaname = 'recall' and tablename = t and policyname = 'agent_bound') then
      execute format(
        'create policy agent_bound on recall.%I as restrictive to recall_agent '
        'using ((select recall.bound_agent()) is null or agent_id = (select recall.bound_agent())) '
        'with check ((select recall.bound_agent()) is null or agent_id = (select recall.bound_agent()))',
        t);
    end if;
  end loop;
end
$$;

-- _reset_role_agent_setting: drop a role-level recall.agent_id (cluster-wide or for this
-- database) that a role still has from the old way of binding: readable by every role in
-- pg_db_role_setting, and no longer a binding (used by bind_agent and unbind_agent)
create or replace function recall._reset_role_agent_setting(role_name text)
returns void
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  s record;
begin
  for s in
    select d.datname
    from pg_db_role_setting rs
    left join pg_database d on d.oid = rs.setdatabase
    where rs.setrole = (select ro.oid from pg_roles ro where ro.rolname = role_name)
      and rs.setdatabase in (0, (select d2.oid from pg_database d2 where d2.datname = current_database()))
      and exists (select from unnest(rs.setconfig) as c(setting)
                  where lower(split_part(c.setting, '=', 1)) = 'recall.agent_id')
  loop
    if s.datname is null then
      execute format('alter role %I reset recall.agent_id', role_name);
    else
      execute format('alter role %I in database %I reset recall.agent_id', role_name, s.datname);
    end if;
  end loop;
end
$$;

-- _dropped_bound_roles: the oids of bound roles that no longer exist (bind_agent and unbind_agent
-- remove their bindings). Two statements, not a join of the bindings with pg_roles, for Citus
-- (see bound_agent).
create or replace function recall._dropped_bound_roles()
returns oid[]
language plpgsql stable security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  bound oid[];
begin
  select array_agg(b.agent_role::oid) into bound from recall.agent_bindings b;
  return coalesce((select array_agg(x) from unnest(bound) x
                   where not exists (select from pg_roles ro where ro.oid = x)), '{}');
end
$$;

-- bind_agent: make role_name an agent role of agent_id: a member of recall_agent with a row in
-- recall.agent_bindings (binding it again replaces its agent). Run it as the owner (it writes
-- the table and grants recall_agent) or a superuser. Roles that row-level security does not
-- restrict (superusers, BYPASSRLS, recall_admin members) are refused. A role-level
-- recall.agent_id the role still has (set by hand, or left from before 003) is reset: every role
-- can read it in pg_db_role_setting (resetting it needs a superuser). Bindings of roles dropped
-- since are removed on the way.
create or replace function recall.bind_agent(role_name text, agent_id text)
returns void
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  r record;
begin
  if agent_id is null or agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  select ro.oid, ro.rolsuper, ro.rolbypassrls into r from pg_roles ro where ro.rolname = role_name;
  if not found then
    raise exception 'role % does not exist', coalesce(quote_ident(role_name), 'NULL')
      using errcode = '42704';
  end if;
  if r.rolsuper or r.rolbypassrls then
    raise exception 'role % bypasses row-level security (superuser or BYPASSRLS): binding it to an agent would not restrict it',
      quote_ident(role_name) using errcode = '22023';
  end if;
  if pg_has_role(r.oid, 'recall_admin', 'member') then
    raise exception 'role % is a member of recall_admin, which sees every agent: binding it would not restrict it',
      quote_ident(role_name) using errcode = '22023';
  end if;
  -- bindings of roles dropped since (the oids looked up apart: see bound_agent)
  delete from recall.agent_bindings b
  where b.agent_role::oid = any (recall._dropped_bound_roles());
  insert into recall.agent_bindings as b (agent_role, agent_id, bound_at)
  values (r.oid::regrole, bind_agent.agent_id, now())
  on conflict (agent_role) do update set agent_id = excluded.agent_id, bound_at = excluded.bound_at;
  execute format('grant recall_agent to %I', role_name);
  perform recall._reset_role_agent_setting(role_name);
end
$$;

comment on function recall.bind_agent(text, text) is
  'Bind a login role to one agent: recall_agent membership + a row of recall.agent_bindings. Owner or superuser.';

-- unbind_agent: remove the binding (the role stays in recall_agent, bound by the setting
-- again), and a role-level recall.agent_id it still has (see bind_agent)
create or replace function recall.unbind_agent(role_name text)
returns void
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  role_oid oid;
begin
  select ro.oid into role_oid from pg_roles ro where ro.rolname = role_name;
  if not found then
    raise exception 'role % does not exist', coalesce(quote_ident(role_name), 'NULL')
      using errcode = '42704';
  end if;
  delete from recall.agent_bindings b
  where b.agent_role::oid = role_oid
     or b.agent_role::oid = any (recall._dropped_bound_roles());
  perform recall._reset_role_agent_setting(role_name);
end
$$;

-- restrict_statistics: keep the values of conversation text out of the planner statistics.
-- With row-level security PostgreSQL hides pg_stats rows from agents, but the planner still
-- uses the statistics with leakproof operators (text =, <), so an agent's EXPLAIN row estimate
-- for `agent_id = 'x'` tells how many chunks agent x has, and a binary search on `content < '...'`
-- estimates can recover histogram bounds (other agents' text). enable => true sets the
-- statistics target of every text, text[], jsonb and tsvector column of the row-secured
-- tables (but role, kind and format, fixed vocabularies) to 0 and clears what ANALYZE stored;
-- enable => false restores the default target (run ANALYZE afterwards). Needs table ownership.
-- recall.agent_bindings is left out both ways: it keeps no statistics at all, ever (set by
-- 003-agent-bindings). Cost: the planner no longer knows how skewed agents are; see
-- docs/SECURITY.md.
create or replace function recall.restrict_statistics(enable boolean default true)
returns table (table_name text, column_name text)
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  col record;
begin
  for col in
    select c.relname::text as rel, a.attname::text as att
    from pg_attribute a
    join pg_class c on c.oid = a.attrelid
    where c.relnamespace = 'recall'::regnamespace and c.relkind = 'r' and c.relrowsecurity
      and c.relname <> 'agent_bindings'
      and a.attnum > 0 and not a.attisdropped
      and a.atttypid in ('text'::regtype, 'text[]'::regtype, 'jsonb'::regtype, 'tsvector'::regtype)
      and a.attname not in ('role', 'kind', 'format')
    order by 1, 2
  loop
    execute format('alter table recall.%I alter column %I set statistics %s',
                   col.rel, col.att, case when enable then 0 else -1 end);
    if enable then
      perform pg_clear_attribute_stats('recall', col.rel, col.att, false);
    end if;
    table_name := col.rel;
    column_name := col.att;
    return next;
  end loop;
end
$$;

-- every function of the schema is callable by both roles, granted here, after the last one is
-- created: a fresh install and an upgraded one end with the same privileges (tests/test_upgrade.py)
grant execute on all functions in schema recall to recall_agent, recall_admin;

-- administration, not recall: not for agents (they would fail on privileges anyway), nor for
-- recall_admin (a fresh install never granted it; a re-run of the files before this one, which
-- grant execute on all functions of the schema, did)
revoke execute on function recall.bind_agent(text, text), recall.unbind_agent(text),
  recall.restrict_statistics(boolean) from public, recall_agent, recall_admin;

-- v6's search runs as the owner (sql/released/v6.sql): its two SECURITY DEFINER
-- functions, and v10's search (recall._recall_arms_v10), are for the roles that call the recall
-- functions, not for PUBLIC (a role outside both cannot reach schema recall anyway; this keeps
-- it so if it is ever given USAGE)
revoke execute on function recall._check_reader_v6(text),
  recall._recall_arms_v6(text, text, vector, int, text, jsonb[], text[], timestamptz, timestamptz,
                         timestamptz, text),
  recall._recall_arms_v10(text, text, vector, int, text, jsonb[], text[], timestamptz, timestamptz,
                          timestamptz, text)
  from public;
grant execute on function recall._check_reader_v6(text),
  recall._recall_arms_v6(text, text, vector, int, text, jsonb[], text[], timestamptz, timestamptz,
                         timestamptz, text),
  recall._recall_arms_v10(text, text, vector, int, text, jsonb[], text[], timestamptz, timestamptz,
                          timestamptz, text)
  to recall_agent, recall_admin;
