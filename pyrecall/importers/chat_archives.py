"""The data exports of the chat apps: ChatGPT's and Claude.ai's ``conversations.json``.

Both are one JSON document, a list of conversations, in the ZIP archive the app e-mails
(Settings → Data controls → Export data; Settings → Privacy → Export data). Each conversation
becomes a session (its id, title, start and last update), each message its messages, keyed by
the message's id so that importing a newer export adds only what is new. The other files of the
archives (``user.json``, ``projects.json``, ``message_feedback.json``, ...) are no transcripts
and are reported as such.

**ChatGPT** (``parse_chatgpt``): a conversation is a tree (``mapping``: node id → {message,
parent, children}; an edited prompt or a regenerated answer is a branch); the branch shown in
the app is the one ending at ``current_node``, and only it is imported. ``text`` and
``multimodal_text`` parts are text (an image part is noted ``[image]``); ``thoughts`` (a
reasoning model's) are thinking; an assistant message addressed to a tool (``recipient``:
``python``, ``web``, ``dalle.text2im``, ...) is a tool call, and a ``tool`` author's message its
result. Hidden system messages, the user's custom instructions (``user_editable_context``),
empty nodes and the "Thought for 5s" recaps are left out.

**Claude.ai** (``parse_claude_ai``): ``chat_messages`` in order, ``sender`` human or assistant;
the ``content`` blocks when present (text, thinking, tool_use → tool call, tool_result), else
``text``; an attachment's extracted text comes after its message as a message of its own
(``[attachment: name]``, metadata ``attachment``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ._read import (
    ArrayItems,
    checked,
    clean_text,
    clean_value,
    id_or_none,
    parse_time,
    read_document,
    render_call,
    span,
    text_or_none,
)
from ._records import Message, ParseResult, Problem, Session

CHATGPT = "chatgpt"
CLAUDE_AI = "claude_ai"


def is_chatgpt(obj: Any) -> bool:
    """A conversation of ChatGPT's export: a tree of messages."""
    return isinstance(obj, dict) and isinstance(obj.get("mapping"), dict)


def is_claude_ai(obj: Any) -> bool:
    """A conversation of Claude.ai's export."""
    return isinstance(obj, dict) and isinstance(obj.get("chat_messages"), list)


def parse_chatgpt(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse ChatGPT's ``conversations.json``. A JSON document is read whole whatever
    ``start_offset`` is (a message imported again is a no-op downstream).

    >>> result = parse_chatgpt("tests/fixtures/importers/chatgpt/conversations.json")
    >>> result.sessions[0].title
    'Postgres connection pool exhausted'
    """
    return _all(stream_chatgpt(path))


def parse_claude_ai(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse Claude.ai's ``conversations.json`` (see :func:`parse_chatgpt`).

    >>> parse_claude_ai("tests/fixtures/importers/claude_ai/conversations.json").sessions[0].title
    'Rate limiting the public API'
    """
    return _all(stream_claude_ai(path))


def stream_chatgpt(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """:func:`parse_chatgpt` one conversation at a time: the sessions come from
    ``session_stream`` as the file is read (:class:`~._read.ArrayItems`), so that an export of
    gigabytes is imported in the memory of a few conversations. What `pyrecall import` uses."""
    return _stream(path, CHATGPT, is_chatgpt, _chatgpt_session)


def stream_claude_ai(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """:func:`parse_claude_ai` one conversation at a time (see :func:`stream_chatgpt`)."""
    return _stream(path, CLAUDE_AI, is_claude_ai, _claude_ai_session)


def _all(result: ParseResult) -> ParseResult:
    if result.session_stream is not None:
        result.sessions, result.session_stream = list(result.session_stream), None
    return result


def _stream(path, fmt: str, fits, make) -> ParseResult:
    path = checked(path)
    problems: list[Problem] = []
    items = ArrayItems(path, problems)
    if not items.streamed:          # one conversation alone, or no list at all: small, read whole
        items.close()
        return _parse(path, fmt, fits, make)
    result = ParseResult([], problems, fmt, items.size)
    result.session_stream = _sessions(items, str(path), fits, make, problems)
    return result


def _sessions(items: ArrayItems, path: str, fits, make, problems: list[Problem]):
    for i, (conv, line) in enumerate(items):
        session = _conversation(conv, i, line, path, fits, make, problems)
        if session is not None:
            yield session


def _conversation(conv, i: int, line: int | None, path: str, fits, make, problems: list[Problem]) -> Session | None:
    """The session of a conversation with messages, else None (a problem said why, or nothing)."""
    if not fits(conv):
        problems.append(Problem(path, line, f"conversations[{i}]: not a conversation of this export"))
        return None
    try:
        session = make(conv, i, path, line, problems)
    except RecursionError:
        problems.append(Problem(path, line, f"conversations[{i}]: nested too deeply"))
        return None
    return session if session is not None and session.messages else None


def _parse(path, fmt: str, fits, make) -> ParseResult:
    """A document read whole (:class:`~._read.JsonDoc`)."""
    doc, problems, size = read_document(path, depth=2)
    root = doc.value
    if fits(root):
        root = [root]   # one conversation alone (a file of the archive's conversations/ folder)
    if not isinstance(root, list):
        if root is not None:
            problems.append(Problem(str(path), 1, "not a list of conversations"))
        return ParseResult([], problems, fmt, size)
    sessions = []
    for i, conv in enumerate(root):
        if not doc.complete(conv):
            continue  # cut off by the damage the document error reports
        session = _conversation(conv, i, doc.line(conv), str(path), fits, make, problems)
        if session is not None:
            sessions.append(session)
    return ParseResult(sessions, problems, fmt, size)


def _finish(session: Session, created: Any, updated: Any) -> Session:
    started, _ = parse_time(created)
    last, _ = parse_time(updated)
    first, latest = span([m.created_at for m in session.messages])
    session.started_at = started or first
    session.ended_at = max((t for t in (last, latest) if t is not None), default=None)
    return session


# ---------------------------------------------------------------- ChatGPT

def _chatgpt_session(conv: dict, i: int, path: str, line: int | None,
                     problems: list[Problem]) -> Session | None:
    sid = id_or_none(conv.get("conversation_id")) or id_or_none(conv.get("id"))
    if sid is None:
        problems.append(Problem(path, line, f"conversations[{i}]: no id"))
        return None
    info = {"source_agent": "chatgpt", "model": text_or_none(conv.get("default_model_slug")),
            "gpt": text_or_none(conv.get("gizmo_id"))}
    session = Session(sid, title=text_or_none(conv.get("title")),
                      metadata={k: v for k, v in info.items() if v is not None})
    for node in _shown_branch(conv["mapping"], conv.get("current_node")):
        message = node.get("message") if isinstance(node, dict) else None
        if isinstance(message, dict):
            session.messages.extend(_chatgpt_messages(message, sid, path, line, problems))
    return _finish(session, conv.get("create_time"), conv.get("update_time"))


def _shown_branch(mapping: dict, current: Any) -> list[dict]:
    """The nodes from the root to ``current_node`` (the branch the app shows), in order; without
    one, from the root down its last children."""
    nodes: list[dict] = []
    seen: set[str] = set()
    key = current if isinstance(current, str) and current in mapping else None
    if key is not None:
        while isinstance(key, str) and key in mapping and key not in seen:
            seen.add(key)
            nodes.append(mapping[key])
            key = mapping[key].get("parent") if isinstance(mapping[key], dict) else None
        return nodes[::-1]
    key = next((k for k, n in mapping.items() if isinstance(n, dict) and n.get("parent") is None), None)
    while isinstance(key, str) and key in mapping and key not in seen:
        seen.add(key)
        nodes.append(mapping[key])
        children = mapping[key].get("children") if isinstance(mapping[key], dict) else None
        key = children[-1] if isinstance(children, list) and children else None
    return nodes


def _chatgpt_messages(m: dict, sid: str, path: str, line: int | None,
                      problems: list[Problem]) -> list[Message]:
    author = m.get("author") if isinstance(m.get("author"), dict) else {}
    role = author.get("role")
    content = m.get("content") if isinstance(m.get("content"), dict) else {}
    ctype = content.get("content_type")
    meta = m.get("metadata") if isinstance(m.get("metadata"), dict) else {}
    mid = id_or_none(m.get("id"))
    created, ok = parse_time(m.get("create_time"))
    if not ok:
        problems.append(Problem(path, line, f"conversation {sid}: message {mid}: invalid create_time"))
    if meta.get("is_visually_hidden_from_conversation") or ctype in ("user_editable_context", "reasoning_recap"):
        return []
    recipient = m.get("recipient")
    to_tool = role == "assistant" and isinstance(recipient, str) and recipient not in ("all", "")
    extra: dict[str, Any] = {}
    if ctype == "thoughts":
        kind, text = "thinking", "\n\n".join(
            "\n".join(x for x in (t.get("summary"), t.get("content")) if isinstance(x, str) and x)
            for t in content.get("thoughts", []) if isinstance(t, dict))
    elif to_tool:
        body = _code_or_parts(content)
        kind, text = "tool_call", render_call(recipient, {"code": body} if ctype == "code" else body)
        extra = {"tool_name": recipient}
    elif role == "tool":
        kind, text = "tool_result", _code_or_parts(content)
        extra = {"tool_name": author.get("name")}
    elif role in ("user", "assistant", "system"):
        kind, text = "text", _code_or_parts(content)
    else:
        problems.append(Problem(path, line, f"conversation {sid}: message {mid}: unknown author role {role!r:.40}"))
        return []
    text = clean_text(text or "")
    if not text.strip():
        return []       # the app's empty root and placeholder nodes
    if isinstance(meta.get("model_slug"), str):
        extra["model"] = meta["model_slug"]
    return [Message(mid, "tool" if role == "tool" else role, kind, text, created, None,
                    clean_value({k: v for k, v in extra.items() if v is not None}))]


def _code_or_parts(content: dict) -> str:
    """A message's text: its parts (a voice message's transcription as text; an image, audio or
    a file noted as such), or its code / output."""
    parts = content.get("parts")
    if isinstance(parts, list):
        out = []
        for p in parts:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])           # audio_transcription: what was said
            elif isinstance(p, dict):
                ptype = str(p.get("content_type") or p.get("type") or "attachment")
                out.append("[image]" if "image" in ptype else "[audio]" if "audio" in ptype else f"[{ptype}]")
        return "\n".join(x for x in out if x)
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return content[key]
    return ""


# ---------------------------------------------------------------- Claude.ai

SENDERS = {"human": "user", "user": "user", "assistant": "assistant"}


def _claude_ai_session(conv: dict, i: int, path: str, line: int | None,
                       problems: list[Problem]) -> Session | None:
    sid = id_or_none(conv.get("uuid")) or id_or_none(conv.get("id"))
    if sid is None:
        problems.append(Problem(path, line, f"conversations[{i}]: no uuid"))
        return None
    project = conv.get("project")
    info = {"source_agent": "claude-ai",
            "claude_project": text_or_none(project.get("name")) if isinstance(project, dict) else None}
    session = Session(sid, title=text_or_none(conv.get("name")) or text_or_none(conv.get("title")),
                      metadata={k: v for k, v in info.items() if v is not None})
    for j, m in enumerate(conv["chat_messages"]):
        if not isinstance(m, dict):
            problems.append(Problem(path, line, f"conversation {sid}: chat_messages[{j}]: not an object"))
            continue
        session.messages.extend(_claude_ai_messages(m, j, sid, path, line, problems))
    return _finish(session, conv.get("created_at"), conv.get("updated_at"))


def _claude_ai_messages(m: dict, j: int, sid: str, path: str, line: int | None,
                        problems: list[Problem]) -> list[Message]:
    role = SENDERS.get(m.get("sender")) if isinstance(m.get("sender"), str) else None
    if role is None:
        problems.append(Problem(path, line, f"conversation {sid}: chat_messages[{j}]: unknown sender "
                                            f"{m.get('sender')!r:.40}"))
        return []
    base = id_or_none(m.get("uuid")) or str(j)
    created, ok = parse_time(m.get("created_at"))
    if not ok:
        problems.append(Problem(path, line, f"conversation {sid}: chat_messages[{j}]: invalid created_at"))
    parts: list[tuple[str, str, str, dict]] = []       # (role, kind, text, metadata)
    blocks = m.get("content")
    if isinstance(blocks, list) and blocks:
        for block in blocks:
            btype = block.get("type") if isinstance(block, dict) else None
            if btype == "text":
                parts.append((role, "text", _str(block.get("text")), {}))
            elif btype == "thinking":
                parts.append((role, "thinking", _str(block.get("thinking")) or _str(block.get("text")), {}))
            elif btype == "tool_use" and isinstance(block.get("name"), str):
                parts.append(("assistant", "tool_call", render_call(block["name"], block.get("input")),
                              {"tool_use_id": block.get("id"), "tool_name": block["name"]}))
            elif btype == "tool_result":
                parts.append(("tool", "tool_result", _result_text(block.get("content")),
                              {"tool_use_id": block.get("tool_use_id"), "tool_name": block.get("name"),
                               "is_error": block.get("is_error") or None}))
            elif btype not in ("image", "document", "token_budget", None):
                problems.append(Problem(path, line, f"conversation {sid}: chat_messages[{j}]: unknown "
                                                    f"content block {btype!r:.40} (skipped)"))
    if not any(text.strip() for _, _, text, _ in parts):
        parts.append((role, "text", _str(m.get("text")), {}))
    for att in m.get("attachments") or []:
        if isinstance(att, dict) and isinstance(att.get("extracted_content"), str):
            name = text_or_none(att.get("file_name")) or "file"
            parts.append((role, "text", f"[attachment: {name}]\n{att['extracted_content']}", {"attachment": name}))
    out = []
    many = len(parts) > 1
    for k, (who, kind, text, meta) in enumerate(parts):
        text = clean_text(text)
        if text.strip():
            out.append(Message(f"{base}#{k}" if many else base, who, kind, text, created, None,
                               clean_value({x: v for x, v in meta.items() if v is not None})))
    return out


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_str(c.get("text")) if isinstance(c, dict) else str(c) for c in content)
    return json.dumps(content, ensure_ascii=False) if content is not None else ""
