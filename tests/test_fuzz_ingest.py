"""Fuzzing the Claude Code, Codex, Gemini CLI and JSONL importers *through ingestion into the database*.

tests/test_importers_parse.py fuzzes the parsers alone. Here each generated (often broken)
file is parsed, written by the one ingestion path (pyrecall._ingest.ingest), chunked by the
database, and recalled. Whatever the bytes: no exception; the stored messages are exactly the
parsed ones (in order, de-duplicated by their ids, nothing added or altered); every word of
every session field and chunk comes from the file (or is a speaker label the chunker adds);
recall over the result works.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from decimal import Decimal
from pathlib import Path

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_importers_parse import (
    CLAUDE,
    CODEX,
    GEMINI,
    GENERIC,
    _oracle,
    claude_lines,
    codex_lines,
    gemini_lines,
    jsonl_lines,
    line_files,
    mutated,
)

from pyrecall._ingest import _stable_ids, clean_json, ingest
from pyrecall.importers import claude_code, codex, gemini, jsonl

AGENT = "fuzz"
LABELS = {"User", "Assistant", "System", "Tool", "Result"}     # what the chunker writes itself
# PYRECALL_FUZZ_EXAMPLES=1000 for a longer hunt
FUZZ = settings(max_examples=int(os.environ.get("PYRECALL_FUZZ_EXAMPLES", "30")), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


def parse(parser, data: bytes):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "s.jsonl")
        path.write_bytes(data)
        return parser.parse(path)


def expected_messages(result) -> dict[str, list[tuple]]:
    """What the database must hold per session: the parsed messages, the first of each id."""
    out = {}
    for s in result.sessions:
        seen, rows = set(), []
        for m, ext in zip(s.messages, _stable_ids(s), strict=True):
            if ext in seen:
                continue
            seen.add(ext)
            rows.append((ext, m.role, m.kind, m.content, numbers(json.loads(clean_json(m.metadata or {}))),
                         m.created_at))
        out[s.session_id] = rows
    return out


def numbers(value):
    """JSON with its numbers as Decimals: jsonb keeps 6.4516e16 as 64516001161832290, equal in value."""
    return json.loads(json.dumps(value), parse_float=Decimal, parse_int=Decimal)


def words_from(blob: str, text: str | None) -> list[str]:
    """The words of text that the file does not hold."""
    return [w for w in re.findall(r"\w+", text or "") if w not in blob and w not in LABELS]


def through_the_database(conn, parser, data: bytes) -> None:
    result = parse(parser, data)
    try:
        ingest(conn, result.sessions, agent_id=AGENT)
        blob = _oracle(data)
        want = expected_messages(result)
        got: dict[str, list[tuple]] = {}
        for sid, ext, role, kind, content, meta, created in conn.execute(
                "select session_id, external_id, role, kind, content, metadata, created_at from recall.messages "
                "order by session_id, seq").fetchall():
            got.setdefault(sid, []).append((ext, role, kind, content, numbers(meta), created))
        assert set(got) == set(want)
        for sid, rows in want.items():
            assert [r[:5] for r in got[sid]] == [r[:5] for r in rows]
            assert all(w[5] is None or g[5] == w[5] for g, w in zip(got[sid], rows, strict=True))
        agents = {s.session_id: s.agent_id or AGENT for s in result.sessions}   # a JSONL line may name its agent
        assert dict(conn.execute("select session_id, agent_id from recall.sessions").fetchall()) == agents
        assert conn.execute("select count(*) from recall.messages m join recall.sessions s using (session_id) "
                            "where m.agent_id <> s.agent_id").fetchone()[0] == 0
        for sid, *fields in conn.execute("select session_id, title, project, branch from recall.sessions").fetchall():
            # a file that names no session gets one from its name: s.jsonl -> "s" or "s-<path hash>"
            assert words_from(blob, sid) == [] or re.fullmatch(r"s(-[0-9a-f]{12})?", sid), sid
            assert all(words_from(blob, v) == [] for v in fields), fields
        for content, _meta, stray in conn.execute(
                """select c.content, c.metadata::text,
                          (select count(*) from unnest(c.message_ids) i
                           where not exists (select from recall.messages m
                                             where m.message_id = i and m.session_id = c.session_id))
                   from recall.chunks c""").fetchall():
            assert stray == 0
            assert words_from(blob, content) == [], content
        # recall over whatever was stored
        first = conn.execute("select agent_id, content from recall.messages order by message_id limit 1").fetchone()
        if first:
            query = " ".join(re.findall(r"\w+", first[1])[:5]) or "x"
            try:
                rows = conn.execute("select chunk_id, content from recall.hybrid_recall(agent_id => %s, "
                                    "query_text => %s, k => 50)", [first[0], query]).fetchall()
                assert {c for c, _ in rows} <= {c for (c,) in conn.execute("select chunk_id from recall.chunks")}
            except psycopg.errors.NumericValueOutOfRange:
                # the known recency underflow (see test_hostile_input): only with history older
                # than 1074 half-lives (30 days each: ~88 years)
                assert conn.execute("select min(created_at) < now() - interval '88 years' "
                                    "from recall.chunks").fetchone()[0]
    finally:
        # a clean slate for the next example: a session deleted is recorded as forgotten
        # (059-retention.sql), and the next example may store one of the same id
        conn.execute("delete from recall.sessions")
        conn.execute("delete from recall.forgotten_sessions")


@FUZZ
@given(data=line_files(claude_lines))
def test_fuzz_claude_code_through_ingestion(conn, data):
    through_the_database(conn, claude_code, data)


@FUZZ
@given(data=line_files(codex_lines))
def test_fuzz_codex_through_ingestion(conn, data):
    through_the_database(conn, codex, data)


@FUZZ
@given(data=line_files(gemini_lines))
def test_fuzz_gemini_through_ingestion(conn, data):
    through_the_database(conn, gemini, data)


@FUZZ
@given(data=line_files(jsonl_lines))
def test_fuzz_jsonl_through_ingestion(conn, data):
    through_the_database(conn, jsonl, data)


@FUZZ
@given(st.data())
def test_fuzz_mutated_files_through_ingestion(conn, data):
    for parser, path in [(claude_code, CLAUDE), (codex, CODEX), (gemini, GEMINI), (jsonl, GENERIC)]:
        through_the_database(conn, parser, data.draw(mutated(path.read_bytes())))


def test_a_real_transcript_through_ingestion(conn):
    """The unfuzzed fixtures pass the same checks (so the checks are not vacuous)."""
    for parser, path in [(claude_code, CLAUDE), (codex, CODEX), (gemini, GEMINI), (jsonl, GENERIC)]:
        data = path.read_bytes()
        result = parse(parser, data)
        assert sum(len(s.messages) for s in result.sessions) > 3
        through_the_database(conn, parser, data)
