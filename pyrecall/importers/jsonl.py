"""Generic JSONL: one message per line.

Fields of a line: ``role`` and ``content`` (required); ``session_id`` (default: derived from
the file path), ``created_at`` (or ``timestamp``; ISO 8601 or epoch seconds), ``kind``,
``importance`` (0..1), ``metadata`` (object), ``external_id`` (or ``id``), ``agent_id``; and
for the session, taken from the first line that has them: ``title``, ``project``, ``branch``.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ._read import (
    Lines,
    checked,
    clean_text,
    clean_value,
    derived_session_id,
    id_or_none,
    parse_time,
    span,
    text_or_none,
)
from ._records import KINDS, ROLES, Message, ParseResult, Problem, Session

FORMAT = "jsonl"

# Names other tools give the same roles.
ROLE_ALIASES = {"human": "user", "ai": "assistant", "bot": "assistant", "model": "assistant",
                "developer": "system", "function": "tool"}


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse a generic JSONL file from byte ``start_offset`` on, grouped by ``session_id``.

    >>> result = parse("tests/fixtures/importers/generic.jsonl")
    >>> [s.session_id for s in result.sessions]
    ['deploy-2026-02-10', 'standup-2026-02-11']
    """
    path = checked(path)
    problems: list[Problem] = []
    lines = Lines(path, start_offset, problems)
    sessions: dict[str, Session] = {}
    default_sid = derived_session_id(path)
    for n, obj in lines.objects():
        try:
            _line(n, obj, lines, sessions, default_sid)
        except RecursionError:
            lines.report(n, "metadata nested too deeply")
    for s in sessions.values():
        s.started_at, s.ended_at = span([m.created_at for m in s.messages])
    return ParseResult(list(sessions.values()), problems, FORMAT, lines.end_offset)


def _line(n: int, obj: dict, lines: Lines, sessions: dict[str, Session], default_sid: str) -> None:
    sid = id_or_none(obj.get("session_id")) if "session_id" in obj else default_sid
    if sid is None:
        lines.report(n, "session_id is not text")
        return
    role = obj.get("role")
    role = ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    if role not in ROLES:
        lines.report(n, "line without role" if role is None else f"unknown role {role!r:.40}")
        return
    default_kind = "tool_result" if role == "tool" else "text"
    kind = obj.get("kind", default_kind)
    if kind not in KINDS:
        lines.report(n, f"unknown kind {kind!r:.40}: used {default_kind!r}")
        kind = default_kind
    content = _text(obj.get("content"))
    if content is None:
        lines.report(n, "line without content" if obj.get("content") is None
                     else "content is neither text nor a list of text blocks")
        return
    content = clean_text(content)
    if not content.strip():
        lines.report(n, "empty content")
        return
    created, ok = parse_time(obj["created_at"] if "created_at" in obj else obj.get("timestamp"))
    if not ok:
        lines.report(n, "invalid created_at")
    importance = obj.get("importance")
    if importance is not None and not (
        isinstance(importance, int | float) and not isinstance(importance, bool)
        and math.isfinite(importance) and 0 <= importance <= 1
    ):
        lines.report(n, "importance is not a number between 0 and 1: ignored")
        importance = None
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        lines.report(n, "metadata is not an object: ignored")
        metadata = {}
    eid = id_or_none(obj["external_id"] if "external_id" in obj else obj.get("id"))

    session = sessions.get(sid)
    if session is None:
        session = sessions[sid] = Session(sid)
    for field in ("agent_id", "title", "project", "branch"):
        if getattr(session, field) is None:
            setattr(session, field, text_or_none(obj.get(field)))
    session.messages.append(Message(
        eid, role, kind, content, created,
        None if importance is None else float(importance), clean_value(metadata)))


def _text(content: Any) -> str | None:
    """Text content, or the text blocks of a list joined by newlines; None otherwise."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in content
    ):
        return "\n".join(b["text"] for b in content)
    return None
