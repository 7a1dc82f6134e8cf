"""Generic JSONL: one message per line.

Fields of a line: ``role`` and ``content`` (required); ``session_id`` (default: derived from
the file path), ``created_at`` (or ``timestamp``; ISO 8601 or epoch seconds), ``kind``,
``importance`` (0..1), ``metadata`` (object), ``external_id`` (or ``id``), ``agent_id``; and
for the session, taken from the first line that has them: ``title``, ``project``, ``branch``,
``started_at``, ``ended_at`` (else the span of its messages) and ``session_metadata`` (object).

An export of ``pyrecall export`` (recall.export_agent) is such a file with two more kinds of
line: its header (``{"pyrecall_export": 1, ...}``) and records, ``{"record": "memory", ...}``
(a curated memory), ``{"record": "importance", ...}`` (a chunk's importance set by hand),
``{"record": "summary", ...}`` (a session summary a model wrote), ``{"record": "forgotten", ...}``
(a session deleted, not to be stored again) and, exported with ``--vectors``, ``{"record": "vector", ...}`` (a chunk's vector) and
``{"record": "turn", ...}`` (a message's token counts and own vector), handed to the importer in
``ParseResult.records`` (restored by recall.import_records once the messages are stored). A
record that cannot be restored is reported and left out. ``keep_records=False`` keeps only the
memories (few; one may supersede another) and counts the others in ``ParseResult.streamed``, for
the importer to read them again in batches (:func:`record_batches`): an export with vectors holds
~5 KB a chunk and a message, which need not all be in memory at once.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ._read import (
    Lines,
    _is_object,
    checked,
    clean_text,
    clean_value,
    derived_session_id,
    id_or_none,
    parse_time,
    span,
    text_or_none,
)
from ._records import KINDS, ROLES, Message, ParseResult, Problem, Session, content_id

FORMAT = "jsonl"
EXPORT_VERSION = 1          # the newest export format this reads (recall.export_agent's header)
MEMORY_KINDS = ("note", "fact", "decision", "preference")

# Names other tools give the same roles.
ROLE_ALIASES = {"human": "user", "ai": "assistant", "bot": "assistant", "model": "assistant",
                "developer": "system", "function": "tool"}


def parse(path: str | os.PathLike, *, start_offset: int = 0, keep_records: bool = True) -> ParseResult:
    """Parse a generic JSONL file from byte ``start_offset`` on, grouped by ``session_id``.

    >>> result = parse("tests/fixtures/importers/generic.jsonl")
    >>> [s.session_id for s in result.sessions]
    ['deploy-2026-02-10', 'standup-2026-02-11']
    """
    path = checked(path)
    problems: list[Problem] = []
    lines = Lines(path, start_offset, problems)
    sessions: dict[str, Session] = {}
    records: list[dict] = []
    streamed = 0                          # records left in the file (keep_records=False)
    given: dict[str, tuple] = {}          # a session's own started_at / ended_at
    default_sid = derived_session_id(path)
    for n, obj in lines.objects():
        streamed += _dispatch(n, obj, lines, sessions, default_sid, given, records, keep_records) == LEFT
    for s in sessions.values():
        _span(s, s, given)
    return ParseResult(list(sessions.values()), problems, FORMAT, lines.end_offset, records, streamed)


STREAM_MESSAGES = 10_000   # stream(): the sessions read so far are given every this many messages


def stream(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """:func:`parse` with ``keep_records=False``, the sessions given as the file is read
    (``session_stream``): a session's messages come in pieces of the file's order, each piece
    a :class:`Session` of its own (the same id, the header fields read by then), so that an
    export of millions of messages is imported in the memory of ``STREAM_MESSAGES``. What
    `pyrecall import` and `sync` use. ``end_offset`` is known before the sessions are read: the
    stream stops there, whatever is appended meanwhile.

    >>> result = stream("tests/fixtures/importers/generic.jsonl")
    >>> [(s.session_id, len(s.messages)) for s in result.session_stream]
    [('deploy-2026-02-10', 5), ('standup-2026-02-11', 2)]
    """
    path = checked(path)
    problems: list[Problem] = []
    lines = Lines(path, start_offset, problems)
    result = ParseResult([], problems, FORMAT, _line_end(path, start_offset, problems, lines), [], 0)
    result.session_stream = _pieces(path, lines, result)
    return result


def _pieces(path, lines: Lines, result: ParseResult) -> Iterator[Session]:
    sessions: dict[str, Session] = {}     # each session's header; its messages since the last piece
    given: dict[str, tuple] = {}
    given_out: set[str] = set()           # sessions given at least once
    seen: dict[str, Counter] = {}         # per session: the id-less messages met (their numbering)
    held = 0
    default_sid = derived_session_id(path)
    for n, obj in lines.objects():
        if lines.end_offset > result.end_offset:
            break
        read = _dispatch(n, obj, lines, sessions, default_sid, given, result.records, False)
        result.streamed += read == LEFT
        held += read == MESSAGE
        if held >= STREAM_MESSAGES:
            yield from _give(sessions, given, seen, given_out, final=False)
            held = 0
    yield from _give(sessions, given, seen, given_out, final=True)


def _give(sessions: dict[str, Session], given: dict[str, tuple], seen: dict[str, Counter],
          given_out: set[str], *, final: bool) -> Iterator[Session]:
    """A piece of every session holding messages (and, at the end, of every session not given
    yet); the headers stay for the pieces to come. A message without an id of its own gets the
    one ingestion would give it in the whole session (numbered among the identical ones of all
    its session's pieces)."""
    for s in sessions.values():
        if s.messages or (final and s.session_id not in given_out):
            counter = seen.setdefault(s.session_id, Counter())
            for m in s.messages:
                m.external_id = m.external_id or content_id(m, counter)
            piece = replace(s, metadata=dict(s.metadata), messages=s.messages)
            _span(piece, piece, given)
            s.messages = []
            given_out.add(s.session_id)
            yield piece


def _span(s: Session, of: Session, given: dict[str, tuple]) -> None:
    """A session's start and end: as a line gave them, else the span of its messages (of a
    piece: the database widens a stored session's span to its messages)."""
    first, last = span([m.created_at for m in of.messages])
    started, ended = given.get(s.session_id, (None, None))
    s.started_at, s.ended_at = started or first, ended or last


def _line_end(path, start: int, problems: list[Problem], lines: Lines) -> int:
    """Where :class:`Lines` will stop: after the last newline, or after a last line without one
    that is a whole JSON object (what :class:`Lines` consumes); from the start when the file is
    shorter than ``start`` (reported, as :class:`Lines` reports it)."""
    size = os.path.getsize(path)
    if start > size:
        problems.append(Problem(str(path), None,
                                f"file is shorter than the start offset {start}: read from the start"))
        lines.start = lines.end_offset = start = 0
    with open(path, "rb") as f:
        pos, tail = size, b""
        while pos > start:
            step = min(1 << 16, pos - start)
            f.seek(pos - step)
            block = f.read(step)
            if b"\n" in block:
                cut = block.rfind(b"\n")
                tail = block[cut + 1:] + tail
                pos = pos - step + cut + 1
                break
            tail, pos = block + tail, pos - step
        else:
            pos = start
    if tail and _is_object(tail):
        return size
    return pos


def record_batches(path: str | os.PathLike, start_offset: int, end_offset: int,
                   size: int) -> Iterator[list[dict]]:
    """The records other than memories of the lines between the two offsets, those that
    :func:`parse` accepted (it reported the others), ``size`` at a time."""
    lines = Lines(checked(path), start_offset, [])
    batch: list[dict] = []
    for _, obj in lines.objects():
        if lines.end_offset > end_offset:
            break
        kind = obj.get("record")
        if ("role" not in obj and kind in STREAMED and "pyrecall_export" not in obj
                and not _PROBLEMS[kind](obj)):
            batch.append(clean_value(obj))
            if len(batch) == size:
                yield batch
                batch = []
    if batch:
        yield batch


def _dispatch(n: int, obj: dict, lines: Lines, sessions: dict[str, Session], default_sid: str,
              given: dict[str, tuple], records: list[dict], keep_records: bool) -> int:
    """One line read: the export's header, a record, or a message. LEFT when it is a record left
    in the file (``keep_records=False``), MESSAGE when a message was read, else 0."""
    try:
        if "pyrecall_export" in obj:
            _header(n, obj, lines)
        elif "record" in obj and "role" not in obj:   # (a message may carry a field "record")
            return LEFT if _record(n, obj, lines, records, keep_records) else 0
        elif _line(n, obj, lines, sessions, default_sid, given):
            return MESSAGE
    except RecursionError:
        lines.report(n, "metadata nested too deeply")
    return 0


LEFT, MESSAGE = 1, 2


def _header(n: int, obj: dict, lines: Lines) -> None:
    version = obj.get("pyrecall_export")
    if not isinstance(version, int) or isinstance(version, bool) or version > EXPORT_VERSION:
        lines.report(n, f"export format {version!r:.20} is newer than this pyrecall reads "
                        f"({EXPORT_VERSION}): its records may be read wrongly")


def _record(n: int, obj: dict, lines: Lines, records: list[dict], keep: bool) -> bool:
    """A record of an export, checked here so that one that cannot be restored is reported
    with its line and the others are restored; kept, or (``keep`` false, not a memory) left
    for :func:`record_batches`: then True."""
    kind = obj.get("record")
    if kind not in _PROBLEMS:
        lines.report(n, f"unknown record {kind!r:.40}: skipped")
        return False
    problem = _PROBLEMS[kind](obj)
    if problem:
        lines.report(n, f"{kind} record {problem}: skipped")
        return False
    if keep or kind not in STREAMED:
        records.append(clean_value(obj))
        return False
    return True


def _memory_problem(obj: dict) -> str | None:
    if obj.get("memory_kind") not in MEMORY_KINDS:
        return f"with memory_kind {obj.get('memory_kind')!r:.40} (expected one of {', '.join(MEMORY_KINDS)})"
    content = obj.get("content")
    if not isinstance(content, str) or not content.strip():
        return "without content"
    times = {}
    for field in ("valid_from", "valid_until", "created_at", "importance_set_at"):
        times[field], ok = parse_time(obj.get(field))
        if not ok or (field == "valid_from" and times[field] is None):
            return f"without a readable {field}"
    if times["valid_until"] is not None and times["valid_until"] < times["valid_from"]:
        return "ending (valid_until) before it starts (valid_from)"
    if not _unit(obj.get("importance", 0.7)):
        return "with an importance that is not a number between 0 and 1"
    if not isinstance(obj.get("pinned", False), bool):
        return "with pinned neither true nor false"
    if not isinstance(obj.get("metadata", {}), dict):
        return "with metadata that is not an object"
    for field in ("memory_id", "supersedes"):
        if obj.get(field) is not None and (not isinstance(obj[field], int) or isinstance(obj[field], bool)):
            return f"with {field} not a whole number"
    return None


def _importance_problem(obj: dict) -> str | None:
    for field in ("session_id", "chunk_kind", "first_external_id"):
        if id_or_none(obj.get(field)) is None:
            return f"without {field}"
    if not _unit(obj.get("importance")):
        return "with an importance that is not a number between 0 and 1"
    if not parse_time(obj.get("set_at"))[1]:
        return "without a readable set_at"
    if not _count(obj.get("part", 0), 0):
        return "with part not a whole number"
    return None


def _vector_problem(obj: dict) -> str | None:
    for field in ("session_id", "chunk_kind", "first_external_id", "content_md5"):
        if id_or_none(obj.get(field)) is None:
            return f"without {field}"
    if not isinstance(obj.get("embedding"), str):
        return "without an embedding"
    part = obj.get("part", 0)
    if not _count(part, 0):
        return "with part not a whole number"
    if obj.get("n_tokens") is not None and not _count(obj["n_tokens"], 1):
        return "with n_tokens not a positive whole number"
    return None


def _turn_problem(obj: dict) -> str | None:
    for field in ("session_id", "external_id"):
        if id_or_none(obj.get(field)) is None:
            return f"without {field}"
    if obj.get("embedding") is not None and not isinstance(obj["embedding"], str):
        return "with an embedding that is not a vector's text"
    for field in ("n_tokens", "date_tokens"):
        if obj.get(field) is not None and not _count(obj[field], 1):
            return f"with {field} not a positive whole number"
    return None


def _summary_problem(obj: dict) -> str | None:
    if id_or_none(obj.get("session_id")) is None:
        return "without session_id"
    summary = obj.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        return "without a summary"
    model = obj.get("summary_model")
    if not isinstance(model, str) or not model.strip() or model == "extractive":
        return "without the summary_model that wrote it (an extractive one is made again, not imported)"
    if not parse_time(obj.get("summary_at"))[1]:
        return "without a readable summary_at"
    if obj.get("embedding") is not None and not isinstance(obj["embedding"], str):
        return "with an embedding that is not a vector's text"
    if obj.get("n_tokens") is not None and not _count(obj["n_tokens"], 1):
        return "with n_tokens not a positive whole number"
    return None


def _forgotten_problem(obj: dict) -> str | None:
    if id_or_none(obj.get("session_id")) is None:
        return "without session_id"
    if not parse_time(obj.get("forgotten_at"))[1] or obj.get("forgotten_at") is None:
        return "without a readable forgotten_at"
    return None


_PROBLEMS = {"memory": _memory_problem, "importance": _importance_problem, "vector": _vector_problem,
             "turn": _turn_problem, "summary": _summary_problem, "forgotten": _forgotten_problem}
# what record_batches gives (memories: parse)
STREAMED = ("importance", "vector", "turn", "summary", "forgotten")


def _count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and least <= value < 2**31


def _unit(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and 0 <= value <= 1)


def _line(n: int, obj: dict, lines: Lines, sessions: dict[str, Session], default_sid: str,
          given: dict[str, tuple]) -> bool:
    sid = id_or_none(obj.get("session_id")) if "session_id" in obj else default_sid
    if sid is None:
        lines.report(n, "session_id is not text")
        return False
    role = obj.get("role")
    role = ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    if role not in ROLES:
        lines.report(n, "line without role" if role is None else f"unknown role {role!r:.40}")
        return False
    default_kind = "tool_result" if role == "tool" else "text"
    kind = obj.get("kind", default_kind)
    if kind not in KINDS:
        lines.report(n, f"unknown kind {kind!r:.40}: used {default_kind!r}")
        kind = default_kind
    content = _text(obj.get("content"))
    if content is None:
        lines.report(n, "line without content" if obj.get("content") is None
                     else "content is neither text nor a list of text blocks")
        return False
    content = clean_text(content)
    if not content.strip():
        lines.report(n, "empty content")
        return False
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
    if "session_metadata" in obj and not session.metadata:
        if isinstance(obj["session_metadata"], dict):
            session.metadata = clean_value(obj["session_metadata"])
        else:
            lines.report(n, "session_metadata is not an object: ignored")
    if sid not in given and ("started_at" in obj or "ended_at" in obj):
        (started, ok1), (ended, ok2) = parse_time(obj.get("started_at")), parse_time(obj.get("ended_at"))
        if not (ok1 and ok2):
            lines.report(n, "invalid started_at or ended_at: the span of the messages is used")
        given[sid] = (started, ended)
    session.messages.append(Message(
        eid, role, kind, content, created,
        None if importance is None else float(importance), clean_value(metadata)))
    return True


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
