"""Discord channel exports in DiscordChatExporter's JSON format.

One session per channel (``discord:<channel id>``). Messages of authors flagged ``isBot`` are
the assistant's, everyone else's the user's; only chat messages (types Default and Reply) are
imported, not joins, pins or calls. The session is chunked as a chat (``chunking: window``):
overlapping windows of messages, each named by its ``author`` in the chunk's text, the window's
``metadata.messages`` listing every message's metadata (sql/idempotent/010-messages.sql).
"""

from __future__ import annotations

import os
from typing import Any

from ._read import (
    checked,
    clean_text,
    clean_value,
    id_or_none,
    parse_time,
    read_document,
    span,
    text_or_none,
)
from ._records import Message, ParseResult, Problem, Session

FORMAT = "discord"
CHAT_TYPES = ("Default", "Reply")


def parse(path: str | os.PathLike, *, start_offset: int = 0) -> ParseResult:
    """Parse a DiscordChatExporter JSON export (the whole file, whatever ``start_offset``).

    Message metadata: channel, guild, author, author_id, permalink and, when present,
    reply_to, mentions, reactions, attachments. A message with no text but attachments is
    imported as the list of its attachments' names; one with embeds only, as their text.

    >>> s = parse("tests/fixtures/importers/discord.json").sessions[0]
    >>> s.session_id, s.messages[0].metadata["permalink"]
    ('discord:1150000000000000002', 'https://discord.com/channels/1150000000000000001/1150000000000000002/1200000000000000001')
    """
    path = checked(path)
    doc, problems, size = read_document(path, depth=2)
    root = doc.value
    if not isinstance(root, dict) or not isinstance(root.get("channel"), dict):
        if root is not None:
            problems.append(Problem(str(path), 1, "not a Discord export: no channel"))
        return ParseResult([], problems, FORMAT, size)
    guild = root.get("guild") if isinstance(root.get("guild"), dict) else {}
    channel = root["channel"]
    channel_id = id_or_none(channel.get("id"))
    if channel_id is None:
        problems.append(Problem(str(path), doc.line(channel), "channel without an id"))
        return ParseResult([], problems, FORMAT, size)
    guild_id = id_or_none(guild.get("id"))
    names = {"channel": text_or_none(channel.get("name")), "guild": text_or_none(guild.get("name"))}
    session = Session(f"discord:{channel_id}",
                      title=f"#{names['channel']}" if names["channel"] else None,
                      # a chat between people: chunked in overlapping windows of messages
                      metadata={**clean_value(names), "chunking": "window",
                                "channel_id": channel_id, "guild_id": guild_id,
                                "category": text_or_none(channel.get("category")),
                                "topic": text_or_none(channel.get("topic"))})
    session.metadata = {k: v for k, v in session.metadata.items() if v is not None}

    messages = root.get("messages")
    if not isinstance(messages, list):
        problems.append(Problem(str(path), 1, "export without a list of messages"))
        messages = []
    for i, m in enumerate(messages):
        line = doc.line(m)
        if not isinstance(m, dict):
            problems.append(Problem(str(path), line, f"messages[{i}]: not an object"))
            continue
        if m.get("type", "Default") not in CHAT_TYPES:
            continue
        try:
            message, reason = _message(m, names, guild_id, channel_id)
        except RecursionError:
            message, reason = None, "nested too deeply"
        if message is None:
            problems.append(Problem(str(path), line, f"messages[{i}]: {reason}"))
            continue
        session.messages.append(message)
        if not parse_time(m.get("timestamp"))[1]:
            problems.append(Problem(str(path), line, f"messages[{i}]: invalid timestamp"))
    session.started_at, session.ended_at = span([m.created_at for m in session.messages])
    return ParseResult([session] if session.messages else [], problems, FORMAT, size)


def _message(m: dict, names: dict, guild_id: str | None,
             channel_id: str) -> tuple[Message | None, str | None]:
    """The message, or None and why it was dropped."""
    mid = id_or_none(m.get("id"))
    if mid is None:
        return None, "message without an id"
    author = m.get("author") if isinstance(m.get("author"), dict) else {}
    attachments = [a for a in _list(m, "attachments") if isinstance(a, dict)]
    content = m.get("content") if isinstance(m.get("content"), str) else ""
    if not clean_text(content).strip():
        content = "\n".join(
            [f"[attachment: {a['fileName']}]" for a in attachments
             if isinstance(a.get("fileName"), str)]
            + [e[k] for e in _list(m, "embeds") if isinstance(e, dict)
               for k in ("title", "description") if isinstance(e.get(k), str)])
    content = clean_text(content)
    if not content.strip():
        return None, "empty content"
    guild = guild_id if guild_id not in (None, "0") else "@me"
    meta: dict[str, Any] = {
        **names,
        "author": text_or_none(author.get("name")),
        "author_id": id_or_none(author.get("id")),
        # Direct messages have no guild (the exporter writes id 0): their links use @me.
        "permalink": f"https://discord.com/channels/{guild}/{channel_id}/{mid}",
    }
    if isinstance(m.get("reference"), dict):
        meta["reply_to"] = id_or_none(m["reference"].get("messageId"))
    if mentions := [u["name"] for u in _list(m, "mentions")
                    if isinstance(u, dict) and isinstance(u.get("name"), str)]:
        meta["mentions"] = mentions
    if reactions := [{"emoji": r["emoji"]["name"], "count": r.get("count")}
                     for r in _list(m, "reactions") if isinstance(r, dict)
                     and isinstance(r.get("emoji"), dict) and isinstance(r["emoji"].get("name"), str)]:
        meta["reactions"] = reactions
    if attachments:
        meta["attachments"] = [{"name": a.get("fileName"), "url": a.get("url")} for a in attachments]
    meta = {k: v for k, v in meta.items() if v is not None}
    created, _ = parse_time(m.get("timestamp"))
    role = "assistant" if author.get("isBot") is True else "user"
    return Message(mid, role, "text", content, created, None, clean_value(meta)), None


def _list(m: dict, key: str) -> list:
    value = m.get(key)
    return value if isinstance(value, list) else []
