-- sql/released/v15.sql: release 15: auto_context_v15: v14's with Recent filled turn by turn, so
-- that a session's turns are one passage. Never edit: the file's SHA-256 is pinned in
-- sql/frozen.txt and `make lint` (python -m pyrecall._sqlcheck) fails when it changes or when a
-- function here reaches one that is neither in this file, an older release, shared.sql nor
-- sql/released/shared.txt. sql/README.md says how a new version is released.
--
-- Why: Recent (the recap of the latest work an agent is given at every session start) took turn
-- pairs whole, since release 12, so that an agent's question never came without its answer. A
-- session's exchanges then came as a row each, and a message between two turn pairs (an answer
-- after tool calls) as one more: `make demo`'s flaky-test session was three rows with three
-- headers where it is one conversation. Release 13's fill shows a question only with its answer
-- for every unit, so Recent no longer needs whole pairs: v15 fills it turn by turn and the turns
-- of a session, read in order, join into one passage (tool calls between them aside), as in
-- Related. Pinned, Related and Failures are v14's; hybrid_recall and session_recall stay at v13.

-- auto_context_v15: see the COMMENT below for the contract
create or replace function recall.auto_context_v15(
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
set plan_cache_mode to force_custom_plan    -- see sql/idempotent/085-plan-settings.sql
as $$
#variable_conflict use_column
declare
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', auto_context_v15.project,
                                                      'branch', auto_context_v15.branch));
  related_query text := nullif(btrim(task_text), '');
  related_embedding vector := task_embedding;
  latest text;
  now_ts timestamptz := coalesce(as_of, now());
  memory_session text := 'memories:' || auto_context_v15.agent_id;
  pinned_tokens bigint;
  budget_left bigint;
  related_rows recall.recall_row_v4[];
  -- the rows of Pinned and Failures, in their order, and the messages the context shows
  k_chunk bigint[]; k_section text[]; k_score float8[]; k_grp bigint[]; k_sub int[];
  k_res bigint[]; k_tokens int[];
  failure_chunks bigint[];
  shown_msgs bigint[];
  -- Recent's candidates (the newest chunks, newest first), what the fill took, and what it shows
  rec_ids bigint[]; rec_scores float8[];
  recent_filled jsonb;
  recent_msgs bigint[];
  recent_whole bigint[];          -- the chunks it shows whole
  related_left int;
  -- Related's ranking (the chunks the fill may take from, best first) and what the fill took
  rel_ids bigint[]; rel_scores float8[];
  filled jsonb;
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
    perform recall._check_reader_v6(auto_context_v15.agent_id);
  end if;

  -- a branch with no history yet (just created): the history of its project instead
  if scope ? 'branch' and not exists (
       select from recall.chunks c
       where c.agent_id = auto_context_v15.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope (the memories
  -- session is no work session): its summary (or title) as text, its summary embedding (or
  -- the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = auto_context_v15.agent_id
      and s.session_id <> memory_session
      and (exclude_session_id is null or s.session_id <> exclude_session_id)
      and (not scope ? 'project' or s.project = scope->>'project')
      and (not scope ? 'branch' or s.branch = scope->>'branch')
    order by s.ended_at desc nulls last, s.started_at desc, s.session_id desc
    limit 1;
    if latest is not null and related_embedding is null then
      select avg(c.embedding) into related_embedding
      from recall.chunks c
      where c.agent_id = auto_context_v15.agent_id and c.session_id = latest
        and c.embedding is not null and c.kind <> 'summary';
    end if;
  end if;

  -- Related's search, in a statement of its own (on a Citus cluster a statement that runs on
  -- the agent's shard cannot nest a call of another recall function that queries the tables):
  -- hybrid recall v10's search for the task, or for the latest work
  if related_query is not null or related_embedding is not null then
    select array_agg(h) into related_rows
    from recall._hybrid_recall_v10(
      agent_id => auto_context_v15.agent_id, query_text => related_query,
      query_embedding => related_embedding,
      k => least(1000, greatest(60, token_budget / 25)),
      exclude_session_id => exclude_session_id, as_of => as_of,
      scope_project => case when auto_context_v15.all_projects then null
                            else auto_context_v15.project end,
      p_labels => false) h;
  end if;

  -- Pinned: the agent's pinned memories valid now (at as_of), of this project or of none,
  -- most important (then newest) first, as many as the whole budget holds; the other sections
  -- share what they leave (budget_left). Kept in arrays with Failures below: Recent and Related
  -- are filled turn by turn around them, each from what the sections before it leave of the
  -- budget and of the messages (no message shown twice)
  select array_agg(p.chunk_id order by p.ord), array_agg('pinned'::text order by p.ord),
         array_agg(p.score order by p.ord), array_agg(p.chunk_id order by p.ord),
         array_agg(0 order by p.ord), array_agg(null::bigint order by p.ord),
         array_agg(p.n_tokens order by p.ord)
    into k_chunk, k_section, k_score, k_grp, k_sub, k_res, k_tokens
  from (select x.chunk_id, x.score, x.n_tokens, row_number() over (order by x.score desc, x.chunk_id desc) as ord
        from (select c.chunk_id, c.importance::float8 as score, c.n_tokens,
                     sum(c.n_tokens) over (order by c.importance desc, c.created_at desc, c.chunk_id desc
                                           rows unbounded preceding) as run
              from recall.chunks c
              where c.agent_id = auto_context_v15.agent_id and c.kind = 'memory' and c.pinned
                and (c.valid_until is null or c.valid_until > auto_context_v15.as_of)
                and (auto_context_v15.as_of is null or c.valid_from <= auto_context_v15.as_of)
                and (auto_context_v15.project is null or not c.metadata ? 'project'
                     or c.metadata->>'project' = auto_context_v15.project)) x
        where x.run <= token_budget) p;
  pinned_tokens := coalesce((select sum(x) from unnest(k_tokens) as x), 0);
  budget_left := token_budget - pinned_tokens;
  select array_agg(distinct u.id) into shown_msgs
  from recall.chunks c
  cross join lateral unnest(c.message_ids) as u(id)
  where c.agent_id = auto_context_v15.agent_id and c.chunk_id = any (coalesce(k_chunk, '{}'));

  -- Recent: the newest conversation chunks of this project and branch (v10's twenty), newest
  -- first, given to the fill with their recency as score and no query, turn by turn (v15: turn
  -- pairs too, where v14 took them whole): a session's turns shown are one passage where no
  -- text message lies between them (tool calls aside), a chat's overlapping windows' turns shown
  -- once, an agent's question only with its answer (the fill's rule since v13); summaries
  -- whole; what does not fit skipped, the newest trimmed when not one fits
  select array_agg(r.chunk_id order by r.score desc, r.chunk_id desc),
         array_agg(r.score order by r.score desc, r.chunk_id desc)
    into rec_ids, rec_scores
  from (select c.chunk_id,
               recall._recency(extract(epoch from now_ts - c.created_at)::float8, 7 * 86400) as score
        from recall.chunks c
        where c.agent_id = auto_context_v15.agent_id
          and c.metadata @> scope
          and c.kind in ('turn_pair', 'window', 'message', 'summary')
          and (exclude_session_id is null or c.session_id <> exclude_session_id)
        order by c.created_at desc, c.chunk_id desc
        limit 20) r;
  if rec_ids is not null and floor(budget_left * recent_share) >= 1 then
    select jsonb_agg(to_jsonb(f) order by f.pos) into recent_filled
    from recall._fill_v13(auto_context_v15.agent_id, rec_ids, rec_scores,
                          floor(budget_left * recent_share)::int, null, 0, null, 0, 0, shown_msgs,
                          false) f;
  end if;
  -- what Recent shows: its passages' messages, and its whole chunks' (read by id: the fill's
  -- rows read into arrays first, a Citus cluster cannot join a function of a variable with a table)
  select coalesce(array_agg(x.id) filter (where x.id is not null), '{}'),
         coalesce(array_agg(x.chunk_id) filter (where x.id is null), '{}')
    into recent_msgs, recent_whole
  from (select jsonb_array_elements_text(f.value->'message_ids')::bigint as id, null::bigint as chunk_id
        from jsonb_array_elements(coalesce(recent_filled, '[]')) f
        where jsonb_typeof(f.value->'message_ids') = 'array'
        union all
        select null, (f.value->>'chunk_id')::bigint
        from jsonb_array_elements(coalesce(recent_filled, '[]')) f
        where jsonb_typeof(f.value->'message_ids') <> 'array') x;
  select recent_msgs || coalesce(array_agg(u.id), '{}') into recent_msgs
  from recall.chunks c
  cross join lateral unnest(c.message_ids) as u(id)
  where c.agent_id = auto_context_v15.agent_id and c.chunk_id = any (recent_whole);
  shown_msgs := coalesce(shown_msgs, '{}') || recent_msgs;

  -- Failures (v10's): what went wrong before, each followed by what the agent concluded from
  -- it, within their share of budget_left; a failure or resolution Recent shows (the chunk, or
  -- every message of it: v10 left out the chunks Recent showed) is left out
  select k_chunk || coalesce(array_agg(k.chunk_id order by k.ord), '{}'),
         k_section || coalesce(array_agg(k.section order by k.ord), '{}'),
         k_score || coalesce(array_agg(k.score order by k.ord), '{}'),
         k_grp || coalesce(array_agg(k.grp_id order by k.ord), '{}'),
         k_sub || coalesce(array_agg(k.sub order by k.ord), '{}'),
         k_res || coalesce(array_agg(k.resolution_of order by k.ord), '{}'),
         k_tokens || coalesce(array_agg(k.n_tokens order by k.ord), '{}'),
         coalesce(array_agg(k.chunk_id), '{}')
    into k_chunk, k_section, k_score, k_grp, k_sub, k_res, k_tokens, failure_chunks
  from (
    with
    -- what went wrong before, most relevant (then newest) first ...
    failed as (
      select c.chunk_id, c.session_id, c.message_ids,
             coalesce(recall._similarity(c.embedding, related_embedding), 0)
             + 0.2 * recall._recency(extract(epoch from now_ts - c.created_at)::float8, 30 * 86400) as score,
             (select max(m.seq) from recall.messages m
              where m.agent_id = auto_context_v15.agent_id and m.message_id = any (c.message_ids)) as last_seq
      from recall.chunks c
      where c.agent_id = auto_context_v15.agent_id
        and c.metadata @> scope
        and (exclude_session_id is null or c.session_id <> exclude_session_id)
        and recall._is_failure(c.kind, c.content, c.metadata)
      order by 4 desc, c.chunk_id desc
      limit 10
    ),
    -- ... each followed by what the agent concluded from it: the first thinking or text of the
    -- assistant after it in its session (itself no failure)
    resolutions as (
      select f.chunk_id as failure_id, r.chunk_id, r.message_ids, f.score
      from failed f
      cross join lateral (
        select c.chunk_id, c.message_ids
        from recall.chunks c
        cross join lateral unnest(c.message_ids) as u(message_id)
        join recall.messages m on m.message_id = u.message_id
        where c.agent_id = auto_context_v15.agent_id and c.session_id = f.session_id and m.agent_id = auto_context_v15.agent_id
          and c.kind in ('thinking', 'message', 'turn_pair', 'window')
          and m.role = 'assistant' and m.seq > f.last_seq
          and not recall._is_failure(c.kind, c.content, c.metadata)
        order by m.seq, c.part
        limit 1) r
    ),
    failure_rows as (
      select f.chunk_id, 'failures'::text as section, f.score, f.chunk_id as grp_id, 0 as sub,
             null::bigint as resolution_of
      from failed f
      where not (f.chunk_id = any (recent_whole)
                 or cardinality(f.message_ids) > 0 and f.message_ids <@ recent_msgs)
      union all
      (select distinct on (r.chunk_id) r.chunk_id, 'failures', r.score, r.failure_id, 1, r.failure_id
       from resolutions r
       join failed f on f.chunk_id = r.failure_id
       where not (r.chunk_id = any (recent_whole)
                  or cardinality(r.message_ids) > 0 and r.message_ids <@ recent_msgs)
         and not (f.chunk_id = any (recent_whole)
                  or cardinality(f.message_ids) > 0 and f.message_ids <@ recent_msgs)
         and r.chunk_id not in (select chunk_id from failed)
       order by r.chunk_id, r.score desc)
    ),
    failures_kept as (
      select x.*
      from (select f.*, c.n_tokens,
                   sum(c.n_tokens) over (order by f.score desc, f.grp_id desc, f.sub
                                         rows unbounded preceding) as run
            from failure_rows f
            join recall.chunks c on c.agent_id = auto_context_v15.agent_id and c.chunk_id = f.chunk_id) x
      where x.run <= budget_left * failure_share
    )
    select f.chunk_id, f.section, f.score, f.grp_id, f.sub, f.resolution_of, f.n_tokens,
           row_number() over (order by f.score desc, f.grp_id desc, f.sub) as ord
    from failures_kept f
  ) k;
  select shown_msgs || coalesce(array_agg(u.id), '{}') into shown_msgs
  from recall.chunks c
  cross join lateral unnest(c.message_ids) as u(id)
  where c.agent_id = auto_context_v15.agent_id and c.chunk_id = any (failure_chunks);

  -- ... then Related, within the rest of the budget: v13's fill (recall._fill_v13: each turn of
  -- the ranked chat chunks valued by its chunk's score, its own words, its own vector and its
  -- speaker; adjacent turns one passage; skip what does not fit and go on; the best unit trimmed
  -- when not one fits) over the related chunks, best first, leaving out every message Pinned,
  -- Recent or Failures shows (a turn is paid for once, a code block of a shown message left out)
  related_left := greatest(budget_left
                           - coalesce((select sum((f.value->>'n_tokens')::int)
                                       from jsonb_array_elements(coalesce(recent_filled, '[]')) f), 0)
                           - coalesce((select sum(x.t) from unnest(k_section, k_tokens) as x(s, t)
                                       where x.s = 'failures'), 0), 0)::int;
  -- Related: the search's rows (then from other sessions than the latest, which Recent shows,
  -- when there is no task), in the project when one is given (with the memories of no project),
  -- agent-wide with all_projects. What the repository itself holds (files read, written or
  -- searched by a file tool) is left out, and other tool input/output counts 0.8 of its score,
  -- so that explanations and decisions come first.
  select array_agg(x.chunk_id order by x.score desc, x.chunk_id desc),
         array_agg(x.score order by x.score desc, x.chunk_id desc)
    into rel_ids, rel_scores
  from (select h.chunk_id, h.score * case when h.kind = 'tool' then 0.8 else 1 end as score
        from unnest(related_rows) as h
        where h.session_id is distinct from latest
          and not (h.chunk_id = any (coalesce(k_chunk, '{}') || recent_whole))
          and not (h.kind = 'tool' and h.metadata->>'tool_name' in
                   ('Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit', 'NotebookRead', 'Glob',
                    'Grep', 'LS'))) x;
  if rel_ids is not null and related_left > 0 then
    select jsonb_agg(to_jsonb(f) order by f.pos) into filled
    from recall._fill_v13(auto_context_v15.agent_id, rel_ids, rel_scores, related_left,
                          related_query, 0.2, related_embedding, 0.4, 0.2, shown_msgs, false) f;
  end if;

  return query
  with
  kept as (
    select k.*, case k.section when 'pinned' then 0 else 3 end as sec,
           null::int as fill_pos, null::text as body, null::int as body_tokens,
           null::bigint[] as body_ids, null::jsonb as extra
    from unnest(k_chunk, k_section, k_score, k_grp, k_sub, k_res)
         as k(chunk_id, section, score, grp_id, sub, resolution_of)
  ),
  -- Recent's and Related's rows: the fills' passages and whole chunks, in their order, each
  -- with the score of its chunk (recency; the related score)
  fills as (
    select f.chunk_id, x.section, s.score, f.chunk_id as grp_id, 0 as sub,
           null::bigint as resolution_of, x.sec, f.pos as fill_pos, f.content as body,
           f.n_tokens as body_tokens, f.message_ids as body_ids,
           jsonb_strip_nulls(jsonb_build_object('merged_chunk_ids', f.merged,
                                                'trimmed_from_tokens', f.trimmed_from)) as extra
    from (values ('recent'::text, 1, coalesce(recent_filled, '[]'), rec_ids, rec_scores),
                 ('related', 2, coalesce(filled, '[]'), rel_ids, rel_scores))
         as x(section, sec, rows_, ids, scores)
    cross join lateral jsonb_to_recordset(x.rows_) as f(chunk_id bigint, pos int, content text,
                                                        n_tokens int, message_ids bigint[],
                                                        merged jsonb, trimmed_from int)
    join lateral unnest(x.ids, x.scores) as s(chunk_id, score) on s.chunk_id = f.chunk_id
  ),
  -- (v14) where each row of the fills sits: its session, where in it it starts (a passage: its
  -- first turn; a whole chunk: its first message), and its session's newest row
  -- (Recent's rows only, each looked up by its key: a join of the fills with recall.chunks was
  -- planned as a scan of the agent's chunks, +6-8 ms at 100k)
  placed as (
    select f.*, c.sess, c.at_seq, max(c.at) over (partition by f.sec, c.sess) as sess_newest
    from fills f
    left join lateral (
      select ch.session_id as sess, ch.created_at as at,
             coalesce((select min(m.seq) from recall.messages m
                       where m.agent_id = auto_context_v15.agent_id and m.message_id = any (f.body_ids)),
                      ch.first_seq) as at_seq
      from recall.chunks ch
      where f.sec = 1 and ch.agent_id = auto_context_v15.agent_id and ch.chunk_id = f.chunk_id
    ) c on true
  ),
  -- Recent (v14) in reading order: its sessions newest first, the rows of each as they happened
  -- (the fill takes them newest first: v13 showed a session's last exchange before the ones it
  -- follows); Related in its fill's order, best first; Pinned and Failures as v10 ranks them
  ordered as (
    select k.*,
           row_number() over (order by k.sec,
                                       case when k.sec = 1 then k.sess_newest end desc,
                                       case when k.sec = 1 then k.sess end,
                                       case when k.sec = 1 then k.at_seq end,
                                       k.fill_pos, k.score desc, k.grp_id desc, k.sub) as pos
    from (select *, null::text as sess, null::int as at_seq, null::timestamptz as sess_newest from kept
          union all
          select * from placed) k
  )
  select c.chunk_id, c.session_id, c.kind, coalesce(o.body, c.content), c.created_at, o.score,
         recall._similarity(c.embedding, related_embedding),
         0::float8,
         recall._recency(extract(epoch from now_ts - c.created_at)::float8, 30 * 86400),
         c.importance::float8, coalesce(o.body_tokens, c.n_tokens),
         sum(coalesce(o.body_tokens, c.n_tokens)) over (order by o.pos rows unbounded preceding),
         case when o.resolution_of is not null
                then c.metadata || jsonb_build_object('resolution_of', o.resolution_of)
              when o.extra is not null then c.metadata || o.extra
              else c.metadata end,
         coalesce(o.body_ids, c.message_ids), o.section,
         case when c.kind = 'memory' then c.chunk_id end,
         c.agent_id, s.title,
         (select string_agg(r.role, '+' order by r.first_at)
          from (select m.role, min(u.i) as first_at
                from unnest(coalesce(o.body_ids, c.message_ids)) with ordinality as u(message_id, i)
                join recall.messages m on m.message_id = u.message_id
                where m.agent_id = auto_context_v15.agent_id
                group by m.role) r),
         c.memory_kind
  from ordered o
  join recall.chunks c on c.agent_id = auto_context_v15.agent_id and c.chunk_id = o.chunk_id
  left join recall.sessions s on s.agent_id = auto_context_v15.agent_id and s.session_id = c.session_id
  order by o.pos;
end
$$;

comment on function recall.auto_context_v15 is $c$
auto_context v15: recall.auto_context_v14 with Recent filled turn by turn, turn pairs too (v14
took a turn pair whole): the turns Recent shows of one session, with no text message between
them (tool calls and thinking aside), are one passage, one row, where v14 gave each turn pair and
each message between them a row of its own. An agent's question is shown only with its answer
(recall._fill_v13's rule); an answer may be shown without its question when only it fits. The
sections, their order, Recent's candidates and reading order, Pinned, Failures and Related are
v14's.
auto_context v14: recall.auto_context_v13 with Recent's rows in reading order: its sessions newest
first (by the newest row of each), the rows of a session in the order they happened (where each
starts in its session); v13 gave them in the fill's order, newest first, so that a session's
last exchange came before the ones it follows. Which rows, and every other section, are v13's.
auto_context v13: recall.auto_context_v12 with Recent and Related filled as hybrid_recall_v13
fills a token budget (recall._fill_v13): turns joined into a passage across the tool calls
between them, a user's question to the agent only with its answer (in Related; Recent takes turn
pairs whole, as v12), never when a section before shows the answer. v12 was
recall.auto_context_v10 (see its comment and v6's, v4's: sections pinned,
recent, related, failures, budget shares, rows, security) with Recent and Related filled as
hybrid_recall_v11 fills a token budget, where v10 took whole chunks best first
and stopped at the first that did not fit.
Recent: v10's candidates (the twenty newest conversation chunks of the project and branch),
newest first with their recency as score and no query, within recent_share of what Pinned
leaves: turn by turn (v15; v12-v14 took turn pairs whole), each turn once (a chat's windows
overlap), a session's adjacent turns one passage, an agent's question only with its answer;
summaries whole; what does not fit skipped; the newest unit trimmed when not one fits.
Failures: v10's, leaving out a failure or resolution Recent shows (the chunk, or every message
of it), within failure_share.
Related: v10's related chunks and scores (tool input/output 0.8, file tools and, without a task,
the latest session left out), best first, within what the sections before leave: each turn of a
chat chunk valued by its chunk's score plus 0.2 x the share of the related query's word weight
its own words hold plus 0.4 x the cosine of its own vector to the related embedding x that score
plus 0.2 when a word of the query names its speaker; other chunks (code, tool calls, memories,
thinking) whole; skip and go on; the best unit alone trimmed when not one fits. A message
Pinned, Recent or Failures shows is not in Related (nor a chunk holding one).
A Recent or Related row is a passage or a whole chunk: a passage's content ("Speaker: text"
turns, under the date line of a chat window), n_tokens, message_ids (seq order) and
metadata.merged_chunk_ids (the chunks whose turns it holds) are its own; its chunk_id, score and
other columns those of the chunk that gave it its best turn (two passages may share a chunk_id);
metadata.trimmed_from_tokens on a trimmed unit. Rows in v10's section order (Pinned, Recent,
Related, Failures); Related in the order of their best unit; Recent as said above (v14). The sum of
n_tokens never exceeds token_budget. Same arguments and errors as v10.
$c$;
