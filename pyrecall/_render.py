"""What the terminal shows: recall results as a table, JSON, Markdown or a context block for
a system prompt (the queries behind ``pyrecall sessions`` and ``pyrecall show`` are the
client's: ``Recall.sessions``, ``Recall.show``).

The context block (``--format context``) is what an agent pastes into its prompt:

    ## Relevant memory
    ### Recent
    - 2026-03-16 · conversation · "Refresh tokens" (acme-api, feature/auth)
      User: Add refresh tokens ...
    ### Failures to avoid
    - 2026-03-05 · tool · "Docker deploy to staging"
      Bash(command="docker compose build api") ...
      - Then: Alpine is musl-based: ...
"""

from __future__ import annotations

import json
import re
from typing import Any

from .client import Memory, RecallResult, SessionInfo  # noqa: F401  (SessionInfo: for labels)

FORMATS = ("table", "json", "context", "markdown")
SECTIONS = {"pinned": "Pinned", "recent": "Recent", "related": "Related",
            "failures": "Failures to avoid"}
KIND_LABELS = {"turn_pair": "conversation", "window": "chat", "thinking": "reasoning", "tool": "tool",
               "code": "code", "message": "message", "summary": "summary", "memory": "memory"}


def short_ids(ids: list[str], minimum: int = 8) -> dict[str, str]:
    """Each id cut to its shortest prefix of at least ``minimum`` characters that no other id
    of the list shares (ids up to 30 characters are kept whole, UUIDs are cut).

    >>> short_ids(["6279b780-6d27-5bff", "10b1d23c-c2b6-582e", "standup"])
    {'6279b780-6d27-5bff': '6279b780-6d27-5bff', '10b1d23c-c2b6-582e': '10b1d23c-c2b6-582e', 'standup': 'standup'}
    """
    out = {}
    for i in ids:
        if len(i) <= 30:
            out[i] = i
            continue
        n = minimum
        while n < len(i) and any(o != i and o.startswith(i[:n]) for o in ids):
            n += 1
        out[i] = i[:n]
    return out


# ---------------------------------------------------------------- recall results

def memory_dict(m: Memory, info: SessionInfo | None = None) -> dict[str, Any]:
    d = {
        "chunk_id": m.chunk_id, "session_id": m.session_id, "kind": m.kind, "content": m.content,
        "created_at": m.created_at.isoformat() if m.created_at else None,
        "score": m.score, "similarity": m.similarity, "text_rank": m.text_rank,
        "recency": m.recency, "importance": m.importance, "n_tokens": m.n_tokens,
        "cumulative_tokens": m.cumulative_tokens, "metadata": m.metadata,
        "message_ids": list(m.message_ids or []),
    }
    if section_of(m):
        d["section"] = m.section
    if m.session_rank is not None:  # session_recall: the rank of the row's session
        d["session_rank"] = m.session_rank
    d.update(memory_id=m.memory_id, agent_id=m.agent_id, role=m.role)
    if m.memory_id is not None:
        d["memory_kind"] = m.memory_kind
    if m.session_title is not None or info is not None:
        d["session_title"] = m.session_title if m.session_title is not None else info.title
    if info is not None and info.turns is not None:
        d["session_turns"], d["session_span_seconds"] = info.turns, info.span_seconds
    if m.metadata and m.metadata.get("permalink"):
        d["permalink"] = m.metadata["permalink"]
    return d


def section_of(m: Memory) -> str | None:
    return m.section if isinstance(m.section, str) and m.section in SECTIONS else None


def to_json(result: RecallResult, *, mode: str, infos: dict[str, SessionInfo],
            scope: dict | None = None) -> str:
    """One JSON object: the query, how it was answered, and the memories in order."""
    doc = {"query": result.query, "mode": mode, "source": result.source, "note": result.note,
           **(scope or {}), "tokens": result.tokens, "count": len(result.memories),
           "memories": [memory_dict(m, infos.get(m.session_id)) for m in result.memories]}
    return json.dumps(doc, ensure_ascii=False, indent=2, default=str)


def _label(m: Memory, info: SessionInfo | None, *, show_session: bool = True,
           scope: dict | None = None) -> str:
    """``date · kind #id · "session title" (channel; author; project, branch)``; the project and
    branch are left out where they are the scope the whole answer is about. The id: a curated
    memory's (to correct, pin or forget it), else its chunk's (`pyrecall expand ID`, the MCP
    tool expand: what was said around it; `pyrecall mark ID`)."""
    parts = [m.created_at.strftime("%Y-%m-%d") if m.created_at else "?",
             f"{KIND_LABELS.get(m.kind, m.kind)} #{m.chunk_id}"]
    if m.memory_id is not None:   # a curated memory: its kind and id
        parts[1] = f"{m.memory_kind or 'memory'} #{m.memory_id}"
        show_session = False
    if not show_session:
        pass
    elif info and info.title:
        parts.append(f'"{_one_line(info.title, 80)}"')
    else:
        parts.append(f"session {m.session_id[:8]}")
    meta = m.metadata or {}
    where = [x for x in (meta.get("channel") and f"#{meta['channel']}",
                         meta.get("author")) if x]
    scope = scope or {}
    if show_session and info:
        place = [_short_project(info.project) if info.project != scope.get("project") else None,
                 info.branch if info.branch != scope.get("branch") else None]
        if any(place):
            where.append(", ".join(x for x in place if x))
    label = " · ".join(parts)
    if where:
        label += f" ({'; '.join(where)})"
    if meta.get("permalink"):
        label += f" <{meta['permalink']}>"
    return label


def _indent(text: str, prefix: str = "  ") -> str:
    lines = text.strip("\n").splitlines() or [""]
    return "\n".join(prefix + line if line.strip() else "" for line in lines)


def _item(m: Memory, info: SessionInfo | None, *, show_session: bool = True,
          scope: dict | None = None) -> str:
    return f"- {_label(m, info, show_session=show_session, scope=scope)}\n{_indent(m.content)}"


def to_context(result: RecallResult, *, infos: dict[str, SessionInfo], auto: bool,
               by_session: bool = False, scope: dict | None = None,
               heading: str = "## Relevant memory") -> str:
    """Markdown for a system prompt. ``auto``: sections Recent / Related / Failures to avoid;
    ``by_session``: a sub-heading per session; else one list in score order. ``scope``
    (project, branch) is not repeated on every item. Empty when there is nothing to say (a
    start-up hook then adds nothing to the prompt)."""
    if not result.memories:
        return ""
    out = [heading]
    if auto:
        for key, title in SECTIONS.items():
            rows = [m for m in result.memories if m.section == key]
            if not rows:
                continue
            out.append(f"### {title}")
            out.extend(_failure_items(rows, infos, scope) if key == "failures"
                       else [_item(m, infos.get(m.session_id), scope=scope) for m in rows])
    elif by_session:
        # sessions in session_recall's order (session_rank), else by their best row
        order: list[str] = []
        for m in sorted(result.memories, key=lambda m: m.session_rank or 0):
            if m.session_id not in order:
                order.append(m.session_id)
        for sid in order:
            info = infos.get(sid)
            title = info.title if info and info.title else f"session {sid}"
            when = info.started_at.strftime("%Y-%m-%d") if info and info.started_at else ""
            out.append(f"### {_one_line(title, 100)}" + (f" ({when})" if when else ""))
            out.extend(_item(m, info, show_session=False)
                       for m in result.memories if m.session_id == sid)
    else:
        out.extend(_item(m, infos.get(m.session_id), scope=scope) for m in result.memories)
    return "\n".join(out) + "\n"


def render_context(result: RecallResult, *, heading: str = "## Relevant memory",
                   by_session: bool = False, scope: dict | None = None) -> str:
    """A recall result as the Markdown block for a system prompt (what ``pyrecall recall
    --format context`` prints): sections Pinned / Recent / Related / Failures to avoid for an
    auto_context result, a sub-heading per session with ``by_session``, else one list in score
    order; each item labelled with its date, kind (a memory: ``fact #ID``) and session title.
    Empty when there is nothing to say. Needs no database: the rows carry their session titles.

    >>> prompt = render_context(memory.auto_context("aria", project="shop", task_text="deploy"))
    """
    infos = {}
    for m in result.memories:
        meta = m.metadata or {}
        infos.setdefault(m.session_id, SessionInfo(m.session_id, m.session_title,
                                                   meta.get("project"), meta.get("branch"), None))
    auto = any(section_of(m) for m in result.memories)
    return to_context(result, infos=infos, auto=auto, by_session=by_session and not auto,
                      scope=scope, heading=heading)


def _failure_items(rows: list[Memory], infos: dict[str, SessionInfo],
                   scope: dict | None) -> list[str]:
    """A failure, then what the agent concluded from it (metadata.resolution_of) nested below."""
    items: list[str] = []
    shown = {m.chunk_id for m in rows}
    for m in rows:
        parent = (m.metadata or {}).get("resolution_of")
        if parent is not None and parent in shown:
            items.append(f"  - Then: {_indent(m.content, '    ').lstrip()}")
        else:
            items.append(_item(m, infos.get(m.session_id), scope=scope))
    return items


def to_markdown(result: RecallResult, *, infos: dict[str, SessionInfo], mode: str) -> str:
    """A Markdown report for people: every memory with its score, session and provenance."""
    title = "Session-start context" if mode == "auto" else f"Recall: {result.query!r}"
    lines = [f"# {title}", "",
             f"source: {result.source} · {len(result.memories)} memories · {result.tokens} tokens"]
    if result.note:
        lines.append(f"note: {result.note}")
    section = None
    for i, m in enumerate(result.memories, 1):
        sec = section_of(m)
        if sec and sec != section:
            section = sec
            lines += ["", f"## {SECTIONS[sec]}"]
        info = infos.get(m.session_id)
        lines += ["", f"### {i}. {KIND_LABELS.get(m.kind, m.kind)} · "
                      f"{m.created_at:%Y-%m-%d %H:%M} · score {m.score:.3f}", ""]
        facts = [f"session `{m.session_id}`" + (f" — {info.title}" if info and info.title else "")]
        if info and info.project:
            facts.append(f"project `{info.project}`")
        if info and info.branch:
            facts.append(f"branch `{info.branch}`")
        if m.metadata and m.metadata.get("permalink"):
            facts.append(m.metadata["permalink"])
        comps = [f"similarity {m.similarity:.3f}" if m.similarity is not None else None,
                 f"text {m.text_rank:.3f}" if m.text_rank else None,
                 f"recency {m.recency:.3f}" if m.recency is not None else None,
                 f"{m.n_tokens} tokens"]
        lines += ["*" + " · ".join(facts) + "*", "*" + " · ".join(c for c in comps if c) + "*", "",
                  m.content.strip()]
    if not result.memories:
        lines += ["", "_Nothing found._"]
    return "\n".join(lines) + "\n"


def print_table(console, result: RecallResult, *, infos: dict[str, SessionInfo], mode: str) -> None:
    """A rich table: one row per memory; its kind and session, then its content cut short.
    The content goes in as rich Text, not markup: shown as written (a ``:rocket:`` stays so)
    and ~10 ms sooner in a one-shot process (no markup or emoji parsing)."""
    from rich.table import Table
    from rich.text import Text

    caption = [f"{len(result.memories)} memories", f"{result.tokens} tokens"]
    if result.query:
        caption.insert(0, f"source={result.source}")
    table = Table(show_lines=True, expand=True, caption=" · ".join(caption))
    table.add_column("#", justify="right", no_wrap=True)
    if mode == "auto":
        table.add_column("section", no_wrap=True)
    else:
        table.add_column("score", justify="right", no_wrap=True)
    table.add_column("when", no_wrap=True)
    table.add_column("memory", ratio=1, overflow="fold")
    for i, m in enumerate(result.memories, 1):
        info = infos.get(m.session_id)
        session = info.title if info and info.title else f"session {m.session_id}"
        head = f"{KIND_LABELS.get(m.kind, m.kind)} · {_one_line(session, 70)}"
        if m.metadata and m.metadata.get("permalink"):
            head += f" · {m.metadata['permalink']}"
        head += f" · chunk {m.chunk_id}"       # the id `pyrecall mark` takes
        body = Text(head, style="dim")
        body.append("\n" + _shorten(m.content, 400))
        first = (m.section or "") if mode == "auto" else f"{m.score:.3f}"
        table.add_row(str(i), first, f"{m.created_at:%Y-%m-%d}", body)
    console.print(table)


# ---------------------------------------------------------------- helpers

def span_text(seconds: float | None) -> str:
    """A session's length, short: ``45s``, ``12m``, ``3h05``, ``2d4h``.

    >>> [span_text(x) for x in (0, 45, 720, 3 * 3600 + 300, 2 * 86400 + 4 * 3600 + 1)]
    ['0s', '45s', '12m', '3h05', '2d4h']
    """
    if seconds is None:
        return ""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def _one_line(text: str, width: int) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def _shorten(text: str, width: int, max_lines: int = 8) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    text = "\n".join(lines[:max_lines]) + ("\n…" if len(lines) > max_lines else "")
    return text if len(text) <= width else text[: width - 1] + "…"


def _short_project(project: str | None) -> str | None:
    """The last part of a project path: /home/dev/acme-api -> acme-api."""
    if not project:
        return None
    return project.rstrip("/").rsplit("/", 1)[-1] or project
