"""Hostile and broken input at every entry point: the SQL functions, the Python client, the
CLI and the importers. Each case ends in a clear error or a correct result: never a crash
(an exception that is not pyrecall's or the database's), never a hang (statement_timeout and
subprocess timeouts bound every call), never a half-written session (counts checked after).

Bugs found here that live in files of other owners are marked ``xfail(strict=True)`` with
the exact defect: the mark turns into a failure the day the bug is fixed, so it gets removed.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from embed_server import EmbedServer
from fake_embedder import FakeEmbedder
from psycopg.types.json import Jsonb

from pyrecall import ConfigError
from pyrecall.cli import main as cli
from pyrecall.client import AsyncRecall, Recall

AS_OF = datetime(2026, 6, 1, tzinfo=UTC)
DIM = 384

HOSTILE = [
    "'; drop table recall.chunks; --",
    "\"; delete from recall.messages; --",
    "' or '1'='1",
    "a') or true; --",
    "Robert'); DROP TABLE students;--",
    "$$; select pg_sleep(30); $$",
    "$q$ || (select string_agg(content, ',') from recall.chunks) || $q$",
    "\\'; truncate recall.sessions cascade; --",
    "a' || pg_sleep(5) || '",
    "%s %(agent_id)s {0} %% {}",
    "/* */ -- \n select 1;",
    "!!&&|| :* <-> ((( \"unclosed' - -x",
    "(?<!x)(a+)+$ .* [[:alpha:]] \\1",
    "{\"project\": \"x\"}",
    "\u202egnp.exe \u200b\ufeff é 中文 🙂",
    "x" * 20_000,
]
# clear errors: bad data (22...), integrity (23...), an unknown object named by the caller
# (42704), a feature not installed (0A000), a statement too deep (54001). Anything else (a
# syntax error, an unknown table, an internal error, a cancelled statement) means trouble.
CLEAR = ("22", "23", "42704", "0A000", "54001", "P0002")  # P0002: an id that is not the agent's (memories, set_importance)


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def world(conn, agent="A"):
    """A small history: two sessions, embedded, summarized."""
    for s in (1, 2):
        sid = f"{agent}-{s}"
        conn.execute("insert into recall.sessions (session_id, agent_id, project, branch) values "
                     "(%s, %s, 'shop', 'main')", [sid, agent])
        conn.execute("insert into recall.messages (session_id, role, content, created_at) values "
                     "(%s, 'user', %s, %s), (%s, 'assistant', 'compose up; it failed: "
                     "Traceback (most recent call last)', %s)",
                     [sid, f"how do we deploy docker, take {s}?", AS_OF - timedelta(days=s), sid,
                      AS_OF - timedelta(days=s)])
    for cid, in conn.execute("select chunk_id from recall.chunks where agent_id = %s", [agent]).fetchall():
        conn.execute("update recall.chunks set embedding = %s where chunk_id = %s", [unit(cid), cid])
    conn.execute("select recall.summarize_sessions(only_stale => false)")


def fingerprint(conn) -> tuple:
    return conn.execute("""select (select count(*) from recall.sessions), (select count(*) from recall.messages),
                                  (select count(*) from recall.chunks),
                                  (select md5(string_agg(c::text, '|' order by chunk_id)) from recall.chunks c),
                                  (select count(*) from pg_class where relnamespace = 'recall'::regnamespace)""").fetchone()


def outcome(conn, sql, params):
    """("rows", n) or ("error", sqlstate, message), within a transaction rolled back after."""
    try:
        with conn.transaction():
            rows = conn.execute(sql, params).fetchall()
            raise psycopg.Rollback
    except psycopg.Error as exc:
        return ("error", exc.sqlstate, exc.diag.message_primary)
    return ("rows", len(rows))


# ---------------------------------------------------------------- SQL functions

PUBLIC = """
select p.proname, p.oid::regprocedure::text, p.pronargs, p.pronargdefaults, p.proargnames, p.proargmodes,
       array(select format_type(t, null) from unnest(p.proargtypes::oid[]) t)
from pg_proc p
where p.pronamespace = 'recall'::regnamespace and p.prokind = 'f' and p.proname !~ '^_'
  and format_type(p.prorettype, null) <> 'trigger'
order by 2"""

SANE = {  # a working value for each parameter a call needs, by name, then by type
    "agent_id": "A", "query_text": "docker deploy", "task_text": "docker deploy", "as_of": AS_OF,
    "role_name": "no_such_role_x",
}
SANE_TYPE = {"text": "docker", "integer": 5, "boolean": True, "double precision": 0.5, "jsonb": Jsonb({}),
             "interval": timedelta(days=30), "timestamp with time zone": AS_OF, "vector": unit(1),
             "text[]": ["turn_pair"], "bigint": 1, "integer[]": [10]}


def sql_calls(conn):
    """For every public function and each of its text, text[] and jsonb parameters: a call with
    that parameter hostile and every other one sane."""
    out = []
    for name, sig, nargs, ndefaults, argnames, argmodes, argtypes in conn.execute(PUBLIC).fetchall():
        names = [n for n, m in zip(argnames or [], argmodes or ["i"] * nargs, strict=False) if m in ("i", "b", "v")]
        params = list(zip(names, argtypes, strict=True))
        for target, typ in params:
            if typ not in ("text", "text[]", "jsonb"):
                continue
            for h in HOSTILE + ["", " "]:
                args, values = [], []
                for i, (arg, t) in enumerate(params):
                    if arg == target:
                        value = {"text": h, "text[]": [h, "turn_pair"], "jsonb": Jsonb({h: h, "project": h})}[t]
                    elif arg in SANE:
                        value = SANE[arg]
                    elif i < nargs - ndefaults:
                        value = SANE_TYPE[t]
                    else:
                        continue
                    args.append(f"{arg} => %s::{t}")
                    values.append(value)
                out.append((f"{sig} {target}={h[:30]!r}", f"select * from recall.{name}({', '.join(args)})", values))
    return out


def test_every_public_sql_function_takes_hostile_text_in_every_text_argument(conn):
    world(conn)
    conn.execute("set statement_timeout = '10s'")
    before = fingerprint(conn)
    calls = sql_calls(conn)
    assert len({c[0].split(" ")[0] for c in calls}) >= 8
    bad = {}
    for key, sql, params in calls:
        result = outcome(conn, sql, params)
        if result[0] == "error" and not result[1].startswith(CLEAR):
            bad[key] = result
    assert bad == {}
    assert fingerprint(conn) == before
    # the text is data: recall still works, and finds nothing for words nobody wrote
    assert outcome(conn, "select * from recall.hybrid_recall('A', 'docker')", []) == ("rows", 2)


def test_hostile_text_is_stored_verbatim_and_recalled(conn):
    """As ids, names, metadata and content, through plain SQL: what goes in comes back."""
    for h in HOSTILE[:-1]:
        stored_and_recalled(conn, h)
    assert conn.execute("select count(*) from recall.chunks").fetchone()[0] == len(HOSTILE) - 1


def stored_and_recalled(conn, h):
    conn.execute("insert into recall.sessions (session_id, agent_id, title, project, branch, metadata) "
                 "values (%s, %s, %s, %s, %s, %s)", [h, h, h, h, h, Jsonb({h: h})])
    conn.execute("insert into recall.messages (session_id, role, content, metadata) values (%s, 'user', %s, %s)",
                 [h, h + " zebrafish", Jsonb({"note": h})])
    rows = conn.execute("select session_id, content, metadata from recall.hybrid_recall(agent_id => %s, "
                        "query_text => 'zebrafish', filter => %s, exclude_session_id => %s)",
                        [h, Jsonb({"project": h, h: h}), h + "x"]).fetchall()
    assert rows == [(h, f"User: {h} zebrafish", {h: h, "note": h, "project": h, "branch": h})]


QUERY_VECTORS = [  # (name, vector, SQLSTATE, message)
    ("NaN", np.where(np.arange(DIM) == 5, np.nan, unit(2)).astype(np.float32), "22000", "NaN not allowed in vector"),
    ("infinity", np.where(np.arange(DIM) == 5, np.inf, unit(2)).astype(np.float32), "22000",
     "infinite value not allowed in vector"),
    ("all zeros", np.zeros(DIM, dtype=np.float32), "22023", "all zeros: cosine similarity is undefined"),
    ("383 dims", unit(2)[:-1], "22023", "query_embedding has 383 dimensions; this database stores 384"),
    ("1 dims", np.ones(1, dtype=np.float32), "22023", "has 1 dimensions"),
]


def test_bad_query_vectors_are_clear_errors(conn):
    world(conn)
    for fn, arg in [("hybrid_recall", "query_embedding"), ("session_recall", "query_embedding"),
                    ("auto_context", "task_embedding")]:
        for name, vector, state, message in QUERY_VECTORS:
            bad_vector(conn, fn, arg, name, vector, state, message)


def bad_vector(conn, fn, arg, name, vector, state, message):
    # auto_context (v6) checks the dimension itself too, as hybrid_recall does (v4 left it to
    # pgvector: 22000 "different vector dimensions")
    result = outcome(conn, f"select * from recall.{fn}(agent_id => 'A', {arg} => %s)", [vector])
    assert result[0] == "error" and result[1] == state and message in result[2], result


def test_zero_vector_chunk_does_not_outrank_real_matches(conn):
    world(conn)
    conn.execute("update recall.chunks set embedding = %s where chunk_id = (select min(chunk_id) from recall.chunks)",
                 [np.zeros(DIM, dtype=np.float32)])
    zero = conn.execute("select min(chunk_id) from recall.chunks").fetchone()[0]
    n_docker = conn.execute("select count(*) from recall.chunks where agent_id = 'A' "
                            "and tsv @@ 'docker'::tsquery").fetchone()[0]
    assert n_docker >= 2
    for fn in ("hybrid_recall", "session_recall"):
        rows = conn.execute(f"select chunk_id, score, similarity from recall.{fn}(agent_id => 'A', "
                            "query_text => 'docker', query_embedding => %s, as_of => %s)",
                            [unit(3), AS_OF]).fetchall()
        assert rows and all(np.isfinite(r[1]) for r in rows), (fn, rows)
        assert [r[2] for r in rows if r[0] == zero] in ([], [None]), (fn, rows)  # undefined, not NaN
        # every chunk matching 'docker' is there: NaN >= dedup_similarity is true in PostgreSQL,
        # so a NaN cosine once made the zero vector a "near-duplicate" of everything after it
        assert len(rows) == n_docker, (fn, rows)
        assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    rows = conn.execute("select chunk_id, similarity from recall.auto_context(agent_id => 'A', "
                        "task_embedding => %s, as_of => %s)", [unit(3), AS_OF]).fetchall()
    assert rows and all(sim is None or np.isfinite(sim) for _, sim in rows)
    assert [sim for cid, sim in rows if cid == zero] in ([], [None])


LIMITS = [  # (arguments, expected: number of rows, or the error message)
    ("k => 1000", 2), ("k => 2147483647", "k must be between 1 and 1000, got 2147483647"),
    ("k => 0", "k must be between 1 and 1000, got 0"), ("k => -2147483648", "k must be between 1 and 1000"),
    ("token_budget => 2147483647", 2), ("token_budget => 0", 0), ("token_budget => -1", "token_budget must be >= 0"),
    ("candidates => 10000", 2), ("candidates => 10001", "candidates must be between 1 and 10000"),
    ("half_life => '-1 day'", "half_life must be a positive interval, got -1 days"),
    ("half_life => '0'", "half_life must be a positive interval"),
    ("half_life => '-infinity'", "half_life must be a positive interval"),
    ("half_life => '1000000 years'", 2), ("half_life => 'infinity'", 2),
    ("as_of => 'infinity'", 2), ("as_of => '-infinity'", 2),
    ("since => '-infinity', until => 'infinity'", 2), ("since => 'infinity'", 0),
    ("since => '2030-01-01', until => '2020-01-01'", "since (2030-01-01 00:00:00+00) is after until"),
    ("min_similarity => 'NaN'", "min_similarity must be between -1 and 1, got NaN"),
    ("vector_weight => 'Infinity'", "weights must be finite and >= 0"),
    ("filter => '{\"no_such_key\": \"x\"}'", 0), ("filter => '{\"project\": {\"deep\": [1]}}'", 0),
    ("filter => '{}'", 2), ("filter => '[]'", "filter must be a JSON object, got a JSON array"),
    ("kinds => '{}'", 0), ("kinds => '{no_such_kind}'", 0),
]


def test_limits_and_intervals_of_hybrid_recall(conn):
    world(conn)
    conn.execute("set statement_timeout = '10s'")
    wrong = {}
    for args, expected in LIMITS:
        result = outcome(conn, f"select * from recall.hybrid_recall(agent_id => 'A', query_text => 'docker deploy', "
                               f"query_embedding => %s, {args})", [unit(4)])
        ok = (result == ("rows", expected) if isinstance(expected, int)
              else result[:2] == ("error", "22023") and expected in result[2])
        if not ok:
            wrong[args] = result
    assert wrong == {}


@pytest.mark.parametrize("fn,args", [
    ("session_recall", "query_text => 'docker', n_sessions => 100, k => 1000, candidates => 10000, token_budget => 2147483647"),
    ("auto_context", "token_budget => 2147483647"),
    ("auto_context", "token_budget => 0"),
    ("summarize_sessions", "max_chars => 2147483647, only_stale => false"),
])
def test_huge_budgets_of_the_other_functions(conn, fn, args):
    world(conn)
    conn.execute("set statement_timeout = '10s'")
    assert outcome(conn, f"select * from recall.{fn}(agent_id => 'A', {args})", [])[0] == "rows"


def test_short_half_life_with_old_history(conn):
    world(conn)
    assert outcome(conn, "select * from recall.hybrid_recall(agent_id => 'A', query_text => 'docker', "
                         "half_life => '1 hour', as_of => %s)", [AS_OF + timedelta(days=60)]) == ("rows", 2)


@pytest.mark.parametrize("fn", ["auto_context", "hybrid_recall", "session_recall"])
def test_an_ancient_message_does_not_break_recall(conn, fn):
    world(conn)
    conn.execute("insert into recall.messages (session_id, role, content, created_at) "
                 "values ('A-1', 'system', 'docker notes from long ago', '0001-01-01 00:00+00')")
    args = "task_text => 'docker'" if fn == "auto_context" else "query_text => 'docker', k => 50"
    rows = conn.execute(f"select content, recency, metadata ? 'merged_chunk_ids' "
                        f"from recall.{fn}(agent_id => 'A', {args})").fetchall()
    assert all(0.0 <= r <= 1.0 for _, r, _ in rows), rows
    ancient = [r for c, r, passage in rows if "long ago" in c and not passage]
    if fn == "auto_context":
        # v12 fills Recent and Related turn by turn: the message may come in a passage of its
        # session's adjacent turns, a row whose columns are those of the chunk that gave it its
        # best turn; shown once
        assert sum("long ago" in c for c, _, _ in rows) <= 1 and ancient in ([], [0.0]), rows
    else:
        assert ancient == [0.0], rows


@pytest.mark.parametrize("args,message", [
    ("summary_weight => 'NaN'", "summary_weight must be finite and >= 0, got NaN"),
    ("summary_weight => 'Infinity'", "summary_weight must be finite and >= 0, got Infinity"),
    ("session_weight => 'NaN'", "session_weight must be between 0 and 1, got NaN"),
    ("session_weight => 1.5", "session_weight must be between 0 and 1, got 1.5"),
    ("dedup_similarity => 'NaN'", "dedup_similarity must be a number"),
    ("text_weight => 'NaN'", "weights must be finite and >= 0"),
    ("recency_weight => -1", "weights must be finite and >= 0"),
])
def test_bad_numbers_of_session_recall(conn, args, message):
    world(conn)
    result = outcome(conn, f"select * from recall.session_recall(agent_id => 'A', query_text => 'docker', {args})", [])
    assert result[:2] == ("error", "22023") and message in result[2], result


@pytest.mark.parametrize("args,message", [
    ("max_chars => -1", "max_chars must be a positive number of characters, got -1"),
    ("max_chars => 0", "max_chars must be a positive number of characters, got 0"),
    ("max_chars => null", "max_chars must be a positive number of characters, got NULL"),
    ("only_stale => null", "only_stale must be true or false"),
])
def test_bad_arguments_of_summarize_sessions(conn, args, message):
    world(conn)
    before = conn.execute("select md5(string_agg(s::text, '|' order by session_id)) from recall.sessions s").fetchone()
    result = outcome(conn, f"select recall.summarize_sessions(agent_id => 'A', {args})", [])
    assert result[:2] == ("error", "22023") and message in result[2], result
    assert conn.execute("select md5(string_agg(s::text, '|' order by session_id)) from recall.sessions s").fetchone() == before


def test_dedup_similarity_nan_is_refused(conn):
    world(conn)
    result = outcome(conn, "select * from recall.hybrid_recall(agent_id => 'A', query_text => 'docker', "
                           "dedup_similarity => 'NaN')", [])
    assert result[:2] == ("error", "22023") and "dedup_similarity must be a number" in result[2], result


def nested(depth: int) -> str:
    return '{"a": ' * depth + '"leaf"' + "}" * depth


def test_deeply_nested_jsonb_in_metadata_and_filter(conn):
    world(conn)
    deep = nested(10_000)
    conn.execute("insert into recall.messages (session_id, role, content, metadata) "
                 "values ('A-1', 'system', 'deep note', %s::jsonb)", [deep])
    rows = conn.execute("select content from recall.hybrid_recall(agent_id => 'A', query_text => 'deep', "
                        "filter => %s::jsonb)", [deep]).fetchall()
    assert rows == [("System: deep note",)]
    assert conn.execute("select count(*) from recall.hybrid_recall(agent_id => 'A', query_text => 'deep', "
                        "filter => %s::jsonb)", [nested(10_001)]).fetchone()[0] == 0
    before = fingerprint(conn)
    for sql in ("insert into recall.messages (session_id, role, content, metadata) "
                "values ('A-1', 'system', 'deeper', %s::jsonb)",
                "select * from recall.hybrid_recall(agent_id => 'A', query_text => 'deep', filter => %s::jsonb)"):
        with pytest.raises(psycopg.errors.StatementTooComplex, match="stack depth limit exceeded"):
            conn.execute(sql, [nested(200_000)])
    assert fingerprint(conn) == before


def test_nul_bytes_in_sql_parameters_are_refused_before_they_reach_the_server(conn):
    world(conn)
    for sql in ("select * from recall.hybrid_recall(agent_id => 'A', query_text => %s)",
                "insert into recall.messages (session_id, role, content) values ('A-1', 'user', %s)"):
        with pytest.raises(psycopg.DataError, match="NUL"):
            conn.execute(sql, ["a\x00b"])
    with pytest.raises(psycopg.errors.UntranslatableCharacter):
        conn.execute("insert into recall.messages (session_id, role, content, metadata) "
                     "values ('A-1', 'user', 'x', %s)", [Jsonb({"k": "a\x00b"})])
    assert fingerprint(conn)[:3] == (2, 4, 2)


def test_ten_megabyte_message_is_windowed_and_recalled(conn):
    """A 10 MB message: 7,143 windows (recall._split_windows is linear; it once took > 20 min)."""
    conn.execute("set statement_timeout = '180s'")
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('big', 'A')")
    body = "word " * 1_000_000 + "needle-in-the-haystack " + "word " * 1_000_000
    t = time.monotonic()
    conn.execute("insert into recall.messages (session_id, role, content) values ('big', 'user', %s)", [body])
    seconds = time.monotonic() - t
    n, longest, total = conn.execute("select count(*), max(char_length(content)), sum(char_length(content)) "
                                     "from recall.chunks where session_id = 'big'").fetchone()
    assert n == 7143 and longest == 1600 and total >= len(body)
    rows = conn.execute("select content from recall.hybrid_recall(agent_id => 'A', query_text => 'needle-in-the-haystack')"
                        ).fetchall()
    assert rows and "needle-in-the-haystack" in rows[0][0]
    print(f"10 MB message chunked in {seconds:.1f} s")


@pytest.mark.slow
def test_hundred_thousand_message_session(db_url):
    """Ingest 100,000 messages in one session, append, edit in the middle (rechunk), recall."""
    with Recall(db_url, embedder=FakeEmbedder()) as r:
        r.conn.execute("set statement_timeout = '300s'")
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about topic {i % 97}",
                 "created_at": AS_OF - timedelta(seconds=100_000 - i)} for i in range(100_000)]
        times = {}
        t = time.monotonic()
        assert r.add_messages("long", msgs, agent_id="L").inserted == 100_000
        times["ingest"] = time.monotonic() - t
        t = time.monotonic()
        assert r.add_messages("long", [{"role": "user", "content": "one more about kubernetes"}]).inserted == 1
        times["append"] = time.monotonic() - t
        t = time.monotonic()
        r.conn.execute("update recall.messages set content = content || ' edited' where session_id = 'long' "
                       "and seq = 99990")
        times["edit near the end"] = time.monotonic() - t
        counts = r.conn.execute("select count(*), count(distinct (kind, first_seq, part)) from recall.chunks "
                                "where session_id = 'long'").fetchone()
        assert counts == (50_001, 50_001)
        t = time.monotonic()
        hits = r.recall("L", "kubernetes", k=5)
        times["recall"] = time.monotonic() - t
        assert hits[0].content == "User: one more about kubernetes"
        assert r.conn.execute("select count(*) from recall.messages where session_id = 'long'").fetchone()[0] == 100_001
    print("100k-message session:", {k: round(v, 2) for k, v in times.items()})
    assert times["append"] < 10 and times["edit near the end"] < 10


# ---------------------------------------------------------------- Python client

@pytest.fixture
def client(db_url):
    with Recall(db_url, embedder=FakeEmbedder()) as r:
        r.add_messages("c-1", [{"role": "user", "content": "how do we deploy docker?", "created_at": AS_OF},
                               {"role": "assistant", "content": "compose up", "created_at": AS_OF}],
                       agent_id="cli")
        r.embed_pending()
        yield r


def deep_dict(depth):
    d = leaf = {}
    for _ in range(depth):
        leaf["a"] = {}
        leaf = leaf["a"]
    return d


CLIENT_CALLS = [  # (name, call, expected: "rows", or an exception class and message)
    ("nul in query", lambda r: r.recall("cli", "dock\x00er"), "rows"),
    ("nul in agent", lambda r: r.recall("c\x00li", "docker"), "rows"),
    ("surrogate in query", lambda r: r.recall("cli", "docker \ud800"), "rows"),
    ("k huge", lambda r: r.recall("cli", "docker", k=10**12), (psycopg.errors.NumericValueOutOfRange, "out of range")),
    ("k zero", lambda r: r.recall("cli", "docker", k=0), (psycopg.errors.InvalidParameterValue, "k must be")),
    ("budget huge", lambda r: r.recall("cli", "docker", token_budget=10**12),
     (psycopg.errors.NumericValueOutOfRange, "out of range")),
    ("sessions huge", lambda r: r.session_recall("cli", "docker", sessions=10**12),
     (psycopg.errors.NumericValueOutOfRange, "out of range")),
    ("auto budget huge", lambda r: r.auto_context("cli", token_budget=10**12),
     (psycopg.errors.NumericValueOutOfRange, "out of range")),
    ("half_life negative", lambda r: r.recall("cli", "docker", half_life=-1),
     (psycopg.errors.InvalidParameterValue, "half_life must be a positive interval")),
    ("half_life NaN", lambda r: r.recall("cli", "docker", half_life=float("nan")), (ConfigError, "finite number")),
    ("half_life 1e12 days", lambda r: r.recall("cli", "docker", half_life=1e12), (ConfigError, "finite number")),
    ("half_life 1e6 years", lambda r: r.recall("cli", "docker", half_life=365e6), "rows"),
    ("unknown option", lambda r: r.recall("cli", "docker", evil="x"), (ConfigError, "unknown recall option")),
    ("unknown filter key", lambda r: r.recall("cli", "docker", filter={"no_such": "x"}), 0),
    ("filter not an object", lambda r: r.recall("cli", "docker", filter=[1]),
     (psycopg.errors.InvalidParameterValue, "filter must be a JSON object")),
    ("filter nested 10,000", lambda r: r.recall("cli", "docker", filter=deep_dict(10_000)),
     (ConfigError, "nested too deeply")),
    ("filter with NaN", lambda r: r.recall("cli", "docker", filter={"x": float("nan")}), 0),
    ("injection in kinds", lambda r: r.recall("cli", "docker", kinds=["'; drop table recall.chunks; --"]), 0),
    ("empty query", lambda r: r.recall("cli", "  "),
     (psycopg.errors.InvalidParameterValue, "nothing to search for")),
    ("metadata nested 10,000", lambda r: r.add_messages("c-1", [{"role": "user", "content": "x",
                                                                "metadata": deep_dict(10_000)}]),
     (ConfigError, "nested too deeply")),
    ("content None", lambda r: r.add_messages("c-1", [{"role": "user", "content": None}]),
     (ConfigError, "content must be text, got NoneType")),
    ("content bytes", lambda r: r.add_messages("c-1", [{"role": "user", "content": b"\xff"}]),
     (ConfigError, "content must be text, got bytes")),
    ("created_at garbage", lambda r: r.add_messages("c-1", [{"role": "user", "content": "x", "created_at": "soon"}]),
     (ConfigError, "created_at must be a datetime or ISO 8601 text")),
    ("importance text", lambda r: r.add_messages("c-1", [{"role": "user", "content": "x", "importance": "high"}]),
     (ConfigError, "importance must be a number")),
    ("importance 1e-200", lambda r: r.add_messages("c-1", [{"role": "user", "content": "tiny", "importance": 1e-200},
                                                            {"role": "user", "content": "x", "importance": 2}]),
     (psycopg.errors.CheckViolation, "importance must be between 0 and 1, got 2")),
    ("importance 2", lambda r: r.add_messages("c-1", [{"role": "user", "content": "x", "importance": 2}]),
     (psycopg.errors.CheckViolation, "importance must be between 0 and 1, got 2")),
    ("role unknown", lambda r: r.add_messages("c-1", [{"role": "robot", "content": "x"}]),
     (psycopg.errors.CheckViolation, "unknown role 'robot'")),
    ("session of another agent", lambda r: r.add_messages("c-1", [{"role": "user", "content": "x"}], agent_id="other"),
     (ConfigError, "already belongs to agent 'cli'")),
    ("no such session", lambda r: r.add_messages("nope", [{"role": "user", "content": "x"}]),
     (ConfigError, "does not exist: pass agent_id")),
]


def test_client_entry_points(client):
    client.conn.execute("set statement_timeout = '10s'")
    for name, call, expected in CLIENT_CALLS:
        client_case(client, name, call, expected)


def client_case(client, name, call, expected):
    before = fingerprint(client.conn)
    if isinstance(expected, tuple):
        with pytest.raises(expected[0], match=expected[1]):
            call(client)
    else:
        result = call(client)
        if expected == "rows":
            assert len(result) > 0 and all("deploy" in m.content or "compose" in m.content for m in result), name
        else:
            assert len(result) == expected, name
    assert fingerprint(client.conn) == before, name   # nothing half-written, nothing changed


def test_client_bad_message_in_a_batch_writes_nothing(client):
    before = fingerprint(client.conn)
    good = [{"role": "user", "content": f"fine {i}"} for i in range(50)]
    for bad in ({"role": "robot", "content": "x"}, {"role": "user", "content": "x", "importance": 7},
                {"role": "user", "content": " \n "}):
        with pytest.raises(psycopg.errors.CheckViolation):
            client.add_messages("new-session", [*good, bad, *good], agent_id="cli")
        assert fingerprint(client.conn) == before
    # an importance too small for float32 (found by the fuzzer: 6e-201 failed the whole file)
    assert client.add_messages("c-1", [{"role": "user", "content": "tiny", "importance": 6.3e-201}]).inserted == 1
    # NUL and lone surrogates are cleaned the same way on the way in and on the way out
    client.add_messages("c-1", [{"role": "user", "content": "tab\x00le of \ud800 zebras"}])
    assert [m.content for m in client.recall("cli", "tab\x00le zebras", k=1)] == ["User: table of \ufffd zebras"]


class BrokenVectors(FakeEmbedder):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def embed(self, texts):
        v = {"nan": [float("nan")] * DIM, "zeros": [0.0] * DIM, "inf": [float("inf")] * DIM}[self.kind]
        return [v for _ in texts]


@pytest.mark.parametrize("kind", ["nan", "zeros", "inf"])
def test_client_falls_back_to_keywords_when_the_query_vector_is_unusable(client, kind):
    client._embedder = BrokenVectors(kind)
    result = client.recall("cli", "docker")
    assert result.source == "keyword" and "unusable" in result.note and len(result) == 1


def test_async_client_is_idempotent_and_all_or_nothing(db_url):
    async def main():
        async with await AsyncRecall.connect(db_url, embedder=FakeEmbedder()) as r:
            msgs = [{"role": "user", "content": "question \x00 one"}, {"role": "assistant", "content": "answer"}]
            assert (await r.add_messages("as-1", msgs, agent_id="async")).inserted == 2
            assert (await r.add_messages("as-1", msgs, agent_id="async")).inserted == 0  # again: nothing new
            with pytest.raises(psycopg.errors.CheckViolation):
                await r.add_messages("as-1", [{"role": "user", "content": "new"}, {"role": "x", "content": "y"}],
                                     agent_id="async")
            with pytest.raises(ConfigError, match="nested too deeply"):
                await r.add_messages("as-1", [{"role": "user", "content": "x", "metadata": deep_dict(5000)}],
                                     agent_id="async")
            cur = await r.conn.execute("select count(*) from recall.messages where session_id = 'as-1'")
            assert (await cur.fetchone())[0] == 2
            result = await r.recall("as\x00ync", "question", k=10**3)
            assert [m.content for m in result][:1] == ["User: question  one\n\nAssistant: answer"]
    asyncio.run(main())


# ---------------------------------------------------------------- the CLI

@pytest.fixture
def cli_env(db_url, monkeypatch):
    """The CLI against this test's database, embedding through the test server."""
    with EmbedServer(vectors="hash", dim=DIM) as server:
        for k, v in {"PYRECALL_DSN": db_url, "PYRECALL_EMBED_MODEL": "openai/test-embed",
                     "OPENAI_API_KEY": "test", "OPENAI_BASE_URL": server.url, "OPENAI_API_BASE": server.url,
                     "PYRECALL_AGENT": "cli"}.items():
            monkeypatch.setenv(k, v)
        with Recall(db_url, embedder=FakeEmbedder()) as r:
            r.add_messages("c-1", [{"role": "user", "content": "how do we deploy docker?", "created_at": AS_OF},
                                   {"role": "assistant", "content": "compose up", "created_at": AS_OF}],
                           agent_id="cli")
        yield server


def run_cli(args, timeout=120):
    t = time.monotonic()
    result = CliRunner().invoke(cli, args, catch_exceptions=True)
    assert time.monotonic() - t < timeout
    return result


CLI_CASES = [  # (arguments, exit code, text expected in the output)
    *[(["recall", h[:2000]], 0, "") for h in HOSTILE],
    # an agent with no memory: said on stderr, exit 1 (a mistyped --agent-id)
    *[(["recall", "docker", "--agent-id", h[:2000]], 1, "has no memory here") for h in HOSTILE],
    *[(["recall", "docker", "--project", h[:200], "--branch", h[:200], "--exclude-session-id", h[:200]], 0, "")
      for h in HOSTILE[:6]],
    (["recall", "--auto", "--task-text", HOSTILE[0], "--project", HOSTILE[1]], 0, ""),
    (["recall", "--by-session", HOSTILE[5]], 0, ""),
    (["recall", "dock\x00er", "--agent-id", "c\x00li"], 0, "compose up"),
    (["recall", "docker", "-k", "1000000000000"], 2, "1<=x<=1000"),
    (["recall", "docker", "-k", "0"], 2, "1<=x<=1000"),
    (["recall", "docker", "--token-budget", "-5"], 2, "x>=0"),
    (["recall", "docker", "--token-budget", "99999999999999"], 1, "Error: "),
    (["recall", "docker", "--since", "'; drop table x; --"], 2, "Invalid value"),
    (["recall", "docker", "--format", "sql"], 2, "Invalid value"),
    (["recall", "docker", "--n-sessions", "1000000", "--by-session"], 2, "1<=x<=100"),
    (["recall", "docker", "--format", "json"], 0, "compose up"),
]


def cli_case(db_url, args, code, text):
    with psycopg.connect(db_url, autocommit=True) as c:
        before = fingerprint(c)
        result = run_cli(args)
        out = result.output
        assert result.exit_code == code, (args, out, result.exception)
        assert "Traceback" not in out
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
        assert text in out, (args, out)
        if code == 1:
            assert out.strip().startswith("Error: ") and len(out.strip().splitlines()) == 1, (args, out)
        assert fingerprint(c) == before, args


def test_cli_recall_with_hostile_arguments(db_url, cli_env):
    for args, code, text in CLI_CASES:
        cli_case(db_url, args, code, text)


def test_cli_other_commands_with_hostile_arguments(db_url, cli_env, tmp_path):
    """Every other command that takes text from the user: a result or one clean error line,
    and nothing changed (no session matches a hostile name, so forget removes nothing)."""
    with psycopg.connect(db_url, autocommit=True) as c:
        before = fingerprint(c)
        for h in [*HOSTILE[:10], "x\x00y"]:
            for args in (["sessions", "--agent", h, "--json"], ["sessions", "--project", h],
                         ["show", h], ["show", h, "--agent", h, "--json"], ["forget", "--session", h],
                         ["forget", "--session", h, "--agent", h, "--yes"],
                         ["embed", "--dry-run", "--agent", h, "--json"], ["embed", "--agent", h, "--json"],
                         ["summarize", "--agent", h, "--json"],
                         # a real command line cannot carry NUL: no path with one
                         *([["sync", str(tmp_path / "none" / h[:50])]] if "\x00" not in h else [])):
                result = run_cli(args)
                out = result.output
                assert result.exit_code in (0, 1), (args, out, result.exception)
                assert "Traceback" not in out and (result.exception is None or isinstance(result.exception, SystemExit)), \
                    (args, repr(result.exception))
                if result.exit_code == 1:
                    assert out.strip().startswith("Error: ") and len(out.strip().splitlines()) == 1, (args, out)
        assert fingerprint(c) == before


def test_cli_recall_huge_since(db_url, cli_env):
    cli_case(db_url, ["recall", "docker", "--since", "99999999999d"], 2, "Invalid value")


BAD_FILES = {  # name -> bytes; each is reported or repaired, never fatal
    "invalid-utf8.jsonl": b'{"role": "user", "content": "caf\xe9 \xff\xfe bytes", "session_id": "u8"}\n'
                          b'{"role": "assistant", "content": "ok \xc0\xaf overlong \xed\xa0\x80 surrogate", '
                          b'"session_id": "u8"}\n',
    "truncated-utf8.jsonl": b'{"role": "user", "content": "cut \xe2\x82", "session_id": "tu"}\n',
    "nul.jsonl": b'{"role": "user", "content": "nul\x00here", "session_id": "nul"}\n'
                 b'{"role": "user", "content": "escaped \\u0000 nul", "session_id": "nul"}\n',
    "binary.jsonl": bytes(range(256)) * 40,
    "deep.jsonl": (b'{"role": "user", "content": "deep", "session_id": "deep", "metadata": '
                   + b'{"a": ' * 5000 + b'1' + b'}' * 5000 + b'}\n'
                   + b'{"role": "user", "content": "shallow", "session_id": "deep"}\n'),
    "deep-array.jsonl": b"[" * 200_000 + b"]" * 200_000 + b"\n",
    "empty.jsonl": b"",
    "only-newlines.jsonl": b"\n\n\n",
    "claude.jsonl": b'{"type": "user", "sessionId": "cc", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z", '
                    b'"message": {"content": "claude \xff text"}}\n{"type": "assistant", "sessionId": "cc", '
                    b'"message": {"content": [{"type": "tool_use", "name": "\'; drop table x; --", "input": '
                    b'{"q": "\\ud800"}}]}}\n',
    "chat.json": b'{"messages": [{"role": "user", "content": "\xff\xfe broken \\u0000"}]}',
    "half-line.jsonl": b'{"role": "user", "content": "complete", "session_id": "hl"}\n{"role": "us',
}


def test_cli_index_of_hostile_files_imports_what_is_readable(db_url, cli_env, tmp_path):
    folder = tmp_path / "hostile"
    folder.mkdir()
    for name, data in BAD_FILES.items():
        (folder / name).write_bytes(data)
    result = run_cli(["index", str(folder), "--json"], timeout=180)
    assert result.exit_code == 0, (result.output, result.exception)
    report = json.loads(result.output)
    assert report["files"] == len(BAD_FILES) and report["failed"] == 0
    with psycopg.connect(db_url, autocommit=True) as c:
        stored = dict(c.execute("select session_id, string_agg(content, ' | ' order by seq) from recall.messages "
                                "where agent_id = 'cli' and session_id <> 'c-1' group by 1").fetchall())
        assert stored["u8"] == "caf\ufffd \ufffd\ufffd bytes | ok \ufffd\ufffd overlong \ufffd\ufffd\ufffd surrogate"
        assert stored["nul"] == "nulhere | escaped  nul"
        assert stored["deep"] == "deep | shallow" or stored["deep"] == "shallow"
        assert stored["hl"] == "complete"
        assert "claude \ufffd text" in stored["cc"]
        assert report["inserted"] == c.execute("select count(*) from recall.messages where agent_id = 'cli' "
                                               "and session_id <> 'c-1'").fetchone()[0]
        # nothing came from outside the files
        assert all(not s.startswith("h:") for s in stored)
    again = json.loads(run_cli(["index", str(folder), "--json", "--full"]).output)
    assert again["inserted"] == 0
