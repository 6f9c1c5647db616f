"""What reaches the reflection model is bounded: each side-info value is cut with a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skynet.config import CONFIG_FILE, load_config
from skynet.errors import ConfigError
from skynet.side_info import MAX_ENTRIES, cut_side_info, cut_text

LIMIT = 2000
NOTE = "… [cut: 2,000,000 characters, kept the first 2,000]"


def _deep(levels: int) -> list:
    root: list = []
    node = root
    for _ in range(levels):
        node.append([])
        node = node[0]
    return root


# (case, value, check of the result)
CASES = [
    ("short text kept", "right", lambda got: got == "right"),
    ("text at the limit kept", "x" * LIMIT, lambda got: got == "x" * LIMIT),
    ("2 MB text cut with a note", "x" * 2_000_000, lambda got: got == "x" * LIMIT + NOTE),
    ("numbers kept", 0.5, lambda got: got == 0.5),
    ("None kept", None, lambda got: got is None),
    (
        "each input column cut",
        {"text": "y" * 5000, "n": 3},
        lambda got: got["n"] == 3 and got["text"].startswith("y" * LIMIT + "… [cut: 5,000"),
    ),
    (
        "a mapping keeps its first entries, with a note",
        {str(i): i for i in range(100)},
        lambda got: len(got) == MAX_ENTRIES + 1 and "100 entries" in got["…"],
    ),
    (
        "a huge key is cut",
        {"k" * 10_000: 1},
        lambda got: all(len(key) < 200 for key in got),
    ),
    ("a short list kept", [1, 2, 3], lambda got: got == [1, 2, 3]),
    (
        "a long list becomes its JSON text, cut",
        list(range(1_000_000)),
        lambda got: isinstance(got, str) and got.startswith("[0, 1, 2") and "[cut: " in got,
    ),
    (
        "a lone surrogate cannot reach a model API",
        "a\ud800b",
        lambda got: got == "a\ufffdb",
    ),
    (
        "nesting too deep for JSON is a note",
        _deep(5000),
        lambda got: got == "<a list nested too deep to show>",
    ),
]


@pytest.mark.parametrize("case, value, check", CASES, ids=[c[0] for c in CASES])
def test_cut_side_info(case, value, check):
    assert check(cut_side_info(value, LIMIT))


def test_a_2mb_output_per_example_stays_small():
    side = {
        "Input": {"n": 3},
        "Expected": {"total": 6},
        "Output": {"total": 6, "pad": "x" * 2_000_000},
        "Feedback": "want 6, " * 300_000,
        "Error": "Traceback …\n" * 200_000,
    }
    cut = cut_side_info(side, LIMIT)
    assert len(json.dumps(cut, ensure_ascii=False)) < 5 * (LIMIT + 100)
    assert cut["Output"]["pad"].endswith(NOTE)
    assert cut["Input"] == {"n": 3} and cut["Expected"] == {"total": 6}


def test_cut_text_names_what_it_cut():
    assert cut_text("abcdef", 4) == "abcd… [cut: 6 characters, kept the first 4]"


@pytest.mark.parametrize(
    "toml, expected",
    [
        ("", 2000),
        ("[engine]\nmax_side_info_chars = 500\n", 500),
    ],
)
def test_the_cut_is_an_engine_key(tmp_path: Path, toml: str, expected: int):
    (tmp_path / CONFIG_FILE).write_text(
        '[data]\npath = "data.jsonl"\ninputs = ["text"]\noutputs = ["label"]\n' + toml
    )
    assert load_config(tmp_path).engine.max_side_info_chars == expected


@pytest.mark.parametrize("value", ["10", "0", '"big"', "true"])
def test_a_bad_cut_size_names_the_key(tmp_path: Path, value: str):
    (tmp_path / CONFIG_FILE).write_text(
        '[data]\npath = "data.jsonl"\ninputs = ["text"]\noutputs = ["label"]\n'
        f"[engine]\nmax_side_info_chars = {value}\n"
    )
    with pytest.raises(ConfigError, match=r"engine\.max_side_info_chars"):
        load_config(tmp_path)
