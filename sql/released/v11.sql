-- sql/released/v11.sql: release 11: hybrid_recall_v11 and session_recall_v11: v10's with each
-- turn of the budget's fill also valued by its own vector and by its speaker. Never edit: the file's SHA-256 is
-- pinned in sql/frozen.txt and `make lint` (python -m pyrecall._sqlcheck) fails when it changes
-- or when a function here reaches one that is neither in this file, an older release,
-- shared.sql nor sql/released/shared.txt. sql/README.md says how a new version is released.
--
-- Why (issue 19): v7's fill values a turn by its chunk's score plus 0.2 x the share of the
-- query's idf its own words hold: the turn's own words, not its own meaning (turns had no
-- vectors; a turn pair's vector is its two turns'). Migration 013-message-vectors gives every
-- text message its own vector ("Speaker: text", the chunks' model, written by the embed worker
-- with the turn's token counts); v11's fill (recall._fill_v11) adds turn_vector_weight x the
-- cosine of the turn's vector to the query's (its chunk's cosine while it has none; a whole
-- chunk unit: its own) x its chunk's score (when positive). Measured on the LoCoMo dev split,
-- per conversation and with every conversation in one agent (bench/LOG.md, 2026-11-28 second
-- session): a plain bonus (weight x cosine, 0.5) gained +0.02 to +0.03 at every budget per
-- conversation but lost up to 0.0055 in one agent (single-hop: turns of other conversations
-- near the question in meaning); in proportion to the chunk's score, 0.4 is the largest weight
-- tried (0.4, 0.7, 1.0, 1.4, 2.0) that is at least v10's at every budget in both settings.
-- And the turn's speaker: a chat's speakers' names are in most of its chunks, so the text arm
-- drops them as saying nothing of a chunk, but they say much of a turn ("what did Melanie
-- paint?" is answered by a turn of Melanie's). turn_speaker_weight (0.2) is added
-- to a turn whose speaker (metadata speaker, author, else the role) one of the query's words
-- names. Swept over the vector term (0.05 / 0.1 / 0.2 / 0.3): at 250 tokens +0.023 / +0.029 /
-- +0.027 / +0.027 per conversation, +0.018 / +0.024 / +0.029 / +0.028 in one agent, multi-hop at
-- 1000 +0.01 to +0.065; 0.3 fell back at 2000 in one agent (0.895 -> 0.889): 0.2 is the default.

-- What else changes from v10: the fill's turn words are v10's text plan (recall._text_plan_v10:
-- the query's text_max_words rarest words), as the search's already were (v10's fill weighed
-- every word of the query). A query of at most 16 words (every LoCoMo question) has the same
-- plan. Without token_budget the rows are v10's (the fill is not run). Security and Citus as
-- v9/v10: the search as the owner after the reader check, the fill as the caller under
-- row-level security, in PL/pgSQL, the best unit's text read before it is trimmed.

-- _fill_v11: recall._fill_v9 (hybrid_recall_v7's COMMENT gives the contract) with v10's text
-- plan, each unit's cosine to the query and each turn's speaker weighed in (see above)
create or replace function recall._fill_v11(p_agent_id text, p_ids bigint[], p_scores float8[],
                                            p_budget int, p_query_text text, p_weight float8,
                                            p_query_embedding vector, p_vector_weight float8,
                                            p_speaker_weight float8)
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
             ch.kind in ('window', 'turn_pair', 'message') and ch.part = 0
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
             p.kind = 'window' as dated, p.has_words, p.cos as chunk_cos
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
                  then to_tsvector('english', m.content) end as tsv
      from best_chunk b
      join recall.messages m on m.agent_id = p_agent_id and m.message_id = b.message_id
      cross join lateral (select coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                                          nullif(btrim(m.metadata->>'author'), ''), initcap(m.role)) as who) sp
      where m.kind = 'text'
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
             t.score + coalesce(p_weight * ((select sum(w.idf) from words w
                                             where t.tsv @@ w.q or sp.tsv @@ w.q) / total_idf), 0)
             + coalesce(p_vector_weight * t.cos * greatest(t.score, 0), 0)
             + case when nm.who is not null then p_speaker_weight else 0 end as value
      from turns t
      left join speakers sp on sp.who = t.who and t.has_words
      left join named nm on nm.who = t.who
      union all
      select null, p.session_id, null, null, null, null, p.chunk_id, p.ord, p.kind, p.n_tokens,
             p.message_ids,
             p.score + case when p.has_words
                            then coalesce(p_weight * ((select sum(w.idf) from words w where p.tsv @@ w.q)
                                                      / total_idf), 0)
                            else 0 end
             + coalesce(p_vector_weight * p.cos * greatest(p.score, 0), 0)
      from pool p
      where not p.chat
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
    elsif not (u.message_id = any (o_msg)) then
      -- what the turn costs: the passages it joins (the run of taken turns of its session
      -- ending at seq - 1, and the one starting at seq + 1) become one, headed by the date
      -- line of its first turn when any of its turns came from a chat window
      l_tok := 0; l_dated := false; l_first := null; q := u.seq - 1;
      loop
        i := array_position(h_key, u.session_id || '#' || q);
        exit when i is null;
        l_tok := l_tok + h_tok[i]; l_dated := l_dated or h_dated[i]; l_first := h_dtok[i];
        q := q - 1;
      end loop;
      r_tok := 0; r_dated := false; r_first := null; q := u.seq + 1;
      loop
        i := array_position(h_key, u.session_id || '#' || q);
        exit when i is null;
        r_tok := r_tok + h_tok[i]; r_dated := r_dated or h_dated[i];
        r_first := coalesce(r_first, h_dtok[i]);
        q := q + 1;
      end loop;
      old_cost := l_tok + case when l_dated then l_first else 0 end
                  + r_tok + case when r_dated then r_first else 0 end;
      new_cost := l_tok + u.tok + r_tok
                  + case when l_dated or u.dated or r_dated then coalesce(l_first, u.dtok) else 0 end;
      if used + new_cost - old_cost <= p_budget then
        h_key := h_key || (u.session_id || '#' || u.seq); h_msg := h_msg || u.message_id;
        h_sess := h_sess || u.session_id; h_seq := h_seq || u.seq; h_tok := h_tok || u.tok;
        h_dtok := h_dtok || u.dtok; h_dated := h_dated || u.dated; h_rank := h_rank || rk;
        h_chunk := h_chunk || u.chunk_id;
        used := used + new_cost - old_cost;
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
  held as (
    select h.*, h.q - row_number() over (partition by h.s order by h.q) as grp
    from unnest(h_msg, h_sess, h_seq, h_rank, h_chunk, h_dated, h_tok, h_dtok)
         as h(id, s, q, rk, ch, dated, tok, dtok)
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


-- hybrid_recall_v11: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v11(
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
  turn_text_weight   float8      default 0.2,
  turn_vector_weight float8      default 0.4,
  turn_speaker_weight float8     default 0.2)
returns setof recall.recall_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
begin
  if token_budget is null then
    return query select * from recall._hybrid_recall_v10(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null);
    return;
  end if;
  if token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', token_budget using errcode = '22023';
  end if;
  if turn_text_weight is null or turn_text_weight < 0 or turn_text_weight = 'NaN'
     or turn_text_weight = 'Infinity' then
    raise exception 'turn_text_weight must be finite and >= 0, got %',
      coalesce(turn_text_weight::text, 'NULL') using errcode = '22023';
  end if;
  if turn_vector_weight is null or turn_vector_weight < 0 or turn_vector_weight = 'NaN'
     or turn_vector_weight = 'Infinity' then
    raise exception 'turn_vector_weight must be finite and >= 0, got %',
      coalesce(turn_vector_weight::text, 'NULL') using errcode = '22023';
  end if;
  if turn_speaker_weight is null or turn_speaker_weight < 0 or turn_speaker_weight = 'NaN'
     or turn_speaker_weight = 'Infinity' then
    raise exception 'turn_speaker_weight must be finite and >= 0, got %',
      coalesce(turn_speaker_weight::text, 'NULL') using errcode = '22023';
  end if;
  -- v6's first k rows, then the budget filled turn by turn (recall._fill_v11)
  return query
  with
  ranked as materialized (
    select r.*
    from recall._hybrid_recall_v10(
      agent_id, query_text, query_embedding, k, null, exclude_session_id, min_similarity,
      filter, kinds, since, until, vector_weight, text_weight, recency_weight,
      importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session, null)
      with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_v11(hybrid_recall_v11.agent_id,
                         (select array_agg(x.chunk_id order by x.ordinality) from ranked x),
                         (select array_agg(x.score order by x.ordinality) from ranked x),
                         token_budget, query_text, turn_text_weight,
                          query_embedding, turn_vector_weight, turn_speaker_weight) f
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


comment on function recall.hybrid_recall_v11 is $c$
hybrid_recall v11: recall.hybrid_recall_v10 (see its comment, and v9's, v7's and v4's:
candidates, scores, order, k, filters, the budget filled turn by turn, rows, security) whose
fill also values each unit by its own meaning. Without token_budget the rows are v10's.
token_budget: as v7, each turn valued by the score of the best ranked chunk holding it plus
turn_text_weight x the share of the query's word weight its own words hold (the query's
text_max_words rarest words, as the text arm asks for them) plus turn_vector_weight x the cosine
of the turn's own vector (recall.messages.embedding, "Speaker: text", written by the embed
worker) to query_embedding x that chunk's score when positive (0 otherwise); a turn without a
vector yet is given its chunk's cosine; a whole-chunk unit (code, memories, parts of long
windows) its own. Without query_embedding the cosine adds
nothing. Units are taken best value first while the sum of the rows' n_tokens stays within
token_budget (skip what does not fit, go on; no message paid twice; the best unit alone trimmed
when not one fits), as v7.
turn_speaker_weight is added to a turn whose speaker (metadata speaker or author, else the role
capitalised, as the passage writes it) is named by one of the query's words (english, every
word: the text arm drops the ones most chunks hold, as a chat's speakers' names are).
turn_vector_weight, turn_speaker_weight: finite and >= 0 (else 22023), defaults 0.4 and
0.2; both 0 and turn_text_weight 0.2 give v10's rows for a query of at most
text_max_words words.
$c$;

-- session_recall_v11: see the COMMENT below for the contract
create or replace function recall.session_recall_v11(
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
  turns_per_session  int         default null,
  turn_text_weight   float8      default 0.2,
  turn_vector_weight float8      default 0.4,
  turn_speaker_weight float8     default 0.2)
returns setof recall.session_recall_row_v4
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
begin
  if token_budget is null then
    return query select * from recall._session_recall_v10(
      agent_id, query_text, query_embedding, k, n_sessions, null, exclude_session_id,
      filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
      dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
      turns_per_session);
    return;
  end if;
  if token_budget < 0 then
    raise exception 'token_budget must be >= 0, got %', token_budget using errcode = '22023';
  end if;
  if turn_text_weight is null or turn_text_weight < 0 or turn_text_weight = 'NaN'
     or turn_text_weight = 'Infinity' then
    raise exception 'turn_text_weight must be finite and >= 0, got %',
      coalesce(turn_text_weight::text, 'NULL') using errcode = '22023';
  end if;
  if turn_vector_weight is null or turn_vector_weight < 0 or turn_vector_weight = 'NaN'
     or turn_vector_weight = 'Infinity' then
    raise exception 'turn_vector_weight must be finite and >= 0, got %',
      coalesce(turn_vector_weight::text, 'NULL') using errcode = '22023';
  end if;
  if turn_speaker_weight is null or turn_speaker_weight < 0 or turn_speaker_weight = 'NaN'
     or turn_speaker_weight = 'Infinity' then
    raise exception 'turn_speaker_weight must be finite and >= 0, got %',
      coalesce(turn_speaker_weight::text, 'NULL') using errcode = '22023';
  end if;
  -- v6's rows (sessions first), the budget filled turn by turn as hybrid_recall_v7 fills it
  -- (recall._fill_v11), the rows then given in v6's order
  return query
  with
  ranked as materialized (
    select r.*
    from recall._session_recall_v10(
      agent_id, query_text, query_embedding, k, n_sessions, null, exclude_session_id,
      filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
      dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
      turns_per_session) with ordinality as r
  ),
  filled as (
    select f.*
    from recall._fill_v11(session_recall_v11.agent_id,
                         (select array_agg(x.chunk_id order by x.ordinality) from ranked x),
                         (select array_agg(x.score order by x.ordinality) from ranked x),
                         token_budget, query_text, turn_text_weight,
                          query_embedding, turn_vector_weight, turn_speaker_weight) f
  )
  select r.chunk_id, r.session_id, r.kind, coalesce(f.content, r.content), r.created_at, r.score,
         r.similarity, r.text_rank, r.recency, r.importance, f.n_tokens,
         sum(f.n_tokens) over (order by r.ordinality, f.pos rows unbounded preceding)::bigint,
         r.metadata || jsonb_strip_nulls(jsonb_build_object('merged_chunk_ids', to_jsonb(f.merged),
                                                            'trimmed_from_tokens', f.trimmed_from)),
         coalesce(f.message_ids, r.message_ids), r.session_rank, r.session_score, r.memory_id,
         r.agent_id, r.session_title, r.role, r.memory_kind
  from filled f
  join ranked r on r.chunk_id = f.chunk_id
  order by r.ordinality, f.pos;
end
$$;

comment on function recall.session_recall_v11 is $c$
session_recall v11: recall.session_recall_v10 (see its comment and v9's, v6's: the pool, the
sessions ranked, k, n_sessions, the budget filled turn by turn, rows in v6's order, security)
whose fill values each turn also by its own vector, as recall.hybrid_recall_v11's does
(turn_vector_weight, default 0.4, turn_speaker_weight, default 0.2; see that comment).
Without token_budget the rows are v10's.
$c$;
