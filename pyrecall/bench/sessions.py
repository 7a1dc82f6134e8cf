"""Realistic Claude Code transcripts, many of them, for indexing benchmarks.

Each session is one JSONL file as Claude Code writes it (one content block per assistant line,
tool results as user lines, a parent chain of uuids): a task on one of a few projects, then
turns of thinking, tool calls (Bash, Read, Grep, Edit, Write) with their output, code, failing
and passing test runs, and answers. About 50 chunks each once imported. Deterministic for a
seed: the same files every time.

    >>> paths = write_sessions("/tmp/sessions", 1000)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

NS = uuid.UUID("0b7c5c1e-7d4a-4b1e-9d8e-4a1f2c3b5d6e")
MODEL = "claude-sonnet-4-5-20250929"
PROJECTS = {
    "acme-api": ("app", ["orders", "auth", "users", "billing", "webhooks"], "FastAPI service"),
    "shop-web": ("src", ["cart", "checkout", "catalog", "search", "session"], "Next.js shop"),
    "data-pipe": ("pipeline", ["ingest", "dedupe", "export", "schedule", "metrics"], "Airflow DAGs"),
    "infra": ("deploy", ["nginx", "postgres", "redis", "backup", "certs"], "Docker/Terraform stack"),
}
TASKS = [
    "add {thing} to the {area} module",
    "fix the flaky test in test_{area}.py",
    "why does {area} time out under load?",
    "refactor {area} to use the repository pattern",
    "migrate the {area} table: add a {thing} column with a backfill",
    "the {area} endpoint returns 500 on empty input, fix it",
    "add retries with backoff to the {area} client",
    "write docs for the {area} configuration",
]
THINGS = ["pagination", "rate limiting", "caching", "an audit log", "soft deletes",
          "idempotency keys", "structured logging", "a health check", "input validation", "metrics"]
ERRORS = [
    ("KeyError: '{field}'", "the payload has no {field} when the client omits it"),
    ("sqlalchemy.exc.IntegrityError: duplicate key value violates unique constraint \"{area}_pkey\"",
     "the backfill inserts before the old row is deleted"),
    ("TimeoutError: {area} did not answer within 5.0 s", "the pool is exhausted: 10 connections, 40 workers"),
    ("AssertionError: assert 404 == 200", "the route is registered after the catch-all"),
    ("ModuleNotFoundError: No module named '{field}'", "the dependency is missing from pyproject"),
    ("psycopg.errors.UndefinedColumn: column \"{field}\" does not exist", "the migration has not run in CI"),
]
FIELDS = ["user_id", "created_at", "amount", "currency", "status", "token", "sku", "region"]
WORDS = ("the a request response handler cache key value retry timeout index query row column "
         "config environment secret token session user order payment client server worker queue "
         "batch limit offset page filter sort field schema migration test fixture mock deploy "
         "build image container volume port log metric alert trace span error warning").split()


def _prose(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    out, i = [], 0
    while i < len(words):
        k = rng.randint(6, 16)
        sentence = " ".join(words[i:i + k])
        out.append(sentence[:1].upper() + sentence[1:] + ".")
        i += k
    return " ".join(out)


def _code(rng: random.Random, area: str, field: str, thing: str) -> str:
    fn = f"{rng.choice(['get', 'load', 'apply', 'check', 'build'])}_{area}_{field}"
    lines = [f'"""{thing.capitalize()} for {area}."""', "", "import logging", "",
             "log = logging.getLogger(__name__)", "", "",
             f"def {fn}(db, {field}, *, limit: int = {rng.choice([10, 50, 100])}):",
             f'    """Return the {area} rows for {field}, at most limit."""',
             f"    if {field} is None:",
             f'        raise ValueError("{field} is required")',
             f"    rows = db.execute(\"select * from {area} where {field} = %s limit %s\", [{field}, limit])",
             f"    log.info(\"{fn}: %d rows\", len(rows))",
             "    return [dict(r) for r in rows]"]
    for _ in range(rng.randint(0, 3)):
        lines += ["", "", f"def _{rng.choice(WORDS)}_{rng.choice(WORDS)}(x):",
                  f"    return x.get({field!r}) or {rng.randint(0, 9)}"]
    return "\n".join(lines) + "\n"


class _Transcript:
    def __init__(self, name: str, start: datetime, cwd: str, branch: str):
        self.name, self.sid, self.t = name, str(uuid.uuid5(NS, name)), start
        self.cwd, self.branch = cwd, branch
        self.lines: list[dict] = []
        self.parent: str | None = None
        self.n = self.turn = self.tools = 0

    def _line(self, kind: str, message: dict, seconds: float, **extra) -> None:
        self.n += 1
        uid = str(uuid.uuid5(NS, f"{self.name}/{self.n}"))
        self.t += timedelta(seconds=seconds)
        self.lines.append({
            "parentUuid": self.parent, "isSidechain": False, "userType": "external",
            "cwd": self.cwd, "sessionId": self.sid, "version": "2.1.9", "gitBranch": self.branch,
            "type": kind, "message": message, "uuid": uid,
            "timestamp": self.t.isoformat(timespec="milliseconds").replace("+00:00", "Z"), **extra})
        self.parent = uid

    def user(self, text: str) -> None:
        self.turn += 1
        self._line("user", {"role": "user", "content": text}, 60)

    def _assistant(self, block: dict, seconds: float) -> None:
        self._line("assistant", {"id": f"msg_{self.sid[:8]}{self.n:04d}", "type": "message",
                                 "role": "assistant", "model": MODEL, "content": [block],
                                 "stop_reason": None, "stop_sequence": None,
                                 "usage": {"input_tokens": 4, "output_tokens": 300}}, seconds)

    def think(self, text: str) -> None:
        self._assistant({"type": "thinking", "thinking": text, "signature": "EuYBCkQIBxgCIkD"}, 6)

    def say(self, text: str) -> None:
        self._assistant({"type": "text", "text": text}, 8)

    def tool(self, name: str, args: dict, result: str, error: bool = False) -> None:
        self.tools += 1
        tid = f"toolu_{self.sid[:8]}{self.tools:04d}"
        self._assistant({"type": "tool_use", "id": tid, "name": name, "input": args}, 4)
        block = {"tool_use_id": tid, "type": "tool_result", "content": result}
        if error:
            block["is_error"] = True
        self._line("user", {"role": "user", "content": [block]}, 3)


def session(i: int, seed: int = 0, turns: int = 7) -> _Transcript:
    """The i-th session of a seeded history."""
    rng = random.Random(f"{seed}/{i}")
    project = rng.choice(sorted(PROJECTS))
    top, areas, what = PROJECTS[project]
    area, thing, field = rng.choice(areas), rng.choice(THINGS), rng.choice(FIELDS)
    start = datetime(2026, 1, 1, 9, tzinfo=UTC) + timedelta(hours=6 * i + rng.randint(0, 5))
    branch = rng.choice(["main", f"feature/{area}-{thing.split()[-1]}", f"fix/{area}"])
    s = _Transcript(f"bench/{seed}/{i}", start, f"/home/dev/{project}", branch)
    s.user(rng.choice(TASKS).format(area=area, thing=thing) + f" ({project}, the {what}). "
           + _prose(rng, rng.randint(10, 40)))
    for turn in range(turns):
        path = f"{s.cwd}/{top}/{area}/{rng.choice(['service', 'models', 'routes', 'client'])}.py"
        s.think(_prose(rng, rng.randint(30, 120)))
        s.tool("Grep", {"pattern": field, "path": top, "output_mode": "content", "-n": True},
               "\n".join(f"{top}/{rng.choice(areas)}/{rng.choice(WORDS)}.py:{rng.randint(1, 300)}:"
                         f"    {field} = {rng.choice(WORDS)}.{rng.choice(WORDS)}"
                         for _ in range(rng.randint(1, 8))))
        s.tool("Read", {"file_path": path},
               "\n".join(f"{n:6d}\t{line}" for n, line in
                         enumerate(_code(rng, area, field, thing).splitlines(), 1)))
        code = _code(rng, area, field, thing)
        s.tool("Write" if turn == 0 else "Edit",
               {"file_path": path, "content": code} if turn == 0 else
               {"file_path": path, "old_string": f"limit: int = {rng.choice([10, 50])}",
                "new_string": f"limit: int = {rng.choice([20, 200])}"},
               f"The file {path} has been updated.")
        failing = rng.random() < 0.4
        if failing:
            error, cause = rng.choice(ERRORS)
            error = error.format(field=field, area=area)
            s.tool("Bash", {"command": f"pytest -q tests/test_{area}.py", "description": "Run the tests"},
                   f"F.{'.' * rng.randint(3, 30)}\n=== FAILURES ===\n___ test_{area}_{field} ___\n"
                   f"    def test_{area}_{field}(db):\n>       assert {area}.{field}(db) == 1\nE   {error}\n"
                   f"1 failed, {rng.randint(5, 80)} passed in {rng.uniform(0.3, 9):.2f}s", error=True)
            s.think(f"The failure: {error}. Cause: {cause.format(field=field, area=area)}. "
                    + _prose(rng, rng.randint(20, 60)))
        else:
            s.tool("Bash", {"command": "pytest -q", "description": "Run the test suite"},
                   f"{'.' * rng.randint(20, 120)}\n{rng.randint(20, 120)} passed in {rng.uniform(0.5, 20):.2f}s")
        s.say(f"Step {turn + 1}: {_prose(rng, rng.randint(15, 60))}\n\n```python\n"
              f"{code[:rng.randint(200, 600)]}\n```")
        if rng.random() < 0.5:
            s.user(_prose(rng, rng.randint(8, 30)))
    s.say(f"Done: {thing} in {area}. " + _prose(rng, rng.randint(20, 50)))
    return s


def write_sessions(out: str | Path, n: int, *, seed: int = 0) -> list[Path]:
    """Write ``n`` sessions as JSONL files under ``out`` (one folder per project)."""
    out = Path(out)
    paths = []
    for i in range(n):
        s = session(i, seed)
        folder = out / s.cwd.strip("/").replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{s.sid}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in s.lines))
        paths.append(path)
    return paths
