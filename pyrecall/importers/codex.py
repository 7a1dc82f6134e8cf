"""Codex CLI rollout files: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``.

One JSON object per line: ``{"timestamp", "type", "payload"}``. The first line is the
``session_meta`` (session id, cwd, cli version, git branch); ``response_item`` lines are the
conversation as the model saw it: ``message`` (user ``input_text`` / assistant
``output_text``), ``reasoning`` (its summary, or its text when not encrypted), tool calls
(``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call``) and their
outputs (``function_call_output``, ``custom_tool_call_output``), joined by ``call_id``.
``turn_context`` lines give the model; ``event_msg`` lines repeat for the terminal what the
response items hold, and ``compacted`` lines summarise history that is already in the file:
both are skipped. Any other line type is skipped and reported.

Rollouts written before ``session_meta`` existed (mid 2025) start with a bare header ``{"id",
"timestamp", "instructions", "git"?}``, hold ``{"record_type": "state"}`` markers and the
response items themselves, without envelope or timestamp: they are read too.

A file holds one session. Codex appends to it as the session goes on (and when it is
resumed), so it is read from a byte offset like Claude Code's transcripts; the lines appended
name no session, which is why the session id then comes from the file's first line.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ._read import (
    Lines,
    checked,
    clean_text,
    clean_value,
    derived_session_id,
    first_line_json,
    parse_time,
    render_call,
    span,
    text_or_none,
)
from ._records import Message, ParseResult, Problem, Session

FORMAT = "codex"
SOURCE_AGENT = "codex"
LINE_TYPES = ("session_meta", "response_item", "turn_context", "event_msg", "compacted")
ITEM_TYPES = ("message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
              "custom_tool_call_output", "local_shell_call", "web_search_call")
# response items that hold nothing to remember: harness snapshots, encrypted compaction
SILENT_ITEMS = ("ghost_snapshot", "compaction", "compaction_summary", "other")
# user messages that Codex writes itself at the start of a session or turn, not the user
HARNESS_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions for",
                    "<turn_aborted>")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_EXIT = re.compile(r"^(?:Exit code: |Process exited with code )(-?\d+)\s*$", re.M)


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse a Codex CLI rollout file from byte ``start_offset`` on.

    Each text part, reasoning, tool call and tool output becomes one message; a call and its
    output share ``metadata.tool_use_id`` (the ``call_id``), as Claude Code's do.

    >>> result = parse("tests/fixtures/importers/codex/"
    ...                "rollout-2026-03-04T10-15-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl")
    >>> [(m.role, m.kind) for m in result.sessions[0].messages][:3]
    [('user', 'text'), ('assistant', 'thinking'), ('assistant', 'text')]
    """
    path = checked(path)
    problems: list[Problem] = []
    lines = Lines(path, start_offset, problems)
    state = _State()
    for n, obj in lines.objects():
        kind = obj.get("type")
        if kind is None and is_legacy_header(obj):
            state.meta(obj, lines, n)
            continue
        if kind is None and "record_type" in obj:
            continue  # a legacy state marker
        if not isinstance(kind, str):
            lines.report(n, "line without a type")
            continue
        if kind in ITEM_TYPES and "payload" not in obj:
            # a legacy rollout: the response item itself, without envelope or timestamp
            try:
                state.item(obj, parse_time(obj.get("timestamp"))[0], lines, n)
            except RecursionError:
                lines.report(n, "content nested too deeply")
            continue
        if kind not in LINE_TYPES:
            lines.report(n, f"unknown line type {kind!r:.40}")
            continue
        payload = obj.get("payload")
        if not isinstance(payload, dict):
            lines.report(n, f"{kind} line without a payload object")
            continue
        created, ok = parse_time(obj.get("timestamp"))
        if not ok:
            lines.report(n, "invalid timestamp")
        try:
            if kind == "session_meta":
                state.meta(payload, lines, n)
            elif kind == "turn_context":
                state.turn(payload)
            elif kind == "response_item":
                state.item(payload, created, lines, n)
        except RecursionError:
            lines.report(n, "content nested too deeply")

    if not state.messages:
        return ParseResult([], problems, FORMAT, lines.end_offset)
    if state.session_id is None and lines.start:
        # appended lines name no session: the file's first line does
        _head(path, state)
    session = Session(state.session_id or _id_from_name(path), project=state.project,
                      branch=state.branch, metadata={"source_agent": SOURCE_AGENT, **state.info})
    session.messages = state.messages
    first, last = span([m.created_at for m in state.messages])
    session.started_at, session.ended_at = first or state.started, last
    return ParseResult([session], problems, FORMAT, lines.end_offset)


class _State:
    """What the lines read so far say about the session, and its messages."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.project: str | None = None
        self.branch: str | None = None
        self.info: dict[str, Any] = {}
        self.model: str | None = None
        self.started: Any = None
        self.messages: list[Message] = []
        self.tools: dict[str, str] = {}  # call_id -> tool name, to name the outputs

    def meta(self, p: dict, lines: Lines | None = None, n: int = 0) -> None:
        # the first session_meta names the session; a resumed or forked one may repeat it
        if self.session_id is not None:
            return
        self.session_id = text_or_none(p.get("id"))
        if self.session_id is None and lines is not None:
            lines.report(n, "session_meta without an id: used the file name")
        self.project = text_or_none(p.get("cwd")) or self.project
        self.started = parse_time(p.get("timestamp"))[0]
        git = p.get("git")
        if isinstance(git, dict) and (branch := text_or_none(git.get("branch"))):
            self.branch = branch
        for key, name in (("cli_version", "version"), ("originator", "originator"),
                          ("model_provider", "model_provider")):
            if value := text_or_none(p.get(key)):
                self.info[name] = value

    def turn(self, p: dict) -> None:
        self.model = text_or_none(p.get("model")) or self.model
        if self.project is None:
            self.project = text_or_none(p.get("cwd"))

    def item(self, p: dict, created: Any, lines: Lines, n: int) -> None:
        itype = p.get("type")
        line = lines.number(n)
        out: list[tuple[str, str, Any, dict]] = []  # role, kind, content, metadata
        if itype == "message":
            out = self._message(p, lines, n)
        elif itype == "reasoning":
            out = [("assistant", "thinking", _reasoning(p), self._base())]
        elif itype in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            out = [self._call(itype, p, lines, n)]
        elif itype in ("function_call_output", "custom_tool_call_output"):
            call_id = text_or_none(p.get("call_id"))
            text, exit_code, images = _output(p.get("output"))
            meta: dict[str, Any] = {"tool_use_id": call_id,
                                    "tool_name": self.tools.get(call_id) if call_id else None,
                                    "is_error": exit_code is not None and exit_code != 0}
            if isinstance(exit_code, int) and not isinstance(exit_code, bool):
                meta["exit_code"] = exit_code
            elif exit_code is False:  # {"success": false}
                meta["is_error"] = True
            if images:
                meta["images"] = images
            if call_id is None:
                lines.report(n, f"{itype} without a call_id")
            out = [("tool", "tool_result", text, meta)]
        elif itype in SILENT_ITEMS:
            return
        else:
            lines.report(n, f"unknown response_item type {itype!r:.40}")
            return
        kept = [(role, kind, content, meta) for role, kind, content, meta in out
                if isinstance(content, str) and content.strip()]
        for i, (role, kind, content, meta) in enumerate(kept):
            eid = f"L{line}#{i}" if len(kept) > 1 else f"L{line}"
            self.messages.append(Message(eid, role, kind, clean_text(content), created, None,
                                         clean_value({k: v for k, v in meta.items() if v is not None})))

    def _base(self) -> dict:
        return {"model": self.model} if self.model else {}

    def _message(self, p: dict, lines: Lines, n: int) -> list[tuple[str, str, Any, dict]]:
        role = p.get("role")
        if role in ("developer",):
            return []  # the harness's instructions (sandbox, approvals), the same every session
        if role not in ("user", "assistant", "system"):
            lines.report(n, f"message with unknown role {role!r:.40}")
            return []
        content = p.get("content")
        if isinstance(content, str):
            content = [{"type": "input_text", "text": content}]
        if not isinstance(content, list):
            lines.report(n, "message content is neither text nor a list of parts")
            return []
        out, images = [], 0
        meta = self._base() if role == "assistant" else {}
        for i, part in enumerate(content):
            ptype = part.get("type") if isinstance(part, dict) else None
            if ptype in ("input_text", "output_text", "text"):
                text = part.get("text")
                if role == "user" and isinstance(text, str) and text.lstrip().startswith(HARNESS_PREFIXES):
                    continue
                out.append((role, "text", text, meta))
            elif ptype in ("input_image", "image"):
                images += 1
            elif ptype == "refusal":
                out.append((role, "text", part.get("refusal"), meta))
            else:
                lines.report(n, f"part {i}: unknown part type {ptype!r:.40}")
        if images:
            # images are not imported; the text beside them says that there were some
            out = [(r, k, c, {**m, "images": images}) for r, k, c, m in out]
        return out

    def _call(self, itype: str, p: dict, lines: Lines, n: int) -> tuple[str, str, Any, dict]:
        call_id = text_or_none(p.get("call_id"))
        if itype == "local_shell_call":
            name, args = "local_shell", p.get("action")
            if isinstance(args, dict) and args.get("type") == "exec":
                args = {k: v for k, v in args.items() if k != "type" and v is not None}
        elif itype == "web_search_call":
            name, args = "web_search", p.get("action")
            if isinstance(args, dict):
                args = {k: v for k, v in args.items() if k != "type"}
        else:
            name = p.get("name")
            if not isinstance(name, str):
                lines.report(n, f"{itype} without a name")
                name = ""
            raw = p.get("arguments") if itype == "function_call" else p.get("input")
            if itype == "function_call":
                args = _arguments(raw)
            else:
                args = {"input": raw} if raw is not None else None
        if call_id:
            self.tools[call_id] = name
        meta = {**self._base(), "tool_use_id": call_id, "tool_name": name}
        return "assistant", "tool_call", render_call(name, args), meta


def _arguments(raw: Any) -> Any:
    """A function call's arguments: a JSON object given as text, shown as its fields."""
    if isinstance(raw, str):
        try:
            value = json.loads(raw, strict=False)
        except ValueError:
            return raw
        return value if isinstance(value, dict) else raw
    return raw


def _reasoning(p: dict) -> str | None:
    """The readable text of a reasoning item: its full text when Codex kept it (open models),
    else its summary; None when it is encrypted only."""
    parts = []
    for key, types in (("content", ("reasoning_text", "text")), ("summary", ("summary_text",))):
        items = p.get(key)
        if isinstance(items, list):
            parts = [x["text"] for x in items if isinstance(x, dict) and x.get("type") in types
                     and isinstance(x.get("text"), str) and x["text"].strip()]
        if parts:
            break
    return "\n\n".join(parts) or None


def _output(value: Any) -> tuple[str, int | bool | None, int]:
    """A tool output's text, its exit code (False for a call marked unsuccessful) and images.

    Codex writes an output as text: a JSON object ``{"output", "metadata": {"exit_code"}}``
    for shell calls of older versions, ``Exit code: N ... Output:`` text in newer ones, else
    the tool's own text; MCP results may be a list of content items.
    """
    if isinstance(value, str):
        if value.lstrip().startswith("{"):
            try:
                obj = json.loads(value, strict=False)
            except (ValueError, RecursionError):
                obj = None
            if isinstance(obj, dict) and isinstance(obj.get("output"), str):
                meta = obj.get("metadata")
                code = meta.get("exit_code") if isinstance(meta, dict) else None
                return obj["output"], code if isinstance(code, int) else None, 0
        m = _EXIT.search(value[:400])
        return value, int(m.group(1)) if m else None, 0
    if isinstance(value, dict):
        text, code, images = _output(value.get("content"))
        return text, (False if value.get("success") is False else code), images
    if isinstance(value, list):
        texts, images = [], 0
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                texts.append(item["text"])
            elif isinstance(item, dict) and item.get("type") in ("input_image", "image"):
                images += 1
        return "\n".join(texts), None, images
    return "", None, 0


def _head(path: Path, state: _State) -> None:
    """Read the session_meta from the file's first line."""
    obj = first_line_json(path)
    meta = None
    if isinstance(obj, dict) and obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict):
        meta = obj["payload"]
    elif isinstance(obj, dict) and is_legacy_header(obj):
        meta = obj
    if meta is not None:
        project = state.project
        state.meta(meta)
        # the project stays the session's first cwd, which sync keeps anyway
        state.project = state.project or project


def is_legacy_header(obj: dict) -> bool:
    """Whether a line is the header of a rollout written before session_meta existed."""
    return "type" not in obj and isinstance(obj.get("id"), str) and "timestamp" in obj \
        and "instructions" in obj


def _id_from_name(path: Path) -> str:
    """The session id Codex puts at the end of a rollout file's name, else one derived from
    the path."""
    found = _UUID.findall(path.stem)
    return found[-1].lower() if found else derived_session_id(path)
