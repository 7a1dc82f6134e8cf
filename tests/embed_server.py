"""A tiny OpenAI-compatible embeddings server for tests, on 127.0.0.1 only.

It answers ``POST /v1/embeddings`` with the real local model or with deterministic hash
vectors, and fails on purpose when a test asks it to::

    with EmbedServer(vectors="hash", dim=8) as server:
        server.fail("429", times=2, retry_after=0.1)
        ...  # point a client at server.url ("http://127.0.0.1:PORT/v1")
        assert server.requests == 3

Failure modes (each consumed by one request, in the order they were queued):

| mode | reply |
| --- | --- |
| ``"429"`` | 429 with ``Retry-After: retry_after`` (seconds, may be fractional) |
| ``"500"`` | 500 |
| ``"401"`` | 401 invalid API key |
| ``"400"`` | 400 with ``message`` (default "Invalid input") |
| ``"hang"`` | no reply for ``seconds`` (then 500), or until the server stops |
| ``"reset"`` | the connection is reset (TCP RST) after the request is read |
| ``"count"`` | one vector fewer than inputs |
| ``"dim"`` | vectors one element shorter than ``dim`` |
"""

import base64
import hashlib
import json
import random
import socket
import struct
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = {"429", "500", "401", "400", "hang", "reset", "count", "dim"}
MAX_HANG = 30.0  # seconds: a forgotten "hang" never blocks a test run for long


def hash_vector(text: str, dim: int) -> list[float]:
    """A unit vector that depends only on ``text`` and ``dim``.

    >>> hash_vector("a", 4) == hash_vector("a", 4)
    True
    """
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    rng = random.Random(seed)
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


class EmbedServer:
    """An embeddings server on a random port of 127.0.0.1; a context manager.

    ``vectors="local"`` serves pyrecall's LocalEmbedder (384 dims); ``"hash"`` serves
    ``hash_vector(text, dim)``. ``delay`` seconds are slept in every request (to make
    requests overlap). Counters: ``requests``, ``max_concurrent``, ``batches`` (the input
    list of each request, in arrival order).
    """

    def __init__(self, *, vectors: str = "hash", dim: int = 384, delay: float = 0.0):
        if vectors not in ("hash", "local"):
            raise ValueError(f"vectors must be 'hash' or 'local', not {vectors!r}")
        self.vectors = vectors
        self.dim = 384 if vectors == "local" else dim
        self.delay = delay
        self.requests = 0
        self.max_concurrent = 0
        self.batches: list[list[str]] = []
        self._active = 0
        self._failures: deque[tuple[str, dict]] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._embedder = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The API base to give a client, e.g. ``http://127.0.0.1:40123/v1``."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def fail(self, mode: str, times: int = 1, **params) -> None:
        """Make the next ``times`` requests fail as ``mode`` (see the module docstring).

        >>> server.fail("hang", seconds=5)  # doctest: +SKIP
        """
        if mode not in MODES:
            raise ValueError(f"unknown failure mode {mode!r}")
        with self._lock:
            self._failures.extend([(mode, params)] * times)

    def reset(self) -> None:
        """Forget queued failures and zero the counters."""
        with self._lock:
            self._failures.clear()
            self.requests = self.max_concurrent = 0
            self.batches = []

    def start(self) -> "EmbedServer":
        if self.vectors == "local" and self._embedder is None:
            from pyrecall._embed import LocalEmbedder

            self._embedder = LocalEmbedder()
        self._stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True  # a hanging handler never blocks stop()
        self._httpd.handle_error = lambda request, address: None  # resets are on purpose
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes "hang" handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    def __enter__(self) -> "EmbedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- called from handler threads -------------------------------------------------------

    def _begin(self, texts: list[str]) -> tuple[str, dict] | None:
        with self._lock:
            self.requests += 1
            self.batches.append(texts)
            self._active += 1
            self.max_concurrent = max(self.max_concurrent, self._active)
            return self._failures.popleft() if self._failures else None

    def _end(self) -> None:
        with self._lock:
            self._active -= 1

    def _vectors(self, texts: list[str], dim: int) -> list[list[float]]:
        if self._embedder is not None:
            return self._embedder.embed(texts)
        return [hash_vector(t, dim) for t in texts]


def _make_handler(server: EmbedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real providers do

        def log_message(self, format, *args):  # quiet test output
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
                return self._json(404, _error("not found", "invalid_request_error"))
            try:
                req = json.loads(body)
                texts = req["input"]
            except (ValueError, KeyError):
                return self._json(400, _error("input is required", "invalid_request_error"))
            texts = [texts] if isinstance(texts, str) else texts
            failure = server._begin(texts)
            try:
                self._answer(req, texts, failure)
            finally:
                server._end()

        def _answer(self, req: dict, texts: list[str], failure: tuple[str, dict] | None):
            mode, params = failure or (None, {})
            if server.delay:
                server._stopping.wait(server.delay)
            if mode == "429":
                headers = {}
                if params.get("retry_after") is not None:
                    headers["Retry-After"] = str(params["retry_after"])
                msg = _error("Rate limit reached", "rate_limit_exceeded")
                return self._json(429, msg, headers)
            if mode == "500":
                return self._json(500, _error("The server had an error", "server_error"))
            if mode == "401":
                msg = _error(
                    "Incorrect API key provided", "invalid_request_error", "invalid_api_key"
                )
                return self._json(401, msg)
            if mode == "400":
                msg = _error(params.get("message", "Invalid input"), "invalid_request_error")
                return self._json(400, msg)
            if mode == "hang":
                server._stopping.wait(min(params.get("seconds", MAX_HANG), MAX_HANG))
                return self._json(500, _error("hung", "server_error"))
            if mode == "reset":
                # SO_LINGER 0 turns close() into a TCP RST: the client sees "connection reset".
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
                self.close_connection = True
                return
            dim = server.dim
            if server.vectors == "hash" and req.get("dimensions"):
                dim = int(req["dimensions"])
            vectors = server._vectors(texts, dim)
            if mode == "count":
                vectors = vectors[:-1]
            if mode == "dim":
                vectors = [v[:-1] for v in vectors]
            b64 = req.get("encoding_format") == "base64"  # the openai SDK asks for base64
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": _b64(v) if b64 else v,
                }
                for i, v in enumerate(vectors)
            ]
            tokens = sum(len(t.split()) for t in texts)
            self._json(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": req.get("model", ""),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

        def _json(self, status: int, payload: dict, headers: dict | None = None):
            out = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(out)

    return Handler


def _error(message: str, type_: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _b64(v: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
