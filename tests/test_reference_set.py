"""The verified reference set: its hash, the mark `skynet reference verify` writes, and refusals."""

from __future__ import annotations

import json

import pytest

from skynet.data import Dataset, Item
from skynet.errors import ConfigError
from skynet.reference.verified import (
    MARK_FILE,
    check_verified,
    read_mark,
    reference_hash,
    verify,
)


def dataset(*items: Item) -> Dataset:
    return Dataset(train=items[:1], val=items[1:])


A = Item("a", {"title": "Heat"}, {"record": {"director": "Michael Mann"}})
B = Item("b", {"title": "Up"}, {"record": {"director": "Pete Docter"}})


@pytest.mark.parametrize(
    ("other", "same"),
    [
        (dataset(A, B), True),
        (Dataset(train=(B,), val=(A,)), True),  # another split or order: the same references
        (dataset(Item("a", {"title": "HEAT!"}, A.expected), B), True),  # inputs left out
        (dataset(Item("a", A.input, {"record": {"director": "M. Mann"}}), B), False),
        (dataset(A), False),  # an item removed
        (dataset(A, Item("c", B.input, B.expected)), False),  # an id changed
    ],
)
def test_the_hash_covers_ids_and_references_only(other, same):
    assert (reference_hash(other) == reference_hash(dataset(A, B))) is same


def test_verify_writes_a_mark_that_check_accepts_until_a_reference_changes(tmp_path):
    data = dataset(A, B)
    with pytest.raises(ConfigError, match="reference.verified.json is missing"):
        check_verified(tmp_path, data)
    mark = verify(tmp_path, data, "data.jsonl")
    assert (mark.items, mark.data) == (2, "data.jsonl")
    assert read_mark(tmp_path) == mark
    assert check_verified(tmp_path, data) == reference_hash(data)
    edited = dataset(A, Item("b", B.input, {"record": {"director": "P. Docter"}}))
    with pytest.raises(ConfigError, match="changed since it was verified.*skynet reference verify"):
        check_verified(tmp_path, edited)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not a readable reference mark"),
        (
            json.dumps({"version": 9, "hash": "x", "items": 1, "data": "d", "verified": "t"}),
            "newer",
        ),
        (json.dumps({"hash": "x", "items": 1, "data": "d"}), "verified: Field required"),
        (json.dumps({"hash": "x", "items": 1, "data": "d", "verified": "t", "by": 1}), "by"),
    ],
)
def test_a_bad_mark_is_refused_with_the_fix(tmp_path, text, message):
    (tmp_path / MARK_FILE).write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_mark(tmp_path)
