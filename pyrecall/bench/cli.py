"""``pyrecall bench ...``: retrieval quality (LoCoMo), speed at scale, and peers.

Each command parses its arguments, makes one call into pyrecall.bench, and prints the report:
JSON with ``--json``, tables otherwise. Progress goes to stderr, so ``--json`` stays clean.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from .._errors import PyrecallError, is_database_error, one_line


def _handle_errors(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if not isinstance(exc, PyrecallError | OSError | ValueError) and not is_database_error(exc):
                raise
            raise click.ClickException(one_line(exc)) from None
    return wrapper


@contextmanager
def _progress(enabled: bool = True) -> Iterator[Callable[[str, int], Callable[[int], None]] | None]:
    """A rich progress display on stderr; yields ``start(label, total) -> advance(n)``."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=False) as bar:
        def start(label: str, total: int) -> Callable[[int], None]:
            task = bar.add_task(label, total=total)
            return lambda n: bar.advance(task, n)
        yield start


def _ks(value: str) -> list[int]:
    try:
        ks = sorted({int(x) for x in value.split(",") if x.strip()})
    except ValueError:
        raise click.BadParameter(f"expected numbers separated by commas, got {value!r}") from None
    if not ks or ks[0] < 1 or ks[-1] > 1000:
        raise click.BadParameter("each k must be between 1 and 1000")
    return ks


def _budgets(value: str) -> list[int]:
    """'250,1000' -> [250, 1000]; '' -> [] (no budget figures)."""
    if not value.strip():
        return []
    try:
        budgets = sorted({int(b) for b in value.split(",") if b.strip()})
    except ValueError:
        raise click.BadParameter(f"expected numbers separated by commas, got {value!r}",
                                 param_hint="--budgets") from None
    if budgets and (budgets[0] < 1 or budgets[-1] > 1_000_000):
        raise click.BadParameter("each budget must be between 1 and 1000000", param_hint="--budgets")
    return budgets


@click.group()
def bench():
    """Benchmarks: retrieval quality on LoCoMo, latency at a million chunks, peers.

    \b
    Example:
      pyrecall bench locomo --data ../shared/data/locomo/locomo-dev.json
      pyrecall bench latency --chunks 20000 --agents 50
      pyrecall bench ann --data ../shared/data/locomo/locomo-dev.json
    """


@bench.command("locomo")
@click.option("--data", "data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A LoCoMo JSON file (a list of conversations with sample_id, conversation, qa).")
@click.option("--k", "ks", default="5,10,20", show_default=True,
              help="Cut-offs for evidence recall@k, comma-separated.")
@click.option("--limit-conversations", type=int, default=None,
              help="Only the first N conversations (quick runs, CI).")
@click.option("--limit-questions", type=int, default=None,
              help="Only the first N questions of each conversation.")
@click.option("--one-agent", is_flag=True,
              help="Load every conversation into one agent: the others are distractors, as an "
                   "agent's many past sessions are (harder than one agent per conversation).")
@click.option("--budgets", "budgets", default="250,500,1000,2000", show_default=True,
              help="Token budgets at which to judge each method's context (evidence recall per "
                   "token of context), comma-separated; '' for none.")
@click.option("--baselines/--no-baselines", default=True, show_default=True,
              help="Also single-turn dense, BM25 and RRF baselines cut at the same budgets.")
@click.option("--chunking", type=click.Choice(["window", "turn_pair"]), default="window",
              show_default=True,
              help="How the conversations are chunked: chat windows of 4 turns every 2, or turn "
                   "pairs (the default chunking of agent sessions).")
@click.option("--methods", "methods", default="dense,text,hybrid_recall,session_recall",
              show_default=True,
              help="The methods to ask, comma-separated: dense, text, hybrid_recall, "
                   "session_recall (the stable names), or a version: hybrid_recall_v4, "
                   "hybrid_recall_v5, hybrid_recall_v6, hybrid_recall_v7 (the budget filled turn "
                   "by turn), session_recall_v4, session_recall_v5, session_recall_v6, "
                   "session_recall_v8 (passages paid the model's counts), hybrid_recall_v9 and "
                   "session_recall_v9 (the budget filled turn by turn), hybrid_recall_v10 and "
                   "session_recall_v10 (a long query searched by its 16 rarest words), "
                   "hybrid_recall_v11 and session_recall_v11 (each turn also valued by its own "
                   "vector), hybrid_recall_v13 and session_recall_v13 (a question with its "
                   "answer, turns joined across tool calls); auto_context, auto_context_v10, "
                   "auto_context_v12, auto_context_v13, auto_context_v14, auto_context_v15 (the "
                   "session-start "
                   "context, the question as its task: judged at the budgets only).")
@click.option("--model", default="local/all-MiniLM-L6-v2", show_default=True,
              help="Embedding model of the chunks and questions (not the configured one: "
                   "figures stay comparable between runs), e.g. local/all-MiniLM-L6-v2-int8.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to create a throwaway database on (default: a throwaway embedded "
                   "server in a temporary directory).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@_handle_errors
def locomo_cmd(data, ks, budgets, baselines, chunking, methods, limit_conversations,
               limit_questions, one_agent, model, as_json, dsn, quiet):
    """Evidence recall of dense, text, hybrid_recall and session_recall on LoCoMo.

    Each conversation is one agent (with --one-agent, all are one), loaded into a fresh
    database through the normal ingestion path and embedded with --model; questions of categories
    1-4 are asked through the public SQL functions. Answers are never used. Each method is
    judged by recall over its first k chunks and, at each of --budgets, by the evidence its
    context holds when the function fills that token budget; single-turn baselines (the
    speaker's name in each turn) are cut at the same budgets with the same token count.

    \b
    Example:
      pyrecall bench locomo --data ../shared/data/locomo/locomo-dev.json --json
      pyrecall bench locomo --data ../shared/data/locomo/locomo-dev.json --one-agent
      pyrecall bench locomo --data ../shared/data/locomo/locomo-dev.json --budgets 250,1000
      pyrecall bench locomo --data ../shared/data/locomo/locomo-dev.json --no-baselines \\
        --methods session_recall_v6,session_recall_v8,session_recall_v9
      pyrecall bench locomo --data ../shared/data/locomo/locomo-dev.json --no-baselines \
        --methods hybrid_recall,session_recall --model local/all-MiniLM-L6-v2-int8
    """
    from .._embed import get_embedder
    from . import locomo

    names = [n.strip() for n in methods.split(",") if n.strip()]
    unknown = [n for n in names if n not in locomo.METHODS]
    if not names or unknown:
        raise click.BadParameter(f"unknown method {', '.join(unknown) or '(none given)'}; "
                                 f"choose from {', '.join(locomo.METHODS)}", param_hint="--methods")
    at_budgets = _budgets(budgets)
    context = [n for n in names if locomo.METHODS[n].context]
    if context and not at_budgets:
        raise click.BadParameter(f"{', '.join(context)} is judged at token budgets only: give --budgets",
                                 param_hint="--budgets")
    with _progress(not quiet) as progress:
        report = locomo.run(data, dsn=dsn, ks=_ks(ks), limit_conversations=limit_conversations,
                            limit_questions=limit_questions, budgets=at_budgets,
                            baselines=baselines, chunking=chunking,
                            methods=[locomo.METHODS[n] for n in dict.fromkeys(names)],
                            one_agent="locomo" if one_agent else None,
                            embedder=get_embedder(model), progress=progress)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _print_locomo(report)


def _console():
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)


def _print_locomo(report: dict) -> None:
    from rich.table import Table

    from .locomo import CATEGORIES

    console = _console()
    metrics = [f"recall@{k}" for k in report["k"]] + ["all@10", "session_recall@5", "mrr"]
    ranked = {name: r for name, r in report["methods"].items() if "latency_ms" in r}
    table = Table(title=f"LoCoMo evidence retrieval — {report['n_questions']} questions, "
                        f"{report['n_conversations']} conversations"
                        f"{' in one agent' if report.get('one_agent') else ''} ({report['model']})")
    table.add_column("method")
    for m in metrics:
        table.add_column(m, justify="right")
    table.add_column("p50 ms", justify="right")
    for name, r in ranked.items():
        table.add_row(name, *(f"{r[m]:.3f}" for m in metrics), f"{r['latency_ms']['p50']:.1f}")
    if ranked:  # none when only contexts (auto_context) were asked
        console.print(table)
        cats = Table(title="recall@10 by category")
        cats.add_column("method")
        first = next(iter(ranked.values()))
        for c in first["by_category"]:
            label = CATEGORIES.get(int(c), c)
            cats.add_column(f"{c} {label} (n={first['by_category'][c]['n']})", justify="right")
        for name, r in ranked.items():
            cats.add_row(name, *(f"{r['by_category'][c]['recall@10']:.3f}" for c in first["by_category"]))
        console.print(cats)
    budgets = [str(b) for b in report.get("budgets", [])]
    if budgets:
        at = Table(title=f"evidence recall at a token budget (chunking: {report.get('chunking')}); "
                         "all-evidence and mean tokens used below each")
        at.add_column("method")
        for b in budgets:
            at.add_column(f"B={b}", justify="right")
        for name, r in report["methods"].items():
            if "budget" in r:
                at.add_row(name, *(f"{r['budget'][b]['recall']:.3f}\n"
                                   f"all {r['budget'][b]['all']:.3f} · {r['budget'][b]['tokens']:.0f} tok"
                                   for b in budgets))
        console.print(at)
    console.print(f"unparseable or unmatched evidence ids: {report['n_unparseable_evidence']}; "
                  f"questions without usable evidence: {report['n_skipped_questions']}; "
                  f"load: {report['load']}")


def _default_clients() -> str:
    cpus = os.cpu_count() or 1
    return ",".join(str(n) for n in dict.fromkeys((1, cpus, 2 * cpus)))


def _client_counts(ctx, param, value: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; '' -> [] (no measurement under load)."""
    try:
        counts = [int(x) for x in value.replace(" ", "").split(",") if x]
    except ValueError:
        raise click.BadParameter(f"expected counts like 1,2,4, got {value!r}") from None
    if any(not 1 <= n <= 64 for n in counts):
        raise click.BadParameter(f"each count must be between 1 and 64, got {value!r}")
    return list(dict.fromkeys(counts))


@bench.command("latency")
@click.option("--chunks", "n_chunks", type=int, default=20_000, show_default=True,
              help="Chunks in all (each session: 10 exchanges = 20 messages = 10 chunks).")
@click.option("--agents", "n_agents", type=int, default=50, show_default=True,
              help="Agents; their sizes follow Zipf's law.")
@click.option("--queries", "queries_per_class", type=int, default=100, show_default=True,
              help="Queries per agent size class (small, medium, large).")
@click.option("--ef-search", type=int, default=40, show_default=True,
              help="hnsw.ef_search for the raw ANN query and recall.")
@click.option("--load-jobs", type=click.IntRange(1, 64), default=os.cpu_count() or 1,
              show_default="the number of CPUs",
              help="Connections that ingest in parallel (agents' batches spread over them).")
@click.option("--clients", callback=_client_counts, default=_default_clients(),
              show_default="1, the number of CPUs, twice that",
              help="Connections asking hybrid_recall at once, comma-separated: queries/s and "
                   "latency under load, one measurement per count ('' for none).")
@click.option("--clients-seconds", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds each --clients count runs.")
@click.option("--sizes", default=None, metavar="N[xK],...",
              help="Chunks per agent instead of --chunks/--agents, e.g. "
                   "100000x1,5000x10,200x100,20x1000 (one agent of 100k, ten of 5k, ...).")
@click.option("--vectors", type=click.Choice(["cluster", "topic"]), default="cluster",
              show_default=True,
              help="cluster: clean clusters (topic centre + sub-topic + noise); topic: each chunk "
                   "a random mix of two of its agent's topics (of 256) plus noise, queries away "
                   "from every stored vector, shaped like real embeddings.")
@click.option("--after-embed", is_flag=True,
              help="Also time hybrid_recall right after the vectors are written (indexes built, "
                   "ANALYZE, no VACUUM; autovacuum off the table meanwhile), then after each "
                   "maintenance step in turn.")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to create a throwaway database on (default: a throwaway embedded "
                   "server in a temporary directory).")
@click.option("--keep", is_flag=True,
              help="With --dsn: keep the database afterwards (its URL in the report), to measure "
                   "more on it.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@_handle_errors
def latency_cmd(n_chunks, n_agents, queries_per_class, ef_search, load_jobs, clients,
                clients_seconds, sizes, vectors, after_embed, seed, as_json, dsn, keep, quiet):
    """Ingest rate, index build time, size, and query latency / recall@10 by agent size.

    Synthetic agents (Zipf sizes, Zipf-vocabulary text, clustered 384-dim vectors, a year of
    timestamps) are loaded through the normal ingestion path into a fresh database; then
    (a) the exact per-agent vector query, (b) the raw ANN query, (c) hybrid_recall with a
    2000-token budget and (d) session_recall are timed for small (<= 1,000 chunks), medium
    (<= 20,000) and large agents, one query at a time; then (c) under load: --clients
    connections asking at once, queries/s and latency for each count.

    \b
    Example:
      pyrecall bench latency --chunks 1000000 --agents 1000 --json
      pyrecall bench latency --chunks 20000 --agents 50
      pyrecall bench latency --sizes 100000x1,5000x10,200x100,20x1000 --vectors topic
    """
    from . import latency

    agent_sizes = latency.parse_sizes(sizes) if sizes is not None else None
    with _progress(not quiet) as progress:
        report = latency.run(n_chunks, n_agents, dsn=dsn, seed=seed,
                             queries_per_class=queries_per_class, ef_search=ef_search,
                             load_jobs=load_jobs, clients=clients,
                             clients_seconds=clients_seconds, sizes=agent_sizes, vectors=vectors,
                             measure_after_embed=after_embed, keep=keep, progress=progress)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _print_latency(report)


def _print_latency(report: dict) -> None:
    from rich.table import Table

    console = _console()
    ing = report["ingest"]
    console.print(f"{report['chunks']:,} chunks, {report['messages']:,} messages, "
                  f"{report['agents']} agents (largest {report['agent_sizes']['largest']:,}, "
                  f"smallest {report['agent_sizes']['smallest']:,}; by class "
                  f"{report['agent_sizes']['by_class']})")
    console.print(f"ingest {ing['messages_per_s']:,.0f} messages/s ({ing['ingest_s']} s, "
                  f"{ing.get('jobs', 1)} connection{'s' if ing.get('jobs', 1) > 1 else ''}); "
                  f"vectors {report['vectors_s']} s; index build {report['index']['build_s']} s; "
                  f"database {report['size_gib_per_million_chunks']['database']} GiB per million chunks")
    table = Table(title=f"latency ms (p50 / p95 / p99) and recall@10 vs exact, "
                        f"{report.get('vectors', 'cluster')} vectors, ef_search={report['ef_search']}")
    for col in ("agents", "n", "(a) exact", "(b) ANN", "ANN r@10", "(c) hybrid_recall",
                "arm r@10", "(d) session_recall", "(c)/(a) p50"):
        table.add_column(col, justify="right")
    for cls, r in report["latency_ms"].items():
        def trio(x):
            return f"{x['p50']:.1f} / {x['p95']:.1f} / {x['p99']:.1f}"
        table.add_row(cls, str(r["n_queries"]), trio(r["exact"]), trio(r["ann"]),
                      f"{r['ann']['recall@10']:.3f}", trio(r["hybrid"]),
                      f"{r['hybrid']['vector_arm_recall@10']:.3f}", trio(r["session"]),
                      f"{r['hybrid_over_exact']['p50']}")
    console.print(table)
    if report.get("after_embed"):
        table = Table(title="hybrid_recall right after the vectors were written, then after each "
                            "maintenance step (ms p50 / p95 / p99)")
        for col in ("state", "ms", "server CPU ms per call", "dead tuples", "all-visible pages", "step s"):
            table.add_column(col, justify="right")
        for name, r in report["after_embed"].items():
            h, t = r["hybrid"], r["table"]
            table.add_row(name.replace("_", " "), f"{h['p50']:.1f} / {h['p95']:.1f} / {h['p99']:.1f}",
                          str(h.get("cpu_ms_per_call")), f"{t['dead']:,}", f"{t['all_visible']}",
                          f"{r['step_s']}")
        console.print(table)
    load = report.get("under_load") or {}
    if load.get("by_clients"):
        table = Table(title=f"hybrid_recall under load: {load['queries']} queries of every size "
                            f"class in turn, {load['seconds']:g} s per row")
        for col in ("clients", "queries/s", "× 1st row", "ms p50 / p95 / p99", "n"):
            table.add_column(col, justify="right")
        for n, r in load["by_clients"].items():
            table.add_row(n, f"{r['qps']:,.0f}", f"{r['qps_over_first']:.2f}",
                          f"{r['p50']:.1f} / {r['p95']:.1f} / {r['p99']:.1f}", str(r["n_queries"]))
        console.print(table)


def _ef_values(ctx, param, value: str) -> list[int]:
    try:
        values = sorted({int(x) for x in value.replace(" ", "").split(",") if x})
    except ValueError:
        raise click.BadParameter(f"expected widths like 10,40,200, got {value!r}") from None
    if not values or values[0] < 1 or values[-1] > 1000:
        raise click.BadParameter("each width must be between 1 and 1000")
    return values


@bench.command("ann")
@click.option("--data", "data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A LoCoMo JSON file: its turns (and their sentences) are the text, its "
                   "questions the queries.")
@click.option("--sentences/--turns-only", default=True, show_default=True,
              help="Also each sentence of a turn of several, as a chunk of its own (more real vectors).")
@click.option("--ef-search", "ef_values", callback=_ef_values, default="10,20,40,100,200,400",
              show_default=True, help="Search widths of the recall curve, comma-separated.")
@click.option("--compare/--no-compare", default=True, show_default=True,
              help="Also an agent of as many topic-mixture vectors (bench latency --vectors "
                   "topic), measured the same way.")
@click.option("--model", default=None, help="Embedding model (default: the configured one, "
                                            "all-MiniLM-L6-v2 locally).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to create a throwaway database on (default: a throwaway embedded "
                   "server in a temporary directory).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@_handle_errors
def ann_cmd(data, sentences, ef_values, compare, model, as_json, dsn, quiet):
    """The vector arm on real embeddings: recall@10 against the exact scan on MiniLM vectors
    of real text (LoCoMo turns and sentences), real questions as queries.

    The texts are one agent's chunks with an HNSW index of its own (recall.create_vector_index);
    each question asks recall._vector_arm as hybrid_recall does (100 candidates, the configured
    search widths), then for 10 rows at each --ef-search width: the recall curve. With
    --compare, topic-mixture vectors of the same count beside them.

    \b
    Example:
      pyrecall bench ann --data ../shared/data/locomo/locomo-dev.json
    """
    from . import real_ann

    with _progress(not quiet) as progress:
        report = real_ann.run(data, dsn=dsn, model=model, sentences=sentences, ef_values=ef_values,
                              compare=compare, progress=progress)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"vector arm vs exact, {report['units']:,} chunks per agent, "
                        f"{report['questions']} queries ({report['model']})")
    for col in ("vectors", "arm r@10 (100 cand.)", "min", "arm ms p50 / p95",
                *(f"r@10 ef {ef}" for ef in report["ef_values"]), "sim top1 / 10th", "gap 10-11"):
        table.add_column(col, justify="right")
    for name in ("real", "topic"):
        r = report.get(name)
        if not r:
            continue
        sim = r["similarity"] or {}
        table.add_row(name, f"{r['arm_recall@10']:.4f}", f"{r['arm_min_recall@10']:.1f}",
                      f"{r['arm_ms']['p50']:.1f} / {r['arm_ms']['p95']:.1f}",
                      *(f"{r['recall@10_by_ef_search'][str(ef)]:.3f}" for ef in report["ef_values"]),
                      f"{sim.get('top1', 0):.3f} / {sim.get('top10', 0):.3f}", f"{sim.get('gap_10_11', 0):.4f}")
    _console().print(table)
    _console().print(f"path: {report['real']['path']}")


@bench.command("plot")
@click.option("--locomo", "locomo_json", type=click.Path(exists=True, dir_okay=False),
              help="A report of `bench locomo --json`.")
@click.option("--latency", "latency_json", type=click.Path(exists=True, dir_okay=False),
              help="A report of `bench latency --json`.")
@click.option("--out", "out_dir", default="docs/img", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the PNG files.")
@_handle_errors
def plot_cmd(locomo_json, latency_json, out_dir):
    """PNG plots of saved reports: recall@10 by method and category; latency by agent size.

    \b
    Example:
      pyrecall bench locomo --data locomo-dev.json --json > locomo.json
      pyrecall bench plot --locomo locomo.json --out docs/img
    """
    from pathlib import Path

    from . import _plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if locomo_json:
        click.echo(_plots.locomo_by_category(json.loads(Path(locomo_json).read_text()),
                                             out / "locomo_recall_by_category.png"))
    if latency_json:
        click.echo(_plots.latency_by_agent_size(json.loads(Path(latency_json).read_text()),
                                                out / "latency_by_agent_size.png"))


@bench.command("peers")
@click.option("--chunks", "n_chunks", type=int, default=100_000, show_default=True)
@click.option("--agents", "n_agents", type=int, default=200, show_default=True)
@click.option("--queries", "queries_per_class", type=int, default=100, show_default=True,
              help="Queries per agent size class.")
@click.option("--peer", "peers", multiple=True, default=("lancedb", "chroma"), show_default=True,
              type=click.Choice(["lancedb", "chroma"]))
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to create a throwaway database on (default: a throwaway embedded server).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@_handle_errors
def peers_cmd(n_chunks, n_agents, queries_per_class, peers, seed, as_json, dsn, quiet):
    """The latency data set in pyrecall, LanceDB and Chroma: ingest rate, filtered latency
    and recall@10, same queries, same run (needs `pip install lancedb chromadb`).

    \b
    Example:
      pyrecall bench peers --chunks 100000 --agents 200 --json
    """
    from . import peers as peers_mod

    with _progress(not quiet) as progress:
        report = peers_mod.run(n_chunks, n_agents, dsn=dsn, seed=seed,
                               queries_per_class=queries_per_class, peers=tuple(peers),
                               progress=progress)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"{report['chunks']:,} chunks, {report['agents']} agents, "
                        f"{report['n_queries']} filtered queries (ms)")
    for col in ("store / query", "ingest rows/s", "p50", "p95", "p99", "recall@10"):
        table.add_column(col, justify="right")
    ours = report["pyrecall"]
    for label, key in (("pyrecall exact", "exact"), ("pyrecall raw ANN", "ann"),
                       ("pyrecall hybrid_recall", "hybrid_recall"),
                       ("pyrecall session_recall", "session_recall")):
        s = ours[key]
        table.add_row(label, f"{ours['ingest_messages_per_s']:,.0f} msg", f"{s['p50']}",
                      f"{s['p95']}", f"{s['p99']}",
                      str(s.get("recall@10", s.get("vector_arm_recall@10", ""))))
    for peer in peers:
        r = report[peer]
        if "error" in r:
            table.add_row(peer, r["error"], "", "", "", "")
            continue
        for q in ("vector_filtered", "vector_filtered_refined", "hybrid_filtered"):
            if q in r:
                s = r[q]
                if "error" in s:
                    table.add_row(f"{peer} {q}", s["error"], "", "", "", "")
                else:
                    table.add_row(f"{peer} {q}", f"{r['rows_per_s']:,.0f}", f"{s['p50']}",
                                  f"{s['p95']}", f"{s['p99']}", f"{s['recall@10']}")
    _console().print(table)


@bench.command("load")
@click.option("--chunks", "n_chunks", type=int, default=1_000_000, show_default=True,
              help="Chunks in the database.")
@click.option("--agents", "n_agents", type=int, default=None,
              show_default="chunks / 1000, between 10 and 1000", help="Agents (Zipf sizes).")
@click.option("--clients", callback=_client_counts, default="4,16,64", show_default=True,
              help="Concurrent clients, one phase per count, comma-separated.")
@click.option("--seconds", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Length of each phase.")
@click.option("--import-rate", type=click.FloatRange(min=0.1), default=100.0, show_default=True,
              help="Messages/s the importer writes during each phase.")
@click.option("--keep", is_flag=True, help="With --dsn: keep the database and print its URL.")
@click.option("--reuse", metavar="URL", default=None,
              help="Run the phases on this database, built by an earlier --keep run.")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--json", "json_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write the report to this file.")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to build on (default: a throwaway embedded server).")
@_handle_errors
def load_cmd(n_chunks, n_agents, clients, seconds, import_rate, keep, reuse, seed, json_file, dsn):
    """hybrid_recall under load while an importer writes and a worker embeds.

    For each --clients count, that many connections ask hybrid_recall for --seconds while an
    importer writes sessions and the embedding worker (a hash embedder: the load is on the
    database) embeds them; then every write is counted: a lost or doubled message is an
    error. Prints one JSON report (recalls/s and latency per phase, writes checked); exits 1
    when a phase lost or doubled a write or saw an error.

    \b
    Example:
      pyrecall bench load --chunks 100000 --clients 4,16,64 --seconds 60 --json load.json
      pyrecall bench load --chunks 5000 --clients 8 --seconds 10
    """
    import time
    from pathlib import Path

    from . import load

    t = time.perf_counter()
    report = load.run(chunks=n_chunks, agents=n_agents, clients=clients, seconds=seconds, dsn=dsn,
                      reuse=reuse, keep=keep, seed=seed, import_rate=import_rate,
                      log=lambda m: click.echo(f"[{time.perf_counter() - t:7.1f} s] {m}", err=True))
    text = json.dumps(report, indent=2, default=str)
    click.echo(text)
    if json_file:
        Path(json_file).write_text(text + "\n")
    if not report["ok"]:
        raise SystemExit(1)


@bench.command("citus")
@click.option("--dsn", default=None, metavar="URL",
              help="The Citus coordinator's URL, the recall schema distributed (make citus-up prints it).")
@click.option("--agents", "n_agents", type=click.IntRange(1), default=20, show_default=True,
              help="Agents loaded on both servers.")
@click.option("--chunks", "n_chunks", type=click.IntRange(1), default=30, show_default=True,
              help="Chunks per session (3 sessions an agent).")
@click.option("--calls", type=click.IntRange(1), default=300, show_default=True,
              help="Calls timed per client and phase (after 20 that are not).")
@click.option("--clients", callback=_client_counts, default="1,2,4", show_default=True,
              help="Concurrent clients, one phase per count, comma-separated.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write the report to this file.")
@_handle_errors
def citus_cmd(dsn, n_agents, n_chunks, calls, clients, json_file):
    """hybrid_recall delegated to a Citus worker against a single node.

    Loads the same agents (fake-embedder vectors) into the coordinator's database and into a
    throwaway embedded server, then times hybrid_recall for a random agent: p50/p95 per call
    and queries/s with each --clients count, on both. Prints one JSON report with the machine's
    load average. The cluster keeps its bench agents (a later run reuses them).

    \b
    Example:
      pyrecall bench citus --dsn "$(make -s citus-up | tail -1)"
      pyrecall bench citus --dsn postgresql://postgres@127.0.0.1:9700/pyrecall --agents 4 --calls 20
    """
    import time
    from pathlib import Path

    from . import citus

    t = time.perf_counter()
    report = citus.run(dsn, agents=n_agents, chunks=n_chunks, calls=calls, clients=clients,
                       log=lambda m: click.echo(f"[{time.perf_counter() - t:7.1f} s] {m}", err=True))
    text = json.dumps(report, indent=2)
    click.echo(text)
    if json_file:
        Path(json_file).write_text(text + "\n")


@bench.command("index")
@click.option("--sessions", "n_sessions", type=click.IntRange(1), default=1000, show_default=True,
              help="Claude Code sessions to generate (~50 chunks each).")
@click.option("--sample", type=click.IntRange(64), default=640, show_default=True,
              help="Chunks the raw model embeds for the throughput comparison.")
@click.option("--runs", type=click.IntRange(1), default=5, show_default=True,
              help="Cold recall runs (median).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generator.")
@click.option("--model", default="local/all-MiniLM-L6-v2", show_default=True,
              help="The local model that embeds (e.g. local/all-MiniLM-L6-v2-int8).")
@click.option("--turn-vectors/--no-turn-vectors", default=True, show_default=True,
              help="Whether the job also embeds each turn on its own (recall.config turn_vectors; "
                   "what release 11's budget fill values turns by).")
@click.option("--json", "json_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the report to this file.")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to create a throwaway database on (default: a throwaway embedded "
                   "server in a temporary directory).")
@_handle_errors
def index_cmd(n_sessions, sample, runs, seed, model, turn_vectors, json_file, dsn):
    """Index a real-sized history end to end with the local model, then recall cold.

    Generates realistic Claude Code sessions (tool calls, code, thinking, ~50 chunks each),
    imports them (`pyrecall import`), embeds every chunk (`pyrecall embed`), and measures the
    raw model on the same chunks, hybrid_recall's p95 right after the embedding and settled, and
    cold `pyrecall recall` processes (median of --runs). Prints one JSON report.

    \b
    Example:
      pyrecall bench index --sessions 1000 --json index.json
      pyrecall bench index --sessions 20 --sample 128
    """
    import time
    from pathlib import Path

    from . import index

    t = time.perf_counter()
    report = index.run(n_sessions, dsn=dsn, seed=seed, sample=sample, recall_runs=runs, model=model,
                       turn_vectors=turn_vectors, log=lambda m: click.echo(f"[{time.perf_counter() - t:7.1f} s] {m}", err=True))
    text = json.dumps(report, indent=2, default=str)
    click.echo(text)
    if json_file:
        Path(json_file).write_text(text + "\n")


@bench.command("append")
@click.option("--lengths", default="100,1000,5000", show_default=True,
              help="Session lengths (messages) to append to, comma-separated.")
@click.option("--appends", type=click.IntRange(1), default=30, show_default=True,
              help="Messages appended one by one to each session.")
@click.option("--words", type=click.IntRange(1), default=30, show_default=True,
              help="Words per message (Zipf-drawn from 5,000).")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to create a throwaway database on (default: a throwaway embedded "
                   "server in a temporary directory).")
@_handle_errors
def append_cmd(lengths, appends, words, dsn):
    """What appending one message to a long session costs (a live chat sync, an agent writing
    turn by turn), for chat sessions (windows) and turn-pair sessions, against deriving the
    whole session again.

    Prints one JSON report: per session length and chunking, the append's wall p50/p95 and its
    server CPU time, and the same for the whole session derived again.

    \b
    Example:
      pyrecall bench append --lengths 100,1000,5000 --appends 30
    """
    from . import append

    try:
        sizes = [int(x) for x in lengths.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter("a comma-separated list of whole numbers", param_hint="--lengths") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter("at least one length, each ≥ 1", param_hint="--lengths")
    click.echo(json.dumps(append.run(sizes, appends, words, dsn=dsn), indent=2))


@bench.command("ingest")
@click.option("--messages", "n_messages", type=click.IntRange(1), default=100_000, show_default=True,
              help="Messages in all.")
@click.option("--sessions", "n_sessions", type=click.IntRange(1), default=100, show_default=True,
              help="Sessions they are spread over (one add_messages call each).")
@click.option("--words", type=click.IntRange(1), default=30, show_default=True,
              help="Words per message (Zipf-drawn from 5,000).")
@click.option("--per-transaction", type=click.IntRange(1), default=1, show_default=True,
              help="Sessions whose add_messages calls share one transaction (a bulk load of "
                   "many agents: bench latency puts 20,000 messages in one).")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to create a throwaway database on (default: a throwaway embedded "
                   "server in a temporary directory).")
@_handle_errors
def ingest_cmd(n_messages, n_sessions, words, per_transaction, dsn):
    """Insert throughput of Recall.add_messages, in-database chunking included.

    Prints one JSON report: messages/s, and the CPU time per message of the client and of its
    server backend (less sensitive to the machine's load than the rate).

    \b
    Example:
      pyrecall bench ingest --messages 100000 --sessions 100
      pyrecall bench ingest --messages 20000 --sessions 2000 --words 30
      pyrecall bench ingest --messages 20000 --sessions 50 --per-transaction 50
    """
    from . import ingest

    click.echo(json.dumps(ingest.run(n_messages, n_sessions, words, per_transaction=per_transaction,
                                     dsn=dsn), indent=2))


@bench.command("mcp")
@click.option("--chunks", "n_chunks", type=click.IntRange(10), default=100_000, show_default=True,
              help="Chunks in the database.")
@click.option("--agents", "n_agents", type=click.IntRange(1), default=1, show_default=True,
              help="Agents (Zipf sizes); the server acts for the largest.")
@click.option("--calls", type=click.IntRange(1), default=100, show_default=True,
              help="recall calls timed (after --warmup calls that are not).")
@click.option("--warmup", type=click.IntRange(1), default=10, show_default=True)
@click.option("-k", "--k", "k", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--budget", "token_budget", type=click.IntRange(0), default=None, metavar="TOKENS",
              help="token_budget of each call [default: none].")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--centres", type=click.Choice(["random", "model"]), default="random", show_default=True,
              help="Topic centres of the stored vectors: random (every query is far from the agent's "
                   "chunks and takes the vector arm's far pass) or the model's embeddings of each "
                   "topic's words (queries near their topic, as real questions are).")
@click.option("--tool", type=click.Choice(["recall", "context"]), default="recall", show_default=True,
              help="The tool called: recall (the query, k, --budget) or context (the query as the "
                   "task of the session-start context, recall.auto_context; --budget or 4000).")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Server to create a throwaway database on (default: a throwaway embedded "
                   "server in a temporary directory).")
@_handle_errors
def mcp_cmd(n_chunks, n_agents, calls, warmup, k, token_budget, seed, centres, tool, dsn):
    """Latency of the MCP server's recall (or context) tool, seen from a connected client.

    Builds a throwaway database as `bench latency` does, starts `pyrecall mcp` for the largest
    agent, connects the MCP SDK's client over stdio and times --calls calls of --tool (each:
    the round trip, the query embedded by the local model, recall.hybrid_recall, or
    recall.auto_context for context). Then times the parts in-process: the embedding, the
    function bound as the server is (row-level security) and unbound. Prints one JSON report:
    p50/p95/p99 in ms, connect and first-call times, and how far the queries are from the
    agent's chunks (the share beyond ann_far_distance).

    \b
    Example:
      pyrecall bench mcp --chunks 100000 --calls 100
      pyrecall bench mcp --chunks 100000 --calls 100 --centres model
      pyrecall bench mcp --chunks 20000 --agents 20 --budget 2000
      pyrecall bench mcp --chunks 100000 --tool context --centres model
    """
    import time

    from . import mcp_latency

    t = time.perf_counter()
    report = mcp_latency.run(n_chunks, n_agents, calls=calls, warmup=warmup, k=k,
                             token_budget=token_budget, seed=seed, dsn=dsn, centres=centres, tool=tool,
                             log=lambda m: click.echo(f"[{time.perf_counter() - t:7.1f} s] {m}", err=True))
    click.echo(json.dumps(report, indent=2))


@bench.command("vector-index")
@click.option("--chunks", type=click.IntRange(1000), default=100_000, show_default=True,
              help="Synthetic chunks (384 dimensions, clustered) loaded by COPY.")
@click.option("--method", default="auto", show_default=True, help="auto | hnsw | diskann | none.")
@click.option("--options", default="{}", show_default=True, metavar="JSON",
              help='Options of recall.create_vector_index, e.g. \'{"m": 8, "ef_construction": 32}\'.')
@click.option("--scope", type=click.Choice(["agents", "table", "both"]), default="agents", show_default=True)
@click.option("--keep-index", is_flag=True, help="Keep the indexes there (refresh only).")
@click.option("--fractions", default="0.0001,0.01,0.1,0.5", show_default=True,
              help="Agents measured, as shares of the table.")
@click.option("--queries", type=click.IntRange(1), default=50, show_default=True)
@click.option("--keep", is_flag=True, help="Reuse the loaded database if it exists.")
@click.option("--db", default="pyrecall_bench_index", show_default=True, help="Name of the benchmark database.")
@click.option("--embedding-storage", type=click.Choice(["main", "external"]), default=None,
              help="ALTER COLUMN embedding SET STORAGE ... before loading.")
@click.option("--env", "from_env", is_flag=True,
              help="Take CHUNKS, INDEX, SCOPE, M, EF_CONSTRUCTION, ... and PYRECALL_ADMIN_DSN from the "
                   "environment (make bench-index).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--dsn", envvar="PYRECALL_BENCH_DSN", default=None,
              help="Admin URL of a server (the role needs CREATEDB; default: a throwaway embedded server).")
@_handle_errors
def vector_index_cmd(chunks, method, options, scope, keep_index, fractions, queries, keep, db,
                     embedding_storage, from_env, as_json, dsn):
    """Vector index build time, size, filtered recall@10 and latency per agent size (the
    measurements of docs/DBA.md), on a synthetic table loaded straight into recall.chunks.

    \b
    Example:
      pyrecall bench vector-index --chunks 100000 --method hnsw
      pyrecall bench vector-index --chunks 200000 --options '{"m": 8}' --json
    """
    from types import SimpleNamespace

    from . import index_build

    try:
        json.loads(options)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--options") from None
    args = SimpleNamespace(chunks=chunks, method=method, options=options, scope=scope,
                           keep_index=keep_index, fractions=fractions, queries=queries, dsn=dsn,
                           keep=keep, db=db, embedding_storage=embedding_storage, env=from_env)
    report = index_build.main(args)
    if as_json:
        click.echo(json.dumps(report, indent=2))
