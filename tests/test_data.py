"""Datasets: reading JSONL/CSV/JSON, bad rows, ids, the three ways to split, the dataset hash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skynet.config import CONFIG_FILE, Config, load_config
from skynet.data import Dataset, Item, load_dataset
from skynet.errors import ConfigError, DatasetError


def project(folder: Path, data: str, files: dict[str, str | bytes]) -> Config:
    """Write skynet.toml with a [data] section (inputs text, outputs label) and the data files."""
    for name, content in files.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    toml = f'[data]\ninputs = ["text"]\noutputs = ["label"]\n{data}\n'
    (folder / CONFIG_FILE).write_text(toml, encoding="utf-8")
    return load_config(folder)


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def rows(count: int, start: int = 0) -> list[dict]:
    return [
        {"id": f"r{i}", "text": f"text {i}", "label": str(i % 3)}
        for i in range(start, start + count)
    ]


def everything(dataset: Dataset) -> list[Item]:
    return [*dataset.train, *dataset.val, *dataset.test]


# -- formats -------------------------------------------------------------------------------------

ROWS = [{"id": "a", "text": "hello", "label": "x"}, {"id": "b", "text": "bye", "label": "y"}]
SPLIT = 'split_column = "split"'

FORMATS = [
    (
        "jsonl",
        "d.jsonl",
        jsonl([{**ROWS[0], "split": "train"}, {**ROWS[1], "split": "val"}]),
    ),
    (
        "ndjson with blank lines",
        "d.ndjson",
        "\n"
        + jsonl([{**ROWS[0], "split": "train"}])
        + "\n   \n"
        + jsonl([{**ROWS[1], "split": "val"}]),
    ),
    ("csv", "d.csv", "id,text,label,split\na,hello,x,train\nb,bye,y,val\n"),
    (
        "csv with BOM and CRLF",
        "d.csv",
        "\ufeffid,text,label,split\r\na,hello,x,train\r\nb,bye,y,val\r\n",
    ),
    (
        "json list",
        "d.json",
        json.dumps([{**ROWS[0], "split": "train"}, {**ROWS[1], "split": "val"}], indent=2),
    ),
]


@pytest.mark.parametrize(("case", "name", "content"), FORMATS, ids=[f[0] for f in FORMATS])
def test_formats_give_the_same_items(tmp_path, case, name, content):
    config = project(tmp_path, f'path = "{name}"\n{SPLIT}', {name: content})
    dataset = load_dataset(config)
    assert dataset.train == (Item(id="a", input={"text": "hello"}, expected={"label": "x"}),)
    assert dataset.val == (Item(id="b", input={"text": "bye"}, expected={"label": "y"}),)
    assert dataset.test == ()


def test_csv_values_are_strings_and_json_values_keep_their_type(tmp_path):
    csv_config = project(
        tmp_path,
        'path = "d.csv"\nsplit_column = "split"',
        {"d.csv": "text,label,split\n1,2,train\n3,4,val\n"},
    )
    assert load_dataset(csv_config).train[0].input == {"text": "1"}
    json_rows = [
        {"text": 1, "label": [2], "split": "train"},
        {"text": 3, "label": [4], "split": "val"},
    ]
    json_config = project(
        tmp_path, 'path = "d.jsonl"\nsplit_column = "split"', {"d.jsonl": jsonl(json_rows)}
    )
    item = load_dataset(json_config).train[0]
    assert item.input == {"text": 1}
    assert item.expected == {"label": [2]}


def test_several_input_and_output_columns(tmp_path):
    (tmp_path / "d.jsonl").write_text(
        jsonl([{"q": "a", "ctx": "c", "ans": "x", "why": "w", "notes": "unused", "split": "train"}])
        + jsonl([{"q": "b", "ctx": "d", "ans": "y", "why": "v", "split": "val"}])
    )
    (tmp_path / CONFIG_FILE).write_text(
        '[data]\npath = "d.jsonl"\nsplit_column = "split"\ninputs = ["q", "ctx"]\noutputs = ["ans", "why"]\n'
    )
    item = load_dataset(load_config(tmp_path)).train[0]
    assert item.input == {"q": "a", "ctx": "c"}
    assert item.expected == {"ans": "x", "why": "w"}


# -- bad rows ------------------------------------------------------------------------------------

GOOD = '{"id": "g1", "text": "t", "label": "l"}\n'

# (case, file name, content, extra [data] lines, substrings the message must hold)
BAD_ROWS = [
    (
        "unparsable JSON line",
        "d.jsonl",
        GOOD + '{"text": "a", label: "b"}\n',
        "",
        ["d.jsonl:2:", "column 15", "not valid JSON"],
    ),
    (
        "JSON line after a blank line",
        "d.jsonl",
        GOOD + "\n\n{oops\n",
        "",
        ["d.jsonl:4:", "not valid JSON"],
    ),
    (
        "JSONL row not an object",
        "d.jsonl",
        GOOD + '["a", "b"]\n',
        "",
        ["d.jsonl:2:", "JSON list, not an object"],
    ),
    (
        "JSONL row a string",
        "d.jsonl",
        GOOD + '"text"\n',
        "",
        ["d.jsonl:2:", "JSON string, not an object"],
    ),
    (
        "missing input column",
        "d.jsonl",
        GOOD + '{"id": "g2", "txt": "a", "label": "b"}\n',
        "",
        ["d.jsonl:2:", "column 'text' is missing", "data.inputs", "'txt'"],
    ),
    (
        "missing output column",
        "d.jsonl",
        GOOD + '{"id": "g2", "text": "a"}\n',
        "",
        ["d.jsonl:2:", "column 'label' is missing", "data.outputs"],
    ),
    (
        "duplicate id",
        "d.jsonl",
        GOOD
        + '{"id": "g2", "text": "a", "label": "b"}\n'
        + '{"id": "g1", "text": "c", "label": "d"}\n',
        "",
        ["d.jsonl:3:", "duplicate id 'g1'", "first at d.jsonl:1"],
    ),
    (
        "duplicate numeric id",
        "d.jsonl",
        '{"id": 7, "text": "a", "label": "b"}\n{"id": "7", "text": "c", "label": "d"}\n',
        "",
        ["d.jsonl:2:", "duplicate id '7'", "d.jsonl:1"],
    ),
    (
        "duplicate content without ids",
        "d.jsonl",
        '{"text": "a", "label": "b"}\n{"text": "c", "label": "d"}\n{"text": "a", "label": "b"}\n',
        "",
        ["d.jsonl:3:", "d.jsonl:1", "same input and expected", "add an 'id' column"],
    ),
    (
        "empty id",
        "d.jsonl",
        '{"id": "", "text": "a", "label": "b"}\n',
        "",
        ["d.jsonl:1:", "column 'id'", "non-empty"],
    ),
    (
        "null id",
        "d.jsonl",
        '{"id": null, "text": "a", "label": "b"}\n',
        "",
        ["d.jsonl:1:", "column 'id'"],
    ),
    (
        "id column missing in a row",
        "d.jsonl",
        GOOD + '{"text": "a", "label": "b"}\n',
        "",
        ["d.jsonl:2:", "column 'id' is missing"],
    ),
    (
        "configured id column missing",
        "d.jsonl",
        GOOD,
        'id_column = "key"',
        ["d.jsonl:1:", "column 'key' is missing", "data.id_column"],
    ),
    (
        "CSV row too short",
        "d.csv",
        "id,text,label\n1,a,b\n2,c\n",
        "",
        ["d.csv:3:", "column 'label' is missing", "2 fields, the header has 3"],
    ),
    (
        "CSV row too long",
        "d.csv",
        "id,text,label\n1,a,b\n2,c,d,e\n",
        "",
        ["d.csv:3:", "column 4", '"e"', "quote values"],
    ),
    (
        "CSV bad row after a quoted newline",
        "d.csv",
        'id,text,label\n1,"two\nlines",b\n\n2,c\n',
        "",
        ["d.csv:5:", "column 'label' is missing"],
    ),
    (
        "CSV missing input column",
        "d.csv",
        "id,txt,label\n1,a,b\n",
        "",
        ["d.csv:2:", "column 'text' is missing"],
    ),
    (
        "CSV duplicate header",
        "d.csv",
        "id,text,text,label\n1,a,b,c\n",
        "",
        ["d.csv:1:", "column 'text' appears twice"],
    ),
    (
        "CSV duplicate id",
        "d.csv",
        "id,text,label\n1,a,b\n1,c,d\n",
        "",
        ["d.csv:3:", "duplicate id '1'", "d.csv:2"],
    ),
    (
        "JSON item not an object",
        "d.json",
        '[{"id": 1, "text": "a", "label": "b"}, 5]',
        "",
        ["d.json[1]:", "JSON number"],
    ),
    (
        "JSON item missing column",
        "d.json",
        '[{"id": 1, "text": "a", "label": "b"}, {"id": 2, "label": "b"}]',
        "",
        ["d.json[1]:", "column 'text' is missing"],
    ),
    (
        "JSON duplicate id",
        "d.json",
        '[{"id": 1, "text": "a", "label": "b"}, {"id": 1, "text": "c", "label": "d"}]',
        "",
        ["d.json[1]:", "duplicate id '1'", "first at d.json[0]"],
    ),
    (
        "JSON syntax error",
        "d.json",
        '[\n  {"id": 1,\n   "text": }\n]',
        "",
        ["d.json:3:", "column 12", "not valid JSON"],
    ),
    (
        "JSON not a list",
        "d.json",
        '{"id": 1, "text": "a"}',
        "",
        ["d.json:", "an object, not a list"],
    ),
    (
        "not UTF-8",
        "d.jsonl",
        GOOD.encode() + b'{"text": "\xff"}\n',
        "",
        ["d.jsonl:2:", "not UTF-8"],
    ),
    (
        "unknown extension",
        "d.txt",
        "text,label\n",
        "",
        ["d.txt:", "unknown file type '.txt'", ".jsonl"],
    ),
    (
        "bad split value",
        "d.jsonl",
        '{"id": 1, "text": "a", "label": "b", "split": "train"}\n{"id": 2, "text": "a", "label": "b", "split": "dev"}\n',
        'split_column = "split"',
        ["d.jsonl:2:", "column 'split'", '"dev"', '"train", "val" or "test"'],
    ),
    (
        "missing split value",
        "d.jsonl",
        '{"id": 1, "text": "a", "label": "b"}\n',
        'split_column = "split"',
        ["d.jsonl:1:", "column 'split' is missing", "data.split_column"],
    ),
]


@pytest.mark.parametrize(
    ("case", "name", "content", "extra", "needles"), BAD_ROWS, ids=[b[0] for b in BAD_ROWS]
)
def test_bad_rows(tmp_path, case, name, content, extra, needles):
    config = project(tmp_path, f'path = "{name}"\n{extra}', {name: content})
    with pytest.raises(DatasetError) as caught:
        load_dataset(config)
    for needle in needles:
        assert needle in str(caught.value)


def test_missing_file_names_path_and_key(tmp_path):
    config = project(tmp_path, 'path = "nowhere.jsonl"', {})
    with pytest.raises(DatasetError) as caught:
        load_dataset(config)
    assert "nowhere.jsonl: file not found" in str(caught.value)
    assert "data.path" in str(caught.value)


def test_duplicate_id_across_files_names_both(tmp_path):
    config = project(
        tmp_path,
        'train = "train.jsonl"\nval = "val.jsonl"',
        {"train.jsonl": jsonl(rows(3)), "val.jsonl": jsonl(rows(2, start=2))},
    )
    with pytest.raises(DatasetError) as caught:
        load_dataset(config)
    assert "val.jsonl:1: duplicate id 'r2' (first at train.jsonl:3)" in str(caught.value)


# -- ids -----------------------------------------------------------------------------------------


def test_content_ids_are_stable_and_short(tmp_path):
    plain = [{"text": f"t{i}", "label": "x"} for i in range(30)]
    first = load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(plain)}))
    again = load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(plain[::-1])}))
    ids = {item.id for item in everything(first)}
    assert ids == {item.id for item in everything(again)}
    assert len(ids) == 30
    assert all(len(i) == 12 and int(i, 16) >= 0 for i in ids)


def test_content_id_ignores_unused_columns(tmp_path):
    plain = [{"text": f"t{i}", "label": "x"} for i in range(10)]
    noted = [{**row, "notes": "added later"} for row in plain]
    first = load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(plain)}))
    again = load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(noted)}))
    assert [i.id for i in everything(first)] == [i.id for i in everything(again)]


def test_id_column_value_becomes_the_id(tmp_path):
    data = [{"key": 10 + i, "text": f"t{i}", "label": "x"} for i in range(20)]
    dataset = load_dataset(
        project(tmp_path, 'path = "d.jsonl"\nid_column = "key"', {"d.jsonl": jsonl(data)})
    )
    assert {item.id for item in everything(dataset)} == {str(10 + i) for i in range(20)}
    assert all("key" not in item.input for item in everything(dataset))


# -- splits --------------------------------------------------------------------------------------


def split_map(dataset: Dataset) -> dict[str, str]:
    return {item.id: dataset.split_of(item.id) for item in everything(dataset)}


def test_seeded_split_follows_the_fractions(tmp_path):
    dataset = load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(rows(2000))}))
    shares = [len(part) / 2000 for part in (dataset.train, dataset.val, dataset.test)]
    for share, wanted in zip(shares, (0.5, 0.3, 0.2), strict=True):
        assert abs(share - wanted) < 0.04


@pytest.mark.parametrize("where", ["appended", "prepended", "shuffled in"])
def test_adding_rows_keeps_existing_items_in_their_split(tmp_path, where):
    old = rows(60)
    new = rows(60, start=1000)
    combined = {
        "appended": old + new,
        "prepended": new + old,
        "shuffled in": [r for pair in zip(new, old, strict=True) for r in pair],
    }[where]
    before = split_map(load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(old)})))
    after = split_map(
        load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(combined)}))
    )
    assert len(after) == 120
    assert {item_id: after[item_id] for item_id in before} == before
    # The new rows are spread over the splits too, not all piled into one.
    assert {after[row["id"]] for row in new} == {"train", "val", "test"}


def test_seed_changes_the_split(tmp_path):
    data = {"d.jsonl": jsonl(rows(60))}
    seed0 = split_map(load_dataset(project(tmp_path, 'path = "d.jsonl"', data)))
    seed1 = split_map(
        load_dataset(project(tmp_path, 'path = "d.jsonl"\nsplit = { seed = 1 }', data))
    )
    assert seed0.keys() == seed1.keys()
    assert seed0 != seed1


def test_zero_test_fraction_puts_nothing_in_test(tmp_path):
    dataset = load_dataset(
        project(
            tmp_path,
            'path = "d.jsonl"\nsplit = { train = 0.7, val = 0.3 }',
            {"d.jsonl": jsonl(rows(300))},
        )
    )
    assert dataset.test == ()
    assert len(dataset.train) + len(dataset.val) == 300


def test_split_by_column(tmp_path):
    data = [{**row, "split": ("train", "val", "test")[i % 3]} for i, row in enumerate(rows(9))]
    dataset = load_dataset(
        project(tmp_path, 'path = "d.jsonl"\nsplit_column = "split"', {"d.jsonl": jsonl(data)})
    )
    assert [i.id for i in dataset.train] == ["r0", "r3", "r6"]
    assert [i.id for i in dataset.val] == ["r1", "r4", "r7"]
    assert [i.id for i in dataset.test] == ["r2", "r5", "r8"]
    assert dataset.split_of("r4") == "val"


def test_split_by_files(tmp_path):
    config = project(
        tmp_path,
        'train = "tr.jsonl"\nval = "va.csv"\ntest = "te.json"',
        {
            "tr.jsonl": jsonl(rows(3)),
            "va.csv": "id,text,label\nv1,a,b\nv2,c,d\n",
            "te.json": json.dumps([{"id": "t1", "text": "e", "label": "f"}]),
        },
    )
    dataset = load_dataset(config)
    assert [i.id for i in dataset.train] == ["r0", "r1", "r2"]
    assert [i.id for i in dataset.val] == ["v1", "v2"]
    assert [i.id for i in dataset.test] == ["t1"]
    assert dataset.split_of("v2") == "val"


def test_split_by_files_without_test(tmp_path):
    config = project(
        tmp_path,
        'train = "tr.jsonl"\nval = "va.jsonl"',
        {"tr.jsonl": jsonl(rows(2)), "va.jsonl": jsonl(rows(2, start=5))},
    )
    dataset = load_dataset(config)
    assert (len(dataset.train), len(dataset.val), dataset.test) == (2, 2, ())


# (case, [data] lines, files, substrings the ConfigError must hold)
EMPTY_SPLITS = [
    (
        "too few rows for the fractions",
        'path = "d.jsonl"',
        {"d.jsonl": jsonl(rows(1))},
        ["d.jsonl: 1 item,", "add rows", "data.split"],
    ),
    (
        "zero val fraction",
        'path = "d.jsonl"\nsplit = { train = 1 }',
        {"d.jsonl": jsonl(rows(20))},
        ["d.jsonl: 20 items", "val split empty", "data.split.val"],
    ),
    ("empty file", 'path = "d.csv"', {"d.csv": ""}, ["d.csv: 0 items", "add rows"]),
    (
        "no val rows in the split column",
        'path = "d.jsonl"\nsplit_column = "split"',
        {"d.jsonl": jsonl([{**r, "split": "train"} for r in rows(4)])},
        ["d.jsonl: 4 items", 'none with split = "val"', "mark some rows"],
    ),
    (
        "empty val file",
        'train = "tr.jsonl"\nval = "va.jsonl"',
        {"tr.jsonl": jsonl(rows(3)), "va.jsonl": "\n"},
        ["va.jsonl: the val file (data.val) has no items", "add rows"],
    ),
]


@pytest.mark.parametrize(
    ("case", "data", "files", "needles"), EMPTY_SPLITS, ids=[e[0] for e in EMPTY_SPLITS]
)
def test_empty_train_or_val_is_a_config_error(tmp_path, case, data, files, needles):
    config = project(tmp_path, data, files)
    with pytest.raises(ConfigError) as caught:
        load_dataset(config)
    for needle in needles:
        assert needle in str(caught.value)


# -- the dataset ---------------------------------------------------------------------------------


def test_hash_is_stable_and_changes_with_any_value(tmp_path):
    data = rows(30)
    first = load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(data)}))
    same = load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(data)}))
    assert first.hash == same.hash
    assert len(first.hash) == 64
    changed = [dict(r) for r in data]
    changed[17]["label"] = "changed"
    other = load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(changed)}))
    assert other.hash != first.hash
    input_changed = [dict(r) for r in data]
    input_changed[3]["text"] = "text 3 "
    assert (
        load_dataset(project(tmp_path, 'path = "d.jsonl"', {"d.jsonl": jsonl(input_changed)})).hash
        != first.hash
    )


def test_hash_changes_with_the_split(tmp_path):
    files = {"d.jsonl": jsonl(rows(30))}
    seed0 = load_dataset(project(tmp_path, 'path = "d.jsonl"', files))
    seed1 = load_dataset(project(tmp_path, 'path = "d.jsonl"\nsplit = { seed = 1 }', files))
    assert sorted(i.id for i in everything(seed0)) == sorted(i.id for i in everything(seed1))
    assert seed0.hash != seed1.hash


def test_split_of_unknown_id_is_a_dataset_error():
    dataset = Dataset(train=(Item("a"),), val=(Item("b"),))
    assert dataset.split_of("a") == "train"
    with pytest.raises(DatasetError, match="item 'zzz' is not in this dataset"):
        dataset.split_of("zzz")


def test_dataset_refuses_an_id_in_two_splits():
    with pytest.raises(DatasetError, match="item id 'a' is in both train and val"):
        Dataset(train=(Item("a"),), val=(Item("a"),))


def test_dataset_is_frozen():
    dataset = Dataset(train=(Item("a"),), val=(Item("b"),))
    with pytest.raises(AttributeError):
        dataset.train = ()  # type: ignore[misc]
