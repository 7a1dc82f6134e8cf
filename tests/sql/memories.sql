-- Curated memories: remember, supersede, recall them (now and as of before the change), pin
-- them into auto_context, list, forget; and the errors. Run by tests/test_sql_output.py against
-- a fresh database; the output must match tests/expected/memories.out.
\set ON_ERROR_STOP 0
\set SHOW_CONTEXT never
\pset footer off

-- a conversation of agent a, and two memories: a fact that will change, a preference
insert into recall.sessions (session_id, agent_id, title, project) values ('s1', 'a', 'gateway deploy', '/srv/app');
insert into recall.messages (session_id, role, content) values
  ('s1', 'user', 'how do we deploy the gateway?'),
  ('s1', 'assistant', 'with kubectl apply from the deploy folder');
select recall.remember('a', 'the gateway deploys with kubectl apply', kind => 'fact', project => '/srv/app') as old_id \gset
select recall.remember('a', 'answer in British English', kind => 'preference', pinned => true) as pref_id \gset

-- the fact changes: the old memory stays, valid until now
select recall.remember('a', 'the gateway deploys with ArgoCD', kind => 'fact', supersedes => :old_id) as new_id \gset
select memory_id, memory_kind, content, pinned, metadata, supersedes, superseded_by,
       valid_until is not null as superseded
from recall.memories('a', include_superseded => true) order by memory_id;

-- recall: the current memory with the transcript; as of before the change, the old one
select kind, memory_id, memory_kind, session_title, role, left(replace(content, E'\n', ' '), 40) as content
from recall.hybrid_recall('a', 'how does the gateway deploy') order by chunk_id;
select kind, memory_id, left(replace(content, E'\n', ' '), 40) as content
from recall.hybrid_recall('a', 'how does the gateway deploy', kinds => '{memory}',
       as_of => (select valid_until - interval '1 microsecond' from recall.chunks where chunk_id = :old_id));

-- auto_context: the pinned preference first
select section, memory_id, left(replace(content, E'\n', ' '), 40) as content
from recall.auto_context('a', project => '/srv/app', task_text => 'gateway deploy');

-- forget the new one: gone from recall; the old one stays superseded
select recall.forget_memory('a', :new_id) as forgotten;
select count(*) as memories_found
from recall.hybrid_recall('a', 'gateway deploys', kinds => '{memory}');

-- errors: one line each, with their SQLSTATE
select recall.remember('a', '   ');
\echo :LAST_ERROR_SQLSTATE
select recall.remember('a', 'x', kind => 'opinion');
\echo :LAST_ERROR_SQLSTATE
select recall.remember('a', 'x', importance => 1.5);
\echo :LAST_ERROR_SQLSTATE
select recall.remember('b', 'x', supersedes => :pref_id);
\echo :LAST_ERROR_SQLSTATE
select recall.forget_memory('a', :new_id);
\echo :LAST_ERROR_SQLSTATE
select recall.pin_memory('b', :pref_id, true);
\echo :LAST_ERROR_SQLSTATE
select * from recall.hybrid_recall('a', 'x', filter => '{"messages": [{"author": "bob"}]}');
\echo :LAST_ERROR_SQLSTATE
select * from recall.hybrid_recall('a', 'x', turns_per_session => 0);
\echo :LAST_ERROR_SQLSTATE
