"""Where to set the bar of "a similar memory exists" (recall.similar_memories, shown by
remember): the local model's cosine similarity (all-MiniLM-L6-v2, as the memories are embedded)
between a memory and
  - the same fact said again in other words (should be shown: one of them is redundant),
  - an update of it (the same subject, a new value: should be shown, it likely supersedes it),
  - another fact of the same project (should not: both are worth keeping).
Written by hand, 20 of each, of a coding agent's memories (preferences, decisions, facts).

    python similar_memories_lab.py > similar_memories_lab.txt
"""

from __future__ import annotations

import numpy as np

from pyrecall._embed import get_embedder

# (memory, the same in other words, an update of it, another fact of the same project)
CASES = [
    ("The user prefers tabs for indentation.", "Indent with tabs, the user likes them.",
     "The user now prefers four spaces for indentation.", "The user wants commit messages in English."),
    ("Deploys to production go out on Tuesdays.", "We ship to prod every Tuesday.",
     "Production deploys moved to Thursdays.", "The staging host is staging-1.internal."),
    ("The API uses PostgreSQL 16.", "Our API's database is Postgres 16.",
     "The API was upgraded to PostgreSQL 18.", "The API is written in FastAPI."),
    ("Run the test suite with pytest -x -q.", "Tests: pytest -x -q is how we run them.",
     "Run the tests with pytest -n auto now.", "Lint with ruff before committing."),
    ("The user's name is Dana.", "The person I work with is called Dana.",
     "The user goes by Dan now, not Dana.", "The user works in Berlin time."),
    ("Answer in British English.", "Use British spelling in replies.",
     "Answer in American English from now on.", "Keep answers short."),
    ("The CI runs on GitHub Actions.", "Our continuous integration is GitHub Actions.",
     "CI moved from GitHub Actions to GitLab CI.", "Releases are tagged vX.Y.Z."),
    ("Docker images are based on python:3.12-slim.", "We build images from python:3.12-slim.",
     "Base images are now python:3.13-slim.", "Images are pushed to ghcr.io/acme."),
    ("The frontend uses React 18.", "React 18 is the UI framework.",
     "The frontend was migrated to Svelte.", "The frontend is served by nginx."),
    ("Secrets come from the environment, never from files.", "Read secrets from env vars only.",
     "Secrets now come from Vault.", "Config lives in config.toml."),
    ("The user prefers pnpm over npm.", "Use pnpm, not npm, for this user.",
     "The user switched to bun instead of pnpm.", "Node version is 20 LTS."),
    ("Logs are shipped to Loki.", "We send our logs to Grafana Loki.",
     "Logs go to Datadog now instead of Loki.", "Metrics are scraped by Prometheus."),
    ("The main branch is protected; changes go through pull requests.",
     "No direct pushes to main: always open a PR.", "Small fixes may be pushed to main directly now.",
     "Pull requests need one approval."),
    ("Timestamps are stored in UTC.", "All times in the database are UTC.",
     "Timestamps are stored in local time for the billing tables.", "Dates are shown as YYYY-MM-DD."),
    ("The cache TTL is 5 minutes.", "Cached entries expire after five minutes.",
     "The cache TTL was raised to 30 minutes.", "The cache is Redis 7."),
    ("Use SQLAlchemy 2.0 style queries.", "Write queries in the SQLAlchemy 2 style.",
     "We dropped SQLAlchemy for raw psycopg queries.", "Migrations are managed by Alembic."),
    ("The user dislikes emojis in answers.", "No emojis in replies for this user.",
     "The user is fine with emojis now.", "The user likes code examples."),
    ("Feature flags are managed in LaunchDarkly.", "We use LaunchDarkly for feature flags.",
     "Feature flags moved to Unleash.", "Experiments run for two weeks."),
    ("The service listens on port 8080.", "Port 8080 is where the service listens.",
     "The service listens on port 9000 since the rewrite.", "Health checks hit /healthz."),
    ("Payments are processed by Stripe.", "Stripe handles our payments.",
     "Payments moved from Stripe to Adyen.", "Invoices are emailed monthly."),
]


def main() -> None:
    embed = get_embedder(None)
    texts = [t for case in CASES for t in case]
    vecs = np.asarray(embed.embed(texts), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    sims = {"same, other words": [], "update": [], "other fact": []}
    for i in range(len(CASES)):
        m, same, upd, other = vecs[4 * i:4 * i + 4]
        sims["same, other words"].append(float(m @ same))
        sims["update"].append(float(m @ upd))
        sims["other fact"].append(float(m @ other))
    print(f"model {embed.model}; {len(CASES)} memories, each against one of each kind")
    for k, v in sims.items():
        print(f"{k:18s} min {min(v):.3f}  median {np.median(v):.3f}  max {max(v):.3f}")
    print("\nbar: shown for same / update / other fact")
    for bar in (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8):
        shown = {k: sum(s >= bar for s in v) / len(v) for k, v in sims.items()}
        print(f"{bar:.2f}: {shown['same, other words']:.2f} / {shown['update']:.2f} / {shown['other fact']:.2f}")


if __name__ == "__main__":
    main()
