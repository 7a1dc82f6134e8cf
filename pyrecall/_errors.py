"""pyrecall's exceptions: one base class and a few specific ones.

Errors raised by PostgreSQL keep their psycopg class (it carries the SQLSTATE); these are
for what pyrecall itself detects. A mistake in an option or value is a ConfigError, an id
that names nothing a NotFoundError, a database that cannot be reached or used a
DatabaseError. :func:`one_line` is how any of them (or a psycopg error) is shown.
"""

import sys


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (a psycopg error: its primary message), or the
    error's class name when it has no message.

    >>> one_line(ValueError("bad value\\n  at line 3"))
    'bad value'
    """
    if is_database_error(exc) and getattr(exc, "diag", None) and exc.diag.message_primary:
        text = exc.diag.message_primary
    else:
        text = str(exc)
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return lines[0] if lines else type(exc).__name__


def is_database_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a psycopg error. psycopg is looked up, not imported (~0.15 s): an error
    of it means it is loaded, and a process that has not touched the database yet (a CLI
    command parsing its arguments, the query embedder of a one-shot recall) skips the import."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


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
