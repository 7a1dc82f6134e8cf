"""Readable SQL tests of the public functions (pgmq's test/sql + test/expected): each
tests/sql/NAME.sql runs in psql against a fresh migrated database, and its whole output (the
statements echoed, their rows, their errors) must equal tests/expected/NAME.out.

After a reviewed change of behaviour: PYRECALL_UPDATE_EXPECTED=1 pytest tests/test_sql_output.py
rewrites the expected files; the diff then shows what changed, for the commit.
"""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path

import pytest
from conftest import drop_database, new_database

from pyrecall import _index

HERE = Path(__file__).resolve().parent
CASES = sorted((HERE / "sql").glob("*.sql"))


def run_psql(url: str, script: Path) -> str:
    cmd = _index.psql_command(url, ["-X", "-a", "-q", "-v", "ON_ERROR_STOP=0", "-f", str(script)])
    env = {**os.environ, "PGTZ": "UTC", "PGDATESTYLE": "ISO, YMD", "LC_MESSAGES": "C", "PGOPTIONS": "-c lc_messages=C"}
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          timeout=300)
    # psql names the script in its error lines: keep the name, not the checkout's path
    return done.stdout.replace(str(script), f"tests/sql/{script.name}")


@pytest.mark.parametrize("script", CASES, ids=[c.stem for c in CASES])
def test_sql_output_matches_the_expected_file(server_url, template_url, script):
    url = new_database(server_url)
    try:
        out = run_psql(url, script)
    finally:
        drop_database(server_url, url)
    expected = HERE / "expected" / f"{script.stem}.out"
    if os.environ.get("PYRECALL_UPDATE_EXPECTED") == "1":
        expected.write_text(out)
    assert expected.exists(), f"{expected} is missing: run with PYRECALL_UPDATE_EXPECTED=1 and review it"
    want = expected.read_text()
    diff = "".join(difflib.unified_diff(want.splitlines(True), out.splitlines(True),
                                        "expected", "got", n=2))
    assert out == want, f"tests/sql/{script.name} answers differently:\n{diff}"


def test_there_are_sql_tests_and_each_has_its_expected_output():
    assert CASES
    assert {c.stem for c in CASES} == {e.stem for e in (HERE / "expected").glob("*.out")}
