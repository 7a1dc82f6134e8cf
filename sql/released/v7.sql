-- sql/released/v7.sql: release 7: hybrid_recall_v7. v6's ranking (and security model, and
-- Citus compatibility); with a token_budget, the context filled turn by turn, each turn paid
-- what the embedding model counts. Never edit: the file's SHA-256 is pinned in
-- sql/frozen.txt and `make lint` (python -m pyrecall._sqlcheck) fails when it changes or when a
-- function here reaches one that is neither in this file, an older release, shared.sql nor
-- sql/released/shared.txt. sql/README.md says how a new version is released.
-- session_recall and auto_context have no v7: the stable names call session_recall_v6 and
-- auto_context_v6. session_recall orders its rows session by session, which a fill valued by
-- each turn's own score would undo: a turn fill for it needs its own design and measurement;
-- auto_context fills its budget section by section with rules of its own.
--
-- Why (issue 19, docs/BENCHMARKS.md section 1): a chat window holds 4 turns; the question's
-- evidence is usually one of them. v6 (v5's fill) pays for the whole window, so at 250 tokens
-- the context holds one or two windows. Ranking by windows is good (a window's context helps
-- both arms), so the turns keep their window's score, and a turn that itself holds the
-- query's rarer words moves up: a context of the best turns of several windows, each paid
-- once, adjacent turns of a session read as one passage. Developed as
-- recall.hybrid_recall_turns (bench/LOG.md "ranking ideas"), whose passages were paid an
-- estimate (characters x the ranked chunks' tokens per character): by the model's count 41%
-- of its contexts exceeded the budget. v7 pays each turn recall.messages.n_tokens and a
-- passage's date line its first turn's date_tokens (sql/incremental/011-message-tokens.sql:
-- the model's counts of exactly the text a passage holds, recorded by the embed worker;
-- estimated, four characters a token, until then), so the rows' n_tokens add up to what the
-- model counts of their text (a word-piece model; a BPE model's blank lines are paid by the
-- turn before them): none of the dev split's contexts exceeds its budget.
--
-- What changes from v6, with token_budget only (without it the rows are v6's, the same
-- function returns them): the fill (recall._fill_v7, hybrid_recall_v7's COMMENT gives the
-- contract) and the passages' text (recall._passage_text_v7: the date line is the first
-- turn's). The ranking, its arguments and their checks are v6's: recall._hybrid_recall_v6.
-- turn_text_weight is new (0.2, the best of 0 / 0.1 / 0.2 / 0.3 / 0.5 on the dev split).
--
-- Security and Citus as v6 (sql/released/v6.sql's header): the search runs as the owner in
-- recall._recall_arms_v6 after recall._check_reader_v6 (42501 for an agent the caller may not
-- read); the fill runs as the caller, under row-level security, reading chunks and messages by
-- primary key (`= any` / `=` of int8: leakproof, the index serves) with the agent named in
-- every table reference, in PL/pgSQL (Citus plans it on the agent's worker). The text plan
-- the fill values turns with (recall._text_plan_v6) is read as the caller too.
--
-- Cost (docs/BENCHMARKS.md section 1): the turns' own words are the costly part; a turn's
-- text is parsed only when a prefix test says it may hold a query word, the speaker's words
-- once per speaker.

-- _passage_text_v7: a passage of turns (message ids of one session): "Speaker: text" joined by
-- blank lines in seq order, headed by the date line of its first turn when p_dated; the text
-- whose tokens messages.n_tokens and date_tokens count (a turn with the blank line after it;
-- the date line with its line break)
create or replace function recall._passage_text_v7(p_agent_id text, p_message_ids bigint[], p_dated boolean)
returns text
language plpgsql stable
set search_path to pg_catalog, public, pg_temp
as $$
begin
  return (
  select case when p_dated
              then '[' || to_char((array_agg(m.created_at order by m.seq))[1] at time zone 'UTC',
                                  'FMDD FMMonth YYYY') || E']\n'
              else '' end
         || string_agg(coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                                nullif(btrim(m.metadata->>'author'), ''), initcap(m.role))
                       || ': ' || m.content, E'\n\n' order by m.seq)
  from recall.messages m
  where m.agent_id = p_agent_id and m.message_id = any (p_message_ids)
  );
end
$$;

-- _fill_v7: the context at p_budget tokens from the chunks of p_agent_id ranked best first
-- (p_ids, with their scores p_scores), turn by turn (hybrid_recall_v7's COMMENT gives the
-- contract). Rows as recall._fill_v6's: one per passage or whole chunk, in the order of its
-- best unit; merged = the chunks whose turns the passage holds.
create or replace function recall._fill_v7(p_agent_id text, p_ids bigint[], p_scores float8[],
                                           p_budget int, p_query_text text, p_weight float8)
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
begin
  if p_budget is null or p_budget < 1 or p_ids is null then
    return;
  end if;
  -- the query's words and their idf, as the text arm weighs them (v6's text plan)
  if p_weight > 0 and p_query_text is not null then
    select x.lexemes, x.idfs, x.rank_q into v_lexemes, v_idfs, any_word
    from recall._text_plan_v6(p_agent_id, p_query_text) x;
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
             p.kind = 'window' as dated, p.has_words
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
    -- the units: turns, valued by their chunk's score plus p_weight x the share of the query's
    -- idf that their own words hold; other chunks (code, memories, parts of long windows)
    -- whole, valued alike by their own words
    units as (
      select t.message_id, t.session_id, t.seq, t.tok, t.dtok, t.dated, t.chunk_id, t.ord,
             null::text as kind, t.tok as cost, null::bigint[] as chunk_message_ids,
             t.score + coalesce(p_weight * ((select sum(w.idf) from words w
                                             where t.tsv @@ w.q or sp.tsv @@ w.q) / total_idf), 0) as value
      from turns t
      left join speakers sp on sp.who = t.who and t.has_words
      union all
      select null, p.session_id, null, null, null, null, p.chunk_id, p.ord, p.kind, p.n_tokens,
             p.message_ids,
             p.score + case when p.has_words
                            then coalesce(p_weight * ((select sum(w.idf) from words w where p.tsv @@ w.q)
                                                      / total_idf), 0)
                            else 0 end
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
  -- not one unit fits: the best one, trimmed to fit (a turn as "Speaker: text")
  if cardinality(h_msg) = 0 and cardinality(o_chunk) = 0 then
    if best.message_id is not null then
      select * into t
      from recall._trim_v6(p_agent_id,
                           (select coalesce(nullif(btrim(m.metadata->>'speaker'), ''),
                                            nullif(btrim(m.metadata->>'author'), ''), initcap(m.role))
                                   || ': ' || m.content
                            from recall.messages m
                            where m.agent_id = p_agent_id and m.message_id = best.message_id),
                           best.tok, array[best.message_id], p_budget);
    else
      select * into t
      from recall._trim_v6(p_agent_id,
                           (select c.content from recall.chunks c
                            where c.agent_id = p_agent_id and c.chunk_id = best.chunk_id),
                           best.cost, best.chunk_message_ids, p_budget);
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

-- hybrid_recall_v7: see the COMMENT below for the contract
create or replace function recall.hybrid_recall_v7(
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
  turn_text_weight   float8      default 0.2)
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
  if turn_text_weight is null or turn_text_weight < 0 or turn_text_weight = 'NaN'
     or turn_text_weight = 'Infinity' then
    raise exception 'turn_text_weight must be finite and >= 0, got %',
      coalesce(turn_text_weight::text, 'NULL') using errcode = '22023';
  end if;
  -- v6's first k rows, then the budget filled turn by turn (recall._fill_v7)
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
    from recall._fill_v7(hybrid_recall_v7.agent_id,
                         (select array_agg(x.chunk_id order by x.ordinality) from ranked x),
                         (select array_agg(x.score order by x.ordinality) from ranked x),
                         token_budget, query_text, turn_text_weight) f
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

comment on function recall.hybrid_recall_v7 is $c$
hybrid_recall v7: recall.hybrid_recall_v6 (see its comment, and v4's: candidates, scores,
de-duplication, order, k, memories, filters, rows; fast under row-level security, SQLSTATE 42501
for an agent the caller may not read) whose token budget is filled turn by turn. Without
token_budget the rows are v6's.
token_budget: v6's first k rows, and the turns (text messages) of its chat chunks (window, turn
pair or message, not a part of a longer one), each turn once, valued by the score of the best
of those chunks holding it plus turn_text_weight x the share of the query's word weight (the
text arm's idf) that the turn's own words ("Speaker text", english) hold; other rows (code,
memories, parts of long windows) are units whole, valued by their score plus turn_text_weight x
their words' share. Units are taken best value first while the sum of the rows' n_tokens stays
within token_budget: a unit that does not fit is skipped and the fill goes on, until fewer
tokens are left than the cheapest unit costs. No message is paid twice: a turn already held by
a whole chunk taken, or a chunk holding a message of a turn taken, is skipped.
A row is a passage of turns or a whole chunk. The turns taken form passages: adjacent turns
(seq) of a session are one passage, "Speaker: text" joined by blank lines, headed by the date
line "[D Month YYYY]" of its first turn when one of its turns came from a chat window. A
passage's n_tokens is the sum of its turns' recall.messages.n_tokens plus its first turn's
date_tokens when dated: the embedding model's counts, recorded by the embed worker (until then
estimated from the same text, four characters a token); a whole chunk's is its n_tokens. The
sum of n_tokens of the rows never exceeds token_budget. One row per passage or whole chunk, in
the order of its best unit: the row of the chunk that gave the passage its best turn (its id,
score, components; two passages may come from one chunk), with the passage's content,
n_tokens, message_ids (seq order) and metadata.merged_chunk_ids (the chunks whose turns it
holds). When not one unit fits, the best unit alone, trimmed to fit (a turn as "Speaker:
text"), with metadata.trimmed_from_tokens. cumulative_tokens runs over the rows returned.
turn_text_weight: finite and >= 0 (else 22023); 0 values every turn at its chunk's score.
$c$;
