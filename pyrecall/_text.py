"""The one text cleaner: what PostgreSQL ``text`` and ``jsonb`` refuse, taken out the same way
on the way in (importers, the Python client, metadata) and on the way out (queries, embedding
input)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ._errors import ConfigError

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


def clean_value(value: Any) -> Any:
    """A JSON-like value (parsed JSON, metadata) made storable as jsonb: every string and key
    through :func:`clean_text`, NaN and infinities become None (jsonb has no such numbers),
    tuples become lists; other values as they are.

    >>> clean_value({"a\\x00": [float("nan"), "x\\ud800", (1, 2.5)]})
    {'a': [None, 'x\ufffd', [1, 2.5]]}
    """
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    return value


def clean_json(value: dict) -> str:
    """A metadata dict as JSON that jsonb accepts (no NUL, no surrogates, NaN/Inf as null).
    ConfigError when it is nested too deeply for Python to encode (about 900 levels)."""
    try:
        return json.dumps(clean_value(value), ensure_ascii=False, default=str, allow_nan=False)
    except RecursionError:
        raise ConfigError("metadata or filter is nested too deeply to encode as JSON") from None
