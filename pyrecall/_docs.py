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
Every command that reads or writes memory takes `--agent` (default `$PYRECALL_AGENT`, else
`claude-code`) and `--dsn` (default `$PYRECALL_DSN`, else the embedded PostgreSQL).

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


def help_text(path: tuple[str, ...], cmd: click.Command) -> str:
    """The ``--help`` of one command as a terminal 100 columns wide shows it, whatever the
    width of this one (so that the file is the same on every machine)."""
    ctx = click.Context(cmd, info_name=" ".join(("pyrecall", *path)), max_content_width=100,
                        terminal_width=100)
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
    out.append("\n## pyrecall\n\n```text\n" + help_text((), main) + "```\n")
    for path, cmd in entries:
        level = "#" * (1 + len(path))
        out.append(f"\n{level} pyrecall {' '.join(path)}\n\n```text\n{help_text(path, cmd)}```\n")
    return "".join(out)


if __name__ == "__main__":
    sys.stdout.write(render())
