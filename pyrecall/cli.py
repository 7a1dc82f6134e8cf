"""The ``pyrecall`` command. Each command parses its arguments and makes one library call;
library errors become one-line messages, never tracebacks."""

from __future__ import annotations

import atexit
import copy
import functools
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

# psycopg, numpy and the database module are imported by the commands that use them (~0.25 s
# that `pyrecall --help` and the commands without a database do without)
from . import _config
from ._errors import NotFoundError, PyrecallError, is_database_error, one_line

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
# sentence-transformers draws a progress bar while it loads a model: not for our users
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


# ---------------------------------------------------------------- shared pieces

def _error_text(exc: BaseException) -> str:
    """The error in one line (:func:`pyrecall._errors.one_line`), with a hint for writes to a
    read-only server."""
    line = one_line(exc)
    read_only = is_database_error(exc) and type(exc).__name__ == "ReadOnlySqlTransaction"
    if read_only or "in a read-only transaction" in line:
        # a hot standby (or a read-only default): reads work, writes must go to the primary
        line += (" (this server is read-only: a hot standby, or default_transaction_read_only is on;"
                 " recall works here, writes go to the primary)")
    elif (is_database_error(exc) and type(exc).__name__ in ("UndefinedFunction", "UndefinedTable", "UndefinedColumn")
          and "recall." in line):
        # pyrecall upgraded, its database not: the functions and tables of the new version are missing
        line += " (the database's schema may be older than this pyrecall: run `pyrecall migrate`)"
    return line


def handle_errors(fn):
    """Turn pyrecall and database errors into a clean ``Error: ...`` and exit status 1."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if not (isinstance(exc, PyrecallError) or is_database_error(exc)):
                raise
            raise click.ClickException(_error_text(exc)) from None
    return wrapper


def dsn_option(fn):
    return click.option("--dsn", envvar="PYRECALL_DSN", default=None, metavar="URL",
                        help="PostgreSQL URL (default: $PYRECALL_DSN, else the embedded server).")(fn)


def agent_option(fn):
    """``--agent-id`` (as the SQL functions name it; ``--agent``, its former name, still works),
    passed to the command as ``agent``."""
    fn = former_name("--agent", "agent", new="--agent-id")(fn)
    return click.option("--agent-id", "agent", envvar="PYRECALL_AGENT", default=_config.DEFAULT_AGENT,
                        show_default=True,
                        help="Agent whose memory to use (env: PYRECALL_AGENT).")(fn)


def former_name(old: str, param: str, *, new: str | None = None, **attrs):
    """Keep ``old``, the former name of the option ``new`` (default ``--param``), working for
    ``param``, hidden from --help; both on one command line is a usage error."""
    hidden = f"_former_{param}"
    new = new or "--" + param.replace("_", "-")

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            value = kwargs.pop(hidden)
            if value is not None:
                given = click.get_current_context().get_parameter_source(param)
                if given is click.core.ParameterSource.COMMANDLINE:
                    raise click.UsageError(f"{old} is the former name of {new}: give one of them")
                kwargs[param] = value
            return fn(*args, **kwargs)
        return click.option(old, hidden, hidden=True, default=None, **attrs)(wrapper)
    return decorate


def json_option(fn):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def model_option(fn):
    return click.option("--model", default=None, metavar="MODEL",
                        help="Embedding model (default: $PYRECALL_EMBED_MODEL, else "
                             f"{_config.DEFAULT_MODEL}).")(fn)


def _embedder(model: str | None):
    """The embedder of ``model`` (default: $PYRECALL_EMBED_MODEL); loaded at its first use."""
    from ._embed import get_embedder

    return get_embedder(model)


def _check_model(embedder) -> None:
    """Load the model now (its dimension needs it), so that a wrong name is one clear error."""
    try:
        _ = embedder.dim
    except (OSError, ValueError, ImportError) as exc:
        raise click.ClickException(f"cannot load embedding model {embedder.model}: "
                                   f"{_error_text(exc)}") from None


def _client(dsn: str | None, model: str | None = None, *, embedder=None):
    """A Recall client: the database is installed on first use, as the Python client does."""
    from .client import Recall

    return Recall(dsn, embedder=embedder or _embedder(model))


def _bare_client(dsn: str | None):
    """A Recall client that installs nothing by itself (for `pyrecall migrate`)."""
    from .client import Recall

    return Recall(dsn, migrate=False)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _progress_bar(console):
    """A progress bar on stderr that disappears when done (shown on a terminal only). Its
    description (a file's path) is text, not rich markup: "[/old]" in a path stopped an import
    with a traceback on a terminal."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), console=console, transient=True)


def _stdout_console():
    from rich.console import Console

    return Console()


_SINCE = re.compile(r"^\s*(\d+)\s*(m|min|h|d|w|y)\s*$", re.I)
_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str | None, *, now: datetime | None = None) -> datetime | None:
    """``7d``, ``12h``, ``2w``, ``30m``, ``1y`` ago, or an ISO date/time (UTC when naive).

    >>> parse_since("2026-01-01").isoformat()
    '2026-01-01T00:00:00+00:00'
    """
    if value is None or not value.strip():
        return None
    now = now or datetime.now(UTC)
    if m := _SINCE.match(value):
        n, unit = int(m.group(1)), m.group(2).lower()
        try:
            return now - (timedelta(days=365 * n) if unit == "y" else timedelta(**{_UNITS[unit]: n}))
        except OverflowError:
            raise click.BadParameter(f"{value!r}: too far back (before year 1)") from None
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: expected a duration like 7d, 12h, 2w, 30m, or a date like 2026-01-01"
        ) from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


class Since(click.ParamType):
    name = "WHEN"

    def convert(self, value, param, ctx):
        if isinstance(value, datetime):
            return value
        try:
            return parse_since(value)
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)


SINCE = Since()
# a UserPromptSubmit hook (`recall --hook` without --auto) keeps only memories at least this like
# the prompt by meaning (all-MiniLM-L6-v2's cosine). LoCoMo dev (bench/results/2026-11-29/
# prompt_bar_lab.txt): 98.4% of questions still answered, evidence recall 0.788 of 0.845 without a
# bar; a coding prompt asked of a chat's memory gets nothing (0% from 0.25 up), a question asked
# of another conversation something 38% of the time (60% at 0.30). --min-similarity sets another
PROMPT_MIN_SIMILARITY = 0.35


class MetadataFilter(click.ParamType):
    """``KEY=VALUE`` (a text value) or ``KEY:=JSON`` (a number, true/false, null, an object
    or an array), as one (key, value) pair of a metadata filter."""

    name = "KEY=VALUE"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        key, sep, rest = value.partition("=")
        if not sep or not key.rstrip(":").strip():
            self.fail(f"{value!r}: expected KEY=VALUE (text) or KEY:=JSON (a number, true, "
                      "an object ...)", param, ctx)
        if key.endswith(":"):
            try:
                return key[:-1].strip(), json.loads(rest)
            except ValueError:
                self.fail(f"{value!r}: the value after := is not JSON (text goes after =)", param, ctx)
        return key.strip(), rest


def build_filter(pairs, scope: dict | None = None) -> dict | None:
    """The metadata filter of repeated ``--filter`` options and the --project/--branch scope:
    one value for a key is sent as it is; several values for the same key become a JSON array
    (any of them matches, in hybrid_recall v4 and later).

    >>> build_filter([("author", "bob"), ("author", "carol"), ("channel", "ops")])
    {'author': ['bob', 'carol'], 'channel': 'ops'}
    """
    values: dict[str, list] = {}
    for key, value in [*(scope or {}).items(), *pairs]:
        if value not in values.setdefault(key, []):
            values[key].append(value)
    return {k: v[0] if len(v) == 1 else v for k, v in values.items()} or None


class Weights(click.ParamType):
    """``V,T,R,I``: the weights of similarity, text rank, recency and importance."""

    name = "V,T,R,I"
    KEYS = ("vector_weight", "text_weight", "recency_weight", "importance_weight")

    def convert(self, value, param, ctx):
        if isinstance(value, dict):
            return value
        parts = [p.strip() for p in value.split(",")]
        try:
            numbers = [float(p) for p in parts]
        except ValueError:
            numbers = []
        if len(numbers) != 4 or not all(0 <= x < float("inf") for x in numbers) or not any(numbers):
            self.fail(f"{value!r}: expected four numbers >= 0, not all 0: the weights of "
                      "similarity, text, recency and importance (default 0.5,0.5,0.025,0.05)",
                      param, ctx)
        return dict(zip(self.KEYS, numbers, strict=True))


def git_scope(cwd: str | os.PathLike | None = None) -> tuple[str, str | None]:
    """(project, branch) for a directory, as the Claude Code importer records them: the
    project is the repository's top folder (else the directory itself), the branch the
    current git branch (None outside a repository or on a detached HEAD)."""
    where = Path(cwd or os.getcwd()).resolve()

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True,
                                 timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() or None if out.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    return top or str(where), (branch if branch and branch != "HEAD" else None)


# ---------------------------------------------------------------- the group

class _Main(click.Group):
    """The command group, with ``bench`` and ``dba`` loaded when asked for (their modules'
    imports are for them alone: a one-shot `pyrecall recall` does without)."""

    def _lazy(self, name: str) -> None:
        if name == "bench" and "bench" not in self.commands:
            try:
                from .bench.cli import bench
            except ModuleNotFoundError as exc:  # a trimmed install without pyrecall.bench
                if exc.name not in ("pyrecall.bench", "pyrecall.bench.cli"):
                    raise
                return
            self.add_command(bench)
        elif name == "dba" and "dba" not in self.commands:
            from ._dba_cli import _commands

            self.add_command(_commands(handle_errors, dsn_option, json_option, former_name), "dba")

    def get_command(self, ctx, cmd_name):
        self._lazy(cmd_name)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx):
        for name in ("bench", "dba"):
            self._lazy(name)
        return super().list_commands(ctx)


@click.group(cls=_Main, context_settings=CONTEXT)
@click.version_option(package_name="pyrecall")
def main():
    """pyrecall: memory across sessions for AI agents, SQL-first on PostgreSQL.

    \b
    Example:
      pyrecall db start && pyrecall migrate
      pyrecall import ~/.claude/projects && pyrecall embed
      pyrecall recall "how did I handle authentication?"
      pyrecall recall --auto --token-budget 4000 --format context
    """
    _tolerant_output()


def _tolerant_output() -> None:
    """On a terminal or pipe that cannot encode what memory holds (PYTHONIOENCODING=ascii, a
    latin-1 console), print '?' for the characters it lacks instead of dying with a traceback."""
    for stream in (sys.stdout, sys.stderr):
        if (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "") != "utf8":
            try:
                stream.reconfigure(errors="replace")
            except (AttributeError, ValueError, OSError):  # not a text file of its own
                pass


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
    """Start the embedded server (idempotent) and print its URL. Applies the server's settings
    again (sized to the machine; a change by hand is kept) and creates the database if missing.

    \b
    Example:
      export PYRECALL_DSN=$(pyrecall db start)
    """
    from . import _db
    dsn = _db.start(quick=False)
    click.echo(_db.as_url(dsn, port=_db.embedded_port()))  # the URL `pyrecall db url` prints


@db.command("stop")
@handle_errors
def db_stop():
    """Stop the embedded server.

    \b
    Example:
      pyrecall db stop
    """
    from . import _db
    click.echo("stopped" if _db.stop() else "not running")


@db.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handle_errors
def db_status(as_json):
    """Say whether the embedded server runs, its data directory, URL and memory settings.

    The settings are those pyrecall sizes to the machine at each start (docs/DBA.md, Tuning);
    one changed by hand (ALTER SYSTEM) is marked "set by you" and kept by later starts.

    \b
    Example:
      pyrecall db status --json
    """
    from . import _db
    st = _db.status()
    settings = _db.server_report()
    url = _db.as_url(st.url, port=_db.embedded_port()) if st.url else None  # as `db url` prints it
    if as_json:
        click.echo(json.dumps({"running": st.running, "pid": st.pid, "url": url,
                               "data_dir": str(st.data_dir), "settings": settings}))
    else:
        click.echo(f"{'running' if st.running else 'stopped'}  pid={st.pid or '-'}  "
                   f"data={st.data_dir}  url={url or '-'}")
        for name, v in settings.items():
            mark = "" if v["set_by"] == "pyrecall" else f"  (set by {v['set_by']})"
            click.echo(f"  {name} = {v['value']}{mark}")
    sys.exit(0 if st.running else 3)


@db.command("url")
@click.option("--keywords", is_flag=True,
              help="Print libpq keywords (user=... dbname=... host=...) instead of a URL.")
@handle_errors
def db_url(keywords):
    """Print the postgresql:// URL pyrecall uses ($PYRECALL_DSN, else the embedded server,
    started), for psql and for any language's driver (Node's pg, JDBC, pgx, ...).

    The embedded server listens on a Unix socket only: its URL names the socket's folder and
    port (postgresql://postgres@/pyrecall?host=/path/.pyrecall/pgdata&port=5432).

    \b
    Example:
      psql "$(pyrecall db url)"
      DATABASE_URL=$(pyrecall db url) node examples/node/recall.mjs "deploy"
    """
    from . import _db
    dsn = _db.resolve_dsn()
    port = None if _config.dsn_from_env() else _db.embedded_port()
    click.echo(_db.as_keywords(dsn, port=port) if keywords else _db.as_url(dsn, port=port))


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
    with _bare_client(dsn) as r:
        report = r.migrate(dim=dim, dry_run=dry_run)
        # credentials are redacted from this upgrade on; what was stored before is not rewritten
        # by migrate (minutes on a big database): said, with the command that does it
        stored_before = ("014-secret-patterns" in report.applied
                         and r.conn.execute("select exists (select 1 from recall.messages)").fetchone()[0])
    if dry_run:
        click.echo(f"would apply: {', '.join(report.pending) or 'nothing'}; "
                   f"would re-apply functions: {', '.join(report.functions)} (dim {report.dim})")
    else:
        click.echo(f"applied: {', '.join(report.applied) or 'nothing new'}; "
                   f"functions re-applied: {len(report.functions)}; embedding dim {report.dim}"
                   + ("; Citus coordinator: re-distributed (sql/citus/distribute.sql)" if report.citus else ""))
    if stored_before:
        click.echo("credentials are now redacted in every text stored; to redact those stored before: "
                   "`pyrecall secrets redact --all-agents --dry-run`, then without --dry-run (docs/SECURITY.md)")


@migrate.command("status")
@dsn_option
@handle_errors
def migrate_status(dsn):
    """List each migration: applied, pending, or changed after it was applied.

    \b
    Example:
      pyrecall migrate status
    """
    with _bare_client(dsn) as r:
        states = r.migration_status()
    for s in states:
        click.echo(f"{s.state:8} {s.name}  {s.applied_at or ''}".rstrip())
    if any(s.state == "changed" for s in states):
        sys.exit(1)


# ---------------------------------------------------------------- recall

@main.command()
@click.argument("query", required=False)
@agent_option
@click.option("--project", default=None, help="Only this project (a path, as recorded). "
              "With --auto: default the git top folder of the current directory.")
@click.option("--branch", default=None, help="Only this git branch. With --auto: default the "
              "current branch.")
@click.option("-k", "--k", "k", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="At most this many memories.")
@click.option("--token-budget", "budget", type=click.IntRange(0), default=None, metavar="TOKENS",
              help="Token budget of the answer [default: none; 4000 with --auto].")
@click.option("--since", type=SINCE, default=None,
              help="Only memories since then: 7d, 12h, 2w, 30m, or a date (2026-01-01).")
@click.option("--until", type=SINCE, default=None,
              help="Only memories before then: 7d (ago), or a date (2026-01-01).")
@click.option("--filter", "filters", type=MetadataFilter(), multiple=True,
              help="Only memories whose metadata has KEY=VALUE (text; KEY:=JSON for a number, "
                   "true, ...). Repeatable: different keys all match; the same key twice, any of "
                   "its values.")
@click.option("--min-similarity", type=click.FloatRange(-1, 1), default=None, metavar="S",
              help="Leave out chunks whose cosine similarity to the query is below S (chunks "
                   "not embedded yet, found by keywords, are kept).")
@click.option("--weights", type=Weights(), default=None,
              help="Weights of similarity, keywords, recency, importance "
                   "[default: 0.5,0.5,0.025,0.05].")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "context", "markdown", "hook"]),
              default=None, help="Output format [default: table; context with --auto or --hook]. "
              "hook: the context as the JSON a hook answers with (Codex CLI, Gemini CLI).")
@click.option("--by-session", is_flag=True,
              help="Session-aware: the best sessions first, then their best chunks.")
@click.option("--n-sessions", type=click.IntRange(1, 100), default=None, metavar="N",
              help="With --by-session: how many sessions [default: recall.session_recall's, 10].")
@click.option("--auto", is_flag=True, help="The session-start context: recent work on this "
              "project and branch, work related to --task-text, failures to avoid.")
@click.option("--task-text", default=None, metavar="TEXT",
              help="With --auto: what the new session is about [default: QUERY].")
@click.option("--exclude-session-id", "exclude_session", default=None, metavar="SESSION",
              help="Leave out this session (the current one).")
@click.option("--hook", is_flag=True, help="Read a hook's JSON from stdin (Claude Code, Codex CLI, "
              "Gemini CLI): its cwd gives project and branch, its session_id is left out; with "
              "--auto a SessionStart hook, else a UserPromptSubmit hook whose prompt is the query "
              "(memory for each prompt: nothing for a prompt of under three words or a /command, "
              f"and only what is at least --min-similarity {PROMPT_MIN_SIMILARITY} like it).")
@click.option("--source-agent", default=None, metavar="NAME",
              help="Only sessions written by this coding agent or chat app: claude-code, codex, "
                   "gemini, aider, cline, roo-code, continue, opencode, chatgpt, claude-ai (as the importers record it in the session metadata).")
@click.option("--kind", "kinds", multiple=True,
              type=click.Choice(["turn_pair", "window", "thinking", "code", "tool", "message", "summary",
                                 "memory"]),
              help="Only chunks of this kind (repeatable; memory: the curated memories).")
@click.option("--turns-per-session", type=click.IntRange(1), default=None, metavar="N",
              help="At most N chunks from one session (memories are no session's).")
@click.option("--as-of", type=SINCE, default=None, metavar="WHEN",
              help="The memories as they stood then (a superseded one, not its replacement): "
                   "2d, or a date/time (2026-01-01T12:00); recency is measured from then too.")
@click.option("--all-projects", is_flag=True,
              help="With --auto: Related from every project (default: the project's own).")
@model_option
@dsn_option
@handle_errors
@former_name("--sessions", "n_sessions", type=click.IntRange(1, 100))
@former_name("--task", "task_text")
@former_name("--budget", "budget", new="--token-budget", type=click.IntRange(0))
@former_name("--exclude-session", "exclude_session", new="--exclude-session-id")
def recall(query, agent, project, branch, k, budget, since, until, filters, min_similarity, weights,
           fmt, by_session, n_sessions, auto, task_text, exclude_session, hook, source_agent, kinds,
           turns_per_session, as_of, all_projects, model, dsn):
    """Recall what matters from past sessions, ranked in the database: by meaning, keywords,
    recency and importance (recall.hybrid_recall); session-aware with --by-session
    (recall.session_recall); the session-start context with --auto (recall.auto_context:
    sections Recent, Related, Failures to avoid).

    \b
    Examples:
      pyrecall recall "how did I handle authentication?"
      pyrecall recall "docker deploy" --since 30d --token-budget 1500 --format json
      pyrecall recall "why did the alpine build fail?" --by-session
      pyrecall recall "refund webhook" --filter author=bob --filter author=carol --until 2026-03-01
      pyrecall recall "deploy" --filter is_error:=true --weights 0.3,0.7,0,0.1
      pyrecall recall "export timeout" --source-agent codex   # only Codex CLI sessions
      pyrecall recall --auto --token-budget 4000 --format context     # in a SessionStart hook
      pyrecall recall --auto --hook --format hook     # Codex / Gemini CLI SessionStart hook
      pyrecall recall --hook --token-budget 1500      # a UserPromptSubmit hook: memory per prompt
      pyrecall recall --auto --task-text "deploy the API to staging"
      pyrecall recall "deploy tool" --as-of 2026-03-01     # what was true then
    """
    if all_projects and not auto:
        raise click.UsageError("--all-projects goes with --auto")
    event_name = "SessionStart"
    if hook:
        asked_branch = branch
        project, branch, exclude_session, event = _hook_scope(project, branch, exclude_session)
        if not auto:
            branch = asked_branch      # a prompt's memory: the project's, whatever the branch
            # a UserPromptSubmit hook: the prompt is the query; a short one ("yes", "go on") or a
            # slash command asks for nothing, and only memories like the prompt are worth its tokens
            event_name = event.get("hook_event_name") or "UserPromptSubmit"
            prompt = event.get("prompt") if isinstance(event.get("prompt"), str) else ""
            query = query or prompt
            fmt = fmt or "context"
            if len(query.split()) < 3 or query.lstrip().startswith("/"):
                return
            min_similarity = PROMPT_MIN_SIMILARITY if min_similarity is None else min_similarity
            budget = 1500 if budget is None else budget
    if auto:
        if (by_session or kinds or since or until or filters or source_agent
                or min_similarity is not None or weights or turns_per_session):
            raise click.UsageError("--auto chooses its own memories: drop --by-session/--kind/--since/"
                                   "--until/--filter/--source-agent/--min-similarity/--weights/"
                                   "--turns-per-session")
        task_text = task_text if task_text is not None else query
        if project is None and not hook:
            project, detected = git_scope()
            branch = branch if branch is not None else detected
        fmt = fmt or "context"
        budget = 4000 if budget is None else budget
    else:
        if task_text is not None:
            raise click.UsageError("--task-text goes with --auto")
        if not query or not query.strip():
            raise click.UsageError("give a QUERY (or --auto for the session-start context)")
        fmt = fmt or "table"
        if by_session and min_similarity is not None:
            raise click.UsageError("--min-similarity goes with recall, not --by-session "
                                   "(session_recall ranks sessions first)")
        if since and until and until <= since:
            raise click.UsageError("--until must be later than --since")
    # session metadata (source_agent) is folded into every chunk's metadata: one filter
    scope = {k: v for k, v in (("project", project), ("branch", branch),
                               ("source_agent", source_agent)) if v}
    filter_ = build_filter(filters, scope)
    options = {**(weights or {}),
               **({"min_similarity": min_similarity} if min_similarity is not None else {}),
               **{k: v for k, v in (("until", until), ("turns_per_session", turns_per_session),
                                    ("as_of", as_of)) if v}}

    # the result says when the query embedding failed (source=keyword): no second warning
    logging.getLogger("pyrecall").setLevel(logging.ERROR)
    r = _client(dsn, model)
    try:
        if auto:
            result = r.auto_context(agent, project=project, branch=branch, task_text=task_text,
                                    token_budget=budget, exclude_session_id=exclude_session,
                                    all_projects=all_projects, as_of=as_of)
            mode = "auto"
        elif by_session:
            chosen = {"n_sessions": n_sessions} if n_sessions else {}  # else the SQL default
            result = r.session_recall(agent, query, k=k, token_budget=budget,
                                      exclude_session_id=exclude_session, filter=filter_,
                                      since=since, kinds=list(kinds) or None, **chosen, **options)
            mode = "session"
        else:
            result = r.recall(agent, query, k=k, token_budget=budget, since=since,
                              exclude_session_id=exclude_session, filter=filter_,
                              kinds=list(kinds) or None, **options)
            mode = "hybrid"
        infos = r.session_infos(m.session_id for m in result.memories)
        # nothing at all for this agent: most likely a mistyped --agent-id or $PYRECALL_AGENT
        unknown_agent = not result.memories and not r.sessions(agent, limit=1)
    finally:
        r.close()
    from . import _render

    heading = ("## Relevant memory (from earlier sessions; `expand` an item's #id for more)"
               if hook and not auto else "## Relevant memory")
    if hook and not auto and not result.memories:
        return          # nothing like this prompt: the hook adds nothing to it
    if unknown_agent and not hook and fmt != "json":
        why = (f"agent {agent!r} has no memory here: `pyrecall import` first, or check --agent-id "
               "(default $PYRECALL_AGENT, else claude-code) and the database (--dsn, $PYRECALL_DATA_DIR)")
        if fmt == "table":  # for a person: an error; an empty context or markdown stays an answer
            raise click.ClickException(why)
        click.echo(f"note: {why}", err=True)

    if result.note and fmt != "json":
        click.echo(f"note: source={result.source}: {result.note}", err=True)
    if auto and not result.memories and fmt == "context" and not hook and not unknown_agent:
        # an empty context is a valid answer, but a person at a terminal deserves to know why
        where = f"project {project}" + (f", branch {branch}" if branch else "") if project else "no project"
        hint = "" if all_projects else "; --all-projects for every project, --project P for another"
        click.echo(f"nothing found for agent {agent!r} in {where}{hint}", err=True)
    if fmt == "json":
        click.echo(_render.to_json(result, mode=mode, infos=infos,
                                   scope={"agent": agent, **scope,
                                          **({"filter": filter_} if filters else {})}))
    elif fmt == "context":
        click.echo(_render.to_context(result, infos=infos, auto=auto, by_session=by_session,
                                      scope=scope, heading=heading), nl=False)
    elif fmt == "hook":
        # Codex CLI and Gemini CLI add a hook's additionalContext to the session (Claude Code
        # reads this JSON too); nothing else may go to stdout
        text = _render.to_context(result, infos=infos, auto=auto, by_session=by_session, scope=scope,
                                  heading=heading)
        click.echo(json.dumps({"hookSpecificOutput": {"hookEventName": event_name,
                                                      "additionalContext": text}}, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(_render.to_markdown(result, infos=infos, mode=mode), nl=False)
    else:
        if not result.memories:
            click.echo(f"nothing found (source={result.source})", err=True)
            return
        _render.print_table(_stdout_console(), result, infos=infos, mode=mode)


def _hook_scope(project, branch, exclude_session):
    """project, branch and the session to leave out, from a hook's JSON (Claude Code, Codex CLI
    and Gemini CLI all give cwd and session_id), and the whole event (a prompt hook's prompt)."""
    raw = sys.stdin.read()
    try:
        event = json.loads(raw) if raw.strip() else {}
    except ValueError:
        raise click.UsageError("--hook: stdin is not the JSON a hook receives") from None
    if not isinstance(event, dict):
        raise click.UsageError("--hook: stdin is not the JSON a hook receives")
    if project is None:
        project, detected = git_scope(event.get("cwd") or None)
        branch = branch if branch is not None else detected
    return project, branch, exclude_session or event.get("session_id"), event


# ---------------------------------------------------------------- index / sync

def _run_sync(dsn, agent, as_json, call, *, empty_is_error=False):
    """Run index or sync with a progress bar on a terminal, then print the summary."""
    console = _stderr_console()
    show = console.is_terminal and not as_json
    r = _client(dsn)
    try:
        if show:
            with _progress_bar(console) as bar:
                task = bar.add_task("reading", total=None)
                report = call(r, on_start=lambda n: bar.update(task, total=n),
                              progress=lambda path, res: bar.update(
                                  task, advance=1, description=_shorten_path(path)))
        else:
            report = call(r, on_start=None, progress=None)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"agent": agent, **report.as_dict()}, indent=2))
    else:
        _print_sync_summary(report, agent)
    if empty_is_error and not report.files:
        if not as_json:
            click.echo("Error: no .jsonl or .json file in the paths given", err=True)
        sys.exit(1)
    unusable = report.count("failed", "not-transcript")
    if report.files and unusable == len(report.files):
        # not one transcript among the files given: a wrong path or format, not a quiet success
        if not as_json:
            click.echo("Error: none of the files is a transcript pyrecall can import "
                       "(the problems above say why)", err=True)
        sys.exit(1)


def _tell_indexed(rows: list[dict], *, err: bool = False) -> None:
    """The vector indexes of their own a run built (recall.index_info rows)."""
    for row in rows:
        click.echo(f"built the vector index of agent {row['agent_id']} ({row['index_rows']:,} chunks, "
                   f"{row['build_seconds'] or 0:.1f} s): its recalls search it instead of scanning "
                   "every chunk", err=err)


def _shorten_path(path: Path, width: int = 40) -> str:
    text = str(path)
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _print_sync_summary(report, agent: str, max_problems: int = 20) -> None:
    d = report.as_dict()
    states = [f"{d[k]} {label}" for k, label in (
        ("new", "new"), ("appended", "appended"), ("rewritten", "rewritten"),
        ("updated", "updated"), ("reread", "re-read"), ("unchanged", "unchanged"),
        ("not_transcript", "not transcripts"), ("failed", "failed")) if d[k]]
    click.echo(f"files: {d['files']}" + (f" ({', '.join(states)})" if states else ""))
    # the agent written to: --agent-id, unless the files name their own (an export does)
    agents = report.agents or [agent]
    named = f"agent {agents[0]}" if len(agents) == 1 else f"agents {', '.join(agents)}"
    click.echo(f"sessions: {d['sessions']}  messages: {d['inserted']} new, {d['skipped']} already "
               f"stored  ({named})")
    if d["memories"] or d["importance"] or d["vectors"] or d["turns"] or d["summaries"] or d["forgotten_records"]:
        click.echo(f"restored: {d['memories']} curated memories, importance of {d['importance']} chunk(s)"
                   + (f", {d['summaries']} session summaries" if d["summaries"] else "")
                   + (f", {d['forgotten_records']} forgotten session(s) (not to be imported again)"
                      if d["forgotten_records"] else "")
                   + (f", vectors of {d['vectors']} chunk(s), counts or vectors of {d['turns']} message(s)"
                      if d["vectors"] or d["turns"] else ""))
    if d["forgotten"]:
        click.echo(f"forgotten: {d['forgotten']} session(s) deleted before were not stored again "
                   "(`pyrecall forgotten` lists them, `pyrecall unforget` lets them in)")
    if report.gone:
        click.echo(f"gone: {len(report.gone)} file(s) no longer exist (their memories are kept)")
    problems = report.problems
    if problems:
        rest = ("the rest was imported" if d["files"] > d["failed"] + d["not_transcript"]
                else "nothing was imported")
        click.echo(f"problems: {len(problems)} (skipped or repaired, {rest})")
        for p in problems[:max_problems]:
            click.echo(f"  {p}")
        if len(problems) > max_problems:
            click.echo(f"  ... and {len(problems) - max_problems} more (--json lists them all)")
    if report.ignored:
        click.echo(f"ignored: {len(report.ignored)} file(s) not named .jsonl, .json or "
                   f".aider.chat.history.md (not read)")
        for path in report.ignored[:max_problems]:
            click.echo(f"  {path}")
        if len(report.ignored) > max_problems:
            click.echo(f"  ... and {len(report.ignored) - max_problems} more (--json lists them all)")
    if report.passed_over:
        click.echo(f"passed over: {len(report.passed_over)} folder(s) of dependencies, virtual "
                   f"environments or caches (not entered; --json lists them)")
    _tell_indexed(report.indexed)
    for err in report.errors:
        click.echo(f"warning: {err}")
    if (d["inserted"] or d["memories"]) and report.pending is None:
        click.echo("next: `pyrecall embed` to make them findable by meaning "
                   "(they are findable by keywords already)")
    elif report.pending:
        click.echo(f"next: `pyrecall embed` for the {report.pending:,} chunk(s) whose vector was not "
                   "in the file or not of this database's model (findable by keywords already)")


@main.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@agent_option
@click.option("--full", is_flag=True, help="Read every file from its start, changed or not.")
@json_option
@dsn_option
@handle_errors
def import_(paths, agent, full, as_json, dsn):
    """Import transcripts: files, .zip archives, or folders searched recursively for
    .jsonl/.json files, aider chat histories (.aider.chat.history.md) and OpenCode's database
    (opencode.db).

    The format of each file is detected (Claude Code, Codex CLI, Gemini CLI, aider, Cline (its
    CLI, and the Cline and Roo Code extensions' tasks), Continue sessions, OpenCode's database,
    generic JSONL, OpenAI chat, Discord export, ChatGPT and
    Claude.ai data exports); the agent or app that
    wrote a session is kept as its source_agent (`pyrecall recall --source-agent codex`).
    Importing again adds nothing; a bad
    line or file is reported with file:line and never stops the run. Every run lists the files
    it did not import: those that are no transcript, and the other files in the folders (not
    .jsonl/.json). Hidden folders and those of dependencies, virtual environments and caches
    (node_modules, site-packages, a folder holding pyvenv.cfg or CACHEDIR.TAG) are not entered.
    Folders are remembered for `pyrecall sync`.

    \b
    Example:
      pyrecall import ~/.claude/projects ~/.codex/sessions ~/.gemini/tmp
      pyrecall import ~/code          # every repository's .aider.chat.history.md below it
      pyrecall import export.json chats/ --agent-id support-bot
      pyrecall import ~/Downloads/chatgpt-export.zip --agent-id me   # as the app sends it
    """
    _run_sync(dsn, agent, as_json, lambda r, **kw: r.import_(paths, agent_id=agent, full=full, **kw),
              empty_is_error=True)


# `pyrecall index`: the importer's first name, kept working (hidden: "index" also names the
# vector indexes of `pyrecall dba index`)
_index_alias = copy.copy(import_)
_index_alias.hidden = True
main.add_command(_index_alias, "index")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@agent_option
@json_option
@dsn_option
@handle_errors
def sync(paths, agent, as_json, dsn):
    """Import only what changed since the last run: new files, lines appended to a growing
    transcript (read from where the last run stopped), rewritten files.

    Without PATHS: the folders and files indexed before by this agent, else where the coding
    agents keep their sessions (~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp,
    ~/.cline/data/sessions, ~/.continue/sessions, ~/.local/share/opencode/opencode.db, and the
    Cline, Roo Code and Kilo Code extensions' tasks in VS Code's, VSCodium's, Cursor's and
    Windsurf's storage: those that exist).

    \b
    Example:
      pyrecall sync
      pyrecall sync && pyrecall embed      # e.g. from cron, or a Claude Code Stop hook
    """
    _run_sync(dsn, agent, as_json, lambda r, **kw: r.sync(list(paths) or None, agent_id=agent, **kw))


# ---------------------------------------------------------------- embed / worker

@main.command()
@click.option("--batch-size", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Chunks per batch (one transaction each).")
@click.option("--agent-id", "agent", envvar="PYRECALL_AGENT", default=None,
              help="Only this agent's chunks [default: every agent].")
@click.option("--since", type=SINCE, default=None, help="Only chunks since then: 7d, 2026-01-01.")
@click.option("--filter", "filters", type=MetadataFilter(), multiple=True,
              help="Only chunks whose metadata (or one of whose messages') has KEY=VALUE, e.g. "
                   "channel=incidents, guild=Acme. Repeatable: different keys all match; the "
                   "same key twice, any of its values.")
@click.option("--dry-run", is_flag=True, help="Count what would be embedded; change nothing.")
@click.option("--cleanup", is_flag=True, help="First remove chunks whose messages are gone.")
@click.option("--reembed", is_flag=True, help="Re-embed chunks embedded by another model "
              "(with a model of another dimension: retype the columns first, after confirming).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before changing the dimension.")
@click.option("--no-index", is_flag=True,
              help="Do not build the vector index of an agent that has come to need one.")
@model_option
@json_option
@dsn_option
@handle_errors
@former_name("--agent", "agent", new="--agent-id")
def embed(batch_size, agent, since, filters, dry_run, cleanup, reembed, yes, no_index, model,
          as_json, dsn):
    """Embed pending chunks (embedding IS NULL) with the configured model.

    Resumable and safe to run beside `pyrecall worker`: batches are claimed with
    FOR UPDATE SKIP LOCKED; a chunk that fails is retried later with backoff. Each batch is
    committed whole or not at all: after Ctrl-C (exit 130) the next run goes on from there. A run that
    writes 1,000 chunks or more ends with VACUUM (ANALYZE) recall.chunks, so that the next
    queries do not wade through the rows the updates left behind. Then every agent (with
    --agent-id, that one) that holds 2,000 embedded chunks or more (recall.config
    agent_index_min_rows) and has no vector index of its own gets one, built concurrently
    (recall keeps answering), even when nothing was pending: without it, each recall scans
    all of that agent's chunks. --no-index, or recall.config auto_vector_index = false,
    leaves that to `pyrecall dba index`. An agent it embedded for whose chunks now come from
    models of two vector spaces (a model changed without --reembed) is named on stderr (JSON:
    mixed_models): a query of one model ranks the other's vectors as noise.

    \b
    Example:
      pyrecall embed
      pyrecall embed --dry-run --json
      pyrecall embed --filter guild="Acme Engineering" --filter channel=incidents
      pyrecall embed --reembed --model openai/text-embedding-3-small --yes
    """
    from ._embed import vector_space
    from ._worker import EmbedInterrupted, EmbedReport

    console = _stderr_console()
    filter_ = build_filter(filters)
    r = _client(dsn, model)
    embedder = r.embedder
    try:
        if not dry_run:
            _check_model(embedder)
        if reembed and not dry_run:
            installed = r.dimension()
            if installed is not None and embedder.dim != installed:
                if not yes and not click.confirm(
                        f"{embedder.model} gives {embedder.dim}-dimensional vectors; this database "
                        f"stores {installed}. Changing the dimension deletes every stored "
                        "embedding and drops the vector indexes. Continue?", err=True):
                    raise click.ClickException("nothing changed")
                r.change_dimension(embedder.dim)
        report = EmbedReport()
        if cleanup and not dry_run:
            report.cleaned = r.cleanup(agent_id=agent)
        chosen = {"agent_id": agent, "since": since, "filter": filter_, "reembed": reembed}
        if dry_run:
            report.pending = r.count_pending(**chosen)
        else:
            total = r.count_pending(**chosen)
            show = console.is_terminal and not as_json and total > 0
            if show:
                with _progress_bar(console) as bar:
                    task = bar.add_task("embedding", total=total)

                    def building(row):
                        bar.update(task, description=f"vector index: {row['phase']}")

                    run = r.embed_pending(batch_size=batch_size, **chosen, index=False if no_index else "all",
                                          progress=lambda n: bar.update(task, advance=n),
                                          index_progress=building)
            else:
                run = r.embed_pending(batch_size=batch_size, **chosen, index=False if no_index else "all")
            run.cleaned = report.cleaned
            report = run
        # the agents this run embedded for (a run that embedded nothing mixed nothing)
        mixed = {} if reembed or dry_run or not report.agents else r.mixed_vector_spaces(report.agents)
    except KeyboardInterrupt as exc:
        # each batch is one transaction: the one in flight was rolled back and stays pending
        done = exc.report.embedded if isinstance(exc, EmbedInterrupted) else 0
        click.echo(f"interrupted: {done} chunk(s) embedded and committed; `pyrecall embed` goes "
                   "on from there", err=True)
        sys.exit(130)
    finally:
        r.close()
    for agent_id, counts in mixed.items():
        other = {m: n for m, n in counts.items() if vector_space(m) != vector_space(embedder.model)}
        if other:
            said = ", ".join(f"{n:,} with {m}" for m, n in other.items())
            click.echo(f"warning: agent {agent_id} has chunks embedded with another model ({said}) "
                       f"beside {embedder.model}'s: a query of one ranks the other's as noise "
                       f"(re-embed them: pyrecall embed --reembed --agent-id {agent_id} "
                       f"--model {embedder.model})", err=True)
    if as_json:
        click.echo(json.dumps({"model": embedder.model, "dry_run": dry_run, **report.as_dict(),
                               "mixed_models": mixed}, indent=2, default=str))
        return
    from rich.table import Table

    table = Table(title=f"embed · {embedder.model}" + (" · dry run" if dry_run else ""))
    for col in ("scanned", "embedded", "skipped", "failed", "cleaned", "pending", "seconds"):
        table.add_column(col, justify="right")
    table.add_row(*[str(getattr(report, c)) for c in ("scanned", "embedded", "skipped", "failed",
                                                       "cleaned", "pending")],
                  f"{report.seconds:.1f}")
    _stdout_console().print(table)
    _tell_indexed(report.indexed, err=True)
    for err in dict.fromkeys(report.errors):
        click.echo(f"error: {err}", err=True)
    if report.failed and not report.embedded:
        sys.exit(1)


@main.command()
@click.option("--batch-size", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Chunks per batch.")
@click.option("--agent-id", "agent", envvar="PYRECALL_AGENT", default=None,
              help="Only this agent's chunks [default: every agent].")
@click.option("--idle-timeout", type=click.FloatRange(0.1), default=30.0, show_default=True,
              help="Seconds between checks when no NOTIFY arrives (retries whose backoff ran out).")
@click.option("--summarize-after", "quiet_minutes", type=click.FloatRange(0), default=10.0,
              show_default=True, metavar="MINUTES",
              help="Summarize a session once it has been quiet this long and its summary is stale.")
@click.option("--summarize-with", "llm", envvar="PYRECALL_SUMMARY_MODEL", default=None,
              metavar="MODEL", help="Chat model (litellm name) that writes those summaries "
              "[default: $PYRECALL_SUMMARY_MODEL, else extractive, no LLM].")
@click.option("--no-summaries", is_flag=True, help="Only embed; leave summaries to `pyrecall summarize`.")
@model_option
@dsn_option
@handle_errors
@former_name("--agent", "agent", new="--agent-id")
def worker(batch_size, agent, idle_timeout, quiet_minutes, llm, no_summaries, model, dsn):
    """Embed continuously: whatever is pending, then wait for new chunks (LISTEN/NOTIFY).
    Between batches, keep session summaries current: a session quiet for --summarize-after
    minutes whose summary is stale is summarized, extractively in the database, or by
    --summarize-with / $PYRECALL_SUMMARY_MODEL (any litellm chat model).

    Several workers can run at once. Ctrl-C (or SIGTERM) stops cleanly: the batch in flight
    is rolled back and stays pending.

    \b
    Example:
      pyrecall worker --batch-size 128
      PYRECALL_SUMMARY_MODEL=openai/gpt-4o-mini pyrecall worker --summarize-after 30
    """
    embedder = _embedder(model)
    _check_model(embedder)
    r = _client(dsn, embedder=embedder)  # installs the schema on first use, checks the connection

    def on_report(rep):
        click.echo(f"{datetime.now():%H:%M:%S} embedded {rep.embedded}, failed {rep.failed}, "
                   f"pending {rep.pending} ({rep.seconds:.1f} s)")
        for row in rep.indexed:
            click.echo(f"{datetime.now():%H:%M:%S} built the vector index of agent {row['agent_id']} "
                       f"({row['index_rows']:,} chunks, {row['build_seconds'] or 0:.1f} s)")

    def on_summary(rep):
        click.echo(f"{datetime.now():%H:%M:%S} summarized {rep.extractive} quiet session(s)"
                   + (f", {rep.written} by {llm}" if llm else "")
                   + (f", {rep.failed} failed: {rep.errors[0]}" if rep.failed else ""))

    def on_term(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    click.echo(f"worker: {embedder.model}, batches of {batch_size}"
               + ("" if no_summaries else f"; summaries after {quiet_minutes:g} min quiet"
                  + (f" by {llm}" if llm else " (extractive)"))
               + "; Ctrl-C stops", err=True)
    try:
        r.run_worker(batch_size=batch_size, agent_id=agent, idle_timeout=idle_timeout,
                     summarize_after=None if no_summaries else timedelta(minutes=quiet_minutes),
                     summary_model=llm or "", on_report=on_report, on_summary=on_summary)
    except KeyboardInterrupt:
        click.echo("worker stopped", err=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        r.close()


# ---------------------------------------------------------------- summarize

@main.command()
@click.option("--agent-id", "agent", envvar="PYRECALL_AGENT", default=None,
              help="Only this agent's sessions [default: every agent].")
@click.option("--summarize-with", "llm", default=None, metavar="MODEL",
              help="Have this chat model (litellm name, e.g. openai/gpt-4o-mini) write the "
                   "summaries [default: extractive, no LLM]. A session it fails on keeps the "
                   "summary it had (reported; tried again at the next run); exit 1 if it "
                   "wrote none.")
@click.option("--all", "everything", is_flag=True,
              help="Every session, not only those changed since their last summary.")
@json_option
@dsn_option
@handle_errors
@former_name("--agent", "agent", new="--agent-id")
def summarize(agent, llm, everything, as_json, dsn):
    """Summarize sessions, for session-aware recall (--by-session) and --auto.

    By default extractive and in the database (recall.summarize_sessions): the session's
    embedding is the centroid of its chunks, its summary its most central chunks. Run after
    `pyrecall embed`. With --summarize-with, the extractive pass still runs first (it gives
    each session its embedding), then the model rewrites the text; a session the model fails
    on keeps its extractive summary (or an earlier model's), and each failure is listed.

    \b
    Example:
      pyrecall summarize
      pyrecall summarize --summarize-with openai/gpt-4o-mini
    """
    r = _client(dsn)
    try:
        report = r.summarize(agent_id=agent, model=llm, only_stale=not everything)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        line = f"summarized: {report.extractive} session(s) extractively"
        if llm:
            line += (f", {report.written} by {llm}" + (f", {report.failed} failed" if report.failed else "")
                     + (f", {report.not_tried} not tried" if report.not_tried else ""))
        click.echo(line)
        for err in report.errors[:10]:
            click.echo(f"error: {err}", err=True)
        if len(report.errors) > 10:
            click.echo(f"error: ... and {len(report.errors) - 10} more (--json lists them all)", err=True)
        if report.not_tried:
            click.echo(f"note: {report.not_tried} session(s) not sent to {llm}: it failed on the "
                       "first 3", err=True)
        if report.kept:
            again = sum(m != llm for m in report.kept.values())  # still stale for the model
            click.echo(f"note: {len(report.kept)} session(s) not summarized by {llm} keep the summary "
                       f"they had ({_kept_summaries(report.kept)})"
                       + (f"; the next run tries {again} again" if again else ""), err=True)
    if llm and (report.failed or report.not_tried) and not report.written:
        sys.exit(1)


def _kept_summaries(kept: dict) -> str:
    """'2 extractive, 1 by openai/gpt-4o-mini, 1 none', from session id -> summary_model."""
    counts = Counter(kept.values())
    parts = [f"{counts.pop('extractive')} extractive"] if "extractive" in counts else []
    none = counts.pop(None, 0)
    parts += [f"{n} by {m}" for m, n in sorted(counts.items())]
    return ", ".join(parts + ([f"{none} none: nothing embedded yet"] if none else []))


# ---------------------------------------------------------------- sessions / show / forget

@main.command()
@agent_option
@json_option
@dsn_option
@handle_errors
def status(agent, as_json, dsn):
    """Say what the agent's memory holds and what to do next: the database and its schema, the
    sessions and messages (by the coding agent or app that wrote them), the chunks waiting to be
    embedded, curated memories, the files imported, the embedding model, and which coding agents
    call pyrecall (hooks, MCP) and whether they keep their memory where this one looks.

    Nothing is changed (an older schema is reported, not migrated). Exits 0; the steps it lists
    are advice.

    \b
    Example:
      pyrecall status
      pyrecall status --agent-id aria --json
    """
    import psycopg

    from . import _db, _status
    from ._embed import MINILM_NAMES, _bundled_dir
    r = _bare_client(dsn)
    try:
        version = r.conn.execute("select current_setting('server_version'), "
                                 "(select extversion from pg_extension where extname = 'vector')").fetchone()
        pending = sum(m.state != "applied" for m in r.migration_status())
        try:
            st = r.status(agent)
        except psycopg.errors.UndefinedFunction:    # a schema older than recall.agent_status
            st = None
        from . import _sync
        remembered = _sync.sync_roots(r.conn, agent)
        unread = _status.unread_folders(_sync.default_roots(), remembered) if remembered else []
    finally:
        r.close()
    model = _config.embed_model()
    local = model.removeprefix("local/")
    installed = None if not model.startswith("local/") else (
        _bundled_dir(local) is not None if local in MINILM_NAMES or local.endswith("-int8") else None)
    wired = _status.wiring()
    from_env = dsn or _config.dsn_from_env()
    elsewhere = _status.other_memories(wired, _config.data_dir(), from_env)
    steps = _status.next_steps(st, pending_migrations=pending, model=model, wired=wired, elsewhere=elsewhere,
                               unread=unread)
    url = _db.as_url(from_env) if from_env else _db.as_url(_db.resolve_dsn(), port=_db.embedded_port())
    url = re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)   # no password on the screen
    if as_json:
        click.echo(json.dumps({
            "agent_id": agent, "database": {"url": url, "embedded": not from_env,
                                            "data_dir": None if from_env else str(_config.data_dir()),
                                            "postgres": version[0], "pgvector": version[1]},
            "schema": {"pending_migrations": pending}, "memory": st,
            "model": {"configured": model, "installed": installed},
            "wiring": [w.__dict__ for w in wired], "next": steps}, default=str, ensure_ascii=False, indent=2))
        return
    where = f"embedded, {_config.data_dir()}" if not from_env else "PYRECALL_DSN" if not dsn else "--dsn"
    lines = [("database", f"{url}  ({where}; PostgreSQL {version[0]}, pgvector {version[1] or 'missing'})"),
             ("schema", f"{pending} migration(s) pending" if pending else "up to date" if st is not None
                        else "functions older than this pyrecall")]
    if st is not None:
        span = (f", {st['first_at']:%Y-%m-%d} .. {st['last_at']:%Y-%m-%d}" if st["first_at"] else "")
        by_count = lambda d: sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))  # noqa: E731
        sources = ", ".join(f"{k} {v}" for k, v in by_count(st["sources"]))
        failing = f", {st['failing']} failing" if st["failing"] else ""
        lines += [
            ("agent", f"{agent}: {st['sessions']} session(s){f' ({sources})' if sources else ''}, "
                      f"{st['messages']} message(s){span}"),
            ("chunks", f"{st['chunks']} ({st['embedded']} embedded, {st['pending']} pending{failing})"
                       f"; nearest by: {st['vector_path']}"),
            ("memories", f"{st['memories']} curated ({st['pinned']} pinned)"
                         + (f"; {st['forgotten']} session(s) forgotten" if st["forgotten"] else "")),
            ("files", f"{st['files']} imported" + (f", {st['file_problems']} with problems" if st["file_problems"] else "")
                      + (f"; last read {st['last_sync']:%Y-%m-%d %H:%M}" if st["last_sync"] else "")),
            ("model", f"{model}" + ("" if installed is None else " (installed)" if installed else " (not installed: "
                                    "pip install 'pyrecall[local]')")
                      + (f"; vectors: {', '.join(f'{k} {v}' for k, v in by_count(st['models']))}" if st["models"] else "")),
        ]
    for w in wired:
        found = ", ".join(w.hooks + (["MCP"] if w.mcp else [])) or "not configured"
        lines.append((w.agent, found))
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        click.echo(f"{k:<{width}}  {v}")
    for i, step in enumerate(steps):
        click.echo(f"{'next' if i == 0 else '':<{width}}  {step}")


@main.command()
@agent_option
@click.option("--project", default=None, help="Only this project.")
@click.option("--since", type=SINCE, default=None, help="Only sessions active since: 7d, 2026-01-01.")
@click.option("--source-agent", default=None, metavar="NAME",
              help="Only sessions written by this coding agent or chat app: claude-code, codex, "
                   "gemini, aider, cline, roo-code, continue, opencode, chatgpt, claude-ai.")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True)
@json_option
@dsn_option
@handle_errors
def sessions(agent, project, since, source_agent, limit, as_json, dsn):
    """List the agent's sessions, newest first: id, title, project, branch, start, time span
    (first to last message), turns (the user's messages; in a chat, every message), messages,
    chunks, chunks still pending embedding.

    \b
    Example:
      pyrecall sessions --since 7d
      pyrecall sessions --source-agent codex
    """
    r = _client(dsn)
    try:
        rows = r.sessions(agent, project=project, since=since, limit=limit, source_agent=source_agent)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo(f"no sessions for agent {agent!r}", err=True)
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from ._render import _short_project, short_ids, span_text

    ids = short_ids([s["session_id"] for s in rows])
    console = _stdout_console()
    # narrower terminals: leave out project and chunks (under 110), branch (under 100), span (90)
    dropped = {"project", "chunks"} if console.width < 110 else set()
    dropped |= {"branch"} if console.width < 100 else set()
    dropped |= {"span"} if console.width < 90 else set()
    table = Table(expand=True, box=box.SIMPLE_HEAD,
                  caption=f"{len(rows)} session(s) of agent {agent!r}"
                  + (" (--limit reached)" if len(rows) == limit else ""))
    columns = [("id", {"no_wrap": True}), ("started", {"no_wrap": True}),
               ("span", {"justify": "right", "no_wrap": True}),
               ("title", {"ratio": 1, "no_wrap": True, "overflow": "ellipsis", "min_width": 20}),
               ("project", {"max_width": 16, "overflow": "ellipsis", "no_wrap": True}),
               ("branch", {"max_width": 16, "overflow": "ellipsis", "no_wrap": True}),
               ("turns", {"justify": "right"}), ("msgs", {"justify": "right"}),
               ("chunks", {"justify": "right"}),
               ("pending", {"justify": "right"})]
    keep = [c for c, _ in columns if c not in dropped]
    for col, kw in columns:
        if col in keep:
            table.add_column(col, **kw)
    for s in rows:
        cells = {"id": ids[s["session_id"]], "started": f"{s['started_at']:%Y-%m-%d}",
                 "span": span_text(s["span_seconds"]), "turns": str(s["turns"]),
                 "title": s["title"] or "", "project": _short_project(s["project"]) or "",
                 "branch": s["branch"] or "", "msgs": str(s["messages"]),
                 "chunks": str(s["chunks"]), "pending": str(s["pending"])}
        if s["session_id"].startswith("memories:") and not s["messages"]:
            # the agent's curated memories (chunks with no message): no turns to count
            cells.update(title=f"{s['chunks']} curated memories", span="-", turns="-", msgs="-")
        # Text, not markup: a title such as "[/INST] ..." (an LLM transcript's) is shown as
        # written, where rich's markup parser stopped with a traceback
        table.add_row(*[Text(cells[c]) for c in keep])
    console.print(table)


@main.command()
@click.argument("session")
@agent_option
@click.option("--full", is_flag=True, help="Print long messages whole (default: cut at 2000 characters).")
@json_option
@dsn_option
@handle_errors
def show(session, agent, full, as_json, dsn):
    """Print one session's messages in order. SESSION is its id or a unique prefix of it.

    \b
    Example:
      pyrecall show 6279b780
    """
    r = _client(dsn)
    try:
        info = r.show(agent, session)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    head = info["title"] or info["session_id"]
    click.echo(f"# {head}")
    click.echo(" · ".join(x for x in (info["session_id"], info["project"], info["branch"],
                                      f"{info['started_at']:%Y-%m-%d %H:%M}") if x))
    if info.get("summary"):
        click.echo(f"\nsummary: {info['summary']}")
    for m in info["messages"]:
        text = m["content"] if full or len(m["content"]) <= 2000 else m["content"][:2000] + " …"
        flag = " (error)" if (m["metadata"] or {}).get("is_error") else ""
        click.echo(f"\n[{m['seq']}] {m['role']} · {m['kind']}{flag} · {m['created_at']:%H:%M:%S}")
        click.echo(text)


@main.command()
@click.argument("chunk_id", type=int, metavar="ID")
@agent_option
@click.option("--token-budget", type=click.IntRange(min=1), default=1000, show_default=True,
              help="At most this many tokens: the chunk's messages first, then its neighbours.")
@click.option("--kinds", default="text", show_default=True, metavar="KIND,...",
              help="Which of the session's other messages to add: text, thinking, tool_call, "
                   "tool_result (comma-separated), or all.")
@json_option
@dsn_option
@handle_errors
def expand(chunk_id, agent, token_budget, kinds, as_json, dsn):
    """Print what was said around a recalled memory (its ID, as recall, --auto and the MCP tools
    show it): its messages, then those before and after it in its session, nearest first, one
    side after the other, within --token-budget (recall.expand).

    \b
    Example:
      pyrecall recall "why did the alpine build fail?" -k 3
      pyrecall expand 15 --token-budget 2000
      pyrecall expand 15 --kinds all          # tool calls, results and reasoning too
    """
    wanted = ["text", "thinking", "tool_call", "tool_result"] if kinds.strip() == "all" else \
        [k.strip() for k in kinds.split(",") if k.strip()]
    r = _client(dsn)
    try:
        rows = r.expand(agent, chunk_id, token_budget=token_budget, kinds=wanted)
        info = r.session_infos([rows[0]["session_id"]]).get(rows[0]["session_id"]) if rows else None
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo(f"chunk {chunk_id}: nothing fits in {token_budget} token(s)")
        return
    title = info.title if info and info.title else rows[0]["session_id"]
    click.echo(f"# {title}")
    click.echo(f"session {rows[0]['session_id']} · {len(rows)} message(s) · "
               f"{rows[-1]['cumulative_tokens']} token(s) · chunk {chunk_id}'s marked *")
    for m in rows:
        if m["seq"] is None:                  # a curated memory or a summary: itself
            click.echo(f"\n* {m['kind']} · {m['created_at']:%Y-%m-%d %H:%M}\n{m['content']}")
            continue
        mark = "*" if m["in_chunk"] else " "
        kind = "" if m["kind"] == "text" else f" · {m['kind']}"
        click.echo(f"\n{mark} [{m['seq']}] {m['speaker']}{kind} · {m['created_at']:%Y-%m-%d %H:%M}")
        click.echo(m["content"])


# ---------------------------------------------------------------- curated memories

MEMORY_KINDS = ["note", "fact", "decision", "preference"]


@main.command()
@click.argument("text")
@agent_option
@click.option("--kind", type=click.Choice(MEMORY_KINDS), default="note", show_default=True,
              help="What sort of memory it is.")
@click.option("--importance", type=click.FloatRange(0, 1), default=None,
              help="Its weight in ranking, 0..1 [default: recall.remember's, 0.7].")
@click.option("--supersedes", type=int, default=None, metavar="ID",
              help="The id of the memory this one replaces: that one stops being true now "
                   "(still seen with recall --as-of before now).")
@click.option("--pin", is_flag=True, help="Always put it first in the session-start context.")
@click.option("--project", default=None,
              help="The project it is about (a path, as recorded) [default: none: every project].")
@click.option("--no-embed", is_flag=True,
              help="Do not embed it now (the worker or `pyrecall embed` does it later).")
@json_option
@model_option
@dsn_option
@handle_errors
def remember(text, agent, kind, importance, supersedes, pin, project, no_embed, as_json, model, dsn):
    """Keep a memory: a note, fact, decision or preference the agent will recall (ranked with
    its past sessions by recall; pinned ones open every session's context). The memories most
    like it are shown after (recall.similar_memories): one you repeated, or an older value to
    supersede.

    \b
    Examples:
      pyrecall remember "Staging deploys go through ArgoCD" --kind fact
      pyrecall remember "Staging deploys go through Flux" --kind fact --supersedes 4711
      pyrecall remember "Answer in British English" --kind preference --pin
    """
    logging.getLogger("pyrecall").setLevel(logging.ERROR)
    r = _client(dsn, model)
    try:
        memory_id = r.remember(agent, text, kind=kind, importance=importance, project=project,
                               supersedes=supersedes, pin=pin, embed=not no_embed)
        redacted = [p for (p,) in r.conn.execute("select pattern from recall.secrets_in(%s)", [text])]
        similar = r.similar_memories(agent, memory_id=memory_id, project=project)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"id": memory_id, "redacted": redacted, "similar": similar}, default=str))
    else:
        extra = f", superseding {supersedes}" if supersedes is not None else ""
        click.echo(f"remembered memory {memory_id} ({kind}{', pinned' if pin else ''}{extra})"
                   + (f"; stored with credentials replaced: {', '.join(redacted)}" if redacted else ""))
        if similar:
            click.echo("similar memories (a repeat: `pyrecall forget --memory ID`; an older value: "
                       "remember again with --supersedes ID):")
            for m in similar:
                click.echo(f"  #{m['memory_id']} ({m['similarity']:.2f}) {m['memory_kind']}: {m['content']}")


@main.command()
@agent_option
@click.option("--kind", type=click.Choice(MEMORY_KINDS), default=None, help="Only this kind.")
@click.option("--project", default=None, help="Those of this project and of no project.")
@click.option("--all", "include_superseded", is_flag=True,
              help="Superseded memories too (with the time they stopped being true).")
@click.option("--pinned", "pinned_only", is_flag=True, help="Only pinned memories.")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@json_option
@dsn_option
@handle_errors
def memories(agent, kind, project, include_superseded, pinned_only, limit, as_json, dsn):
    """List the agent's curated memories, newest first.

    \b
    Examples:
      pyrecall memories
      pyrecall memories --kind decision --all --json
    """
    r = _client(dsn)
    try:
        rows = r.memories(agent, project=project, kind=kind, limit=limit,
                          include_superseded=include_superseded, pinned_only=pinned_only)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps([{**m.__dict__, "project": m.project} for m in rows],
                              ensure_ascii=False, indent=2, default=str))
        return
    if not rows:
        click.echo(f"no memories for agent {agent!r}", err=True)
        return
    for m in rows:
        flags = [m.kind] + (["pinned"] if m.pinned else []) + ([m.project] if m.project else [])
        if m.valid_until is not None:
            by = f"by {m.superseded_by}" if m.superseded_by is not None else "by a forgotten memory"
            flags.append(f"superseded {m.valid_until:%Y-%m-%d %H:%M} {by}")
        click.echo(f"{m.memory_id:>6}  {m.created_at:%Y-%m-%d}  [{', '.join(flags)}]  "
                   f"{' '.join(m.content.split())}")


@main.command()
@click.argument("memory_id", type=int, metavar="ID")
@click.option("--off", is_flag=True, help="Unpin it.")
@agent_option
@dsn_option
@handle_errors
def pin(memory_id, off, agent, dsn):
    """Pin a memory (first in every session-start context, within its budget), or unpin it.

    \b
    Examples:
      pyrecall pin 4711
      pyrecall pin 4711 --off
    """
    r = _client(dsn)
    try:
        r.pin_memory(agent, memory_id, pinned=not off)
    finally:
        r.close()
    click.echo(f"{'unpinned' if off else 'pinned'} memory {memory_id}")


@main.command()
@agent_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write the export here (default: standard output).")
@click.option("--vectors", is_flag=True,
              help="Also the vectors and token counts, so that the destination need not embed again "
                   "(it must use the same model; a file ~4 KB larger per chunk and per message).")
@dsn_option
@handle_errors
def export(agent, output, vectors, dsn):
    """Export all of an agent's memory that cannot be derived again to a JSONL file: its
    sessions and messages, its curated memories (pins, validity, what supersedes what), the
    importance set by hand, the session summaries a model wrote (`summarize --summarize-with`)
    and which sessions were forgotten (`pyrecall forgotten`). `pyrecall import FILE` reads it back, into this database or another (a
    server, a Citus cluster, a newer pyrecall); importing it twice adds nothing.

    Chunks and extractive summaries are not exported (the destination derives them again); vectors and
    token counts only with --vectors, else `pyrecall embed` makes them again there, with the
    model it uses. The file is written whole or not at all.

    \b
    Examples:
      pyrecall export -o claude-code.jsonl
      pyrecall export --agent-id aria -o aria.jsonl
      pyrecall export --vectors -o claude-code.jsonl        # no embedding at the destination
      pyrecall import aria.jsonl --dsn postgresql://db.internal/memory && pyrecall embed --dsn ...
    """
    r = _client(dsn)
    try:
        header = r.export(agent, sys.stdout if output is None else output, vectors=vectors)
    except NotFoundError as exc:
        raise click.ClickException(f"{exc} (--agent-id or $PYRECALL_AGENT names the agent)") from None
    finally:
        r.close()
    click.echo(f"exported agent {agent!r}: {header['sessions']} session(s), {header['messages']} messages, "
               f"{header['memories']} curated memories, importance of {header['importance']} chunk(s)"
               + (f", {header['summaries']} session summaries by a model" if header.get("summaries") else "")
               + (f", {header['forgotten']} forgotten session(s)" if header.get("forgotten") else "")
               + (f", vectors of {header['vectors']} chunk(s) and counts or vectors of {header['turns']} "
                  "message(s)" if vectors else "")
               + (f" to {output}" if output is not None else ""), err=True)


@main.command()
@click.option("--session", default=None, help="Forget this session.")
@click.option("--memory", "memory_id", type=int, default=None, metavar="ID",
              help="Forget this curated memory (its id, from `pyrecall memories` or recall).")
@click.option("--all", "everything", is_flag=True,
              help="Forget everything of the agent: sessions, messages, chunks, embeddings, "
                   "summaries and what sync remembers of files.")
@click.option("--before", type=Since(), default=None,
              help="Forget the sessions last active before then (180d, 26w, 1y, or a date): a "
                   "retention policy (recall.forget_sessions). Curated memories stay.")
@click.option("--project", default=None, help="With --before: only this project's sessions.")
@click.option("--include-marked", is_flag=True,
              help="With --before: also sessions holding a chunk whose importance was set by hand "
                   "(`pyrecall mark`; kept by default).")
@click.option("--dry-run", is_flag=True, help="With --before: list what would go, delete nothing.")
@click.option("--all-agents", is_flag=True,
              help="With --before: every agent the role may see (a DBA's retention job), not only --agent-id.")
@agent_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (--all, --before).")
@json_option
@dsn_option
@handle_errors
def forget(session, memory_id, everything, before, project, include_marked, dry_run, all_agents, agent,
           yes, as_json, dsn):
    """Delete a session, a curated memory, the sessions older than a cut-off, or all memory of
    an agent, with their chunks and embeddings.

    A session forgotten stays forgotten: a transcript that still holds it, read again (a sync
    of the changed file, `pyrecall import --full`), does not bring it back (`pyrecall forgotten`
    lists them, `pyrecall unforget` lets one in again). --all is a new start for the agent: its
    transcripts are imported again by the next `pyrecall sync` (with nothing indexed before, sync
    reads the coding agents' folders: ~/.claude/projects, ~/.codex/sessions, ...).

    \b
    Example:
      pyrecall forget --session 6279b780      # an id, or a unique prefix of it
      pyrecall forget --memory 4711
      pyrecall forget --before 180d --dry-run # what a 180-day retention would delete
      pyrecall forget --before 180d --yes     # in a daily cron job
      pyrecall forget --before 1y --all-agents --yes    # every agent's (a DBA's job)
      pyrecall forget --all --agent-id test-bot --yes
    """
    if (session is not None) + (memory_id is not None) + bool(everything) + (before is not None) != 1:
        raise click.UsageError("give one of --session SESSION, --memory ID, --before WHEN or --all")
    if before is None and (project is not None or include_marked or dry_run or all_agents):
        raise click.UsageError("--project, --include-marked, --dry-run and --all-agents go with --before")
    if before is not None:
        _forget_before(None if all_agents else [agent], before, project, not include_marked, dry_run, yes,
                       as_json, dsn)
        return
    if memory_id is not None:
        r = _client(dsn)
        try:
            n = r.forget_memory(agent, memory_id)
        finally:
            r.close()
        if as_json:
            click.echo(json.dumps({"agent": agent, "memory_id": memory_id, "forgotten": n}))
        else:
            click.echo(f"forgot memory {memory_id} ({n} removed, with its embedding)")
        return
    if everything and not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("--all deletes everything of the agent: add --yes to confirm")
        click.confirm(f"Forget everything of agent {agent!r}?", abort=True, err=True)
    r = _client(dsn)
    try:
        if session:
            session = r.resolve_session(agent, session)
        n = r.forget(agent_id=agent, session_id=session)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"agent": agent, "session_id": session, "forgotten": n}))
    elif session:
        click.echo(f"forgot session {session} ({n} removed, with its messages, chunks and embeddings)")
    else:
        click.echo(f"forgot {n} session(s) of agent {agent!r}")


def _forget_before(agents, before, project, keep_marked, dry_run, yes, as_json, dsn) -> None:
    """forget --before, for the agents named (None: every agent the role sees): what would go,
    asked about on a terminal, then gone."""
    r = _client(dsn)
    try:
        if agents is None:
            agents = [a for (a,) in r.conn.execute("select distinct agent_id from recall.sessions order by 1")]
        going = {a: r.forget_sessions(a, before, project=project, keep_marked=keep_marked, dry_run=True)
                 for a in agents}
        n = sum(len(g) for g in going.values())
        whose = f"agent {agents[0]!r}" if len(agents) == 1 else f"{sum(bool(g) for g in going.values())} agent(s)"
        if n and not dry_run and not yes:
            if not sys.stdin.isatty():
                raise click.UsageError(f"--before deletes {n} session(s): add --yes to confirm "
                                       "(or --dry-run to list them)")
            click.confirm(f"Forget {n} session(s) of {whose} last active before {before:%Y-%m-%d %H:%M} "
                          f"({sum(s['messages'] for g in going.values() for s in g):,} messages)?",
                          abort=True, err=True)
        gone = going if dry_run else {a: r.forget_sessions(a, before, project=project, keep_marked=keep_marked)
                                      if g else [] for a, g in going.items()}
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"agents": list(gone), "before": before.isoformat(), "dry_run": dry_run,
                               "sessions": [{"agent_id": a, **s} for a, g in gone.items() for s in g]},
                              indent=2, default=str))
        return
    verb = "would forget" if dry_run else "forgot"
    for agent, sessions in gone.items():
        if not sessions and len(gone) > 1:
            continue
        click.echo(f"{verb} {len(sessions)} session(s) of agent {agent!r} last active before "
                   f"{before:%Y-%m-%d %H:%M}"
                   + (f" ({sum(s['messages'] for s in sessions):,} messages, "
                      f"{sum(s['chunks'] for s in sessions):,} chunks); its curated memories stay" if sessions else ""))
        for s in sessions[:20]:
            last = s["ended_at"] or s["started_at"]
            click.echo(f"  {s['session_id'][:8]}  {last:%Y-%m-%d}  {s['title'] or '(untitled)'}")
        if len(sessions) > 20:
            click.echo(f"  ... and {len(sessions) - 20} more (--json lists them all)")
    if len(gone) > 1 and not any(gone.values()):
        click.echo(f"{verb} nothing: no session of the {len(gone)} agent(s) was last active before "
                   f"{before:%Y-%m-%d %H:%M}")


@main.command()
@click.argument("chunk_id", type=click.IntRange(1))
@click.option("--importance", type=click.FloatRange(0, 1), default=None, metavar="X",
              help="The chunk's importance, 0..1 (the default of a message is 0.5).")
@click.option("--reset", is_flag=True, help="Back to the importance derived from its messages.")
@agent_option
@json_option
@dsn_option
@handle_errors
def mark(chunk_id, importance, reset, agent, as_json, dsn):
    """Set how important a memory is (recall.set_importance): CHUNK_ID is a recall result's
    chunk id (the table shows it as "chunk N"; chunk_id in --format json). The importance
    weighs in every later recall and is kept when the chunk is re-derived.

    \b
    Example:
      pyrecall mark 4211 --importance 0.9
      pyrecall mark 4211 --reset
    """
    if (importance is None) == (not reset):
        raise click.UsageError("give either --importance X or --reset")
    r = _client(dsn)
    try:
        previous = r.set_importance(agent, chunk_id, None if reset else importance)
        now = r.importance(agent, chunk_id)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"chunk_id": chunk_id, "agent": agent, "previous": previous,
                               "importance": now, "set": not reset}))
    else:
        click.echo(f"chunk {chunk_id}: importance {previous:.2f} -> {now:.2f}"
                   + (" (derived from its messages again)" if reset else ""))


@main.command()
@agent_option
@json_option
@dsn_option
@handle_errors
def forgotten(agent, as_json, dsn):
    """List the agent's sessions forgotten (deleted by `pyrecall forget --session` or
    `--before`, or by SQL): an import or sync of a transcript that holds one skips it.

    \b
    Example:
      pyrecall forgotten
      pyrecall unforget 6279b780-1c2d-4e5f-8a9b-0c1d2e3f4a5b
    """
    r = _client(dsn)
    try:
        rows = r.forgotten_sessions(agent)
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"agent": agent, "sessions": rows}, indent=2, default=str))
        return
    if not rows:
        click.echo(f"no session of agent {agent!r} is forgotten")
        return
    click.echo(f"{len(rows)} session(s) of agent {agent!r} forgotten (not imported again):")
    for row in rows:
        click.echo(f"  {row['forgotten_at']:%Y-%m-%d %H:%M}  {row['session_id']}")


@main.command()
@click.argument("sessions", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every forgotten session of the agent.")
@agent_option
@json_option
@dsn_option
@handle_errors
def unforget(sessions, everything, agent, as_json, dsn):
    """Let forgotten sessions be imported again (recall.unforget_sessions). Nothing comes back by
    itself: a transcript that holds one is stored again when it is next read (`pyrecall import
    --full PATH`; sync reads a file again when it changes).

    \b
    Example:
      pyrecall unforget 6279b780-1c2d-4e5f-8a9b-0c1d2e3f4a5b
      pyrecall unforget --all && pyrecall import --full ~/.claude/projects
    """
    if bool(sessions) == bool(everything):
        raise click.UsageError("give the forgotten session ids (`pyrecall forgotten` lists them) or --all")
    r = _client(dsn)
    try:
        rows = r.unforget_sessions(agent, None if everything else list(sessions))
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"agent": agent, "sessions": rows}, indent=2, default=str))
        return
    missing = sorted(set(sessions) - {row["session_id"] for row in rows})
    if missing:
        click.echo(f"not forgotten: {', '.join(missing)} (`pyrecall forgotten` lists those that are)", err=True)
    click.echo(f"{len(rows)} session(s) of agent {agent!r} may be imported again"
               + (": `pyrecall import --full PATH` reads their transcripts" if rows else ""))
    if missing and not rows:
        raise SystemExit(1)


# ---------------------------------------------------------------- secrets

@main.group()
def secrets():
    """Credentials are never kept: every text entering memory (messages, session titles and
    summaries, curated memories) is stored with each match of recall.secret_patterns replaced
    (an API key becomes [REDACTED:api_key], a URL's password [REDACTED]). docs/SECURITY.md.

    \b
    Example:
      pyrecall secrets patterns
      echo "token ghp_..." | pyrecall secrets check
      pyrecall secrets redact --dry-run      # what was stored before a pattern existed
    """


@secrets.command("patterns")
@json_option
@dsn_option
@handle_errors
def secrets_patterns(as_json, dsn):
    """List the patterns (recall.secret_patterns): name, on or off, shipped or your own.

    Turn one off, or add your own, in SQL as the database owner. Example:

    \b
      update recall.secret_patterns set enabled = false where name = 'jwt';
      insert into recall.secret_patterns (name, pattern, replacement, hints)
        values ('acme_key', '\\macme_[a-z0-9]{32}', '[REDACTED:acme_key]', '{acme_}');
    """
    r = _client(dsn)
    try:
        rows = r.conn.execute("select name, enabled, builtin, description, pattern, replacement, hints "
                              "from recall.secret_patterns order by name").fetchall()
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps([{"name": n, "enabled": e, "builtin": b, "description": d, "pattern": p,
                                "replacement": rp, "hints": h} for n, e, b, d, p, rp, h in rows], indent=2))
        return
    for name, enabled, builtin, description, *_ in rows:
        click.echo(f"{name:16} {'on ' if enabled else 'off'} {'shipped' if builtin else 'yours  '}  "
                   f"{description or ''}")


@secrets.command("check")
@click.argument("file", type=click.File("r", encoding="utf-8", errors="replace"), default="-")
@json_option
@dsn_option
@handle_errors
def secrets_check(file, as_json, dsn):
    """Print FILE (default: standard input) as memory would store it, credentials replaced; the
    patterns it matched go to standard error (--json: both as JSON). Nothing is stored.

    \b
    Example:
      pyrecall secrets check .env
      git diff | pyrecall secrets check > /dev/null
    """
    if getattr(file, "name", None) == "<stdin>" and sys.stdin.isatty():
        raise click.UsageError("give a FILE, or pipe text in (`git diff | pyrecall secrets check`)")
    text = file.read()
    r = _client(dsn)
    try:
        clean = r.redact(text)
        found = r.conn.execute("select pattern, matches from recall.secrets_in(%s)", [text]).fetchall()
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"text": clean, "found": dict(found)}, indent=2))
        return
    click.echo(clean, nl=False)
    click.echo(("found " + ", ".join(f"{n} {p}" for p, n in found)) if found else "found no credential",
               err=True)


@secrets.command("redact")
@click.option("--dry-run", is_flag=True, help="Count what would change, change nothing.")
@click.option("--all-agents", is_flag=True, help="Every agent the role may see, not only --agent-id.")
@agent_option
@json_option
@dsn_option
@handle_errors
def secrets_redact(dry_run, all_agents, agent, as_json, dsn):
    """Redact what was stored before a pattern existed or was turned on (recall.redact_stored):
    messages, session titles and summaries, curated memories and logged queries that hold a
    credential are rewritten; the chunks of a changed message are derived again and embedded
    again by `pyrecall embed`.

    The old row versions stay in the table files until VACUUM (`pyrecall dba vacuum`), and in
    backups taken before.

    \b
    Example:
      pyrecall secrets redact --dry-run
      pyrecall secrets redact --all-agents      # a DBA, after adding a pattern
    """
    r = _client(dsn)
    try:
        agents = ([a for (a,) in r.conn.execute("select distinct agent_id from recall.sessions order by 1")]
                  if all_agents else [agent])
        found = {a: r.redact_stored(a, dry_run=dry_run) for a in agents}
    finally:
        r.close()
    if as_json:
        click.echo(json.dumps({"dry_run": dry_run,
                               "found": [{"agent_id": a, **row} for a, rows in found.items() for row in rows]},
                              indent=2))
        return
    verb = "would redact" if dry_run else "redacted"
    for a, rows in found.items():
        if not rows:
            if len(found) == 1:
                click.echo(f"no credential found in the memory of agent {a!r}")
            continue
        what = {k: sum(row[k] for row in rows) for k in ("messages", "sessions", "memories", "queries")}
        click.echo(f"agent {a!r}: {verb} " + ", ".join(f"{n} {k}" for k, n in what.items() if n)
                   + " (" + ", ".join(row["pattern"] for row in rows) + ")")
    if len(found) > 1 and not any(found.values()):
        click.echo(f"no credential found in the memory of {len(found)} agent(s)")
    if not dry_run and any(row["messages"] or row["memories"] for rows in found.values() for row in rows):
        click.echo("next: pyrecall embed (the changed chunks), and VACUUM to drop the old row versions "
                   "(pyrecall dba vacuum)")


# ---------------------------------------------------------------- mcp

@main.command()
@agent_option
@click.option("--http", "http", default=None, metavar="HOST:PORT",
              help="Serve the streamable HTTP transport here (e.g. 127.0.0.1:8765) instead of "
                   "stdio. Loopback only, unless --token is given.")
@click.option("--token", envvar="PYRECALL_MCP_TOKEN", default=None, metavar="SECRET",
              help="With --http: refuse every request without 'Authorization: Bearer SECRET' "
                   "(env: PYRECALL_MCP_TOKEN). Required for a non-loopback address.")
@model_option
@dsn_option
@handle_errors
def mcp(agent, http, token, model, dsn):
    """Serve the agent's memory as MCP tools: recall, context, expand, sessions, remember,
    memories, pin, forget.

    Speaks the Model Context Protocol on stdin/stdout (or streamable HTTP with --http) for
    one agent: its database connections run as the recall_agent role with the agent's id, so
    row-level security keeps every other agent's memory out of reach. The embedding model
    and the connections stay warm between calls.

    \b
    Examples:
      claude mcp add pyrecall -- pyrecall mcp
      pyrecall mcp --agent-id support-bot
      pyrecall mcp --http 127.0.0.1:8765
      PYRECALL_MCP_TOKEN=s3cret pyrecall mcp --http 0.0.0.0:8765
    """
    try:
        from . import _mcp
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("mcp", "mcp_types", "uvicorn", "starlette"):
            raise click.ClickException("pyrecall mcp needs the MCP SDK: pip install 'pyrecall[mcp]'") from None
        raise
    if token is not None and not token.strip():
        raise click.UsageError("--token is empty")
    if http is not None:
        host, _port = _mcp.parse_http(http)
        if not _mcp.is_loopback(host) and not token:
            raise click.UsageError(f"--http {http}: an address other than loopback needs --token "
                                   "(requests without it are refused)")
    elif token:
        raise click.UsageError("--token goes with --http (stdio has no requests to refuse)")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="pyrecall mcp: %(levelname)s %(message)s")
    logging.getLogger("pyrecall").setLevel(logging.ERROR)  # keyword fallback: said in the result
    logging.getLogger("pyrecall.mcp").setLevel(logging.WARNING)
    _mcp.serve(_mcp.Backend(dsn, agent, model=model), http=http, token=token)


def run() -> None:
    """The ``pyrecall`` console script: :func:`main`, then out without tearing the interpreter
    down. Freeing ONNX Runtime's session, numpy's and psycopg's modules one by one took ~0.08 s
    of a one-shot recall's 0.6 (bench/LOG.md 2026-11-27, third session); the exit handlers
    (``atexit``) still run and the output is flushed. A thread still alive (none is, after a
    command returns) gets Python's normal exit."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    finish = getattr(atexit, "_run_exitfuncs", None)
    if finish is None or threading.active_count() > 1:
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    finish()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head -1`): as Python's own exit does
            code = code or 120
    os._exit(code)


if __name__ == "__main__":
    run()
