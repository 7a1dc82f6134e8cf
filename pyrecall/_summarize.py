"""Session summaries: extractive in the database by default, written by an LLM on request.

The extractive summary (``recall.summarize_sessions``) needs no model: a session's embedding
is the centroid of its chunk embeddings and its summary the text of its most central chunks.
With a model (any chat model litellm knows: ``openai/gpt-4o-mini``, ``ollama/llama3.2``, ...)
the summary text is written by that model from the session's transcript, kept in
``recall.sessions.summary`` (``summary_model`` = the model) and stored as a ``summary`` chunk,
so that recall finds it like any other memory once it is embedded (``recall.save_summary``).

    >>> with connect() as conn:                                   # doctest: +SKIP
    ...     summarize(conn, agent_id="claude-code", model="openai/gpt-4o-mini")
    SummaryReport(extractive=4, written=4, failed=0, ...)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta

import psycopg

from ._errors import ConfigError, PyrecallError, one_line

MAX_TRANSCRIPT_CHARS = 24_000   # about 6k tokens of transcript per session
PROMPT = (
    "You summarize one working session of an AI coding agent so that the agent can recall it "
    "later. In 3 to 6 plain sentences, say: the goal; what was done and decided (name files, "
    "commands, libraries, settings); what went wrong and how it was fixed; what is left open. "
    "No preamble, no lists, no Markdown."
)

TODO_SQL = """
select s.agent_id, s.session_id, s.title
from recall.sessions s
where (%(agent)s::text is null or s.agent_id = %(agent)s)
  and (not %(only_stale)s or s.summary is null or s.summary_model is distinct from %(model)s
       or exists (select from recall.chunks c
                  where c.agent_id = s.agent_id and c.session_id = s.session_id and c.kind <> 'summary'
                    and c.embedded_at > s.summary_at))
  and exists (select from recall.messages m where m.agent_id = s.agent_id and m.session_id = s.session_id)
order by s.started_at, s.session_id
"""



@dataclass
class SummaryReport:
    extractive: int = 0          # sessions whose extractive summary / centroid was (re)made
    written: int = 0             # sessions summarized by the model
    failed: int = 0              # sessions the model failed on (errors: why)
    model: str | None = None
    errors: list[str] = field(default_factory=list)
    not_tried: int = 0           # sessions the model was not asked: it had failed on the first 3
    # the sessions the model did not write (failed, not tried) and the summary each keeps:
    # "extractive", another model's name, or None (none: no embedded chunk yet)
    kept: dict[str, str | None] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(conn: psycopg.Connection, *, agent_id: str | None = None, model: str | None = None,
              only_stale: bool = True, max_chars: int = 1200,
              completion: Callable[..., object] | None = None,
              progress: Callable[[str], None] | None = None) -> SummaryReport:
    """Summarize the sessions that changed since their last summary (all with only_stale=False).

    Extractive always (it also gives each session its embedding); with ``model``, the text is
    then written by that model. A session the model fails on keeps the summary it had (the
    extractive one just made, if it had none from a model): ``report.failed``, ``errors`` and
    ``kept`` say which; it stays stale for the model, so the next run tries it again.
    ``completion`` replaces ``litellm.completion`` (tests).
    """
    if max_chars < 100:
        raise ConfigError(f"max_chars must be at least 100, got {max_chars}")
    todo = []
    if model:
        todo = conn.execute(TODO_SQL, {"agent": agent_id, "only_stale": only_stale,
                                       "model": model}).fetchall()
    report = SummaryReport(model=model)
    report.extractive = conn.execute("select recall.summarize_sessions(%s, %s, %s)",
                                     [agent_id, only_stale, max_chars]).fetchone()[0]
    if not todo:
        return report
    _write_with_model(conn, todo, model, completion or _litellm_completion(), report, progress)
    return report


def _write_with_model(conn: psycopg.Connection, todo: list[tuple[str, str, str | None]], model: str,
                      complete: Callable[..., object], report: SummaryReport,
                      progress: Callable[[str], None] | None = None) -> None:
    """Have ``model`` write the summary of each (agent_id, session_id, title); failures are
    counted, and the summary the sessions not written keep is told (``report.kept``)."""
    left: list[tuple[str, str]] = []  # (agent_id, session_id) the model did not write
    for i, (agent_id, session_id, _title) in enumerate(todo):
        transcript = _transcript(conn, agent_id, session_id)
        if not transcript:
            continue
        try:
            response = complete(model=model, temperature=0, max_tokens=400, messages=[
                {"role": "system", "content": PROMPT},
                {"role": "user", "content": transcript}])
            text = _text_of(response)
        except Exception as exc:  # noqa: BLE001 - any provider failure: count it, go on
            report.failed += 1
            report.errors.append(f"{session_id}: {_one_line(exc)}")
            left.append((agent_id, session_id))
            if report.failed >= 3 and report.written == 0:
                # a bad key or an unknown model: no use trying every session
                rest = todo[i + 1:]
                report.not_tried += len(rest)
                left += [(a, sid) for a, sid, _title in rest]
                break
            continue
        conn.execute("select recall.save_summary(%s, %s, %s, %s)", [agent_id, session_id, text, model])
        report.written += 1
        if progress:
            progress(session_id)
    if left:
        report.kept.update(conn.execute(
            "select s.session_id, s.summary_model from recall.sessions s "
            "join unnest(%s::text[], %s::text[]) as l(agent_id, session_id) using (agent_id, session_id)",
            [[a for a, _ in left], [sid for _, sid in left]]).fetchall())


QUIET_SQL = ("select s.agent_id, q.session_id, s.title from recall.summarize_quiet_sessions("
             "quiet => %(quiet)s, agent_id => %(agent)s, model => %(model)s, "
             "max_sessions => %(max)s) q join recall.sessions s using (session_id) "
             "where %(agent)s::text is null or s.agent_id = %(agent)s")


class QuietSummarizer:
    """What the embedding worker runs between batches: sessions quiet for ``quiet`` whose
    summary is stale are summarized, extractively in the database
    (recall.summarize_quiet_sessions), then by ``model`` when one is given (any litellm chat
    model; default $PYRECALL_SUMMARY_MODEL). A model that keeps failing is left alone for
    ``pause`` before it is tried again (the extractive summaries go on).

    >>> QuietSummarizer(timedelta(minutes=10)).run(conn)         # doctest: +SKIP
    SummaryReport(extractive=2, written=0, failed=0, ...)
    """

    def __init__(self, quiet: timedelta, *, agent_id: str | None = None, model: str | None = None,
                 completion: Callable[..., object] | None = None, max_sessions: int = 20,
                 pause: timedelta = timedelta(minutes=10)):
        self.quiet, self.agent_id, self.max_sessions, self.pause = quiet, agent_id, max_sessions, pause
        # None: $PYRECALL_SUMMARY_MODEL; "" (or an unset variable): extractive only
        self.model = (model if model is not None else os.environ.get("PYRECALL_SUMMARY_MODEL")) or None
        self._completion = completion
        self._paused_until = 0.0

    def run(self, conn: psycopg.Connection) -> SummaryReport:
        report = SummaryReport(model=self.model)
        use_model = self.model if time.monotonic() >= self._paused_until else None
        todo = conn.execute(QUIET_SQL, {"quiet": self.quiet, "agent": self.agent_id,
                                        "model": use_model, "max": self.max_sessions}).fetchall()
        report.extractive = len(todo)
        if todo and use_model:
            if self._completion is None:
                self._completion = _litellm_completion()
            _write_with_model(conn, todo, use_model, self._completion, report)
            if report.failed and not report.written:
                self._paused_until = time.monotonic() + self.pause.total_seconds()
        return report


def _transcript(conn: psycopg.Connection, agent_id: str, session_id: str) -> str:
    """The session as plain text for the model; the middle is cut out of a long one."""
    rows = conn.execute("select role, kind, content, metadata->>'is_error' from recall.messages "
                        "where agent_id = %s and session_id = %s order by seq", [agent_id, session_id]).fetchall()
    lines = []
    for role, kind, content, is_error in rows:
        if kind == "text":
            lines.append(f"{role.capitalize()}: {content.strip()}")
        elif kind == "thinking":
            lines.append(f"(Assistant thinking) {content.strip()[:1500]}")
        elif kind == "tool_call":
            lines.append(f"Tool call: {content.strip()[:400]}")
        else:
            flag = " (error)" if is_error == "true" else ""
            lines.append(f"Tool result{flag}: {content.strip()[:600]}")
    text = "\n\n".join(lines)
    if len(text) > MAX_TRANSCRIPT_CHARS:
        half = MAX_TRANSCRIPT_CHARS // 2
        text = text[:half] + "\n\n[... middle of the session left out ...]\n\n" + text[-half:]
    return text


def _litellm_completion():
    # Through the embedders' import of litellm: it sets what litellm reads once, at import
    # (the local price list, instead of a download; DEFAULT_MAX_RETRIES), the same for every
    # part of pyrecall whichever imports it first.
    from ._embed import _is_configuration_error, _litellm

    litellm = _litellm()

    # retried here, not by litellm's num_retries: that path needs tenacity, which litellm does
    # not install, and then reports "tenacity import failed" instead of the provider's error
    transient = tuple(getattr(litellm, name) for name in (
        "RateLimitError", "APIConnectionError", "Timeout", "InternalServerError",
        "ServiceUnavailableError") if isinstance(getattr(litellm, name, None), type))

    def complete(**kwargs):
        for attempt in range(3):
            try:
                return litellm.completion(**kwargs)
            except transient as exc:
                if attempt == 2 or _is_configuration_error(exc):  # no key: no retry helps
                    raise
                time.sleep(2 ** attempt)
    return complete


def _text_of(response) -> str:
    choice = response["choices"][0] if isinstance(response, dict) else response.choices[0]
    message = choice["message"] if isinstance(choice, dict) else choice.message
    content = message["content"] if isinstance(message, dict) else message.content
    text = (content or "").strip()
    if not text:
        raise PyrecallError("the model returned an empty summary")
    return text


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {one_line(exc)}"[:300]
