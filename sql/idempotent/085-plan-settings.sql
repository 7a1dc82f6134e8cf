-- 085-plan-settings
-- How released functions are planned (never what they return). The released files are not
-- changed: `create or replace function` in them resets a function's settings at every
-- migrate, and this file, re-applied after them, puts these back. (On a Citus cluster
-- sql/citus/distribute.sql adjusts the functions it must; it leaves these alone.)
--
-- auto_context v1-v10 (v12 to v15 set it in their definitions): planned with each call's values (force_custom_plan). PL/pgSQL plans a
-- statement with the call's values for its first five executions in a session, then keeps a
-- generic plan when it looks no costlier. For auto_context's sections that plan is far worse:
-- "the newest chunks of this project" estimated at 1,000 rows for any project read every
-- chunk of a project holding half of a 100k-chunk agent through the GIN index on metadata and
-- sorted them (65 ms), where the call's own plan walks the (agent_id, created_at) B-tree from
-- the newest. From the sixth call on one connection (the MCP server's pool, the Python
-- client, a worker), auto_context took 166-219 ms instead of 33-43 (with a task) and 194-220
-- instead of 67-99 (without); with this setting every call stays at the first calls' time
-- (bench/LOG.md 2026-11-28). A new release sets it in its own definition.
alter function recall.auto_context_v1 set plan_cache_mode = force_custom_plan;
alter function recall.auto_context_v2 set plan_cache_mode = force_custom_plan;
alter function recall.auto_context_v3 set plan_cache_mode = force_custom_plan;
alter function recall.auto_context_v4 set plan_cache_mode = force_custom_plan;
alter function recall.auto_context_v6 set plan_cache_mode = force_custom_plan;
alter function recall.auto_context_v10 set plan_cache_mode = force_custom_plan;
