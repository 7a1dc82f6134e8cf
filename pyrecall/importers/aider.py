"""Aider chat histories: ``.aider.chat.history.md`` at the top of each repository aider ran in.

Aider appends every session to one Markdown file per repository:

- ``# aider chat started at 2026-03-10 09:15:02`` opens a session (local time, to the second);
- a line ``#### text`` is the user's input (each line of a multi-line input so prefixed),
  ``/add``, ``/run``, ``!cmd`` and the other commands to aider included;
- a line ``> text`` is aider's own output: the banner (version, models, repository), questions
  answered (``Add foo.py to the chat? (Y)es/(N)o [Yes]: y``), ``Applied edit to``, commits,
  warnings and errors. Aider ends each of these lines, and each input line, with two spaces (a
  Markdown line break): that is how they are told from the model's own Markdown (an output of
  several lines, as a commit message with a body, ends so at its last line);
- anything else is the model's answer (its edit blocks included), between blank lines.

Each input is a user message: a command (``/...`` or ``!...``) a ``tool_call``, with aider's
lines after it as its ``tool_result``; other inputs are ``text``, the answer after them an
assistant ``text``, aider's other lines ``system`` notes. Aider's lines before the first input
(its start-up) become session metadata (``aider_version``, ``model``) instead of a message, and the token and
cost line after each answer is dropped: both repeat in every session and would be found by
every question. The session's project is the file's folder; its title the first input that is
no command.

A session is identified by the file's path and its start line, a message by its place in the
session: a file read again (``pyrecall sync``) gives the same ids. The file grows at its end, so
it is read from the start of its last session on (what came before cannot change); aider's lines
at the very end of the file are left for the next read while no input or answer follows them
(aider writes an input or an answer whole, its own output line by line).
"""

from __future__ import annotations

import hashlib
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from ._read import Lines, checked, clean_text
from ._records import Message, ParseResult, Problem, Session

FORMAT = "aider"
SOURCE_AGENT = "aider"
FILE_NAME = ".aider.chat.history.md"   # aider's default --chat-history-file
_START = re.compile(r"^# aider chat started at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
_TOKENS = re.compile(r"^Tokens: .+ sent\b.*\breceived\b")
_TITLE_CHARS = 80

USER, NOTE, TEXT = "user", "note", "text"   # the three kinds of line


def is_history(text: str) -> bool:
    """Whether a file's first bytes are an aider chat history (its first line opens a session).

    >>> is_history("\\n# aider chat started at 2026-03-10 09:15:02\\n\\n> Aider v0.86.1  \\n")
    True
    """
    for line in text.splitlines():
        if line.strip():
            return bool(_START.match(line.strip()))
    return False


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse an aider chat history from byte ``start_offset`` on (the start of a session).

    ``end_offset`` is where its last session starts: the next read begins there, so that the
    session, still growing, is read whole again (its messages already stored are skipped).

    >>> result = parse("tests/fixtures/importers/aider/.aider.chat.history.md")
    >>> [(m.role, m.kind) for m in result.sessions[1].messages][:3]
    [('user', 'text'), ('assistant', 'text'), ('system', 'text')]
    """
    path = checked(path)
    problems: list[Problem] = []
    lines = Lines(path, start_offset, problems)
    reader = _Reader(path, problems, lines)
    for n, text, offset in lines.every_line():
        if offset == start_offset and start_offset and not _START.match(text.rstrip("\r\n")):
            # not where a session starts (the file was rewritten): read it all again
            return parse(path)
        reader.line(n, text.rstrip("\r\n"), offset)
    return ParseResult(reader.finish(), problems, FORMAT,
                       reader.last_start if reader.last_start is not None else start_offset)


class _Reader:
    """The sessions of the lines read so far, block by block."""

    def __init__(self, path: Path, problems: list[Problem], lines: Lines):
        self.path, self.problems, self.lines = path, problems, lines
        self.project = str(path.absolute().parent)
        self.sessions: list[Session] = []
        self.session: Session | None = None
        self.last_start: int | None = None       # offset of the last session's start line
        self.block: list[str] = []
        self.block_kind: str | None = None
        self.block_line = 0
        self.inputs = 0                           # inputs of the current session
        self.command = False                      # the last input was a command to aider
        self.seen: dict[str, int] = {}            # start lines met, to tell two alike apart
        self.note_open = False                    # inside one of aider's lines of several lines

    def line(self, n: int, text: str, offset: int) -> None:
        if m := _START.match(text):
            self.note_open = False
            self._flush()
            self._open(m.group(1), offset, n)
            return
        if self.note_open:
            # one of aider's lines that holds line breaks (a commit message with a body): it
            # goes on, blank lines and all, to the line that ends with its two spaces
            self.block.append(text.rstrip())
            self.note_open = not text.endswith("  ")
            return
        kind = _kind(text)
        if kind == TEXT and self.block_kind in (NOTE, USER) and text.startswith(">"):
            # right after an input or another of aider's lines (no blank line between, which an
            # answer always has before it): aider's output of several lines, e.g. /diff's
            kind, self.note_open = NOTE, True
        if kind is None:                          # a blank line
            if self.block_kind == TEXT:
                self.block.append("")             # a paragraph break of the answer
            elif self.block:
                self._flush()
            return
        if kind != self.block_kind:
            self._flush()
            self.block_kind, self.block_line = kind, n
        self.block.append(_strip(text, kind))

    def finish(self) -> list[Session]:
        if self.block_kind == NOTE:
            # aider's own lines at the end may still be being written: read again next time
            self.block, self.block_kind = [], None
        self._flush()
        return [s for s in self.sessions if s.messages]

    def _open(self, stamp: str | None, offset: int, n: int) -> None:
        """A session opened by the start line at ``offset`` (``stamp`` None: lines before any)."""
        self.last_start = offset
        key = stamp or "before the first start line"
        if key not in self.seen:
            # read from an offset: the sessions of the same second before it count too
            self.seen[key] = _starts_before(self.path, self.lines.start, stamp) if stamp else 0
        self.seen[key] += 1
        if self.seen[key] > 1:
            key = f"{key}#{self.seen[key]}"       # two sessions started in the same second
        digest = hashlib.sha1(os.fsencode(self.path.absolute()) + b"\x1f" + key.encode()).hexdigest()
        started = None
        if stamp is not None:
            try:
                # aider writes the machine's local time: taken as such, kept in UTC
                started = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").astimezone(UTC)
            except ValueError:
                self.lines.report(n, f"invalid start time {stamp!r}")
        self.session = Session(f"aider-{digest[:20]}", project=self.project, started_at=started,
                               metadata={"source_agent": SOURCE_AGENT})
        self.sessions.append(self.session)
        self.inputs, self.command = 0, False

    def _flush(self) -> None:
        kind, block = self.block_kind, self.block
        self.block, self.block_kind = [], None
        if kind is None or not block:
            return
        if self.session is None:
            # lines before any start line (a file cut at its head): a session of their own
            self._open(None, self.lines.start, self.block_line)
        s = self.session
        if kind == NOTE:
            block = self._notes(block)
        content = clean_text("\n".join(block)).strip()
        if not content or (kind == USER and content == "<blank>"):
            return
        if kind == USER:
            self.inputs += 1
            self.command = content.startswith(("/", "!"))
            if self.command:
                # as typed (`/add app/db.py`, `!pytest -q`), named in the metadata as aider does
                words = content[1:].split(None, 1)
                name = "run" if content.startswith("!") else (words[0] if words else "")
                self._add("user", "tool_call", content, {"tool_name": name})
            else:
                if s.title is None:
                    first = content.splitlines()[0]
                    s.title = first if len(first) <= _TITLE_CHARS else first[:_TITLE_CHARS - 1] + "…"
                self._add("user", "text", content)
        elif kind == TEXT:
            self.command = False
            self._add("assistant", "text", content)
        elif self.command:
            self.command = False
            self._add("tool", "tool_result", content)
        else:
            self._add("system", "text", content)

    def _notes(self, block: list[str]) -> list[str]:
        """Aider's lines without the token counts; before the first input none: they are its
        start-up (the command line, version, models, repository, the files added, questions about
        .gitignore), of which the version and the model are kept in the session's metadata."""
        if self.inputs == 0 and self.session is not None:
            meta = self.session.metadata
            for line in block:
                if m := re.match(r"^Aider v(\S+)", line):
                    meta.setdefault("aider_version", m.group(1))
                elif m := re.match(r"^(?:Main )?[Mm]odel: (\S+)", line):
                    meta.setdefault("model", m.group(1))
            return []
        return [line for line in block if not _TOKENS.match(line)]

    def _add(self, role: str, kind: str, content: str, metadata: dict | None = None) -> None:
        s = self.session
        s.messages.append(Message(f"{s.session_id}#{len(s.messages)}", role, kind, content,
                                  created_at=s.started_at, metadata=metadata or {}))


def _starts_before(path: Path, end: int, stamp: str) -> int:
    """How many start lines of ``stamp`` the file holds before byte ``end`` (what comes before
    read once, a piece at a time; nothing to read when the read starts at the file's start)."""
    if end <= 0:
        return 0
    line = re.compile(rb"\n# aider chat started at " + re.escape(stamp.encode()) + rb"[ \t]*\r?\n")
    longest = len(stamp) + 40                # more than a match can span
    count, carry = 0, b"\n"                  # the file's first line starts a line too
    with open(path, "rb") as f:
        while end > 0:
            piece = f.read(min(end, 1 << 22))
            if not piece:
                break
            end -= len(piece)
            buf = carry + piece
            # a match ending in what was carried over was counted with the piece before
            count += sum(1 for m in line.finditer(buf) if m.end() > len(carry))
            carry = buf[-longest:]
    return count


def _kind(text: str) -> str | None:
    """USER, NOTE or TEXT for a line of the file, None for a blank one."""
    if not text.strip():
        return None
    if text.endswith("  "):          # aider's Markdown line break: its input and output lines
        if text.startswith("####") and (len(text) == 4 or text[4] == " "):
            return USER
        if text.startswith(">"):
            return NOTE
    return TEXT


def _strip(text: str, kind: str) -> str:
    if kind == USER:
        return text[5:].rstrip() if len(text) > 4 else ""
    if kind == NOTE:
        return text[2:].rstrip() if text.startswith("> ") else text[1:].rstrip()
    return text.rstrip()
