-- sql/released/v8.sql: release 8: session_recall_v8. session_recall_v6's rows (its ranking,
-- order, security model and Citus compatibility); with a token_budget, each passage paid what the
-- embedding model counts. Never edit: the file's SHA-256 is pinned in sql/frozen.txt and `make
-- lint` (python -m pyrecall._sqlcheck) fails when it changes or when a function here reaches one
-- that is neither in this file, an older release, shared.sql nor sql/released/shared.txt.
-- sql/README.md says how a new version is released.
-- hybrid_recall stays v7 and auto_context v6 (it pays whole chunks their own n_tokens: no
-- estimate to replace).
--
-- Why (issue 19): v6's fill (v5's) merges the overlapping or adjacent chat chunks of a session
-- into one passage and pays for it an estimate, its characters times the tokens per character
-- of its best chunk. By the model's count that estimate was wrong for 93% of the merged
-- passages of the dev split (by up to 94 tokens too few), and 3-18% of session_recall's
-- contexts held more tokens than their budget (up to 7 / 49 / 62 / 136 at 250 / 500 / 1000 /
-- 2000: bench/results/2026-11-27/locomo_dev_fp32_epyc.json). v8 pays a merged passage the sum
-- of its turns' recall.messages.n_tokens plus its first turn's date_tokens when it is dated, as
-- hybrid_recall_v7 pays its passages (sql/incremental/011-message-tokens.sql: the model's counts
-- of exactly the text a passage holds, recorded by the embed worker; estimated, four characters
-- a token, until then), and writes the passage's text as v7 does (recall._passage_text_v7: the
-- date line is the first turn's; v6 took the earliest message's, the same in a session's seq
-- order). A chunk trimmed because it alone exceeds the budget is cut 2% (at least 2 tokens)
-- short of it: its kept text is still paid an estimate. Whole chunks are paid their own
-- n_tokens, as in v6. The ranking, the order (session by session), the arguments and their
-- checks are v6's (recall._session_recall_v6).
--
-- Security and Citus as v6 (sql/released/v6.sql's header): the search runs as the owner in
-- recall._recall_arms_v6 after recall._check_reader_v6; the fill runs as the caller, under
-- row-level security, reading chunks and messages by primary key with the agent named in every
-- table reference, in PL/pgSQL (Citus plans it on the agent's worker).

-- _passage_tokens_v8: what a passage of turns (message ids of one session) costs: the sum of
-- its turns' n_tokens ("Speaker: text" and the blank line after it, by the embedding model),
-- plus the date line's date_tokens of its first turn when p_dated; a turn not counted yet is
-- estimated from the same text, four characters a token (as recall._fill_v7 does)
create or replace function recall._passage_tokens_v8(p_agent_id text, p_message_ids bigint[], p_dated boolean)
returns int
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
begin
  return (
  select greatest(1, sum(coalesce(m.n_tokens,
                                  ceil(char_length(coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                                                            nullif(btrim(m.metadata->>'author'), ''),
                                                            initcap(m.role))
                                                   || ': ' || m.content || E'\n\n') / 4.0)::int))
                     + case when p_dated
                            then (array_agg(coalesce(m.date_tokens::int,
                                                     ceil(char_length('[' || to_char(m.created_at at time zone 'UTC',
                                                                                     'FMDD FMMonth YYYY') || E']\n')
                                                          / 4.0)::int) order by m.seq))[1]
                            else 0 end)::int
  from recall.messages m
  where m.agent_id = p_agent_id and m.message_id = any (p_message_ids)
  );
end
$$;

-- _fill_v8: recall._fill_v6 (v5's fill: chunks best first, the overlapping or adjacent chat
-- chunks of a session merged into one passage, each message paid once, a chunk that does not
-- fit skipped, the first trimmed when it alone exceeds the budget) with a merged passage's text
-- from recall._passage_text_v7 and its tokens from recall._passage_tokens_v8
create or replace function recall._fill_v8(p_agent_id text, p_ids bigint[], p_budget int)
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
  new_dated boolean;
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
                           where o.agent_id = p_agent_id and o.session_id = ch.session_id and o.kind = ch.kind
                             and o.first_seq = ch.first_seq and o.part > 0) as chat
    from unnest(p_ids) with ordinality as u(id, ord)
    join recall.chunks ch on ch.chunk_id = u.id
    where ch.agent_id = p_agent_id
    order by u.ord
  loop
    -- the best chunk alone exceeds the budget: trimmed to fit. The kept text's tokens are
    -- estimated (the chunk's count times the share of its characters kept), so it is cut 2% (at
    -- least 2 tokens) short of the budget, room for the estimate's error: on the dev split the
    -- model counted up to 2 tokens more than the estimate of a trimmed chunk
    if first_row and c.n_tokens > p_budget then
      first_row := false;
      select * into t from recall._trim_v6(p_agent_id, c.content, c.n_tokens, c.message_ids,
                                           greatest(1, p_budget - greatest(2, ceil(p_budget * 0.02)::int)));
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
      from recall.messages m where m.agent_id = p_agent_id and m.message_id = any (c.message_ids);
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
        p_tokens[np] := c.n_tokens;
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
    new_dated := c.kind = 'window' or (select bool_or(p_dated[j]) from unnest(joined) j);
    new_text := recall._passage_text_v7(p_agent_id, all_ids, new_dated);
    new_tokens := recall._passage_tokens_v8(p_agent_id, all_ids, new_dated);
    select sum(p_tokens[j]) into old_tokens from unnest(joined) j;
    if used - old_tokens + new_tokens > p_budget then
      continue;
    end if;
    used := used - old_tokens + new_tokens;
    p_text[target] := new_text; p_tokens[target] := new_tokens;
    p_lo[target] := least(c_lo, (select min(p_lo[j]) from unnest(joined) j));
    p_hi[target] := greatest(c_hi, (select max(p_hi[j]) from unnest(joined) j));
    p_dated[target] := new_dated;
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
                    where m.agent_id = p_agent_id and m.message_id = any (array(select h.id from unnest(held, held_p) as h(id, p)
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

-- session_recall_v8: see the COMMENT below for the contract
create or replace function recall.session_recall_v8(
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
    return query select * from recall._session_recall_v6(
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
    from recall._session_recall_v6(
      agent_id, query_text, query_embedding, k, n_sessions, null, exclude_session_id,
      filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
      dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
      turns_per_session) with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_v8(session_recall_v8.agent_id,
                         (select array_agg(x.chunk_id order by x.ordinality) from ranked x),
                         token_budget) f
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

comment on function recall.session_recall_v8 is $c$
session_recall v8: recall.session_recall_v6 (see its comment, v5's and v4's: the pool, the
sessions ranked, k, n_sessions, rows, security) whose token budget pays each passage what the
embedding model counts. Without token_budget the rows are v6's.
token_budget: v6's rows in their order, filled as v5/v6 fill them: chunks taken best first while
the sum of n_tokens stays within token_budget (a chunk that does not fit is skipped and the fill
goes on; the first chunk, when it alone exceeds the budget, is trimmed to fit, with
metadata.trimmed_from_tokens); a chat chunk (window, turn pair or message, not a part of a
longer one) that overlaps or touches a passage of its session already taken is merged into it,
each message paid once (metadata.merged_chunk_ids: the chunks the passage holds; message_ids in
seq order). A merged passage is "Speaker: text" joined by blank lines, headed by the date line
"[D Month YYYY]" of its first turn when one of its chunks is a chat window, and its n_tokens is
the sum of its turns' recall.messages.n_tokens plus its first turn's date_tokens when dated (the
embedding model's counts of that text, recorded by the embed worker; until then estimated, four
characters a token); a whole chunk's is its own n_tokens. The sum of the rows' n_tokens never
exceeds token_budget; cumulative_tokens runs over the rows returned.
$c$;
