-- 013-message-vectors
-- recall.messages.embedding: each text message's own vector ("Speaker: text", the turn as a
-- passage shows it, by the model that embeds the chunks), so that a budget filled turn by turn
-- (hybrid_recall_v11, session_recall_v11; issue 19) can value a turn by its own meaning, not
-- only by its chunk's and its own words: on the LoCoMo dev split +0.02 to +0.03 evidence recall
-- at every budget, multi-hop +0.06 at 1,000 tokens (bench/LOG.md, 2026-11-28 second session).
--
-- NULL until embedded: the embed worker (pyrecall/_worker.py) embeds the text messages of the
-- chat chunks (window, turn_pair, message) it embeds, in the same transaction and the same
-- UPDATE as their token counts (011-message-tokens), all of them again when it re-embeds with
-- another model. A change of the turn's text (content, role, metadata: the speaker) sets it NULL
-- again (recall._message_before_update); the chunks it changes are embedded again. A reader
-- uses the turn's chunk's vector while the turn has none.
--
-- The column is `vector` without a dimension: the worker writes the installed dimension only
-- (pyrecall._worker.check_dimension), `pyrecall migrate --change-dimension` sets every message's
-- vector NULL with the chunks'. (A typed column would need a DO block here; a Citus coordinator
-- runs this file statement by statement.) Not indexed: it is read for the turns of the chunks a
-- recall ranked, by primary key, never searched.
--
-- The messages stored before this migration sit in chunks embedded already: the config key
-- message_vectors_backfill (set here when there are messages) tells the worker to embed them
-- once, in message_id order (with their counts when missing); it removes the key when done.
--
-- Adding a nullable column without a default rewrites nothing (an instant ACCESS EXCLUSIVE
-- lock). Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a
-- new file.
alter table recall.messages add column embedding vector;
comment on column recall.messages.embedding is
  'The turn''s own vector ("Speaker: text", by the chunks'' model); NULL until the embed worker embeds it. Read by the turn-by-turn fill (recall._fill_v11).';
insert into recall.config (key, value)
select 'message_vectors_backfill', 'true'::jsonb
where exists (select 1 from recall.messages);
