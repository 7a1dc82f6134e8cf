"""Checks of the SQL in ``sql/`` (``make lint``; also run by the tests).

1. Every file splits into statements and each parses with sqlglot's postgres dialect where
   sqlglot can (statements it does not model, like ``create policy``, are accepted as commands).
2. A run-once migration contains no destructive statement (drop, truncate, delete, alter ...
   drop) unless the file carries the marker ``-- pyrecall: destructive``.
3. Released things are frozen: ``sql/frozen.txt`` pins the SHA-256 of each released migration
   file, of each file of ``sql/released/`` (``v1.sql``, ..., ``shared.sql``) and of each released
   function version (``recall.hybrid_recall_v1``, ...).
4. A released version's whole call chain is frozen with it: every ``recall.*`` function a
   function of ``sql/released/vN.sql`` calls (directly or through the functions it calls) is
   defined in that file, in an older release, in ``shared.sql``, or named in
   ``sql/released/shared.txt`` with the reason it may live outside (e.g. a contract that tests
   hold, like the vector arm's exact top n).

5. A run-once migration not released yet (not pinned) also runs on a Citus cluster (``pyrecall
   migrate`` on a distributed coordinator, docs/SCALING.md): an ``ADD COLUMN`` with an unnamed
   constraint (``check``, ``references``, ``unique``, ``primary key``) and a ``select from``
   with no select list (``exists (select from recall.messages)`` over every shard) are refused
   there: the first needs ``constraint <name>``, the second ``select 1 from``. In an ``ON
   CONFLICT ... DO UPDATE`` (recall.config is a reference table there) a function that is not
   immutable (``jsonb_build_array``, ``now()``, ...) is refused, and a simple ``CASE x WHEN``
   reached the workers as ``text = boolean``: write ``'[]'::jsonb || x`` and ``CASE WHEN x = ...``.

sqlglot only reads here: the SQL that runs is always the original text.

    python -m pyrecall._sqlcheck            # check, exit 1 on a problem
    python -m pyrecall._sqlcheck --freeze   # pin what is released now (new entries only)
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot.errors import ParseError
from sqlglot.tokens import TokenType

from ._migrate import sql_dir

DESTRUCTIVE_MARKER = "-- pyrecall: destructive"
VERSIONED_FUNCTION = re.compile(
    r"create\s+(?:or\s+replace\s+)?function\s+(recall\.\w+_v\d+)\s*\(", re.IGNORECASE)
ANY_FUNCTION = re.compile(r"create\s+(?:or\s+replace\s+)?function\s+recall\.(\w+)\s*\(", re.IGNORECASE)
CALL = re.compile(r"\brecall\.(\w+)\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class Statement:
    text: str
    line: int


def split(sql: str) -> list[Statement]:
    """The statements of a SQL text, as original text (comments before each dropped).

    sqlglot's tokenizer knows dollar quotes, strings and comments, so a ``;`` inside a
    function body does not split it.
    """
    tokens = sqlglot.tokenize(sql, read="postgres")
    out, current = [], []
    for tok in tokens + [None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            if current:
                start, end = current[0].start, current[-1].end + 1
                out.append(Statement(sql[start:end], sql.count("\n", 0, start) + 1))
            current = []
        else:
            current.append(tok)
    return out


def _words(text: str) -> list[str]:
    return [t.text.lower() for t in sqlglot.tokenize(text, read="postgres")]


def is_destructive(stmt: Statement) -> bool:
    words = _words(stmt.text)
    if not words:
        return False
    if words[0] in {"drop", "truncate", "delete"}:
        return True
    return words[0] == "alter" and "drop" in words


INLINE_CONSTRAINT = {"check", "references", "unique", "primary"}


# functions PostgreSQL marks stable or volatile that a migration's upsert may reach for
NOT_IMMUTABLE = {"jsonb_build_array", "jsonb_build_object", "json_build_array", "json_build_object",
                 "to_jsonb", "to_json", "now", "current_timestamp", "clock_timestamp", "random",
                 "to_char", "format", "current_setting"}


def citus_problems(stmt: Statement) -> list[str]:
    """What Citus refuses in a migration's statement on a distributed table (rule 5)."""
    tokens = sqlglot.tokenize(stmt.text, read="postgres")
    words = [t.text.lower() for t in tokens]
    problems = []
    if words[:2] == ["alter", "table"]:
        parts: list[list[str]] = [[]]
        depth = 0
        for t, w in zip(tokens, words, strict=True):
            if t.token_type == TokenType.L_PAREN:
                depth += 1
            elif t.token_type == TokenType.R_PAREN:
                depth -= 1
            elif depth == 0 and t.token_type == TokenType.COMMA:
                parts.append([])
                continue
            parts[-1].append(w)
        for part in parts:
            if "add" not in part:
                continue
            rest = part[part.index("add") + 1:]
            is_column = bool(rest) and (rest[0] == "column" or rest[0] not in
                                        {"constraint", "check", "unique", "primary", "foreign", "exclude"})
            if is_column and INLINE_CONSTRAINT & set(rest) and "constraint" not in rest:
                problems.append("Citus refuses an unnamed constraint in ADD COLUMN on a distributed "
                                "table: name it (constraint <table>_<column>_check, the name PostgreSQL gives)")
    if any(a == "select" and b == "from" for a, b in zip(words, words[1:], strict=False)):
        problems.append("Citus cannot plan `select from` with no select list over the shards "
                        "(\"a column definition list is required\"): write `select 1 from`")
    if "conflict" in words and "do" in words:
        upsert = words[words.index("conflict"):]
        stable = sorted(NOT_IMMUTABLE & set(upsert))
        if stable:
            problems.append(f"Citus refuses a function that is not immutable ({', '.join(stable)}) in "
                            "ON CONFLICT DO UPDATE on a distributed or reference table: "
                            "e.g. '[]'::jsonb || x for jsonb_build_array(x)")
        if any(a == "case" and b != "when" for a, b in zip(upsert, upsert[1:], strict=False)):
            problems.append("a simple CASE x WHEN in ON CONFLICT DO UPDATE reached Citus' workers as "
                            "text = boolean: write CASE WHEN x = ...")
    return problems


def check_file(path: Path, *, migration: bool, released: bool = False) -> list[str]:
    """Problems of one file, as ``path:line: message`` strings. ``released``: a pinned
    migration (rule 5 is for the ones not released yet)."""
    text = path.read_text()
    problems = []
    try:
        statements = split(text)
    except Exception as exc:  # noqa: BLE001 - any tokenizer failure is a finding
        return [f"{path}:1: cannot be split into statements: {exc}"]
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    for stmt in statements:
        try:
            sqlglot.parse_one(stmt.text, read="postgres")
        except ParseError as exc:
            problems.append(f"{path}:{stmt.line}: does not parse: {str(exc).splitlines()[0]}")
        if migration and is_destructive(stmt) and DESTRUCTIVE_MARKER not in text:
            first = stmt.text.splitlines()[0]
            problems.append(f"{path}:{stmt.line}: destructive statement without the marker "
                            f"'{DESTRUCTIVE_MARKER}': {first}")
        if migration and not released:
            problems += [f"{path}:{stmt.line}: {p}" for p in citus_problems(stmt)]
    return problems


def frozen_items(root: Path) -> dict[str, str]:
    """Current hashes of everything that can be frozen: migration files and _vN functions."""
    items = {}
    for f in sorted((root / "incremental").glob("*.sql")):
        items[f"incremental/{f.name}"] = hashlib.sha256(f.read_bytes()).hexdigest()
    for f in _released_files(root):
        items[f"released/{f.name}"] = hashlib.sha256(f.read_bytes()).hexdigest()
    for f in [*sorted((root / "idempotent").glob("*.sql")), *_released_files(root)]:
        for stmt in split(f.read_text()):
            m = VERSIONED_FUNCTION.match(stmt.text)
            if m:
                items[f"function {m.group(1).lower()}"] = hashlib.sha256(stmt.text.encode()).hexdigest()
    return items


def read_frozen(root: Path) -> dict[str, str]:
    path = root / "frozen.txt"
    pins = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, digest = line.rsplit(" ", 1)
                pins[name] = digest
    return pins


def check_frozen(root: Path) -> list[str]:
    current, pins = frozen_items(root), read_frozen(root)
    problems = []
    for name, digest in pins.items():
        if name not in current:
            problems.append(f"{root}/frozen.txt: released {name} is gone")
        elif current[name] != digest:
            problems.append(f"{root}/frozen.txt: released {name} changed "
                            f"(pinned {digest[:12]}, now {current[name][:12]}); add a new version instead")
    return problems


def _released_files(root: Path) -> list[Path]:
    """shared.sql, then v1.sql, v2.sql, ... in release order."""
    def key(p: Path):
        return (0, 0) if p.stem == "shared" else (1, int(p.stem[1:]) if p.stem[1:].isdigit() else 10**6)
    folder = root / "released"
    return sorted(folder.glob("*.sql"), key=key) if folder.is_dir() else []


def _definitions(path: Path) -> dict[str, str]:
    """name -> the text of its CREATE FUNCTION statement(s) (lower-case names, recall schema)."""
    out: dict[str, str] = {}
    for stmt in split(path.read_text()):
        m = ANY_FUNCTION.match(stmt.text)
        if m:
            out[m.group(1).lower()] = out.get(m.group(1).lower(), "") + stmt.text
    return out


def _calls(text: str) -> set[str]:
    body = "\n".join(line.split("--", 1)[0] for line in text.splitlines())  # comments aside
    return {m.group(1).lower() for m in CALL.finditer(body)}


def read_shared_list(root: Path) -> dict[str, str]:
    """sql/released/shared.txt: ``name  reason`` per line, # comments."""
    path = root / "released" / "shared.txt"
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                name, _, reason = line.strip().partition(" ")
                out[name.removeprefix("recall.").lower()] = reason.strip()
    return out


def check_call_chains(root: Path) -> list[str]:
    """Every function a released version reaches is frozen with it (rule 4)."""
    files = _released_files(root)
    shared_list = read_shared_list(root)
    problems = [f"{root}/released/shared.txt: {name} has no reason" for name, why in shared_list.items()
                if not why]
    defs = {f.stem: _definitions(f) for f in files}
    shared = defs.get("shared", {})
    older: dict[str, str] = {}  # name -> release file stem, for the releases seen so far
    for f in files:
        mine = defs[f.stem]
        allowed = {**{n: "shared" for n in shared}, **older, **{n: f.stem for n in mine}}
        for name, text in mine.items():
            seen, todo = set(), [(name, text)]
            while todo:
                caller, body = todo.pop()
                for callee in sorted(_calls(body) - {caller}):
                    if callee in seen:
                        continue
                    seen.add(callee)
                    if callee in shared_list:
                        continue
                    if callee not in allowed:
                        problems.append(f"{f}: recall.{name} reaches recall.{callee} (from recall.{caller}), "
                                        "which is neither in this release, an older one, shared.sql nor "
                                        "sql/released/shared.txt")
                        continue
                    where = allowed[callee]
                    todo.append((callee, defs[where][callee]))
        if f.stem != "shared":
            older.update({n: f.stem for n in mine})
    return problems


def check(root: Path | None = None) -> list[str]:
    root = root or sql_dir()
    problems = []
    pinned = read_frozen(root)
    for f in sorted(root.rglob("*.sql")):
        problems += check_file(f, migration=f.parent.name == "incremental",
                               released=f"incremental/{f.name}" in pinned)
    return problems + check_frozen(root) + check_call_chains(root)


def freeze(root: Path | None = None) -> list[str]:
    """Pin every item not pinned yet; returns the names added."""
    root = root or sql_dir()
    pins, current = read_frozen(root), frozen_items(root)
    added = [n for n in current if n not in pins]
    pins.update({n: current[n] for n in added})
    header = "# Released SQL, pinned by SHA-256: never edit these; add a new version instead.\n"
    (root / "frozen.txt").write_text(header + "".join(f"{n} {d}\n" for n, d in sorted(pins.items())))
    return added


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--freeze"]:
        for name in freeze():
            print(f"pinned {name}")
        return 0
    problems = check()
    for p in problems:
        print(p)
    print(f"sql check: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
