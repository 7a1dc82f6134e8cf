"""Index transcript files, then keep up with them: only what changed since the last run.

What was read of each file is remembered in ``recall.source_files`` (per agent): its format,
size, mtime, the byte offset up to which whole lines were consumed, and a SHA-256 of its first
bytes (up to 64 KiB of what was consumed). At the next run a file is

- *unchanged* (same size and mtime): not opened at all;
- *appended* (bigger, same first bytes): line formats (Claude Code, Codex, Gemini CLI, JSONL) are read
  from the remembered offset only; documents (OpenAI chat, Discord, older Gemini CLI chats)
  are read whole;
- *rewritten* (shorter than what was consumed, or other first bytes): read from the start.

A file's messages and its ``source_files`` row are written in one transaction, so a run killed
at any point resumes exactly where the last committed file left it; re-reading is harmless
anyway, because ingestion is idempotent. Folders given to :func:`index` are remembered too (as
``source_files`` rows of format ``folder``), so that :func:`sync` without paths walks them
again and finds new files.

    >>> with connect() as conn:                                        # doctest: +SKIP
    ...     report = index(conn, ["~/.claude/projects"], agent_id="claude-code")
    ...     report.inserted, [str(p) for p in report.problems]
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from . import _db, _ingest
from ._errors import ConfigError, ImportFormatError, PyrecallError, one_line
from .importers import PARSERS, STREAMING, detect_format, jsonl
from .importers._detect import SUFFIXES, walk_folder
from .importers._records import Problem, Session

HEAD_BYTES = 64 * 1024
LINE_FORMATS = ("aider", "claude_code", "codex", "gemini", "jsonl")  # resumable at a byte offset
# formats read again from the start of their last session (aider's history: its last session grows
# by whole blocks, not by lines that name their session): an append adds what was newly stored
TAIL_FORMATS = ("aider",)
FOLDER = "folder"                         # source_files.format of a remembered root folder
ARCHIVE = "zip"                           # source_files.format of a .zip archive (its members read)
UNKNOWN = "unknown"                       # a file that is no transcript (not read again until it changes,
                                          # but reported as such by every run)


# where each coding agent keeps its sessions: Claude Code, Codex CLI, Gemini CLI, Cline's CLI,
# Continue (its CLI and its editor extensions), OpenCode (one database file)
DEFAULT_ROOTS = ("~/.claude/projects", "~/.codex/sessions", "~/.gemini/tmp", "~/.cline/data/sessions",
                 "~/.continue/sessions", "~/.local/share/opencode/opencode.db")
# the VS Code extensions' tasks (Cline, Roo Code, Kilo Code), in each editor's storage (VS Code and
# its forks), on Linux and on macOS
EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
EDITOR_HOMES = ("~/.config", "~/Library/Application Support")
EXTENSIONS = ("saoudrizwan.claude-dev", "rooveterinaryinc.roo-cline", "kilocode.kilo-code")


def default_roots() -> list[Path]:
    """Where Claude Code, Codex CLI, Gemini CLI, Cline (its CLI, and the Cline, Roo Code and Kilo
    Code extensions of VS Code and its forks), Continue and OpenCode keep their sessions (existing
    or not)."""
    tasks = [f"{home}/{editor}/User/globalStorage/{ext}/tasks"
             for home in EDITOR_HOMES for editor in EDITORS for ext in EXTENSIONS]
    return [Path(p).expanduser() for p in (*DEFAULT_ROOTS, *tasks)]


@dataclass
class FileResult:
    """What one run did with one file."""

    path: str
    # new | appended (read from the offset) | rewritten (read again from the start) |
    # updated (a document, read whole) | reread (--full) | unchanged | not-transcript | failed
    status: str
    format: str | None = None
    start_offset: int = 0  # where reading began
    end_offset: int = 0    # where it stopped (the next run starts here)
    sessions: int = 0
    messages: int = 0      # messages read
    inserted: int = 0      # of which new
    forgotten: int = 0     # sessions forgotten (deleted) before: not stored again
    memories: int = 0      # curated memories restored (an export's records)
    importance: int = 0    # chunks whose importance set by hand was restored
    vectors: int = 0       # chunks given their exported vector (`pyrecall export --vectors`)
    turns: int = 0         # messages given their exported counts or vector
    summaries: int = 0     # session summaries a model wrote, restored
    forgotten_records: int = 0   # sessions an export says were forgotten, recorded as such
    agents: set[str] = field(default_factory=set)   # the agents written to (a file may name its own)
    problems: list[Problem] = field(default_factory=list)

    @property
    def bytes_read(self) -> int:
        return max(self.end_offset - self.start_offset, 0)


@dataclass
class SyncReport:
    """Totals of a run, and each file's result."""

    files: list[FileResult] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)   # remembered files that no longer exist
    roots: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # files in the folders not named .jsonl/.json
    # folders not entered below the roots: hidden ones are not listed, those of dependencies,
    # virtual environments and caches are (importers._detect.is_passed_over)
    passed_over: list[str] = field(default_factory=list)
    # the vector indexes of their own built for the agents an export's vectors were restored to
    # (recall.index_info rows), and why one was not
    indexed: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # chunks of those agents still waiting for a vector (None: no vector was restored)
    pending: int | None = None

    def count(self, *statuses: str) -> int:
        return sum(f.status in statuses for f in self.files)

    @property
    def sessions(self) -> int:
        return sum(f.sessions for f in self.files)

    @property
    def messages(self) -> int:
        return sum(f.messages for f in self.files)

    @property
    def inserted(self) -> int:
        return sum(f.inserted for f in self.files)

    @property
    def forgotten(self) -> int:
        return sum(f.forgotten for f in self.files)

    @property
    def memories(self) -> int:
        return sum(f.memories for f in self.files)

    @property
    def vectors(self) -> int:
        return sum(f.vectors for f in self.files)

    @property
    def turns(self) -> int:
        return sum(f.turns for f in self.files)

    @property
    def summaries(self) -> int:
        return sum(f.summaries for f in self.files)

    @property
    def forgotten_records(self) -> int:
        return sum(f.forgotten_records for f in self.files)

    @property
    def agents(self) -> list[str]:
        return sorted({a for f in self.files for a in f.agents})

    @property
    def importance(self) -> int:
        return sum(f.importance for f in self.files)

    @property
    def skipped(self) -> int:
        """Messages read that were stored already."""
        return self.messages - self.inserted

    @property
    def problems(self) -> list[Problem]:
        return [p for f in self.files for p in f.problems]

    def as_dict(self) -> dict:
        return {
            "roots": self.roots,
            "files": len(self.files),
            "new": self.count("new"), "appended": self.count("appended"),
            "rewritten": self.count("rewritten"), "updated": self.count("updated"),
            "reread": self.count("reread"), "unchanged": self.count("unchanged"),
            "not_transcript": self.count("not-transcript"), "failed": self.count("failed"),
            "gone": len(self.gone), "ignored": len(self.ignored), "passed_over": len(self.passed_over),
            "sessions": self.sessions, "messages": self.messages,
            "inserted": self.inserted, "skipped": self.skipped, "forgotten": self.forgotten,
            "memories": self.memories, "importance": self.importance,
            "vectors": self.vectors, "turns": self.turns, "summaries": self.summaries,
            "forgotten_records": self.forgotten_records,
            "problems": [{"path": p.path, "line": p.line, "reason": p.reason} for p in self.problems],
            "ignored_files": self.ignored,
            "passed_over_folders": self.passed_over,
            "indexed": [{k: row[k] for k in ("index_name", "agent_id", "index_rows", "build_seconds")}
                        for row in self.indexed],
            "errors": self.errors,
            "pending": self.pending,
        }


Progress = Callable[[Path, FileResult], None]


def index(conn: psycopg.Connection, paths: Iterable[str | os.PathLike], *, agent_id: str,
          full: bool = False, progress: Progress | None = None,
          on_start: Callable[[int], None] | None = None) -> SyncReport:
    """Import the files named and every .jsonl/.json file under the folders named; remember
    the folders for :func:`sync`. Unchanged files are skipped; ``full`` re-reads every file
    from its start. ``on_start(n)`` is told how many files there are; ``progress(path, result)``
    is called after each.

    >>> index(conn, ["examples/sessions"], agent_id="claude-code").inserted  # doctest: +SKIP
    101
    """
    _require_agent(agent_id)
    roots = [_absolute(p) for p in paths]
    if not roots:
        raise ConfigError("no path to index")
    for root in roots:
        if not root.exists():
            raise ImportFormatError(f"{root}: no such file or folder")
    report = _run(conn, roots, agent_id=agent_id, full=full, progress=progress, on_start=on_start)
    _remember_roots(conn, [r for r in roots if r.is_dir()], agent_id)
    return report


def sync(conn: psycopg.Connection, paths: Iterable[str | os.PathLike] | None = None, *,
         agent_id: str, progress: Progress | None = None,
         on_start: Callable[[int], None] | None = None) -> SyncReport:
    """Pick up what changed since the last run: new files, appended lines, rewritten files.

    Without ``paths``: the folders and files indexed before by this agent, or else those of
    :func:`default_roots` that exist (``~/.claude/projects``, ``~/.codex/sessions``,
    ``~/.gemini/tmp``, ``~/.cline/data/sessions``, ``~/.continue/sessions``, OpenCode's database, the
    editor extensions' task folders). Remembered files that are gone are forgotten (their memories
    stay).

    >>> sync(conn, agent_id="claude-code").count("appended")  # doctest: +SKIP
    1
    """
    _require_agent(agent_id)
    if paths:
        return index(conn, paths, agent_id=agent_id, progress=progress, on_start=on_start)
    roots = sync_roots(conn, agent_id)
    if not roots:
        roots = [r for r in default_roots() if r.exists()]
        if not roots:
            raise ConfigError(f"nothing to sync for agent {agent_id!r}: nothing was indexed "
                              f"before and none of {', '.join(DEFAULT_ROOTS)} (nor an editor "
                              "extension's tasks) exists; run `pyrecall import PATH` first")
    present = [r for r in roots if r.exists()]
    report = _run(conn, present, agent_id=agent_id, full=False, progress=progress,
                  on_start=on_start)
    _remember_roots(conn, [r for r in present if r.is_dir()], agent_id)
    report.gone = _forget_gone(conn, roots, agent_id, seen={f.path for f in report.files})
    return report


def sync_roots(conn: psycopg.Connection, agent_id: str) -> list[Path]:
    """What :func:`sync` walks by default: remembered folders, and remembered files outside them."""
    rows = conn.execute("select path, format from recall.source_files where agent_id = %s "
                        "order by path", [agent_id]).fetchall()
    folders = [Path(p) for p, fmt in rows if fmt == FOLDER]
    files = [Path(p) for p, fmt in rows if fmt != FOLDER
             and not any(_is_under(Path(p), d) for d in folders)]
    return folders + files


def _run(conn: psycopg.Connection, roots: list[Path], *, agent_id: str, full: bool,
         progress: Progress | None, on_start: Callable[[int], None] | None) -> SyncReport:
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise ConfigError("index/sync commit file by file: pass a connection outside a transaction")
    ignored: list[Path] = []
    passed_over: list[Path] = []
    files = list(dict.fromkeys(_walk(roots, ignored, passed_over)))
    report = SyncReport(roots=[str(r) for r in roots], ignored=[str(p) for p in ignored],
                        passed_over=[str(p) for p in passed_over])
    if on_start:
        on_start(len(files))
    # one run at a time per agent (two sessions starting together both sync): the second
    # waits, then finds the files unchanged
    conn.execute("select pg_advisory_lock(hashtext('pyrecall.sync'), hashtext(%s))", [agent_id])
    try:
        known = _known(conn, agent_id)
        for path in files:
            result = _sync_file(conn, path, agent_id, known.get(str(path)), full)
            report.files.append(result)
            if progress:
                progress(path, result)
    finally:
        conn.execute("select pg_advisory_unlock(hashtext('pyrecall.sync'), hashtext(%s))", [agent_id])
    if report.vectors:
        from ._worker import count_pending

        restored = sorted({a for f in report.files if f.vectors for a in f.agents})
        report.pending = sum(count_pending(conn, agent=a) for a in restored)
        _index_restored(conn, report, restored)
    return report


def _index_restored(conn: psycopg.Connection, report: SyncReport, agents: list[str]) -> None:
    """An export's vectors restored: the agents written to are searchable by meaning now, with
    no `pyrecall embed`, so the vector index of its own that an agent past agent_index_min_rows
    needs is built now, as the embedding job would build it (pyrecall._index.upkeep; not with
    recall.config auto_vector_index false, not on a Citus cluster, not for a role that does not
    own recall.chunks, not in a connection outside autocommit: `pyrecall dba index` there). A
    failed build is told in ``report.errors``: recall scans exactly until the next embed builds it."""
    if not conn.autocommit or _db.distributed(conn):
        return
    from . import _index

    try:
        report.indexed = _index.upkeep(conn, agents)
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
        report.errors.append(f"vector index not built (recall scans exactly until `pyrecall embed` "
                             f"builds it): {one_line(exc)}")


def _walk(roots: list[Path], ignored: list[Path], passed_over: list[Path]):
    """The files named, and the .jsonl/.json files and aider chat histories under the folders
    named; the other files found in the folders go to ``ignored``, the folders not entered but
    hidden ones to ``passed_over``."""
    for root in roots:
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from walk_folder(root, ignored, passed_over)


def _known(conn: psycopg.Connection, agent_id: str) -> dict[str, tuple]:
    rows = conn.execute(
        "select path, format, size, mtime, offset_done, content_sha from recall.source_files "
        "where agent_id = %s and format <> %s", [agent_id, FOLDER]).fetchall()
    return {r[0]: r[1:] for r in rows}


def _sync_file(conn: psycopg.Connection, path: Path, agent_id: str, known: tuple | None,
               full: bool) -> FileResult:
    result = FileResult(str(path), "new")
    try:
        st = path.stat()
        mtime = datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC)
        start, fmt = 0, None
        if known is not None and known[0] != UNKNOWN:
            k_format, k_size, k_mtime, k_offset, k_sha = known
            if full:
                result.status = "reread"
            elif k_size == st.st_size and k_mtime == mtime:
                return FileResult(str(path), "unchanged", k_format, k_offset, k_offset)
            elif k_format not in LINE_FORMATS:
                result.status = "updated"        # a document is always read whole
            elif st.st_size >= k_offset and _head_sha(path, k_offset) == k_sha:
                start, fmt, result.status = k_offset, k_format, "appended"
            else:
                result.status = "rewritten"      # shorter than what was read, or other bytes
        elif known is not None and not full and (known[1], known[2]) == (st.st_size, mtime):
            # still no transcript: not read again, but said again (each run tells what it left out)
            return _not_transcript(path, st.st_size)
        if path.suffix.lower() == ".zip":
            return _sync_archive(conn, path, agent_id, st.st_size, mtime, result)
        fmt = fmt or detect_format(path)
        if fmt is None:
            result = _not_transcript(path, st.st_size)
            _record(conn, path, agent_id, UNKNOWN, st.st_size, mtime, st.st_size, None, 0, 1,
                    accumulate=False)
            return result
        # an export's records other than memories are read again in batches once its messages
        # are stored (jsonl.record_batches): not all of a file's vectors in memory at once
        parsed = _parser(fmt)(path, start_offset=start)
        result.format, result.start_offset, result.end_offset = fmt, start, parsed.end_offset
        result.problems = parsed.problems
        if start and parsed.end_offset < start:  # the parser found the file shorter: reread
            result.start_offset, result.status = 0, "rewritten"
        if result.start_offset:
            _keep_first_project(conn, parsed.sessions, agent_id)
        with conn.transaction():
            ingested = _store(conn, path, start, parsed, agent_id, result,
                              keep_project=bool(result.start_offset))
            appended = result.status == "appended"
            _record(conn, path, agent_id, fmt, st.st_size, mtime, parsed.end_offset,
                    _head_sha(path, parsed.end_offset),
                    ingested.inserted if appended and fmt in TAIL_FORMATS else ingested.messages,
                    len(parsed.problems), accumulate=appended)
        result.sessions, result.messages, result.inserted, result.forgotten = (
            ingested.sessions, ingested.messages, ingested.inserted, ingested.forgotten)
        if result.status == "appended" and parsed.end_offset == start and not ingested.inserted:
            result.status = "unchanged"  # touched, or a line still being written
        return result
    except (PyrecallError, OSError, psycopg.DataError, psycopg.IntegrityError) as exc:
        # one bad file never stops the run: it is reported, and tried again next time
        result.status = "failed"
        result.problems.append(Problem(str(path), None, one_line(exc)))
        return result


def _store(conn: psycopg.Connection, path: Path, start: int, parsed, agent_id: str,
           result: FileResult, keep_project: bool = False) -> _ingest.IngestReport:
    """A parsed file's sessions ingested and an export's records restored (those left in the file
    read again in batches), added to ``result``; in the caller's transaction."""
    if parsed.session_stream is None:
        ingested = _ingest.ingest(conn, parsed.sessions, agent_id=agent_id)
        agents = {s.agent_id or agent_id for s in parsed.sessions if s.messages}
    else:
        # stored as they are read, a batch at a time (a chat app's export or an export of
        # `pyrecall export` of gigabytes)
        ingested, agents = _ingest.IngestReport(), set()
        stats = _Statistics(conn)
        for batch in _batches(parsed.session_stream):
            if keep_project:
                _keep_first_project(conn, batch, agent_id)
            stats.refresh(ingested.inserted)
            ingested += _ingest.ingest(conn, batch, agent_id=agent_id)
            agents |= {s.agent_id or agent_id for s in batch}
    restored = _restore(conn, parsed.records, agent_id)
    if parsed.streamed:
        for batch in jsonl.record_batches(path, start, parsed.end_offset, RECORDS_PER_CALL):
            restored = [a + b for a, b in zip(restored, _restore(conn, batch, agent_id), strict=True)]
    for name, n in zip(("memories", "importance", "vectors", "turns", "summaries", "forgotten_records"), restored,
                       strict=True):
        setattr(result, name, getattr(result, name) + n)
    result.agents |= agents | {r.get("agent_id") or agent_id for r in parsed.records}
    return ingested


SESSION_BATCH_MESSAGES = 10_000   # a streamed file's sessions are stored this many messages at a time
STALE_SHARE = 1.0                 # _Statistics: rows added, as a share of the table, that call for ANALYZE


class _Statistics:
    """The planner's statistics of the recall tables kept up with a streamed file's batches.

    The batches are stored in one transaction, which autovacuum cannot see: the triggers'
    statements went on being planned for the tables as they were before the file, and each batch
    took longer than the one before (2.0, 2.9, 3.7, 4.5 s for four batches of 10,000 messages into
    an empty database: bench/LOG.md 2026-12-02). ANALYZE in the transaction sees its rows; it
    runs when what the file added since the last one exceeds STALE_SHARE of the table's messages
    (the table doubled: five times for 200,000 messages into an empty database, never for a file
    small beside the table). A role
    that may not analyze a table is told so by a warning, not an error: the import goes on."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        # (not on a Citus cluster: the triggers run on the shards, whose tables the coordinator's
        # ANALYZE in a transaction block is not measured to reach)
        self.off = _db.distributed(conn)
        self.rows = 0.0 if self.off else self._rows()
        self.added_then = 0

    def _rows(self) -> float:
        return max(self.conn.execute("select reltuples from pg_class where oid = 'recall.messages'::regclass"
                                     ).fetchone()[0], 0)

    def refresh(self, added: int) -> None:
        if not self.off and added and added - self.added_then > STALE_SHARE * self.rows:
            self.conn.execute("analyze recall.sessions, recall.messages, recall.chunks")
            self.rows, self.added_then = self._rows(), added


def _batches(sessions: Iterator[Session]) -> Iterator[list[Session]]:
    """The sessions in batches of about SESSION_BATCH_MESSAGES messages; a session given in
    pieces (jsonl.stream) never twice in one batch (one INSERT ... ON CONFLICT per batch)."""
    batch: list[Session] = []
    ids: set[tuple] = set()
    n = 0
    for s in sessions:
        if (s.agent_id, s.session_id) in ids:
            yield batch
            batch, ids, n = [], set(), 0
        ids.add((s.agent_id, s.session_id))
        batch.append(s)
        n += len(s.messages)
        if n >= SESSION_BATCH_MESSAGES:
            yield batch
            batch, ids, n = [], set(), 0
    if batch:
        yield batch


def _parser(fmt: str):
    """The parser `pyrecall import` uses for a format: the streaming one where there is one."""
    return STREAMING.get(fmt) or PARSERS[fmt]


def _sync_archive(conn: psycopg.Connection, path: Path, agent_id: str, size: int, mtime: datetime,
                  result: FileResult) -> FileResult:
    """A .zip archive named on the command line (a chat app's data export as the app e-mails it):
    each of its .json and .jsonl members read as a file of its own (its format detected), all in
    one transaction; problems name the member (``archive.zip!conversations.json``). The archive is
    remembered as one file, read again whole when it changes."""
    import shutil
    import tempfile
    import zipfile

    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise ImportFormatError(f"{path}: not a zip archive pyrecall can read ({exc})") from None
    read = 0
    with archive, tempfile.TemporaryDirectory(prefix="pyrecall-zip-") as tmp, conn.transaction():
        for i, info in enumerate(archive.infolist()):
            parts = info.filename.split("/")
            if info.is_dir() or not info.filename.lower().endswith(SUFFIXES) or "__MACOSX" in parts:
                continue
            shown = f"{path}!{info.filename}"
            member = Path(tmp, f"{i}-{Path(parts[-1]).name}")
            with archive.open(info) as src, open(member, "wb") as dst:
                shutil.copyfileobj(src, dst)
            fmt = detect_format(member)
            if fmt is None:
                result.problems.append(Problem(shown, None, "not a transcript (skipped)"))
                continue
            parsed = _parser(fmt)(member)
            ingested = _store(conn, member, 0, parsed, agent_id, result)
            # (after the store: a streamed member's problems are found as it is read)
            result.problems += [Problem(shown, p.line, p.reason) for p in parsed.problems]
            result.sessions += ingested.sessions
            result.messages += ingested.messages
            result.inserted += ingested.inserted
            result.forgotten += ingested.forgotten
            read += 1
            member.unlink()
        if not read:
            result.status, result.format = "not-transcript", None
            _record(conn, path, agent_id, UNKNOWN, size, mtime, size, None, 0, len(result.problems),
                    accumulate=False)
            if not result.problems:
                result.problems.append(Problem(str(path), None, "no .json or .jsonl file in the archive (skipped)"))
            return result
        result.format, result.start_offset, result.end_offset = ARCHIVE, 0, size
        _record(conn, path, agent_id, ARCHIVE, size, mtime, size, None, result.messages, len(result.problems),
                accumulate=False)
    return result


def _restore(conn: psycopg.Connection, records: list[dict], agent_id: str) -> tuple[int, ...]:
    """An export's memories, importance, vectors, turns, summaries and forgotten sessions
    (recall.import_records), per agent
    named and in batches (its messages are stored first, in the same transaction); how many of
    each were restored."""
    by_agent: dict[str, list[dict]] = {}
    for r in records:
        by_agent.setdefault(r.get("agent_id") or agent_id, []).append(r)
    totals = [0, 0, 0, 0, 0, 0]
    for agent, mine in by_agent.items():
        # memories in one call (one may supersede another); the rest 5,000 records a call
        memories = [r for r in mine if r.get("record") == "memory"]
        rest = [r for r in mine if r.get("record") != "memory"]
        for batch in [memories] + [rest[i:i + RECORDS_PER_CALL] for i in range(0, len(rest), RECORDS_PER_CALL)]:
            if batch:
                got = conn.execute("select * from recall.import_records(%s, %s)", [agent, Jsonb(batch)]).fetchone()
                totals = [t + g for t, g in zip(totals, got, strict=True)]
    return tuple(totals)


RECORDS_PER_CALL = 5000


def _not_transcript(path: Path, size: int) -> FileResult:
    reason = "not a transcript (skipped)" if size else "empty file (skipped)"
    return FileResult(str(path), "not-transcript", None, 0, size,
                      problems=[Problem(str(path), None, reason)])


def _keep_first_project(conn: psycopg.Connection, sessions, agent_id: str) -> None:
    """Appended lines do not move a stored session to another project: the Claude Code
    importer takes the first cwd of a file as its project, later ones may be subfolders."""
    ids = [s.session_id for s in sessions if s.project]
    if not ids:
        return
    stored = {sid for (sid,) in conn.execute(
        "select session_id from recall.sessions where agent_id = %s and session_id = any(%s) "
        "and project is not null", [agent_id, ids]).fetchall()}
    for s in sessions:
        if s.session_id in stored:
            s.project = None


def _record(conn: psycopg.Connection, path: Path, agent_id: str, fmt: str, size: int,
            mtime: datetime, offset: int, sha: str | None, messages: int, problems: int, *,
            accumulate: bool) -> None:
    conn.execute(
        """insert into recall.source_files as f
             (path, agent_id, format, size, mtime, offset_done, content_sha, messages, problems)
           values (%s, %s, %s, %s, %s, %s, %s, %s, %s)
           on conflict (agent_id, path) do update
             set format = excluded.format, size = excluded.size, mtime = excluded.mtime,
                 offset_done = excluded.offset_done, content_sha = excluded.content_sha,
                 messages = case when %s then f.messages + excluded.messages
                                 else excluded.messages end,
                 problems = case when %s then f.problems + excluded.problems
                                 else excluded.problems end,
                 synced_at = %s""",
        # the time as a value: a Citus cluster refuses a non-immutable function (now()) in the
        # DO UPDATE of a distributed table (`pyrecall import` on a coordinator failed so)
        [str(path), agent_id, fmt, size, mtime, offset, sha, messages, problems,
         accumulate, accumulate, datetime.now(UTC)])


def _remember_roots(conn: psycopg.Connection, folders: list[Path], agent_id: str) -> None:
    now = datetime.now(UTC)
    for folder in folders:
        conn.execute(
            """insert into recall.source_files (path, agent_id, format, size, mtime)
               values (%s, %s, %s, 0, %s)
               on conflict (agent_id, path) do update set synced_at = %s""",
            [str(folder), agent_id, FOLDER, now, now])


def _forget_gone(conn: psycopg.Connection, roots: list[Path], agent_id: str,
                 seen: set[str]) -> list[str]:
    """Drop the rows of remembered files under ``roots`` that no longer exist."""
    gone = []
    for path, _fmt in conn.execute(
            "select path, format from recall.source_files where agent_id = %s and format <> %s",
            [agent_id, FOLDER]).fetchall():
        p = Path(path)
        if path in seen or p.exists():
            continue
        if any(p == r or _is_under(p, r) for r in roots):
            gone.append(path)
    if gone:
        conn.execute("delete from recall.source_files where agent_id = %s and path = any(%s)",
                     [agent_id, gone])
    return gone


def _head_sha(path: Path, upto: int) -> str:
    """SHA-256 of the first min(upto, 64 KiB) bytes: what was consumed must not change."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(min(upto, HEAD_BYTES))).hexdigest()


def _absolute(path: str | os.PathLike) -> Path:
    return Path(os.path.abspath(Path(path).expanduser()))


def _is_under(path: Path, folder: Path) -> bool:
    return folder in path.parents


def _require_agent(agent_id: str) -> None:
    if not agent_id:
        raise ConfigError("an agent id is required")

