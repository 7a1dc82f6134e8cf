-- 012-window-parts
-- Chat sessions (metadata.chunking = 'window') are chunked again.
--
-- A window longer than chunk_max_chars is cut into overlapping parts; each part listed every
-- message of the window (message_ids, metadata.messages) and had the window's first message's
-- keys, so a filter on one message (author, permalink, ...) matched parts that do not hold it,
-- and a result named messages it does not show. The chunker now gives each part the messages
-- it holds (recall._window_part_members) and the first one's keys.
--
-- This file only asks for it: the sessions are re-chunked at the end of
-- idempotent/010-messages.sql, by the new chunker, in the same `pyrecall migrate`. Only parts
-- of long windows change (their text stays: they keep their embedding); the other chunks are
-- derived again and left as they are.
-- Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a new file.
-- (only immutable functions in the ON CONFLICT update: on a Citus cluster recall.config is a
-- reference table, which refuses others there; '[]' || x is jsonb_build_array(x); a searched
-- CASE: Citus sends a simple CASE of a function to the workers as text = boolean)
insert into recall.config (key, value) values ('rechunk_pending', '{"chunking": "window"}')
on conflict (key) do update
  set value = case when jsonb_typeof(recall.config.value) = 'array' then recall.config.value
                   else '[]'::jsonb || recall.config.value end
              || ('[]'::jsonb || excluded.value);
