-- 040-session-recall
-- Session summaries, which session-aware retrieval ranks sessions by. The released versions of
-- recall.session_recall (two stages: the best sessions, then the best chunks inside them) and
-- recall.auto_context (the session-start context: recent work, related work, failures to avoid)
-- live in sql/released/; their stable names in 080-stable-names.sql.

-- summarize_sessions: an extractive summary per session, made without an LLM. The session's
-- embedding is the centroid of its chunk embeddings; its summary is the text of the chunks
-- nearest that centroid (the most central ones), in conversation order. A session whose
-- summary an LLM wrote (summary_model other than 'extractive') keeps its text. Returns the
-- number of sessions updated; only_stale: only those with chunks embedded since the last one.
create or replace function recall.summarize_sessions(
  agent_id text default null, only_stale boolean default true, max_chars int default 1200)
returns bigint
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  n bigint;
begin
  if max_chars is null or max_chars < 1 then
    raise exception 'max_chars must be a positive number of characters, got %',
      coalesce(max_chars::text, 'NULL') using errcode = '22023';
  end if;
  if only_stale is null then
    raise exception 'only_stale must be true or false, not NULL' using errcode = '22023';
  end if;
  with
  -- sessions to (re)summarize
  todo as (
    select s.session_id
    from recall.sessions s
    where (summarize_sessions.agent_id is null or s.agent_id = summarize_sessions.agent_id)
      and (not only_stale or s.summary_at is null or exists (
            select from recall.chunks c
            where c.session_id = s.session_id and c.kind <> 'summary'
              and c.embedded_at > s.summary_at))
  ),
  -- the centroid of each session's embedded chunks (curated memories are no conversation: the
  -- memories session gets no summary)
  centroids as (
    select c.session_id, avg(c.embedding) as centroid
    from recall.chunks c
    join todo t using (session_id)
    where c.embedding is not null and c.kind not in ('summary', 'memory')
    group by c.session_id
  ),
  -- the chunks of a session from most to least central
  central as (
    select c.session_id, c.first_seq, c.part, c.content,
           row_number() over (partition by c.session_id order by c.embedding <=> m.centroid, c.chunk_id) as r
    from recall.chunks c
    join centroids m using (session_id)
    where c.embedding is not null and c.kind in ('turn_pair', 'window', 'message')
  ),
  -- the central chunks, in conversation order, within max_chars
  picked as (
    select session_id, string_agg(content, E'\n' order by first_seq, part) as summary
    from (select x.*, sum(char_length(x.content)) over (partition by x.session_id order by x.r) as total
          from central x) y
    where y.r = 1 or y.total <= max_chars
    group by session_id
  ),
  updated as (
    update recall.sessions s
       set summary_embedding = m.centroid,
           summary = case when s.summary_model is null or s.summary_model = 'extractive'
                          then left(p.summary, max_chars) else s.summary end,
           summary_model = coalesce(nullif(s.summary_model, 'extractive'), 'extractive'),
           summary_at = now()
      from centroids m
      left join picked p using (session_id)
     where s.session_id = m.session_id
    returning 1
  )
  select count(*) into n from updated;
  return n;
end
$$;
