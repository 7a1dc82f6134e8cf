"""pyrecall: memory across sessions for AI agents, SQL-first on PostgreSQL."""

from ._errors import (
    ConfigError,
    DatabaseError,
    DimensionMismatchError,
    EmbeddingError,
    ImportFormatError,
    MigrationError,
    MissingDependencyError,
    PyrecallError,
    TransientEmbeddingError,
)

__version__ = "0.1.0"

from .client import AsyncRecall, Memory, Recall, RecallResult  # noqa: E402  (after __version__: _migrate reads it)

__all__ = [
    "AsyncRecall",
    "Memory",
    "Recall",
    "RecallResult",
    "ConfigError",
    "DatabaseError",
    "DimensionMismatchError",
    "EmbeddingError",
    "ImportFormatError",
    "MigrationError",
    "MissingDependencyError",
    "PyrecallError",
    "TransientEmbeddingError",
    "__version__",
]
