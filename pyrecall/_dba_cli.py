"""``pyrecall dba ...``: the DBA's verbs (vector indexes, query-time knobs, plans, statistics,
upkeep). Each verb is one call into :mod:`pyrecall._index`; ``mk/dba.mk`` calls these, and
``make index M=16`` reaches them as environment variables (``--env``), never through a shell.
"""

from __future__ import annotations

import json
import os
import sys
import time

import click

from ._errors import ConfigError
from ._lazy import lazy_import

_db = lazy_import("pyrecall._db")          # (psycopg, numpy: imported by the command that runs)
_index = lazy_import("pyrecall._index")


def _say(line: str) -> None:
    click.echo(line, err=True)


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _pairs(items: tuple[str, ...], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} is KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _show(rows: list[dict], as_json: bool, columns: list[str] | None = None) -> None:
    if as_json:
        click.echo(json.dumps(rows, default=str, indent=2))
    else:
        click.echo(_index._table(rows, columns))


INFO_COLUMNS = ["index_name", "agent_id", "method", "options", "valid", "size", "index_rows",
                "scans", "build_seconds"]


def _commands(handle_errors, dsn_option, json_option, former_name):
    """Build the group with the CLI's own error handler and options (one policy everywhere)."""

    @click.group()
    def dba():
        """The DBA's verbs: vector indexes, query knobs, plans, statistics, upkeep.

        The database is --dsn / $PYRECALL_DSN, else the embedded server. `make index`,
        `make tune`, ... (mk/dba.mk) call these; docs/DBA.md explains each.

        \b
        Example:
          pyrecall dba index --method hnsw --option m=16
          pyrecall dba stats
        """

    @dba.command("index")
    @click.option("--method", default=None, help="auto | diskann | hnsw (default: as last built, else auto).")
    @click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
                  help="An index option, e.g. m=16 (repeatable).")
    @click.option("--scope", default=None, help="agents | table | both (default: as last built, else agents).")
    @click.option("--not-concurrently", is_flag=True, help="Plain CREATE INDEX (locks writes).")
    @click.option("--dry-run", is_flag=True, help="Print the statements; run nothing.")
    @click.option("--env", "from_env", is_flag=True,
                  help="Take INDEX, SCOPE and the options (M, EF_CONSTRUCTION, ...) from the environment.")
    @json_option
    @dsn_option
    @handle_errors
    def index_cmd(method, options, scope, not_concurrently, dry_run, from_env, as_json, dsn):
        """Build or refresh the vector indexes (concurrently: recall keeps answering).

        \b
        Example:
          pyrecall dba index --method hnsw --option m=16 --option ef_construction=64
          pyrecall dba index            # later: refresh the layout last built
        """
        opts = _pairs(options, "an option")
        if from_env:
            method = method or _env("INDEX")
            scope = scope or _env("SCOPE")
            opts.update({key: _env(var) for var, key in _index.MAKE_OPTIONS.items() if _env(var)})
        concurrently = not not_concurrently
        with _db.connect(dsn) as conn:
            if dry_run:
                for stmt in _index.index_ddl(conn, method, opts or None, scope, concurrently=concurrently):
                    click.echo(stmt + ";")
                return

            def report(row):
                pct = "" if row["percent"] is None else f" {row['percent']}%"
                _say(f"  {row['index_name']}: {row['phase']}{pct} "
                     f"({row['tuples_done']} tuples in, {row['elapsed']})")

            t0 = time.perf_counter()
            statements = _index.create_index(conn, method, opts or None, scope,
                                             concurrently=concurrently, progress=report)
            for stmt in statements:
                if not stmt.startswith("select recall._vector_index_build"):
                    _say(stmt)
            built = [s for s in statements if s.startswith("create index")]
            _say(f"{len(built)} index(es) built in {time.perf_counter() - t0:.1f} s")
            _show(_index.index_info(conn), as_json, [c for c in INFO_COLUMNS if c != "scans"])

    @dba.command("drop")
    @dsn_option
    @handle_errors
    def drop_cmd(dsn):
        """Drop every vector index of recall.chunks (concurrently).

        \b
        Example:
          pyrecall dba drop
        """
        with _db.connect(dsn) as conn:
            for stmt in _index.drop_index(conn):
                _say(stmt)

    @dba.command("info")
    @json_option
    @dsn_option
    @handle_errors
    def info_cmd(as_json, dsn):
        """The vector indexes: agent, method, options, size, validity, scans, build time.

        \b
        Example:
          pyrecall dba info --json
        """
        with _db.connect(dsn) as conn:
            _show(_index.index_info(conn), as_json, INFO_COLUMNS)

    @dba.command("progress")
    @json_option
    @dsn_option
    @handle_errors
    def progress_cmd(as_json, dsn):
        """Index builds running now (pg_stat_progress_create_index).

        \b
        Example:
          pyrecall dba progress
        """
        with _db.connect(dsn) as conn:
            _show(_index.build_progress(conn), as_json)

    @dba.command("tune")
    @click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
                  help="e.g. hnsw.ef_search=200; an empty value or 'default' resets (repeatable).")
    @click.option("--role", default=None, help="Set for this role in this database only.")
    @click.option("--env", "from_env", is_flag=True,
                  help="Take EF_SEARCH, QUERY_SEARCH_LIST_SIZE, ... and ROLE from the environment.")
    @dsn_option
    @handle_errors
    def tune_cmd(settings, role, from_env, dsn):
        """Persist query-time knobs (ALTER DATABASE / ROLE ... IN DATABASE ... SET).

        ann_ef_search_by_rows is recall.config's search width by index size (for every role):
        "measure" measures it on the agents' own indexes (recall@10 >= 0.99), or give the
        table as JSON.

        \b
        Example:
          pyrecall dba tune --set hnsw.ef_search=200
          pyrecall dba tune --set hnsw.ef_search=default --role recall_agent
          pyrecall dba tune --set ann_ef_search_by_rows=measure
          pyrecall dba tune --set 'ann_ef_search_by_rows={"0": 200, "50000": 400}'
        """
        values: dict[str, object] = {k: (None if v in ("", "default", "reset") else v)
                                     for k, v in _pairs(settings, "a setting").items()}
        if from_env:
            role = role or _env("ROLE")
            for var, name in _index.MAKE_KNOBS.items():
                if _env(var) is not None:
                    values[name] = None if _env(var) in ("default", "reset") else _env(var)
        if not values:
            raise ConfigError("nothing to set: e.g. --set hnsw.ef_search=200 (make tune EF_SEARCH=200; "
                              "a value 'default' resets)")
        with _db.connect(dsn) as conn:
            for stmt in _index.tune(conn, values, role=role):
                _say(stmt)
        _say("new sessions use these values")

    @dba.command("settings")
    @json_option
    @dsn_option
    @handle_errors
    def settings_cmd(as_json, dsn):
        """The query-time knobs: this session's value, database and role defaults, the floor.

        \b
        Example:
          pyrecall dba settings
        """
        with _db.connect(dsn) as conn:
            _show(_index.search_settings(conn), as_json)

    @dba.command("stats")
    @click.option("--agents", type=click.IntRange(1), default=20, show_default=True,
                  help="How many agents to list (largest first).")
    @json_option
    @dsn_option
    @handle_errors
    def stats_cmd(agents, as_json, dsn):
        """Table and index sizes, pending embeddings, the largest agents and their vector path.

        \b
        Example:
          pyrecall dba stats --agents 5
        """
        with _db.connect(dsn) as conn:
            report = _index.stats(conn, agents=agents)
        if as_json:
            click.echo(json.dumps(report, default=str, indent=2))
            return
        click.echo(_index._table(report["relations"]) + "\n")
        click.echo(_index._table([report["embeddings"]]) + "\n")
        click.echo(_index._table(report["agents"]))

    @dba.command("vacuum")
    @click.option("--full", is_flag=True, envvar="FULL",
                  help="VACUUM FULL: rewrite the tables (exclusive lock). Env: FULL=1.")
    @dsn_option
    @handle_errors
    def vacuum_cmd(full, dsn):
        """VACUUM (ANALYZE) the recall tables.

        \b
        Example:
          pyrecall dba vacuum
        """
        with _db.connect(dsn) as conn:
            for table, seconds in _index.vacuum(conn, full=full):
                click.echo(f"vacuum {'full, ' if full else ''}analyze {table}: {seconds:.2f} s")

    @dba.command("explain")
    @click.argument("query", required=False, envvar="Q")
    @click.option("--agent-id", "agent", default=None, envvar="AGENT",
                  help="Agent id (env: AGENT; default: the agent with the most chunks).")
    @click.option("--embedding", type=click.Choice(["chunk", "model", "none"]), default="chunk",
                  envvar="EMBED", show_default=True,
                  help="Query vector: the best-matching chunk's, the model's, or none (env: EMBED).")
    @click.option("-k", "--k", "k", type=click.IntRange(1, 1000), default=10, show_default=True)
    @dsn_option
    @handle_errors
    @former_name("--agent", "agent", new="--agent-id")
    def explain_cmd(query, agent, embedding, k, dsn):
        """EXPLAIN ANALYZE of one hybrid_recall call, with the plans of the statements inside it.

        \b
        Example:
          pyrecall dba explain "how did we deploy?" --agent-id claude-code
        """
        if not query:
            raise ConfigError('give the query text: pyrecall dba explain "how did we deploy?" '
                              '(make explain Q="...")')
        with _db.connect(dsn) as conn:
            click.echo(_index.explain(conn, query, agent_id=agent, embedding=embedding, k=k))

    @dba.command("psql", context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    @dsn_option
    @handle_errors
    def psql_cmd(args, dsn):
        """psql on the database (the embedded server's psql when there is no other); the
        arguments go to psql.

        \b
        Example:
          pyrecall dba psql -c "select * from recall.index_info()"
        """
        cmd = _index.psql_command(_db.resolve_dsn(dsn), list(args))
        sys.stdout.flush()
        os.execv(cmd[0], cmd)

    @dba.group("citus")
    def citus():
        """A local Citus cluster: a coordinator and two workers on this machine.

        Citus is built from its source (PYRECALL_CITUS_SOURCE, else ../shared/vendor) into a
        copy of the embedded server's tree, cached outside the repository; the cluster's data
        is in $PYRECALL_DATA_DIR/citus. docs/SCALING.md explains.

        \b
        Example:
          pyrecall dba citus up
          pyrecall dba citus down
        """

    @citus.command("up")
    @click.option("--port", type=click.IntRange(1024, 65533), default=None, envvar="PYRECALL_CITUS_PORT",
                  help="The coordinator's port; the workers take the next two (env: PYRECALL_CITUS_PORT; "
                       "default 9700, else free ports).")
    @handle_errors
    def citus_up(port):
        """Build Citus if needed, start the cluster, migrate and distribute the schema; print
        the coordinator's URL last. On a cluster already distributed (a second call, a newer
        pyrecall) it migrates: an upgrade, re-distributed in the same transaction.

        \b
        Example:
          pyrecall dba citus up
        """
        from . import _citus

        url = _citus.up(base_port=port, say=_say)
        for node in _citus.nodes(_citus.cluster_dir()):
            _say(f"{node.name}: 127.0.0.1:{node.port} ({node.pgdata})")
        click.echo(url)

    @citus.command("down")
    @handle_errors
    def citus_down():
        """Stop the cluster and remove its data (the Citus build stays cached).

        \b
        Example:
          pyrecall dba citus down
        """
        from . import _citus

        stopped = _citus.down()
        click.echo(f"stopped {', '.join(stopped)}; data removed" if stopped else "no Citus cluster was running")

    return dba
