"""Importers: transcript files → neutral records (sessions, messages, problems).

Parsing only; writing the records to the database is the ingestion layer's work.

>>> from pyrecall.importers import parse_any
>>> result = parse_any("tests/fixtures/importers/claude_code/session.jsonl")
>>> result.format, len(result.sessions)
('claude_code', 1)
"""

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
from ._detect import FORMATS, PARSERS, STREAMING, detect_format, iter_files, parse_any
from ._records import KINDS, ROLES, Message, ParseResult, Problem, Session

__all__ = [
    "FORMATS",
    "KINDS",
    "PARSERS",
    "STREAMING",
    "ROLES",
    "Message",
    "ParseResult",
    "Problem",
    "Session",
    "aider",
    "chat_archives",
    "claude_code",
    "cline",
    "continue_dev",
    "codex",
    "detect_format",
    "discord",
    "gemini",
    "iter_files",
    "jsonl",
    "openai_chat",
    "opencode",
    "parse_any",
]
