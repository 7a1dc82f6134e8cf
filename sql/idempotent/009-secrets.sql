-- 009-secrets
-- Secrets never enter memory: recall.redact() and the triggers that apply it, the patterns that
-- ship with pyrecall, and recall.redact_stored() for what was stored before.
--
-- Re-applied at every migrate. recall.secret_patterns (sql/incremental/014-secret-patterns.sql)
-- holds the patterns; every text written into memory passes recall.redact() first, whatever
-- writes it (a plain INSERT, COPY, the importers, recall.remember, an import of an export): a
-- message's content (recall._message_before_insert / _before_update, 010-messages.sql, before the
-- message's identity is derived from its text, so the same message read again is the same
-- message), a session's title and summary, a curated memory's or a summary chunk's text, a logged
-- query. The chunks, vectors and token counts are derived from the redacted text. See
-- docs/SECURITY.md "Secrets in transcripts".

-- _secret_patterns_check: a pattern compiles, matches no empty string (it would be replaced
-- between every two characters), its hints are lower-case (a text is searched in lower case for
-- them), and it does not match what it leaves behind (redact() must give
-- the same text when applied again: a re-import of a message finds it stored)
create or replace function recall._secret_patterns_check()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  -- (a pattern that does not compile fails here with PostgreSQL's own error, SQLSTATE 2201B:
  -- no exception block, which would be a subtransaction inside Citus' copy of the table)
  if '' ~ new.pattern then
    raise exception 'secret pattern %: it matches the empty string', quote_literal(new.name)
      using errcode = '22023';
  end if;
  if exists (select from unnest(new.hints) h where h is null or h = '' or h <> lower(h)) then
    raise exception 'secret pattern %: hints are non-empty lower-case strings, got %', quote_literal(new.name),
      new.hints using errcode = '22023';
  end if;
  if regexp_replace(new.replacement, '\\[0-9&]', '', 'g') ~ new.pattern then
    raise exception 'secret pattern %: its replacement % matches it again', quote_literal(new.name),
      quote_literal(new.replacement) using errcode = '22023';
  end if;
  return new;
end
$$;

drop trigger if exists secret_patterns_check on recall.secret_patterns;
create trigger secret_patterns_check before insert or update on recall.secret_patterns
  for each row execute function recall._secret_patterns_check();

-- the patterns that ship with pyrecall: written again at every migrate (a fix reaches every
-- database), their `enabled` as the DBA left it; a row of the DBA's of the same name is kept.
-- Each is a shape a credential has and ordinary text, code and prose practically never have
-- (measured on LoCoMo's dialogues and on the Python sources of this environment:
-- bench/results/2026-11-29b/secrets_lab.txt). Applied in name order; where two match the same
-- credential (GITHUB_TOKEN=ghp_...: assignment and github_token) the first one's replacement
-- stands, and no pattern matches what another left.
insert into recall.secret_patterns as p (name, pattern, replacement, hints, builtin, description)
values
  ('private_key',
   '-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----([^-]|-[^-])*(-----END ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----)?',
   '[REDACTED:private_key]', '{private key}', true,
   'A PEM/OpenSSH/PGP private key block, to its END line (or the end of a cut-off text)'),
  ('aws_access_key',
   '\m(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\M',
   '[REDACTED:aws_access_key]', '{akia,asia,abia,acca}', true,
   'An AWS access key id (its secret key is caught by assignment)'),
  ('github_token',
   '\m(gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})',
   '[REDACTED:github_token]', '{ghp_,gho_,ghu_,ghs_,ghr_,github_pat_}', true,
   'A GitHub personal, OAuth, app or fine-grained token'),
  ('gitlab_token',
   '\mgl(pat|oas|dt|ptt|rt)-[A-Za-z0-9_-]{20,}',
   '[REDACTED:gitlab_token]', '{glpat-,gloas-,gldt-,glptt-,glrt-}', true,
   'A GitLab personal, OAuth, deploy, trigger or runner token'),
  ('sk_key',
   '\msk-(ant-|proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}',
   '[REDACTED:api_key]', '{sk-}', true,
   'An OpenAI, Anthropic or like API key (sk-..., with digits and letters)'),
  ('stripe_key',
   '\m[sr]k_(live|test)_[0-9A-Za-z]{16,}',
   '[REDACTED:stripe_key]', '{k_live_,k_test_}', true,
   'A Stripe secret or restricted key'),
  ('slack_token',
   '\mxox[abposr]-[A-Za-z0-9-]{10,}',
   '[REDACTED:slack_token]', '{xox}', true,
   'A Slack bot, user or app token'),
  ('slack_webhook',
   'https://hooks\.slack\.com/(services|workflows|triggers)/[A-Za-z0-9/_-]+',
   '[REDACTED:slack_webhook]', '{hooks.slack.com/}', true,
   'A Slack incoming-webhook URL (the URL is the credential)'),
  ('google_api_key',
   '\mAIza[0-9A-Za-z_-]{35}',
   '[REDACTED:google_api_key]', '{aiza}', true,
   'A Google API key'),
  ('package_token',
   '\m(npm_[A-Za-z0-9]{36}\M|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}|hf_[A-Za-z0-9]{34,}\M)',
   '[REDACTED:package_token]', '{npm_,pypi-,hf_}', true,
   'An npm, PyPI or Hugging Face token'),
  ('jwt',
   '\meyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}',
   '[REDACTED:jwt]', '{eyj}', true,
   'A JSON Web Token (a session or API bearer token)'),
  ('url_password',
   '(?i)(\m[a-z][a-z0-9+.-]*://[^\s:/@''"<>]+:)[^\s@/''"<>[]+@',
   '\1[REDACTED]@', '{://}', true,
   'The password in a URL (postgresql://user:PASSWORD@host, https://user:PASSWORD@...)'),
  ('auth_header',
   '(?i)(authorization["'']?[[:space:]]*[:=][[:space:]]*["'']?(bearer|basic|token)[[:space:]]+)[A-Za-z0-9._~+/=-]{16,}',
   '\1[REDACTED]', '{authorization}', true,
   'The credential of an HTTP Authorization header'),
  ('assignment',
   '(?i)(\m[a-z0-9_.-]*(secret|token|password|passwd|pwd|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?key|credentials?)(_[a-z0-9]+){0,2}["'']?[[:space:]]*[:=][[:space:]]*["'']?)(?![A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_])(?=[A-Za-z0-9/+=_.~!@#%^&*-]*[0-9])(?=[A-Za-z0-9/+=_.~!@#%^&*-]*[a-z])[A-Za-z0-9/+=_.~!@#%^&*-]{8,}(?=$|[]\s''"<>])',
   '\1[REDACTED]', '{secret,token,passw,pwd,key,credential}', true,
   'A value of 8 or more characters, with letters and digits and not a dotted name (module.attr), given to a name ending in secret, token, password, api_key, ... (API_KEY=..., "password": "...")'),
  ('google_oauth_token',
   '\mya29\.[0-9A-Za-z_-]{20,}',
   '[REDACTED:google_oauth_token]', '{ya29.}', true,
   'A Google OAuth access token')
on conflict (name) do update
  set pattern = excluded.pattern, replacement = excluded.replacement, hints = excluded.hints,
      description = excluded.description
  where p.builtin;

-- redact: the text with every enabled pattern's matches replaced (NULL stays NULL). Patterns
-- apply in name order; the same text comes back when nothing matches, and applying it again to
-- its own result changes nothing.
create or replace function recall.redact(body text)
returns text
language plpgsql stable security invoker parallel safe
set search_path to pg_catalog, pg_temp
as $$
declare
  low text;
  p record;
begin
  if body is null then
    return null;
  end if;
  low := lower(body);
  for p in
    select s.pattern, s.replacement
    from recall.secret_patterns s
    where s.enabled
      and (s.hints is null or exists (select from unnest(s.hints) h where strpos(low, h) > 0))
    order by s.name
  loop
    body := regexp_replace(body, p.pattern, p.replacement, 'g');
  end loop;
  return body;
end
$$;

comment on function recall.redact(text) is $c$
The text with the matches of every enabled pattern of recall.secret_patterns replaced (an API key
becomes [REDACTED:api_key], a URL's password [REDACTED]); NULL for NULL. Every text entering
memory passes it (messages, session titles and summaries, curated memories); call it to see what
would be stored. Idempotent: redact(redact(t)) = redact(t).$c$;

-- secrets_in: how many matches of each enabled pattern a text holds (the patterns that match)
create or replace function recall.secrets_in(body text)
returns table (pattern text, matches int)
language sql stable security invoker parallel safe
set search_path to pg_catalog, pg_temp
as $$
  select s.name, regexp_count(body, s.pattern)
  from recall.secret_patterns s
  where s.enabled
    and (s.hints is null or exists (select from unnest(s.hints) h where strpos(lower(body), h) > 0))
    and body ~ s.pattern
  order by s.name
$$;

comment on function recall.secrets_in(text) is
  'The enabled patterns of recall.secret_patterns a text matches, with their number of matches (never the matches themselves).';

-- redact_stored: see the COMMENT below. Pattern by pattern, its regular expression and hints
-- passed as values: on a Citus cluster the statements run on the agent's shards, where a
-- function reading recall.secret_patterns inside them would be a nested distributed query. The
-- rows are counted first (a row holding two patterns counts for each), then rewritten; each
-- table's trigger applies every pattern again to a text that changed.
create or replace function recall.redact_stored(agent_id text, dry_run boolean default false)
returns table (pattern text, messages bigint, sessions bigint, memories bigint, queries bigint,
               session_ids text[])
language plpgsql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
#variable_conflict use_column
declare
  p record;
  msg_sessions text[];
  likes text[];
  n_msg bigint; n_sess bigint; n_mem bigint; n_log bigint;
  todo jsonb := '[]';
begin
  if redact_stored.agent_id is null or redact_stored.agent_id = '' then
    raise exception 'agent_id is required' using errcode = '22023';
  end if;
  if redact_stored.dry_run is null then
    raise exception 'dry_run must be true or false, not NULL' using errcode = '22023';
  end if;

  for p in select s.name, s.pattern, s.replacement, s.hints
           from recall.secret_patterns s where s.enabled order by s.name loop
    -- the hints as LIKE patterns of the lowered text ('_' and '%' escaped); none: every text
    likes := coalesce((select array_agg('%' || replace(replace(replace(h, '\', '\\'), '%', '\%'), '_', '\_') || '%')
                       from unnest(p.hints) h), array['%']);
    select count(*), array_agg(distinct m.session_id) into n_msg, msg_sessions from recall.messages m
    where m.agent_id = redact_stored.agent_id and lower(m.content) like any (likes) and m.content ~ p.pattern;
    select count(*) into n_sess from recall.sessions s
    where s.agent_id = redact_stored.agent_id
      and (lower(s.title) like any (likes) and s.title ~ p.pattern
           or lower(s.summary) like any (likes) and s.summary ~ p.pattern);
    -- (a summary chunk is its session's summary: counted with the sessions)
    select count(*) into n_mem from recall.chunks c
    where c.agent_id = redact_stored.agent_id and c.kind = 'memory'
      and lower(c.content) like any (likes) and c.content ~ p.pattern;
    select count(*) into n_log from recall.recall_log l
    where l.agent_id = redact_stored.agent_id and l.query_text is not null
      and lower(l.query_text) like any (likes) and l.query_text ~ p.pattern;
    if n_msg + n_sess + n_mem + n_log > 0 then
      pattern := p.name; messages := n_msg; sessions := n_sess; memories := n_mem; queries := n_log;
      session_ids := coalesce(msg_sessions, '{}');
      return next;
      todo := todo || jsonb_build_object('pattern', p.pattern, 'replacement', p.replacement, 'likes', likes);
    end if;
  end loop;
  if redact_stored.dry_run then
    return;
  end if;

  for p in select x->>'pattern' as pattern, x->>'replacement' as replacement,
                  array(select jsonb_array_elements_text(x->'likes')) as likes
           from jsonb_array_elements(todo) x loop
    -- a message whose text changes is redacted whole by its trigger, which also drops its token
    -- counts and vector; its session's chunks are derived again at once by the statement's
    -- trigger (on a Citus cluster the caller calls recall.chunk_sessions for session_ids)
    update recall.messages m
       set content = regexp_replace(m.content, p.pattern, p.replacement, 'g')
     where m.agent_id = redact_stored.agent_id and lower(m.content) like any (p.likes) and m.content ~ p.pattern;
    update recall.sessions s
       set title = regexp_replace(s.title, p.pattern, p.replacement, 'g'),
           summary = regexp_replace(s.summary, p.pattern, p.replacement, 'g'),
           summary_embedding = case when s.summary ~ p.pattern then null else s.summary_embedding end
     where s.agent_id = redact_stored.agent_id
       and (lower(s.title) like any (p.likes) and s.title ~ p.pattern
            or lower(s.summary) like any (p.likes) and s.summary ~ p.pattern);
    update recall.chunks c
       set content = regexp_replace(c.content, p.pattern, p.replacement, 'g'),
           n_tokens = recall._estimate_tokens(regexp_replace(c.content, p.pattern, p.replacement, 'g')),
           embedding = null, embedding_model = null, embedded_at = null,
           embed_attempts = 0, embed_error = null, embed_after = null
     where c.agent_id = redact_stored.agent_id and c.kind in ('memory', 'summary')
       and lower(c.content) like any (p.likes) and c.content ~ p.pattern;
    update recall.recall_log l
       set query_text = regexp_replace(l.query_text, p.pattern, p.replacement, 'g')
     where l.agent_id = redact_stored.agent_id and l.query_text is not null
       and lower(l.query_text) like any (p.likes) and l.query_text ~ p.pattern;
  end loop;
  if jsonb_array_length(todo) > 0 then
    perform pg_notify('recall_chunks', 'pending');
  end if;
end
$$;

comment on function recall.redact_stored(text, boolean) is $c$
Redact what agent_id stored before a pattern of recall.secret_patterns existed (or was enabled):
every message, session title and summary, curated memory, summary chunk and logged query whose
text a pattern matches is rewritten through recall.redact(). One row per pattern that matched:
how many messages, sessions, memories and logged queries held it (counted before the change),
and the sessions of those messages (session_ids). The chunks of a changed message are derived
again (their vectors and the message's go: `pyrecall embed` embeds the new text; on a Citus
cluster call recall.chunk_sessions for session_ids after, as after any UPDATE of messages:
Recall.redact_stored does), a changed memory or summary loses its vector likewise. dry_run:
count only, change nothing. The old row versions stay in the table files until VACUUM (and in
backups and WAL archives): run VACUUM on recall.messages, recall.chunks and recall.sessions
after. Runs as the caller: an agent's role reaches its own rows only.$c$;

-- _redact_chunk: a curated memory's or a summary's text (the chunks derived from messages are
-- redacted with them); when it changes, its token count follows and its vector (of the old text)
-- goes: the worker embeds the text stored
create or replace function recall._redact_chunk()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
declare
  clean text := recall.redact(new.content);
begin
  if clean is distinct from new.content then
    new.content := clean;
    new.n_tokens := recall._estimate_tokens(clean);
    new.embedding := null;
    new.embedding_model := null;
    new.embedded_at := null;
  end if;
  return new;
end
$$;

drop trigger if exists chunks_redact on recall.chunks;
create trigger chunks_redact before insert or update of content on recall.chunks
  for each row when (new.kind in ('memory', 'summary'))
  execute function recall._redact_chunk();

-- _redact_session: a session's title (often its first prompt) and summary
create or replace function recall._redact_session()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  new.title := recall.redact(new.title);
  new.summary := recall.redact(new.summary);
  return new;
end
$$;

drop trigger if exists sessions_redact on recall.sessions;
create trigger sessions_redact before insert or update of title, summary on recall.sessions
  for each row when (new.title is not null or new.summary is not null)
  execute function recall._redact_session();

-- _redact_log: a logged query's text (kept only with recall_log_text)
create or replace function recall._redact_log()
returns trigger
language plpgsql volatile security invoker
set search_path to pg_catalog, pg_temp
as $$
begin
  new.query_text := recall.redact(new.query_text);
  return new;
end
$$;

drop trigger if exists recall_log_redact on recall.recall_log;
create trigger recall_log_redact before insert or update of query_text on recall.recall_log
  for each row when (new.query_text is not null)
  execute function recall._redact_log();
