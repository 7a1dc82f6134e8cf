"""Gemini CLI chats: ``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`` (or ``.json``).

Gemini CLI records every conversation (its ChatRecordingService) in one of two shapes:

- ``gemini`` (current versions): JSON lines. The first line is the session's metadata
  ``{sessionId, projectHash, startTime, lastUpdated, kind?, directories?}``; then one line per
  message record, written again whenever the message changes (tool calls or token counts
  added: the same ``id``), ``{"$set": {...}}`` metadata updates (``summary``, ``messages``)
  and ``{"$rewindTo": id}`` markers.
- ``gemini_json`` (earlier versions): one JSON document
  ``{sessionId, projectHash, startTime, lastUpdated, summary?, messages: [...]}``.

A message record is ``{id, timestamp, type, content, displayContent?, thoughts?, toolCalls?,
model?}`` with ``type`` user | gemini | info | warning | error. A user message gives its text
(``displayContent``, what the user typed, when recorded); a gemini message its thoughts (as
thinking), its text, and each tool call with its result (paired by the call's ``id`` in
``metadata.tool_use_id``, as Claude Code's are); an error message becomes a system message.
Info and warning notices are skipped. Each part is kept the first time it is seen, so a
record written again adds only what is new (the same as a later ``pyrecall sync`` would);
messages a rewind removed stay remembered.

Gemini CLI records the SHA-256 of the project folder, not the folder: the project is the
folder among the session's directories, and the folders above the absolute paths its tool
calls name, whose hash it is (none when no such path is found); the hash is kept as metadata
``project_hash``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from ._read import (
    Lines,
    checked,
    clean_text,
    clean_value,
    derived_session_id,
    first_line_json,
    parse_time,
    read_document,
    render_call,
    span,
    text_or_none,
)
from ._records import Message, ParseResult, Problem, Session

FORMAT = "gemini"              # JSON lines, resumable at a byte offset
FORMAT_DOCUMENT = "gemini_json"
SOURCE_AGENT = "gemini"
MESSAGE_TYPES = ("user", "gemini", "info", "warning", "error")
_EXIT = re.compile(r"^Exit Code: (-?\d+)\s*$", re.M)
_MAX_PATHS = 200  # absolute paths from tool calls tried against the project hash


def is_metadata(obj: dict) -> bool:
    """Whether a JSON object is a Gemini CLI chat's metadata (or its whole legacy document)."""
    return isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str)


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse a Gemini CLI chat recorded as JSON lines, from byte ``start_offset`` on.

    >>> result = parse("tests/fixtures/importers/gemini/session-2026-03-05T14-00-7c1e9a20.jsonl")
    >>> [(m.role, m.kind) for m in result.sessions[0].messages][:3]
    [('user', 'text'), ('assistant', 'thinking'), ('assistant', 'text')]
    """
    path = checked(path)
    problems: list[Problem] = []
    lines = Lines(path, start_offset, problems)
    chat = _Chat()
    for n, obj in lines.objects():
        def report(reason: str, n: int = n) -> None:
            lines.report(n, reason)
        try:
            if isinstance(obj.get("$rewindTo"), str):
                continue  # what was said stays remembered
            if "$set" in obj:
                if not isinstance(obj["$set"], dict):
                    report("$set without an object")
                    continue
                chat.meta(obj["$set"])
                messages = obj["$set"].get("messages")
                for i, m in enumerate(messages if isinstance(messages, list) else []):
                    chat.message(m, lambda reason, i=i: report(f"messages[{i}]: {reason}"))
            elif isinstance(obj.get("id"), str):
                chat.message(obj, report)
            elif is_metadata(obj):
                chat.meta(obj)
            else:
                report("neither a message nor metadata")
        except RecursionError:
            report("content nested too deeply")
    if chat.session_id is None and lines.start and chat.messages:
        _head(path, chat)  # appended lines name no session: the first line does
    return ParseResult(chat.sessions(path), problems, FORMAT, lines.end_offset)


def parse_document(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse a Gemini CLI chat saved as one JSON document (earlier versions), read whole
    whatever ``start_offset`` is.

    >>> result = parse_document("tests/fixtures/importers/gemini/session-2026-02-20T09-30-3b5d0f11.json")
    >>> result.sessions[0].title
    'Flaky websocket reconnect test'
    """
    path = checked(path)
    doc, problems, size = read_document(path, depth=3)
    root = doc.value
    if not isinstance(root, dict) or not isinstance(root.get("messages"), list):
        if root is not None:
            problems.append(Problem(str(path), 1, "not a Gemini CLI chat: no list of messages"))
        return ParseResult([], problems, FORMAT_DOCUMENT, size)
    chat = _Chat()
    chat.meta(root)
    for i, m in enumerate(root["messages"]):
        if isinstance(m, dict | list) and not doc.complete(m):
            continue  # cut off by the damage the document error reports
        line = doc.line(m) if isinstance(m, dict | list) else None

        def report(reason: str, i: int = i, line: int | None = line) -> None:
            problems.append(Problem(str(path), line, f"messages[{i}]: {reason}"))
        try:
            chat.message(m, report)
        except RecursionError:
            report("nested too deeply")
    return ParseResult(chat.sessions(path), problems, FORMAT_DOCUMENT, size)


class _Chat:
    """One chat as its records tell it."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.title: str | None = None
        self.started: Any = None
        self.info: dict[str, Any] = {}
        self.messages: list[Message] = []
        self.seen: set[str] = set()
        self.paths: dict[str, None] = {}  # absolute paths named by tool calls, in order

    def meta(self, m: dict) -> None:
        if self.session_id is None:
            self.session_id = text_or_none(m.get("sessionId"))
        if self.started is None:
            self.started = parse_time(m.get("startTime"))[0]
        self.title = text_or_none(m.get("summary")) or self.title
        if value := text_or_none(m.get("projectHash")):
            self.info["project_hash"] = value
        if value := text_or_none(m.get("kind")):
            self.info["kind"] = value
        dirs = m.get("directories")
        for d in dirs if isinstance(dirs, list) else []:
            if isinstance(d, str) and len(self.paths) < _MAX_PATHS:
                self.paths[d] = None

    def message(self, m: Any, report) -> None:
        if not isinstance(m, dict):
            report("not an object")
            return
        mid = text_or_none(m.get("id"))
        if mid is None:
            report("message without an id")
            return
        mtype = m.get("type")
        if mtype not in MESSAGE_TYPES:
            report(f"unknown message type {mtype!r:.40}")
            return
        created, ok = parse_time(m.get("timestamp"))
        if not ok:
            report("invalid timestamp")
        parts: list[tuple[str, str, str, Any, Any, dict]] = []  # id, role, kind, content, time, meta
        if mtype == "user":
            shown = _text(m.get("displayContent"), report)
            parts.append((f"{mid}#text", "user", "text", shown or _text(m.get("content"), report),
                          created, {}))
        elif mtype == "error":
            parts.append((f"{mid}#text", "system", "text", _text(m.get("content"), report), created,
                          {"is_error": True}))
        elif mtype == "gemini":
            base = {"model": m["model"]} if isinstance(m.get("model"), str) else {}
            parts.append((f"{mid}#thinking", "assistant", "thinking", _thoughts(m.get("thoughts")),
                          created, base))
            parts.append((f"{mid}#text", "assistant", "text", _text(m.get("content"), report),
                          created, base))
            calls = m.get("toolCalls")
            if calls is not None and not isinstance(calls, list):
                report("toolCalls is not a list")
            for j, call in enumerate(calls if isinstance(calls, list) else []):
                parts.extend(_call(mid, j, call, created, base, report))
                args = call.get("args") if isinstance(call, dict) else None
                for value in args.values() if isinstance(args, dict) else []:
                    if (isinstance(value, str) and value.startswith("/") and "\n" not in value
                            and len(self.paths) < _MAX_PATHS):
                        self.paths[value] = None
        for eid, role, kind, content, when, meta in parts:
            if not isinstance(content, str) or not content.strip() or eid in self.seen:
                continue
            self.seen.add(eid)
            self.messages.append(Message(eid, role, kind, clean_text(content), when, None,
                                         clean_value({k: v for k, v in meta.items() if v is not None})))

    def sessions(self, path: Path) -> list[Session]:
        if not self.messages:
            return []
        project = _project(self.info.get("project_hash"), self.paths)
        session = Session(self.session_id or derived_session_id(path), title=self.title,
                          project=project,
                          metadata={"source_agent": SOURCE_AGENT, **self.info})
        session.messages = self.messages
        first, last = span([m.created_at for m in self.messages])
        session.started_at, session.ended_at = self.started or first, last
        return [session]


def _project(project_hash: str | None, paths: dict[str, None]) -> str | None:
    """The folder whose SHA-256 is the project hash: one of the paths or a folder above one."""
    if not project_hash:
        return None
    tried: set[str] = set()
    for p in paths:
        for folder in (PurePosixPath(p), *PurePosixPath(p).parents):
            name = clean_text(str(folder))
            if name in tried:
                continue
            tried.add(name)
            if hashlib.sha256(name.encode("utf-8", "replace")).hexdigest() == project_hash.lower():
                return name
    return None


def _call(mid: str, j: int, call: Any, created: Any, base: dict, report) -> list[tuple]:
    """A tool call record: the call, and its result when it has one."""
    if not isinstance(call, dict):
        report(f"toolCalls[{j}]: not an object")
        return []
    name = call.get("name")
    if not isinstance(name, str):
        report(f"toolCalls[{j}]: without a name")
        name = ""
    cid = text_or_none(call.get("id")) or str(j)
    when, ok = parse_time(call.get("timestamp"))
    when = when if ok and when else created
    status = call.get("status") if isinstance(call.get("status"), str) else None
    meta = {**base, "tool_use_id": cid, "tool_name": name}
    out = [(f"{mid}#call:{cid}", "assistant", "tool_call", render_call(name, call.get("args")), when, meta)]
    text, images = _result(call.get("result"))
    if not text.strip() and isinstance(call.get("resultDisplay"), str):
        text = call["resultDisplay"]
    # the shell tool reports the command's exit code in its output; the status is the tool's
    code = _EXIT.findall(text)
    exit_code = int(code[-1]) if code else None
    result_meta = {"tool_use_id": cid, "tool_name": name, "status": status, "exit_code": exit_code,
                   "is_error": status == "error" or exit_code not in (None, 0)}
    if images:
        result_meta["images"] = images
    out.append((f"{mid}#result:{cid}", "tool", "tool_result", text, when, result_meta))
    return out


def _text(content: Any, report) -> str:
    """The text of a message's content: a string, a part, or a list of parts (Gemini API
    ``Part``s). Function calls and responses in it are skipped (the tool call records hold
    them); images and files are not imported."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        report("content is neither text nor a list of parts")
        return ""
    texts = []
    for k, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif not isinstance(part, dict):
            report(f"part {k}: not an object")
        elif isinstance(part.get("text"), str):
            if part.get("thought") is not True:  # a thought part repeats the thoughts
                texts.append(part["text"])
        elif not any(key in part for key in ("functionCall", "functionResponse", "inlineData",
                                              "fileData", "executableCode", "codeExecutionResult")):
            report(f"part {k}: unknown part {sorted(part)[:3]!r:.60}")
    return "\n".join(texts)


def _thoughts(thoughts: Any) -> str | None:
    """A gemini message's thoughts ``[{subject, description}]`` as one text."""
    if not isinstance(thoughts, list):
        return None
    out = []
    for t in thoughts:
        if not isinstance(t, dict):
            continue
        subject, description = text_or_none(t.get("subject")), text_or_none(t.get("description"))
        out.append("\n".join(x for x in (subject, description) if x))
    return "\n\n".join(x for x in out if x) or None


def _result(result: Any) -> tuple[str, int]:
    """A tool call's result (Gemini API parts) as text, and how many images it held."""
    if result is None:
        return "", 0
    if isinstance(result, str):
        return result, 0
    if isinstance(result, dict):
        result = [result]
    if not isinstance(result, list):
        return "", 0
    texts, images = [], 0
    for part in result:
        if isinstance(part, str):
            texts.append(part)
        elif not isinstance(part, dict):
            continue
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            if isinstance(response, dict):
                value = next((response[k] for k in ("output", "error", "content")
                              if isinstance(response.get(k), str)), None)
                texts.append(value if value is not None
                             else json.dumps(response, ensure_ascii=False, default=str))
            elif isinstance(response, str):
                texts.append(response)
        elif "inlineData" in part or "fileData" in part:
            images += 1
    return "\n".join(texts), images


def _head(path: Path, chat: _Chat) -> None:
    """Read the session's metadata from the file's first line."""
    obj = first_line_json(path)
    if isinstance(obj, dict) and is_metadata(obj):
        chat.meta(obj)
