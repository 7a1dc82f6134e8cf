-- 010-messages
-- Ingestion rules of recall.messages and the in-database chunking that derives recall.chunks.
--
-- Re-applied at every `pyrecall migrate`. A message written by any client (plain INSERT,
-- COPY, the Python importers) is validated, numbered, de-duplicated and chunked here, so
-- every language gets the same memory.

-- _check_message: one sentence per bad input, raised with SQLSTATE 23514 (check_violation).
-- _message_before_insert repeats these checks inline: keep the two the same.
--
-- It takes the values, not the row: on a Citus cluster the update trigger runs on the shard,
-- where NEW is of the shard's own row type (recall.messages_102008), which a function taking
-- a recall.messages row does not accept: the row-typed signature before this one failed there.
drop function if exists recall._check_message(recall.messages);
create or replace function recall._check_message(role text, kind text, content text, importance real,
                                                 metadata jsonb, session_id text)
returns void
language plpgsql immutable
set search_path to pg_catalog, pg_temp
as $$
begin
  if role is null or role not in ('user', 'assistant', 'system', 'tool') then
    raise exception 'unknown role %: expected one of user, assistant, system, tool',
      coalesce(quote_literal(role), 'NULL') using errcode = '23514';
  end if;
  if kind is null or kind not in ('text', 'thinking', 'tool_call', 'tool_result') then
    raise exception 'unknown kind %: expected one of text, thinking, tool_call, tool_result',
      coalesce(quote_literal(kind), 'NULL') using errcode = '23514';
  end if;
  if content is null or btrim(content, E' \t\r\n') = '' then
    raise exception 'empty content: a message needs text (session %)', session_id
      using errcode = '23514';
  end if;
  if importance is null or importance < 0 or importance > 1 or importance = 'NaN' then
    raise exception 'importance must be between 0 and 1, got %', coalesce(importance::text, 'NULL')
      using errcode = '23514';
  end if;
  if metadata is not null and jsonb_typeof(metadata) <> 'object' then
    raise exception 'metadata must be a JSON object, got a JSON %', jsonb_typeof(metadata)
      using errcode = '23514';
  end if;
end
$$;

-- _message_before_insert: validate, fill agent_id / seq / external_id, skip a re-insert.
-- One query per row (this runs for every message of a bulk COPY). The checks are those of
-- _check_message, written out: a call per message costs more than the checks themselves.
create or replace function recall._message_before_insert()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  session_agent text;
  last_seq      int;
  duplicate     boolean;
  n_found       bigint;
  existing      recall.messages;
begin
  if new.role is null or new.role not in ('user', 'assistant', 'system', 'tool') then
    raise exception 'unknown role %: expected one of user, assistant, system, tool',
      coalesce(quote_literal(new.role), 'NULL') using errcode = '23514';
  end if;
  if new.kind is null or new.kind not in ('text', 'thinking', 'tool_call', 'tool_result') then
    raise exception 'unknown kind %: expected one of text, thinking, tool_call, tool_result',
      coalesce(quote_literal(new.kind), 'NULL') using errcode = '23514';
  end if;
  if new.content is null or btrim(new.content, E' \t\r\n') = '' then
    raise exception 'empty content: a message needs text (session %)', new.session_id
      using errcode = '23514';
  end if;
  if new.importance is null or new.importance < 0 or new.importance > 1 or new.importance = 'NaN' then
    raise exception 'importance must be between 0 and 1, got %', coalesce(new.importance::text, 'NULL')
      using errcode = '23514';
  end if;
  if new.metadata is not null and jsonb_typeof(new.metadata) <> 'object' then
    raise exception 'metadata must be a JSON object, got a JSON %', jsonb_typeof(new.metadata)
      using errcode = '23514';
  end if;
  new.metadata := coalesce(new.metadata, '{}');
  -- no credential is stored (009-secrets.sql); before the identity below is derived from the
  -- text, so that the same message read again is found stored
  new.content := recall.redact(new.content);
  -- without an id from the source, a message is identified by what it says and when
  new.external_id := coalesce(new.external_id, 'sha256:' || encode(sha256(convert_to(
    concat_ws(E'\x1f', new.role, new.kind, extract(epoch from new.created_at)::text, new.content), 'UTF8')), 'hex'));

  -- a message without its agent takes its session's (a session id is unique across agents on
  -- one node; on a Citus cluster it is unique within its agent only, so the agent is needed
  -- where two agents hold the id)
  if new.agent_id is null then
    select min(s.agent_id), count(*) into session_agent, n_found
    from recall.sessions s where s.session_id = new.session_id;
    if n_found > 1 then
      raise exception 'session % is held by % agents: give the message its agent_id',
        quote_literal(new.session_id), n_found using errcode = '23514';
    end if;
    new.agent_id := session_agent;
  end if;
  -- the session (locked: serialises seq numbering within it), its last seq, and whether this
  -- message is already stored. RLS hides other agents' sessions, so a session of another
  -- agent reads as missing: nothing about it leaks.
  select s.agent_id,
         (select max(m.seq) from recall.messages m
          where m.agent_id = new.agent_id and m.session_id = new.session_id),
         exists (select from recall.messages m
                 where m.agent_id = new.agent_id and m.session_id = new.session_id
                   and m.external_id = new.external_id)
    into session_agent, last_seq, duplicate
  from recall.sessions s
  where s.agent_id = new.agent_id and s.session_id = new.session_id
  for no key update of s;
  if not found then
    -- a message of a session forgotten (deleted, recorded in recall.forgotten_sessions by
    -- 059-retention.sql): skipped, as its session was; a transcript read again brings nothing back
    if exists (select from recall.forgotten_sessions f
               where f.session_id = new.session_id
                 and (new.agent_id is null or f.agent_id = new.agent_id)) then
      return null;
    end if;
    if exists (select from recall.sessions s where s.session_id = new.session_id) then
      raise exception 'message agent_id % differs from the agent of session %',
        quote_literal(new.agent_id), quote_literal(new.session_id) using errcode = '23514';
    end if;
    raise exception 'session % does not exist: insert it into recall.sessions first',
      coalesce(quote_literal(new.session_id), 'NULL') using errcode = '23503';
  end if;
  if duplicate then
    return null;                          -- already stored: a no-op, not an error
  end if;

  if new.seq is null then
    new.seq := coalesce(last_seq, 0) + 1;
  elsif new.seq <= last_seq then
    -- an explicit seq that is taken: the same message again is a no-op, another is an error
    select * into existing from recall.messages m
    where m.agent_id = new.agent_id and m.session_id = new.session_id and m.seq = new.seq;
    if found then
      if existing.content = new.content and existing.role = new.role and existing.kind = new.kind then
        return null;
      end if;
      raise exception 'seq % of session % already holds another message', new.seq,
        quote_literal(new.session_id) using errcode = '23505';
    end if;
  end if;
  return new;
end
$$;

-- _message_before_update: the identity of a message does not move between sessions or agents;
-- a change of what its text in a passage is made of (content, role, metadata: the speaker;
-- created_at: the date line) makes its token counts (011-message-tokens) unknown again, and a
-- change of its text its vector (013-message-vectors), unless the same statement sets them;
-- a new text is redacted (009-secrets.sql) like an inserted one
create or replace function recall._message_before_update()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  if new.session_id is distinct from old.session_id or new.agent_id is distinct from old.agent_id
     or new.seq is distinct from old.seq or new.external_id is distinct from old.external_id then
    raise exception 'session_id, agent_id, seq and external_id of a message cannot change'
      using errcode = '23514';
  end if;
  -- (checked only when a checked column changes: an update of the token counts alone, the
  -- embed worker's, costs no call)
  if new.content is distinct from old.content then
    new.content := recall.redact(new.content);          -- 009-secrets.sql
  end if;
  if (new.role, new.kind, new.content, new.importance, new.metadata)
     is distinct from (old.role, old.kind, old.content, old.importance, old.metadata) then
    perform recall._check_message(new.role, new.kind, new.content, new.importance, new.metadata,
                                  new.session_id);
  end if;
  if (new.content, new.role, new.metadata, new.created_at)
     is distinct from (old.content, old.role, old.metadata, old.created_at)
     and (new.n_tokens, new.date_tokens) is not distinct from (old.n_tokens, old.date_tokens) then
    new.n_tokens := null;
    new.date_tokens := null;
  end if;
  -- the turn's own vector (013-message-vectors) is of "Speaker: text": its date is not in it
  -- (compared as text: the vector's = is not on this function's search_path)
  if (new.content, new.role, new.metadata) is distinct from (old.content, old.role, old.metadata)
     and new.embedding::text is not distinct from old.embedding::text then
    new.embedding := null;
  end if;
  return new;
end
$$;

-- _session_before_update: a session never changes hands (agent isolation depends on it)
create or replace function recall._session_before_update()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  if new.agent_id is distinct from old.agent_id or new.session_id is distinct from old.session_id then
    raise exception 'session_id and agent_id of a session cannot change'
      using errcode = '23514';
  end if;
  return new;
end
$$;

-- _split_windows: a long text as overlapping windows of at most max_chars characters, window
-- n starting at character n * (max_chars - overlap_chars), the last before the final overlap.
--
-- Linear in the text's length: the text is cut once into pieces of 250 characters and each
-- window is glued from the few pieces it spans, then trimmed. (substr() per window over the
-- whole text walks it from its start in a multibyte encoding, detoasting it again each time: a
-- 10 MB message took more than 20 minutes that way.) Output equal to that simple form,
-- row for row, for every input; tests/test_split_windows.py checks it.
--
-- rows 1: most texts are one window. With the default estimate (1000 rows a call) the planner
-- of _rechunk expected thousands of chunks and joined them to recall.sessions by reading the
-- whole table, at every insert (a cost that grew with the number of sessions stored).
create or replace function recall._split_windows(body text, max_chars int, overlap_chars int)
returns table (part int, content text)
language plpgsql immutable parallel safe
rows 1
set search_path to pg_catalog, pg_temp
as $$
begin
  -- most texts are one window (and need no query)
  if max_chars > overlap_chars and char_length(body) <= max_chars then
    part := 0;
    content := body;
    return next;
    return;
  end if;
  -- planned at each call with the text's own numbers (EXECUTE): a generic plan, which a caller's
  -- plan_cache_mode may impose on a static query, joins the pieces by nested loop: quadratic
  return query execute $q$
  with
  -- where the windows start: every max_chars - overlap_chars characters, the last one
  -- before the final overlap_chars characters (at least one window, even for an empty text)
  starts as (
    select w.start
    from generate_series(0, greatest(char_length($1) - $3 - 1, 0),
                         $2 - $3) as w(start)
  ),
  -- the text cut once, left to right, into pieces of 250 characters: piece i holds characters
  -- 250 i .. 250 i + 249 (250: a regular expression repeats at most 255 times)
  pieces as (
    select (p.i - 1)::int as i, p.m[1] as piece
    from regexp_matches($1, '.{1,250}', 'g') with ordinality as p(m, i)
  ),
  -- each window's pieces glued together: from the piece of its first character to the piece
  -- of its last (or the text's last), a short text that holds the window
  spans as (
    select s.start, string_agg(p.piece, '' order by p.i) as text
    from starts s
    cross join lateral generate_series(s.start / 250,
                                       least((s.start::bigint + $2 - 1) / 250,
                                             (char_length($1) - 1) / 250)) as k(i)
    join pieces p on p.i = k.i
    group by s.start
  )
  -- the window cut out of its pieces
  select (s.start / ($2 - $3))::int,
         case when $1 is not null
              then substr(coalesce(x.text, ''), s.start % 250 + 1, $2) end
  from starts s
  left join spans x on x.start = s.start
  order by s.start
  $q$ using body, max_chars, overlap_chars;
end
$$;

-- _speaker: who said a message, as a chunk labels it: metadata.speaker (a person's name in a
-- chat), else metadata.author (the Discord importer's), else the role. _rechunk writes the
-- same expression out.
create or replace function recall._speaker(role text, metadata jsonb)
returns text
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select coalesce(nullif(btrim(metadata->>'speaker'), ''), nullif(btrim(metadata->>'author'), ''), initcap(role))
$$;

-- _window_part_speaker: the speaker of the message that a part of a long window starts inside
-- of (null when the part starts at a message's label or between two messages). lens: the
-- length of the window's date line, then of each message as the body holds it ("name: text"
-- and the blank line after it); start: the part's first character, counted from 0.
create or replace function recall._window_part_speaker(speakers text[], lens int[], start int)
returns text
language plpgsql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
declare
  at int := lens[1];
begin
  for i in 1 .. coalesce(cardinality(speakers), 0) loop
    if start < at + lens[i + 1] then
      return case when start > at and start < at + lens[i + 1] - 2 then speakers[i] end;
    end if;
    at := at + lens[i + 1];
  end loop;
  return null;
end
$$;

-- _window_part_members: which messages of a long window a part of it holds (1-based, in
-- order): those with a character of their label or text in the part (the blank line after a
-- message is no part of it). lens as for _window_part_speaker; start: the part's first
-- character, counted from 0; len: the part's length.
create or replace function recall._window_part_members(lens int[], start int, len int)
returns int[]
language plpgsql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
declare
  at int := lens[1];
  members int[] := '{}';
begin
  for i in 1 .. coalesce(cardinality(lens), 1) - 1 loop
    if at < start + len and at + lens[i + 1] - 2 > start then
      members := members || i;
    end if;
    at := at + lens[i + 1];
  end loop;
  return members;
end
$$;

-- _estimate_tokens: about four characters a token, until the embedder records the exact count.
-- _rechunk writes the same expression out.
create or replace function recall._estimate_tokens(body text)
returns int
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select greatest(1, ceil(char_length(body) / 4.0))::int
$$;

-- the signatures before 010-agent-first-keys (a session named without its agent)
drop function if exists recall._rechunk(text[], int[]);
drop function if exists recall._redo_from(text, int);

-- _rechunk: derive the chunks of the given sessions from from_seq on, and make recall.chunks
-- equal to them there: new chunks inserted, changed ones updated (their embedding reset only
-- when the text changed), chunks no longer derived deleted. Returns the chunks written.
--
-- Chunk kinds, from the messages of one turn (a turn starts at a user text message):
--   turn_pair  the user text and the first assistant text that answers it
--   thinking   an assistant thinking message
--   tool       a tool call with its result (matched by metadata.tool_use_id, else adjacent)
--   code       each fenced code block of a text message, with the text just before it
--   message    any other text message (a question not yet answered, a system note, ...)
--   window     in a session with metadata.chunking = 'window' (a chat between people, where
--              question/answer pairs mean little): overlapping windows of text messages,
--              recall.config window_messages (4) every window_stride (2), instead of
--              turn_pair and message chunks
-- Text longer than chunk_max_chars becomes several windows (part 0, 1, ...) that overlap.
--
-- The plan is generic (planned once per connection): a custom plan for each call's arrays
-- costs more planning than running it for a few messages. Its shape does not depend on
-- the arrays' contents: the affected sessions' messages by index.
create or replace function recall._rechunk(agent_ids text[], session_ids text[], from_seqs int[])
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
set plan_cache_mode to force_generic_plan
as $$
declare
  changed bigint;
  win_size int := coalesce((select value::int from recall.config where key = 'window_messages'), 4);
  win_stride int := coalesce((select value::int from recall.config where key = 'window_stride'), 2);
  win_after int := win_size - 1;
  -- per session: its text messages before from_seq (windows are numbered from the session's
  -- first text message); counted only for a chat session redone from inside
  text_before int[] := array_fill(0, array[coalesce(cardinality(session_ids), 0)]);
begin
  -- (never run where every session is redone whole, as recall.chunk_sessions does on a Citus
  -- cluster: this statement is planned only when it runs)
  if exists (select from unnest(from_seqs) f where f > -2147483648) then
    select array_agg(coalesce(b.n, 0) order by a.i) into text_before
    from unnest(agent_ids, session_ids, from_seqs) with ordinality as a(agent_id, session_id, from_seq, i)
    left join lateral (
      select count(*)::int as n
      from recall.messages m
      where m.agent_id = a.agent_id and m.session_id = a.session_id and m.seq < a.from_seq and m.kind = 'text'
        and exists (select from recall.sessions s
                    where s.agent_id = a.agent_id and s.session_id = a.session_id
                      and s.metadata->>'chunking' = 'window')
    ) b on a.from_seq > -2147483648;
  end if;
  -- plpgsql, not sql: the plan of this statement is cached for the session (planning it
  -- costs milliseconds, more than running it for one message); generic, see above
  -- recall._speaker and recall._estimate_tokens are written out here (a call per chunk is
  -- costly: functions with a pinned search_path are never inlined); keep them the same
  with
  -- settings recorded at install
  conf as (
    select (select value::int from recall.config where key = 'chunk_max_chars') as max_chars,
           (select value::int from recall.config where key = 'chunk_overlap_chars') as overlap_chars,
           (select value::int from recall.config where key = 'code_context_chars') as code_chars
  ),
  -- the sessions to redo, each from the seq where its chunks may have changed
  -- (the fewest text messages before belong to the smallest from_seq)
  affected as (
    select a.agent_id, a.session_id, min(a.from_seq) as from_seq, min(a.text_before) as text_before
    from unnest(agent_ids, session_ids, from_seqs, text_before) as a(agent_id, session_id, from_seq, text_before)
    group by a.agent_id, a.session_id
  ),
  -- their messages from there on, each with its neighbours and the turn it belongs to.
  -- Pairing is done with window functions, not self-joins: linear in the session's length.
  msgs as (
    select m.message_id, m.agent_id, m.session_id, m.seq, m.external_id, m.role, m.kind, m.content, m.created_at,
           m.importance, m.metadata, m.metadata->>'tool_use_id' as tool_use_id,
           coalesce(nullif(btrim(m.metadata->>'speaker'), ''), nullif(btrim(m.metadata->>'author'), ''),
                    initcap(m.role)) as speaker,
           coalesce(ss.metadata->>'chunking' = 'window', false) as windowed,
           a.text_before + count(*) filter (where m.kind = 'text') over w as text_i,
           a.text_before + count(*) filter (where m.kind = 'text') over (partition by m.agent_id, m.session_id) as text_n,
           max(m.seq) filter (where m.role = 'user' and m.kind = 'text')
             over (partition by m.agent_id, m.session_id order by m.seq) as turn_seq,
           lag(m.kind) over w as prev_kind,
           lag(m.metadata ? 'tool_use_id') over w as prev_has_id,
           lead(m.kind) over w as next_kind,
           lead(m.metadata ? 'tool_use_id') over w as next_has_id,
           lead(m.message_id) over w as next_id,
           lead(m.content) over w as next_content,
           lead(m.importance) over w as next_importance,
           lead(m.metadata) over w as next_metadata
    from affected a
    join recall.sessions ss on ss.agent_id = a.agent_id and ss.session_id = a.session_id
    join recall.messages m on m.agent_id = a.agent_id and m.session_id = a.session_id and m.seq >= a.from_seq
    window w as (partition by m.agent_id, m.session_id order by m.seq)
  ),
  -- window chunking (sessions with metadata.chunking = 'window', e.g. a chat between people):
  -- win_size consecutive text messages, a new window every win_stride; the last window may
  -- be shorter so that every message is covered. text_i counts from the session's first text
  -- message (text_before: those before from_seq, which _redo_from puts at a window's start). A window starts with the date of
  -- its first message ("[8 May 2023]", UTC): in a chat, when something was said is part of
  -- what was said, and the date in the indexed and embedded text lifted LoCoMo recall of
  -- chunks and of sessions (docs/BENCHMARKS.md).
  --
  -- Each message of a window is named by its speaker (metadata.speaker, else metadata.author
  -- as the Discord importer writes it, else the role), and the window's metadata holds, beside
  -- its first message's keys, "messages": every message's own metadata with its seq and
  -- external_id (the source's id), in the order of message_ids. A filter on one message (author, permalink, ...) can then
  -- match a window where that message is not the first (hybrid_recall_v4's filter), and a
  -- result says which messages it holds.
  windows as (
    select x.agent_id, x.session_id, x.seq as first_seq, x.text_i, x.text_n, x.created_at,
           x.metadata || jsonb_build_object('messages', jsonb_agg(
             x.metadata || jsonb_build_object('seq', x.seq, 'external_id', x.external_id)
           ) over f) as metadata,
           array_agg(x.message_id) over f as message_ids,
           coalesce('[' || to_char(x.created_at at time zone 'UTC', 'FMDD FMMonth YYYY') || E']\n', '')
           || string_agg(x.speaker || ': ' || x.content, E'\n\n') over f as body,
           -- where each message sits in the body, for the parts of a long window (below)
           array_agg(x.speaker) over f as speakers,
           array[char_length(coalesce('[' || to_char(x.created_at at time zone 'UTC', 'FMDD FMMonth YYYY')
                                      || E']\n', ''))]
             || array_agg(char_length(x.speaker) + char_length(x.content) + 4) over f as lens,
           max(x.importance) over f as importance
    from msgs x
    where x.windowed and x.kind = 'text'
    window f as (partition by x.agent_id, x.session_id order by x.seq rows between current row and win_after following)
  ),
  -- each message with its turn: the turn's first message (the user text) and its answer (the
  -- turn's first assistant text)
  turns as (
    select x.*,
           case when x.turn_seq is not null
                then min(x.seq) filter (where x.role = 'assistant' and x.kind = 'text') over t end as answer_seq,
           first_value(x.message_id) over t_ord as q_id,
           first_value(x.role) over t_ord as q_role,
           first_value(x.content) over t_ord as q_content,
           first_value(x.created_at) over t_ord as q_created_at,
           first_value(x.importance) over t_ord as q_importance,
           first_value(x.metadata) over t_ord as q_metadata
    from msgs x
    window t as (partition by x.agent_id, x.session_id, x.turn_seq),
           t_ord as (partition by x.agent_id, x.session_id, x.turn_seq order by x.seq)
  ),
  -- tool messages with the others of the same tool_use_id: a result belongs to the last call
  -- of its id before it (none: a result no call claims); a call gets the results that belong
  -- to it. (Before 2026-11-28 a call got every result of its id, one before it too, which then
  -- was in two chunks; and appending such a call chunked otherwise than chunking whole.)
  tool_calls as (
    select x.*,
           max(x.seq) filter (where x.kind = 'tool_call')
             over (partition by x.agent_id, x.session_id, x.tool_use_id order by x.seq) as id_call_seq
    from turns x
  ),
  tools as (
    select x.*,
           string_agg(x.content, E'\n') filter (where x.kind = 'tool_result') over i as id_results,
           array_agg(x.message_id) filter (where x.kind = 'tool_result') over i as id_result_ids,
           max(x.importance) filter (where x.kind = 'tool_result') over i as id_result_importance,
           (array_agg(x.metadata) filter (where x.kind = 'tool_result') over i)[1] as id_result_metadata
    from tool_calls x
    window i as (partition by x.agent_id, x.session_id, x.tool_use_id, x.id_call_seq)
  ),
  -- one row per chunk before windowing: its anchor message, members and full text
  units as (
    -- turn pairs, anchored at the question
    select a.agent_id, a.session_id, 'turn_pair'::text as kind, a.turn_seq as first_seq,
           array[a.q_id, a.message_id] as message_ids,
           coalesce(nullif(btrim(a.q_metadata->>'speaker'), ''), nullif(btrim(a.q_metadata->>'author'), ''), initcap(a.q_role)) || ': ' || a.q_content || E'\n\n'
             || coalesce(nullif(btrim(a.metadata->>'speaker'), ''), nullif(btrim(a.metadata->>'author'), ''), initcap(a.role)) || ': ' || a.content as body,
           a.q_created_at as created_at, greatest(a.q_importance, a.importance) as importance,
           a.q_metadata || a.metadata as metadata, null::text[] as speakers, null::int[] as lens
    from tools a
    where a.seq = a.answer_seq and not a.windowed
    union all
    -- windows
    select w.agent_id, w.session_id, 'window', w.first_seq, w.message_ids, w.body, w.created_at,
           w.importance, w.metadata, w.speakers, w.lens
    from windows w
    where (w.text_i - 1) % win_stride = 0
      and (w.text_i = 1 or w.text_i + win_size - win_stride <= w.text_n)
    union all
    -- text messages that pair with nothing
    select m.agent_id, m.session_id, 'message', m.seq, array[m.message_id],
           coalesce(nullif(btrim(m.metadata->>'speaker'), ''), nullif(btrim(m.metadata->>'author'), ''), initcap(m.role)) || ': ' || m.content, m.created_at, m.importance, m.metadata,
           null, null
    from tools m
    where m.kind = 'text' and not m.windowed
      and not (m.answer_seq is not null
               and (m.seq = m.answer_seq or (m.role = 'user' and m.seq = m.turn_seq)))
    union all
    -- thinking
    select m.agent_id, m.session_id, 'thinking', m.seq, array[m.message_id], m.content,
           m.created_at, m.importance, m.metadata, null, null
    from tools m
    where m.kind = 'thinking'
    union all
    -- tool calls with their results: by tool_use_id, else the result just after the call
    select c.agent_id, c.session_id, 'tool', c.seq,
           case when c.tool_use_id is not null then array[c.message_id] || coalesce(c.id_result_ids, '{}')
                when c.next_kind = 'tool_result' and not c.next_has_id then array[c.message_id, c.next_id]
                else array[c.message_id] end,
           c.content || coalesce(E'\n\nResult:\n' ||
             case when c.tool_use_id is not null then c.id_results
                  when c.next_kind = 'tool_result' and not c.next_has_id then c.next_content end, ''),
           c.created_at,
           greatest(c.importance, coalesce(case when c.tool_use_id is not null then c.id_result_importance
                                                when not c.next_has_id then c.next_importance end, 0)),
           c.metadata || coalesce(case when c.tool_use_id is not null then c.id_result_metadata
                                       when c.next_kind = 'tool_result' and not c.next_has_id
                                       then c.next_metadata end, '{}'),
           null, null
    from tools c
    where c.kind = 'tool_call'
    union all
    -- tool results no call claims
    select r.agent_id, r.session_id, 'tool', r.seq, array[r.message_id], E'Result:\n' || r.content,
           r.created_at, r.importance, r.metadata, null, null
    from tools r
    where r.kind = 'tool_result'
      and not coalesce(case when r.tool_use_id is not null then r.id_call_seq is not null
                            else r.prev_kind = 'tool_call' and not r.prev_has_id end, false)
  ),
  -- fenced code blocks: the odd pieces of a text split at ``` fences
  code_units as (
    select m.agent_id, m.session_id, 'code'::text as kind, m.seq as first_seq, array[m.message_id] as message_ids,
           ltrim(right(f.pieces[i - 1], (select code_chars from conf)), E' \t\r\n')
             || '```' || f.pieces[i] || '```' as body,
           m.created_at, m.importance, m.metadata, (i / 2 - 1) as part
    from msgs m
    cross join lateral (select regexp_split_to_array(m.content, '```') as pieces) f
    cross join lateral generate_series(2, cardinality(f.pieces), 2) as i
    where m.kind = 'text' and m.content like '%```%```%'
      and btrim(f.pieces[i], E' \t\r\n') <> ''
  ),
  -- every chunk, long bodies windowed; code blocks are numbered, not windowed
  -- (a part of a window after the first that starts inside a message is headed by that
  -- message's speaker: every speaker of a chat chunk is named in its text)
  derived as (
    select u.agent_id, u.session_id, u.kind, u.first_seq, w.part,
           case when p.members is null then u.message_ids
                else array(select u.message_ids[i] from unnest(p.members) as i) end as message_ids,
           case when w.part > 0 and u.speakers is not null
                then coalesce(recall._window_part_speaker(
                       u.speakers, u.lens, w.part * (conf.max_chars - conf.overlap_chars)) || ': ', '')
                else '' end || w.content as content,
           u.created_at, u.importance,
           -- a part of a long window lists the messages it holds, and has the first one's keys
           case when p.members is null then u.metadata
                else ((u.metadata->'messages'->(p.members[1] - 1)) - '{seq,external_id}'::text[])
                     || jsonb_build_object('messages', (select jsonb_agg(u.metadata->'messages'->(i - 1) order by i)
                                                        from unnest(p.members) as i))
           end as metadata
    from units u
    cross join conf
    cross join lateral recall._split_windows(u.body, conf.max_chars, conf.overlap_chars) w
    -- (a window cut into parts: char_length(body) > max_chars, as _split_windows decides)
    cross join lateral (
      select case when u.speakers is not null and char_length(u.body) > conf.max_chars
                  then nullif(recall._window_part_members(
                         u.lens, w.part * (conf.max_chars - conf.overlap_chars), char_length(w.content)), '{}')
             end as members
    ) p
    union all
    select c.agent_id, c.session_id, c.kind, c.first_seq, c.part, c.message_ids, c.body,
           c.created_at, c.importance, c.metadata
    from code_units c
  ),
  -- the row each chunk gets: agent and session facts folded into its metadata for filtering
  rows_ as (
    select s.agent_id, d.session_id, d.kind, d.first_seq, d.part, d.message_ids, d.content,
           greatest(1, ceil(char_length(d.content) / 4.0))::int as n_tokens, d.created_at, d.importance,
           s.metadata || jsonb_strip_nulls(jsonb_build_object('project', s.project, 'branch', s.branch))
             || d.metadata as metadata
    from derived d
    join recall.sessions s on s.agent_id = d.agent_id and s.session_id = d.session_id
  ),
  -- chunks of the redone range that are derived no more (summaries and curated memories are
  -- not derived from messages: never deleted here). NOT IN over an uncorrelated list, not NOT
  -- EXISTS: the generic plan expects a few rows and made NOT EXISTS a nested-loop anti join,
  -- quadratic in the chunks redone (1.4 s of 1.7 s for a 5,000-message session); NOT IN is a
  -- hashed subplan (no column of the list is ever null)
  removed as (
    delete from recall.chunks c
    using affected a
    where c.agent_id = a.agent_id and c.session_id = a.session_id and c.first_seq >= a.from_seq
      and c.kind not in ('summary', 'memory')
      and (c.agent_id, c.session_id, c.kind, c.first_seq, c.part) not in
          (select r.agent_id, r.session_id, r.kind, r.first_seq, r.part from rows_ r)
    returning 1
  ),
  written as (
    insert into recall.chunks as c
      (agent_id, session_id, kind, first_seq, part, message_ids, content, n_tokens,
       created_at, importance, metadata)
    select agent_id, session_id, kind, first_seq, part, message_ids, content, n_tokens,
           created_at, importance, metadata
    from rows_
    on conflict (agent_id, session_id, kind, first_seq, part) do update
      set message_ids     = excluded.message_ids,
          content         = excluded.content,
          created_at      = excluded.created_at,
          -- an importance set by hand (recall.set_importance) is kept
          importance      = case when c.importance_set_at is null then excluded.importance
                                 else c.importance end,
          metadata        = excluded.metadata,
          -- same text: keep the embedding and the exact token count; new text: pending again
          n_tokens        = case when c.content = excluded.content then c.n_tokens else excluded.n_tokens end,
          embedding       = case when c.content = excluded.content then c.embedding end,
          embedding_model = case when c.content = excluded.content then c.embedding_model end,
          embedded_at     = case when c.content = excluded.content then c.embedded_at end,
          embed_attempts  = case when c.content = excluded.content then c.embed_attempts else 0 end,
          embed_error     = case when c.content = excluded.content then c.embed_error end,
          embed_after     = case when c.content = excluded.content then c.embed_after end
      where (c.message_ids, c.content, c.created_at, c.metadata)
            is distinct from
            (excluded.message_ids, excluded.content, excluded.created_at, excluded.metadata)
         or (c.importance_set_at is null and c.importance is distinct from excluded.importance)
    returning 1
  )
  select (select count(*) from written) + (select count(*) from removed) into changed;
  return changed;
end
$$;

-- _redo_from: where the chunks of a session may change when messages at or after seq change:
-- the start of the turn holding seq (a turn pair is anchored there), or seq itself. In a chat
-- session (windows) the start of the first window that can hold a text message at or after
-- seq: windows start every window_stride text messages from the session's first, so appending
-- to a long chat redoes its last windows, not the whole session.
create or replace function recall._redo_from(p_agent_id text, p_session_id text, p_seq int)
returns int
language plpgsql stable
set search_path to pg_catalog, pg_temp
as $$
declare
  win_size int;
  win_stride int;
  k0 int;          -- text messages before p_seq (numbered 1..k0)
  t_min int;       -- the first window that can change starts at text message number t_min
  start_seq int;
begin
  if (select s.metadata->>'chunking' from recall.sessions s
      where s.agent_id = p_agent_id and s.session_id = p_session_id) is distinct from 'window' then
    return coalesce(
      (select max(m.seq) from recall.messages m
       where m.agent_id = p_agent_id and m.session_id = p_session_id and m.seq <= p_seq
         and m.role = 'user' and m.kind = 'text'),
      p_seq);
  end if;
  win_size := coalesce((select value::int from recall.config where key = 'window_messages'), 4);
  win_stride := coalesce((select value::int from recall.config where key = 'window_stride'), 2);
  select count(*) into k0
  from recall.messages m
  where m.agent_id = p_agent_id and m.session_id = p_session_id and m.seq < p_seq and m.kind = 'text';
  -- a window starting at text message t holds t .. t + win_size - 1: those starting before
  -- t_min end before message k0 + 1 and stay as they are
  t_min := 1 + win_stride * ((greatest(0, k0 - win_size + 1) + win_stride - 1) / win_stride);
  if t_min <= 1 then
    return -2147483648;        -- from the session's start
  elsif t_min > k0 then
    return p_seq;              -- (windows that do not overlap) no earlier window can change
  end if;
  select m.seq into start_seq
  from recall.messages m
  where m.agent_id = p_agent_id and m.session_id = p_session_id and m.seq < p_seq and m.kind = 'text'
  order by m.seq desc
  offset k0 - t_min limit 1;
  return least(p_seq, start_seq);
end
$$;

-- _messages_after_insert: chunk what a statement inserted, once per statement (COPY-friendly)
create or replace function recall._messages_after_insert()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  changed bigint;
begin
  with firsts as (
    select n.agent_id, n.session_id, min(n.seq) as min_seq
    from new_rows n
    group by n.agent_id, n.session_id
  ),
  -- a result arriving later reopens the call it answers, or the call just before it
  reopened as (
    select n.agent_id, n.session_id, min(c.seq) as call_seq
    from new_rows n
    join recall.messages c on c.agent_id = n.agent_id and c.session_id = n.session_id
     and c.kind = 'tool_call' and c.seq < n.seq
     and (c.metadata->>'tool_use_id' = n.metadata->>'tool_use_id'
          or (not n.metadata ? 'tool_use_id'
              and c.seq = (select max(p.seq) from recall.messages p
                           where p.agent_id = n.agent_id and p.session_id = n.session_id
                             and p.seq < n.seq)))
    where n.kind = 'tool_result'
    group by n.agent_id, n.session_id
  ),
  plan as (
    select f.agent_id, f.session_id,
           recall._redo_from(f.agent_id, f.session_id, least(f.min_seq, r.call_seq,
             (select max(p.seq) from recall.messages p
              where p.agent_id = f.agent_id and p.session_id = f.session_id
                and p.seq < f.min_seq))) as from_seq
    from firsts f
    left join reopened r using (agent_id, session_id)
  ),
  -- sessions span their messages
  spans as (
    update recall.sessions s
       set started_at = least(s.started_at, x.first_at),
           ended_at   = greatest(s.ended_at, x.last_at)
      from (select agent_id, session_id, min(created_at) as first_at, max(created_at) as last_at
            from new_rows group by agent_id, session_id) x
     where s.agent_id = x.agent_id and s.session_id = x.session_id
       and (s.started_at > x.first_at or s.ended_at is null or s.ended_at < x.last_at)
  )
  select recall._rechunk(array_agg(agent_id), array_agg(session_id), array_agg(from_seq)) into changed
  from plan;

  if changed > 0 then
    perform pg_notify('recall_chunks', 'pending');
  end if;
  return null;
end
$$;

-- _messages_after_change: rechunk after an UPDATE or DELETE of messages
create or replace function recall._messages_after_change()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  changed bigint;
begin
  select recall._rechunk(array_agg(o.agent_id), array_agg(o.session_id),
                         array_agg(recall._redo_from(o.agent_id, o.session_id, o.min_seq)))
    into changed
  from (select agent_id, session_id, min(seq) as min_seq from old_rows group by agent_id, session_id) o;
  if changed > 0 then
    perform pg_notify('recall_chunks', 'pending');
  end if;
  return null;
end
$$;

-- _messages_after_update: _messages_after_change for the sessions of the messages an UPDATE
-- changed other than in their token counts (011-message-tokens): the embed worker's count of a
-- message re-derives no chunk
create or replace function recall._messages_after_update()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  changed bigint;
begin
  select recall._rechunk(array_agg(o.agent_id), array_agg(o.session_id),
                         array_agg(recall._redo_from(o.agent_id, o.session_id, o.min_seq)))
    into changed
  from (select o.agent_id, o.session_id, min(o.seq) as min_seq
        from old_rows o
        join new_rows n on n.agent_id = o.agent_id and n.message_id = o.message_id
        where to_jsonb(n) - '{n_tokens,date_tokens,embedding}'::text[]
              is distinct from to_jsonb(o) - '{n_tokens,date_tokens,embedding}'::text[]
        group by o.agent_id, o.session_id) o;
  if changed > 0 then
    perform pg_notify('recall_chunks', 'pending');
  end if;
  return null;
end
$$;

-- _sessions_after_update: a session's project, branch or metadata live in its chunks' metadata
create or replace function recall._sessions_after_update()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  agents text[];
  changed text[];
begin
  select array_agg(n.agent_id), array_agg(n.session_id) into agents, changed
  from new_rows n
  join old_rows o using (agent_id, session_id)
  where (n.project, n.branch, n.metadata) is distinct from (o.project, o.branch, o.metadata);
  -- most updates (an upsert of a session that is already there) change none of these
  if changed is not null then
    perform recall._rechunk(agents, changed, array_fill(-2147483648, array[cardinality(changed)]));
  end if;
  return null;
end
$$;

drop trigger if exists messages_before_insert on recall.messages;
create trigger messages_before_insert before insert on recall.messages
  for each row execute function recall._message_before_insert();

drop trigger if exists messages_before_update on recall.messages;
create trigger messages_before_update before update on recall.messages
  for each row execute function recall._message_before_update();

drop trigger if exists messages_after_insert on recall.messages;
create trigger messages_after_insert after insert on recall.messages
  referencing new table as new_rows
  for each statement execute function recall._messages_after_insert();

drop trigger if exists messages_after_update on recall.messages;
create trigger messages_after_update after update on recall.messages
  referencing old table as old_rows new table as new_rows
  for each statement execute function recall._messages_after_update();

drop trigger if exists messages_after_delete on recall.messages;
create trigger messages_after_delete after delete on recall.messages
  referencing old table as old_rows
  for each statement execute function recall._messages_after_change();

drop trigger if exists sessions_before_update on recall.sessions;
create trigger sessions_before_update before update on recall.sessions
  for each row execute function recall._session_before_update();

drop trigger if exists sessions_after_update on recall.sessions;
create trigger sessions_after_update after update on recall.sessions
  referencing old table as old_rows new table as new_rows
  for each statement execute function recall._sessions_after_update();

-- _rechunk_pending: chunks derived by an older chunker. A run-once migration that changes how
-- chunks are derived records in recall.config 'rechunk_pending' a JSON object (or an array of
-- them), and the sessions whose metadata contains it (one of them) are chunked again, by the
-- functions just defined (migrations run before this file: the old _rechunk would redo them the
-- old way); the key is removed. Chunks whose text changes are embedded again; the others keep
-- their embedding. The number of chunks written or removed. Called below, at every migrate (on
-- a Citus cluster after sql/citus/distribute.sql's steps: pyrecall/_migrate.py).
create or replace function recall._rechunk_pending()
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  which jsonb := (select value from recall.config where key = 'rechunk_pending');
  marks jsonb[];
  agents text[];
  ids text[];
  changed bigint := 0;
begin
  if which is null then
    return 0;
  end if;
  -- (the marks first, in a statement of their own: Citus does not join a distributed table
  -- with a set-returning function of a variable)
  marks := array(select jsonb_array_elements(case jsonb_typeof(which) when 'array' then which
                                                  else jsonb_build_array(which) end));
  select array_agg(s.agent_id), array_agg(s.session_id) into agents, ids
  from recall.sessions s
  where s.metadata @> any (marks);
  if ids is not null then
    changed := recall._rechunk(agents, ids, array_fill(-2147483648, array[cardinality(ids)]));
    if changed > 0 then
      perform pg_notify('recall_chunks', 'pending');
    end if;
  end if;
  delete from recall.config where key = 'rechunk_pending';
  return changed;
end
$$;

select recall._rechunk_pending();
