"""The ``pyrecall`` command. Each command parses its arguments and makes one library call;
library errors become one-line messages, never tracebacks."""

from __future__ import annotations

import functools
import json
import sys

import click
import psycopg

from . import _config, _db, _migrate
from ._errors import PyrecallError


def handle_errors(fn):
    """Turn pyrecall and database errors into a clean ``Error: ...`` and exit status 1."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (PyrecallError, psycopg.Error) as exc:
            raise click.ClickException(str(exc).strip()) from None
    return wrapper


def dsn_option(fn):
    return click.option("--dsn", envvar="PYRECALL_DSN", default=None,
                        help="PostgreSQL URL (default: $PYRECALL_DSN, else the embedded server).")(fn)


def agent_option(fn):
    return click.option("--agent", default=None,
                        help="Agent id (default: $PYRECALL_AGENT, else 'claude-code').")(fn)


def resolve_agent(agent: str | None) -> str:
    return agent or _config.default_agent()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="pyrecall")
def main():
    """pyrecall: memory across sessions for AI agents, SQL-first on PostgreSQL.

    \b
    Example:
      pyrecall db start && pyrecall migrate
      pyrecall index ~/.claude/projects && pyrecall embed
      pyrecall recall "how did I handle authentication?"
    """


# ---------------------------------------------------------------- db

@main.group()
def db():
    """The embedded PostgreSQL server (data in $PYRECALL_DATA_DIR/pgdata, default ./.pyrecall).

    \b
    Example:
      pyrecall db start
    """


@db.command("start")
@handle_errors
def db_start():
    """Start the embedded server (idempotent) and print its URL.

    \b
    Example:
      export PYRECALL_DSN=$(pyrecall db start)
    """
    click.echo(_db.start())


@db.command("stop")
@handle_errors
def db_stop():
    """Stop the embedded server.

    \b
    Example:
      pyrecall db stop
    """
    click.echo("stopped" if _db.stop() else "not running")


@db.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handle_errors
def db_status(as_json):
    """Say whether the embedded server runs, its data directory and URL.

    \b
    Example:
      pyrecall db status --json
    """
    st = _db.status()
    if as_json:
        click.echo(json.dumps({"running": st.running, "pid": st.pid, "url": st.url,
                               "data_dir": str(st.data_dir)}))
    else:
        click.echo(f"{'running' if st.running else 'stopped'}  pid={st.pid or '-'}  "
                   f"data={st.data_dir}  url={st.url or '-'}")
    sys.exit(0 if st.running else 3)


@db.command("url")
@handle_errors
def db_url():
    """Print the URL pyrecall uses ($PYRECALL_DSN, else the embedded server, started).

    \b
    Example:
      psql "$(pyrecall db url)"
    """
    click.echo(_db.resolve_dsn())


# ---------------------------------------------------------------- migrate

@main.group(invoke_without_command=True)
@click.option("--dim", type=int, default=None,
              help="Embedding dimension, chosen at first install (default 384).")
@click.option("--dry-run", is_flag=True, help="List what would be applied; change nothing.")
@dsn_option
@click.pass_context
@handle_errors
def migrate(ctx, dim, dry_run, dsn):
    """Create or upgrade the recall schema and its functions.

    \b
    Example:
      pyrecall migrate --dim 1536      # first install, for text-embedding-3-small
      pyrecall migrate --dry-run
    """
    if ctx.invoked_subcommand is not None:
        return
    with _db.connect(dsn) as conn:
        report = _migrate.migrate(conn, dim=dim, dry_run=dry_run)
    if dry_run:
        click.echo(f"would apply: {', '.join(report.pending) or 'nothing'}; "
                   f"would re-apply functions: {', '.join(report.functions)} (dim {report.dim})")
    else:
        click.echo(f"applied: {', '.join(report.applied) or 'nothing new'}; "
                   f"functions re-applied: {len(report.functions)}; embedding dim {report.dim}")


@migrate.command("status")
@dsn_option
@handle_errors
def migrate_status(dsn):
    """List each migration: applied, pending, or changed after it was applied.

    \b
    Example:
      pyrecall migrate status
    """
    with _db.connect(dsn) as conn:
        states = _migrate.status(conn)
    for s in states:
        click.echo(f"{s.state:8} {s.name}  {s.applied_at or ''}".rstrip())
    if any(s.state == "changed" for s in states):
        sys.exit(1)


def _register_bench() -> None:
    """`pyrecall bench ...` lives in pyrecall.bench (heavier imports, loaded only when there)."""
    try:
        from .bench.cli import bench
    except ImportError:
        return
    main.add_command(bench)


_register_bench()

if __name__ == "__main__":
    main()
