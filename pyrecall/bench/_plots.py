"""PNG plots of benchmark reports (matplotlib, from the ``bench`` extra)."""

from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def locomo_by_category(report: dict, path: str | Path, *, metric: str = "recall@10") -> Path:
    """Grouped bars: ``metric`` of each method, overall and per question category."""
    from .locomo import CATEGORIES

    plt = _plt()
    methods = list(report["methods"])
    first = report["methods"][methods[0]]
    groups = ["all"] + list(first["by_category"])
    labels = ["all"] + [f"{c} {CATEGORIES.get(int(c), c)}\n(n={first['by_category'][c]['n']})"
                        for c in first["by_category"]]
    width = 0.8 / len(methods)
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120)
    for i, name in enumerate(methods):
        r = report["methods"][name]
        values = [r[metric]] + [r["by_category"][c][metric] for c in groups[1:]]
        xs = [g + (i - (len(methods) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, values, width, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    ax.set_xticks(range(len(groups)), labels)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel(f"evidence {metric}")
    ax.set_title(f"LoCoMo evidence {metric} by method and category "
                 f"({report['n_questions']} questions, {report.get('model', '')})")
    ax.legend(loc="upper center", ncols=len(methods), fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def latency_by_agent_size(report: dict, path: str | Path) -> Path:
    """Bars of p50 latency (whiskers to p95) of each query kind for small/medium/large agents."""
    plt = _plt()
    kinds = [("exact", "(a) exact per-agent"), ("ann", "(b) raw ANN"),
             ("hybrid", "(c) hybrid_recall"), ("session", "(d) session_recall")]
    classes = [c for c in ("small", "medium", "large", "overall") if c in report["latency_ms"]]
    width = 0.8 / len(kinds)
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120)
    for i, (key, label) in enumerate(kinds):
        p50 = [report["latency_ms"][c][key]["p50"] for c in classes]
        p95 = [report["latency_ms"][c][key]["p95"] for c in classes]
        xs = [g + (i - (len(kinds) - 1) / 2) * width for g in range(len(classes))]
        bars = ax.bar(xs, p50, width, label=label,
                      yerr=[[0] * len(p50), [b - a for a, b in zip(p50, p95, strict=True)]],
                      capsize=2, error_kw={"alpha": 0.6})
        ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
    sizes = report.get("agent_sizes", {}).get("by_class", {})
    ax.set_xticks(range(len(classes)),
                  [f"{c}\n({sizes[c]} agents)" if c in sizes else c for c in classes])
    ax.set_yscale("log")
    ax.set_ylabel("latency, ms (bar p50, whisker p95; log scale)")
    ax.set_title(f"Query latency by agent size — {report['chunks']:,} chunks, "
                 f"{report['agents']} agents")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)
