-- 015-forgotten-sessions
-- recall.forgotten_sessions: a session deleted stays deleted. Until now `pyrecall forget
-- --session` and a retention policy (`forget --before`, recall.forget_sessions) deleted the rows,
-- but the transcript was still on disk: the next `pyrecall sync` that found the file changed, or
-- `pyrecall import --full`, stored the session again, old messages and all. Now deleting a
-- session (however: forget, forget_sessions, a plain DELETE) records its id here, and a session
-- or message insert for a recorded id is skipped without error (sql/idempotent/059-retention.sql),
-- until recall.unforget_sessions lets it in again. The agent's memories session is never recorded.
--
-- An agent table like the others: rows of its agent only for recall_agent members (bound roles
-- their agent's), all for recall_admin; distributed by agent_id on a Citus cluster.
-- Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a new file.
create table recall.forgotten_sessions
( agent_id     text not null
, session_id   text not null
, forgotten_at timestamptz not null default now()
, primary key (agent_id, session_id)
);
comment on table recall.forgotten_sessions is
  'Sessions deleted: an insert of one of these ids (a transcript imported again) is skipped until recall.unforget_sessions.';

grant select, insert, update, delete on recall.forgotten_sessions to recall_agent, recall_admin;

alter table recall.forgotten_sessions enable row level security;
create policy agent_rows on recall.forgotten_sessions to recall_agent
  using (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)))
  with check (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)));
create policy agent_bound on recall.forgotten_sessions as restrictive to recall_agent
  using ((select recall.bound_agent()) is null or agent_id = (select recall.bound_agent()))
  with check ((select recall.bound_agent()) is null or agent_id = (select recall.bound_agent()));
create policy admin_rows on recall.forgotten_sessions to recall_admin using (true) with check (true);
