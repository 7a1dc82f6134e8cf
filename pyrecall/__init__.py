"""pyrecall: memory across sessions for AI agents, SQL-first on PostgreSQL."""

from typing import TYPE_CHECKING

from ._errors import (
    ConfigError,
    DatabaseError,
    DimensionMismatchError,
    EmbeddingError,
    ImportFormatError,
    MigrationError,
    MissingDependencyError,
    NotFoundError,
    PyrecallError,
    TransientEmbeddingError,
)

__version__ = "0.1.0"

# The client and the renderer are imported at their first use (PEP 562): they bring psycopg and
# numpy (~0.25 s), which a process that only embeds a query, or prints --help, does without.
_LAZY = {"AsyncRecall": "client", "CuratedMemory": "client", "Memory": "client", "Recall": "client",
         "RecallResult": "client", "render_context": "_render"}

if TYPE_CHECKING:
    from ._render import render_context
    from .client import AsyncRecall, CuratedMemory, Memory, Recall, RecallResult


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "AsyncRecall",
    "CuratedMemory",
    "Memory",
    "Recall",
    "RecallResult",
    "ConfigError",
    "DatabaseError",
    "DimensionMismatchError",
    "EmbeddingError",
    "ImportFormatError",
    "MigrationError",
    "NotFoundError",
    "MissingDependencyError",
    "PyrecallError",
    "TransientEmbeddingError",
    "render_context",
    "__version__",
]
