"""Write docs/cli.md, the CLI reference, from the ``--help`` of every command.

    python -m pyrecall._docs > docs/cli.md

tests/test_docs.py checks that the file is up to date and names every command.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click

HEADER = """\
# pyrecall command-line reference

Generated from `--help` by `python -m pyrecall._docs > docs/cli.md`; do not edit by hand.
Every command that reads or writes memory takes `--agent-id` (default `$PYRECALL_AGENT`, else
`claude-code`; for `embed`, `worker` and `summarize`, else every agent) and `--dsn` (default
`$PYRECALL_DSN`, else the embedded PostgreSQL).

"""


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group``, depth first in name order, with its full name."""
    ctx = click.Context(group, info_name=" ".join(("pyrecall", *prefix)))
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*prefix, name))


def help_text(main: click.Group, path: tuple[str, ...]) -> str:
    """The ``--help`` of one command as `pyrecall ... --help` prints it on a terminal 100
    columns wide, whatever the width of this one (so the file is the same on every machine):
    through the chain of contexts, so that settings such as ``-h`` are inherited."""
    settings = {**main.context_settings, "max_content_width": 100, "terminal_width": 100}
    ctx = click.Context(main, info_name="pyrecall", **settings)
    cmd: click.Command = main
    for name in path:
        cmd = cmd.get_command(ctx, name)
        ctx = click.Context(cmd, info_name=name, parent=ctx)
    return cmd.get_help(ctx).rstrip() + "\n"


def render(main: click.Group | None = None) -> str:
    if main is None:
        from .cli import main
    out = [HEADER, "## Commands\n\n"]
    entries = list(commands(main))
    for path, cmd in entries:
        name = " ".join(path)
        anchor = "pyrecall-" + "-".join(path)
        out.append(f"- [`pyrecall {name}`](#{anchor}): {cmd.get_short_help_str(80)}\n")
    out.append("\n## pyrecall\n\n```text\n" + help_text(main, ()) + "```\n")
    for path, _cmd in entries:
        level = "#" * (1 + len(path))
        out.append(f"\n{level} pyrecall {' '.join(path)}\n\n```text\n{help_text(main, path)}```\n")
    return "".join(out)


if __name__ == "__main__":
    sys.stdout.write(render())
