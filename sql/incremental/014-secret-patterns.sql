-- 014-secret-patterns
-- recall.secret_patterns: what is never kept in memory. Transcripts hold credentials: an API key
-- pasted into a prompt, `cat .env` in a tool result, a DSN with its password in an error, a
-- private key an agent generated. Every text that enters memory (a message's content, a session's
-- title and summary, a curated memory) is rewritten on its way in by recall.redact()
-- (sql/idempotent/009-secrets.sql): each enabled pattern's matches become its replacement, so a
-- secret is stored nowhere, neither in the text, nor in its chunks, its vectors, an export or a
-- context handed to a model.
--
-- pattern: a PostgreSQL regular expression (ARE: `\m` starts a word, `(?i)` ignores case,
-- `(?=...)` looks ahead); replacement: regexp_replace's (`\1` the first parenthesised part);
-- hints: lower-case strings of which every match holds one (NULL: none known): a text that holds
-- none of them is not searched for the pattern (a substring search costs a fraction of a
-- regular expression's, and most texts hold no credential). The
-- patterns that ship with pyrecall (builtin) are written again at every migrate from
-- 009-secrets.sql, their `enabled` kept: turn one off with `update ... set enabled = false`, add
-- one of your own with an insert (docs/SECURITY.md). Rows are checked as they are written: the
-- pattern must compile, match no empty string, and the text it leaves must not match it again.
--
-- Read by every role that writes memory (the triggers run as the caller); written by the owner
-- only. On a Citus cluster a reference table (sql/citus/distribute.sql): the triggers run on the
-- workers. Run once, in a transaction, by `pyrecall migrate`. Released: never edit; change in a
-- new file.
create table recall.secret_patterns
( name        text primary key check (name ~ '^[a-z][a-z0-9_]*$')
, pattern     text not null
, replacement text not null check (replacement <> '')
, hints       text[]
, enabled     boolean not null default true
, builtin     boolean not null default false
, description text
);
comment on table recall.secret_patterns is
  'Credentials never stored: each enabled pattern (a PostgreSQL regular expression) is replaced in every text entering memory by recall.redact().';

grant select on recall.secret_patterns to recall_agent, recall_admin;
