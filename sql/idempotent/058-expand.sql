-- 058-expand
-- recall.expand: what was said around a recalled chunk, within a token budget. Recall and the
-- context give a chunk (a turn pair, a chat window, a tool call, ...); an agent that wants the
-- rest of that exchange (what was asked before it, how it ended) asks for the chunk's messages
-- and its neighbours in the session, nearest first, until the budget is spent. Re-applied at
-- every migrate.

-- _turn_cost: a message's tokens as a turn of a context costs them ("Speaker: text" and the
-- blank line after it): the model's count where the embedding job made it, else estimated at four
-- characters a token (the budget fill's estimate)
create or replace function recall._turn_cost(n_tokens int, role text, metadata jsonb, content text)
returns int
language sql immutable parallel safe
set search_path to pg_catalog, public, pg_temp
as $$
  select coalesce(n_tokens, greatest(1, ceil(char_length(recall._speaker(role, metadata) || ': '
                                                         || content || E'\n\n') / 4.0))::int)
$$;

-- expand: see the COMMENT below
create or replace function recall.expand(
  agent_id     text,
  chunk_id     bigint,
  token_budget int    default 1000,
  kinds        text[] default array['text'])
returns table (session_id text, seq int, message_id bigint, role text, kind text, speaker text,
               content text, created_at timestamptz, n_tokens int, cumulative_tokens bigint,
               in_chunk boolean)
language plpgsql stable security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  c recall.chunks;
  lo int;                         -- the chunk's span in its session: its first and last seq
  hi int;
  used int := 0;
  took_ids bigint[] := '{}';      -- the messages taken, and their tokens
  took_tok int[] := '{}';
  before_cur refcursor;          -- the messages before the chunk, nearest first, and after it
  after_cur refcursor;
  before_open boolean := true;    -- a side is closed at its first message that does not fit
  after_open boolean := true;
  m record;
  t record;
begin
  if expand.agent_id is null or expand.agent_id = '' or expand.chunk_id is null then
    raise exception 'agent_id and chunk_id are required' using errcode = '22023';
  end if;
  if token_budget is null or token_budget < 1 then
    raise exception 'token_budget must be >= 1, got %', coalesce(token_budget::text, 'NULL')
      using errcode = '22023';
  end if;
  if kinds is null or not kinds <@ array['text', 'thinking', 'tool_call', 'tool_result'] then
    raise exception 'kinds must be among text, thinking, tool_call, tool_result, got %',
      coalesce(kinds::text, 'NULL') using errcode = '22023';
  end if;
  select * into c from recall.chunks x where x.agent_id = expand.agent_id and x.chunk_id = expand.chunk_id;
  if c.chunk_id is null then
    raise exception 'agent % has no chunk %', expand.agent_id, expand.chunk_id using errcode = 'P0002';
  end if;

  -- a curated memory or a summary holds no message: itself, trimmed to the budget if need be
  if cardinality(c.message_ids) = 0 then
    if c.n_tokens <= token_budget then
      return query select c.session_id, null::int, null::bigint, null::text, c.kind, null::text,
                          c.content, c.created_at, c.n_tokens, c.n_tokens::bigint, true;
    else
      select * into t from recall._trim_v6(expand.agent_id, c.content, c.n_tokens, null, token_budget);
      return query select c.session_id, null::int, null::bigint, null::text, c.kind, null::text,
                          t.content, c.created_at, t.n_tokens, t.n_tokens::bigint, true;
    end if;
    return;
  end if;

  select min(x.seq), max(x.seq) into lo, hi
  from recall.messages x
  where x.agent_id = expand.agent_id and x.message_id = any (c.message_ids);

  -- the messages in turn, each costing its tokens as a turn of a context ("Speaker: text": the
  -- model's count where the embedding job made it, else estimated, four characters a token):
  -- the chunk's own, in order, up to the first that does not fit (all of them, whatever kinds
  -- says) ...
  for m in
    select x.message_id, recall._turn_cost(x.n_tokens, x.role, x.metadata, x.content) as tok
    from recall.messages x
    where x.agent_id = expand.agent_id and x.message_id = any (c.message_ids)
    order by x.seq
  loop
    exit when used + m.tok > token_budget;
    took_ids := took_ids || m.message_id; took_tok := took_tok || m.tok; used := used + m.tok;
  end loop;
  -- (not all of the chunk's messages fit: those that do, nothing around them; not one: below)
  if cardinality(took_ids) > 0 and cardinality(took_ids) = cardinality(c.message_ids) then
    -- ... the session's others of those kinds between its first and last message, each that fits ...
    for m in
      select x.message_id, recall._turn_cost(x.n_tokens, x.role, x.metadata, x.content) as tok
      from recall.messages x
      where x.agent_id = expand.agent_id and x.session_id = c.session_id
        and x.seq > lo and x.seq < hi and x.kind = any (kinds)
        and not (x.message_id = any (c.message_ids))
      order by x.seq
    loop
      if used + m.tok <= token_budget then
        took_ids := took_ids || m.message_id; took_tok := took_tok || m.tok; used := used + m.tok;
      end if;
    end loop;
    -- ... then outward, the nearest before and the nearest after in turn, each side up to its
    -- first message that does not fit: each side read by the session's seq index, nearest
    -- first, one message at a time (as many as are taken, and one more)
    open before_cur for
      select x.message_id, recall._turn_cost(x.n_tokens, x.role, x.metadata, x.content) as tok
      from recall.messages x
      where x.agent_id = expand.agent_id and x.session_id = c.session_id
        and x.seq < lo and x.kind = any (kinds)
      order by x.seq desc;
    open after_cur for
      select x.message_id, recall._turn_cost(x.n_tokens, x.role, x.metadata, x.content) as tok
      from recall.messages x
      where x.agent_id = expand.agent_id and x.session_id = c.session_id
        and x.seq > hi and x.kind = any (kinds)
      order by x.seq;
    loop
      if before_open then
        fetch before_cur into m;
        if found and used + m.tok <= token_budget then
          took_ids := took_ids || m.message_id; took_tok := took_tok || m.tok; used := used + m.tok;
        else
          before_open := false;
        end if;
      end if;
      if after_open then
        fetch after_cur into m;
        if found and used + m.tok <= token_budget then
          took_ids := took_ids || m.message_id; took_tok := took_tok || m.tok; used := used + m.tok;
        else
          after_open := false;
        end if;
      end if;
      exit when not before_open and not after_open;
    end loop;
    close before_cur;
    close after_cur;
  end if;

  if cardinality(took_ids) = 0 then
    select x.message_id, x.content, recall._speaker(x.role, x.metadata) as who,
           coalesce(x.n_tokens, greatest(1, ceil(char_length(x.content) / 4.0))::int) as tok
      into m
    from recall.messages x
    where x.agent_id = expand.agent_id and x.message_id = any (c.message_ids)
    order by x.seq
    limit 1;
    select * into t from recall._trim_v6(expand.agent_id, m.content, m.tok, array[m.message_id], token_budget);
    return query
    select x.session_id, x.seq, x.message_id, x.role, x.kind, m.who, t.content, x.created_at,
           t.n_tokens, t.n_tokens::bigint, true
    from recall.messages x
    where x.agent_id = expand.agent_id and x.message_id = m.message_id and t.content is not null;
    return;
  end if;

  -- (read by id, the tokens looked up in the arrays: a Citus cluster cannot join a function of a
  -- variable, unnest, with a distributed table)
  return query
  select y.session_id, y.seq, y.message_id, y.role, y.kind, y.who, y.content, y.created_at, y.tok,
         sum(y.tok) over (order by y.seq rows unbounded preceding), y.own
  from (select x.session_id, x.seq, x.message_id, x.role, x.kind, recall._speaker(x.role, x.metadata) as who,
               x.content, x.created_at, took_tok[array_position(took_ids, x.message_id)] as tok,
               x.message_id = any (c.message_ids) as own
        from recall.messages x
        where x.agent_id = expand.agent_id and x.message_id = any (took_ids)) y
  order by y.seq;
end
$$;

comment on function recall.expand is $c$
What was said around one of the agent's chunks (a chunk_id as recall, session_recall and
auto_context return it), within token_budget: the chunk's messages in order, then the other
messages of its session of the given kinds (default text: the turns; also thinking, tool_call,
tool_result) between its first and last message, then outward, the message before it and the one
after it in turn, nearest first, each while it fits; a side stops at its first message that does
not fit (what is shown of each side is contiguous). A message costs its tokens as a turn of a
context ("Speaker: text": the model's count where the embedding job made it, else estimated at four
characters a token). When not all of the chunk's messages fit, only those that do (in order) come
back, and when none does, its first message trimmed to the budget; a curated memory or a summary
(no message) comes back as itself, trimmed if need be. Rows in seq order: session_id, seq,
message_id, role, kind, speaker (the chat's speaker, else the role), content, created_at, n_tokens,
cumulative_tokens (the running total, never above token_budget), in_chunk (one of the chunk's own
messages). SECURITY INVOKER: row-level security keeps other agents' chunks out (P0002 as for a
chunk that does not exist). Errors: agent_id or chunk_id missing, token_budget below 1, an unknown
kind: 22023; no such chunk of the agent: P0002.
$c$;
