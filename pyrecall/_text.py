"""The one text cleaner: what PostgreSQL ``text`` refuses, taken out the same way on the way
in (importers, the Python client, metadata) and on the way out (queries, embedding input)."""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(s: str) -> str:
    """``s`` without what PostgreSQL text refuses: NUL characters are dropped, lone surrogates
    become U+FFFD.

    >>> clean_text("tab\\x00le \\ud800")
    'table \ufffd'
    """
    if "\x00" in s:
        s = s.replace("\x00", "")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # a lone "\ud800" escape in JSON, or a str built in Python
        s = _SURROGATE.sub("\ufffd", s)
    return s
