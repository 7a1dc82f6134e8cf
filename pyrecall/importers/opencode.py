"""OpenCode sessions: the SQLite database ``~/.local/share/opencode/opencode.db``.

One file holds every session (table ``session``: its folder, title, times, the session it was
spawned from), their messages (``message``: who spoke, the model) and each message's parts
(``part``, JSON ``data``): ``text`` (the user's input, or the answer), ``reasoning`` (thinking),
``tool`` (a call: the tool, its input and, in ``state``, its output or error); the other parts
(``step-start``, ``step-finish``, ``snapshot``, ``patch``, ``file``, ...) hold no words and are left
out, as is text OpenCode adds itself (``synthetic``). A part's id is its message's id in memory,
so the database read again stores only what is new. The database is opened read-only (OpenCode
may be writing it: SQLite lets a reader see what was committed); what OpenCode still holds in its
write-ahead log (``opencode.db-wal``) is read too, but `pyrecall sync` notices a change by the
main file's size and time, which move when the log is written back (when OpenCode exits, or
every thousand pages).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from ._read import checked, clean_text, clean_value, parse_time, render_call, text_or_none
from ._records import Message, ParseResult, Problem, Session

FORMAT = "opencode"
SOURCE_AGENT = "opencode"
FILE_NAME = "opencode.db"
MAGIC = b"SQLite format 3\x00"
TABLES = {"session", "message", "part"}
SIDECARS = ("opencode.db-wal", "opencode.db-shm")   # SQLite's files beside it, read with it
SILENT = ("step-start", "step-finish", "snapshot", "patch", "file", "agent", "subtask", "compaction", "retry")


def is_database(path: str | os.PathLike, head: bytes) -> bool:
    """Whether a file is OpenCode's database: an SQLite file (its first bytes) of that name."""
    return head.startswith(MAGIC) and Path(path).name == FILE_NAME


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Every session of an OpenCode database (read whole, whatever ``start_offset``).

    >>> result = parse("tests/fixtures/importers/opencode/opencode.db")
    >>> [(m.role, m.kind) for m in result.sessions[0].messages]
    [('user', 'text'), ('assistant', 'text'), ('assistant', 'tool_call'), ('tool', 'tool_result'), ('assistant', 'text')]
    """
    path = checked(path)
    problems: list[Problem] = []
    size = path.stat().st_size
    try:
        db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return ParseResult([], [Problem(str(path), None, f"cannot open the database ({exc})")], FORMAT, size)
    try:
        have = {r[0] for r in db.execute("select name from sqlite_master where type = 'table'")}
        if not TABLES <= have:
            problems.append(Problem(str(path), None, f"not OpenCode's database: no {', '.join(sorted(TABLES - have))} table"))
            return ParseResult([], problems, FORMAT, size)
        sessions = _sessions(db, str(path), problems)
    except sqlite3.Error as exc:            # a damaged file, a schema of another version
        problems.append(Problem(str(path), None, f"database not read whole ({exc})"))
        sessions = []
    finally:
        db.close()
    return ParseResult([s for s in sessions if s.messages], problems, FORMAT, size)


def _sessions(db: sqlite3.Connection, path: str, problems: list[Problem]) -> list[Session]:
    cols = {r[1] for r in db.execute("pragma table_info(session)")}
    parent = "parent_id" if "parent_id" in cols else "null"
    sessions: dict[str, Session] = {}
    for sid, directory, title, created, updated, parent_id in db.execute(
            f"select id, directory, title, time_created, time_updated, {parent} from session order by time_created, id"):
        s = Session(str(sid), title=text_or_none(title), project=text_or_none(directory),
                    metadata={"source_agent": SOURCE_AGENT})
        s.started_at, s.ended_at = parse_time(created)[0], parse_time(updated)[0]
        if parent_id:
            s.metadata["parent_session"] = str(parent_id)
        sessions[s.session_id] = s
    roles: dict[str, tuple[str, dict]] = {}
    for mid, sid, data in db.execute("select id, session_id, data from message order by time_created, id"):
        info = _json(data, path, problems, f"message {mid}")
        model = info.get("modelID")
        if model is None and isinstance(info.get("model"), dict):
            model = info["model"].get("modelID")
        roles[str(mid)] = (info.get("role") if isinstance(info.get("role"), str) else "?", {"sid": str(sid), "model": model})
    for pid, mid, created, data in db.execute(
            "select p.id, p.message_id, p.time_created, p.data from part p "
            "join message m on m.id = p.message_id order by m.time_created, m.id, p.time_created, p.id"):
        role, info = roles.get(str(mid), ("?", {}))
        s = sessions.get(info.get("sid"))
        if s is None:
            continue
        if info.get("model") and role == "assistant":
            s.metadata.setdefault("model", info["model"])
        part = _json(data, path, problems, f"part {pid}")
        s.messages += _messages(str(pid), role, part, parse_time(created)[0], path, problems)
    return list(sessions.values())


def _messages(pid: str, role: str, part: dict, created, path: str, problems: list[Problem]) -> list[Message]:
    kind = part.get("type")
    if kind in SILENT or part.get("synthetic") is True or part.get("ignored") is True:
        return []
    if role not in ("user", "assistant"):
        problems.append(Problem(path, None, f"part {pid}: a message of unknown role {role!r:.40}"))
        return []
    if kind == "text" and isinstance(part.get("text"), str):
        return _one(pid, role, "text", part["text"], created)
    if kind == "reasoning" and isinstance(part.get("text"), str):
        return _one(pid, "assistant", "thinking", part["text"], created)
    if kind == "tool" and isinstance(part.get("tool"), str):
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        meta = {"tool_name": part["tool"], **({"tool_use_id": str(part["callID"])} if part.get("callID") else {})}
        out = _one(pid, "assistant", "tool_call", render_call(part["tool"], state.get("input")), created, meta)
        failed = state.get("status") == "error"
        result = state.get("error") if failed else state.get("output")
        if isinstance(result, str):
            out += _one(f"{pid}#result", "tool", "tool_result", result, created, {**meta, "is_error": failed})
        return out
    problems.append(Problem(path, None, f"part {pid}: unknown part type {kind!r:.40}"))
    return []


def _one(pid: str, role: str, kind: str, text: str, created, meta: dict | None = None) -> list[Message]:
    text = clean_text(text).strip()
    return [Message(pid, role, kind, text, created, None, clean_value(meta or {}))] if text else []


def _json(data: Any, path: str, problems: list[Problem], what: str) -> dict:
    try:
        value = json.loads(data) if isinstance(data, str | bytes) else None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        problems.append(Problem(path, None, f"{what}: data is not a JSON object"))
        return {}
    return value
