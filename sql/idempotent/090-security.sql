-- 090-security
-- Agent isolation beyond the setting: agents bound by role, and planner statistics kept private.
--
-- Re-applied at every migrate. The tables' row-level security comes from 001-schema: members
-- of recall_agent see the rows whose agent_id equals the setting recall.agent_id. A setting can
-- be changed by whoever runs SQL on the connection, so it isolates agents only when the
-- application owns the connection. This file adds:
--   * binding by role: `select recall.bind_agent('aria_login', 'aria-devops')` (or, by hand,
--     `alter role aria_login set recall.agent_id = 'aria-devops'` plus membership in
--     recall_agent). The role-level value lives in pg_db_role_setting, which only a superuser
--     (or a role granted SET on the parameter) can change, so a bound role sees its agent's
--     rows and nothing else, whatever it SETs;
--   * recall.restrict_statistics(): stops ANALYZE from keeping values of the text columns in
--     pg_statistic, where the planner's row estimates (EXPLAIN) would reveal them. See
--     docs/SECURITY.md.

-- bound_agent: the agent a role is bound to (its role-level recall.agent_id), for the current
-- role, else the session's login role; NULL when neither is bound. SET cannot change it: it is
-- read from the catalog, not from the session. A database-specific value wins over the
-- cluster-wide one. An empty value binds to no agent at all (fail closed).
create or replace function recall.bound_agent()
returns text
language sql stable security invoker parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select substr(c.setting, length('recall.agent_id=') + 1)
  from (values (1, current_user), (2, session_user)) as r(pref, rolname)
  join pg_roles ro on ro.rolname = r.rolname
  join pg_db_role_setting s on s.setrole = ro.oid
   and s.setdatabase in (0, (select d.oid from pg_database d where d.datname = current_database()))
  cross join lateral unnest(s.setconfig) as c(setting)
  where c.setting like 'recall.agent_id=%'
  order by r.pref, s.setdatabase desc
  limit 1
$$;

comment on function recall.bound_agent() is
  'The agent the current (else the login) role is bound to by ALTER ROLE ... SET recall.agent_id; NULL if unbound.';

-- a bound member of recall_agent sees only its bound agent, whatever recall.agent_id says:
-- a restrictive policy, AND-ed with the permissive agent_rows policy of 001-schema. Unbound
-- members are unaffected (bound_agent() is NULL). The sub-selects make each call an InitPlan:
-- evaluated once per statement, not per row. Created once; a later change must ALTER POLICY.
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

-- bind_agent: make role_name an agent role of agent_id: a member of recall_agent whose
-- role-level recall.agent_id is agent_id. Run it as a superuser (ALTER ROLE ... SET of a
-- custom parameter needs superuser, or GRANT SET ON PARAMETER recall.agent_id). Roles that
-- row-level security does not restrict (superusers, BYPASSRLS, recall_admin members) are refused.
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
  execute format('grant recall_agent to %I', role_name);
  execute format('alter role %I set recall.agent_id = %L', role_name, agent_id);
end
$$;

comment on function recall.bind_agent(text, text) is
  'Bind a login role to one agent: recall_agent membership + ALTER ROLE ... SET recall.agent_id. Superuser only.';

-- unbind_agent: remove the binding (the role stays in recall_agent, bound by the setting again)
create or replace function recall.unbind_agent(role_name text)
returns void
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  if not exists (select from pg_roles where rolname = role_name) then
    raise exception 'role % does not exist', coalesce(quote_ident(role_name), 'NULL')
      using errcode = '42704';
  end if;
  execute format('alter role %I reset recall.agent_id', role_name);
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
-- Cost: the planner no longer knows how skewed agents are; see docs/SECURITY.md.
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

-- administration, not recall: not for agents (they would fail on privileges anyway)
revoke execute on function recall.bind_agent(text, text), recall.unbind_agent(text),
  recall.restrict_statistics(boolean) from public, recall_agent;
