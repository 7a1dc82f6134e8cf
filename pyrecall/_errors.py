"""pyrecall's exceptions: one base class and a few specific ones.

Errors raised by PostgreSQL keep their psycopg class (it carries the SQLSTATE); these are
for what pyrecall itself detects.
"""


class PyrecallError(Exception):
    """Base class of every error pyrecall raises itself."""


class ConfigError(PyrecallError):
    """A setting or argument is missing or invalid."""


class NotFoundError(PyrecallError):
    """An id names nothing the agent may see: unknown, or another agent's (SQLSTATE P0002)."""


class MissingDependencyError(ConfigError):
    """An optional dependency is not installed; the message names the extra to install."""


class DatabaseError(PyrecallError):
    """The database cannot be reached, started or used as asked."""


class MigrationError(PyrecallError):
    """A migration cannot be applied (edited after release, failed, or out of order)."""


class DimensionMismatchError(PyrecallError):
    """An embedding dimension differs from the one the database was installed with."""


class EmbeddingError(PyrecallError):
    """The embedding provider failed in a way that retrying will not fix."""


class TransientEmbeddingError(EmbeddingError):
    """The embedding provider failed in a way that may pass (rate limit, 5xx, timeout)."""


class ImportFormatError(PyrecallError):
    """A file is not in a format an importer understands."""
