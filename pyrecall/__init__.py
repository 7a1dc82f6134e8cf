"""pyrecall: memory across sessions for AI agents, SQL-first on PostgreSQL."""

from ._errors import (
    ConfigError,
    DatabaseError,
    DimensionMismatchError,
    EmbeddingError,
    ImportFormatError,
    MigrationError,
    PyrecallError,
    TransientEmbeddingError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DatabaseError",
    "DimensionMismatchError",
    "EmbeddingError",
    "ImportFormatError",
    "MigrationError",
    "PyrecallError",
    "TransientEmbeddingError",
    "__version__",
]
