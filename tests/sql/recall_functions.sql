-- The public recall functions on a small fixed history, with their answers and their errors.
-- Run by tests/test_sql_output.py against a fresh database; the output must match
-- tests/expected/recall_functions.out (PYRECALL_UPDATE_EXPECTED=1 rewrites it after a reviewed change).
\set ON_ERROR_STOP 0
\set SHOW_CONTEXT never
\pset footer off

-- a history: two sessions of agent a (deploys, a flaky test), one of agent b
insert into recall.sessions (session_id, agent_id, title, project, started_at) values
  ('deploy-1', 'a', 'gateway deploy', '/srv/app', '2026-01-01 09:00+00'),
  ('tests-1',  'a', 'flaky test',     '/srv/app', '2026-01-05 09:00+00'),
  ('other-1',  'b', 'b''s session',   '/srv/b',   '2026-01-02 09:00+00');
insert into recall.messages (session_id, agent_id, seq, external_id, role, content, created_at) values
  ('deploy-1', 'a', 0, 'd0', 'user', 'the nightly deploy failed: certificate expired on the gateway', '2026-01-01 09:00+00'),
  ('deploy-1', 'a', 1, 'd1', 'assistant', 'renewed the gateway certificate with certbot and re-ran the deploy', '2026-01-01 09:05+00'),
  ('tests-1',  'a', 0, 't0', 'user', 'test_checkout is flaky on CI, it times out waiting for redis', '2026-01-05 09:00+00'),
  ('tests-1',  'a', 1, 't1', 'assistant', 'raised the redis wait to 10 seconds; test_checkout passes', '2026-01-05 09:10+00'),
  ('other-1',  'b', 0, 'o0', 'user', 'the certificate of agent b is none of agent a''s business', '2026-01-02 09:00+00');

-- embeddings the test controls: deploy chunks point one way, test chunks another
update recall.chunks set embedding = (
  select array_agg(case when i = (case when session_id = 'tests-1' then 2 else 1 end) then 1.0
                        when i = 3 then 0.1 else 0 end order by i)::vector
  from generate_series(1, 384) i);

select session_id, kind, n_tokens, left(content, 60) as content
from recall.chunks order by chunk_id;

-- hybrid_recall: keywords only, then a query vector near the deploy chunks; as_of fixes recency
select session_id, round(score::numeric, 4) as score, round(text_rank::numeric, 4) as text_rank,
       round(recency::numeric, 4) as recency, cumulative_tokens
from recall.hybrid_recall('a', 'certificate gateway', as_of => '2026-01-10 00:00+00');

select session_id, round(score::numeric, 4) as score, round(similarity::numeric, 4) as similarity
from recall.hybrid_recall('a', null,
       (select array_agg(case when i = 1 then 1.0 else 0 end order by i)::vector
        from generate_series(1, 384) i),
       k => 2, as_of => '2026-01-10 00:00+00');

-- the token budget: only what fits
select count(*) as rows, max(cumulative_tokens) as tokens
from recall.hybrid_recall('a', 'certificate redis test deploy', token_budget => 60,
                          as_of => '2026-01-10 00:00+00');

-- another agent's chunks are never returned
select count(*) as b_rows_for_a
from recall.hybrid_recall('a', 'business') where session_id = 'other-1';

-- session_recall: the session first, then its chunks
select session_id, session_rank, round(score::numeric, 4) as score
from recall.session_recall('a', 'flaky redis test', n_sessions => 1, as_of => '2026-01-10 00:00+00');

-- auto_context: the sections, for the project
select section, session_id from recall.auto_context('a', project => '/srv/app', task_text => 'certificate')
order by 1, 2;

-- every released version stays callable and answers as released
select 'v1' as v, session_id, round(score::numeric, 4) as score
from recall.hybrid_recall_v1('a', 'certificate gateway', as_of => '2026-01-10 00:00+00')
union all
select 'v2', session_id, round(score::numeric, 4)
from recall.hybrid_recall_v2('a', 'certificate gateway', as_of => '2026-01-10 00:00+00')
union all
select 'v3', session_id, round(score::numeric, 4)
from recall.hybrid_recall_v3('a', 'certificate gateway', as_of => '2026-01-10 00:00+00')
order by 1, 2;

-- errors: one line each, with their SQLSTATE
select * from recall.hybrid_recall('a', 'x', k => 0);
\echo :LAST_ERROR_SQLSTATE
select * from recall.hybrid_recall('a', 'x', filter => '[1]');
\echo :LAST_ERROR_SQLSTATE
select * from recall.hybrid_recall('', 'x');
\echo :LAST_ERROR_SQLSTATE
select * from recall.hybrid_recall('a', 'x', vector_weight => -1);
\echo :LAST_ERROR_SQLSTATE
