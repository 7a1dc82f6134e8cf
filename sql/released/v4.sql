-- sql/released/v4.sql: release 4: hybrid_recall_v4, session_recall_v4, auto_context_v4. Curated
-- memories (sql/idempotent/050-memories.sql) ranked with the transcripts, what was true at a
-- time (as_of), at most N chunks a session, filters on any message of a chunk and on any of
-- several values, auto_context's Pinned section and project-scoped Related.
-- Never edit: the file's SHA-256 is pinned in sql/frozen.txt and `make lint`
-- (python -m pyrecall._sqlcheck) fails when it changes or when a function here reaches one that
-- is neither in this file, an older release, shared.sql nor sql/released/shared.txt.
-- sql/README.md says how a new version is released.
--
-- On data without memories, called without the new arguments (and auto_context without a
-- project, or with all_projects), v4 returns exactly v3's rows: same ids, order and scores
-- (tests/test_recall_v4.py). The stable names (sql/idempotent/080-stable-names.sql) call v4.
--
-- What v4 adds to v3:
--   * memories (kind 'memory', sql/idempotent/050-memories.sql) are candidates like every
--     chunk; a memory superseded by a newer one (valid_until set) is never returned, unless
--     as_of is before its replacement; with as_of, a memory made after as_of is not returned.
--     For transcript chunks as_of keeps v3's meaning: the time recency is measured from.
--   * filter: a JSON object; each value is a scalar/object (must match) or an array (any of its
--     elements matches). A chunk matches key=value when its metadata @> {key: value} or one of
--     its messages does (metadata->'messages' @> [{key: value}], the metadata the chunker keeps
--     of each message of a chat window); all keys must match. (v1-v3: metadata @> filter.)
--   * turns_per_session: at most that many chunks of one session (memories are no session's).
--   * result rows add memory_id (NULL for transcript chunks), agent_id, session_title, role
--     (the roles of the chunk's messages in order, distinct, joined by '+': 'user+assistant';
--     NULL for a memory) and memory_kind, after v3's columns.

-- _filter_disjuncts_v4: a v4 filter as the containment objects any of which a chunk's metadata
-- must contain (metadata @> any (...)): one per choice, for every key, of one of its values and
-- of where it matches (the chunk's own metadata, or one of its messages: {"messages": [{k: v}]},
-- which jsonb containment reads as "some element of messages holds k: v"). The choices of
-- different keys are merged into one object: all keys must match. NULL for no filter; an empty
-- array as a value matches nothing (no disjunct). At most 4096 disjuncts (a filter of 6 keys of
-- 2 values each needs 4^6 = 4096). Tested row by row against the contract in
-- tests/test_recall_v4.py.
create or replace function recall._filter_disjuncts_v4(filter jsonb)
returns jsonb[]
language plpgsql immutable parallel safe
set search_path to pg_catalog, pg_temp
as $$
declare
  ds jsonb[] := array['{}'::jsonb];
  nxt jsonb[];
  f record;
  d jsonb;
  v jsonb;
begin
  if filter is null then
    return null;
  end if;
  if jsonb_typeof(filter) <> 'object' then
    raise exception 'filter must be a JSON object, got a JSON %', jsonb_typeof(filter)
      using errcode = '22023';
  end if;
  for f in select e.key, e.value from jsonb_each(filter) e order by e.key loop
    if f.key = 'messages' then
      raise exception 'filter key "messages" is reserved: every filter key already matches the chunk''s metadata or any of its messages'
        using errcode = '22023';
    end if;
    nxt := '{}';
    foreach d in array ds loop
      for v in select x.value from jsonb_array_elements(
                 case when jsonb_typeof(f.value) = 'array' then f.value
                      else jsonb_build_array(f.value) end) x loop
        nxt := array_append(nxt, d || jsonb_build_object(f.key, v));
        nxt := array_append(nxt, d || jsonb_build_object('messages',
                 coalesce(d->'messages', '[]'::jsonb) || jsonb_build_array(jsonb_build_object(f.key, v))));
      end loop;
    end loop;
    if cardinality(nxt) > 4096 then
      raise exception 'filter has too many alternatives: at most 4096 combinations of keys, values and messages (% and more)',
        cardinality(nxt) using errcode = '22023';
    end if;
    ds := nxt;
  end loop;
  return ds;
end
$$;

-- The v4 arms: recall._vector_arm_scoped (sql/idempotent/015-vector-arm.sql, a contract
-- listed in shared.txt) and _text_arm_v4 below (recall._text_arm_v3 of v3.sql), each with v4's
-- row conditions inside the search, so that n rows come back whenever n rows qualify:
-- p_filters (recall._filter_disjuncts_v4), p_project (the chunks of that project and the
-- memories of no project: auto_context's Related), and the validity of memories (valid_until
-- after p_as_of, or NULL: current; valid_from at or before p_as_of).

-- _text_arm_v4: recall._text_arm_v3 with v4's row conditions (its header says how hits are
-- read and scored)
create or replace function recall._text_arm_v4(
  p_agent_id text, p_match tsquery, p_rank tsquery, p_agent_rows float8, p_lexemes text[],
  p_idfs float8[], p_avg_len float8, p_n int, p_also bigint[],
  p_exclude_session_id text, p_filters jsonb[], p_kinds text[], p_since timestamptz,
  p_until timestamptz, p_as_of timestamptz, p_project text)
returns table (chunk_id bigint, text_rank float8)
language sql stable rows 200
set search_path to pg_catalog, pg_temp
as $$
  with
  conf as (
    select coalesce(max(value::float8) filter (where key = 'text_scan_max_rows'), 2000) as scan_max,
           coalesce(max(value::float8) filter (where key = 'text_pair_min_rows'), 10000) as pair_min
    from recall.config
    where key in ('text_scan_max_rows', 'text_pair_min_rows')
  ),
  words as (
    select u.i, quote_literal(u.lexeme)::tsquery as q, u.idf,
           p_match @> quote_literal(u.lexeme)::tsquery as matched
    from unnest(p_lexemes, p_idfs) with ordinality as u(lexeme, idf, i)
  ),
  total as (select sum(w.idf order by w.i) as idf from words w),
  wq as (
    select array_agg(w.q order by w.i) as q, array_agg(w.idf order by w.i) as idf, count(*) as n
    from words w
  ),
  -- an agent estimated above text_pair_min_rows chunks: first the chunks holding two different
  -- match words ('a' & 'b' | 'a' & 'c' | ...: one GIN scan)
  pair_q as (
    select string_agg(format('(%s & %s)', a.q, b.q), ' | ')::tsquery as q
    from words a join words b on a.i < b.i
    where a.matched and b.matched and p_agent_rows > (select pair_min from conf)
  ),
  pair_hits as materialized (
    select c.chunk_id, c.tsv
    from recall.chunks c
    where c.tsv @@ (select q from pair_q)
      and c.agent_id = p_agent_id
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filters is null or c.metadata @> any (p_filters))
      and (p_project is null or c.metadata @> jsonb_build_object('project', p_project)
           or (c.kind = 'memory' and not c.metadata ? 'project'))
      and (c.valid_until is null or c.valid_until > p_as_of)
      and (p_as_of is null or c.valid_from is null or c.valid_from <= p_as_of)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
  ),
  pairs as (select count(*) >= p_n as yes from pair_hits),
  -- the chunks to score: the hits (or, with enough of them, the pair hits), then the other
  -- arm's candidates
  cands as (
    select h.chunk_id, h.tsv, true as hit
    from pair_hits h
    where (select yes from pairs)
    union all
    -- a small agent: its rows by the B-tree, each tested (coalesce() keeps the GIN index out)
    select c.chunk_id, c.tsv, true
    from recall.chunks c
    where p_match is not null and p_agent_rows <= (select scan_max from conf)
      and not (select yes from pairs)
      and c.agent_id = p_agent_id
      and coalesce(c.tsv, ''::tsvector) @@ p_match
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filters is null or c.metadata @> any (p_filters))
      and (p_project is null or c.metadata @> jsonb_build_object('project', p_project)
           or (c.kind = 'memory' and not c.metadata ? 'project'))
      and (c.valid_until is null or c.valid_until > p_as_of)
      and (p_as_of is null or c.valid_from is null or c.valid_from <= p_as_of)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
    union all
    -- a larger one (or one of unknown size): the GIN index
    select c.chunk_id, c.tsv, true
    from recall.chunks c
    where p_match is not null and not coalesce(p_agent_rows <= (select scan_max from conf), false)
      and not (select yes from pairs)
      and c.tsv @@ p_match
      and c.agent_id = p_agent_id
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filters is null or c.metadata @> any (p_filters))
      and (p_project is null or c.metadata @> jsonb_build_object('project', p_project)
           or (c.kind = 'memory' and not c.metadata ? 'project'))
      and (c.valid_until is null or c.valid_until > p_as_of)
      and (p_as_of is null or c.valid_from is null or c.valid_from <= p_as_of)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
    union all
    select c.chunk_id, c.tsv, false
    from recall.chunks c
    where c.chunk_id = any (p_also) and c.agent_id = p_agent_id
  ),
  -- each candidate once: the idf of the words it holds, its length, and for a websearch query
  -- its ts_rank_cd. Up to 12 words the idf sum is written out (a subquery or a join with the
  -- words costs ~1.3 us more a candidate); a word not held adds an exact 0, so the sum is bit
  -- for bit the ordered sum over the words held; none held gives 0 (scored as NULL is)
  held as (
    select c.chunk_id, c.hit,
           case when (select n from wq) <= 12 then
             case when c.tsv @@ (select q from wq)[1] then (select idf from wq)[1] else 0 end +
             case when c.tsv @@ (select q from wq)[2] then (select idf from wq)[2] else 0 end +
             case when c.tsv @@ (select q from wq)[3] then (select idf from wq)[3] else 0 end +
             case when c.tsv @@ (select q from wq)[4] then (select idf from wq)[4] else 0 end +
             case when c.tsv @@ (select q from wq)[5] then (select idf from wq)[5] else 0 end +
             case when c.tsv @@ (select q from wq)[6] then (select idf from wq)[6] else 0 end +
             case when c.tsv @@ (select q from wq)[7] then (select idf from wq)[7] else 0 end +
             case when c.tsv @@ (select q from wq)[8] then (select idf from wq)[8] else 0 end +
             case when c.tsv @@ (select q from wq)[9] then (select idf from wq)[9] else 0 end +
             case when c.tsv @@ (select q from wq)[10] then (select idf from wq)[10] else 0 end +
             case when c.tsv @@ (select q from wq)[11] then (select idf from wq)[11] else 0 end +
             case when c.tsv @@ (select q from wq)[12] then (select idf from wq)[12] else 0 end
           else (select sum(w.idf order by w.i) from words w where c.tsv @@ w.q) end as idf,
           length(c.tsv) as len,
           case when p_lexemes is null and c.tsv @@ p_rank then ts_rank_cd(c.tsv, p_rank, 1) end as cd
    from cands c
  ),
  scored as materialized (
    select h.chunk_id, h.hit,
           case
             when p_lexemes is not null then
               coalesce(h.idf / nullif((select idf from total), 0)
                        * 1.6 / (1.6 + 0.6 * h.len / greatest(p_avg_len, 1)), 0)
             when h.cd is not null then h.cd / (h.cd + 0.1)
             else 0
           end::float8 as text_rank
    from held h
  ),
  -- with the pair hits only: the p_n-th best of them. A chunk holding one match word w (and
  -- any of the non-match words) scores below (idf(w) + their idf) / total (the length factor
  -- 1.6 / (1.6 + 0.6 len / avg_len) is < 1), so only the words whose bound reaches that score
  -- can bring a chunk into the top p_n: those chunks are read too. The answer is v3's.
  kth as (
    select s.text_rank as s
    from scored s
    where s.hit and (select yes from pairs)
    order by s.text_rank desc, s.chunk_id
    offset p_n - 1 limit 1
  ),
  nonmatch as (select coalesce(sum(w.idf), 0) as idf from words w where not w.matched),
  single_q as (
    select string_agg(w.q::text, ' | ')::tsquery as q
    from words w, kth, total, nonmatch
    where w.matched and (w.idf + nonmatch.idf) / nullif(total.idf, 0) >= kth.s * (1 - 1e-9)
  ),
  singles as (
    select c.chunk_id,
           coalesce((select sum(w.idf order by w.i) from words w where c.tsv @@ w.q)
                    / nullif((select idf from total), 0)
                    * 1.6 / (1.6 + 0.6 * length(c.tsv) / greatest(p_avg_len, 1)), 0)::float8 as text_rank
    from recall.chunks c
    where c.tsv @@ (select q from single_q)
      and not c.tsv @@ (select q from pair_q)
      and c.agent_id = p_agent_id
      and (p_exclude_session_id is null or c.session_id <> p_exclude_session_id)
      and (p_filters is null or c.metadata @> any (p_filters))
      and (p_project is null or c.metadata @> jsonb_build_object('project', p_project)
           or (c.kind = 'memory' and not c.metadata ? 'project'))
      and (c.valid_until is null or c.valid_until > p_as_of)
      and (p_as_of is null or c.valid_from is null or c.valid_from <= p_as_of)
      and (p_kinds is null or c.kind = any (p_kinds))
      and (p_since is null or c.created_at >= p_since)
      and (p_until is null or c.created_at < p_until)
  ),
  best as (
    select x.chunk_id, x.text_rank
    from (select s.chunk_id, s.text_rank from scored s where s.hit
          union all
          select g.chunk_id, g.text_rank from singles g) x
    order by x.text_rank desc, x.chunk_id
    limit p_n
  )
  select b.chunk_id, b.text_rank from best b
  union
  select s.chunk_id, s.text_rank from scored s where not s.hit
$$;

-- _hybrid_recall_v4: hybrid_recall_v4's body, with scope_project (the chunks of that project
-- and the memories of no project; auto_context_v4's Related). See hybrid_recall_v4's COMMENT.
create or replace function recall._hybrid_recall_v4(
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
  turns_per_session  int         default null,
  scope_project      text        default null)
returns setof recall.recall_row_v4
language plpgsql volatile security invoker
-- generic plans for the statements inside, as in v3
set plan_cache_mode to force_generic_plan
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  plan record;
  vector_ids bigint[];
  filters jsonb[];
  now_ts timestamptz := coalesce(_hybrid_recall_v4.as_of, now());
  half_life_s float8;
begin
  perform recall._check_recall_args(
    _hybrid_recall_v4.agent_id, _hybrid_recall_v4.query_text, _hybrid_recall_v4.query_embedding,
    _hybrid_recall_v4.k, _hybrid_recall_v4.token_budget, _hybrid_recall_v4.min_similarity,
    _hybrid_recall_v4.filter, _hybrid_recall_v4.since, _hybrid_recall_v4.until,
    array[_hybrid_recall_v4.vector_weight, _hybrid_recall_v4.text_weight,
          _hybrid_recall_v4.recency_weight, _hybrid_recall_v4.importance_weight],
    _hybrid_recall_v4.half_life, _hybrid_recall_v4.candidates);
  if _hybrid_recall_v4.dedup_similarity is null or _hybrid_recall_v4.dedup_similarity = 'NaN' then
    raise exception 'dedup_similarity must be a number (above 1 turns de-duplication off), got %',
      coalesce(_hybrid_recall_v4.dedup_similarity::text, 'NULL') using errcode = '22023';
  end if;
  if _hybrid_recall_v4.turns_per_session < 1 then
    raise exception 'turns_per_session must be at least 1, got %', _hybrid_recall_v4.turns_per_session
      using errcode = '22023';
  end if;
  filters := recall._filter_disjuncts_v4(_hybrid_recall_v4.filter);
  half_life_s := extract(epoch from _hybrid_recall_v4.half_life);
  select * into plan from recall._text_plan_v3(_hybrid_recall_v4.agent_id, _hybrid_recall_v4.query_text);

  -- candidates from the vector index: nearest by cosine distance
  if _hybrid_recall_v4.query_embedding is not null then
    select array_agg(v.chunk_id) into vector_ids
    from recall._vector_arm_scoped(_hybrid_recall_v4.agent_id, _hybrid_recall_v4.query_embedding,
                               _hybrid_recall_v4.candidates, _hybrid_recall_v4.exclude_session_id,
                               filters, _hybrid_recall_v4.kinds,
                               _hybrid_recall_v4.since, _hybrid_recall_v4.until,
                               _hybrid_recall_v4.as_of, _hybrid_recall_v4.scope_project) v;
  end if;

  return query
  with
  -- candidates from the full-text arm, and the text_rank of every candidate
  by_text as (
    select t.chunk_id, t.text_rank
    from recall._text_arm_v4(_hybrid_recall_v4.agent_id, plan.match_q, plan.rank_q, plan.agent_rows,
                             plan.lexemes, plan.idfs, plan.avg_len,
                             _hybrid_recall_v4.candidates, vector_ids,
                             _hybrid_recall_v4.exclude_session_id, filters,
                             _hybrid_recall_v4.kinds, _hybrid_recall_v4.since, _hybrid_recall_v4.until,
                             _hybrid_recall_v4.as_of, _hybrid_recall_v4.scope_project) t
  ),
  -- each candidate read once, with its four components (as v3)
  components as materialized (
    select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, c.n_tokens, c.metadata,
           c.message_ids, c.embedding, c.agent_id, c.memory_kind,
           case when c.embedding is null or _hybrid_recall_v4.query_embedding is null then null
                when vector_norm(c.embedding) = 0 or vector_norm(_hybrid_recall_v4.query_embedding) = 0 then null
                else 1 - (c.embedding <=> _hybrid_recall_v4.query_embedding) end as similarity,
           coalesce(t.text_rank, 0)::double precision as text_rank,
           case when half_life_s = 'Infinity' then 1::float8
                when greatest(extract(epoch from now_ts - c.created_at)::float8, 0) / half_life_s > 1000 then 0::float8
                else power(0.5::float8, greatest(extract(epoch from now_ts - c.created_at)::float8, 0) / half_life_s)
           end as recency,
           c.importance::double precision as importance
    from recall.chunks c
    left join by_text t on t.chunk_id = c.chunk_id
    where c.chunk_id = any (coalesce(vector_ids, '{}') || (select array_agg(b.chunk_id) from by_text b))
  ),
  -- the weighted sum; a chunk below min_similarity is dropped
  scored as (
    select x.*,
           _hybrid_recall_v4.vector_weight * coalesce(x.similarity, 0)
           + _hybrid_recall_v4.text_weight * x.text_rank
           + _hybrid_recall_v4.recency_weight * x.recency
           + _hybrid_recall_v4.importance_weight * x.importance as score
    from components x
    where _hybrid_recall_v4.min_similarity is null or x.similarity is null
       or x.similarity >= _hybrid_recall_v4.min_similarity
  ),
  -- at most turns_per_session chunks of a session, its best ones (memories are no session's)
  capped as (
    select x.*
    from (select s.*,
                 row_number() over (partition by s.session_id
                                    order by s.score desc, s.created_at desc, s.chunk_id desc) as in_session
          from scored s) x
    where _hybrid_recall_v4.turns_per_session is null or x.kind = 'memory'
       or x.in_session <= _hybrid_recall_v4.turns_per_session
  ),
  -- recall._finish's steps, on the rows already read: the best max(4k, 40) in the final order
  -- (score desc, created_at desc, chunk_id desc) ...
  top as (
    select x.*, row_number() over (order by x.score desc, x.created_at desc, x.chunk_id desc) as pos
    from capped x
    order by pos
    limit greatest(4 * _hybrid_recall_v4.k, 40)
  ),
  normed as materialized (
    select t.*, vector_norm(t.embedding) as norm
    from top t
  ),
  -- ... a row goes when a better one has the same text or is within dedup_similarity cosine ...
  distinct_ as (
    select t.*
    from normed t
    where not exists (
      select from normed b
      where b.pos < t.pos
        and (b.content = t.content
             or (_hybrid_recall_v4.dedup_similarity <= 1 and b.norm > 0 and t.norm > 0
                 and 1 - (b.embedding <=> t.embedding) >= _hybrid_recall_v4.dedup_similarity)))
  ),
  -- ... the running token total, k and the budget
  budgeted as (
    select d.*,
           sum(d.n_tokens) over (order by d.pos rows unbounded preceding) as cumulative_tokens,
           row_number() over (order by d.pos) as rnk
    from distinct_ d
  )
  select b.chunk_id, b.session_id, b.kind, b.content, b.created_at, b.score, b.similarity,
         b.text_rank, b.recency, b.importance, b.n_tokens, b.cumulative_tokens, b.metadata,
         b.message_ids,
         case when b.kind = 'memory' then b.chunk_id end,
         b.agent_id, s.title,
         (select string_agg(r.role, '+' order by r.first_at)
          from (select m.role, min(u.i) as first_at
                from unnest(b.message_ids) with ordinality as u(message_id, i)
                join recall.messages m on m.message_id = u.message_id
                group by m.role) r),
         b.memory_kind
  from budgeted b
  left join recall.sessions s on s.session_id = b.session_id
  where b.rnk <= _hybrid_recall_v4.k
    and (_hybrid_recall_v4.token_budget is null or b.cumulative_tokens <= _hybrid_recall_v4.token_budget)
  order by b.pos;
end
$$;

-- hybrid_recall_v4: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v4(
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
language sql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
  select * from recall._hybrid_recall_v4(
    agent_id, query_text, query_embedding, k, token_budget, exclude_session_id,
    min_similarity, filter, kinds, since, until, vector_weight, text_weight, recency_weight,
    importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null)
$$;

comment on function recall.hybrid_recall_v4 is $c$
hybrid_recall v4: one agent's chunks and current memories ranked for a query.
Candidates, components, score, de-duplication, order, k and token_budget: as in
recall.hybrid_recall_v3 (see its comment); curated memories (kind 'memory', recall.remember)
are chunks like the others and ranked with them (their importance defaults to 0.7).
New in v4:
  as_of     - a memory is returned only while valid: not superseded (valid_until NULL) by
              default; with as_of, valid_from <= as_of < valid_until (what was true then: the
              old memory and not its replacement). For every chunk as_of is also, as in v3, the
              time recency is measured from. Transcript chunks are not cut at as_of (use until).
  filter    - a JSON object; a value is a scalar/object (must match) or an array (any of its
              elements). key=value matches when metadata @> {key: value} or any message of the
              chunk has it (metadata->'messages' @> [{key: value}]); all keys must match.
              The key "messages" is refused. (v3: metadata @> filter.)
  turns_per_session - at most that many chunks of one session (its best), before
              de-duplication; memories count for no session. NULL: no limit.
  rows      - v3's columns, then memory_id (the memory's id, = chunk_id; NULL for transcript
              chunks), agent_id, session_title, role (the distinct roles of the chunk's
              messages in order, joined by '+'; NULL for a memory), memory_kind.
On data without memories, without turns_per_session and with a filter without arrays, the
rows are v3's, same ids, order and scores.
$c$;

-- session_recall_v4: two-stage, session-aware recall; memories ranked beside the sessions
create or replace function recall.session_recall_v4(
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
#variable_conflict use_column
begin
  if n_sessions is null or n_sessions < 1 or n_sessions > 100 then
    raise exception 'n_sessions must be between 1 and 100, got %', coalesce(n_sessions::text, 'NULL')
      using errcode = '22023';
  end if;
  if summary_weight is null or summary_weight < 0 or summary_weight in ('NaN', 'Infinity') then
    raise exception 'summary_weight must be finite and >= 0, got %', coalesce(summary_weight::text, 'NULL')
      using errcode = '22023';
  end if;
  if session_weight is null or not (session_weight between 0 and 1) then
    raise exception 'session_weight must be between 0 and 1, got %', coalesce(session_weight::text, 'NULL')
      using errcode = '22023';
  end if;
  if dedup_similarity is null or dedup_similarity = 'NaN' then
    raise exception 'dedup_similarity must be a number (above 1 turns de-duplication off), got %',
      coalesce(dedup_similarity::text, 'NULL') using errcode = '22023';
  end if;
  if turns_per_session < 1 then
    raise exception 'turns_per_session must be at least 1, got %', turns_per_session
      using errcode = '22023';
  end if;
  -- every other argument is checked by _hybrid_recall_v4, with the same messages

  return query
  with
  -- stage 0: a wide pool of scored chunks and current memories, by hybrid recall v4 with the
  -- caller's weights (no budget, no de-duplication yet)
  pool as (
    select h.*
    from recall._hybrid_recall_v4(
      agent_id => session_recall_v4.agent_id, query_text => session_recall_v4.query_text,
      query_embedding => session_recall_v4.query_embedding, k => 1000,
      exclude_session_id => session_recall_v4.exclude_session_id,
      filter => session_recall_v4.filter, kinds => session_recall_v4.kinds,
      since => session_recall_v4.since, until => session_recall_v4.until,
      vector_weight => session_recall_v4.vector_weight, text_weight => session_recall_v4.text_weight,
      recency_weight => session_recall_v4.recency_weight,
      importance_weight => session_recall_v4.importance_weight,
      half_life => session_recall_v4.half_life, as_of => session_recall_v4.as_of,
      candidates => session_recall_v4.candidates,
      dedup_similarity => 2) h
  ),
  -- stage 1 (as v3): each session by its best chunk and its best three, plus its summary's
  -- similarity. Memories belong to no session: they skip stages 1 and 2.
  per_session as (
    select p.session_id,
           max(p.score) as best,
           sum(p.score) filter (where p.r <= 3) / 3 as top3
    from (select x.session_id, x.score,
                 row_number() over (partition by x.session_id order by x.score desc) as r
          from pool x
          where x.kind <> 'memory') p
    group by p.session_id
  ),
  sessions_scored as (
    select ps.session_id,
           0.5 * ps.best + 0.5 * ps.top3
           + summary_weight * coalesce(recall._similarity(s.summary_embedding,
                                                          session_recall_v4.query_embedding), 0)
             as session_score
    from per_session ps
    join recall.sessions s on s.session_id = ps.session_id
  ),
  top_sessions as (
    select x.session_id, x.session_score,
           row_number() over (order by x.session_score desc, x.session_id)::int as session_rank
    from sessions_scored x
    order by session_rank
    limit n_sessions
  ),
  -- stage 2: the chunks of the chosen sessions, re-scored with their session's score; a
  -- memory keeps its own score
  reranked as (
    select p.*, t.session_rank, t.session_score,
           (1 - session_weight) * p.score + session_weight * t.session_score as final_score
    from pool p
    join top_sessions t on t.session_id = p.session_id
    where p.kind <> 'memory'
    union all
    select p.*, null::int, null::float8, p.score
    from pool p
    where p.kind = 'memory'
  ),
  -- at most turns_per_session chunks of a session, its best ones
  capped as (
    select x.*
    from (select r.*,
                 row_number() over (partition by r.session_id
                                    order by r.final_score desc, r.created_at desc, r.chunk_id desc) as in_session
          from reranked r) x
    where session_recall_v4.turns_per_session is null or x.kind = 'memory'
       or x.in_session <= session_recall_v4.turns_per_session
  ),
  finished as (
    select f.*
    from recall._finish((select array_agg(x.chunk_id) from capped x),
                        (select array_agg(x.final_score) from capped x),
                        session_recall_v4.k, session_recall_v4.token_budget,
                        session_recall_v4.dedup_similarity) f
  )
  select x.chunk_id, x.session_id, x.kind, x.content, x.created_at, f.score, x.similarity,
         x.text_rank, x.recency, x.importance, x.n_tokens, f.cumulative_tokens, x.metadata,
         x.message_ids, x.session_rank, x.session_score,
         x.memory_id, x.agent_id, x.session_title, x.role, x.memory_kind
  from finished f
  join capped x on x.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

comment on function recall.session_recall_v4 is $c$
session_recall v4: two-stage, session-aware recall, as recall.session_recall_v3 (see its
comment) with the pool of recall.hybrid_recall_v4: current memories (as_of: those valid
then), v4 filters (a value may be an array: any of; a key matches the chunk or any of its
messages). Memories belong to no session: they skip the session stages and keep their own
score (session_rank and session_score NULL). turns_per_session: at most that many chunks of
one session, its best by the re-scored score, before de-duplication. Rows: v3's columns, then
memory_id, agent_id, session_title, role, memory_kind (see hybrid_recall_v4). On data without
memories, called as v3 can be, the rows are v3's.
$c$;

-- auto_context_v4: what an agent should know at the start of a session, pinned memories first
create or replace function recall.auto_context_v4(
  agent_id           text,
  project            text        default null,
  branch             text        default null,
  task_text          text        default null,
  task_embedding     vector      default null,
  token_budget       int         default 4000,
  exclude_session_id text        default null,
  as_of              timestamptz default null,
  recent_share       float8      default 0.3,
  failure_share      float8      default 0.2,
  all_projects       boolean     default false)
returns setof recall.auto_context_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', auto_context_v4.project,
                                                      'branch', auto_context_v4.branch));
  related_query text := nullif(btrim(task_text), '');
  related_embedding vector := task_embedding;
  latest text;
  now_ts timestamptz := coalesce(as_of, now());
  memory_session text := 'memories:' || auto_context_v4.agent_id;
  pinned_tokens bigint;
  budget_left bigint;
begin
  if agent_id is null or agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if token_budget is null or token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', coalesce(token_budget::text, 'NULL')
      using errcode = '22023';
  end if;
  if recent_share is null or failure_share is null or recent_share < 0 or failure_share < 0
     or recent_share + failure_share > 1 then
    raise exception 'recent_share and failure_share must be >= 0 and sum to at most 1'
      using errcode = '22023';
  end if;
  if all_projects is null then
    raise exception 'all_projects must be true or false, not NULL' using errcode = '22023';
  end if;

  -- a branch with no history yet (just created): the history of its project instead
  if scope ? 'branch' and not exists (
       select from recall.chunks c
       where c.agent_id = auto_context_v4.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope (the memories
  -- session is no work session): its summary (or title) as text, its summary embedding (or
  -- the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = auto_context_v4.agent_id
      and s.session_id <> memory_session
      and (exclude_session_id is null or s.session_id <> exclude_session_id)
      and (not scope ? 'project' or s.project = scope->>'project')
      and (not scope ? 'branch' or s.branch = scope->>'branch')
    order by s.ended_at desc nulls last, s.started_at desc, s.session_id desc
    limit 1;
    if latest is not null and related_embedding is null then
      select avg(c.embedding) into related_embedding
      from recall.chunks c
      where c.session_id = latest and c.embedding is not null and c.kind <> 'summary';
    end if;
  end if;

  -- Pinned: the agent's pinned memories valid now (at as_of), of this project or of none,
  -- most important (then newest) first, as many as the whole budget holds; the other sections
  -- share what they leave
  select coalesce(max(x.run), 0) into pinned_tokens
  from (select sum(c.n_tokens) over (order by c.importance desc, c.created_at desc, c.chunk_id desc
                                     rows unbounded preceding) as run
        from recall.chunks c
        where c.agent_id = auto_context_v4.agent_id and c.kind = 'memory' and c.pinned
          and (c.valid_until is null or c.valid_until > auto_context_v4.as_of)
          and (auto_context_v4.as_of is null or c.valid_from <= auto_context_v4.as_of)
          and (auto_context_v4.project is null or not c.metadata ? 'project'
               or c.metadata->>'project' = auto_context_v4.project)) x
  where x.run <= token_budget;
  budget_left := token_budget - pinned_tokens;

  return query
  with
  -- Pinned (see above)
  pinned_kept as (
    select x.chunk_id, 'pinned'::text as section, x.score, x.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of, x.n_tokens
    from (select c.chunk_id, c.importance::float8 as score, c.n_tokens,
                 sum(c.n_tokens) over (order by c.importance desc, c.created_at desc, c.chunk_id desc
                                       rows unbounded preceding) as run
          from recall.chunks c
          where c.agent_id = auto_context_v4.agent_id and c.kind = 'memory' and c.pinned
            and (c.valid_until is null or c.valid_until > auto_context_v4.as_of)
            and (auto_context_v4.as_of is null or c.valid_from <= auto_context_v4.as_of)
            and (auto_context_v4.project is null or not c.metadata ? 'project'
                 or c.metadata->>'project' = auto_context_v4.project)) x
    where x.run <= token_budget
  ),
  -- Recent: the newest conversation chunks of this project and branch
  recent as (
    select c.chunk_id, 'recent'::text as section,
           recall._recency(extract(epoch from now_ts - c.created_at)::float8, 7 * 86400) as score
    from recall.chunks c
    where c.agent_id = auto_context_v4.agent_id
      and c.metadata @> scope
      and c.kind in ('turn_pair', 'window', 'message', 'summary')
      and (exclude_session_id is null or c.session_id <> exclude_session_id)
    order by c.created_at desc, c.chunk_id desc
    limit 20
  ),
  -- Related: hybrid recall v4 for the task, or for the latest work (then from other sessions:
  -- the latest one is Recent already), in the project when one is given (with the memories
  -- of no project), agent-wide with all_projects. What the repository itself holds (files
  -- read, written or searched by a file tool) is left out, and other tool input/output counts
  -- 0.8 of its score, so that explanations and decisions come first.
  related as (
    select h.chunk_id, 'related'::text as section,
           h.score * case when h.kind = 'tool' then 0.8 else 1 end as score
    from recall._hybrid_recall_v4(
      agent_id => auto_context_v4.agent_id, query_text => related_query,
      query_embedding => related_embedding,
      k => least(1000, greatest(60, token_budget / 25)),
      exclude_session_id => exclude_session_id, as_of => as_of,
      scope_project => case when auto_context_v4.all_projects then null
                            else auto_context_v4.project end) h
    where (related_query is not null or related_embedding is not null)
      and h.session_id is distinct from latest
      and not (h.kind = 'tool' and h.metadata->>'tool_name' in
               ('Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit', 'NotebookRead', 'Glob',
                'Grep', 'LS'))
  ),
  -- Failures to avoid: what went wrong before, most relevant (then newest) first ...
  failed as (
    select c.chunk_id, c.session_id,
           coalesce(recall._similarity(c.embedding, related_embedding), 0)
           + 0.2 * recall._recency(extract(epoch from now_ts - c.created_at)::float8, 30 * 86400) as score,
           (select max(m.seq) from recall.messages m where m.message_id = any (c.message_ids)) as last_seq
    from recall.chunks c
    where c.agent_id = auto_context_v4.agent_id
      and c.metadata @> scope
      and (exclude_session_id is null or c.session_id <> exclude_session_id)
      and recall._is_failure(c.kind, c.content, c.metadata)
    order by 3 desc, c.chunk_id desc
    limit 10
  ),
  -- ... each followed by what the agent concluded from it: the first thinking or text of the
  -- assistant after it in its session (itself no failure)
  resolutions as (
    select f.chunk_id as failure_id, r.chunk_id, f.score
    from failed f
    cross join lateral (
      select c.chunk_id
      from recall.chunks c
      cross join lateral unnest(c.message_ids) as u(message_id)
      join recall.messages m on m.message_id = u.message_id
      where c.session_id = f.session_id
        and c.kind in ('thinking', 'message', 'turn_pair', 'window')
        and m.role = 'assistant' and m.seq > f.last_seq
        and not recall._is_failure(c.kind, c.content, c.metadata)
      order by m.seq, c.part
      limit 1) r
  ),
  -- the sections after Pinned are filled one after the other, each from what the ones before
  -- left of budget_left: Recent within its share ...
  recent_kept as (
    select x.*
    from (select r.chunk_id, r.section, r.score, r.chunk_id as grp_id, 0 as sub,
                 null::bigint as resolution_of, c.n_tokens,
                 sum(c.n_tokens) over (order by r.score desc, r.chunk_id desc
                                       rows unbounded preceding) as run
          from recent r
          join recall.chunks c on c.chunk_id = r.chunk_id) x
    where x.run <= budget_left * recent_share
  ),
  -- ... then Failures: each failure followed by its resolution (unless Recent shows it) ...
  failure_rows as (
    select f.chunk_id, 'failures'::text as section, f.score, f.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of
    from failed f
    where f.chunk_id not in (select chunk_id from recent_kept)
    union all
    (select distinct on (r.chunk_id) r.chunk_id, 'failures', r.score, r.failure_id, 1, r.failure_id
     from resolutions r
     where r.chunk_id not in (select chunk_id from recent_kept)
       and r.failure_id not in (select chunk_id from recent_kept)
       and r.chunk_id not in (select chunk_id from failed)
     order by r.chunk_id, r.score desc)
  ),
  failures_kept as (
    select x.*
    from (select f.*, c.n_tokens,
                 sum(c.n_tokens) over (order by f.score desc, f.grp_id desc, f.sub
                                       rows unbounded preceding) as run
          from failure_rows f
          join recall.chunks c on c.chunk_id = f.chunk_id) x
    where x.run <= budget_left * failure_share
  ),
  shown as (
    select chunk_id from pinned_kept union all
    select chunk_id from recent_kept union all select chunk_id from failures_kept
  ),
  -- ... then Related, within the rest of the budget; a code block whose whole message is
  -- shown (as a message or turn pair, here or above) is left out
  related_rows as (
    select r.chunk_id, r.section, r.score, r.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of, c.n_tokens
    from related r
    join recall.chunks c on c.chunk_id = r.chunk_id
    where r.chunk_id not in (select chunk_id from shown)
      and not (c.kind = 'code' and exists (
            select from recall.chunks o
            where o.kind in ('turn_pair', 'window', 'message') and o.message_ids @> c.message_ids
              and (o.chunk_id in (select chunk_id from shown)
                   or o.chunk_id in (select chunk_id from related))))
  ),
  related_kept as (
    select x.*
    from (select r.*, sum(r.n_tokens) over (order by r.score desc, r.chunk_id desc
                                            rows unbounded preceding) as run
          from related_rows r) x
    where x.run <= budget_left - coalesce((select sum(n_tokens) from recent_kept), 0)
                               - coalesce((select sum(n_tokens) from failures_kept), 0)
  ),
  ordered as (
    select k.*,
           row_number() over (order by case k.section when 'pinned' then 0 when 'recent' then 1
                                                      when 'related' then 2 else 3 end,
                                       k.score desc, k.grp_id desc, k.sub) as pos
    from (select chunk_id, section, score, grp_id, sub, resolution_of from pinned_kept
          union all
          select chunk_id, section, score, grp_id, sub, resolution_of from recent_kept
          union all
          select chunk_id, section, score, grp_id, sub, resolution_of from failures_kept
          union all
          select chunk_id, section, score, grp_id, sub, resolution_of from related_kept) k
  )
  select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, o.score,
         recall._similarity(c.embedding, related_embedding),
         0::float8,
         recall._recency(extract(epoch from now_ts - c.created_at)::float8, 30 * 86400),
         c.importance::float8, c.n_tokens,
         sum(c.n_tokens) over (order by o.pos rows unbounded preceding),
         case when o.resolution_of is null then c.metadata
              else c.metadata || jsonb_build_object('resolution_of', o.resolution_of) end,
         c.message_ids, o.section,
         case when c.kind = 'memory' then c.chunk_id end,
         c.agent_id, s.title,
         (select string_agg(r.role, '+' order by r.first_at)
          from (select m.role, min(u.i) as first_at
                from unnest(c.message_ids) with ordinality as u(message_id, i)
                join recall.messages m on m.message_id = u.message_id
                group by m.role) r),
         c.memory_kind
  from ordered o
  join recall.chunks c on c.chunk_id = o.chunk_id
  left join recall.sessions s on s.session_id = c.session_id
  order by o.pos;
end
$$;

comment on function recall.auto_context_v4 is $c$
auto_context v4: the context for the start of a session, in four sections, each row labelled.
  pinned   - new: the agent's pinned memories (recall.pin_memory) that are valid (at as_of when
             given: not superseded then, made by then), of this project or of no project (all
             of them without a project), by importance then newest; first, within the whole
             token_budget. The other sections share what they leave (budget_left).
  recent   - as in v3, within recent_share of budget_left (memories are no conversation)
  failures - as in v3, within failure_share of budget_left
  related  - recall.hybrid_recall_v4 (memories ranked with the transcripts; superseded ones
             left out) for the task, or the latest work session in scope, as in v3, but in
             the project when one is given (its chunks, and the memories of no project);
             all_projects => true searches the whole agent, as v3 did; the rest of budget_left
Rows come ordered pinned, recent, related, failures, each by score (pinned: importance);
cumulative_tokens runs over all. Columns: v3's, then memory_id, agent_id, session_title, role,
memory_kind (see hybrid_recall_v4). Without pinned memories, and without a project or with
all_projects, the rows are v3's.
$c$;
