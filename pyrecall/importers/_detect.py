"""Which importer reads a file, found by looking at its content, and the files of folders."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from .._errors import ImportFormatError
from . import (
    aider,
    chat_archives,
    claude_code,
    cline,
    codex,
    continue_dev,
    discord,
    gemini,
    jsonl,
    openai_chat,
    opencode,
)
from ._read import JsonDoc, checked
from ._records import ParseResult

PARSERS: dict[str, Callable[..., ParseResult]] = {
    "claude_code": claude_code.parse,
    "codex": codex.parse,
    "gemini": gemini.parse,
    "gemini_json": gemini.parse_document,
    "jsonl": jsonl.parse,
    "openai_chat": openai_chat.parse,
    "discord": discord.parse,
    "chatgpt": chat_archives.parse_chatgpt,
    "claude_ai": chat_archives.parse_claude_ai,
    "aider": aider.parse,
    "cline": cline.parse,
    "continue": continue_dev.parse,
    "opencode": opencode.parse,
}
# the parsers that give their sessions as the file is read (ParseResult.session_stream): what
# `pyrecall import` uses for these formats, whose files can be gigabytes
STREAMING: dict[str, Callable[..., ParseResult]] = {
    "chatgpt": chat_archives.stream_chatgpt,
    "claude_ai": chat_archives.stream_claude_ai,
    "jsonl": jsonl.stream,        # generic JSONL and `pyrecall export` files (records left in the file)
}
FORMATS = tuple(PARSERS)
SUFFIXES = (".jsonl", ".json")
NAMES = (aider.FILE_NAME, opencode.FILE_NAME)  # files a folder holds under a name of their own, not by suffix
_HEAD = 1 << 20  # enough to see the first lines, or the keys before a document's messages
_SNIFF_LINES = 50


def detect_format(path: str | os.PathLike) -> str | None:
    """The format of a transcript file, by its content; None when none fits.

    >>> detect_format("tests/fixtures/importers/discord.json")
    'discord'
    """
    path = checked(path)
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
            whole = not f.read(1)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
    if opencode.is_database(path, head):
        return "opencode"
    text = head.replace(b"\x00", b"").decode("utf-8", "replace").lstrip("\ufeff")
    if aider.is_history(text[:4096]):
        return "aider"
    if cline.is_task_file(path) and text.lstrip()[:1] in ("[", "{"):
        return "cline"
    if text.lstrip().startswith("["):
        return _of_document(text)
    lines = text.splitlines()
    if not whole:
        lines = lines[:-1]  # the head may end inside a line
    for line in [x.strip() for x in lines if x.strip()][:_SNIFF_LINES]:
        if line in ("{", "["):  # a pretty-printed document
            return _of_document(text)
        try:
            obj = json.loads(line, strict=False)
        except (ValueError, RecursionError):
            continue  # a broken line; the next may tell
        if isinstance(obj, dict) and (fmt := _of_object(obj)):
            return fmt
    return None


def _of_object(obj: dict) -> str | None:
    """The format one top-level object (a whole document or one line) belongs to."""
    if isinstance(obj.get("guild"), dict) and isinstance(obj.get("channel"), dict):
        return "discord"
    if continue_dev.is_session(obj):
        return "continue"
    if chat_archives.is_chatgpt(obj):
        return "chatgpt"
    if chat_archives.is_claude_ai(obj):
        return "claude_ai"
    if gemini.is_metadata(obj):
        return "gemini_json" if isinstance(obj.get("messages"), list) else "gemini"
    if isinstance(obj.get("messages"), list):
        return "openai_chat"
    kind = obj.get("type")
    if ((kind in codex.LINE_TYPES and isinstance(obj.get("payload"), dict))
            or codex.is_legacy_header(obj) or obj.get("record_type") == "state"):
        return "codex"
    if (("sessionId" in obj and isinstance(kind, str))
            or (kind == "summary" and "leafUuid" in obj) or kind == "file-history-snapshot"):
        return "claude_code"
    if ("role" in obj and "content" in obj) or "pyrecall_export" in obj:
        return "jsonl"          # generic JSONL, or an export of `pyrecall export` (its header)
    return None


def _of_document(text: str) -> str | None:
    # Read leniently: the head of a large export is a truncated document.
    root = JsonDoc(text, depth=3).value
    if isinstance(root, dict):
        if gemini.is_metadata(root):
            return "gemini_json"  # a document, whether or not its messages were reached
        fmt = _of_object(root)
        return fmt if fmt in ("discord", "openai_chat", "chatgpt", "claude_ai", "continue") else None
    if isinstance(root, list) and root and isinstance(root[0], dict):
        if chat_archives.is_chatgpt(root[0]):
            return "chatgpt"        # ChatGPT's export: conversations.json
        if chat_archives.is_claude_ai(root[0]):
            return "claude_ai"      # Claude.ai's export: conversations.json
        if "parts" in root[0] and "content" not in root[0]:
            # Gemini API history ({role, parts}): a Gemini CLI checkpoint (/chat save), which
            # repeats the chat that Gemini CLI records anyway
            return None
        if "messages" in root[0] or "role" in root[0]:
            return "openai_chat"
    return None


def parse_any(path: str | os.PathLike, start_offset: int = 0) -> ParseResult:
    """Detect the format of ``path`` and parse it.

    >>> parse_any("tests/fixtures/importers/generic.jsonl").format
    'jsonl'
    """
    fmt = detect_format(path)
    if fmt is None:
        with open(path, "rb") as f:
            empty = not f.read(_HEAD).strip()
        raise ImportFormatError(
            f"{path}: empty file" if empty
            else f"{path}: not a recognised transcript format ({', '.join(FORMATS)})")
    return PARSERS[fmt](path, start_offset=start_offset)


# folders of dependencies and builds met in a tree of repositories (`pyrecall import ~/code`): their
# thousands of .json files are no transcripts, and reading each would cost minutes
DEPENDENCY_FOLDERS = ("node_modules", "bower_components", "site-packages", "dist-packages", "__pycache__")
_MARKERS = ("pyvenv.cfg", "CACHEDIR.TAG")   # a Python virtual environment; a cache folder (cargo's target/, ...)


def is_passed_over(folder: Path) -> bool:
    """Whether a folder met in a walk is not entered: hidden (``.git``, ...), dependencies
    (``node_modules``, ``site-packages``, ...), a virtual environment or a tagged cache folder.

    >>> is_passed_over(Path("app/node_modules")), is_passed_over(Path("app/src"))
    (True, False)
    """
    return (folder.name.startswith(".") or folder.name in DEPENDENCY_FOLDERS
            or any((folder / m).is_file() for m in _MARKERS))


def is_sidecar(folder: str | os.PathLike, name: str, names) -> bool:
    """Whether a file is read with others of its folder, not on its own: a Cline task's
    ui_messages.json and task_metadata.json beside its api_conversation_history.json, the
    <id>.json beside a Cline CLI session's <id>.messages.json, Continue's list of its sessions
    (~/.continue/sessions/sessions.json), SQLite's -wal and -shm beside OpenCode's database."""
    return ((name in cline.SIDECARS and cline.FILE_NAME in names) or cline.is_cli_meta(name, names)
            or continue_dev.is_index(Path(folder, name))
            or (name in opencode.SIDECARS and opencode.FILE_NAME in names))


def is_transcript_name(name: str) -> bool:
    """Whether a file met in a folder may be a transcript: a .jsonl/.json file, an aider chat
    history (``.aider.chat.history.md``) or OpenCode's database (``opencode.db``).

    >>> is_transcript_name("rollout-1.jsonl"), is_transcript_name(".aider.chat.history.md")
    (True, True)
    """
    return name.lower().endswith(SUFFIXES) or name in NAMES


def walk_folder(folder: Path, ignored: list[Path] | None = None,
                passed_over: list[Path] | None = None) -> Iterator[Path]:
    """The files under a folder that may be transcripts, in sorted order: hidden folders
    (``.git``, ...) and those of dependencies, virtual environments and caches
    (:func:`is_passed_over`) are not entered (the latter added to ``passed_over``), a file read
    with another (:func:`is_sidecar`) is skipped, the others go to ``ignored``; symbolic links to
    folders are not followed."""
    for root, dirs, names in os.walk(folder):
        skip = [d for d in dirs if is_passed_over(Path(root, d))]
        if passed_over is not None:
            passed_over.extend(Path(root, d) for d in skip if not d.startswith("."))
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for name in sorted(names):
            if is_sidecar(root, name, names):
                continue                  # read with the file it belongs to
            if is_transcript_name(name):
                yield Path(root, name)
            elif ignored is not None:
                ignored.append(Path(root, name))


def iter_files(paths: Iterable[str | os.PathLike]) -> Iterator[Path]:
    """The files named, and the .jsonl/.json files and aider chat histories under the folders
    named, in sorted order (:func:`walk_folder`).

    >>> [p.name for p in iter_files(["examples/sessions"])][:1]
    ['10b1d23c-c2b6-582e-a56c-8d4c39482bb3.jsonl']
    """
    for path in map(Path, paths):
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from walk_folder(path)
        else:
            raise ImportFormatError(f"{path}: no such file or folder")
