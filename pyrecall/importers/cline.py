"""Cline and Roo Code tasks (VS Code extensions): ``<globalStorage>/<extension>/tasks/<task id>/``.

``api_conversation_history.json`` holds the task as the model saw it: a list of Anthropic
messages ``{role, content}``, content a text or a list of blocks (``text``, ``image``,
``tool_use``, ``tool_result``, ``thinking``). The extension speaks to the model in XML inside the
text: an answer holds ``<thinking>...</thinking>`` and tool calls such as
``<execute_command><command>pytest</command></execute_command>``; the next user message starts
with ``[execute_command for 'pytest'] Result:`` and the tool's output, and ends with
``<environment_details>`` (open tabs, the time, the workspace's files). Read here:

- the task (``<task>``), the user's feedback and answers: user text; the first task is the title;
- ``<thinking>``: thinking; the rest of an answer: assistant text;
- a tool call (XML, or a ``tool_use`` block): a tool call, its result (the text after the
  ``[tool] Result:`` line, or a ``tool_result`` block) a tool result, an error marked
  ``is_error``; ``attempt_completion``'s result, ``plan_mode_respond``'s response and
  ``ask_followup_question``'s question are what the user reads: assistant text;
- ``<environment_details>`` and the task-resumption notices are left out (they repeat in every
  message), but give the project: the workspace folder they name.

Cline's CLI (3.x) keeps a session as ``~/.cline/data/sessions/<id>/<id>.messages.json``: the
same messages (``tool_use`` and ``tool_result`` blocks, each message's ``ts``; the input as
``<user_input mode="act">``), beside ``<id>.json``, which gives the working folder, the title and
the model: read too (:func:`parse` tells them by the name).

The sibling files give what the history lacks: ``ui_messages.json`` the times (the first and
last message's ``ts``), ``task_metadata.json`` the model. The session is ``<agent>-<task id>``,
``source_agent`` the extension's (``cline``, ``roo-code``, ``kilo-code``: from the folder, else
``cline``). The file is rewritten whole as the task goes on: it is read whole when it changes,
and a message is identified by what it says (a message stored before is not stored again).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ._read import (
    checked,
    clean_text,
    clean_value,
    parse_time,
    read_document,
    render_call,
    span,
    text_or_none,
)
from ._records import Message, ParseResult, Problem, Session

FORMAT = "cline"
FILE_NAME = "api_conversation_history.json"
SIDECARS = ("ui_messages.json", "task_metadata.json", "settings.json")   # read with it, not alone
EXTENSIONS = {"saoudrizwan.claude-dev": "cline", "rooveterinaryinc.roo-cline": "roo-code",
              "kilocode.kilo-code": "kilo-code"}
# the tools of Cline's and Roo Code's XML protocol (a tag of another name is text)
TOOLS = ("execute_command", "read_file", "write_to_file", "replace_in_file", "search_files", "list_files",
         "list_code_definition_names", "browser_action", "use_mcp_tool", "access_mcp_resource",
         "ask_followup_question", "attempt_completion", "new_task", "plan_mode_respond",
         "load_mcp_documentation", "web_fetch", "condense", "summarize_task", "report_bug", "new_rule",
         "apply_diff", "insert_content", "search_and_replace", "switch_mode", "fetch_instructions",
         "codebase_search", "update_todo_list", "focus_chain")
# tools whose parameter is what the user reads: an answer, not a call
SAID = {"attempt_completion": "result", "plan_mode_respond": "response", "ask_followup_question": "question"}
_CALL = re.compile(r"<(" + "|".join(TOOLS) + r")>(.*?)</\1>", re.S)
_PARAM = re.compile(r"<(\w+)>\n?(.*?)\n?</\1>", re.S)
_THINKING = re.compile(r"<thinking>\s*(.*?)\s*</thinking>", re.S)
_ENV = re.compile(r"<environment_details>.*?(?:</environment_details>|\Z)", re.S)
_WORKSPACE = re.compile(r"# Current (?:Working|Workspace) Directory \((.+?)\) Files")
_RESULT = re.compile(r"^\[(\w+)(?: for '(.*?)')?\] Result:\s*", re.S)
_WRAPPED = re.compile(r"<(task|feedback|answer|user_message|user_input)(?: [^>]*)?>\s*(.*?)\s*</\1>", re.S)
_FAILED = "The tool execution failed with the following error:"
_NOTICES = ("[TASK RESUMPTION]", "[Response interrupted by")
_TITLE_CHARS = 80


CLI_SUFFIX = ".messages.json"     # Cline's CLI: <session id>.messages.json, its <session id>.json beside it


def is_task_file(path: str | os.PathLike) -> bool:
    """Whether a file is a Cline / Roo Code task's history (by its name: its content is a list
    of chat messages as many exports' are), or a session of Cline's CLI."""
    return Path(path).name == FILE_NAME or Path(path).name.endswith(CLI_SUFFIX)


def is_cli_meta(name: str, names) -> bool:
    """Whether a file is the <id>.json beside a Cline CLI session's <id>.messages.json."""
    return name.endswith(".json") and not name.endswith(CLI_SUFFIX) and name[:-5] + CLI_SUFFIX in names


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse a task's api_conversation_history.json (read whole, whatever ``start_offset``).

    >>> result = parse("tests/fixtures/importers/cline/tasks/1767000000000/api_conversation_history.json")
    >>> [(m.role, m.kind) for m in result.sessions[0].messages][:4]
    [('user', 'text'), ('assistant', 'thinking'), ('assistant', 'tool_call'), ('tool', 'tool_result')]
    """
    path = checked(path)
    if path.name.endswith(CLI_SUFFIX):
        return _parse_cli(path)
    doc, problems, size = read_document(path, depth=2)
    root = doc.value
    if not isinstance(root, list):
        if root is not None:
            problems.append(Problem(str(path), 1, "not a task history: no list of messages"))
        return ParseResult([], problems, FORMAT, size)
    task = path.absolute().parent
    agent = next((v for k, v in EXTENSIONS.items() if k in task.parts), "cline")
    session = Session(f"{agent}-{task.name}", metadata={"source_agent": agent})
    reader = _Reader(str(path), problems)
    reader.read(doc, root)
    session.messages = reader.out
    session.project = reader.project
    session.title = reader.title
    _sidecars(task, session, problems)
    return ParseResult([session] if session.messages else [], problems, FORMAT, size)


class _Reader:
    def __init__(self, path: str, problems: list[Problem]):
        self.path, self.problems = path, problems
        self.out: list[Message] = []
        self.project: str | None = None
        self.title: str | None = None
        self.calls: dict[str, str] = {}     # tool_use id -> tool name
        self._pending: tuple[str, str] | None = None   # a "[tool] Result:" line whose output follows

    def read(self, doc, messages: list) -> None:
        """Every message of the document's list, a broken one reported."""
        for i, m in enumerate(messages):
            line = doc.line(m)
            if not isinstance(m, dict):
                self.problems.append(Problem(self.path, line, f"messages[{i}]: not a message"))
                continue
            if not doc.complete(m):
                continue  # cut off by the damage the document error reports
            try:
                self.message(m, i, line)
            except RecursionError:
                self.problems.append(Problem(self.path, line, f"messages[{i}]: nested too deeply"))

    def message(self, m: dict, i: int, line: int | None) -> None:
        role = m.get("role")
        if role not in ("user", "assistant"):
            self.problems.append(Problem(self.path, line, f"messages[{i}]: unknown role {role!r:.40}"))
            return
        created, ok = parse_time(m.get("ts"))
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            self.problems.append(Problem(self.path, line, f"messages[{i}]: content is neither text nor a list"))
            return
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                (self._user_text if role == "user" else self._answer)(block["text"], created)
            elif kind == "tool_use" and role == "assistant" and isinstance(block.get("name"), str):
                self._call(block["name"], block.get("input"), created, block.get("id"))
            elif kind == "tool_result" and role == "user":
                self._result(_blocks_text(block.get("content")), created, block.get("tool_use_id"),
                             block.get("is_error") is True or _failed(block.get("content")),
                             block.get("name") if isinstance(block.get("name"), str) else None)
            elif kind == "thinking" and role == "assistant" and isinstance(block.get("thinking"), str):
                self._add("assistant", "thinking", block["thinking"], created)
            elif kind in ("image", "redacted_thinking", "document"):
                continue
            else:
                self.problems.append(Problem(self.path, line, f"messages[{i}]: unknown block {kind!r:.40}"))

    def _user_text(self, text: str, created) -> None:
        if self.project is None and (m := _WORKSPACE.search(text)):
            self.project = m.group(1).strip()
        text = _ENV.sub("", text).strip()
        if not text or text.startswith(_NOTICES):
            return
        if m := _RESULT.match(text):               # a tool's result, its output after the line
            tool, rest = m.group(1), text[m.end():]
            if tool in SAID:                        # the user's answer to the question or result
                said = [w.group(2) for w in _WRAPPED.finditer(rest)]
                if said:
                    self._add("user", "text", "\n\n".join(said), created)
                return
            self._pending = (tool, rest)
            if rest.strip():
                self._result(rest, created, None, rest.startswith(_FAILED), tool)
                self._pending = None
            return
        if self._pending:                          # the output, in the block after its line
            tool, _ = self._pending
            self._pending = None
            self._result(text, created, None, text.startswith(_FAILED), tool)
            return
        wrapped = [w.group(2) for w in _WRAPPED.finditer(text)]
        said = "\n\n".join(wrapped) if wrapped else text
        if self.title is None and said.strip():
            first = said.strip().splitlines()[0]
            self.title = first if len(first) <= _TITLE_CHARS else first[:_TITLE_CHARS - 1] + "…"
        self._add("user", "text", said, created)

    def _answer(self, text: str, created) -> None:
        """An answer's text: its thinking, its words and its XML tool calls, in order."""
        pos = 0
        pieces = sorted([(m.start(), m.end(), "thinking", m) for m in _THINKING.finditer(text)]
                        + [(m.start(), m.end(), "call", m) for m in _CALL.finditer(text)])
        for start, end, what, m in pieces:
            if start < pos:
                continue                            # inside a piece taken already
            self._add("assistant", "text", text[pos:start], created)
            if what == "thinking":
                self._add("assistant", "thinking", m.group(1), created)
            else:
                params = {p.group(1): p.group(2) for p in _PARAM.finditer(m.group(2))}
                self._call(m.group(1), params, created, None)
            pos = end
        self._add("assistant", "text", text[pos:], created)

    def _call(self, name: str, args: Any, created, call_id) -> None:
        if name in SAID and isinstance(args, dict) and isinstance(args.get(SAID[name]), str):
            self._add("assistant", "text", args[SAID[name]], created)
            return
        if call_id:
            self.calls[str(call_id)] = name
        meta = {"tool_name": name, **({"tool_use_id": str(call_id)} if call_id else {})}
        self._add("assistant", "tool_call", render_call(name, args), created, meta)

    def _result(self, text: str, created, call_id, error: bool, tool: str | None = None) -> None:
        text = _ENV.sub("", text).strip()
        name = tool or (self.calls.get(str(call_id)) if call_id else None)
        if name in SAID:
            return
        meta = {"is_error": error, **({"tool_name": name} if name else {}),
                **({"tool_use_id": str(call_id)} if call_id else {})}
        self._add("tool", "tool_result", text, created, meta)

    def _add(self, role: str, kind: str, content: str, created, meta: dict | None = None) -> None:
        content = clean_text(content).strip()
        if content:
            self.out.append(Message(None, role, kind, content, created, None, clean_value(meta or {})))


def _blocks_text(content: Any) -> str:
    """A tool result's text: its text blocks, or (Cline's CLI) each item's result, after the
    query it answers when there are several."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out = []
    for b in content:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            out.append(b["text"])
        elif isinstance(b.get("result"), str):
            query = b.get("query") if isinstance(b.get("query"), str) and len(content) > 1 else None
            out.append(f"{query}:\n{b['result']}" if query else b["result"])
        elif isinstance(b.get("error"), str):
            out.append(b["error"])
    return "\n".join(out)


def _failed(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("success") is False for b in content)


def _sidecars(task: Path, session: Session, problems: list[Problem]) -> None:
    """The times from ui_messages.json, the model from task_metadata.json; a task id of
    milliseconds since 1970 (Cline's) when there are no times."""
    times = []
    for name in ("ui_messages.json", "task_metadata.json"):
        try:
            value = json.loads((task / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            problems.append(Problem(str(task / name), None, f"not read ({type(exc).__name__})"))
            continue
        if name == "ui_messages.json" and isinstance(value, list):
            times = [parse_time(x.get("ts"))[0] for x in value if isinstance(x, dict)]
        elif isinstance(value, dict) and isinstance(value.get("model_usage"), list):
            models = [u.get("model_id") for u in value["model_usage"] if isinstance(u, dict)]
            if models and isinstance(models[-1], str):
                session.metadata["model"] = models[-1]
    first, last = span(times + [m.created_at for m in session.messages])
    if first is None and re.fullmatch(r"\d{13}", task.name):
        first = parse_time(int(task.name))[0]
    session.started_at, session.ended_at = first, last


def _parse_cli(path: Path) -> ParseResult:
    """A session of Cline's CLI: <id>.messages.json, and <id>.json beside it."""
    doc, problems, size = read_document(path, depth=3)
    root = doc.value
    messages = root.get("messages") if isinstance(root, dict) else None
    if not isinstance(messages, list):
        if root is not None:
            problems.append(Problem(str(path), 1, "not a Cline session: no list of messages"))
        return ParseResult([], problems, FORMAT, size)
    sid = text_or_none(root.get("sessionId")) or path.name.removesuffix(CLI_SUFFIX)
    session = Session(f"cline-{sid}", metadata={"source_agent": "cline"})
    reader = _Reader(str(path), problems)
    reader.read(doc, messages)
    session.messages, session.title = reader.out, reader.title
    meta_path = path.with_name(path.name.removesuffix(CLI_SUFFIX) + ".json")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        meta = {}
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(meta_path), None, f"not read ({type(exc).__name__})"))
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    session.project = text_or_none(meta.get("workspace_root")) or text_or_none(meta.get("cwd")) or reader.project
    extra = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else {}
    session.title = text_or_none(extra.get("title")) or session.title
    if model := text_or_none(meta.get("model")):
        session.metadata["model"] = model
    first, last = span([m.created_at for m in session.messages])
    session.started_at = parse_time(meta.get("started_at"))[0] or first
    session.ended_at = parse_time(meta.get("ended_at"))[0] or last
    return ParseResult([session] if session.messages else [], problems, FORMAT, size)
