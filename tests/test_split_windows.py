"""recall._split_windows, the linear split of long texts, against the simple definition.

The simple definition (the function as first written, quadratic on long multibyte texts):
window n is the max_chars characters from character n * (max_chars - overlap_chars), the last
window starting before char_length - overlap_chars, and there is always a window 0. Here it is
twice: in Python (for the usual settings, max_chars > overlap_chars >= 0) and as the original
SQL (for any arguments at all: NULLs, zero or negative step, negative lengths, which must fail
the same way).
"""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SIMPLE = """
create function pg_temp.simple_split(body text, max_chars int, overlap_chars int)
returns table (part int, content text)
language sql immutable
as $$
  select (w.start / (max_chars - overlap_chars))::int as part,
         substr(body, w.start + 1, max_chars) as content
  from generate_series(0, greatest(char_length(body) - overlap_chars - 1, 0),
                       max_chars - overlap_chars) as w(start)
$$
"""

# one, two, three and four UTF-8 bytes; whitespace the chunker sees; no NUL (text refuses it)
ALPHABET = st.sampled_from(["a", "b", " ", "\n", "\t", "é", "ß", "€", "中", "𝄞", "😀", "\u0301"])
TEXTS = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
    st.text(ALPHABET, max_size=2000),
    # a run of one character with a marker: windows and piece boundaries that line up
    st.builds(lambda c, n, tail: c * n + tail, ALPHABET, st.integers(0, 3000), st.text(ALPHABET, max_size=3)),
)
PROPERTY = settings(max_examples=300, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def reference(body: str, max_chars: int, overlap_chars: int) -> list[tuple[int, str]]:
    """The windows of the simple definition, for max_chars > overlap_chars >= 0."""
    step = max_chars - overlap_chars
    last = max(len(body) - overlap_chars - 1, 0)
    return [(start // step, body[start:start + max_chars]) for start in range(0, last + 1, step)]


def split(conn, body, max_chars, overlap_chars, fn="recall._split_windows"):
    return [tuple(r) for r in conn.execute(f"select part, content from {fn}(%s, %s, %s)",
                                           [body, max_chars, overlap_chars]).fetchall()]


@pytest.fixture
def sconn(conn):
    conn.execute(SIMPLE)
    return conn


@PROPERTY
@given(body=TEXTS, max_chars=st.integers(1, 700), overlap=st.integers(0, 699))
def test_equals_the_simple_definition(sconn, body, max_chars, overlap):
    overlap = overlap % max_chars
    expected = reference(body, max_chars, overlap)
    assert split(sconn, body, max_chars, overlap) == expected
    assert split(sconn, body, max_chars, overlap, fn="pg_temp.simple_split") == expected


@pytest.mark.parametrize("body, max_chars, overlap, expected", [
    ("", 1600, 200, [(0, "")]),
    ("short", 1600, 200, [(0, "short")]),
    ("x" * 1600, 1600, 200, [(0, "x" * 1600)]),
    ("x" * 1601, 1600, 200, [(0, "x" * 1600), (1, "x" * 201)]),
    ("ab" * 1400, 1600, 200, [(0, "ab" * 800), (1, "ab" * 700)]),
    ("é" * 3000 + "€", 1600, 200, [(0, "é" * 1600), (1, "é" * 1600), (2, "é" * 200 + "€")]),
    ("abcdefghij", 4, 0, [(0, "abcd"), (1, "efgh"), (2, "ij")]),
    ("abcdefgh", 4, 0, [(0, "abcd"), (1, "efgh")]),
    ("abcdefgh", 4, 3, [(0, "abcd"), (1, "bcde"), (2, "cdef"), (3, "defg"), (4, "efgh")]),
    ("abcdefgh", 1, 0, [(i, c) for i, c in enumerate("abcdefgh")]),
])
def test_cases(sconn, body, max_chars, overlap, expected):
    assert reference(body, max_chars, overlap) == expected
    assert split(sconn, body, max_chars, overlap) == expected


@pytest.mark.parametrize("body", [None, "", "abc", "a" * 600, "🙂" * 260])
@pytest.mark.parametrize("max_chars, overlap", [
    (None, 0), (5, None), (0, 0), (0, 5), (-3, 0), (-1, -5), (3, 3), (3, 5), (7, 2), (300, -20), (2000, -50),
])
def test_any_arguments_behave_as_the_simple_definition(sconn, body, max_chars, overlap):
    """NULLs, an empty or negative step, negative lengths: the same rows or the same error."""
    def outcome(fn):
        try:
            with sconn.transaction():
                return split(sconn, body, max_chars, overlap, fn=fn)
        except psycopg.Error as exc:
            return type(exc).__name__, exc.diag.sqlstate, exc.diag.message_primary
    assert outcome("recall._split_windows") == outcome("pg_temp.simple_split")


def test_ten_megabytes_in_seconds_and_identical(sconn):
    """Linear: 10 MB of multibyte text in seconds (the simple form needs > 20 minutes), and the
    same windows as the simple form on a prefix it can still afford. Also under the generic plans
    recall._rechunk asks for (a generic plan of the split once made it quadratic again)."""
    sconn.execute("set statement_timeout = '60s'")
    sconn.execute("set plan_cache_mode = force_generic_plan")
    body = "".join(f"wörd{i} " for i in range(1_000_000))     # 10.9 million characters
    assert split(sconn, body, 1600, 200) == reference(body, 1600, 200)
    prefix = body[:300_000]
    assert split(sconn, prefix, 1600, 200) == split(sconn, prefix, 1600, 200, fn="pg_temp.simple_split")
