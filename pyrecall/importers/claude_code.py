"""Claude Code transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

One JSON object per line. ``user`` and ``assistant`` lines are messages; ``summary`` lines
title the session; every other type (system, file-history-snapshot, ...) is skipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._read import (
    Lines,
    checked,
    clean_text,
    clean_value,
    parse_time,
    render_call,
    span,
    text_or_none,
)
from ._records import Message, ParseResult, Problem, Session

FORMAT = "claude_code"
SOURCE_AGENT = "claude-code"  # session metadata: which agent wrote the session


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse a Claude Code transcript from byte ``start_offset`` on.

    Messages are grouped by ``sessionId``; a line's content blocks become one message each
    (text, thinking, tool_call, tool_result). ``agent_id`` is left None.

    >>> result = parse("tests/fixtures/importers/claude_code/session.jsonl")
    >>> [(m.role, m.kind) for m in result.sessions[0].messages][:3]
    [('user', 'text'), ('assistant', 'thinking'), ('assistant', 'text')]
    """
    path = checked(path)
    problems: list[Problem] = []
    lines = Lines(path, start_offset, problems)
    sessions: dict[str, Session] = {}
    times: dict[str, list] = {}
    owner: dict[str, str] = {}  # message uuid -> session id, to place summaries
    summaries: list[tuple[Any, str]] = []
    for n, obj in lines.objects():
        kind = obj.get("type")
        if kind == "summary":
            title = text_or_none(obj.get("summary"))
            if title is None:
                lines.report(n, "summary line without text")
            else:
                summaries.append((obj.get("leafUuid"), title))
            continue
        if kind not in ("user", "assistant"):
            if not isinstance(kind, str):
                lines.report(n, "line without a type")
            continue
        try:
            _message_line(path, n, obj, kind, lines, sessions, times, owner)
        except RecursionError:
            lines.report(n, "content nested too deeply")

    for leaf, title in summaries:
        # A summary names its session through the last message it covers; a file that
        # holds a single session needs no such link.
        sid = owner.get(leaf) if isinstance(leaf, str) else None
        if sid is None and len(sessions) == 1:
            sid = next(iter(sessions))
        if sid in sessions:
            sessions[sid].title = title
    kept = [s for s in sessions.values() if s.messages]
    for s in kept:
        s.started_at, s.ended_at = span(times[s.session_id])
    return ParseResult(kept, problems, FORMAT, lines.end_offset)


def _message_line(path: Path, n: int, obj: dict, kind: str, lines: Lines,
                  sessions: dict[str, Session], times: dict[str, list],
                  owner: dict[str, str]) -> None:
    sid = text_or_none(obj.get("sessionId"))
    if sid is None:
        # Claude Code names each file after its session.
        sid = clean_text(path.stem)
        lines.report(n, "line without sessionId: used the file name")
    session = sessions.get(sid)
    if session is None:
        session = sessions[sid] = Session(sid, metadata={"source_agent": SOURCE_AGENT})
        times[sid] = []
        if version := text_or_none(obj.get("version")):
            session.metadata["version"] = version
    # The first cwd is the project root; later ones may be subfolders the agent moved to.
    if session.project is None:
        session.project = text_or_none(obj.get("cwd"))
    # The last branch wins: sessions often start by creating the branch they work on.
    if branch := text_or_none(obj.get("gitBranch")):
        session.branch = branch
    created, ok = parse_time(obj.get("timestamp"))
    if not ok:
        lines.report(n, "invalid timestamp")
    times[sid].append(created)
    uuid = text_or_none(obj.get("uuid"))
    if uuid:
        owner[uuid] = sid

    message = obj.get("message")
    if not isinstance(message, dict):
        lines.report(n, f"{kind} line without a message object")
        return
    base: dict[str, Any] = {}
    if isinstance(obj.get("parentUuid"), str):
        base["parent_uuid"] = obj["parentUuid"]
    if isinstance(obj.get("isSidechain"), bool):
        base["is_sidechain"] = obj["isSidechain"]
    if kind == "assistant" and isinstance(message.get("model"), str):
        base["model"] = message["model"]

    content = message.get("content")
    if isinstance(content, str):
        blocks: list = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = content
    else:
        lines.report(n, "message content is neither text nor a list of blocks")
        return
    speaker = "assistant" if kind == "assistant" else "user"
    out: list[Message | None] = []
    before = len(lines.problems)
    images = result_images = 0
    redacted = False
    for i, block in enumerate(blocks):
        eid = f"{uuid}#{i}" if uuid and len(blocks) > 1 else uuid
        btype = block.get("type") if isinstance(block, dict) else None
        if btype == "text":
            out.append(_msg(eid, speaker, "text", block.get("text"), created, base))
        elif btype == "thinking":
            out.append(_msg(eid, "assistant", "thinking", block.get("thinking"), created, base))
        elif btype == "tool_use":
            name = block.get("name")
            if not isinstance(name, str):
                lines.report(n, f"block {i}: tool_use without a name")
                name = ""
            meta = {**base, "tool_use_id": block.get("id"), "tool_name": name}
            out.append(_msg(eid, "assistant", "tool_call",
                            render_call(name, block.get("input")), created, meta))
        elif btype == "tool_result":
            text, n_images = _result_text(block.get("content"), n, i, lines)
            result_images += n_images
            meta = {**base, "tool_use_id": block.get("tool_use_id"),
                    "is_error": block.get("is_error") is True}
            if n_images:
                meta["images"] = n_images
            out.append(_msg(eid, "tool", "tool_result", text, created, meta))
        elif btype == "image":
            images += 1
        elif btype == "redacted_thinking":
            redacted = True  # encrypted by the API: nothing readable to keep
        elif isinstance(block, dict):
            lines.report(n, f"block {i}: unknown block type {btype!r:.40}")
        else:
            lines.report(n, f"block {i}: not an object")
    kept = [m for m in out if m is not None]
    if images:
        # Images are not imported; the messages beside them say that there were some.
        for m in kept:
            m.metadata.setdefault("images", images)
    # A line that held only images or encrypted thinking is not broken, just not importable.
    if not kept and not (images or result_images or redacted) and len(lines.problems) == before:
        lines.report(n, "message without content")
    session.messages.extend(kept)


def _msg(eid: str | None, role: str, kind: str, content: Any, created: Any,
         metadata: dict) -> Message | None:
    if not isinstance(content, str):
        return None
    content = clean_text(content)
    if not content.strip():
        return None
    return Message(eid, role, kind, content, created, None, clean_value(metadata))


def _result_text(content: Any, n: int, i: int, lines: Lines) -> tuple[str, int]:
    """The text of a tool_result (a string or a list of text blocks) and its image count."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return "", 0
    parts, images = [], 0
    for item in content:
        itype = item.get("type") if isinstance(item, dict) else None
        if isinstance(item, str):
            parts.append(item)
        elif itype == "text" and isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif itype == "image":
            images += 1
        else:
            lines.report(n, f"block {i}: unknown item type {itype!r:.40} in tool_result")
    return "\n".join(parts), images
