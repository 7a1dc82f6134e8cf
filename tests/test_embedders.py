"""The embedders against the real local model and a real HTTP server (tests/embed_server.py).

No mocks: LiteLLMEmbedder talks HTTP to 127.0.0.1, where the server fails on demand.
"""

import asyncio
import email.utils
import json
import math
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from embed_server import EmbedServer, hash_vector
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrecall._embed import (
    DEFAULT_LOCAL_NAME,
    QUICK_QUERIES,
    LiteLLMEmbedder,
    LocalEmbedder,
    OnnxMiniLM,
    _bundled_dir,
    _litellm,
    clean_texts,
    get_embedder,
    int8_cache_dir,
    onnx_cache_dir,
    quantize_onnx,
)
from pyrecall._errors import ConfigError, EmbeddingError, TransientEmbeddingError
from pyrecall._worker import Worker, check_dimension, count_pending

MODEL = "openai/text-embedding-3-small"
DIM = 8  # of the hash vectors: small, so requests stay small


@pytest.fixture(scope="module")
def local():
    return LocalEmbedder()


@pytest.fixture
def server():
    with EmbedServer(vectors="hash", dim=DIM) as s:
        yield s


def remote(server: EmbedServer, **options) -> LiteLLMEmbedder:
    """A LiteLLMEmbedder pointed at ``server``, with backoff short enough for tests."""
    options = {"backoff_base": 0.01, "timeout": 5.0, **options}
    return LiteLLMEmbedder(MODEL, api_base=server.url, api_key="test", **options)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))  # vectors are unit length


# -- local model --------------------------------------------------------------------------


def test_local_vectors_are_384_dim_unit(local):
    vectors = local.embed(["deploy the docker container", "ship the container image"])
    assert local.model == "local/all-MiniLM-L6-v2"
    assert local.dim == 384
    assert [len(v) for v in vectors] == [384, 384]
    assert all(math.isclose(cosine(v, v), 1.0, abs_tol=1e-5) for v in vectors)


def test_local_closer_meaning_scores_higher(local):
    deploy, ship, bread = local.embed(
        ["deploy the docker container", "ship the container image", "banana bread recipe"]
    )
    assert cosine(deploy, ship) > cosine(deploy, bread) + 0.3


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello world", 2),
        ("unbelievably", 5),  # un ##bel ##ie ##va ##bly
        ("Hello, world!", 4),
        ("a\x00b", 1),  # NUL stripped: "ab"
        ("", 0),
    ],
)
def test_local_count_tokens(local, text, tokens):
    assert local.count_tokens(text) == tokens


def test_local_count_tokens_equals_tokenizer_and_is_not_cut(local):
    st_model, _ = local._st()
    text = "PostgreSQL stores agent memories; pgvector ranks them by cosine distance. " * 40
    n = local.count_tokens(text)
    assert n == len(st_model.tokenizer.tokenize(text)) > 256
    assert local.max_tokens == 254


def test_local_ignores_text_past_256_word_pieces(local):
    head = "the migration adds an index on the memories table " * 40  # > 256 pieces
    a, b = local.embed([head, head + "and a completely different banana bread recipe"])
    assert cosine(a, b) == pytest.approx(1.0, abs=1e-6)


# texts of every shape the transcripts hold: short, long (cut at 256 word pieces), code,
# surrounding spaces, accents, CJK, emoji, a lone word
SAME_VECTOR_TEXTS = [
    "how did we handle authentication tokens?",
    "deploy the docker container",
    "  padded with spaces  ",
    "unbelievably",
    "def verify(token: str) -> dict:\n    return jwt.decode(token, SECRET, algorithms=['HS256'])",
    "Traceback (most recent call last):\n  File \"app/main.py\", line 12\nKeyError: 'JWT_SECRET'",
    "Ünïcödé café — 東京 🚀 naïve résumé",
    "the migration adds an index on the memories table " * 40,
    "User: why does the alpine build fail?\nAssistant: musl lacks glibc's getaddrinfo behaviour",
]


def test_onnx_vectors_equal_sentence_transformers():
    # Same model, same vectors: embeddings stored by either backend stay valid for the other.
    onnx = LocalEmbedder(backend="onnx")
    torch = LocalEmbedder(backend="torch")
    assert isinstance(onnx._loaded()[0], OnnxMiniLM)
    a = np.asarray(onnx.embed(SAME_VECTOR_TEXTS))
    b = np.asarray(torch.embed(SAME_VECTOR_TEXTS))
    cosines = (a * b).sum(axis=1)  # both unit length
    assert cosines.min() >= 0.9999, cosines
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    # in a batch or alone (another padding length): the same vector
    alone = np.asarray(onnx.embed([SAME_VECTOR_TEXTS[3]]))[0]
    assert float(alone @ a[3]) >= 0.99999


def test_queries_run_on_a_quick_session_then_on_a_prepacked_one():
    """A process's first queries run on a session that loads without prepacking the weights
    (a one-shot `pyrecall recall` embeds one query: 37 ms less); after QUICK_QUERIES a
    long-running process changes to a prepacked session for good. Both give
    sentence-transformers' vectors."""
    model = OnnxMiniLM(_bundled_dir(DEFAULT_LOCAL_NAME))
    torch = np.asarray(LocalEmbedder(backend="torch").embed(SAME_VECTOR_TEXTS))

    def prepacked() -> bool:
        options = model._query_session[0].get_session_options()
        try:
            return options.get_session_config_entry("session.disable_prepacking") != "1"
        except RuntimeError:  # not set: ONNX Runtime's default, prepacked
            return True

    quick = np.concatenate([model.encode([t], 64) for t in SAME_VECTOR_TEXTS])
    assert not prepacked() and model._queries == len(SAME_VECTOR_TEXTS) <= QUICK_QUERIES
    while model._queries < QUICK_QUERIES:
        model.encode(["another query"], 64)
        assert not prepacked()
    packed = np.concatenate([model.encode([t], 64) for t in SAME_VECTOR_TEXTS])
    assert prepacked()
    for vectors in (quick, packed):
        assert ((vectors * torch).sum(axis=1)).min() >= 0.9999
    assert np.abs(quick - packed).max() < 1e-5


def test_onnx_bulk_batches_run_side_by_side_with_the_vectors_of_one_at_a_time():
    """Several batches run at once on a one-thread session (a thread per CPU); each text's
    vector is the one it gets alone, on the session of a query."""
    onnx = LocalEmbedder(backend="onnx")
    model = onnx._loaded()[0]
    texts = SAME_VECTOR_TEXTS * 3 + [f"note {i}: the cache key of tenant {i}" for i in range(40)]
    bulk = np.asarray(onnx.embed(texts))
    assert (model._bulk is not None) == (model.workers > 1)
    alone = np.concatenate([model.encode([t], 64) for t in texts])
    assert np.abs(bulk - alone).max() < 1e-5
    for int8 in (LocalEmbedder(INT8),):  # one text a batch: the most batches side by side
        bulk8 = np.asarray(int8.embed(texts))
        alone8 = np.concatenate([np.asarray(int8.embed([t])) for t in texts])
        assert np.abs(bulk8 - alone8).max() < 1e-6


def test_onnx_counts_tokens_as_the_model_tokenizer():
    onnx, torch = LocalEmbedder(backend="onnx"), LocalEmbedder(backend="torch")
    for text in [*SAME_VECTOR_TEXTS, "", "a\x00b"]:
        assert onnx.count_tokens(text) == torch.count_tokens(text), text
    assert onnx.max_tokens == torch.max_tokens == 254


def test_auto_backend_embeds_queries_and_bulk_work_on_onnx():
    """The bundled MiniLM runs on ONNX Runtime for a query and for a job's batch alike (bulk
    work measured 2.7x faster than sentence-transformers); torch only when asked."""
    e = LocalEmbedder()
    assert isinstance(e._loaded(1)[0], OnnxMiniLM)
    assert isinstance(e._loaded(64)[0], OnnxMiniLM)
    assert type(LocalEmbedder(backend="torch")._loaded(64)[0]).__name__ == "SentenceTransformer"


# -- the int8 model: another model ----------------------------------------------------------

INT8 = "local/all-MiniLM-L6-v2-int8"


@pytest.fixture(scope="module")
def int8():
    return LocalEmbedder(INT8)


def test_int8_vectors_are_unit_384_dim_and_near_the_fp32_model(int8):
    a = np.asarray(int8.embed(SAME_VECTOR_TEXTS))
    b = np.asarray(LocalEmbedder(backend="onnx").embed(SAME_VECTOR_TEXTS))
    assert (int8.model, int8.dim, a.shape) == (INT8, 384, (len(SAME_VECTOR_TEXTS), 384))
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cosines = (a * b).sum(axis=1)
    # measured on these texts: 0.9855 ("unbelievably") to 0.9957, mean 0.9915 (on 2,116
    # chunks of generated sessions: mean 0.9927, min 0.983) on an Intel Xeon with AVX-512 VNNI;
    # 0.9809 to 0.9908, mean 0.9890 on an AMD EPYC with AVX2 alone (its int8 kernels sum in 16
    # bits, a little coarser; 640 chunks: mean 0.9901, min 0.9813): the vectors of a quantised
    # model vary a little with the CPU's int8 instructions (bench/LOG.md 2026-11-27, third session)
    assert cosines.min() >= 0.975 and cosines.mean() >= 0.985, cosines
    assert cosines.max() < 0.9999, cosines  # quantised: not the fp32 model's vectors
    # bulk work runs on ONNX Runtime too (its only backend), with the same vectors
    model = int8._loaded(64)[0]
    assert isinstance(model, OnnxMiniLM) and model.int8
    bulk = np.asarray(int8.embed(SAME_VECTOR_TEXTS * 2))[:len(SAME_VECTOR_TEXTS)]
    assert np.allclose(bulk, a, atol=1e-6)


def test_int8_is_deterministic_across_two_quantisations(int8, tmp_path):
    # a second quantisation of the export (another process, another data dir, gets the same)
    source = _bundled_dir("all-MiniLM-L6-v2")
    assert int8_cache_dir(source).parent == onnx_cache_dir(source).parent  # beside the export
    assert int8_cache_dir(source) != onnx_cache_dir(source)
    quantize_onnx(onnx_cache_dir(source), tmp_path / "again")
    again = OnnxMiniLM(source, cache_dir=tmp_path / "again", int8=True)
    first = np.asarray(int8.embed(SAME_VECTOR_TEXTS))
    assert np.array_equal(again.encode(SAME_VECTOR_TEXTS, 64), first)


def test_int8_counts_tokens_as_the_fp32_model(int8):
    fp32 = LocalEmbedder(backend="onnx")
    for text in [*SAME_VECTOR_TEXTS, "", "a\x00b"]:
        assert int8.count_tokens(text) == fp32.count_tokens(text), text
    assert int8.max_tokens == fp32.max_tokens == 254


def test_int8_runs_on_onnx_runtime_only():
    with pytest.raises(ConfigError, match=r"local/all-MiniLM-L6-v2-int8 runs on ONNX Runtime on the CPU only"):
        LocalEmbedder(INT8, backend="torch").embed(["x"])


def test_int8_and_fp32_are_different_models_in_the_database(conn, int8):
    conn.execute("insert into recall.sessions (session_id, agent_id) values ('s1', 'a')")
    texts = ["we pinned the base image to alpine 3.19", "the JWT secret comes from vault",
             "retry the upload with exponential backoff"]
    for text in texts:
        conn.execute("insert into recall.messages (session_id, role, content) values ('s1', 'user', %s)", [text])
    fp32 = LocalEmbedder()
    assert Worker(conn, fp32).run().embedded == 3

    def models():
        return conn.execute("select array_agg(distinct embedding_model) from recall.chunks").fetchone()[0]

    assert models() == ["local/all-MiniLM-L6-v2"]
    check_dimension(conn, int8)  # both 384: the name tells them apart, not the dimension
    # the fp32 vectors are not the int8 model's: re-embedding with it takes every chunk
    assert count_pending(conn) == 0 and count_pending(conn, model=INT8) == 3
    assert Worker(conn, int8).run().embedded == 0
    assert Worker(conn, int8, reembed=True).run().embedded == 3
    assert models() == [INT8]
    assert count_pending(conn, model=fp32.model) == 3 and count_pending(conn, model=INT8) == 0
    rows = conn.execute("select content, embedding::real[] from recall.chunks order by chunk_id").fetchall()
    stored = np.asarray([v for _, v in rows], dtype=np.float32)
    assert np.allclose(stored, np.asarray(int8.embed([c for c, _ in rows])), atol=1e-6)


MISSING_ONNX = textwrap.dedent("""
    import sys
    sys.modules["onnx"] = None  # as if not installed
    from pyrecall._embed import LocalEmbedder
    from pyrecall._errors import MissingDependencyError
    try:
        LocalEmbedder("local/all-MiniLM-L6-v2-int8").embed(["x"])
    except MissingDependencyError as e:
        print(e)
""")


def test_int8_without_onnx_says_which_extra(tmp_path):
    # the fp32 export is there (as after a first query), the int8 model not yet
    source = _bundled_dir("all-MiniLM-L6-v2")
    LocalEmbedder(backend="onnx").embed(["x"])
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / onnx_cache_dir(source).name).symlink_to(onnx_cache_dir(source))
    env = dict(os.environ, PYRECALL_DATA_DIR=str(tmp_path), HF_HUB_OFFLINE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-c", MISSING_ONNX], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "model local/all-MiniLM-L6-v2-int8 needs onnx: pip install 'pyrecall[local]'\n"
    assert [p.name for p in (tmp_path / "models").iterdir()] == [onnx_cache_dir(source).name]


LOAD_IN_A_PROGRAM = textwrap.dedent("""
    import json, sys
    import huggingface_hub.utils as hub
    from transformers.utils import logging as hf_logging
    from pyrecall import Recall, _embed

    hub.disable_progress_bars("my_downloads")  # the program's own choice, to be kept
    # the MiniLM on sentence-transformers (backend "torch", as any other local model runs)
    r = Recall(sys.argv[1], embedder=_embed.LocalEmbedder(backend="torch"))
    r.embedder.embed([f"chunk {i}" for i in range(40)])
    print(json.dumps({"backends": sorted(k[2] for k in _embed._MODELS),
                      "transformers_bars": hf_logging.is_progress_bar_enabled(),
                      "hub_bars_off": hub.are_progress_bars_disabled(),
                      "my_downloads_off": hub.are_progress_bars_disabled("my_downloads")}))
""")


def test_loading_the_model_in_a_program_draws_no_progress_bar(db_url):
    # a plain Python program, not the CLI (which turns the Hub's bars off for its whole process)
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("PYRECALL_EMBED_MODEL", None)
    done = subprocess.run([sys.executable, "-c", LOAD_IN_A_PROGRAM, db_url], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "\r" not in done.stderr, done.stderr
    # the program's settings are as it left them: bars on, but not for its own group
    assert json.loads(done.stdout) == {"backends": ["torch"], "transformers_bars": True,
                                       "hub_bars_off": False, "my_downloads_off": True}


def test_local_aembed_equals_embed(local):
    texts = ["one memory", "another memory"]
    assert asyncio.run(local.aembed(texts)) == local.embed(texts)


# -- shared input rules -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "error", "message"),
    [
        ([""], ConfigError, "texts[0] is empty or whitespace only"),
        (["ok", " \n\t"], ConfigError, "texts[1] is empty or whitespace only"),
        (["\x00 "], ConfigError, "texts[0] is empty or whitespace only"),
        (["ok", None], TypeError, "texts[1] is NoneType, not str"),
        ("a str", TypeError, "texts must be a list of strings, not a str"),
    ],
)
def test_bad_input_is_refused_before_sending(local, server, texts, error, message):
    for embedder in (local, remote(server)):
        with pytest.raises(error) as exc:
            embedder.embed(texts)
        assert str(exc.value) == message
    assert server.requests == 0


def test_nul_bytes_are_stripped(local, server):
    assert clean_texts(["a\x00b", "c"]) == ["ab", "c"]
    assert local.embed(["dock\x00er"]) == local.embed(["docker"])
    assert remote(server).embed(["dock\x00er"]) == [hash_vector("docker", DIM)]
    assert server.batches == [["docker"]]


def test_empty_list_sends_nothing(local, server):
    assert local.embed([]) == []
    assert remote(server).embed([]) == []
    assert server.requests == 0


def test_get_embedder(monkeypatch):
    monkeypatch.delenv("PYRECALL_EMBED_MODEL", raising=False)
    assert isinstance(get_embedder(), LocalEmbedder)
    assert get_embedder().model == "local/all-MiniLM-L6-v2"
    monkeypatch.setenv("PYRECALL_EMBED_MODEL", MODEL)
    e = get_embedder(dimensions=256, batch_size=10)
    assert isinstance(e, LiteLLMEmbedder)
    assert (e.model, e.dim, e.batch_size) == (MODEL, 256, 10)
    assert get_embedder("local/all-MiniLM-L6-v2", batch_size=8).batch_size == 8
    with pytest.raises(ConfigError, match=r"no model name in 'local/'"):
        get_embedder("local/")
    with pytest.raises(ConfigError, match="concurrency must be at least 1, not 0"):
        get_embedder(MODEL, concurrency=0)


# -- litellm: success ---------------------------------------------------------------------


def test_litellm_round_trip_equals_local_model(local):
    texts = ["deploy the docker container", "ship the container image", "banana bread recipe"]
    with EmbedServer(vectors="local") as server:
        e = remote(server)
        vectors = e.embed(texts)
    assert e.dim == 384
    expected = local.embed(texts)
    assert (
        max(
            abs(a - b)
            for v, w in zip(vectors, expected, strict=True)
            for a, b in zip(v, w, strict=True)
        )
        < 1e-5
    )


def test_litellm_discovers_dim_or_passes_dimensions(server):
    e = remote(server)
    assert e.dim == DIM  # asks once
    assert server.requests == 1
    e = remote(server, dimensions=4)
    assert e.embed(["x"]) == [hash_vector("x", 4)]


def test_litellm_count_tokens():
    e = LiteLLMEmbedder(MODEL)
    assert e.count_tokens("hello world") == 2
    assert e.count_tokens("a\x00b") == e.count_tokens("ab")


def test_litellm_embed_inside_running_loop(server):
    e = remote(server)

    async def caller():
        return e.embed(["inside a loop"])  # a thread with its own loop does the work

    assert asyncio.run(caller()) == [hash_vector("inside a loop", DIM)]


# -- litellm: batching and concurrency ----------------------------------------------------


@pytest.mark.parametrize("batch_size", [64, 256, 1000])
def test_batches_by_count_in_order(server, batch_size):
    texts = [f"memory number {i}" for i in range(1000)]
    vectors = remote(server, batch_size=batch_size).embed(texts)
    assert server.requests == math.ceil(1000 / batch_size)
    assert max(len(b) for b in server.batches) == batch_size
    assert vectors == [hash_vector(t, DIM) for t in texts]


def test_batches_by_tokens(server):
    texts = ["one two three four five"] * 10  # 5 tokens each
    remote(server, max_tokens_per_batch=12).embed(texts)
    assert [len(b) for b in server.batches] == [2, 2, 2, 2, 2]


@settings(max_examples=30, deadline=None)
@given(
    texts=st.lists(
        st.text(st.characters(codec="utf-8"), min_size=1).filter(lambda t: t.replace("\x00", "").strip()), max_size=30
    ),
    batch_size=st.integers(1, 8),
    max_tokens=st.integers(1, 40),
)
def test_batches_respect_both_limits(texts, batch_size, max_tokens):
    e = LiteLLMEmbedder(MODEL, batch_size=batch_size, max_tokens_per_batch=max_tokens)
    texts = clean_texts(texts)
    if not texts:
        return
    batches = e._batches(texts)
    assert [t for b in batches for t in b] == texts
    for b in batches:
        assert 1 <= len(b) <= batch_size
        # a single text over the limit still goes, alone
        assert len(b) == 1 or sum(map(e.count_tokens, b)) <= max_tokens


def test_concurrency_limit(server):
    server.delay = 0.2  # so requests overlap
    e = remote(server, batch_size=1, concurrency=3)
    e.count_tokens("x")  # litellm's tokenizer loaded (seconds) before the clock starts
    start = time.monotonic()
    e.embed([f"t{i}" for i in range(9)])
    assert server.requests == 9
    assert server.max_concurrent == 3
    assert time.monotonic() - start < 9 * 0.2  # they did overlap


def test_concurrency_limit_holds_across_calls_on_one_loop(server):
    server.delay = 0.2
    e = remote(server, batch_size=1, concurrency=2)

    async def both():
        return await asyncio.gather(e.aembed(["a", "b", "c"]), e.aembed(["d", "e", "f"]))

    assert asyncio.run(both()) == [
        [hash_vector(t, DIM) for t in "abc"],
        [hash_vector(t, DIM) for t in "def"],
    ]
    assert server.max_concurrent == 2


# -- litellm: failures --------------------------------------------------------------------


def test_retries_429_after_retry_after(server):
    server.fail("429", times=2, retry_after=0.5)
    start = time.monotonic()
    assert remote(server).embed(["x"]) == [hash_vector("x", DIM)]
    assert server.requests == 3
    assert time.monotonic() - start >= 1.0  # 2 x Retry-After, not the 0.01 s backoff


def test_retry_after_as_http_date(server):
    server.fail("429", retry_after=email.utils.formatdate(time.time() + 2, usegmt=True))
    start = time.monotonic()
    remote(server).embed(["x"])
    assert server.requests == 2
    assert 1.0 <= time.monotonic() - start < 4  # the date has whole seconds


def test_retry_after_is_capped(server):
    server.fail("429", retry_after=3600)
    start = time.monotonic()
    remote(server, retry_after_max=0.1).embed(["x"])
    assert server.requests == 2
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("mode", ["500", "429", "reset"])
def test_retries_transient_failures(server, mode):
    server.fail(mode, times=2)
    assert remote(server).embed(["x", "y"]) == [hash_vector("x", DIM), hash_vector("y", DIM)]
    assert server.requests == 3


def test_gives_up_after_max_attempts(server):
    server.fail("500", times=100)
    with pytest.raises(TransientEmbeddingError) as exc:
        remote(server, max_attempts=3).embed(["x"])
    assert str(exc.value) == f"{MODEL}: gave up after 3 attempts: 500 The server had an error"
    assert server.requests == 3


def test_timeout_on_hang(server):
    server.fail("hang", times=2, seconds=20)
    start = time.monotonic()
    with pytest.raises(TransientEmbeddingError) as exc:
        remote(server, timeout=0.5, max_attempts=2).embed(["x"])
    assert str(exc.value) == f"{MODEL}: gave up after 2 attempts: no answer within 0.5 s"
    assert server.requests == 2
    assert time.monotonic() - start < 3


def test_refused_connection_is_transient():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = LiteLLMEmbedder(
        MODEL,
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key="test",
        max_attempts=2,
        backoff_base=0.01,
    )
    with pytest.raises(TransientEmbeddingError, match="gave up after 2 attempts"):
        e.embed(["x"])


def test_openai_models_are_called_without_litellm(server, monkeypatch):
    # litellm's import takes 7-11 s on this machine: openai/ models go to the endpoint directly
    # (the same request litellm's openai/ route sends), base and key from the environment
    # as litellm reads them; batches, retries and errors as before
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    e = LiteLLMEmbedder(MODEL, dimensions=DIM, backoff_base=0.01)
    assert e.direct and not LiteLLMEmbedder("cohere/embed-english-v3.0").direct
    server.fail("500")
    assert e.embed(["a b", "c"]) == [hash_vector("a b", DIM), hash_vector("c", DIM)]
    assert server.requests == 2
    code = textwrap.dedent(f"""
        import sys
        from pyrecall._embed import LiteLLMEmbedder
        v = LiteLLMEmbedder({MODEL!r}).embed(["one query"])[0]
        print(len(v), [m for m in ("litellm", "openai") if m in sys.modules])
    """)
    env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == [str(DIM), "[]"], out.stderr


@pytest.mark.parametrize(
    ("model", "unset", "says"),
    [
        ("openai/text-embedding-3-small", ["OPENAI_API_KEY", "OPENAI_ADMIN_KEY"], "set the `OPENAI_API_KEY`"),
        ("mistral/mistral-embed", ["MISTRAL_API_KEY"], "set the `MISTRAL_API_KEY`"),
        ("gemini/text-embedding-004", ["GEMINI_API_KEY", "GOOGLE_API_KEY"], "Set the GEMINI_API_KEY"),
        ("azure/my-deployment", ["AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"], "Set 'AZURE_API_BASE'"),
    ],
)
def test_missing_key_fails_at_once_in_the_providers_words(monkeypatch, model, unset, says):
    # litellm reports a key missing from the environment as a 500 or a connection error:
    # it was retried five times with backoff (15 s before a recall fell back to keywords)
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    calls = []
    litellm = _litellm()
    real = litellm.aembedding

    async def counted(**kwargs):
        calls.append(kwargs["model"])
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "aembedding", counted)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    with pytest.raises(EmbeddingError) as exc:
        LiteLLMEmbedder(model, max_attempts=5, backoff_base=0.01).embed(["x"])
    assert type(exc.value) is EmbeddingError  # not the transient kind
    # openai/ goes to OpenAI's endpoint directly (refused before sending); the rest via litellm
    assert calls == ([] if model.startswith("openai/") else [model])
    message = str(exc.value)
    assert message.startswith(f"{model}: ") and says in message
    assert "Traceback" not in message and "500" not in message and "\n" not in message


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("401", "401 Incorrect API key provided"),
        ("400", "400 Invalid input"),
        ("count", "sent 2 texts, got 1 vectors"),
        ("dim", "expected vectors of 8 dimensions, got 7"),
    ],
)
def test_permanent_failures_raise_at_once(server, mode, message):
    server.fail(mode, times=10)
    with pytest.raises(EmbeddingError) as exc:
        remote(server, dim=DIM).embed(["x", "y"])
    assert type(exc.value) is EmbeddingError  # not the transient kind
    assert str(exc.value) == f"{MODEL}: {message}"
    assert server.requests == 1


def test_failure_of_one_batch_stops_the_rest(server):
    server.delay = 0.1
    server.fail("401")
    with pytest.raises(EmbeddingError):
        remote(server, batch_size=1, concurrency=1).embed([f"t{i}" for i in range(20)])
    time.sleep(0.3)  # a task left running would keep sending
    assert server.requests < 5


def test_long_provider_message_is_cut(server):
    server.fail("400", message="input too long: " + "x" * 5000)
    with pytest.raises(EmbeddingError) as exc:
        remote(server).embed(["x"])
    assert str(exc.value) == f"{MODEL}: 400 input too long: " + "x" * 281 + "..."
    assert server.requests == 1
