"""A deterministic embedder without a model: the tests about SQL logic (claiming, retries,
dimensions) and the benchmarks that measure the write path, not retrieval quality, use it.

Vectors are unit vectors seeded by a hash of the text, so equal texts get equal vectors;
tests and benchmarks about retrieval quality use a real model instead.

>>> e = FakeEmbedder(dim=4)
>>> e.embed(["a"]) == e.embed(["a"]), len(e.embed(["a"])[0])
(True, 4)
"""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np

from .._errors import EmbeddingError, TransientEmbeddingError


class FakeEmbedder:
    """``delay``: seconds each call takes; ``poison``: a call with a text holding it fails for
    good; ``down``: every call fails as a provider that may come back. The texts embedded are
    kept in ``seen`` (``record=False``: not kept, for long benchmark runs)."""

    def __init__(self, model="fake/hash", dim=384, delay=0.0, poison=None, down=False, record=True):
        self.model, self.dim, self.delay = model, dim, delay
        self.poison, self.down, self.record = poison, down, record
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed(self, texts):
        if self.down:
            raise TransientEmbeddingError("provider down (fake)")
        if self.poison and any(self.poison in t for t in texts):
            raise EmbeddingError("provider refused the input (fake)")
        if self.delay:
            time.sleep(self.delay)
        if self.record:
            with self.lock:
                self.seen.extend(texts)
        return [self.vector(t).tolist() for t in texts]

    async def aembed(self, texts):
        return self.embed(texts)

    def count_tokens(self, text: str) -> int:
        return len(text.split())
