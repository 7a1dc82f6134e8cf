"""OpenAI-style chat JSON: a list of ``{role, content}`` messages, an object
``{"messages": [...], "id"?, "session_id"?, "title"?, "created_at"?, "agent_id"?}``, or a list
of such objects (one session each).

``content`` is text or a list of parts (``{"type": "text", "text": ...}``); assistant
``tool_calls`` (and the older ``function_call``) become tool_call messages, ``tool`` and
``function`` messages tool results. Tool call ids go to ``metadata.tool_use_id``, the key
Claude Code transcripts use, so that calls and results pair the same way in every format.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ._read import (
    JsonDoc,
    checked,
    clean_text,
    clean_value,
    derived_session_id,
    id_or_none,
    parse_time,
    read_document,
    render_call,
    span,
    text_or_none,
)
from ._records import Message, ParseResult, Problem, Session

FORMAT = "openai_chat"
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system",
         "tool": "tool", "function": "tool"}
TEXT_PARTS = ("text", "input_text", "output_text")


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse an OpenAI-style chat JSON file.

    A JSON document cannot be resumed in the middle, so the whole file is read whatever
    ``start_offset`` is (re-importing a message is a no-op downstream); ``end_offset`` is the
    file size. Messages without an ``id`` get their index in the list as external id.

    >>> result = parse("tests/fixtures/importers/openai_chat.json")
    >>> result.sessions[0].title
    'Nightly backup job fails on S3 upload'
    """
    path = checked(path)
    doc, problems, size = read_document(path, depth=3)
    root = doc.value
    if isinstance(root, list) and root and isinstance(root[0], dict) and "messages" in root[0]:
        convs = root
        sids = [f"{derived_session_id(path)}-{i}" for i in range(len(convs))]
    elif isinstance(root, list):
        convs, sids = [{"messages": root}], [derived_session_id(path)]
    elif isinstance(root, dict) and isinstance(root.get("messages"), list):
        convs, sids = [root], [derived_session_id(path)]
    else:
        if root is not None:
            problems.append(Problem(str(path), 1, "not a chat: no list of messages"))
        return ParseResult([], problems, FORMAT, size)

    sessions = []
    for conv, default_sid in zip(convs, sids, strict=True):
        if not isinstance(conv, dict) or not isinstance(conv.get("messages"), list):
            problems.append(Problem(str(path), doc.line(conv), "conversation without messages"))
            continue
        session = _session(conv, default_sid, doc, str(path), problems)
        if session.messages:
            sessions.append(session)
    return ParseResult(sessions, problems, FORMAT, size)


def _session(conv: dict, default_sid: str, doc: JsonDoc, path: str,
             problems: list[Problem]) -> Session:
    sid = id_or_none(conv.get("session_id")) or id_or_none(conv.get("id")) or default_sid
    session = Session(sid, agent_id=text_or_none(conv.get("agent_id")),
                      title=text_or_none(conv.get("title")))
    if isinstance(conv.get("metadata"), dict):
        session.metadata = clean_value(conv["metadata"])
    started, _ = parse_time(conv.get("created_at"))
    for i, m in enumerate(conv["messages"]):
        line = doc.line(m)
        if not isinstance(m, dict):
            problems.append(Problem(path, line, f"messages[{i}]: not an object"))
            continue
        if not doc.complete(m):
            continue  # cut off by the damage the document error reports
        before = len(problems)
        try:
            out = _messages(m, i, line, path, problems)
        except RecursionError:
            problems.append(Problem(path, line, f"messages[{i}]: nested too deeply"))
            continue
        if not out and len(problems) == before:
            problems.append(Problem(path, line, f"messages[{i}]: empty content"))
        session.messages.extend(out)
    first, last = span([m.created_at for m in session.messages])
    session.started_at = started or first
    session.ended_at = last
    return session


def _messages(m: dict, i: int, line: int | None, path: str,
              problems: list[Problem]) -> list[Message]:
    role = ROLES.get(m.get("role")) if isinstance(m.get("role"), str) else None
    if role is None:
        problems.append(Problem(path, line, f"messages[{i}]: unknown role {m.get('role')!r:.40}"))
        return []
    created, ok = parse_time(next(
        (m[k] for k in ("created_at", "timestamp", "create_time") if k in m), None))
    if not ok:
        problems.append(Problem(path, line, f"messages[{i}]: invalid timestamp"))
    base = id_or_none(m.get("id")) or str(i)
    parts: list[tuple[str, str, dict]] = []  # (kind, content, metadata)

    text = _content_text(m.get("content"), i, line, path, problems)
    if role == "tool":
        meta = {"tool_use_id": m.get("tool_call_id"), "tool_name": m.get("name")}
        parts.append(("tool_result", text, {k: v for k, v in meta.items() if v is not None}))
    else:
        meta = {"name": m["name"]} if isinstance(m.get("name"), str) else {}
        parts.append(("text", text, meta))
    calls = m.get("tool_calls") if role == "assistant" else None
    if isinstance(m.get("function_call"), dict) and role == "assistant":
        calls = [{"function": m["function_call"]}, *(calls if isinstance(calls, list) else [])]
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            problems.append(Problem(path, line, f"messages[{i}]: tool call without a function name"))
            continue
        parts.append(("tool_call", render_call(fn["name"], _arguments(fn.get("arguments"))),
                      {"tool_use_id": call.get("id"), "tool_name": fn["name"]}))

    out = []
    many = len(parts) > 1
    for j, (kind, content, meta) in enumerate(parts):
        content = clean_text(content)
        if content.strip():
            out.append(Message(f"{base}#{j}" if many else base, role, kind, content,
                               created, None, clean_value(meta)))
    return out


def _content_text(content: Any, i: int, line: int | None, path: str,
                  problems: list[Problem]) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        problems.append(Problem(path, line, f"messages[{i}]: content is neither text nor a list"))
        return ""
    texts = []
    for part in content:
        ptype = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            texts.append(part)
        elif ptype in TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif ptype in ("image_url", "input_image", "image"):
            pass  # images are not imported
        else:
            problems.append(Problem(path, line, f"messages[{i}]: unknown part type {ptype!r:.40}"))
    return "\n".join(texts)


def _arguments(arguments: Any) -> Any:
    """Function arguments, sent by OpenAI as a JSON string, decoded when they are JSON."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments
