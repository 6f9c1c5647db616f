"""The caches' shared SQLite set-up: one table made on first use, a newer file refused."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from skynet.errors import ConfigError
from skynet.models.cache import CallCache
from skynet.scorers.embed import EmbeddingCache


@pytest.mark.parametrize(
    ("cache", "what"), [(CallCache, "call cache"), (EmbeddingCache, "embedding cache")]
)
def test_a_cache_written_by_a_newer_skynet_is_refused_by_name(tmp_path, cache, what):
    path = tmp_path / "sub" / "cache.db"
    cache(path)  # made with its folder, at schema version 1
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("1",)
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(ConfigError, match=f"{what} schema 99 is newer than this Skynet"):
        cache(path)


def test_reopening_a_cache_keeps_what_it_holds(tmp_path):
    path = tmp_path / "embeddings.db"
    EmbeddingCache(path).put_many("e", {"a": np.ones(3, dtype=np.float32)})
    assert list(EmbeddingCache(path).get_many("e", ["a", "b"])) == ["a"]
