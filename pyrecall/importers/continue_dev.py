"""Continue (the VS Code and JetBrains extension) sessions: ``~/.continue/sessions/<session id>.json``.

A session file is one JSON document ``{sessionId, title, workspaceDirectory, history: [...]}``,
each history item ``{message, contextItems, ...}``; a message ``{role, content}`` with role
``user``, ``assistant`` (its ``toolCalls``: OpenAI-style function calls, their outputs in the
item's ``toolCallStates``), ``tool`` (a call's result, ``toolCallId``), ``thinking`` or ``system``,
content a text or a list of parts (``text``, ``imageUrl``). The files and snippets the user attached (``contextItems``) are not the
conversation and are left out; the session's title is Continue's, its project the workspace
folder (a ``file://`` URI there). ``sessions.json`` beside the sessions lists them with the time
each was created, the only time Continue records: the session's start (its messages take it).
The file is rewritten as the session goes on (and cut where the user edits an earlier
message): read whole when it changes, each message identified by what it says (stored once).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ._read import (
    checked,
    clean_text,
    clean_value,
    id_or_none,
    parse_time,
    read_document,
    render_call,
    text_or_none,
)
from ._records import Message, ParseResult, Problem, Session

FORMAT = "continue"
SOURCE_AGENT = "continue"
INDEX = "sessions.json"         # Continue's list of its sessions, beside them
UNTITLED = ("Untitled Session", "New Session")   # Continue's placeholders before it names a session
ROLES = {"user": ("user", "text"), "assistant": ("assistant", "text"), "thinking": ("assistant", "thinking"),
         "system": ("system", "text"), "tool": ("tool", "tool_result")}


def is_session(obj: Any) -> bool:
    """Whether a document is a Continue session (a sessionId and a history list)."""
    return isinstance(obj, dict) and "sessionId" in obj and isinstance(obj.get("history"), list)


def is_index(path: Path) -> bool:
    """Whether a file is Continue's list of sessions (read with them, not on its own)."""
    return path.name == INDEX and path.parent.name == "sessions" and path.parent.parent.name == ".continue"


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse a Continue session file (read whole, whatever ``start_offset``).

    >>> result = parse("tests/fixtures/importers/continue/sessions/4f6a2c1e-8b3d-4e5f-9a0b-1c2d3e4f5a6b.json")
    >>> [(m.role, m.kind) for m in result.sessions[0].messages][:3]
    [('user', 'text'), ('assistant', 'thinking'), ('assistant', 'text')]
    """
    path = checked(path)
    doc, problems, size = read_document(path, depth=2)
    root = doc.value
    if not is_session(root):
        if root is not None:
            problems.append(Problem(str(path), 1, "not a Continue session: no sessionId and history"))
        return ParseResult([], problems, FORMAT, size)
    sid = id_or_none(root.get("sessionId")) or path.stem
    title = text_or_none(root.get("title"))
    session = Session(sid, title=None if title in UNTITLED else title,
                      project=_folder(root.get("workspaceDirectory")), metadata={"source_agent": SOURCE_AGENT})
    for key, name in (("mode", "mode"), ("chatModelTitle", "model")):
        if value := text_or_none(root.get(key)):
            session.metadata[name] = value
    session.started_at = _created(path.parent / INDEX, sid, problems)
    calls: dict[str, str] = {}           # a tool call's id -> its tool, to name its result
    done: set[str] = set()               # the calls whose result is read already
    for i, item in enumerate(root["history"]):
        line = doc.line(item)
        if not isinstance(item, dict) or not isinstance(item.get("message"), dict):
            problems.append(Problem(str(path), line, f"history[{i}]: no message"))
            continue
        if not doc.complete(item):
            continue  # cut off by the damage the document error reports
        try:
            session.messages += _messages(item["message"], i, line, str(path), problems, session.started_at,
                                          calls, done)
            session.messages += _states(item, session.started_at, calls, done)
        except RecursionError:
            problems.append(Problem(str(path), line, f"history[{i}]: nested too deeply"))
    if session.title is None:
        first = next((m.content for m in session.messages if m.role == "user" and m.kind == "text"), None)
        session.title = first.splitlines()[0][:80] if first else None
    return ParseResult([session] if session.messages else [], problems, FORMAT, size)


def _messages(m: dict, i: int, line: int | None, path: str, problems: list[Problem], at,
              calls: dict[str, str], done: set[str]) -> list[Message]:
    role, kind = ROLES.get(m.get("role"), (None, None)) if isinstance(m.get("role"), str) else (None, None)
    if role is None:
        problems.append(Problem(path, line, f"history[{i}]: unknown role {m.get('role')!r:.40}"))
        return []
    meta: dict = {}
    if kind == "tool_result" and (call := id_or_none(m.get("toolCallId"))):
        if call in done:
            return []                      # read from the call's state already
        done.add(call)
        meta = {"tool_use_id": call, **({"tool_name": calls[call]} if call in calls else {})}
    out = [(kind, _text(m.get("content")), meta)]
    for call in m.get("toolCalls") or () if role == "assistant" else ():
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            problems.append(Problem(path, line, f"history[{i}]: tool call without a function name"))
            continue
        args = fn.get("arguments")
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except (ValueError, RecursionError):
            pass
        if call.get("id"):
            calls[str(call["id"])] = fn["name"]
        out.append(("tool_call", render_call(fn["name"], args),
                    {"tool_name": fn["name"], **({"tool_use_id": str(call["id"])} if call.get("id") else {})}))
    messages = []
    for k, content, extra in out:
        content = clean_text(content).strip()
        if content:
            messages.append(Message(None, role, k, content, at, None, clean_value(extra)))
    return messages


def _states(item: dict, at, calls: dict[str, str], done: set[str]) -> list[Message]:
    """The results of an answer's tool calls as Continue keeps them beside it (``toolCallStates``,
    or one ``toolCallState``): each call's output, an errored one marked ``is_error``."""
    states = item.get("toolCallStates")
    states = states if isinstance(states, list) else [item["toolCallState"]] if isinstance(
        item.get("toolCallState"), dict) else []
    out = []
    for st in states:
        call = id_or_none(st.get("toolCallId")) if isinstance(st, dict) else None
        if call is None or call in done or not isinstance(st.get("output"), list):
            continue
        text = clean_text("\n".join(o["content"] for o in st["output"]
                                     if isinstance(o, dict) and isinstance(o.get("content"), str))).strip()
        if not text:
            continue
        done.add(call)
        meta = {"tool_use_id": call, "is_error": st.get("status") == "errored",
                **({"tool_name": calls[call]} if call in calls else {})}
        out.append(Message(None, "tool", "tool_result", text, at, None, meta))
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    return ""


def _folder(value: Any) -> str | None:
    text = text_or_none(value)
    if text and text.startswith("file://"):
        return unquote(urlparse(text).path) or None
    return text


def _created(index: Path, sid: str, problems: list[Problem]):
    """The session's creation time from Continue's sessions.json (milliseconds since 1970, as
    text), None when it is not there."""
    try:
        entries = json.loads(index.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(index), None, f"not read ({type(exc).__name__})"))
        return None
    for e in entries if isinstance(entries, list) else ():
        if isinstance(e, dict) and e.get("sessionId") == sid:
            value = e.get("dateCreated")
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            return parse_time(value)[0]
    return None
