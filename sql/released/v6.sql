-- sql/released/v6.sql: release 6: hybrid_recall_v6, session_recall_v6, auto_context_v6. v5's rows
-- (auto_context: v4's), fast under row-level security, and runnable on a Citus cluster.
-- Never edit: the file's SHA-256 is pinned in sql/frozen.txt and `make lint`
-- (python -m pyrecall._sqlcheck) fails when it changes or when a function here reaches one that
-- is neither in this file, an older release, shared.sql nor sql/released/shared.txt.
-- sql/README.md says how a new version is released.
--
-- Why (issue 17, docs/BENCHMARKS.md section 4): in a row-secured query PostgreSQL uses a qual as
-- an index condition only when every function in it is LEAKPROOF. The text arm's
-- `tsv @@ query`, the jsonb filters (`metadata @> ...`) and v4's
-- `chunk_id = any (vector_ids || ...)` are not, so for a role under row-level security (a role
-- bound with recall.bind_agent, or recall_agent + recall.agent_id) the search read every chunk
-- of the agent: 12-18x the owner's time on large agents.
--
-- How: the search itself (the text plan, the vector arm, the text arm: they read only the
-- chunks whose agent_id is the one asked, and return chunk ids and text ranks) runs as the
-- schema owner in one SECURITY DEFINER function, recall._recall_arms_v6, after
-- recall._check_reader_v6 has decided, as the chunks' policies do, that the calling role may
-- read that agent (else 42501 and no row; a change of those policies must change it too:
-- tests/test_recall_v6.py compares the two for 14 kinds of role). Everything else (reading the candidates'
-- rows, scores, sessions, messages, the budget fill) runs as the caller, under row-level
-- security, reading by primary key (`chunk_id = any ($1)`, int8 equality, is leakproof: the
-- index serves). So the content of a row never passes through the owner's rights: a
-- definer-side mistake could at worst show ids and text ranks, never text. Measured in
-- docs/BENCHMARKS.md section 4; the design and its one caveat in docs/SECURITY.md ("The
-- functions").
--
-- Without row-level security in the way (the owner, recall_admin) the rows are the same too:
-- v6 equals v5 (same ids, order, scores, columns) for every caller allowed to read the agent
-- (tests/test_recall_v6.py). What changes: a call for an agent the caller may not read raises
-- 42501 (v5 returned no row), and session_recall reads session titles and message roles for
-- the rows it returns only (v5: for its whole pool of up to 1000; issue 19); and v6 joins a
-- chunk to its session, and a session to its chunks, by (agent_id, session_id) (migration
-- 010-agent-first-keys: on a Citus cluster two agents may hold one session id), the same rows
-- on one node; so does v6's fill (recall._fill_v6, v5's).
--
-- On a Citus cluster (docs/SCALING.md) the three run delegated, on the agent's worker, with
-- the rows of one node (tests/test_citus.py): their helpers are PL/pgSQL copies of v3-v5's
-- SQL-language ones (_text_plan_v6, _text_arm_v6, _finish_v6, _fill_v6, ...),
-- every table reference names the agent, a nested recall call is read first into an array,
-- and plans are made per call there (the DO block below).

-- _session_role_v6: the role whose rights a statement of this session is checked with outside
-- any SECURITY DEFINER function: the role set by SET ROLE (set_config('role', ...)), else the
-- login role (session_user). Inside a definer function current_user is the function's owner,
-- so recall._check_reader_v6 asks this instead; hybrid_recall_v6 and the others compare it
-- with their own current_user (SECURITY INVOKER: the real caller) and take v5's path, fully
-- under row-level security, when the two differ (called from another role's definer function).
create or replace function recall._session_role_v6()
returns text
language sql stable security invoker parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select case when coalesce(current_setting('role', true), 'none') in ('none', '')
              then session_user::text
              else current_setting('role', true) end
$$;

-- _check_reader_v6: raise 42501 unless the session's role (recall._session_role_v6) may read
-- the chunks of p_agent_id, decided as PostgreSQL applies the policies of recall.chunks
-- (001-schema, 003-agent-bindings, 090-security) to that role:
--   * it needs SELECT on recall.chunks (as any query would);
--   * no row-level security for superusers, BYPASSRLS roles and the table's owner (a role with
--     the owner's privileges): any agent, unless the table forces row-level security;
--   * otherwise (with row_security = off such a query fails: so does this), the policies that
--     apply to the role (a role with the privileges of recall_agent / recall_admin, as RLS
--     decides):
--       permissive admin_rows (recall_admin): any agent;
--       permissive agent_rows (recall_agent): the role's bound agent, else the setting
--         recall.agent_id (recall.bound_agent(): the binding of the role, else of the login role);
--       restrictive agent_bound (recall_agent): the bound agent only, when the role is bound;
--     no permissive policy at all: nothing (default deny).
-- SECURITY DEFINER: it reads the bindings of the role it checks (which that role may not be
-- able to read after SET ROLE); it reveals nothing but whether the caller may read the agent
-- it names. tests/test_recall_v6.py checks it against what the policies let each kind of role
-- see.
create or replace function recall._check_reader_v6(p_agent_id text)
returns void
language plpgsql stable security definer
set search_path to pg_catalog, pg_temp
as $$
declare
  r_name text := recall._session_role_v6();
  r oid;
  bypass boolean;
  tbl record;
  is_agent boolean;
  is_admin boolean;
  bound text;
begin
  select ro.oid, ro.rolsuper or ro.rolbypassrls into r, bypass from pg_roles ro where ro.rolname = r_name;
  if r is null then
    raise exception 'permission denied: role % not found', quote_ident(r_name) using errcode = '42501';
  end if;
  if not has_table_privilege(r, 'recall.chunks', 'select') then
    raise exception 'permission denied for table chunks' using errcode = '42501';
  end if;
  select c.relowner, c.relrowsecurity, c.relforcerowsecurity into tbl
  from pg_class c where c.oid = 'recall.chunks'::regclass;
  if bypass or not tbl.relrowsecurity
     or (pg_has_role(r, tbl.relowner, 'usage') and not tbl.relforcerowsecurity) then
    return;
  end if;
  if current_setting('row_security') = 'off' then
    raise exception 'query would be affected by row-level security policy for table "chunks"'
      using errcode = '42501';
  end if;
  is_agent := pg_has_role(r, 'recall_agent', 'usage');
  is_admin := pg_has_role(r, 'recall_admin', 'usage');
  select b.agent_id into bound
  from (values (1, r), (2, (select ro.oid from pg_roles ro where ro.rolname = session_user))) as x(pref, role_oid)
  join recall.agent_bindings b on b.agent_role::oid = x.role_oid
  order by x.pref
  limit 1;
  if (is_admin or (is_agent and p_agent_id = coalesce(bound, current_setting('recall.agent_id', true))))
     and (not is_agent or bound is null or p_agent_id = bound) then
    return;
  end if;
  raise exception 'permission denied: this role may not read the memories of agent %', quote_literal(p_agent_id)
    using errcode = '42501',
          hint = 'A role bound with recall.bind_agent reads its agent only; another recall_agent role the agent named by the setting recall.agent_id.';
end
$$;

-- The search helpers of v6: PL/pgSQL copies of v3's text plan (recall._text_plan_v3), v4's
-- text arm (recall._text_arm_v4) and the scoped vector arm (recall._vector_arm_scoped and its
-- exact scan, sql/idempotent/015-vector-arm.sql), the same statements and answers. Why copies:
-- on a Citus cluster (docs/SCALING.md) a recall call runs on the agent's worker, where Citus
-- plans every query on a distributed table; it cannot plan one with parameters inside a
-- SQL-language function ("could not create distributed plan"), and it can inside PL/pgSQL.
-- Every query in them names the agent (agent_id = p_agent_id), so Citus routes it to the
-- agent's shard.

create or replace function recall._text_plan_v6(p_agent_id text, query_text text,
                                                out rank_q tsquery, out match_q tsquery,
                                                out agent_rows float8, out lexemes text[],
                                                out idfs float8[], out avg_len float8)
language plpgsql stable
set search_path to pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  select * into rank_q, match_q, agent_rows, lexemes, idfs, avg_len
  from (
  with
  conf as (
    select coalesce(max(value::float8) filter (where key = 'text_common_share'), 0.5) as common_share,
           coalesce(max(value::int) filter (where key = 'text_df_sample'), 100) as sample_size,
           coalesce(max(value::float8) filter (where key = 'text_match_max_rows'), 5000) as match_max
    from recall.config
    where key in ('text_common_share', 'text_df_sample', 'text_match_max_rows')
  ),
  words as (
    select distinct w.lexeme, quote_literal(w.lexeme)::tsquery as q
    from unnest(to_tsvector('english', query_text)) w
    where query_text is not null and query_text !~ '"|(^|\s)-\w'
  ),
  -- the agent's newest chunks: the B-tree (agent_id, created_at) gives them in order
  sample as (
    select strip(c.tsv) as tsv, c.created_at
    from recall.chunks c
    where c.agent_id = p_agent_id and exists (select from words)
    order by c.created_at desc
    limit (select sample_size from conf)
  ),
  sampled as (
    select count(*) as n, min(created_at) as oldest_sampled, max(created_at) as newest,
           avg(length(tsv))::float8 as avg_len
    from sample
  ),
  -- the agent's size: the sample itself when it is not full, else extrapolated over time
  size_ as (
    select case
      when s.n = 0 then null
      when s.n < conf.sample_size then s.n::float8
      else s.n * greatest(1, extract(epoch from s.newest - (select min(c.created_at) from recall.chunks c
                                                             where c.agent_id = p_agent_id))
                             / greatest(extract(epoch from s.newest - s.oldest_sampled), 1))::float8
    end as n
    from sampled s, conf
  ),
  share as (
    select w.lexeme,
           (select count(*) from sample s where s.tsv @@ w.q)::float8 / greatest(sampled.n, 1) as share
    from words w, sampled
  ),
  -- too few chunks to tell, or every word is common: every word is kept, and matched
  fallback as (
    select (select n from sampled) < 20
           or not exists (select from share s, conf where s.share <= conf.common_share) as yes
  ),
  kept as (
    select s.lexeme, s.share,
           f.yes or s.share * size_.n <= conf.match_max as matchable,
           row_number() over (order by s.share, s.lexeme) as rarity,
           greatest(size_.n, 1) as n
    from share s, conf, size_, fallback f
    where f.yes or s.share <= conf.common_share
  ),
  plan as (
    select string_agg(quote_literal(lexeme), ' | ' order by lexeme)::tsquery as rank_q,
           coalesce(string_agg(quote_literal(lexeme), ' | ' order by lexeme) filter (where matchable),
                    max(quote_literal(lexeme)) filter (where rarity = 1))::tsquery as match_q,
           array_agg(lexeme order by lexeme) as lexemes,
           array_agg(ln(1 + (n - share * n + 0.5) / (share * n + 0.5)) order by lexeme) as idfs
    from kept
  )
  -- no word to look up (stop words only, or a websearch query): _text_query's tsquery
  select coalesce(p.rank_q, recall._text_query(query_text)),
         coalesce(p.match_q, recall._text_query(query_text)),
         (select n from size_), p.lexemes, p.idfs,
         (select s.avg_len from sampled s)
  from plan p
  ) x;
end
$$;

create or replace function recall._text_arm_v6(
  p_agent_id text, p_match tsquery, p_rank tsquery, p_agent_rows float8, p_lexemes text[],
  p_idfs float8[], p_avg_len float8, p_n int, p_also bigint[],
  p_exclude_session_id text, p_filters jsonb[], p_kinds text[], p_since timestamptz,
  p_until timestamptz, p_as_of timestamptz, p_project text)
returns table (chunk_id bigint, text_rank float8)
language plpgsql stable rows 200
set search_path to pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  return query
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
  select s.chunk_id, s.text_rank from scored s where not s.hit;
end
$$;

-- _finish_v6: recall._finish (sql/released/shared.sql: order, de-duplicate, k, token budget)
-- for the chunks of p_agent_id, in PL/pgSQL (see above)
create or replace function recall._finish_v6(
  p_agent_id text, p_ids bigint[], p_scores double precision[], p_k int, p_budget int, p_dedup double precision)
returns table (chunk_id bigint, score double precision, pos bigint, cumulative_tokens bigint)
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
begin
  return query
  with
  -- the candidates with what the step needs to know of them
  cand as (
    select u.chunk_id, u.score, c.created_at, c.content, c.embedding, c.n_tokens
    from unnest(p_ids, p_scores) as u(chunk_id, score)
    join recall.chunks c on c.chunk_id = u.chunk_id
    where c.agent_id = p_agent_id
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
  order by b.pos;
end
$$;

-- _fill_v6, _trim_v6, _passage_text_v6: v5's fill (recall._fill_v5, _trim_v5,
-- _passage_text_v5 of sql/released/v5.sql) for the chunks and messages of p_agent_id, in
-- PL/pgSQL (see above); a chunk's parts are looked up by (agent_id, session_id), as v6 joins
-- (the same rows on one node).
create or replace function recall._trim_v6(
  p_agent_id text, p_content text, p_n_tokens int, p_message_ids bigint[], p_budget int)
returns table (content text, n_tokens int, message_ids bigint[])
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
begin
  return query
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
    where m.agent_id = p_agent_id
      and strpos(k.text, left(m.content, 40)) > 0
  )
  select k.text,
         greatest(1, ceil(p_n_tokens::numeric * char_length(k.text) / char_length(p_content)))::int,
         case when p_message_ids is null then null
              else coalesce((select found from ids), p_message_ids[1:1]) end
  from kept k
  where k.text <> '' and p_budget >= 1;
end
$$;

create or replace function recall._passage_text_v6(p_agent_id text, p_message_ids bigint[], p_dated boolean)
returns text
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
begin
  return (
  select case when p_dated
              then coalesce('[' || to_char(min(m.created_at) at time zone 'UTC', 'FMDD FMMonth YYYY')
                            || E']\n', '')
              else '' end
         || string_agg(coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                                nullif(btrim(m.metadata->>'author'), ''), initcap(m.role))
                       || ': ' || m.content, E'\n\n' order by m.seq)
  from recall.messages m
  where m.agent_id = p_agent_id and m.message_id = any (p_message_ids)
  );
end
$$;

create or replace function recall._fill_v6(p_agent_id text, p_ids bigint[], p_budget int)
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
                           where o.agent_id = p_agent_id and o.session_id = ch.session_id and o.kind = ch.kind
                             and o.first_seq = ch.first_seq and o.part > 0) as chat
    from unnest(p_ids) with ordinality as u(id, ord)
    join recall.chunks ch on ch.chunk_id = u.id
    where ch.agent_id = p_agent_id
    order by u.ord
  loop
    -- the best chunk alone exceeds the budget: trimmed to fit
    if first_row and c.n_tokens > p_budget then
      first_row := false;
      select * into t from recall._trim_v6(p_agent_id, c.content, c.n_tokens, c.message_ids, p_budget);
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
    new_text := recall._passage_text_v6(
      p_agent_id, all_ids, c.kind = 'window' or (select bool_or(p_dated[j]) from unnest(joined) j));
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

-- _recall_arms_v6: v4's candidates for one agent (recall._hybrid_recall_v4's first steps: the
-- text plan, the vector arm, the text arm with v4's row conditions), computed as the schema
-- owner after recall._check_reader_v6 has let the caller read p_agent_id. Rows: the text arm's
-- (chunk_id, text_rank, by_text true), then the vector arm's ids (text_rank NULL, by_text
-- false). Every statement behind it reads only chunks whose agent_id = p_agent_id; no text,
-- metadata or vector leaves it. Generic plans as in v4.
create or replace function recall._recall_arms_v6(
  p_agent_id text, p_query_text text, p_query vector, p_n int, p_exclude_session_id text,
  p_filters jsonb[], p_kinds text[], p_since timestamptz, p_until timestamptz,
  p_as_of timestamptz, p_project text)
returns table (chunk_id bigint, text_rank float8, by_text boolean)
language plpgsql volatile security definer rows 200
set plan_cache_mode to force_generic_plan
set search_path to pg_catalog, public, pg_temp
as $$
declare
  plan record;
  vector_ids bigint[];
begin
  perform recall._check_reader_v6(p_agent_id);
  select * into plan from recall._text_plan_v6(p_agent_id, p_query_text);
  if p_query is not null then
    select array_agg(v.chunk_id) into vector_ids
    from recall._vector_arm_scoped(p_agent_id, p_query, p_n, p_exclude_session_id, p_filters,
                               p_kinds, p_since, p_until, p_as_of, p_project) v;
  end if;
  return query
  select t.chunk_id, t.text_rank, true
  from recall._text_arm_v6(p_agent_id, plan.match_q, plan.rank_q, plan.agent_rows, plan.lexemes,
                           plan.idfs, plan.avg_len, p_n, vector_ids, p_exclude_session_id,
                           p_filters, p_kinds, p_since, p_until, p_as_of, p_project) t
  union all
  select u.id, null::float8, false
  from unnest(vector_ids) as u(id);
end
$$;

-- _hybrid_recall_v6: recall._hybrid_recall_v4 (same arguments, checks, scores, order, rows)
-- with its candidates from recall._recall_arms_v6, the rows then read by primary key as the
-- caller. p_labels false: session_title and role left NULL (session_recall_v6 and
-- auto_context_v6 read them for the rows they keep only).
create or replace function recall._hybrid_recall_v6(
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
  scope_project      text        default null,
  p_labels           boolean     default true)
returns setof recall.recall_row_v4
language plpgsql volatile security invoker
set plan_cache_mode to force_generic_plan
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  filters jsonb[];
  now_ts timestamptz := coalesce(_hybrid_recall_v6.as_of, now());
  half_life_s float8;
  ids bigint[];
  t_ids bigint[];
  t_ranks float8[];
begin
  perform recall._check_recall_args(
    _hybrid_recall_v6.agent_id, _hybrid_recall_v6.query_text, _hybrid_recall_v6.query_embedding,
    _hybrid_recall_v6.k, _hybrid_recall_v6.token_budget, _hybrid_recall_v6.min_similarity,
    _hybrid_recall_v6.filter, _hybrid_recall_v6.since, _hybrid_recall_v6.until,
    array[_hybrid_recall_v6.vector_weight, _hybrid_recall_v6.text_weight,
          _hybrid_recall_v6.recency_weight, _hybrid_recall_v6.importance_weight],
    _hybrid_recall_v6.half_life, _hybrid_recall_v6.candidates);
  if _hybrid_recall_v6.dedup_similarity is null or _hybrid_recall_v6.dedup_similarity = 'NaN' then
    raise exception 'dedup_similarity must be a number (above 1 turns de-duplication off), got %',
      coalesce(_hybrid_recall_v6.dedup_similarity::text, 'NULL') using errcode = '22023';
  end if;
  if _hybrid_recall_v6.turns_per_session < 1 then
    raise exception 'turns_per_session must be at least 1, got %', _hybrid_recall_v6.turns_per_session
      using errcode = '22023';
  end if;
  filters := recall._filter_disjuncts_v4(_hybrid_recall_v6.filter);
  half_life_s := extract(epoch from _hybrid_recall_v6.half_life);

  -- called from another role's SECURITY DEFINER function: the session's role is not the caller,
  -- so the definer arms could not tell what the caller may read: v4's path, under row-level
  -- security throughout
  if current_user::text is distinct from recall._session_role_v6() then
    return query select * from recall._hybrid_recall_v4(
      _hybrid_recall_v6.agent_id, _hybrid_recall_v6.query_text, _hybrid_recall_v6.query_embedding,
      _hybrid_recall_v6.k, _hybrid_recall_v6.token_budget, _hybrid_recall_v6.exclude_session_id,
      _hybrid_recall_v6.min_similarity, _hybrid_recall_v6.filter, _hybrid_recall_v6.kinds,
      _hybrid_recall_v6.since, _hybrid_recall_v6.until, _hybrid_recall_v6.vector_weight,
      _hybrid_recall_v6.text_weight, _hybrid_recall_v6.recency_weight,
      _hybrid_recall_v6.importance_weight, _hybrid_recall_v6.half_life,
      _hybrid_recall_v6.candidates, _hybrid_recall_v6.as_of, _hybrid_recall_v6.dedup_similarity,
      _hybrid_recall_v6.turns_per_session, _hybrid_recall_v6.scope_project);
    return;
  end if;

  -- the candidates (the vector arm's and the text arm's ids, the text ranks), searched as the
  -- owner once the caller may read the agent (else 42501)
  select array_agg(a.chunk_id),
         array_agg(a.chunk_id) filter (where a.by_text),
         array_agg(a.text_rank) filter (where a.by_text)
    into ids, t_ids, t_ranks
  from recall._recall_arms_v6(_hybrid_recall_v6.agent_id, _hybrid_recall_v6.query_text,
                              _hybrid_recall_v6.query_embedding, _hybrid_recall_v6.candidates,
                              _hybrid_recall_v6.exclude_session_id, filters, _hybrid_recall_v6.kinds,
                              _hybrid_recall_v6.since, _hybrid_recall_v6.until,
                              _hybrid_recall_v6.as_of, _hybrid_recall_v6.scope_project) a;

  return query
  with
  by_text as (
    select u.chunk_id, u.text_rank from unnest(t_ids, t_ranks) as u(chunk_id, text_rank)
  ),
  -- each candidate read once, as the caller (row-level security), by primary key: `= any` of a
  -- parameter is leakproof, so the index serves
  components as materialized (
    select c.chunk_id, c.session_id, c.kind, c.content, c.created_at, c.n_tokens, c.metadata,
           c.message_ids, c.embedding, c.agent_id, c.memory_kind,
           case when c.embedding is null or _hybrid_recall_v6.query_embedding is null then null
                when vector_norm(c.embedding) = 0 or vector_norm(_hybrid_recall_v6.query_embedding) = 0 then null
                else 1 - (c.embedding <=> _hybrid_recall_v6.query_embedding) end as similarity,
           coalesce(t.text_rank, 0)::double precision as text_rank,
           case when half_life_s = 'Infinity' then 1::float8
                when greatest(extract(epoch from now_ts - c.created_at)::float8, 0) / half_life_s > 1000 then 0::float8
                else power(0.5::float8, greatest(extract(epoch from now_ts - c.created_at)::float8, 0) / half_life_s)
           end as recency,
           c.importance::double precision as importance
    from recall.chunks c
    left join by_text t on t.chunk_id = c.chunk_id
    where c.agent_id = _hybrid_recall_v6.agent_id and c.chunk_id = any (ids)
  ),
  -- from here on v4's steps, unchanged: the weighted sum (min_similarity) ...
  scored as (
    select x.*,
           _hybrid_recall_v6.vector_weight * coalesce(x.similarity, 0)
           + _hybrid_recall_v6.text_weight * x.text_rank
           + _hybrid_recall_v6.recency_weight * x.recency
           + _hybrid_recall_v6.importance_weight * x.importance as score
    from components x
    where _hybrid_recall_v6.min_similarity is null or x.similarity is null
       or x.similarity >= _hybrid_recall_v6.min_similarity
  ),
  -- ... turns_per_session ...
  capped as (
    select x.*
    from (select s.*,
                 row_number() over (partition by s.session_id
                                    order by s.score desc, s.created_at desc, s.chunk_id desc) as in_session
          from scored s) x
    where _hybrid_recall_v6.turns_per_session is null or x.kind = 'memory'
       or x.in_session <= _hybrid_recall_v6.turns_per_session
  ),
  -- ... the best max(4k, 40) in the final order, de-duplicated ...
  top as (
    select x.*, row_number() over (order by x.score desc, x.created_at desc, x.chunk_id desc) as pos
    from capped x
    order by pos
    limit greatest(4 * _hybrid_recall_v6.k, 40)
  ),
  normed as materialized (
    select t.*, vector_norm(t.embedding) as norm
    from top t
  ),
  distinct_ as (
    select t.*
    from normed t
    where not exists (
      select from normed b
      where b.pos < t.pos
        and (b.content = t.content
             or (_hybrid_recall_v6.dedup_similarity <= 1 and b.norm > 0 and t.norm > 0
                 and 1 - (b.embedding <=> t.embedding) >= _hybrid_recall_v6.dedup_similarity)))
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
         b.agent_id,
         case when p_labels then (select s.title from recall.sessions s
                                 where s.agent_id = _hybrid_recall_v6.agent_id
                                   and s.session_id = b.session_id) end,
         case when p_labels then
           (select string_agg(r.role, '+' order by r.first_at)
            from (select m.role, min(u.i) as first_at
                  from unnest(b.message_ids) with ordinality as u(message_id, i)
                  join recall.messages m on m.message_id = u.message_id
                  where m.agent_id = _hybrid_recall_v6.agent_id
                  group by m.role) r) end,
         b.memory_kind
  from budgeted b
  where b.rnk <= _hybrid_recall_v6.k
    and (_hybrid_recall_v6.token_budget is null or b.cumulative_tokens <= _hybrid_recall_v6.token_budget)
  order by b.pos;
end
$$;

-- On a Citus cluster (the extension is there: docs/SCALING.md) the search and the read of its
-- candidates are planned per call (plan_cache_mode auto, under which Citus makes custom
-- plans): Citus cannot plan a generic plan of a query on a distributed table that takes
-- parameters ("could not create distributed plan"). One node keeps the generic plans.
do $$
begin
  if exists (select from pg_extension where extname = 'citus') then
    alter function recall._recall_arms_v6 set plan_cache_mode to auto;
    alter function recall._hybrid_recall_v6 set plan_cache_mode to auto;
  end if;
end
$$;

-- hybrid_recall_v6: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v6(
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
    return query select * from recall._hybrid_recall_v6(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null);
    return;
  end if;
  if token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', token_budget using errcode = '22023';
  end if;
  -- the first k rows, then v5's fill (recall._fill_v6)
  return query
  with
  ranked as materialized (
    select r.*
    from recall._hybrid_recall_v6(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null)
      with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_v6(hybrid_recall_v6.agent_id,
                         (select array_agg(x.chunk_id order by x.ordinality) from ranked x),
                         token_budget) f
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

comment on function recall.hybrid_recall_v6 is $c$
hybrid_recall v6: recall.hybrid_recall_v5 (see its comment, and v4's: candidates, scores,
de-duplication, order, k, memories, filters, token budget fill, rows), fast under row-level
security. The same rows as v5 for the same inputs and data, for every caller that may read
agent_id. The search (text plan, vector arm, text arm) runs as the schema owner
(recall._recall_arms_v6, SECURITY DEFINER) once recall._check_reader_v6 has decided, as the
policies of recall.chunks would, that the calling role may read agent_id; the rows are then read
by primary key as the caller, under row-level security. A bound role (recall.bind_agent) may
read its agent only; another recall_agent role the agent named by recall.agent_id; recall_admin,
the owner, superusers and BYPASSRLS roles any agent. For any other agent_id: SQLSTATE 42501
(v5 returned no row), after the argument checks (22023, as v5). Called from another role's
SECURITY DEFINER function it takes v5's path, entirely under row-level security.
$c$;

-- _session_recall_v6: recall.session_recall_v4's body (checks, pool, session stages, _finish)
-- with its pool from recall._hybrid_recall_v6 without labels: session_title and role are read
-- for the rows returned only
create or replace function recall._session_recall_v6(
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
declare
  pool_rows recall.recall_row_v4[];
  cap_ids bigint[];
  cap_scores float8[];
  cap_ranks int[];
  cap_session_scores float8[];
  fin_ids bigint[];
  fin_scores float8[];
  fin_pos bigint[];
  fin_tokens bigint[];
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
  -- every other argument is checked by _hybrid_recall_v6, with the same messages

  -- stage 0: the pool (v4's), without labels; read first, in a statement of its own (on a
  -- Citus cluster the statement below runs on the agent's shard, where a call of another
  -- recall function that queries the tables cannot be nested)
  select array_agg(h) into pool_rows
  from recall._hybrid_recall_v6(
      agent_id => _session_recall_v6.agent_id, query_text => _session_recall_v6.query_text,
      query_embedding => _session_recall_v6.query_embedding, k => 1000,
      exclude_session_id => _session_recall_v6.exclude_session_id,
      filter => _session_recall_v6.filter, kinds => _session_recall_v6.kinds,
      since => _session_recall_v6.since, until => _session_recall_v6.until,
      vector_weight => _session_recall_v6.vector_weight, text_weight => _session_recall_v6.text_weight,
      recency_weight => _session_recall_v6.recency_weight,
      importance_weight => _session_recall_v6.importance_weight,
      half_life => _session_recall_v6.half_life, as_of => _session_recall_v6.as_of,
      candidates => _session_recall_v6.candidates,
      dedup_similarity => 2, p_labels => false) h;

  -- stages 1 and 2 and turns_per_session: v4's, unchanged (the candidates as arrays)
  with
  pool as (select u.* from unnest(pool_rows) as u),
  -- stages 1 and 2, turns_per_session and _finish: v4's, unchanged
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
                                                          _session_recall_v6.query_embedding), 0)
             as session_score
    from per_session ps
    join recall.sessions s on s.agent_id = _session_recall_v6.agent_id and s.session_id = ps.session_id
  ),
  top_sessions as (
    select x.session_id, x.session_score,
           row_number() over (order by x.session_score desc, x.session_id)::int as session_rank
    from sessions_scored x
    order by session_rank
    limit n_sessions
  ),
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
  capped as (
    select x.*
    from (select r.*,
                 row_number() over (partition by r.session_id
                                    order by r.final_score desc, r.created_at desc, r.chunk_id desc) as in_session
          from reranked r) x
    where _session_recall_v6.turns_per_session is null or x.kind = 'memory'
       or x.in_session <= _session_recall_v6.turns_per_session
  )
  select array_agg(x.chunk_id), array_agg(x.final_score), array_agg(x.session_rank),
         array_agg(x.session_score)
    into cap_ids, cap_scores, cap_ranks, cap_session_scores
  from capped x;

  -- _finish (v4's, for the chunks of agent_id)
  select array_agg(f.chunk_id order by f.pos), array_agg(f.score order by f.pos),
         array_agg(f.pos order by f.pos), array_agg(f.cumulative_tokens order by f.pos)
    into fin_ids, fin_scores, fin_pos, fin_tokens
  from recall._finish_v6(_session_recall_v6.agent_id, cap_ids, cap_scores, _session_recall_v6.k,
                         _session_recall_v6.token_budget, _session_recall_v6.dedup_similarity) f;

  -- the labels of the rows returned (v4 read them for the whole pool)
  return query
  select x.chunk_id, x.session_id, x.kind, x.content, x.created_at, f.score, x.similarity,
         x.text_rank, x.recency, x.importance, x.n_tokens, f.cumulative_tokens, x.metadata,
         x.message_ids, c.session_rank, c.session_score,
         x.memory_id, x.agent_id,
         (select s.title from recall.sessions s
          where s.agent_id = _session_recall_v6.agent_id and s.session_id = x.session_id),
         (select string_agg(r.role, '+' order by r.first_at)
          from (select m.role, min(u.i) as first_at
                from unnest(x.message_ids) with ordinality as u(message_id, i)
                join recall.messages m on m.message_id = u.message_id
                where m.agent_id = _session_recall_v6.agent_id
                group by m.role) r),
         x.memory_kind
  from unnest(fin_ids, fin_scores, fin_pos, fin_tokens) as f(chunk_id, score, pos, cumulative_tokens)
  join unnest(cap_ids, cap_ranks, cap_session_scores) as c(chunk_id, session_rank, session_score)
    on c.chunk_id = f.chunk_id
  join unnest(pool_rows) as x on x.chunk_id = f.chunk_id
  order by f.pos;
end
$$;

-- session_recall_v6: see the COMMENT below for the contract
create or replace function recall.session_recall_v6(
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
    from recall._fill_v6(session_recall_v6.agent_id,
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

comment on function recall.session_recall_v6 is $c$
session_recall v6: recall.session_recall_v5 (see its comment) with its pool from v6's search
(recall.hybrid_recall_v6's comment: fast under row-level security; SQLSTATE 42501 for an agent
the caller may not read). The same rows as v5 for the same inputs and data; session_title and
role are read for the rows returned only (v5 read them for the whole pool of up to 1000).
$c$;

-- auto_context_v6: recall.auto_context_v4's body (see the COMMENT below), its Related section from
-- v6's search and the caller's right to read agent_id checked first
create or replace function recall.auto_context_v6(
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
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', auto_context_v6.project,
                                                      'branch', auto_context_v6.branch));
  related_query text := nullif(btrim(task_text), '');
  related_embedding vector := task_embedding;
  latest text;
  now_ts timestamptz := coalesce(as_of, now());
  memory_session text := 'memories:' || auto_context_v6.agent_id;
  pinned_tokens bigint;
  budget_left bigint;
  related_rows recall.recall_row_v4[];
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
  -- the caller may read agent_id (else 42501), decided as the policies do; called from another
  -- role's SECURITY DEFINER function, row-level security alone decides (as in v4)
  if current_user::text = recall._session_role_v6() then
    perform recall._check_reader_v6(auto_context_v6.agent_id);
  end if;

  -- a branch with no history yet (just created): the history of its project instead
  if scope ? 'branch' and not exists (
       select from recall.chunks c
       where c.agent_id = auto_context_v6.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope (the memories
  -- session is no work session): its summary (or title) as text, its summary embedding (or
  -- the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = auto_context_v6.agent_id
      and s.session_id <> memory_session
      and (exclude_session_id is null or s.session_id <> exclude_session_id)
      and (not scope ? 'project' or s.project = scope->>'project')
      and (not scope ? 'branch' or s.branch = scope->>'branch')
    order by s.ended_at desc nulls last, s.started_at desc, s.session_id desc
    limit 1;
    if latest is not null and related_embedding is null then
      select avg(c.embedding) into related_embedding
      from recall.chunks c
      where c.agent_id = auto_context_v6.agent_id and c.session_id = latest
        and c.embedding is not null and c.kind <> 'summary';
    end if;
  end if;

  -- Pinned: the agent's pinned memories valid now (at as_of), of this project or of none,
  -- most important (then newest) first, as many as the whole budget holds; the other sections
  -- share what they leave
  select coalesce(max(x.run), 0) into pinned_tokens
  from (select sum(c.n_tokens) over (order by c.importance desc, c.created_at desc, c.chunk_id desc
                                     rows unbounded preceding) as run
        from recall.chunks c
        where c.agent_id = auto_context_v6.agent_id and c.kind = 'memory' and c.pinned
          and (c.valid_until is null or c.valid_until > auto_context_v6.as_of)
          and (auto_context_v6.as_of is null or c.valid_from <= auto_context_v6.as_of)
          and (auto_context_v6.project is null or not c.metadata ? 'project'
               or c.metadata->>'project' = auto_context_v6.project)) x
  where x.run <= token_budget;
  budget_left := token_budget - pinned_tokens;

  -- Related's search, in a statement of its own (on a Citus cluster the statement below runs on
  -- the agent's shard, where a call of another recall function that queries the tables cannot
  -- be nested): hybrid recall v6 (v4's rows) for the task, or for the latest work
  if related_query is not null or related_embedding is not null then
    select array_agg(h) into related_rows
    from recall._hybrid_recall_v6(
      agent_id => auto_context_v6.agent_id, query_text => related_query,
      query_embedding => related_embedding,
      k => least(1000, greatest(60, token_budget / 25)),
      exclude_session_id => exclude_session_id, as_of => as_of,
      scope_project => case when auto_context_v6.all_projects then null
                            else auto_context_v6.project end,
      p_labels => false) h;
  end if;

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
          where c.agent_id = auto_context_v6.agent_id and c.kind = 'memory' and c.pinned
            and (c.valid_until is null or c.valid_until > auto_context_v6.as_of)
            and (auto_context_v6.as_of is null or c.valid_from <= auto_context_v6.as_of)
            and (auto_context_v6.project is null or not c.metadata ? 'project'
                 or c.metadata->>'project' = auto_context_v6.project)) x
    where x.run <= token_budget
  ),
  -- Recent: the newest conversation chunks of this project and branch
  recent as (
    select c.chunk_id, 'recent'::text as section,
           recall._recency(extract(epoch from now_ts - c.created_at)::float8, 7 * 86400) as score
    from recall.chunks c
    where c.agent_id = auto_context_v6.agent_id
      and c.metadata @> scope
      and c.kind in ('turn_pair', 'window', 'message', 'summary')
      and (exclude_session_id is null or c.session_id <> exclude_session_id)
    order by c.created_at desc, c.chunk_id desc
    limit 20
  ),
  -- Related: hybrid recall v6 (v4's rows) for the task, or for the latest work (then from other sessions:
  -- the latest one is Recent already), in the project when one is given (with the memories
  -- of no project), agent-wide with all_projects. What the repository itself holds (files
  -- read, written or searched by a file tool) is left out, and other tool input/output counts
  -- 0.8 of its score, so that explanations and decisions come first.
  related as (
    select h.chunk_id, 'related'::text as section,
           h.score * case when h.kind = 'tool' then 0.8 else 1 end as score
    from unnest(related_rows) as h
    where h.session_id is distinct from latest
      and not (h.kind = 'tool' and h.metadata->>'tool_name' in
               ('Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit', 'NotebookRead', 'Glob',
                'Grep', 'LS'))
  ),
  -- Failures to avoid: what went wrong before, most relevant (then newest) first ...
  failed as (
    select c.chunk_id, c.session_id,
           coalesce(recall._similarity(c.embedding, related_embedding), 0)
           + 0.2 * recall._recency(extract(epoch from now_ts - c.created_at)::float8, 30 * 86400) as score,
           (select max(m.seq) from recall.messages m
            where m.agent_id = auto_context_v6.agent_id and m.message_id = any (c.message_ids)) as last_seq
    from recall.chunks c
    where c.agent_id = auto_context_v6.agent_id
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
      where c.agent_id = auto_context_v6.agent_id and c.session_id = f.session_id and m.agent_id = auto_context_v6.agent_id
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
          join recall.chunks c on c.agent_id = auto_context_v6.agent_id and c.chunk_id = r.chunk_id) x
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
          join recall.chunks c on c.agent_id = auto_context_v6.agent_id and c.chunk_id = f.chunk_id) x
    where x.run <= budget_left * failure_share
  ),
  shown as (
    select chunk_id from pinned_kept union all
    select chunk_id from recent_kept union all select chunk_id from failures_kept
  ),
  -- ... then Related, within the rest of the budget; a code block whose whole message is
  -- shown (as a message or turn pair, here or above) is left out. The chat chunks shown or
  -- related are read once, by primary key (v4 searched the agent's chunks for each code block:
  -- ~600 ms for 160 related rows at 20k chunks)
  shown_chat as materialized (
    select o.message_ids
    from recall.chunks o
    where o.chunk_id in (select chunk_id from shown union all select chunk_id from related)
      and o.agent_id = auto_context_v6.agent_id
      and o.kind in ('turn_pair', 'window', 'message')
  ),
  related_rows as (
    select r.chunk_id, r.section, r.score, r.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of, c.n_tokens
    from related r
    join recall.chunks c on c.agent_id = auto_context_v6.agent_id and c.chunk_id = r.chunk_id
    where r.chunk_id not in (select chunk_id from shown)
      and not (c.kind = 'code' and exists (
            select from shown_chat o where o.message_ids @> c.message_ids))
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
                where m.agent_id = auto_context_v6.agent_id
                group by m.role) r),
         c.memory_kind
  from ordered o
  join recall.chunks c on c.agent_id = auto_context_v6.agent_id and c.chunk_id = o.chunk_id
  left join recall.sessions s on s.agent_id = auto_context_v6.agent_id and s.session_id = c.session_id
  order by o.pos;
end
$$;


comment on function recall.auto_context_v6 is $c$
auto_context v6: recall.auto_context_v4 (see its comment: sections pinned, recent, related,
failures, budget, rows) with the Related section from v6's search (recall.hybrid_recall_v6's
comment: fast under row-level security). The same rows as v4 for the same inputs and data, for
every caller that may read agent_id; for another agent_id SQLSTATE 42501 (v4 returned no row),
after the argument checks (22023, as v4).
$c$;
