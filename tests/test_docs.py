"""docs/cli.md is generated from --help: every command is in it, with an example, and the
file is what `python -m pyrecall._docs` writes today."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from pyrecall import _docs
from pyrecall.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
COMMANDS = list(_docs.commands(main))


def test_the_tree_is_walked():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"recall", "index", "sync", "embed", "worker", "summarize", "sessions", "show", "forget",
            "db", "db start", "db stop", "db status", "db url", "migrate", "migrate status"} <= names


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_is_documented_with_an_example(path, cmd):
    name = "pyrecall " + " ".join(path)
    text = DOC.read_text()
    assert f"\n{'#' * (1 + len(path))} {name}\n" in text, f"{name} is missing from docs/cli.md"
    assert f"Usage: {name} " in text
    if path[0] != "bench":  # pyrecall bench is documented by its own module's owners
        assert "Example" in (cmd.help or ""), f"{name}: its help has no example"


def test_cli_md_is_up_to_date():
    assert DOC.read_text() == _docs.render(main), (
        "docs/cli.md is out of date: run `python -m pyrecall._docs > docs/cli.md`")


def test_help_options_everywhere():
    for path, cmd in COMMANDS:
        if isinstance(cmd, click.Group):
            continue
        params = {p.name for p in cmd.params}
        memory = path[0] in ("recall", "index", "sync", "sessions", "show", "forget", "embed",
                             "worker", "summarize")
        if memory:
            assert {"agent", "dsn"} <= params, " ".join(path)
