"""Reading helpers shared by the importers: lines from an offset, lenient JSON documents,
timestamps, and values made storable in PostgreSQL."""

from __future__ import annotations

import bisect
import codecs
import hashlib
import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._errors import ImportFormatError
from .._text import clean_text, clean_value  # noqa: F401  (clean_value: for the importers)
from ._records import Problem

# strict=False accepts raw control characters inside strings: better to keep such a line
# than to lose it for a tab its writer forgot to escape.
_DECODER = json.JSONDecoder(strict=False)
_WS = re.compile(r"[ \t\n\r]*")


def checked(path: str | os.PathLike) -> Path:
    """``path`` as a Path, or ImportFormatError when it is not a readable file."""
    p = Path(path)
    if not p.exists():
        raise ImportFormatError(f"{p}: no such file")
    if not p.is_file():
        raise ImportFormatError(f"{p}: not a file")
    return p


HEAD_LIMIT = 16 << 20  # a first line may carry a session's base instructions: tens of KB


def first_line_json(path: Path, limit: int = HEAD_LIMIT) -> Any:
    """The JSON value of a file's first line (read up to ``limit`` bytes), None when it does not
    parse; a file that cannot be read is an ImportFormatError."""
    try:
        with open(path, "rb") as f:
            first = f.readline(limit)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return json.loads(first.decode("utf-8", "replace"), strict=False)
    except (ValueError, RecursionError):
        return None


def text_or_none(value: Any) -> str | None:
    """A non-empty cleaned string, else None."""
    if isinstance(value, str):
        value = clean_text(value).strip()
        return value or None
    return None


def id_or_none(value: Any) -> str | None:
    """An id given as text or integer, as text (JSON exports write ids either way)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return text_or_none(value)


def parse_time(value: Any) -> tuple[datetime | None, bool]:
    """ISO 8601 text or epoch seconds (or milliseconds) → ``(aware UTC datetime, True)``.

    ``(None, True)`` when absent, ``(None, False)`` when present but unreadable.

    >>> parse_time("2026-03-02T09:15:00.120Z")[0].isoformat()
    '2026-03-02T09:15:00.120000+00:00'
    """
    if value is None or value == "":
        return None, True
    try:
        if isinstance(value, bool):
            return None, False
        if isinstance(value, int | float):
            # Past 1e11 seconds (year 5138) a number can only be milliseconds.
            seconds = value / 1000 if abs(value) > 1e11 else value
            return datetime.fromtimestamp(seconds, tz=UTC), True
        if isinstance(value, str):
            dt = datetime.fromisoformat(value.strip())
            # Transcripts write UTC; a naive time is taken as UTC rather than local time,
            # so that the same file imports the same on every machine.
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=UTC)
            return dt.astimezone(UTC), True
    except (ValueError, OverflowError, OSError):
        pass
    return None, False


def span(times: list[datetime | None]) -> tuple[datetime | None, datetime | None]:
    """(earliest, latest) of the known times."""
    known = [t for t in times if t is not None]
    return (min(known), max(known)) if known else (None, None)


def derived_session_id(path: Path) -> str:
    """A session id for a file that names none: its stem plus a hash of its absolute path,
    stable across imports and distinct for same-named files in different folders.

    >>> derived_session_id(Path("/data/chat.json"))
    'chat-5f059f6211b2'
    """
    digest = hashlib.sha1(os.fsencode(path.absolute())).hexdigest()[:12]
    return f"{clean_text(path.stem)}-{digest}"


def render_call(name: str, args: Any) -> str:
    """A tool call as readable text: ``name(key=json value, ...)``.

    Multi-line strings (code, file contents, patches) are kept verbatim between triple quotes
    instead of JSON-escaped, so that they stay readable and searchable by word.

    >>> render_call("Bash", {"command": "pytest -q", "timeout": 60})
    'Bash(command="pytest -q", timeout=60)'
    """
    if isinstance(args, dict):
        parts = []
        for key, value in args.items():
            if isinstance(value, str) and "\n" in value:
                parts.append(f'{key}="""\n{value}\n"""')
            else:
                parts.append(f"{key}={json.dumps(value, ensure_ascii=False)}")
        inner = ", ".join(parts)
    elif args is None:
        inner = ""
    else:
        inner = json.dumps(args, ensure_ascii=False)
    return f"{name}({inner})"


class Lines:
    """The complete lines of a file from a byte offset, decoded, for line formats.

    ``objects()`` yields ``(n, obj)`` for every line holding a JSON object and reports the
    others; ``report(n, reason)`` adds a Problem with the line's number in the file.
    ``end_offset`` is the offset after the last line consumed. A last line without newline is
    consumed only when it already is a whole JSON object (a writer may be in the middle of
    it otherwise); any other unterminated line is left for the next read, unreported.
    """

    def __init__(self, path: Path, start_offset: int, problems: list[Problem]):
        self.path = path
        self.problems = problems
        self.start = start_offset
        self.end_offset = start_offset
        self._base: int | None = None  # lines before start_offset, counted on first need

    def report(self, n: int, reason: str) -> None:
        self.problems.append(Problem(str(self.path), self.number(n), reason))

    def number(self, n: int) -> int:
        """The line number in the whole file of the n-th line read (1-based)."""
        if self._base is None:
            self._base = _count_newlines(self.path, self.start) if self.start else 0
        return self._base + n

    def __iter__(self) -> Iterator[tuple[int, str]]:
        for n, text, _ in self.every_line():
            if text.strip():
                yield n, text

    def every_line(self) -> Iterator[tuple[int, str, int]]:
        """``(n, text, offset)`` for every complete line, blank ones too, with the byte offset
        where it starts (for a text format read from a line of its own choosing)."""
        try:
            f = open(self.path, "rb")
        except OSError as exc:
            raise ImportFormatError(f"{self.path}: cannot read ({exc.strerror})") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            if self.start > size:
                # The file was rewritten shorter than what was consumed: read it again.
                self.problems.append(Problem(
                    str(self.path), None,
                    f"file is shorter than the start offset {self.start}: read from the start"))
                self.start = self.end_offset = 0
            f.seek(self.start)
            offset, n = self.start, 0
            for raw in f:
                n += 1
                if not raw.endswith(b"\n") and not _is_object(raw):
                    return
                start = offset
                offset += len(raw)
                self.end_offset = offset
                text = self._decode(n, raw)
                if offset == len(raw):
                    text = text.lstrip("\ufeff")  # a BOM some editors put first
                yield n, text, start

    def objects(self) -> Iterator[tuple[int, dict]]:
        for n, text in self:
            try:
                obj = _DECODER.decode(text.strip())
            except json.JSONDecodeError as exc:
                self.report(n, f"invalid JSON: {exc.msg} (column {exc.colno})")
                continue
            except RecursionError:
                self.report(n, "invalid JSON: nested too deeply")
                continue
            if isinstance(obj, dict):
                yield n, obj
            else:
                self.report(n, f"not a JSON object but {type(obj).__name__}")

    def _decode(self, n: int, raw: bytes) -> str:
        if b"\x00" in raw:
            raw = raw.replace(b"\x00", b"")
            self.report(n, "NUL bytes removed")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.report(n, "invalid UTF-8 replaced by U+FFFD")
            return raw.decode("utf-8", "replace")


def _is_object(raw: bytes) -> bool:
    try:
        return isinstance(_DECODER.decode(raw.decode("utf-8").strip().lstrip("\ufeff")), dict)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return False


def _count_newlines(path: Path, end: int) -> int:
    count = 0
    with open(path, "rb") as f:
        while end > 0:
            block = f.read(min(end, 1 << 20))
            if not block:
                break
            count += block.count(b"\n")
            end -= len(block)
    return count


def read_text(path: Path, problems: list[Problem]) -> tuple[str, int]:
    """The whole file as text and its size in bytes; NUL bytes and invalid UTF-8 are
    repaired and reported at the line of their first occurrence."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
    size = len(data)
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        problems.append(Problem(str(path), line, "NUL bytes removed"))
        data = data.replace(b"\x00", b"")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        problems.append(Problem(str(path), line, "invalid UTF-8 replaced by U+FFFD"))
        text = data.decode("utf-8", "replace")
    return text.lstrip("\ufeff"), size


class ArrayItems:
    """The items of a JSON document that is an array, read from the file a piece at a time:
    memory holds the piece being read (at least the largest item), not the document, so a data
    export of gigabytes is read in the memory one of its conversations takes.

    ``streamed`` is False when the document is no array (one object, a scalar, empty): the
    caller reads it whole (:func:`read_document`). Iterating gives ``(item, line)`` for each
    complete item in order; where the JSON breaks (a file cut off, junk) the items before it
    have been given and ``problems`` gets "invalid JSON: ..." at its line, as :class:`JsonDoc`
    says it. NUL bytes and invalid UTF-8 are repaired and reported as :func:`read_text` does.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkstemp()[1]); _ = f.write_text('[{"a": 1}, {"b": 2}, {"c"')
    >>> items = ArrayItems(f, []); [x for x in items], [(p.line, p.reason) for p in items.problems]
    ([({'a': 1}, 1), ({'b': 2}, 1)], [(1, "invalid JSON: Expecting ':' delimiter")])
    """

    PIECE = 1 << 20

    def __init__(self, path: Path, problems: list[Problem]):
        self.path, self.problems = path, problems
        try:
            self.size = path.stat().st_size
            self._file = open(path, "rb")  # noqa: SIM115 (closed when read to its end, or by close())
        except OSError as exc:
            raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._raw_lines = 0          # newlines in the bytes read so far (where a repair is reported)
        self._nul = self._bad_utf8 = False
        self._eof = False
        self._buf, self._pos = "", 0
        self._line, self._line_pos = 1, 0    # the line at self._line_pos of the buffer
        self._more(self.PIECE)
        self._buf = self._buf.lstrip("\ufeff")
        self._skip()
        self.streamed = self._buf.startswith("[", self._pos)

    def close(self) -> None:
        self._file.close()

    def _more(self, n: int) -> bool:
        """Read up to n more bytes into the buffer; False at the end of the file."""
        if self._eof:
            return False
        raw = self._file.read(n)
        self._eof = len(raw) < n
        got = bool(raw)
        if b"\x00" in raw:
            if not self._nul:
                line = self._raw_lines + raw.count(b"\n", 0, raw.index(b"\x00")) + 1
                self.problems.append(Problem(str(self.path), line, "NUL bytes removed"))
                self._nul = True
            raw = raw.replace(b"\x00", b"")
        try:
            text = self._decoder.decode(raw, final=self._eof)
        except UnicodeDecodeError as exc:
            line = self._raw_lines + raw.count(b"\n", 0, max(exc.start - len(self._decoder.getstate()[0]), 0)) + 1
            if not self._bad_utf8:
                self.problems.append(Problem(str(self.path), line, "invalid UTF-8 replaced by U+FFFD"))
                self._bad_utf8 = True
            pending = self._decoder.getstate()[0]
            self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
            text = self._decoder.decode(pending + raw, final=self._eof)
        self._raw_lines += raw.count(b"\n")
        self._buf += text
        if self._eof:
            self._file.close()
        return got

    def _skip(self) -> None:
        """Past white space, reading more as needed."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()
            if self._pos < len(self._buf) or not self._more(self.PIECE):
                return

    def _line_at(self, pos: int) -> int:
        self._line += self._buf.count("\n", self._line_pos, pos)
        self._line_pos = pos
        return self._line

    def _compact(self) -> None:
        """Drop what was read (the buffer keeps from the current position on)."""
        if self._pos > self.PIECE:
            self._line_at(self._pos)
            self._buf, self._line_pos, self._pos = self._buf[self._pos:], 0, 0

    def _broken(self, pos: int, msg: str) -> None:
        self.problems.append(Problem(str(self.path), self._line_at(pos), f"invalid JSON: {msg}"))
        self.close()

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        if not self.streamed:
            return
        self._pos += 1                                   # the [
        self._skip()
        if self._buf.startswith("]", self._pos):
            yield from self._end()
            return
        want = self.PIECE
        while True:
            self._skip()
            start = self._pos
            try:
                item, end = _DECODER.raw_decode(self._buf, start)
            except json.JSONDecodeError as exc:
                # the item may go on in what is not read yet: read more (twice as much each
                # time, so that a large item is decoded a few times, not once per piece)
                if self._more(want):
                    want *= 2
                    continue
                self._broken(exc.pos, exc.msg)
                return
            except RecursionError:
                self._broken(start, "nested too deeply")
                return
            want = self.PIECE
            line = self._line_at(start)
            self._pos = end
            self._skip()
            yield item, line
            if self._buf.startswith(",", self._pos):
                self._pos += 1
                self._skip()
                self._compact()
            elif self._buf.startswith("]", self._pos):
                yield from self._end()
                return
            else:
                self._broken(self._pos, "Expecting ',' delimiter")
                return

    def _end(self) -> Iterator[tuple[Any, int]]:
        """After the closing ]: nothing but white space."""
        self._pos += 1
        self._skip()
        if self._pos < len(self._buf):
            self._broken(self._pos, "extra data after the document")
        self.close()
        return
        yield


class _Broken(Exception):
    def __init__(self, pos: int, msg: str):
        self.pos, self.msg = pos, msg


def read_document(path: Path, depth: int) -> tuple[JsonDoc, list[Problem], int]:
    """A JSON document file read whole and leniently (:class:`JsonDoc`): the document, the
    problems found (repaired bytes; where the JSON breaks, "invalid JSON: ...") and the file's
    size in bytes."""
    problems: list[Problem] = []
    text, size = read_text(path, problems)
    doc = JsonDoc(text, depth=depth)
    if doc.error:
        problems.append(Problem(str(path), doc.error_line, f"invalid JSON: {doc.error}"))
    return doc, problems, size


class JsonDoc:
    """A JSON document read leniently: when it is broken (truncated, junk inside), ``value``
    holds everything complete before the damage and ``error``/``error_line`` say where.

    Containers down to ``depth`` levels are read item by item, which is what lets a truncated
    export keep its first messages, and gives each item its line (``line(item)``). Items whose
    own reading was cut off are marked: ``complete(item)`` is False for them.

    >>> doc = JsonDoc('{"messages": [{"role": "user"}, {"ro', depth=2)
    >>> doc.value, doc.error_line
    ({'messages': [{'role': 'user'}]}, 1)
    """

    def __init__(self, text: str, depth: int):
        self.text = text
        self.depth = depth
        self.error: str | None = None
        self.error_line: int | None = None
        self.value: Any = None
        self._pos: dict[int, int] = {}  # id(container) -> offset where it starts
        self._incomplete: set[int] = set()
        self._newlines: list[int] | None = None
        pos = _WS.match(text).end()
        try:
            if pos == len(text):
                raise _Broken(pos, "empty document")
            if text[pos] in "[{":
                self.value = [] if text[pos] == "[" else {}
                pos = self._fill(pos, 1, self.value)
            else:
                self.value, pos = self._decode(pos)
            pos = _WS.match(text, pos).end()
            if pos < len(text):
                raise _Broken(pos, "extra data after the document")
        except _Broken as exc:
            self.error, self.error_line = exc.msg, self.line_at(exc.pos)

    def line(self, item: Any) -> int | None:
        pos = self._pos.get(id(item))
        return None if pos is None else self.line_at(pos)

    def line_at(self, pos: int) -> int:
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        return bisect.bisect_left(self._newlines, pos) + 1

    def complete(self, item: Any) -> bool:
        return id(item) not in self._incomplete

    def _decode(self, pos: int) -> tuple[Any, int]:
        try:
            return _DECODER.raw_decode(self.text, pos)
        except json.JSONDecodeError as exc:
            raise _Broken(exc.pos, exc.msg) from None
        except RecursionError:
            raise _Broken(pos, "nested too deeply") from None

    def _fill(self, pos: int, level: int, box: list | dict) -> int:
        """Read the container starting at ``pos`` into ``box``; the offset after it."""
        text = self.text
        close = "]" if isinstance(box, list) else "}"
        self._pos[id(box)] = pos
        try:
            pos = _WS.match(text, pos + 1).end()
            if text.startswith(close, pos):
                return pos + 1
            while True:
                key = None
                if isinstance(box, dict):
                    if not text.startswith('"', pos):
                        raise _Broken(pos, "Expecting property name enclosed in double quotes")
                    key, pos = self._decode(pos)
                    pos = _WS.match(text, pos).end()
                    if not text.startswith(":", pos):
                        raise _Broken(pos, "Expecting ':' delimiter")
                    pos = _WS.match(text, pos + 1).end()
                start = pos
                if level < self.depth and text[pos:pos + 1] in ("[", "{"):
                    value = [] if text[pos] == "[" else {}
                    # Attached before it is filled, so that a cut-off item keeps its
                    # complete part in the tree.
                    self._put(box, key, value)
                    pos = self._fill(pos, level + 1, value)
                else:
                    value, pos = self._decode(pos)
                    if isinstance(value, dict | list):
                        self._pos[id(value)] = start
                    self._put(box, key, value)
                pos = _WS.match(text, pos).end()
                if text.startswith(",", pos):
                    pos = _WS.match(text, pos + 1).end()
                elif text.startswith(close, pos):
                    return pos + 1
                else:
                    raise _Broken(pos, "Expecting ',' delimiter")
        except _Broken:
            self._incomplete.add(id(box))
            raise

    @staticmethod
    def _put(box: list | dict, key: Any, value: Any) -> None:
        if isinstance(box, list):
            box.append(value)
        else:
            box[key] = value
