-- sql/released/shared.sql: helpers that the released versions call, pinned with them.
-- Each is small and pure (the same answer for the same input), and a released version's
-- behaviour depends on it: a change of behaviour is a new helper with a suffix (as
-- recall._text_arm_v2 changed the text arm for v2), never an edit here.
--   _similarity, _recency    scalar arithmetic, the same in every version
--   _text_query              query text -> tsquery (v1; v2 and v3 plan their own)
--   _check_recall_args       the argument checks and their SQLSTATEs, one contract for all
--   _text_arm                v1's text arm (v2, v3: _text_arm_v2, _text_arm_v3)
--   _finish                  de-duplication, k and the token budget, the same in v1-v3
--   _is_failure              what a failure looks like, read by auto_context v1-v3
-- Never edit: the file's SHA-256 is pinned in sql/frozen.txt and `make lint`
-- (python -m pyrecall._sqlcheck) fails when it changes or when a function here reaches one that
-- is neither in this file, an older release, shared.sql nor sql/released/shared.txt.
-- sql/README.md says how a new version is released.

-- _similarity: cosine similarity of a stored chunk embedding and a query embedding; NULL when
-- either is missing or all zeros (cosine undefined: pgvector's <=> gives NaN, and a NaN score
-- would sort before every real one)
create or replace function recall._similarity(chunk_embedding vector, query_embedding vector)
returns float8
language sql immutable parallel safe
set search_path to pg_catalog, public, pg_temp
as $$
  select case when chunk_embedding is null or query_embedding is null then null
              when vector_norm(chunk_embedding) = 0 or vector_norm(query_embedding) = 0 then null
              else 1 - (chunk_embedding <=> query_embedding) end
$$;

-- _text_query: the tsquery of a query text. Plain questions match any of their words (OR:
-- an agent's question rarely repeats every word of the answer); a query that uses websearch
-- operators ("quoted phrase", -word) is taken strictly, as websearch_to_tsquery reads it.
create or replace function recall._text_query(query_text text)
returns tsquery
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select case
    when query_text is null or btrim(query_text) = '' then null
    when query_text ~ '"|(^|\s)-\w' then websearch_to_tsquery('english', query_text)
    else (select string_agg(quote_literal(lexeme), ' | ')::tsquery
          from unnest(to_tsvector('english', query_text)))
  end
$$;

-- _check_recall_args: every bad argument is a clear error (SQLSTATE 22023), never a wrong answer
create or replace function recall._check_recall_args(
  agent_id text, query_text text, query_embedding vector, k int, token_budget int,
  min_similarity float8, filter jsonb, since timestamptz, until timestamptz,
  weights float8[], half_life interval, candidates int)
returns void
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
declare
  dim int;
begin
  if agent_id is null or agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if query_embedding is null and (query_text is null or btrim(query_text) = '') then
    raise exception 'nothing to search for: give query_text, query_embedding or both'
      using errcode = '22023';
  end if;
  if query_embedding is not null then
    select value::int into dim from recall.config where key = 'embedding_dim';
    if vector_dims(query_embedding) <> dim then
      raise exception 'query_embedding has % dimensions; this database stores %',
        vector_dims(query_embedding), dim using errcode = '22023';
    end if;
    if vector_norm(query_embedding) = 0 then
      raise exception 'query_embedding is all zeros: cosine similarity is undefined'
        using errcode = '22023';
    end if;
  end if;
  if k is null or k < 1 or k > 1000 then
    raise exception 'k must be between 1 and 1000, got %', coalesce(k::text, 'NULL')
      using errcode = '22023';
  end if;
  if token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', token_budget using errcode = '22023';
  end if;
  if candidates is null or candidates < 1 or candidates > 10000 then
    raise exception 'candidates must be between 1 and 10000, got %', coalesce(candidates::text, 'NULL')
      using errcode = '22023';
  end if;
  if min_similarity < -1 or min_similarity > 1 or min_similarity = 'NaN' then
    raise exception 'min_similarity must be between -1 and 1, got %', min_similarity
      using errcode = '22023';
  end if;
  if filter is not null and jsonb_typeof(filter) <> 'object' then
    raise exception 'filter must be a JSON object, got a JSON %', jsonb_typeof(filter)
      using errcode = '22023';
  end if;
  if since > until then
    raise exception 'since (%) is after until (%)', since, until using errcode = '22023';
  end if;
  if exists (select from unnest(weights) w where w is null or w < 0 or w = 'NaN' or w = 'Infinity') then
    raise exception 'weights must be finite and >= 0, got %', weights using errcode = '22023';
  end if;
  if half_life is null or half_life <= interval '0' then
    raise exception 'half_life must be a positive interval, got %', coalesce(half_life::text, 'NULL')
      using errcode = '22023';
  end if;
end
$$;

-- _text_arm: the top n chunks of one agent by full-text rank (GIN index on tsv)
create or replace function recall._text_arm(
  p_agent_id text, p_query tsquery, p_n int, p_exclude_session_id text, p_filter jsonb,
  p_kinds text[], p_since timestamptz, p_until timestamptz)
returns table (chunk_id bigint, rank real)
language sql stable rows 100
set search_path to pg_catalog, pg_temp
as $$
  select c.chunk_id, ts_rank_cd(c.tsv, p_query, 1) as rank
  from recall.chunks c
  where p_query is not null
    and c.tsv @@ p_query
    and c.agent_id = p_agent_id
    and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
    and (p_filter is null or c.metadata @> p_filter)
    and (p_kinds is null or c.kind = any (p_kinds))
    and (p_since is null or c.created_at >= p_since)
    and (p_until is null or c.created_at < p_until)
  order by 2 desc, c.chunk_id
  limit p_n
$$;

-- _finish: the last step of every recall function. Given candidates and their scores:
-- order them (score desc, then newer first, then higher chunk_id), drop near-duplicates among
-- the best max(4k, 40) (a chunk goes when a better one has the same text, or an embedding
-- within dedup_similarity cosine; an all-zero embedding is near nothing: its cosine is
-- undefined, and NaN >= x is true in PostgreSQL), keep at most k, and stop at the first row
-- whose running token total (cumulative_tokens) would exceed token_budget.
create or replace function recall._finish(
  p_ids bigint[], p_scores double precision[], p_k int, p_budget int, p_dedup double precision)
returns table (chunk_id bigint, score double precision, pos bigint, cumulative_tokens bigint)
language sql stable
set search_path to pg_catalog, public, pg_temp
as $$
  with
  -- the candidates with what the step needs to know of them
  cand as (
    select u.chunk_id, u.score, c.created_at, c.content, c.embedding, c.n_tokens
    from unnest(p_ids, p_scores) as u(chunk_id, score)
    join recall.chunks c on c.chunk_id = u.chunk_id
  ),
  -- the best max(4k, 40), in the final order
  top as (
    select x.*, row_number() over (order by x.score desc, x.created_at desc, x.chunk_id desc) as pos
    from cand x
    order by pos
    limit greatest(4 * p_k, 40)
  ),
  -- with each embedding's norm, computed once: zero or NULL means no cosine (see _similarity)
  normed as (
    select t.*, vector_norm(t.embedding) as norm
    from top t
  ),
  -- a candidate goes when a better one has the same text or is within p_dedup cosine. The
  -- cosine is recall._similarity written out: up to ~80,000 pairs (k = 1000), and a call of a
  -- function with a pinned search_path is never inlined (~3 us each).
  distinct_ as (
    select t.*
    from normed t
    where not exists (
      select from normed b
      where b.pos < t.pos
        and (b.content = t.content
             or (p_dedup <= 1 and b.norm > 0 and t.norm > 0
                 and 1 - (b.embedding <=> t.embedding) >= p_dedup)))
  ),
  -- running token total in the final order
  budgeted as (
    select d.chunk_id, d.score, d.pos,
           sum(d.n_tokens) over (order by d.pos rows unbounded preceding) as cumulative_tokens,
           row_number() over (order by d.pos) as rank
    from distinct_ d
  )
  select b.chunk_id, b.score, b.pos, b.cumulative_tokens
  from budgeted b
  where b.rank <= p_k and (p_budget is null or b.cumulative_tokens <= p_budget)
  order by b.pos
$$;

-- _recency: 0.5 ^ (age / half_life), age in seconds clamped at 0. Exactly 0 past 1000
-- half-lives (0.5^1000 ~ 1e-301): power() would raise 'value out of range: underflow' past
-- ~1075 (a 45-day-old chunk with half_life '1 hour', a year-1 timestamp with 30 days). An
-- infinite half_life means no decay: 1.
create or replace function recall._recency(age_seconds float8, half_life_seconds float8)
returns float8
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select case when half_life_seconds = 'Infinity' then 1::float8   -- no decay, even at an infinite age
              when greatest(age_seconds, 0) / half_life_seconds > 1000 then 0::float8
              else power(0.5::float8, greatest(age_seconds, 0) / half_life_seconds) end
$$;

-- _is_failure: a chunk that records something going wrong. A tool result that says whether it
-- failed (metadata.is_error, written by the Claude Code and OpenAI-style importers) is taken
-- at its word; other chunks by the marks of a failure in their text: a traceback, an error
-- line, failing tests, a non-zero exit code, a revert.
create or replace function recall._is_failure(kind text, content text, metadata jsonb)
returns boolean
language sql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select case
    when kind = 'tool' and metadata ? 'is_error' then metadata->>'is_error' = 'true'
    else kind in ('tool', 'turn_pair', 'window', 'message') and (
           content ~* ('Traceback \(most recent call last\)|(^|\n)\s*(error|fatal|exception)\M[^\n]*:'
                       || '|\m[1-9][0-9]* (failed|errors?)\M|exit (code|status):? *[1-9]'
                       || '|\mreverted\M|\mgit revert\M|\mrolled back\M')
           or content ~ '\mFAILED\M')   -- pytest's verdict, in capitals only
  end
$$;
