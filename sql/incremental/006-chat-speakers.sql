-- 006-chat-speakers
-- Chat sessions (metadata.chunking = 'window', e.g. Discord imports) are chunked again.
--
-- Their windows labelled every human "User:": the Discord importer records who spoke in
-- metadata.author, the chunker read only metadata.speaker. The chunker now names each message
-- by metadata.speaker, else metadata.author, else the role, and a window's metadata lists its
-- messages ("messages": each one's metadata, seq and external_id), so that a filter on
-- author or permalink can match any message of a window (v4's filter).
--
-- This file only asks for it: the sessions are re-chunked at the end of
-- idempotent/010-messages.sql, by the new chunker, in the same `pyrecall migrate`. Windows
-- whose text changes lose their embedding and are embedded again by the next
-- `pyrecall embed` (or the worker); until then they are found by keywords.
-- Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a new file.
insert into recall.config (key, value) values ('rechunk_pending', '{"chunking": "window"}')
on conflict (key) do update
  set value = case jsonb_typeof(recall.config.value) when 'array' then recall.config.value
                   else jsonb_build_array(recall.config.value) end
              || jsonb_build_array(excluded.value);
