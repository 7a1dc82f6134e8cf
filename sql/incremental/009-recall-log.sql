-- 009-recall-log
-- recall.recall_log: one row per recall, when an operator turns it on (recall.config
-- 'recall_log' = true; off by default). What the views recall.recall_stats and
-- recall.recall_misses (idempotent/057-recall-log.sql) read: how fast, how often, what is never
-- found. Written by recall.log_recall, which the Python client calls after each recall on the
-- same connection (other clients may call it too).
--
-- The query is kept as its SHA-256 unless 'recall_log_text' = true (then its text as well):
-- what an agent was asked can be personal. The table has agent rows, so it has the policies of
-- the others: an agent role reads and writes its own rows only (bound roles their agent's),
-- recall_admin all.
-- Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a new file.
create table recall.recall_log
( log_id     bigint generated always as identity primary key
, at         timestamptz not null default now()
, agent_id   text not null
, function   text not null                   -- hybrid_recall, session_recall, auto_context
, latency_ms real not null                   -- the call as the client timed it
, n_rows     int not null                    -- rows returned: 0 is a miss
, tokens     int                             -- their n_tokens, summed
, source     text                            -- hybrid (meaning + keywords) or keyword
, query_hash text                            -- sha256 of the query (task) text, hex
, query_text text                            -- the text itself, only with recall_log_text
);
create index recall_log_at_idx on recall.recall_log (at);
create index recall_log_agent_at_idx on recall.recall_log (agent_id, at);

grant select, insert, update, delete on recall.recall_log to recall_agent, recall_admin;

alter table recall.recall_log enable row level security;
create policy agent_rows on recall.recall_log to recall_agent
  using (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)))
  with check (agent_id = coalesce((select recall.bound_agent()), current_setting('recall.agent_id', true)));
create policy agent_bound on recall.recall_log as restrictive to recall_agent
  using ((select recall.bound_agent()) is null or agent_id = (select recall.bound_agent()))
  with check ((select recall.bound_agent()) is null or agent_id = (select recall.bound_agent()));
create policy admin_rows on recall.recall_log to recall_admin using (true) with check (true);
