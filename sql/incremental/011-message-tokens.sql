-- 011-message-tokens
-- recall.messages.n_tokens and date_tokens: what a message costs in a context, by the
-- embedding model's count, so that a budget filled turn by turn (hybrid_recall_v7, issue 19)
-- pays each turn what the model counts, not an estimate.
--
-- The unit is the message (a turn): the turn-by-turn fill takes messages, and a passage it
-- returns is its turns as recall._passage_text_v7 writes them: "Speaker: text" joined by blank
-- lines, headed by the date line "[D Month YYYY]" of its first turn when dated. So:
--   n_tokens     the model's count of the turn as a passage holds it, with the blank line after
--                it: `Speaker: text` || E'\n\n' (the speaker as recall._speaker names it). With
--                a word-piece model (all-MiniLM-L6-v2) counts add up across whitespace, so a
--                passage's count is the sum of its turns'; with a BPE model the blank line is
--                a token of its own, paid by the turn before it.
--   date_tokens  the model's count of the date line a passage opened by this message starts
--                with: '[' || to_char(created_at at time zone 'UTC', 'FMDD FMMonth YYYY') || E']\n'.
-- NULL until counted: the embed worker (pyrecall/_worker.py) counts the text messages of the
-- chat chunks (window, turn_pair, message) it embeds, in the same transaction (all of them
-- again when it re-embeds with another model). Until then a reader estimates from the same
-- text (recall._estimate_tokens' rule, four characters a token). A change of what the text is
-- made of (content, metadata, role, created_at) sets them NULL again
-- (recall._message_before_update); the chunks it changes are embedded, and counted, again.
-- Nothing is computed at insert, and no index added: ingestion (plain INSERT, COPY,
-- add_messages) costs what it cost.
--
-- The messages stored before this migration sit in chunks embedded already: the config key
-- message_tokens_backfill (set here when there are messages) tells the worker to count them
-- once, in message_id order; it removes the key when done.
--
-- Adding nullable columns without a default rewrites nothing (an instant ACCESS EXCLUSIVE
-- lock). Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a
-- new file.
-- (constraints named as PostgreSQL would name them, in a command of their own, and a select
-- list below: a Citus coordinator refuses an ADD COLUMN with an unnamed constraint and a
-- select with no select list over the shards; docs/SCALING.md)
alter table recall.messages add column n_tokens int;
alter table recall.messages add constraint messages_n_tokens_check check (n_tokens > 0);
alter table recall.messages add column date_tokens smallint;
alter table recall.messages add constraint messages_date_tokens_check check (date_tokens > 0);
comment on column recall.messages.n_tokens is
  'Tokens of the turn as a passage holds it ("Speaker: text" and the blank line after it), by the embedding model; NULL until the embed worker counts it.';
comment on column recall.messages.date_tokens is
  'Tokens of the date line ("[D Month YYYY]") of a passage this message opens, by the embedding model; NULL until counted.';
insert into recall.config (key, value)
select 'message_tokens_backfill', 'true'::jsonb
where exists (select 1 from recall.messages);
