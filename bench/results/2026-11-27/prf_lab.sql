-- Pseudo-relevance feedback (issue 19, 2026-11-27 fourth session): scratch functions loaded by
-- prf_lab.py on rank_lab.py's bench database; never part of a migration.
--
-- lab_prf: hybrid_recall_v7 asked twice. The first ask (no budget) gives the m best chunks; the
-- query's vector moves towards their mean (Rocchio: q + beta x mean, unit length), and with
-- terms > 0 the query's text gains the `terms` words of those chunks with the highest idf
-- among the agent's chunks (RM3-like, unweighted). The second ask fills the budget.
create or replace function recall.lab_prf(
  agent_id text, query_text text default null, query_embedding vector default null,
  k int default 10, as_of timestamptz default null, token_budget int default null,
  m int default 3, beta float8 default 0.5, terms int default 0)
returns setof recall.recall_row_v4
language plpgsql volatile
set search_path to pg_catalog, public, pg_temp
as $$
declare
  top_ids bigint[];
  q vector := query_embedding;
  t text := query_text;
  extra text;
begin
  select array_agg(r.chunk_id) into top_ids
  from recall.hybrid_recall_v7(agent_id => lab_prf.agent_id, query_text => lab_prf.query_text,
                               query_embedding => lab_prf.query_embedding, k => lab_prf.m,
                               as_of => lab_prf.as_of) r;
  if beta > 0 and q is not null and top_ids is not null then
    select l2_normalize(l2_normalize(q) + avg(c.embedding) * array_fill(beta::real, array[vector_dims(q)])::vector)
      into q
    from recall.chunks c
    where c.agent_id = lab_prf.agent_id and c.chunk_id = any(top_ids) and c.embedding is not null;
  end if;
  if terms > 0 and t is not null and top_ids is not null then
    with words as (
      select distinct w.word
      from recall.chunks c,
           lateral ts_stat(format('select to_tsvector(''english'', %L)', c.content)) w
      where c.agent_id = lab_prf.agent_id and c.chunk_id = any(top_ids)
    ),
    df as (
      select w.word, (select count(*) from recall.chunks c2
                      where c2.agent_id = lab_prf.agent_id
                        and c2.tsv @@ quote_literal(w.word)::tsquery) as n
      from words w
      where length(w.word) > 2
    )
    select string_agg(df.word, ' ') into extra
    from (select df.word from df where df.n > 0 order by df.n, df.word limit terms) df;
    t := t || coalesce(' ' || extra, '');
  end if;
  return query select * from recall.hybrid_recall_v7(
    agent_id => lab_prf.agent_id, query_text => t, query_embedding => q,
    k => lab_prf.k, as_of => lab_prf.as_of, token_budget => lab_prf.token_budget);
end $$;

-- lab_sturns: session_recall's rows (v6's ranking: sessions first, chunks re-scored by their
-- session's score) filled turn by turn as hybrid_recall_v7 fills (recall._fill_v7, each turn
-- valued by its chunk's score + w x its own share of the query's idf)
create or replace function recall.lab_sturns(
  agent_id text, query_text text default null, query_embedding vector default null,
  k int default 10, as_of timestamptz default null, token_budget int default null,
  w float8 default 0.2, n_sessions int default 10)
returns table (session_id text, message_ids bigint[], n_tokens int, content text)
language plpgsql volatile
set search_path to pg_catalog, public, pg_temp
as $$
declare
  ids bigint[];
  scores float8[];
begin
  select array_agg(r.chunk_id order by r.ord), array_agg(r.score order by r.ord) into ids, scores
  from recall._session_recall_v6(agent_id => lab_sturns.agent_id, query_text => lab_sturns.query_text,
                                 query_embedding => lab_sturns.query_embedding, k => lab_sturns.k,
                                 n_sessions => lab_sturns.n_sessions, as_of => lab_sturns.as_of)
       with ordinality as r(chunk_id, session_id, kind, content, created_at, score, similarity,
                            text_rank, recency, importance, n_tokens, cumulative_tokens, metadata,
                            message_ids, session_rank, session_score, memory_id, agent_id,
                            session_title, role, memory_kind, ord);
  return query
  select coalesce(c.session_id, ''), coalesce(f.message_ids, c.message_ids), f.n_tokens,
         coalesce(f.content, c.content)
  from recall._fill_v7(lab_sturns.agent_id, ids, scores, token_budget, query_text, w) f
  join recall.chunks c on c.agent_id = lab_sturns.agent_id and c.chunk_id = f.chunk_id
  order by f.pos;
end $$;
