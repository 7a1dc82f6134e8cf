-- 060-recall-v5: recall v5 in development (sql/README.md, "Releasing a new version"):
-- hybrid_recall_v5 and session_recall_v5, v4's ranking with a better token budget fill.
--
-- What v5 changes (issue 19: an agent pays for a context in tokens):
--   * token_budget is filled skip-and-continue: a chunk that does not fit in what is left is
--     skipped and the fill goes on with the next one that does (v1-v4 stopped at the first
--     chunk that did not fit, leaving the rest of the budget unused);
--   * when even the best chunk exceeds the whole budget it is returned trimmed to fit
--     (recall._trim_v5) instead of nothing.
-- Without token_budget the rows are v4's: same ids, order, scores and columns
-- (tests/test_recall_v5.py). The ranking, its arguments and their checks are v4's: the bodies
-- call v4's pinned functions (recall._hybrid_recall_v4, recall.session_recall_v4).

-- _trim_v5: a chunk cut to fit p_budget tokens, keeping its beginning (a window or turn pair
-- loses its last messages first, and the message at the cut is trimmed). The kept characters
-- are the chunk's share p_budget / p_n_tokens of its characters, cut back to the end of the
-- last whole word when the cut falls inside one. n_tokens of the result: the chunk's n_tokens
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
                       and c.raw ~ '\s'
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
declare
  r recall.recall_row_v4;
  t record;
  used bigint := 0;
  best boolean := true;
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
  -- v4's first k rows (ranked, de-duplicated), then the budget filled skip-and-continue
  for r in select * from recall._hybrid_recall_v4(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null)
  loop
    if best and r.n_tokens > token_budget then
      select * into t from recall._trim_v5(r.content, r.n_tokens, r.message_ids, token_budget);
      if found then
        r.metadata := r.metadata || jsonb_build_object('trimmed_from_tokens', r.n_tokens);
        r.content := t.content;
        r.n_tokens := t.n_tokens;
        r.message_ids := t.message_ids;
      end if;
    end if;
    best := false;
    if used + r.n_tokens <= token_budget then
      used := used + r.n_tokens;
      r.cumulative_tokens := used;
      return next r;
    end if;
  end loop;
end
$$;

comment on function recall.hybrid_recall_v5 is $c$
hybrid_recall v5: recall.hybrid_recall_v4 (see its comment: candidates, scores,
de-duplication, order, k, memories, filters, rows) with a better token budget fill.
token_budget: of v4's first k rows, in their order, each is kept when its n_tokens fit in what
is left of the budget; one that does not fit is skipped and the fill goes on with the next
(v1-v4 stopped at the first that did not fit). When the best row alone exceeds the whole
budget it is returned trimmed to fit instead of nothing: its beginning, the budget's share of
its characters cut back to a whole word; its n_tokens is its own n_tokens scaled by the share
of characters kept, rounded up; its message_ids the messages whose first 40 characters are
in the kept text; its metadata gains trimmed_from_tokens (the untrimmed n_tokens).
cumulative_tokens runs over the rows returned. Without token_budget the rows are v4's.
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
declare
  r recall.session_recall_row_v4;
  t record;
  used bigint := 0;
  best boolean := true;
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
  for r in select * from recall.session_recall_v4(
      agent_id, query_text, query_embedding, k, n_sessions, null, exclude_session_id,
      filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
      dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
      turns_per_session)
  loop
    if best and r.n_tokens > token_budget then
      select * into t from recall._trim_v5(r.content, r.n_tokens, r.message_ids, token_budget);
      if found then
        r.metadata := r.metadata || jsonb_build_object('trimmed_from_tokens', r.n_tokens);
        r.content := t.content;
        r.n_tokens := t.n_tokens;
        r.message_ids := t.message_ids;
      end if;
    end if;
    best := false;
    if used + r.n_tokens <= token_budget then
      used := used + r.n_tokens;
      r.cumulative_tokens := used;
      return next r;
    end if;
  end loop;
end
$$;

comment on function recall.session_recall_v5 is $c$
session_recall v5: recall.session_recall_v4 (see its comment) with v5's token budget fill
(see recall.hybrid_recall_v5): of v4's first k rows, in their order, each is kept when it fits
in what is left and skipped when it does not; the best row, when it alone exceeds the whole
budget, is returned trimmed to fit (n_tokens scaled by the share of characters kept, rounded
up; metadata.trimmed_from_tokens). Without token_budget the rows are v4's.
$c$;
