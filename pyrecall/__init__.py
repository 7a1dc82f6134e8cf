"""pyrecall: memory across sessions for AI agents, SQL-first on PostgreSQL."""

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

from ._render import render_context  # noqa: E402
from .client import AsyncRecall, CuratedMemory, Memory, Recall, RecallResult  # noqa: E402  (after __version__: _migrate reads it)

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
