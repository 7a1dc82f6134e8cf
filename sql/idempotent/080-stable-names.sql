-- 080-stable-names
-- The stable names callers use: recall.hybrid_recall, recall.session_recall and
-- recall.auto_context, each calling the current released version. Releasing a new version
-- (sql/README.md) moves them here, in one place; the versions live in sql/released/.

-- Today hybrid_recall and session_recall call v13, auto_context v15 (v4's shapes: same
-- arguments and rows; the turn_text_weight and turn_vector_weight of hybrid_recall_v13 and
-- session_recall_v13 keep their defaults). Their v3 shapes go first (v4 adds arguments and columns, so create or
-- replace cannot change them); a call by name with v3's arguments finds the v4 shape.
drop function if exists recall.hybrid_recall(
  text, text, vector, int, int, text, float8, jsonb, text[], timestamptz, timestamptz, float8,
  float8, float8, float8, interval, int, timestamptz, float8);
drop function if exists recall.session_recall(
  text, text, vector, int, int, int, text, jsonb, text[], timestamptz, timestamptz, interval,
  timestamptz, int, float8, float8, float8, float8, float8, float8, float8);
drop function if exists recall.auto_context(
  text, text, text, text, vector, int, text, timestamptz, float8, float8);
-- (and session_recall's v1 shape, which v2 replaced, for databases older than that)
drop function if exists recall.session_recall(
  text, text, vector, int, int, int, text, jsonb, text[], timestamptz, timestamptz, interval,
  timestamptz, int, float8, float8, float8);

-- hybrid_recall_turns, the development form of v7's fill (issue 19), is gone: v7 replaces it
drop function if exists recall.hybrid_recall_turns(
  text, text, vector, int, int, text, float8, jsonb, text[], timestamptz, timestamptz, float8,
  float8, float8, float8, interval, int, timestamptz, float8, int, float8);
drop function if exists recall._fill_turns(bigint[], float8[], int, text[], float8[], float8);

-- hybrid_recall: the stable name; today it is v13
create or replace function recall.hybrid_recall(
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
  select * from recall.hybrid_recall_v13(
    agent_id, query_text, query_embedding, k, token_budget, exclude_session_id,
    min_similarity, filter, kinds, since, until, vector_weight, text_weight, recency_weight,
    importance_weight, half_life, candidates, as_of, dedup_similarity, turns_per_session)
$$;

comment on function recall.hybrid_recall is
  'The stable name of hybrid recall; calls recall.hybrid_recall_v13 (see its comment).';

-- session_recall: the stable name; today it is v13
create or replace function recall.session_recall(
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
language sql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
  select * from recall.session_recall_v13(
    agent_id, query_text, query_embedding, k, n_sessions, token_budget, exclude_session_id,
    filter, kinds, since, until, half_life, as_of, candidates, summary_weight, session_weight,
    dedup_similarity, vector_weight, text_weight, recency_weight, importance_weight,
    turns_per_session)
$$;

comment on function recall.session_recall is
  'The stable name of session-aware recall; calls recall.session_recall_v13 (see its comment).';

-- auto_context: the stable name; today it is v15
create or replace function recall.auto_context(
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
language sql volatile security invoker
set search_path to pg_catalog, public, pg_temp
as $$
  select * from recall.auto_context_v15(agent_id, project, branch, task_text, task_embedding,
                                       token_budget, exclude_session_id, as_of, recent_share,
                                       failure_share, all_projects)
$$;

comment on function recall.auto_context is
  'The stable name of the session-start context; calls recall.auto_context_v15 (see its comment).';
