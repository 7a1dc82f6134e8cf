-- 003-agent-bindings
-- Role bindings move out of the role settings into a table no agent can list.
--
-- Until now recall.bind_agent bound a role to an agent by storing the agent id as the role's
-- setting (alter role aria set recall.agent_id = 'aria-devops'). pg_db_role_setting,
-- pg_roles.rolconfig and pg_user.useconfig are readable by every role, so any agent could list
-- the ids of all bound agents and the role of each. From this migration on a binding is a row
-- of recall.agent_bindings: a role reads only its own binding (that of its current and of its
-- login role), nobody but the owner writes, and ANALYZE keeps no statistics of it (the
-- planner's estimates would otherwise show its values to EXPLAIN; see docs/SECURITY.md).
--
-- The bindings that apply to this database (the role's cluster-wide setting, or its setting
-- for this database, which wins) are copied into the table and the settings reset. Resetting
-- another role's setting of a custom parameter needs a superuser: where such bindings exist,
-- run this migration once as a superuser (else it fails, changing nothing). Settings
-- of other databases are left to them. A cluster-wide setting bound the role in every database
-- of the cluster: with several pyrecall databases in one cluster, repeat it for each of them
-- (alter role ... in database ... set recall.agent_id) before the first is migrated, so that
-- none is left unbound (docs/SECURITY.md).
--
-- Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a new file.

-- agent_bindings: the login roles bound to one agent each. The role is kept as its oid
-- (regrole; printed as its name): renaming the role keeps its binding, and a role dropped and
-- created again under the same name does not inherit the old one. An empty agent_id binds the
-- role to no agent at all (fail closed), as an empty role setting did.
create table recall.agent_bindings
( agent_role regrole primary key
, agent_id   text not null
, bound_at   timestamptz not null default now()
);

comment on table recall.agent_bindings is
  'Roles bound to one agent (recall.bind_agent). Each role reads only its own row; only the owner writes.';

-- no statistics: restricted roles cannot read pg_stats of a row-secured table, but the planner
-- would still use its values for EXPLAIN estimates (a binary search on agent_id < '...')
alter table recall.agent_bindings
  alter column agent_role set statistics 0,
  alter column agent_id set statistics 0,
  alter column bound_at set statistics 0;

alter table recall.agent_bindings enable row level security;

grant select on recall.agent_bindings to recall_agent, recall_admin;

-- a role sees the binding of its current role and of its login role (SET ROLE recall_agent
-- must not shed the login role's binding), no other; recall_admin sees all of them (it sees
-- every agent's rows anyway). No grant of insert, update or delete: only the owner writes.
create policy own_binding on recall.agent_bindings for select to recall_agent
  using (agent_role::oid in (select ro.oid from pg_catalog.pg_roles ro
                             where ro.rolname in (current_user, session_user)));
create policy admin_rows on recall.agent_bindings for select to recall_admin using (true);

-- bound_agent reads the table from now on. The same text is in sql/idempotent/090-security.sql,
-- which re-applies it at every migrate; it is here too so that the switch (the bindings in the
-- table, the settings gone, the policies reading the table) commits at once: there is no moment
-- when a bound role's session keeps its old setting and has no binding.
create or replace function recall.bound_agent()
returns text
language sql stable security invoker parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select b.agent_id
  from (values (1, current_user), (2, session_user)) as r(pref, rolname)
  join pg_roles ro on ro.rolname = r.rolname
  join recall.agent_bindings b on b.agent_role::oid = ro.oid
  order by r.pref
  limit 1
$$;

-- a bound role no longer gets its agent as a setting at login: the permissive policies take the
-- bound agent first and the setting only for roles that are not bound (the restrictive
-- agent_bound policies of 090-security still require the bound agent). InitPlans: once per
-- statement.
alter policy agent_rows on recall.sessions
  using (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)))
  with check (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)));
alter policy agent_rows on recall.messages
  using (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)))
  with check (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)));
alter policy agent_rows on recall.chunks
  using (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)))
  with check (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)));
alter policy agent_rows on recall.source_files
  using (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)))
  with check (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)));

-- the bindings of the role settings, as the previous bound_agent() read them: per role, its
-- setting for this database, else its cluster-wide one; then the settings go
insert into recall.agent_bindings (agent_role, agent_id)
select distinct on (s.setrole) s.setrole::regrole, substr(c.setting, strpos(c.setting, '=') + 1)
from pg_db_role_setting s
join pg_roles ro on ro.oid = s.setrole
cross join lateral unnest(s.setconfig) as c(setting)
where s.setdatabase in (0, (select d.oid from pg_database d where d.datname = current_database()))
  and lower(split_part(c.setting, '=', 1)) = 'recall.agent_id'
order by s.setrole, s.setdatabase desc;

do $$
declare
  s record;
  moved int := 0;
begin
  for s in
    select ro.rolname, d.datname
    from pg_db_role_setting rs
    join pg_roles ro on ro.oid = rs.setrole
    left join pg_database d on d.oid = rs.setdatabase
    where rs.setdatabase in (0, (select d2.oid from pg_database d2 where d2.datname = current_database()))
      and exists (select from unnest(rs.setconfig) as c(setting)
                  where lower(split_part(c.setting, '=', 1)) = 'recall.agent_id')
  loop
    if s.datname is null then
      execute format('alter role %I reset recall.agent_id', s.rolname);
    else
      execute format('alter role %I in database %I reset recall.agent_id', s.rolname, s.datname);
    end if;
    moved := moved + 1;
  end loop;
  if moved > 0 then
    raise notice '003-agent-bindings: % role setting(s) of recall.agent_id moved into recall.agent_bindings', moved;
  end if;
exception when insufficient_privilege then
  raise exception 'roles are bound by their setting recall.agent_id; moving the bindings into recall.agent_bindings resets those settings, which needs a superuser'
    using errcode = '42501',
          hint = 'Run pyrecall migrate once as a superuser.';
end
$$;
