-- 055-set-importance
-- recall.set_importance: an agent's judgement of one of its memories, after the fact.
--
-- Re-applied at every migrate. A chunk's importance is derived from its messages (the highest
-- of theirs; 0.5 unless a client said otherwise), and it weighs in every recall's score
-- (importance_weight). Setting it here overrides the derived value for good: the chunker keeps
-- it when it derives the chunk again (recall.chunks.importance_set_at, 008-chunk-importance-set).
-- NULL returns the chunk to its derived value.
--
-- SECURITY INVOKER: the update runs under the caller's row-level security, so an agent role
-- can set the importance of its own chunks only, and a chunk of another agent reads as missing.

create or replace function recall.set_importance(agent_id text, chunk_id bigint, importance float8)
returns float8
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  previous float8;
begin
  if agent_id is null or agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if chunk_id is null then
    raise exception 'chunk_id is required' using errcode = '22023';
  end if;
  if importance < 0 or importance > 1 or importance = 'NaN' then
    raise exception 'importance must be between 0 and 1, got %', importance using errcode = '22023';
  end if;
  select c.importance into previous
  from recall.chunks c
  where c.chunk_id = set_importance.chunk_id and c.agent_id = set_importance.agent_id
  for no key update;
  if not found then
    raise exception 'agent % has no chunk %', quote_literal(set_importance.agent_id), set_importance.chunk_id
      using errcode = 'P0002';
  end if;
  update recall.chunks c
     set importance = coalesce(set_importance.importance,
                               (select max(m.importance) from recall.messages m
                                where m.message_id = any (c.message_ids) and m.agent_id = c.agent_id),
                               c.importance),
         importance_set_at = case when set_importance.importance is null then null else now() end
   where c.chunk_id = set_importance.chunk_id and c.agent_id = set_importance.agent_id;
  return previous;
end
$$;

comment on function recall.set_importance(text, bigint, float8) is
  'Set the importance (0..1) of one chunk of the agent, kept when the chunk is re-derived; NULL returns it to the value derived from its messages. Returns the previous importance. SQLSTATE 22023 for a bad argument, P0002 when the agent has no such chunk (another agent''s chunk reads as missing: row-level security).';
