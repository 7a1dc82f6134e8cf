"""`pyrecall status`: the checks that are not the database's — the coding agents' hooks and MCP
servers that call pyrecall, and the memory they point at — and what to do next.

The agent's counts come from the database (``recall.agent_status``, :meth:`Recall.status`); here
only files in the user's home are read (never written), each tolerantly: a missing or broken
settings file is "not configured", never an error.

>>> [w.agent for w in wiring(Path("/nonexistent"))]
['Claude Code', 'Codex CLI', 'Gemini CLI']
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ._embed import vector_space

_DATA_DIR = re.compile(r"PYRECALL_DATA_DIR=(\"[^\"]*\"|'[^']*'|[^\s;&|]+)")


@dataclass
class Wiring:
    """Where a coding agent is told to call pyrecall: the hook events and MCP servers found."""

    agent: str
    settings: str                                   # the file read for its hooks
    hooks: list[str] = field(default_factory=list)  # events whose command runs pyrecall
    mcp: bool = False                               # an MCP server that runs `pyrecall mcp`
    data_dirs: list[str] = field(default_factory=list)  # PYRECALL_DATA_DIR the commands set


def wiring(home: Path | None = None) -> list[Wiring]:
    """Claude Code's, Codex CLI's and Gemini CLI's settings, as far as they call pyrecall."""
    home = home or Path.home()
    claude = _hooks(Wiring("Claude Code", str(home / ".claude" / "settings.json")))
    claude.mcp = _mcp_json(home / ".claude.json") or _mcp_json(home / ".claude" / "settings.json")
    codex = _hooks(Wiring("Codex CLI", str(home / ".codex" / "hooks.json")))
    codex.mcp = _mcp_toml(home / ".codex" / "config.toml")
    gemini = _hooks(Wiring("Gemini CLI", str(home / ".gemini" / "settings.json")))
    gemini.mcp = _mcp_json(home / ".gemini" / "settings.json")
    return [claude, codex, gemini]


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _hooks(w: Wiring) -> Wiring:
    hooks = _read_json(Path(w.settings)).get("hooks")
    for event, groups in (hooks.items() if isinstance(hooks, dict) else ()):
        for group in groups if isinstance(groups, list) else ():
            for hook in (group.get("hooks") if isinstance(group, dict) else None) or ():
                command = hook.get("command") if isinstance(hook, dict) else None
                if isinstance(command, str) and re.search(r"\bpyrecall\b", command):
                    if event not in w.hooks:
                        w.hooks.append(event)
                    w.data_dirs += [d.strip("'\"") for d in _DATA_DIR.findall(command)]
    return w


def _runs_pyrecall(server) -> bool:
    if not isinstance(server, dict):
        return False
    words = [server.get("command")] + list(server.get("args") or [])
    return any(isinstance(x, str) and re.search(r"\bpyrecall\b", x) for x in words)


def _mcp_json(path: Path) -> bool:
    servers = _read_json(path).get("mcpServers")
    return isinstance(servers, dict) and any(_runs_pyrecall(s) for s in servers.values())


def _mcp_toml(path: Path) -> bool:
    try:
        servers = tomllib.loads(path.read_text(encoding="utf-8")).get("mcp_servers")
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(servers, dict) and any(_runs_pyrecall(s) for s in servers.values())


def other_memories(wired: list[Wiring], data_dir: Path, dsn: str | None) -> list[tuple[str, str]]:
    """(agent, data dir) of the hooks that keep their memory elsewhere than this status reads:
    another PYRECALL_DATA_DIR (without PYRECALL_DSN, the one that counts)."""
    if dsn:
        return []
    here = _resolved(str(data_dir))
    return [(w.agent, d) for w in wired for d in dict.fromkeys(w.data_dirs) if _resolved(d) != here]


def _resolved(path: str) -> str:
    path = path.replace("${HOME}", "~").replace("$HOME", "~")
    return os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def unread_folders(defaults: list[Path], remembered: list[Path]) -> list[Path]:
    """The coding agents' own folders that exist but that no import or sync of this agent reads
    (``pyrecall sync`` reads them on its first run only: a folder made later is not found)."""
    def under(p: Path, root: Path) -> bool:
        return p == root or root in p.parents
    return [d for d in defaults if d.exists() and not any(under(d, r) for r in remembered)]


def next_steps(st: dict | None, *, pending_migrations: int, model: str,
               wired: list[Wiring], elsewhere: list[tuple[str, str]],
               unread: list[Path] = ()) -> list[str]:
    """What to do next, most urgent first, each a command to run or a fact to know.

    >>> next_steps({"sessions": 0, "pending": 0, "failing": 0, "models": {}, "file_problems": 0,
    ...             "vector_path": "exact"}, pending_migrations=0, model="local/all-MiniLM-L6-v2",
    ...            wired=[], elsewhere=[])[0]
    'no sessions yet: `pyrecall import ~/.claude/projects` (or any transcript folder), then `pyrecall embed`'
    """
    steps = []
    if pending_migrations:
        steps.append(f"the schema is older than this pyrecall ({pending_migrations} migration(s) pending): "
                     "`pyrecall migrate`")
    if st is None:
        if not pending_migrations:
            steps.append("the schema's functions are older than this pyrecall (no recall.agent_status): "
                         "`pyrecall migrate`")
        return steps
    if not st["sessions"]:
        steps.append("no sessions yet: `pyrecall import ~/.claude/projects` (or any transcript folder), "
                     "then `pyrecall embed`")
    if st["pending"]:
        failing = f", {st['failing']} of them failed before" if st["failing"] else ""
        steps.append(f"{st['pending']} chunk(s) wait to be embedded{failing} (found by keywords until then): "
                     "`pyrecall embed`, or keep `pyrecall worker` running")
    spaces = {vector_space(m) for m in st["models"]}
    if len(spaces) > 1:
        steps.append(f"the vectors come from {len(spaces)} models ({', '.join(st['models'])}): a query ranks "
                     f"one model's only: `pyrecall embed --reembed --model {model}`")
    elif spaces and vector_space(model) not in spaces:
        stored = next(iter(st["models"]))
        steps.append(f"the vectors are {stored}'s but the configured model is {model}: recall goes by "
                     f"keywords; set PYRECALL_EMBED_MODEL={stored}, or `pyrecall embed --reembed`")
    if st["file_problems"]:
        steps.append(f"{st['file_problems']} imported file(s) had problems at their last read (skipped or "
                     "repaired lines): `pyrecall import --full PATH` lists them again")
    if st["vector_path"].startswith("exact (large"):
        steps.append("the agent is past the exact scan's size with no vector index: `pyrecall dba index`")
    for folder in unread:
        steps.append(f"{folder} holds sessions no sync of this agent reads: `pyrecall import '{folder}'` "
                     "(then `pyrecall sync` keeps up with it)")
    if st["sessions"] and not any(w.hooks or w.mcp for w in wired):
        steps.append("no coding agent calls pyrecall yet: the SessionStart hook or `pyrecall mcp` (README)")
    for agent, d in elsewhere:
        steps.append(f"{agent}'s hook keeps its memory in {_resolved(d)}, not here: "
                     f"`PYRECALL_DATA_DIR={_resolved(d)} pyrecall status`")
    return steps
