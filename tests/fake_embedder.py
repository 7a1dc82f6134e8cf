"""The deterministic embedder of the tests about SQL logic: the one the benchmarks use too
(pyrecall.bench.fake_embedder); tests about retrieval quality use the real local model."""

from pyrecall.bench.fake_embedder import FakeEmbedder

__all__ = ["FakeEmbedder"]
