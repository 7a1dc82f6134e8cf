"""Neutral records every importer produces, whatever the transcript format.

The ingestion layer writes them to ``recall.sessions`` and ``recall.messages``; nothing here
touches a database.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

ROLES = ("user", "assistant", "system", "tool")
KINDS = ("text", "thinking", "tool_call", "tool_result")


@dataclass
class Message:
    """One message of a session, in file order.

    ``content`` is never empty; ``created_at`` is timezone-aware UTC when known;
    ``external_id`` is the id the file gives the message (``uuid#i`` for the i-th block of a
    Claude Code line holding several), ``None`` when the file gives none.
    """

    external_id: str | None
    role: str  # user | assistant | system | tool
    kind: str  # text | thinking | tool_call | tool_result
    content: str
    created_at: datetime | None = None
    importance: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Session:
    """One conversation; ``agent_id`` is ``None`` when the file does not name one."""

    session_id: str
    agent_id: str | None = None
    title: str | None = None
    project: str | None = None
    branch: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)


def content_id(m: Message, seen: Counter[str]) -> str:
    """The id of a message its source gives none: a hash of what it says (and when), numbered
    among the identical ones of its session met so far (``seen``, counted here), so that
    importing the same file twice matches (ingestion gives every id-less message one; a
    streaming importer gives them itself, counting across the pieces of a session)."""
    key = "\x1f".join([m.role, m.kind, m.created_at.isoformat() if m.created_at else "", m.content])
    digest = hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:32]
    number = seen[digest]
    seen[digest] += 1
    return f"h:{digest}:{number}"


@dataclass
class Problem:
    """A piece of a file that was skipped or repaired: reported, never raised."""

    path: str
    line: int | None  # 1-based line in the file, None when unknown
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}" if self.line else f"{self.path}: {self.reason}"


@dataclass
class ParseResult:
    """What one parse of one file produced.

    ``end_offset`` is the byte offset up to which the file was consumed: pass it back as
    ``start_offset`` to read only what was appended since.
    """

    sessions: list[Session]
    problems: list[Problem]
    format: str
    end_offset: int = 0
    # what is not a message: an export's memories and importance (recall.import_records)
    records: list[dict] = field(default_factory=list)
    # records left in the file to be read in batches (jsonl.parse(keep_records=False))
    streamed: int = 0
    # the sessions as they are read, when the parser streams them (a chat app's data export of
    # gigabytes): ``sessions`` is then empty, and ``problems`` fills as this is consumed
    session_stream: Iterator[Session] | None = None
