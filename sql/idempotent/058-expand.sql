-- 058-expand
-- recall.expand: what was said around a recalled chunk, within a token budget. Recall and the
-- context give a chunk (a turn pair, a chat window, a tool call, ...); an agent that wants the
-- rest of that exchange (what was asked before it, how it ended) asks for the chunk's messages
-- and its neighbours in the session, nearest first, until the budget is spent. Re-applied at
-- every migrate.

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
  own_ids bigint[] := '{}';
  own_open boolean := true;       -- the chunk's messages are taken up to the first that does not fit
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

  -- the messages in turn: the chunk's own, in order (all of them, whatever kinds says), then the
  -- session's others of those kinds, inside its span first, then outward one side after the
  -- other, nearest first; each costs its tokens as a turn of a context ("Speaker: text"), the
  -- model's count where the embedding job made it, else estimated (four characters a token)
  for m in
    with
    session_msgs as (
      select x.message_id, x.seq, x.content, x.message_id = any (c.message_ids) as own,
             coalesce(x.n_tokens,
                      greatest(1, ceil(char_length(coalesce(nullif(btrim(x.metadata->>'speaker'), ''),
                                                            nullif(btrim(x.metadata->>'author'), ''),
                                                            initcap(x.role))
                                                   || ': ' || x.content || E'\n\n') / 4.0))::int) as tok
      from recall.messages x
      where x.agent_id = expand.agent_id and x.session_id = c.session_id
        and (x.message_id = any (c.message_ids) or x.kind = any (kinds))
    ),
    -- 0: the chunk's own; 1: between them; 2: before the chunk; 3: after it. Outside, by nearness
    sided as (
      select s.*,
             case when s.own then 0 when s.seq between lo and hi then 1 when s.seq < lo then 2 else 3 end as side,
             row_number() over (partition by s.seq < lo, s.seq > hi order by abs(s.seq - (lo + hi) / 2.0)) as near
      from session_msgs s
    )
    -- in turn: the chunk's, those between, then one before and one after, nearest first
    select s.*, case when s.side <= 1 then s.seq when s.side = 2 then 2 * s.near else 2 * s.near + 1 end as step
    from sided s
    order by least(s.side, 2), step
  loop
    if m.side = 0 then
      own_ids := own_ids || m.message_id;
      if own_open and used + m.tok <= token_budget then
        took_ids := took_ids || m.message_id; took_tok := took_tok || m.tok; used := used + m.tok;
      else
        own_open := false;
      end if;
      continue;
    end if;
    -- not one of the chunk's messages fits: its first, trimmed
    if cardinality(took_ids) = 0 then
      exit;
    end if;
    -- the chunk only partly shown: nothing around it
    exit when cardinality(took_ids) < cardinality(own_ids);
    if m.side = 1 or (m.side = 2 and before_open) or (m.side = 3 and after_open) then
      if used + m.tok <= token_budget then
        took_ids := took_ids || m.message_id; took_tok := took_tok || m.tok; used := used + m.tok;
      elsif m.side = 2 then
        before_open := false;
      elsif m.side = 3 then
        after_open := false;
      end if;
    end if;
    exit when not before_open and not after_open;
  end loop;

  if cardinality(took_ids) = 0 then
    select x.message_id, x.content,
           coalesce(nullif(btrim(x.metadata->>'speaker'), ''), nullif(btrim(x.metadata->>'author'), ''),
                    initcap(x.role)) as who,
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
  from (select x.session_id, x.seq, x.message_id, x.role, x.kind,
               coalesce(nullif(btrim(x.metadata->>'speaker'), ''), nullif(btrim(x.metadata->>'author'), ''),
                        initcap(x.role)) as who,
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
