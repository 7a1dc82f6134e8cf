"""docs/cli.md is generated from --help: every command is in it, with an example, and the
file is what `python -m pyrecall._docs` writes today."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from pyrecall import _docs
from pyrecall.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
COMMANDS = list(_docs.commands(main))


def test_the_tree_is_walked():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"recall", "import", "sync", "embed", "worker", "summarize", "sessions", "show", "forget",
            "db", "db start", "db stop", "db status", "db url", "migrate", "migrate status"} <= names


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_is_documented_with_an_example(path, cmd):
    name = "pyrecall " + " ".join(path)
    text = DOC.read_text()
    assert f"\n{'#' * (1 + len(path))} {name}\n" in text, f"{name} is missing from docs/cli.md"
    assert f"Usage: {name} " in text
    if path[0] != "bench":  # pyrecall bench is documented by its own module's owners
        assert "Example" in (cmd.help or ""), f"{name}: its help has no example"


def sections(text: str) -> dict[str, str]:
    """The file cut at its command headings: {"pyrecall recall": its help, ...}."""
    parts = re.split(r"^#{2,4} (pyrecall[^\n]*)\n", text, flags=re.M)
    return {"(head)": parts[0], **dict(zip(parts[1::2], parts[2::2], strict=True))}


def test_cli_md_is_up_to_date():
    """Every section equals what --help says today. `pyrecall bench ...` is left out of the
    comparison (its help belongs to the benchmark module and changes on its own schedule;
    its sections must exist all the same, see above)."""
    def ours(text):
        out = {k: v for k, v in sections(text).items() if not k.startswith("pyrecall bench")}
        for key, bench_line in (("(head)", "- [`pyrecall bench"), ("pyrecall", "  bench ")):
            out[key] = "".join(x for x in out[key].splitlines(keepends=True)
                               if not x.startswith(bench_line))
        return out
    have, want = ours(DOC.read_text()), ours(_docs.render(main))
    stale = sorted(k for k in have.keys() | want.keys() if have.get(k) != want.get(k))
    assert not stale, (f"docs/cli.md is out of date ({', '.join(stale)}): "
                       "run `python -m pyrecall._docs > docs/cli.md`\n"
                       + "\n".join(f"--- {k}\n{have.get(k)}\n+++\n{want.get(k)}" for k in stale[:2]))


def test_help_options_everywhere():
    for path, cmd in COMMANDS:
        if isinstance(cmd, click.Group):
            continue
        params = {p.name for p in cmd.params}
        memory = path[0] in ("recall", "import", "sync", "sessions", "show", "forget", "embed",
                             "worker", "summarize")
        if memory:
            assert {"agent", "dsn"} <= params, " ".join(path)


def test_readme_gives_the_default_weights_of_hybrid_recall():
    """The README's scoring formula quotes the defaults of the stable recall.hybrid_recall."""
    sql = (DOC.parent.parent / "sql" / "idempotent" / "080-stable-names.sql").read_text()
    signature = sql[sql.index("create or replace function recall.hybrid_recall("):]
    defaults = {name: re.search(rf"\b{name}\s+\w+\s+default ([0-9.]+)", signature).group(1)
                for name in ("vector_weight", "text_weight", "recency_weight", "importance_weight")}
    readme = (DOC.parent.parent / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("defaults:"))
    assert line.split()[1:] == list(defaults.values()), "update the formula in README.md"


BENCHMARKS_MAX_LINES = 300


def test_benchmarks_md_stays_short():
    """docs/BENCHMARKS.md holds the current figures and the commands that reproduce them, in
    at most 300 lines; how they were reached goes to bench/LOG.md."""
    n = len((DOC.parent / "BENCHMARKS.md").read_text().splitlines())
    assert n <= BENCHMARKS_MAX_LINES, (
        f"docs/BENCHMARKS.md has {n} lines (at most {BENCHMARKS_MAX_LINES}): move what is history "
        "(older runs, superseded versions, studies) to bench/LOG.md")
