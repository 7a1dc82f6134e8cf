-- sql/released/v5.sql: release 5: hybrid_recall_v5, session_recall_v5. v4's ranking; with a
-- token_budget, the context filled skip-and-continue, overlapping or adjacent chat chunks of a
-- session merged into one passage, and a best chunk larger than the budget trimmed to fit.
-- Never edit: the file's SHA-256 is pinned in sql/frozen.txt and `make lint`
-- (python -m pyrecall._sqlcheck) fails when it changes or when a function here reaches one that
-- is neither in this file, an older release, shared.sql nor sql/released/shared.txt.
-- sql/README.md says how a new version is released. auto_context has no v5: the stable
-- auto_context still calls auto_context_v4.
--
-- What v5 changes (issue 19: an agent pays for a context in tokens), with token_budget only:
--   * skip-and-continue: a chunk that does not fit in what is left is skipped and the fill
--     goes on with the next that does (v1-v4 stopped at the first that did not fit);
--   * passages: chat chunks of one session that overlap or touch are merged into one passage,
--     each message paid for once (recall._fill_v5, recall._passage_text_v5);
--   * when even the best chunk exceeds the whole budget it is returned trimmed to fit
--     (recall._trim_v5) instead of nothing.
-- Without token_budget the rows are v4's: same ids, order, scores and columns
-- (tests/test_recall_v5.py). The ranking, its arguments and their checks are v4's: the bodies
-- call v4's pinned functions (recall._hybrid_recall_v4, recall.session_recall_v4). The stable
-- names hybrid_recall and session_recall (sql/idempotent/080-stable-names.sql) call v5.

-- _trim_v5: a chunk cut to fit p_budget tokens, keeping its beginning (a window or turn pair
-- loses its last messages first, and the message at the cut is trimmed). The kept characters
-- are the chunk's share p_budget / p_n_tokens of its characters, cut back to the end of the
-- last whole word when the cut falls inside one (inside the word when that would lose more
-- than half of them: text without spaces, one long token). n_tokens of the result: the chunk's n_tokens
-- scaled by the share of its characters kept, rounded up (so at most p_budget; the model's
-- exact count of the cut text is not known in SQL). message_ids: the messages whose first 40
-- characters are in the kept text (the first of the chunk when none is). No row when nothing
-- is kept (a budget too small for one word).
create or replace function recall._trim_v5(
  p_content text, p_n_tokens int, p_message_ids bigint[], p_budget int)
returns table (content text, n_tokens int, message_ids bigint[])
language sql stable
set search_path to pg_catalog, public, pg_temp
as $$
  with
  cut as (
    select left(p_content, floor(char_length(p_content)::numeric * p_budget
                                 / greatest(p_n_tokens, 1))::int) as raw
  ),
  kept as (
    select rtrim(case when char_length(c.raw) < char_length(p_content)
                       and substr(p_content, char_length(c.raw) + 1, 1) !~ '\s'
                       and char_length(regexp_replace(c.raw, '\S*$', '')) >= char_length(c.raw) / 2
                      then regexp_replace(c.raw, '\S*$', '')
                      else c.raw end) as text
    from cut c
  ),
  ids as (
    select array_agg(u.id order by u.i) as found
    from kept k
    cross join unnest(p_message_ids) with ordinality as u(id, i)
    join recall.messages m on m.message_id = u.id
    where strpos(k.text, left(m.content, 40)) > 0
  )
  select k.text,
         greatest(1, ceil(p_n_tokens::numeric * char_length(k.text) / char_length(p_content)))::int,
         case when p_message_ids is null then null
              else coalesce((select found from ids), p_message_ids[1:1]) end
  from kept k
  where k.text <> '' and p_budget >= 1
$$;

-- _passage_text_v5: the text of a passage (messages of one session, merged from chunks that
-- overlap or touch), written as the chunker writes a chat chunk (sql/idempotent/010: each
-- message as "Speaker: text", blank lines between), headed by the date of its first message
-- when p_dated (a passage made of chat windows, which start with theirs).
create or replace function recall._passage_text_v5(p_message_ids bigint[], p_dated boolean)
returns text
language sql stable
set search_path to pg_catalog, public, pg_temp
as $$
  select case when p_dated
              then coalesce('[' || to_char(min(m.created_at) at time zone 'UTC', 'FMDD FMMonth YYYY')
                            || E']\n', '')
              else '' end
         || string_agg(coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                                nullif(btrim(m.metadata->>'author'), ''), initcap(m.role))
                       || ': ' || m.content, E'\n\n' order by m.seq)
  from recall.messages m
  where m.message_id = any (p_message_ids)
$$;

-- _fill_v5: the context at p_budget tokens from chunks ranked best first (p_ids): v5's fill
-- (hybrid_recall_v5's COMMENT gives the contract). One row per passage, in the rank of its
-- best chunk (chunk_id): its text, n_tokens and message_ids (NULL where they are the chunk's
-- own), the chunks merged into it (merged, NULL for one), trimmed_from (the n_tokens of a
-- trimmed chunk) and the running token total.
create or replace function recall._fill_v5(p_ids bigint[], p_budget int)
returns table (chunk_id bigint, pos int, content text, n_tokens int, message_ids bigint[],
               merged bigint[], trimmed_from int, cumulative_tokens bigint)
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
declare
  c record;
  t record;
  np int := 0;                    -- passages so far
  p_seed bigint[] := '{}';        -- per passage: its best chunk
  p_session text[] := '{}';
  p_lo int[] := '{}';             -- the seq range of its messages (chat passages)
  p_hi int[] := '{}';
  p_text text[] := '{}';          -- its text when it is no chunk's own (merged or trimmed)
  p_tokens int[] := '{}';
  p_ratio float8[] := '{}';       -- tokens per character of its best chunk
  p_chat boolean[] := '{}';       -- may take in overlapping or adjacent chunks
  p_dated boolean[] := '{}';
  p_alive boolean[] := '{}';
  p_trimmed int[] := '{}';
  p_ids_own bigint[] := '{}';     -- message ids of a trimmed chunk, in order (one trimmed at most)
  held bigint[] := '{}';          -- the message ids of chat passages, and which passage holds each
  held_p int[] := '{}';
  held_seq int[] := '{}';
  mch bigint[] := '{}';           -- the chunks merged into chat passages, and which holds each
  mch_p int[] := '{}';
  used bigint := 0;
  first_row boolean := true;
  is_chat boolean;
  c_lo int; c_hi int;
  c_seqs int[];
  joined int[];
  target int;
  all_ids bigint[];
  new_text text;
  new_tokens int;
  old_tokens bigint;
begin
  if p_budget is null or p_budget < 1 then
    return;
  end if;
  for c in
    select ch.chunk_id, ch.session_id, ch.kind, ch.content, ch.n_tokens, ch.message_ids,
           ch.kind in ('window', 'turn_pair', 'message') and ch.part = 0
           and cardinality(ch.message_ids) > 0
           and not exists (select from recall.chunks o
                           where o.session_id = ch.session_id and o.kind = ch.kind
                             and o.first_seq = ch.first_seq and o.part > 0) as chat
    from unnest(p_ids) with ordinality as u(id, ord)
    join recall.chunks ch on ch.chunk_id = u.id
    order by u.ord
  loop
    -- the best chunk alone exceeds the budget: trimmed to fit
    if first_row and c.n_tokens > p_budget then
      first_row := false;
      select * into t from recall._trim_v5(c.content, c.n_tokens, c.message_ids, p_budget);
      if found then
        np := np + 1;
        p_seed[np] := c.chunk_id; p_session[np] := c.session_id; p_text[np] := t.content;
        p_tokens[np] := t.n_tokens; p_chat[np] := false; p_alive[np] := true;
        p_trimmed[np] := c.n_tokens; p_ids_own := t.message_ids;
        held := held || t.message_ids;
        held_p := held_p || array_fill(np, array[cardinality(t.message_ids)]);
        used := used + t.n_tokens;
      end if;
      continue;
    end if;
    first_row := false;
    is_chat := c.chat;
    if is_chat then
      select array_agg(m.seq order by m.seq), min(m.seq), max(m.seq)
        into c_seqs, c_lo, c_hi
      from recall.messages m where m.message_id = any (c.message_ids);
      is_chat := coalesce(cardinality(c_seqs), 0) = cardinality(c.message_ids);
    end if;
    if not is_chat then
      -- a code block whose message the context holds already adds nothing
      if c.kind = 'code' and c.message_ids <@ held then
        continue;
      end if;
      if used + c.n_tokens <= p_budget then
        np := np + 1;
        p_seed[np] := c.chunk_id; p_session[np] := c.session_id; p_tokens[np] := c.n_tokens;
        p_chat[np] := false; p_alive[np] := true;
        used := used + c.n_tokens;
      end if;
      continue;
    end if;
    -- a chat chunk: nothing new (all its messages held) is skipped; one that overlaps or
    -- touches passages of its session is merged with them into one passage
    if c.message_ids <@ held then
      continue;
    end if;
    select array_agg(i order by i) into joined
    from generate_subscripts(p_seed, 1) as i
    where p_alive[i] and p_chat[i] and p_session[i] = c.session_id
      and p_lo[i] <= c_hi + 1 and c_lo <= p_hi[i] + 1;
    if joined is null then
      if used + c.n_tokens <= p_budget then
        np := np + 1;
        p_seed[np] := c.chunk_id; p_session[np] := c.session_id; p_lo[np] := c_lo; p_hi[np] := c_hi;
        p_tokens[np] := c.n_tokens; p_ratio[np] := c.n_tokens::float8 / greatest(char_length(c.content), 1);
        p_chat[np] := true; p_dated[np] := c.kind = 'window'; p_alive[np] := true;
        held := held || c.message_ids;
        held_p := held_p || array_fill(np, array[cardinality(c.message_ids)]);
        mch := mch || c.chunk_id; mch_p := mch_p || np;
        used := used + c.n_tokens;
      end if;
      continue;
    end if;
    target := joined[1];
    select array_agg(distinct x) into all_ids
    from (select h.id as x from unnest(held, held_p) as h(id, p) where h.p = any (joined)
          union select unnest(c.message_ids)) y;
    new_text := recall._passage_text_v5(
      all_ids, c.kind = 'window' or (select bool_or(p_dated[j]) from unnest(joined) j));
    new_tokens := greatest(1, ceil(char_length(new_text) * p_ratio[target]))::int;
    select sum(p_tokens[j]) into old_tokens from unnest(joined) j;
    if used - old_tokens + new_tokens > p_budget then
      continue;
    end if;
    used := used - old_tokens + new_tokens;
    p_text[target] := new_text; p_tokens[target] := new_tokens;
    p_lo[target] := least(c_lo, (select min(p_lo[j]) from unnest(joined) j));
    p_hi[target] := greatest(c_hi, (select max(p_hi[j]) from unnest(joined) j));
    p_dated[target] := c.kind = 'window' or (select bool_or(p_dated[j]) from unnest(joined) j);
    for i in 2 .. cardinality(joined) loop
      p_alive[joined[i]] := false;
    end loop;
    held_p := (select array_agg(case when h.p = any (joined) then target else h.p end order by h.o)
               from unnest(held_p) with ordinality as h(p, o));
    mch_p := (select array_agg(case when h.p = any (joined) then target else h.p end order by h.o)
              from unnest(mch_p) with ordinality as h(p, o));
    held := held || array(select unnest(c.message_ids) except select unnest(held));
    held_p := held_p || array_fill(target, array[cardinality(held) - cardinality(held_p)]);
    mch := mch || c.chunk_id; mch_p := mch_p || target;
  end loop;

  return query
  select p_seed[i],
         (row_number() over (order by i))::int,
         p_text[i],
         p_tokens[i],
         case when p_trimmed[i] is not null then p_ids_own
              when p_text[i] is null then null
              else (select array_agg(m.message_id order by m.seq)
                    from recall.messages m
                    where m.message_id = any (array(select h.id from unnest(held, held_p) as h(id, p)
                                                   where h.p = i))) end,
         case when p_text[i] is not null and p_trimmed[i] is null
              then array(select x.id from unnest(mch, mch_p) with ordinality as x(id, p, o)
                         where x.p = i order by x.o) end,
         p_trimmed[i],
         sum(p_tokens[i]) over (order by i rows unbounded preceding)::bigint
  from generate_series(1, np) as i
  where p_alive[i]
  order by i;
end
$$;

-- hybrid_recall_v5: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v5(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  token_budget       int         default null,
  exclude_session_id text        default null,
  min_similarity     float8      default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  vector_weight      float8      default 0.5,
  text_weight        float8      default 0.5,
  recency_weight     float8      default 0.025,
  importance_weight  float8      default 0.05,
  half_life          interval    default '30 days',
  candidates         int         default 100,
  as_of              timestamptz default null,
  dedup_similarity   float8      default 0.95,
  turns_per_session  int         default null)
returns setof recall.recall_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
begin
  if token_budget is null then
    return query select * from recall._hybrid_recall_v4(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null);
    return;
  end if;
  if token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', token_budget using errcode = '22023';
  end if;
  -- v4's first k rows (ranked, de-duplicated), then the budget filled by recall._fill_v5
  return query
  with
  ranked as materialized (
    select r.*
    from recall._hybrid_recall_v4(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null)
      with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_v5((select array_agg(x.chunk_id order by x.ordinality) from ranked x), token_budget) f
  )
  select r.chunk_id, r.session_id, r.kind, coalesce(f.content, r.content), r.created_at, r.score,
         r.similarity, r.text_rank, r.recency, r.importance, f.n_tokens, f.cumulative_tokens,
         r.metadata || jsonb_strip_nulls(jsonb_build_object('merged_chunk_ids', to_jsonb(f.merged),
                                                            'trimmed_from_tokens', f.trimmed_from)),
         coalesce(f.message_ids, r.message_ids), r.memory_id, r.agent_id, r.session_title, r.role,
         r.memory_kind
  from filled f
  join ranked r on r.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.hybrid_recall_v5 is $c$
hybrid_recall v5: recall.hybrid_recall_v4 (see its comment: candidates, scores,
de-duplication, order, k, memories, filters, rows) with a better token budget fill.
token_budget: v4's first k rows are taken in their order into a context of at most
token_budget tokens (sum of n_tokens), one row per passage:
  * skip-and-continue: a row that does not fit in what is left is skipped and the fill goes
    on with the next (v1-v4 stopped at the first that did not fit);
  * passages: a chat chunk (window, turn pair or message, not a part of a longer one) that
    overlaps or touches (adjacent seq) a passage of its session already in the context is
    merged into it: the passage's text is rewritten from its messages in order (as the chunker
    writes them: "Speaker: text", a window's date first), so no message is paid twice; its
    n_tokens is its text's characters times its best chunk's tokens per character, rounded
    up; the merge is made when the passage's growth fits. The row is that of the passage's
    best chunk (its id, score, place), with the passage's content, n_tokens and message_ids
    (in seq order), and metadata.merged_chunk_ids (the chunks in it, in rank order). A chunk
    whose messages the context holds already (a chat chunk, or a code block of a held
    message) is skipped.
  * trim: when the best row alone exceeds the whole budget it is returned trimmed to fit
    instead of nothing: its beginning, the budget's share of its characters cut back to a
    whole word (unless that loses more than half of them); n_tokens its own n_tokens scaled by the share of characters kept, rounded
    up; message_ids the messages whose first 40 characters are in the kept text;
    metadata.trimmed_from_tokens the untrimmed n_tokens.
cumulative_tokens runs over the rows returned. Without token_budget the rows are v4's (k rows,
no merging).
$c$;

-- session_recall_v5: see the COMMENT below for the contract
create or replace function recall.session_recall_v5(
  agent_id           text,
  query_text         text        default null,
  query_embedding    vector      default null,
  k                  int         default 10,
  n_sessions         int         default 10,
  token_budget       int         default null,
  exclude_session_id text        default null,
  filter             jsonb       default null,
  kinds              text[]      default null,
  since              timestamptz default null,
  until              timestamptz default null,
  half_life          interval    default '30 days',
  as_of              timestamptz default null,
  candidates         int         default 200,
  summary_weight     float8      default 0.0,
  session_weight     float8      default 0.5,
  dedup_similarity   float8      default 0.95,
  vector_weight      float8      default 0.5,
  text_weight        float8      default 0.5,
  recency_weight     float8      default 0.025,
  importance_weight  float8      default 0.05,
  turns_per_session  int         default null)
returns setof recall.session_recall_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
begin
  if token_budget is null then
    return query select * from recall.session_recall_v4(
      agent_id, query_text, query_embedding, k, n_sessions, null, exclude_session_id,
      filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
      dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
      turns_per_session);
    return;
  end if;
  if token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', token_budget using errcode = '22023';
  end if;
  return query
  with
  ranked as materialized (
    select r.*
    from recall.session_recall_v4(
      agent_id, query_text, query_embedding, k, n_sessions, null, exclude_session_id,
      filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
      dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
      turns_per_session) with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_v5((select array_agg(x.chunk_id order by x.ordinality) from ranked x), token_budget) f
  )
  select r.chunk_id, r.session_id, r.kind, coalesce(f.content, r.content), r.created_at, r.score,
         r.similarity, r.text_rank, r.recency, r.importance, f.n_tokens, f.cumulative_tokens,
         r.metadata || jsonb_strip_nulls(jsonb_build_object('merged_chunk_ids', to_jsonb(f.merged),
                                                            'trimmed_from_tokens', f.trimmed_from)),
         coalesce(f.message_ids, r.message_ids), r.session_rank, r.session_score, r.memory_id,
         r.agent_id, r.session_title, r.role, r.memory_kind
  from filled f
  join ranked r on r.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.session_recall_v5 is $c$
session_recall v5: recall.session_recall_v4 (see its comment) with v5's token budget fill
(recall.hybrid_recall_v5's comment): v4's first k rows, in their order, into at most
token_budget tokens; a row that does not fit is skipped and the fill goes on; chat chunks
that overlap or touch one of their session already in the context are merged into one passage
(no message paid twice; metadata.merged_chunk_ids); the best row, when it alone exceeds the
whole budget, is returned trimmed to fit (metadata.trimmed_from_tokens). Without token_budget
the rows are v4's.
$c$;
