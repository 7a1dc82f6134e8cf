-- 059-retention
-- recall.forget_sessions: a retention policy in one call. An agent's sessions whose last
-- activity is older than a cut-off are deleted with their messages, chunks and vectors (the
-- foreign keys cascade); its curated memories are not sessions of work and stay; a session
-- holding a chunk whose importance was set by hand (recall.set_importance, `pyrecall mark`) is
-- kept unless asked otherwise. A session deleted is recorded so that a transcript read again does
-- not bring it back (recall.forgotten_sessions, recall.unforget_sessions). Re-applied at every
-- migrate.

-- forget_sessions: see the COMMENT below
create or replace function recall.forget_sessions(
  agent_id    text,
  before      timestamptz,
  project     text    default null,
  keep_marked boolean default true,
  dry_run     boolean default false)
returns table (session_id text, title text, started_at timestamptz, ended_at timestamptz,
               messages bigint, chunks bigint)
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  ids text[];
begin
  if forget_sessions.agent_id is null or forget_sessions.agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if forget_sessions.before is null or not isfinite(forget_sessions.before) then
    raise exception 'before must be a time (sessions last active before it are forgotten), got %',
      coalesce(forget_sessions.before::text, 'NULL') using errcode = '22023';
  end if;
  if keep_marked is null or dry_run is null then
    raise exception 'keep_marked and dry_run must be true or false, not NULL' using errcode = '22023';
  end if;
  -- the sessions last active before the cut-off (the memories session is none of them)
  select array_agg(s.session_id order by s.session_id) into ids
  from recall.sessions s
  where s.agent_id = forget_sessions.agent_id
    and s.session_id <> 'memories:' || forget_sessions.agent_id
    and coalesce(s.ended_at, s.started_at) < forget_sessions.before
    and (forget_sessions.project is null or s.project = forget_sessions.project)
    and not (keep_marked and exists (
          select from recall.chunks c
          where c.agent_id = forget_sessions.agent_id and c.session_id = s.session_id
            and c.kind <> 'memory' and c.importance_set_at is not null));
  if ids is null then
    return;
  end if;
  -- what they hold, told before it goes
  return query
  select s.session_id, s.title, s.started_at, s.ended_at,
         (select count(*) from recall.messages m
          where m.agent_id = forget_sessions.agent_id and m.session_id = s.session_id),
         (select count(*) from recall.chunks c
          where c.agent_id = forget_sessions.agent_id and c.session_id = s.session_id)
  from recall.sessions s
  where s.agent_id = forget_sessions.agent_id and s.session_id = any (ids)
  order by coalesce(s.ended_at, s.started_at), s.session_id;
  if not dry_run then
    delete from recall.sessions s
    where s.agent_id = forget_sessions.agent_id and s.session_id = any (ids);
  end if;
end
$$;

comment on function recall.forget_sessions is $c$
Forget the agent's sessions last active (ended_at, else started_at) before `before`: each is
deleted with its messages, chunks, vectors and summary; returns them (session_id, title,
started_at, ended_at, messages, chunks), oldest first. Its curated memories stay (the memories
session is never one of them); with project, only that project's sessions; keep_marked (default
true) keeps a session that holds a chunk whose importance was set by hand (recall.set_importance);
dry_run returns them and deletes nothing. A retention policy is one call a day, e.g.
  select * from recall.forget_sessions('claude-code', now() - interval '180 days');
and for every agent the caller may see:
  select f.* from (select distinct agent_id from recall.sessions) a,
                  recall.forget_sessions(a.agent_id, now() - interval '180 days') f;
The sessions deleted are recorded in recall.forgotten_sessions: a transcript that still holds
one, read again (a sync of the file changed, `pyrecall import --full`), does not bring it back
(recall.unforget_sessions lets it in again). SECURITY INVOKER: an agent's role forgets its own
sessions only. Errors: agent_id missing, before missing or infinite, a NULL flag: 22023.
$c$;

-- A session deleted stays deleted (sql/incremental/015-forgotten-sessions.sql): its id is
-- recorded when its row goes, whatever deletes it (forget_sessions above, `pyrecall forget
-- --session`, a plain DELETE); an insert of that session, or of a message of it, is skipped
-- (recall._message_before_insert, 010-messages.sql: on its path for a session that is not
-- there). The agent's memories session is never recorded (recall.remember makes it again).

-- _record_forgotten: after a session's row is deleted, its id
create or replace function recall._record_forgotten()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  if old.session_id <> 'memories:' || old.agent_id then
    insert into recall.forgotten_sessions (agent_id, session_id)
    values (old.agent_id, old.session_id)
    on conflict (agent_id, session_id) do nothing;
  end if;
  return null;
end
$$;

drop trigger if exists sessions_record_forgotten on recall.sessions;
create trigger sessions_record_forgotten after delete on recall.sessions
  for each row execute function recall._record_forgotten();

-- _skip_forgotten: a session forgotten is not stored again (no error: an importer reading a
-- transcript that still holds it goes on with the file's other sessions)
create or replace function recall._skip_forgotten()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  if exists (select from recall.forgotten_sessions f
             where f.agent_id = new.agent_id and f.session_id = new.session_id) then
    return null;
  end if;
  return new;
end
$$;

drop trigger if exists sessions_skip_forgotten on recall.sessions;
create trigger sessions_skip_forgotten before insert on recall.sessions
  for each row execute function recall._skip_forgotten();

-- unforget_sessions: see the COMMENT below
create or replace function recall.unforget_sessions(agent_id text, session_ids text[] default null)
returns table (session_id text, forgotten_at timestamptz)
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  if unforget_sessions.agent_id is null or unforget_sessions.agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  return query
  delete from recall.forgotten_sessions f
  where f.agent_id = unforget_sessions.agent_id
    and (unforget_sessions.session_ids is null or f.session_id = any (unforget_sessions.session_ids))
  returning f.session_id, f.forgotten_at;
end
$$;

comment on function recall.unforget_sessions is $c$
Let forgotten sessions of agent_id be stored again: their records in recall.forgotten_sessions
(written when a session is deleted) go, those given (session_ids; NULL: all the agent's), and are
returned (session_id, forgotten_at). Nothing is restored by this: a transcript that holds one is
stored again when it is next imported (`pyrecall import --full`; sync reads a file again when it
changes). SECURITY INVOKER: an agent's role reaches its own records only. Error: agent_id
missing: 22023.$c$;
