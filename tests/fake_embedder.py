"""A deterministic embedder for tests about SQL logic (claiming, retries, dimensions).

Vectors are a hash of the text, so equal texts get equal vectors; tests that are about
retrieval quality use the real local model instead.
"""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np

from pyrecall import EmbeddingError, TransientEmbeddingError


class FakeEmbedder:
    def __init__(self, model="fake/hash", dim=384, delay=0.0, poison=None, down=False):
        self.model, self.dim, self.delay = model, dim, delay
        self.poison, self.down = poison, down
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
        with self.lock:
            self.seen.extend(texts)
        return [self.vector(t).tolist() for t in texts]

    async def aembed(self, texts):
        return self.embed(texts)

    def count_tokens(self, text: str) -> int:
        return len(text.split())
