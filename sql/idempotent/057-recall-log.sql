-- 057-recall-log
-- The recall log (table recall.recall_log, 009-recall-log): recall.log_recall writes a row
-- when recall.config 'recall_log' is true; the views answer "how fast, how often, what is never
-- found" for an operator.
--
-- Re-applied at every migrate. Turning it on (the owner writes recall.config):
--   insert into recall.config values ('recall_log', 'true')
--     on conflict (key) do update set value = excluded.value;
--   -- and, to keep the query text, not only its SHA-256:
--   insert into recall.config values ('recall_log_text', 'true')
--     on conflict (key) do update set value = excluded.value;

-- log_recall: one row of the log, when it is on (else nothing); returns whether it wrote.
-- Called as a statement of its own (autocommit), it need not wait for the WAL flush at commit:
-- the Python client sends `select set_config('synchronous_commit', 'off', true),
-- recall.log_recall(...)` (a row lost in a crash is acceptable for a log; the flush would cost
-- a recall more than the log row). set_config inside this function would not outlive it (its SET
-- search_path clause restores every setting at exit).
-- SECURITY INVOKER: an agent role writes its own agent's rows only (the table's policies). A
-- standby or a read-only transaction cannot write: nothing is written there, and false says so.
create or replace function recall.log_recall(
  agent_id   text,
  function   text,
  latency_ms float8,
  n_rows     int,
  query_text text default null,
  source     text default null,
  tokens     int  default null)
returns boolean
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  keep_text boolean;
begin
  if coalesce((select c.value = 'true'::jsonb from recall.config c where c.key = 'recall_log'), false)
     is not true
     or pg_is_in_recovery() or current_setting('transaction_read_only') = 'on' then
    return false;
  end if;
  if agent_id is null or function is null or latency_ms is null or n_rows is null then
    raise exception 'agent_id, function, latency_ms and n_rows are required' using errcode = '22023';
  end if;
  keep_text := coalesce((select c.value = 'true'::jsonb from recall.config c
                         where c.key = 'recall_log_text'), false);
  insert into recall.recall_log (agent_id, function, latency_ms, n_rows, tokens, source,
                                 query_hash, query_text)
  values (log_recall.agent_id, log_recall.function, log_recall.latency_ms, log_recall.n_rows,
          log_recall.tokens, log_recall.source,
          encode(sha256(convert_to(log_recall.query_text, 'UTF8')), 'hex'),
          case when keep_text then log_recall.query_text end);
  return true;
end
$$;

comment on function recall.log_recall(text, text, float8, int, text, text, int) is
  'Log one recall (recall.recall_log) when recall.config recall_log is true; the query as its SHA-256, and as text with recall_log_text. Returns whether a row was written (never on a standby or in a read-only transaction). 22023 when a required argument is NULL.';

-- recall_stats: per agent and function, over the whole log (add a WHERE on recall_log.at for
-- a window): calls, misses (no row returned), latency percentiles, rows and tokens returned.
-- security_invoker: the caller's row-level security applies (an admin sees every agent).
create or replace view recall.recall_stats with (security_invoker = true) as
select l.agent_id, l.function,
       count(*) as calls,
       count(*) filter (where l.n_rows = 0) as misses,
       round(count(*) filter (where l.n_rows = 0)::numeric / count(*), 3) as miss_rate,
       round(percentile_cont(0.5) within group (order by l.latency_ms)::numeric, 2) as p50_ms,
       round(percentile_cont(0.95) within group (order by l.latency_ms)::numeric, 2) as p95_ms,
       round(max(l.latency_ms)::numeric, 2) as max_ms,
       round(avg(l.n_rows), 1) as avg_rows,
       round(avg(l.tokens), 0) as avg_tokens,
       count(*) filter (where l.source = 'keyword') as keyword_only,
       min(l.at) as first_at, max(l.at) as last_at
from recall.recall_log l
group by l.agent_id, l.function;

comment on view recall.recall_stats is
  'Per agent and function: calls, misses (no row), miss_rate, p50/p95/max latency (ms), average rows and tokens, calls answered by keywords only, first and last call.';

-- recall_misses: the queries that found nothing, most frequent first (the text where the log
-- keeps it)
create or replace view recall.recall_misses with (security_invoker = true) as
select l.agent_id, l.function, l.query_hash, max(l.query_text) as query_text,
       count(*) as times, min(l.at) as first_at, max(l.at) as last_at
from recall.recall_log l
where l.n_rows = 0
group by l.agent_id, l.function, l.query_hash
order by count(*) desc, max(l.at) desc;

comment on view recall.recall_misses is
  'Queries that returned no row, by agent, function and query (SHA-256; text with recall_log_text), most frequent first.';

-- operators' views: recall_admin (every agent) and the owner; not the agent roles
revoke all on recall.recall_stats, recall.recall_misses from public, recall_agent;
grant select on recall.recall_stats, recall.recall_misses to recall_admin;
