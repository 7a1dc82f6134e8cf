
create or replace function recall._lab_prev(p_agent_id text, p_session_id text, p_seq int, p_lag int)
returns int language sql stable set search_path to pg_catalog, public, pg_temp as $f$
  select case when p_lag is null then null
              when p_lag = p_seq - 1 then p_lag
              when not exists (select from recall.messages m2
                               where m2.agent_id = p_agent_id and m2.session_id = p_session_id
                                 and m2.seq > p_lag and m2.seq < p_seq and m2.kind = 'text')
              then p_lag end
$f$;

create or replace function recall._lab_fill_a(p_agent_id text, p_ids bigint[], p_scores float8[],
                                            p_budget int, p_query_text text, p_weight float8,
                                            p_query_embedding vector, p_vector_weight float8,
                                            p_speaker_weight float8, p_shown bigint[],
                                            p_pairs_whole boolean)
returns table (chunk_id bigint, pos int, content text, n_tokens int, message_ids bigint[],
               merged bigint[], trimmed_from int, cumulative_tokens bigint)
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_lexemes text[];               -- the query's words and their idf (v6's text plan)
  v_idfs float8[];
  any_word tsquery;
  total_idf float8;
  word_re text;
  u record;
  best record;
  rk int := 0;
  used int := 0;                  -- tokens taken so far: passages and whole chunks
  min_cost int;                   -- the cheapest unit: below it left, nothing fits
  -- the turns taken: key 'session#seq', and per turn its tokens, date line tokens, ...
  h_key text[] := '{}'; h_msg bigint[] := '{}'; h_sess text[] := '{}'; h_seq int[] := '{}';
  h_tok int[] := '{}'; h_dtok int[] := '{}'; h_dated boolean[] := '{}'; h_rank int[] := '{}';
  h_chunk bigint[] := '{}';
  -- per turn taken: the seq of its session's text message before it (v13: a passage's turns are
  -- adjacent when no text message lies between them, tool calls and thinking aside), and the
  -- key 'session#that seq'
  h_prev int[] := '{}'; h_pkey text[] := '{}';
  -- a turn and, for a question whose answer is not taken yet, its answer: taken together or not
  n_take int; j int; n0 int; used0 int; fits boolean;
  t_mid bigint; t_seq int; t_prev int; t_tok int; t_dtok int; t_dated boolean;
  -- the whole chunks taken, and the messages they hold
  o_chunk bigint[] := '{}'; o_rank int[] := '{}'; o_tokens int[] := '{}'; o_msg bigint[] := '{}';
  i int; q int;
  l_tok int; l_dated boolean; l_first int;
  r_tok int; r_dated boolean; r_first int;
  old_cost int; new_cost int;
  t record;
  best_text text;
  every_word tsquery;             -- every word of the query, the common ones too
begin
  if p_budget is null or p_budget < 1 or p_ids is null then
    return;
  end if;
  -- a turn whose speaker the query names: any of its words (the text plan drops a chat's
  -- speakers' names, found in most of its chunks, which say nothing of a chunk but much of a turn)
  if p_speaker_weight > 0 and p_query_text is not null then
    every_word := (select string_agg(quote_literal(l), ' | ')::tsquery
                   from unnest(tsvector_to_array(to_tsvector('english', p_query_text))) as l);
  end if;
  -- the query's words and their idf, as the text arm weighs them (v10's text plan: its
  -- text_max_words rarest words)
  if p_weight > 0 and p_query_text is not null then
    select x.lexemes, x.idfs, x.rank_q into v_lexemes, v_idfs, any_word
    from recall._text_plan_v10(p_agent_id, p_query_text) x;
    total_idf := (select nullif(sum(x), 0) from unnest(v_idfs) as x);
    -- a turn's text is parsed (to_tsvector, the costly part: ~60 us a turn) only when it
    -- matches this, case aside: a word starting with one of the query's words without its last
    -- two letters (at least two kept), which every word the english stemmer makes that word of
    -- starts with, its changes being to the last two letters ('happy' -> happi, 'skies' ->
    -- sky, 'hoping' -> hope, 'mobility' -> mobil), but for its exceptions 'dying', 'lying',
    -- 'tying' (-> die, lie, tie); a word that starts with a sign (a number, a path) anywhere
    select '(' || string_agg(case when x.pf ~ '^[[:alnum:]_]' then '(^|[^[:alnum:]_])' else '' end
                             || regexp_replace(x.pf, '([^[:alnum:]_])', '\\\1', 'g'), '|') || ')'
      into word_re
    from (select distinct case when l in ('die', 'lie', 'tie') then left(l, 1)
                               else left(l, greatest(char_length(l) - 2, 2)) end as pf
          from unnest(v_lexemes) as l) x;
  end if;
  for u in
    with
    words as (
      select quote_literal(w.lexeme)::tsquery as q, w.idf
      from unnest(v_lexemes, v_idfs) as w(lexeme, idf)
    ),
    pool as (
      select ch.chunk_id, ch.session_id, ch.kind, ch.n_tokens, ch.message_ids, ch.tsv, x.score, x.ord,
             case when p_vector_weight > 0 then recall._similarity(ch.embedding, p_query_embedding) end as cos,
             (ch.kind in ('window', 'message') or ch.kind = 'turn_pair' and not p_pairs_whole) and ch.part = 0
             and cardinality(ch.message_ids) > 0
             and not exists (select from recall.chunks o
                             where o.agent_id = p_agent_id and o.session_id = ch.session_id
                               and o.kind = ch.kind and o.first_seq = ch.first_seq and o.part > 0) as chat,
             v_lexemes is not null and ch.tsv @@ any_word as has_words
      from unnest(p_ids, p_scores) with ordinality as x(id, score, ord)
      join recall.chunks ch on ch.chunk_id = x.id
      where ch.agent_id = p_agent_id
    ),
    -- every turn of a chat chunk once, with the best chunk that holds it
    best_chunk as (
      select distinct on (mid.id) mid.id as message_id, p.chunk_id, p.ord, p.score,
             p.kind = 'window' as dated, p.has_words, p.cos as chunk_cos,
             -- the other turn of a turn pair (v13): a question's answer
             case when p.kind = 'turn_pair'
                  then (select x from unnest(p.message_ids) as x where x <> mid.id limit 1) end as pair_other
      from pool p
      cross join unnest(p.message_ids) as mid(id)
      where p.chat
      order by mid.id, p.ord
    ),
    -- its tokens by the model (else estimated from the same text, four characters a token);
    -- its own words ("Speaker text": the speaker as recall._speaker names it, written out):
    -- those of its text parsed only when its chunk holds one of the query's and its text one
    -- of the prefixes, those of its speaker once per speaker (a word of the query is in
    -- "Speaker text" when it is in the one or the other)
    turns as materialized (
      select b.*, m.session_id, m.seq,
             coalesce(m.n_tokens, greatest(1, ceil(char_length(sp.who || ': ' || m.content || E'\n\n') / 4.0))::int) as tok,
             coalesce(m.date_tokens::int,
                      greatest(1, ceil(char_length('[' || to_char(m.created_at at time zone 'UTC',
                                                                  'FMDD FMMonth YYYY') || E']\n') / 4.0))::int) as dtok,
             sp.who,
             -- its own vector's cosine to the query (013-message-vectors), its chunk's while it has none
             coalesce(case when p_vector_weight > 0 then recall._similarity(m.embedding, p_query_embedding) end,
                      b.chunk_cos) as cos,
             case when b.has_words
                       and m.content ~* word_re
                  then to_tsvector('english', m.content) end as tsv,
             -- a user's question to an agent (no speaker named: not a person of a chat in turn pairs)
             case when m.role = 'user' and sp.who = initcap(m.role) then b.pair_other end as answer_id,
             -- the seq of the session's text message before it (v13): the turn before it in
             -- the pool when that is seq - 1 (a chat's windows: most turns), else read by index
             recall._lab_prev(p_agent_id, m.session_id, m.seq,
                              lag(m.seq) over (partition by m.session_id order by m.seq)) as prev_seq
      from best_chunk b
      join recall.messages m on m.agent_id = p_agent_id and m.message_id = b.message_id
      cross join lateral (select coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                                          nullif(btrim(m.metadata->>'author'), ''), initcap(m.role)) as who) sp
      where m.kind = 'text'
        and not (m.message_id = any (coalesce(p_shown, '{}')))  -- shown already (v12)
    ),
    -- (v13) a question with its answer's seq, the text message before it and its tokens: the
    -- next turn of its turn pair (none when the answer is shown already)
    paired as (
      select t.*, case when t.nx_id = t.answer_id then t.nx_seq end as a_seq,
             case when t.nx_id = t.answer_id then t.nx_prev end as a_prev,
             case when t.nx_id = t.answer_id then t.nx_tok end as a_tok,
             case when t.nx_id = t.answer_id then t.nx_dtok end as a_dtok,
             case when t.nx_id = t.answer_id then t.nx_dated end as a_dated
      from (select t.*, lead(t.message_id) over w as nx_id, lead(t.seq) over w as nx_seq,
                   lead(t.prev_seq) over w as nx_prev, lead(t.tok) over w as nx_tok,
                   lead(t.dtok) over w as nx_dtok, lead(t.dated) over w as nx_dated
            from turns t
            window w as (partition by t.chunk_id order by t.seq)) t
    ),
    speakers as materialized (
      select x.who, to_tsvector('english', x.who) as tsv
      from (select distinct t.who from turns t where t.has_words) x
    ),
    named as materialized (
      select x.who
      from (select distinct t.who from turns t where every_word is not null) x
      where to_tsvector('english', x.who) @@ every_word
    ),
    -- the units: turns, valued by their chunk's score (s) plus p_weight x the share of the
    -- query's idf that their own words hold plus p_vector_weight x their own vector's cosine to
    -- the query x s (when s > 0: a turn gains in proportion to its chunk's standing, so that a
    -- turn of a distractor chunk cannot pass the answer's on meaning alone); other chunks (code,
    -- memories, parts of long windows) whole, valued alike by their own words and vector; plus
    -- p_speaker_weight for a turn whose speaker the query names
    units as (
      select t.message_id, t.session_id, t.seq, t.tok, t.dtok, t.dated, t.chunk_id, t.ord,
             null::text as kind, t.tok as cost, null::bigint[] as chunk_message_ids,
             t.prev_seq, t.answer_id, t.a_seq, t.a_prev, t.a_tok, t.a_dtok, t.a_dated,
             t.score + coalesce(p_weight * ((select sum(w.idf) from words w
                                             where t.tsv @@ w.q or sp.tsv @@ w.q) / total_idf), 0)
             + coalesce(p_vector_weight * t.cos * greatest(t.score, 0), 0)
             + case when nm.who is not null then p_speaker_weight else 0 end as value
      from paired t
      left join speakers sp on sp.who = t.who and t.has_words
      left join named nm on nm.who = t.who
      union all
      select null, p.session_id, null, null, null, null, p.chunk_id, p.ord, p.kind, p.n_tokens,
             p.message_ids, null, null, null, null, null, null, null,
             p.score + case when p.has_words
                            then coalesce(p_weight * ((select sum(w.idf) from words w where p.tsv @@ w.q)
                                                      / total_idf), 0)
                            else 0 end
             + coalesce(p_vector_weight * p.cos * greatest(p.score, 0), 0)
      from pool p
      where not p.chat
        and not (coalesce(p.message_ids, '{}') && coalesce(p_shown, '{}'))  -- shown already (v12)
    )
    select x.*, min(x.cost) over () as min_cost
    from units x
    order by x.value desc, x.ord, x.message_id nulls first
  loop
    rk := rk + 1;
    if rk = 1 then
      best := u;
      min_cost := u.min_cost;
    end if;
    if u.message_id is null then
      -- a chunk that holds a message the context holds already (a code block of a turn taken)
      -- adds nothing: no message is paid twice
      if not (u.chunk_message_ids && h_msg) and used + u.cost <= p_budget then
        o_chunk := o_chunk || u.chunk_id; o_rank := o_rank || rk; o_tokens := o_tokens || u.cost;
        o_msg := o_msg || u.chunk_message_ids;
        used := used + u.cost;
      end if;
    elsif not (u.message_id = any (o_msg) or u.message_id = any (h_msg))
          -- (v13) a question is shown in one passage with its answer, never without it: not
          -- when its answer is shown elsewhere (p_shown, or a whole chunk: a code block of it)
          and not (u.answer_id is not null and not (u.answer_id = any (h_msg))
                   and (u.a_seq is null or u.answer_id = any (o_msg))) then
      -- the turn, and a question's answer with it unless taken already (the question then
      -- joins its passage): both fit or neither is taken; an answer may come alone
      n_take := case when u.answer_id is not null and not (u.answer_id = any (h_msg))
                     then 2 else 1 end;
      n0 := cardinality(h_key); used0 := used; fits := true;
      for j in 1 .. n_take loop
        if j = 1 then
          t_mid := u.message_id; t_seq := u.seq; t_prev := u.prev_seq; t_tok := u.tok;
          t_dtok := u.dtok; t_dated := u.dated;
        else
          t_mid := u.answer_id; t_seq := u.a_seq; t_prev := u.a_prev; t_tok := u.a_tok;
          t_dtok := u.a_dtok; t_dated := u.a_dated;
        end if;
        -- what the turn costs: the passages it joins (the run of taken turns of its session
        -- ending at the text message before it, and the one starting at the text message
        -- after it: v13, tool calls between do not part them; v12, seq - 1 and seq + 1) become
        -- one, headed by the date line of its first turn when any of its turns came from a
        -- chat window
        l_tok := 0; l_dated := false; l_first := null; q := t_prev;
        loop
          i := array_position(h_key, u.session_id || '#' || q);
          exit when i is null;
          l_tok := l_tok + h_tok[i]; l_dated := l_dated or h_dated[i]; l_first := h_dtok[i];
          q := h_prev[i];
        end loop;
        r_tok := 0; r_dated := false; r_first := null; q := t_seq;
        loop
          i := array_position(h_pkey, u.session_id || '#' || q);
          exit when i is null;
          r_tok := r_tok + h_tok[i]; r_dated := r_dated or h_dated[i];
          r_first := coalesce(r_first, h_dtok[i]);
          q := h_seq[i];
        end loop;
        old_cost := l_tok + case when l_dated then l_first else 0 end
                    + r_tok + case when r_dated then r_first else 0 end;
        new_cost := l_tok + t_tok + r_tok
                    + case when l_dated or t_dated or r_dated then coalesce(l_first, t_dtok) else 0 end;
        if used + new_cost - old_cost > p_budget then
          fits := false;
          exit;
        end if;
        h_key := h_key || (u.session_id || '#' || t_seq); h_msg := h_msg || t_mid;
        h_sess := h_sess || u.session_id; h_seq := h_seq || t_seq; h_tok := h_tok || t_tok;
        h_dtok := h_dtok || t_dtok; h_dated := h_dated || t_dated; h_rank := h_rank || rk;
        h_chunk := h_chunk || u.chunk_id;
        h_prev := h_prev || t_prev; h_pkey := h_pkey || (u.session_id || '#' || t_prev);
        used := used + new_cost - old_cost;
      end loop;
      if not fits and cardinality(h_key) > n0 then
        -- the question fitted, its answer did not: neither is taken
        h_key := h_key[1:n0]; h_msg := h_msg[1:n0]; h_sess := h_sess[1:n0]; h_seq := h_seq[1:n0];
        h_tok := h_tok[1:n0]; h_dtok := h_dtok[1:n0]; h_dated := h_dated[1:n0];
        h_rank := h_rank[1:n0]; h_chunk := h_chunk[1:n0]; h_prev := h_prev[1:n0];
        h_pkey := h_pkey[1:n0];
        used := used0;
      end if;
    end if;
    exit when p_budget - used < min_cost;
  end loop;

  if rk = 0 then
    return;
  end if;
  -- not one unit fits: the best one, trimmed to fit (a turn as "Speaker: text"). Its text is
  -- read first, in a statement of its own: on a Citus cluster a statement that reads a table
  -- and calls recall._trim_v6 (which reads recall.messages) is a distributed query nesting
  -- another, which the agent's worker refuses (v7's fill did that)
  if cardinality(h_msg) = 0 and cardinality(o_chunk) = 0 then
    if best.message_id is not null then
      select coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                      nullif(btrim(m.metadata->>'author'), ''), initcap(m.role)) || ': ' || m.content
        into best_text
      from recall.messages m
      where m.agent_id = p_agent_id and m.message_id = best.message_id;
      select * into t from recall._trim_v6(p_agent_id, best_text, best.tok, array[best.message_id], p_budget);
    else
      select c.content into best_text
      from recall.chunks c
      where c.agent_id = p_agent_id and c.chunk_id = best.chunk_id;
      select * into t from recall._trim_v6(p_agent_id, best_text, best.cost, best.chunk_message_ids, p_budget);
    end if;
    if t.content is not null then
      return query select best.chunk_id, 1, t.content, t.n_tokens, t.message_ids, null::bigint[],
                          best.cost, t.n_tokens::bigint;
    end if;
    return;
  end if;

  return query
  with
  taken as (
    select h.*
    from unnest(h_msg, h_sess, h_seq, h_rank, h_chunk, h_dated, h_tok, h_dtok, h_prev)
         as h(id, s, q, rk, ch, dated, tok, dtok, prev)
  ),
  -- a passage: a run of taken turns, each the text message after the one before it (v13)
  starts as (
    select h.*, not exists (select from taken p where p.s = h.s and p.q = h.prev) as first
    from taken h
  ),
  held as (
    select h.*, count(*) filter (where h.first) over (partition by h.s order by h.q) as grp
    from starts h
  ),
  runs as (
    select array_agg(x.id order by x.q) as ids, min(x.rk) as best,
           (array_agg(x.ch order by x.rk))[1] as chunk_id,
           array(select distinct unnest(array_agg(x.ch))) as chunks, bool_or(x.dated) as dated,
           (sum(x.tok) + case when bool_or(x.dated) then (array_agg(x.dtok order by x.q))[1] else 0 end)::int as tokens
    from held x
    group by x.s, x.grp
  ),
  rows_ as (
    select r.chunk_id, r.best, recall._passage_text_v7(p_agent_id, r.ids, r.dated) as body, r.tokens,
           r.ids, r.chunks
    from runs r
    union all
    select o.c, o.rk, null, o.t, null, null
    from unnest(o_chunk, o_rank, o_tokens) as o(c, rk, t)
  )
  select r.chunk_id, (row_number() over (order by r.best))::int, r.body, r.tokens, r.ids, r.chunks,
         null::int, (sum(r.tokens) over (order by r.best rows unbounded preceding))::bigint
  from rows_ r
  order by r.best;
end
$$;

create or replace function recall._lab_auto_context_a(
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
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', _lab_auto_context_a.project,
                                                      'branch', _lab_auto_context_a.branch));
  related_query text := nullif(btrim(task_text), '');
  related_embedding vector := task_embedding;
  latest text;
  now_ts timestamptz := coalesce(as_of, now());
  memory_session text := 'memories:' || _lab_auto_context_a.agent_id;
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
    perform recall._check_reader_v6(_lab_auto_context_a.agent_id);
  end if;

  -- a branch with no history yet (just created): the history of its project instead
  if scope ? 'branch' and not exists (
       select from recall.chunks c
       where c.agent_id = _lab_auto_context_a.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope (the memories
  -- session is no work session): its summary (or title) as text, its summary embedding (or
  -- the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = _lab_auto_context_a.agent_id
      and s.session_id <> memory_session
      and (exclude_session_id is null or s.session_id <> exclude_session_id)
      and (not scope ? 'project' or s.project = scope->>'project')
      and (not scope ? 'branch' or s.branch = scope->>'branch')
    order by s.ended_at desc nulls last, s.started_at desc, s.session_id desc
    limit 1;
    if latest is not null and related_embedding is null then
      select avg(c.embedding) into related_embedding
      from recall.chunks c
      where c.agent_id = _lab_auto_context_a.agent_id and c.session_id = latest
        and c.embedding is not null and c.kind <> 'summary';
    end if;
  end if;

  -- Related's search, in a statement of its own (on a Citus cluster a statement that runs on
  -- the agent's shard cannot nest a call of another recall function that queries the tables):
  -- hybrid recall v10's search for the task, or for the latest work
  if related_query is not null or related_embedding is not null then
    select array_agg(h) into related_rows
    from recall._hybrid_recall_v10(
      agent_id => _lab_auto_context_a.agent_id, query_text => related_query,
      query_embedding => related_embedding,
      k => least(1000, greatest(60, token_budget / 25)),
      exclude_session_id => exclude_session_id, as_of => as_of,
      scope_project => case when _lab_auto_context_a.all_projects then null
                            else _lab_auto_context_a.project end,
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
              where c.agent_id = _lab_auto_context_a.agent_id and c.kind = 'memory' and c.pinned
                and (c.valid_until is null or c.valid_until > _lab_auto_context_a.as_of)
                and (_lab_auto_context_a.as_of is null or c.valid_from <= _lab_auto_context_a.as_of)
                and (_lab_auto_context_a.project is null or not c.metadata ? 'project'
                     or c.metadata->>'project' = _lab_auto_context_a.project)) x
        where x.run <= token_budget) p;
  pinned_tokens := coalesce((select sum(x) from unnest(k_tokens) as x), 0);
  budget_left := token_budget - pinned_tokens;
  select array_agg(distinct u.id) into shown_msgs
  from recall.chunks c
  cross join lateral unnest(c.message_ids) as u(id)
  where c.agent_id = _lab_auto_context_a.agent_id and c.chunk_id = any (coalesce(k_chunk, '{}'));

  -- Recent: the newest conversation chunks of this project and branch (v10's twenty), newest
  -- first, given to the fill with their recency as score and no query: a chat's windows turn
  -- by turn newest chunk first (their overlapping turns shown once, adjacent turns one
  -- passage), turn pairs and summaries whole (a question with its answer); what does not fit
  -- skipped, the newest trimmed when not one fits
  select array_agg(r.chunk_id order by r.score desc, r.chunk_id desc),
         array_agg(r.score order by r.score desc, r.chunk_id desc)
    into rec_ids, rec_scores
  from (select c.chunk_id,
               recall._recency(extract(epoch from now_ts - c.created_at)::float8, 7 * 86400) as score
        from recall.chunks c
        where c.agent_id = _lab_auto_context_a.agent_id
          and c.metadata @> scope
          and c.kind in ('turn_pair', 'window', 'message', 'summary')
          and (exclude_session_id is null or c.session_id <> exclude_session_id)
        order by c.created_at desc, c.chunk_id desc
        limit 20) r;
  if rec_ids is not null and floor(budget_left * recent_share) >= 1 then
    select jsonb_agg(to_jsonb(f) order by f.pos) into recent_filled
    from recall._lab_fill_a(_lab_auto_context_a.agent_id, rec_ids, rec_scores,
                          floor(budget_left * recent_share)::int, null, 0, null, 0, 0, shown_msgs,
                          true) f;
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
  where c.agent_id = _lab_auto_context_a.agent_id and c.chunk_id = any (recent_whole);
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
              where m.agent_id = _lab_auto_context_a.agent_id and m.message_id = any (c.message_ids)) as last_seq
      from recall.chunks c
      where c.agent_id = _lab_auto_context_a.agent_id
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
        where c.agent_id = _lab_auto_context_a.agent_id and c.session_id = f.session_id and m.agent_id = _lab_auto_context_a.agent_id
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
            join recall.chunks c on c.agent_id = _lab_auto_context_a.agent_id and c.chunk_id = f.chunk_id) x
      where x.run <= budget_left * failure_share
    )
    select f.chunk_id, f.section, f.score, f.grp_id, f.sub, f.resolution_of, f.n_tokens,
           row_number() over (order by f.score desc, f.grp_id desc, f.sub) as ord
    from failures_kept f
  ) k;
  select shown_msgs || coalesce(array_agg(u.id), '{}') into shown_msgs
  from recall.chunks c
  cross join lateral unnest(c.message_ids) as u(id)
  where c.agent_id = _lab_auto_context_a.agent_id and c.chunk_id = any (failure_chunks);

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
    from recall._lab_fill_a(_lab_auto_context_a.agent_id, rel_ids, rel_scores, related_left,
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
  ordered as (
    select k.*, row_number() over (order by k.sec, k.fill_pos, k.score desc, k.grp_id desc, k.sub) as pos
    from (select * from kept union all select * from fills) k
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
                where m.agent_id = _lab_auto_context_a.agent_id
                group by m.role) r),
         c.memory_kind
  from ordered o
  join recall.chunks c on c.agent_id = _lab_auto_context_a.agent_id and c.chunk_id = o.chunk_id
  left join recall.sessions s on s.agent_id = _lab_auto_context_a.agent_id and s.session_id = c.session_id
  order by o.pos;
end
$$;

create or replace function recall._lab_fill_none(p_agent_id text, p_ids bigint[], p_scores float8[],
                                            p_budget int, p_query_text text, p_weight float8,
                                            p_query_embedding vector, p_vector_weight float8,
                                            p_speaker_weight float8, p_shown bigint[],
                                            p_pairs_whole boolean)
returns table (chunk_id bigint, pos int, content text, n_tokens int, message_ids bigint[],
               merged bigint[], trimmed_from int, cumulative_tokens bigint)
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_lexemes text[];               -- the query's words and their idf (v6's text plan)
  v_idfs float8[];
  any_word tsquery;
  total_idf float8;
  word_re text;
  u record;
  best record;
  rk int := 0;
  used int := 0;                  -- tokens taken so far: passages and whole chunks
  min_cost int;                   -- the cheapest unit: below it left, nothing fits
  -- the turns taken: key 'session#seq', and per turn its tokens, date line tokens, ...
  h_key text[] := '{}'; h_msg bigint[] := '{}'; h_sess text[] := '{}'; h_seq int[] := '{}';
  h_tok int[] := '{}'; h_dtok int[] := '{}'; h_dated boolean[] := '{}'; h_rank int[] := '{}';
  h_chunk bigint[] := '{}';
  -- per turn taken: the seq of its session's text message before it (v13: a passage's turns are
  -- adjacent when no text message lies between them, tool calls and thinking aside), and the
  -- key 'session#that seq'
  h_prev int[] := '{}'; h_pkey text[] := '{}';
  -- a turn and, for a question whose answer is not taken yet, its answer: taken together or not
  n_take int; j int; n0 int; used0 int; fits boolean;
  t_mid bigint; t_seq int; t_prev int; t_tok int; t_dtok int; t_dated boolean;
  -- the whole chunks taken, and the messages they hold
  o_chunk bigint[] := '{}'; o_rank int[] := '{}'; o_tokens int[] := '{}'; o_msg bigint[] := '{}';
  i int; q int;
  l_tok int; l_dated boolean; l_first int;
  r_tok int; r_dated boolean; r_first int;
  old_cost int; new_cost int;
  t record;
  best_text text;
  every_word tsquery;             -- every word of the query, the common ones too
begin
  if p_budget is null or p_budget < 1 or p_ids is null then
    return;
  end if;
  -- a turn whose speaker the query names: any of its words (the text plan drops a chat's
  -- speakers' names, found in most of its chunks, which say nothing of a chunk but much of a turn)
  if p_speaker_weight > 0 and p_query_text is not null then
    every_word := (select string_agg(quote_literal(l), ' | ')::tsquery
                   from unnest(tsvector_to_array(to_tsvector('english', p_query_text))) as l);
  end if;
  -- the query's words and their idf, as the text arm weighs them (v10's text plan: its
  -- text_max_words rarest words)
  if p_weight > 0 and p_query_text is not null then
    select x.lexemes, x.idfs, x.rank_q into v_lexemes, v_idfs, any_word
    from recall._text_plan_v10(p_agent_id, p_query_text) x;
    total_idf := (select nullif(sum(x), 0) from unnest(v_idfs) as x);
    -- a turn's text is parsed (to_tsvector, the costly part: ~60 us a turn) only when it
    -- matches this, case aside: a word starting with one of the query's words without its last
    -- two letters (at least two kept), which every word the english stemmer makes that word of
    -- starts with, its changes being to the last two letters ('happy' -> happi, 'skies' ->
    -- sky, 'hoping' -> hope, 'mobility' -> mobil), but for its exceptions 'dying', 'lying',
    -- 'tying' (-> die, lie, tie); a word that starts with a sign (a number, a path) anywhere
    select '(' || string_agg(case when x.pf ~ '^[[:alnum:]_]' then '(^|[^[:alnum:]_])' else '' end
                             || regexp_replace(x.pf, '([^[:alnum:]_])', '\\\1', 'g'), '|') || ')'
      into word_re
    from (select distinct case when l in ('die', 'lie', 'tie') then left(l, 1)
                               else left(l, greatest(char_length(l) - 2, 2)) end as pf
          from unnest(v_lexemes) as l) x;
  end if;
  for u in
    with
    words as (
      select quote_literal(w.lexeme)::tsquery as q, w.idf
      from unnest(v_lexemes, v_idfs) as w(lexeme, idf)
    ),
    pool as (
      select ch.chunk_id, ch.session_id, ch.kind, ch.n_tokens, ch.message_ids, ch.tsv, x.score, x.ord,
             case when p_vector_weight > 0 then recall._similarity(ch.embedding, p_query_embedding) end as cos,
             (ch.kind in ('window', 'message') or ch.kind = 'turn_pair' and not p_pairs_whole) and ch.part = 0
             and cardinality(ch.message_ids) > 0
             and not exists (select from recall.chunks o
                             where o.agent_id = p_agent_id and o.session_id = ch.session_id
                               and o.kind = ch.kind and o.first_seq = ch.first_seq and o.part > 0) as chat,
             v_lexemes is not null and ch.tsv @@ any_word as has_words
      from unnest(p_ids, p_scores) with ordinality as x(id, score, ord)
      join recall.chunks ch on ch.chunk_id = x.id
      where ch.agent_id = p_agent_id
    ),
    -- every turn of a chat chunk once, with the best chunk that holds it
    best_chunk as (
      select distinct on (mid.id) mid.id as message_id, p.chunk_id, p.ord, p.score,
             p.kind = 'window' as dated, p.has_words, p.cos as chunk_cos,
             -- the other turn of a turn pair (v13): a question's answer
             case when p.kind = 'turn_pair'
                  then (select x from unnest(p.message_ids) as x where x <> mid.id limit 1) end as pair_other
      from pool p
      cross join unnest(p.message_ids) as mid(id)
      where p.chat
      order by mid.id, p.ord
    ),
    -- its tokens by the model (else estimated from the same text, four characters a token);
    -- its own words ("Speaker text": the speaker as recall._speaker names it, written out):
    -- those of its text parsed only when its chunk holds one of the query's and its text one
    -- of the prefixes, those of its speaker once per speaker (a word of the query is in
    -- "Speaker text" when it is in the one or the other)
    turns as materialized (
      select b.*, m.session_id, m.seq,
             coalesce(m.n_tokens, greatest(1, ceil(char_length(sp.who || ': ' || m.content || E'\n\n') / 4.0))::int) as tok,
             coalesce(m.date_tokens::int,
                      greatest(1, ceil(char_length('[' || to_char(m.created_at at time zone 'UTC',
                                                                  'FMDD FMMonth YYYY') || E']\n') / 4.0))::int) as dtok,
             sp.who,
             -- its own vector's cosine to the query (013-message-vectors), its chunk's while it has none
             coalesce(case when p_vector_weight > 0 then recall._similarity(m.embedding, p_query_embedding) end,
                      b.chunk_cos) as cos,
             case when b.has_words
                       and m.content ~* word_re
                  then to_tsvector('english', m.content) end as tsv,
             -- a user's question to an agent (no speaker named: not a person of a chat in turn pairs)
             case when m.role = 'user' and sp.who = initcap(m.role) then b.pair_other end as answer_id,
             -- the seq of the session's text message before it (v13): the turn before it in
             -- the pool when that is seq - 1 (a chat's windows: most turns), else read by index
             lag(m.seq) over (partition by m.session_id order by m.seq) as prev_seq
      from best_chunk b
      join recall.messages m on m.agent_id = p_agent_id and m.message_id = b.message_id
      cross join lateral (select coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                                          nullif(btrim(m.metadata->>'author'), ''), initcap(m.role)) as who) sp
      where m.kind = 'text'
        and not (m.message_id = any (coalesce(p_shown, '{}')))  -- shown already (v12)
    ),
    -- (v13) a question with its answer's seq, the text message before it and its tokens: the
    -- next turn of its turn pair (none when the answer is shown already)
    paired as (
      select t.*, case when t.nx_id = t.answer_id then t.nx_seq end as a_seq,
             case when t.nx_id = t.answer_id then t.nx_prev end as a_prev,
             case when t.nx_id = t.answer_id then t.nx_tok end as a_tok,
             case when t.nx_id = t.answer_id then t.nx_dtok end as a_dtok,
             case when t.nx_id = t.answer_id then t.nx_dated end as a_dated
      from (select t.*, lead(t.message_id) over w as nx_id, lead(t.seq) over w as nx_seq,
                   lead(t.prev_seq) over w as nx_prev, lead(t.tok) over w as nx_tok,
                   lead(t.dtok) over w as nx_dtok, lead(t.dated) over w as nx_dated
            from turns t
            window w as (partition by t.chunk_id order by t.seq)) t
    ),
    speakers as materialized (
      select x.who, to_tsvector('english', x.who) as tsv
      from (select distinct t.who from turns t where t.has_words) x
    ),
    named as materialized (
      select x.who
      from (select distinct t.who from turns t where every_word is not null) x
      where to_tsvector('english', x.who) @@ every_word
    ),
    -- the units: turns, valued by their chunk's score (s) plus p_weight x the share of the
    -- query's idf that their own words hold plus p_vector_weight x their own vector's cosine to
    -- the query x s (when s > 0: a turn gains in proportion to its chunk's standing, so that a
    -- turn of a distractor chunk cannot pass the answer's on meaning alone); other chunks (code,
    -- memories, parts of long windows) whole, valued alike by their own words and vector; plus
    -- p_speaker_weight for a turn whose speaker the query names
    units as (
      select t.message_id, t.session_id, t.seq, t.tok, t.dtok, t.dated, t.chunk_id, t.ord,
             null::text as kind, t.tok as cost, null::bigint[] as chunk_message_ids,
             t.prev_seq, t.answer_id, t.a_seq, t.a_prev, t.a_tok, t.a_dtok, t.a_dated,
             t.score + coalesce(p_weight * ((select sum(w.idf) from words w
                                             where t.tsv @@ w.q or sp.tsv @@ w.q) / total_idf), 0)
             + coalesce(p_vector_weight * t.cos * greatest(t.score, 0), 0)
             + case when nm.who is not null then p_speaker_weight else 0 end as value
      from paired t
      left join speakers sp on sp.who = t.who and t.has_words
      left join named nm on nm.who = t.who
      union all
      select null, p.session_id, null, null, null, null, p.chunk_id, p.ord, p.kind, p.n_tokens,
             p.message_ids, null, null, null, null, null, null, null,
             p.score + case when p.has_words
                            then coalesce(p_weight * ((select sum(w.idf) from words w where p.tsv @@ w.q)
                                                      / total_idf), 0)
                            else 0 end
             + coalesce(p_vector_weight * p.cos * greatest(p.score, 0), 0)
      from pool p
      where not p.chat
        and not (coalesce(p.message_ids, '{}') && coalesce(p_shown, '{}'))  -- shown already (v12)
    )
    select x.*, min(x.cost) over () as min_cost
    from units x
    order by x.value desc, x.ord, x.message_id nulls first
  loop
    rk := rk + 1;
    if rk = 1 then
      best := u;
      min_cost := u.min_cost;
    end if;
    if u.message_id is null then
      -- a chunk that holds a message the context holds already (a code block of a turn taken)
      -- adds nothing: no message is paid twice
      if not (u.chunk_message_ids && h_msg) and used + u.cost <= p_budget then
        o_chunk := o_chunk || u.chunk_id; o_rank := o_rank || rk; o_tokens := o_tokens || u.cost;
        o_msg := o_msg || u.chunk_message_ids;
        used := used + u.cost;
      end if;
    elsif not (u.message_id = any (o_msg) or u.message_id = any (h_msg))
          -- (v13) a question is shown in one passage with its answer, never without it: not
          -- when its answer is shown elsewhere (p_shown, or a whole chunk: a code block of it)
          and not (u.answer_id is not null and not (u.answer_id = any (h_msg))
                   and (u.a_seq is null or u.answer_id = any (o_msg))) then
      -- the turn, and a question's answer with it unless taken already (the question then
      -- joins its passage): both fit or neither is taken; an answer may come alone
      n_take := case when u.answer_id is not null and not (u.answer_id = any (h_msg))
                     then 2 else 1 end;
      n0 := cardinality(h_key); used0 := used; fits := true;
      for j in 1 .. n_take loop
        if j = 1 then
          t_mid := u.message_id; t_seq := u.seq; t_prev := u.prev_seq; t_tok := u.tok;
          t_dtok := u.dtok; t_dated := u.dated;
        else
          t_mid := u.answer_id; t_seq := u.a_seq; t_prev := u.a_prev; t_tok := u.a_tok;
          t_dtok := u.a_dtok; t_dated := u.a_dated;
        end if;
        -- what the turn costs: the passages it joins (the run of taken turns of its session
        -- ending at the text message before it, and the one starting at the text message
        -- after it: v13, tool calls between do not part them; v12, seq - 1 and seq + 1) become
        -- one, headed by the date line of its first turn when any of its turns came from a
        -- chat window
        l_tok := 0; l_dated := false; l_first := null; q := t_prev;
        loop
          i := array_position(h_key, u.session_id || '#' || q);
          exit when i is null;
          l_tok := l_tok + h_tok[i]; l_dated := l_dated or h_dated[i]; l_first := h_dtok[i];
          q := h_prev[i];
        end loop;
        r_tok := 0; r_dated := false; r_first := null; q := t_seq;
        loop
          i := array_position(h_pkey, u.session_id || '#' || q);
          exit when i is null;
          r_tok := r_tok + h_tok[i]; r_dated := r_dated or h_dated[i];
          r_first := coalesce(r_first, h_dtok[i]);
          q := h_seq[i];
        end loop;
        old_cost := l_tok + case when l_dated then l_first else 0 end
                    + r_tok + case when r_dated then r_first else 0 end;
        new_cost := l_tok + t_tok + r_tok
                    + case when l_dated or t_dated or r_dated then coalesce(l_first, t_dtok) else 0 end;
        if used + new_cost - old_cost > p_budget then
          fits := false;
          exit;
        end if;
        h_key := h_key || (u.session_id || '#' || t_seq); h_msg := h_msg || t_mid;
        h_sess := h_sess || u.session_id; h_seq := h_seq || t_seq; h_tok := h_tok || t_tok;
        h_dtok := h_dtok || t_dtok; h_dated := h_dated || t_dated; h_rank := h_rank || rk;
        h_chunk := h_chunk || u.chunk_id;
        h_prev := h_prev || t_prev; h_pkey := h_pkey || (u.session_id || '#' || t_prev);
        used := used + new_cost - old_cost;
      end loop;
      if not fits and cardinality(h_key) > n0 then
        -- the question fitted, its answer did not: neither is taken
        h_key := h_key[1:n0]; h_msg := h_msg[1:n0]; h_sess := h_sess[1:n0]; h_seq := h_seq[1:n0];
        h_tok := h_tok[1:n0]; h_dtok := h_dtok[1:n0]; h_dated := h_dated[1:n0];
        h_rank := h_rank[1:n0]; h_chunk := h_chunk[1:n0]; h_prev := h_prev[1:n0];
        h_pkey := h_pkey[1:n0];
        used := used0;
      end if;
    end if;
    exit when p_budget - used < min_cost;
  end loop;

  if rk = 0 then
    return;
  end if;
  -- not one unit fits: the best one, trimmed to fit (a turn as "Speaker: text"). Its text is
  -- read first, in a statement of its own: on a Citus cluster a statement that reads a table
  -- and calls recall._trim_v6 (which reads recall.messages) is a distributed query nesting
  -- another, which the agent's worker refuses (v7's fill did that)
  if cardinality(h_msg) = 0 and cardinality(o_chunk) = 0 then
    if best.message_id is not null then
      select coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                      nullif(btrim(m.metadata->>'author'), ''), initcap(m.role)) || ': ' || m.content
        into best_text
      from recall.messages m
      where m.agent_id = p_agent_id and m.message_id = best.message_id;
      select * into t from recall._trim_v6(p_agent_id, best_text, best.tok, array[best.message_id], p_budget);
    else
      select c.content into best_text
      from recall.chunks c
      where c.agent_id = p_agent_id and c.chunk_id = best.chunk_id;
      select * into t from recall._trim_v6(p_agent_id, best_text, best.cost, best.chunk_message_ids, p_budget);
    end if;
    if t.content is not null then
      return query select best.chunk_id, 1, t.content, t.n_tokens, t.message_ids, null::bigint[],
                          best.cost, t.n_tokens::bigint;
    end if;
    return;
  end if;

  return query
  with
  taken as (
    select h.*
    from unnest(h_msg, h_sess, h_seq, h_rank, h_chunk, h_dated, h_tok, h_dtok, h_prev)
         as h(id, s, q, rk, ch, dated, tok, dtok, prev)
  ),
  -- a passage: a run of taken turns, each the text message after the one before it (v13)
  starts as (
    select h.*, not exists (select from taken p where p.s = h.s and p.q = h.prev) as first
    from taken h
  ),
  held as (
    select h.*, count(*) filter (where h.first) over (partition by h.s order by h.q) as grp
    from starts h
  ),
  runs as (
    select array_agg(x.id order by x.q) as ids, min(x.rk) as best,
           (array_agg(x.ch order by x.rk))[1] as chunk_id,
           array(select distinct unnest(array_agg(x.ch))) as chunks, bool_or(x.dated) as dated,
           (sum(x.tok) + case when bool_or(x.dated) then (array_agg(x.dtok order by x.q))[1] else 0 end)::int as tokens
    from held x
    group by x.s, x.grp
  ),
  rows_ as (
    select r.chunk_id, r.best, recall._passage_text_v7(p_agent_id, r.ids, r.dated) as body, r.tokens,
           r.ids, r.chunks
    from runs r
    union all
    select o.c, o.rk, null, o.t, null, null
    from unnest(o_chunk, o_rank, o_tokens) as o(c, rk, t)
  )
  select r.chunk_id, (row_number() over (order by r.best))::int, r.body, r.tokens, r.ids, r.chunks,
         null::int, (sum(r.tokens) over (order by r.best rows unbounded preceding))::bigint
  from rows_ r
  order by r.best;
end
$$;

create or replace function recall._lab_auto_context_none(
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
  scope jsonb := jsonb_strip_nulls(jsonb_build_object('project', _lab_auto_context_none.project,
                                                      'branch', _lab_auto_context_none.branch));
  related_query text := nullif(btrim(task_text), '');
  related_embedding vector := task_embedding;
  latest text;
  now_ts timestamptz := coalesce(as_of, now());
  memory_session text := 'memories:' || _lab_auto_context_none.agent_id;
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
    perform recall._check_reader_v6(_lab_auto_context_none.agent_id);
  end if;

  -- a branch with no history yet (just created): the history of its project instead
  if scope ? 'branch' and not exists (
       select from recall.chunks c
       where c.agent_id = _lab_auto_context_none.agent_id and c.metadata @> scope) then
    scope := scope - 'branch';
  end if;

  -- without a task, "related" means related to the latest session in scope (the memories
  -- session is no work session): its summary (or title) as text, its summary embedding (or
  -- the centroid of its embedded chunks) as vector
  if related_query is null and related_embedding is null then
    select s.session_id, s.summary_embedding, coalesce(s.summary, s.title)
      into latest, related_embedding, related_query
    from recall.sessions s
    where s.agent_id = _lab_auto_context_none.agent_id
      and s.session_id <> memory_session
      and (exclude_session_id is null or s.session_id <> exclude_session_id)
      and (not scope ? 'project' or s.project = scope->>'project')
      and (not scope ? 'branch' or s.branch = scope->>'branch')
    order by s.ended_at desc nulls last, s.started_at desc, s.session_id desc
    limit 1;
    if latest is not null and related_embedding is null then
      select avg(c.embedding) into related_embedding
      from recall.chunks c
      where c.agent_id = _lab_auto_context_none.agent_id and c.session_id = latest
        and c.embedding is not null and c.kind <> 'summary';
    end if;
  end if;

  -- Related's search, in a statement of its own (on a Citus cluster a statement that runs on
  -- the agent's shard cannot nest a call of another recall function that queries the tables):
  -- hybrid recall v10's search for the task, or for the latest work
  if related_query is not null or related_embedding is not null then
    select array_agg(h) into related_rows
    from recall._hybrid_recall_v10(
      agent_id => _lab_auto_context_none.agent_id, query_text => related_query,
      query_embedding => related_embedding,
      k => least(1000, greatest(60, token_budget / 25)),
      exclude_session_id => exclude_session_id, as_of => as_of,
      scope_project => case when _lab_auto_context_none.all_projects then null
                            else _lab_auto_context_none.project end,
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
              where c.agent_id = _lab_auto_context_none.agent_id and c.kind = 'memory' and c.pinned
                and (c.valid_until is null or c.valid_until > _lab_auto_context_none.as_of)
                and (_lab_auto_context_none.as_of is null or c.valid_from <= _lab_auto_context_none.as_of)
                and (_lab_auto_context_none.project is null or not c.metadata ? 'project'
                     or c.metadata->>'project' = _lab_auto_context_none.project)) x
        where x.run <= token_budget) p;
  pinned_tokens := coalesce((select sum(x) from unnest(k_tokens) as x), 0);
  budget_left := token_budget - pinned_tokens;
  select array_agg(distinct u.id) into shown_msgs
  from recall.chunks c
  cross join lateral unnest(c.message_ids) as u(id)
  where c.agent_id = _lab_auto_context_none.agent_id and c.chunk_id = any (coalesce(k_chunk, '{}'));

  -- Recent: the newest conversation chunks of this project and branch (v10's twenty), newest
  -- first, given to the fill with their recency as score and no query: a chat's windows turn
  -- by turn newest chunk first (their overlapping turns shown once, adjacent turns one
  -- passage), turn pairs and summaries whole (a question with its answer); what does not fit
  -- skipped, the newest trimmed when not one fits
  select array_agg(r.chunk_id order by r.score desc, r.chunk_id desc),
         array_agg(r.score order by r.score desc, r.chunk_id desc)
    into rec_ids, rec_scores
  from (select c.chunk_id,
               recall._recency(extract(epoch from now_ts - c.created_at)::float8, 7 * 86400) as score
        from recall.chunks c
        where c.agent_id = _lab_auto_context_none.agent_id
          and c.metadata @> scope
          and c.kind in ('turn_pair', 'window', 'message', 'summary')
          and (exclude_session_id is null or c.session_id <> exclude_session_id)
        order by c.created_at desc, c.chunk_id desc
        limit 20) r;
  if rec_ids is not null and floor(budget_left * recent_share) >= 1 then
    select jsonb_agg(to_jsonb(f) order by f.pos) into recent_filled
    from recall._lab_fill_none(_lab_auto_context_none.agent_id, rec_ids, rec_scores,
                          floor(budget_left * recent_share)::int, null, 0, null, 0, 0, shown_msgs,
                          true) f;
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
  where c.agent_id = _lab_auto_context_none.agent_id and c.chunk_id = any (recent_whole);
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
              where m.agent_id = _lab_auto_context_none.agent_id and m.message_id = any (c.message_ids)) as last_seq
      from recall.chunks c
      where c.agent_id = _lab_auto_context_none.agent_id
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
        where c.agent_id = _lab_auto_context_none.agent_id and c.session_id = f.session_id and m.agent_id = _lab_auto_context_none.agent_id
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
            join recall.chunks c on c.agent_id = _lab_auto_context_none.agent_id and c.chunk_id = f.chunk_id) x
      where x.run <= budget_left * failure_share
    )
    select f.chunk_id, f.section, f.score, f.grp_id, f.sub, f.resolution_of, f.n_tokens,
           row_number() over (order by f.score desc, f.grp_id desc, f.sub) as ord
    from failures_kept f
  ) k;
  select shown_msgs || coalesce(array_agg(u.id), '{}') into shown_msgs
  from recall.chunks c
  cross join lateral unnest(c.message_ids) as u(id)
  where c.agent_id = _lab_auto_context_none.agent_id and c.chunk_id = any (failure_chunks);

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
    from recall._lab_fill_none(_lab_auto_context_none.agent_id, rel_ids, rel_scores, related_left,
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
  ordered as (
    select k.*, row_number() over (order by k.sec, k.fill_pos, k.score desc, k.grp_id desc, k.sub) as pos
    from (select * from kept union all select * from fills) k
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
                where m.agent_id = _lab_auto_context_none.agent_id
                group by m.role) r),
         c.memory_kind
  from ordered o
  join recall.chunks c on c.agent_id = _lab_auto_context_none.agent_id and c.chunk_id = o.chunk_id
  left join recall.sessions s on s.agent_id = _lab_auto_context_none.agent_id and s.session_id = c.session_id
  order by o.pos;
end
$$;
