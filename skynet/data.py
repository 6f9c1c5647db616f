"""Datasets and splits: read the rows skynet.toml names, check every one, split them.

A bad row is a DatasetError naming file, line and column; nothing is dropped silently. A seeded
split hashes each item's id, so adding rows never moves an existing item to another split.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skynet.errors import ConfigError, DatasetError
from skynet.textfile import read_text

if TYPE_CHECKING:
    from skynet.config import Config, SplitConfig

__all__ = [
    "SPLITS",
    "Dataset",
    "Item",
    "dataset_from_rows",
    "load_dataset",
    "rows_from",
    "val_copies",
]

SPLITS = ("train", "val", "test")

_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".json": "json"}
_HASH_VERSION = "skynet-dataset-v1"


@dataclass(frozen=True, slots=True)
class Item:
    """One dataset item.

    Attributes:
        id: stable identifier (names the item in every message and record).
        input: the item's input columns, by name.
        expected: the item's output column(s), by name; None when the item has no reference.
    """

    id: str
    input: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] | None = None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class Dataset:
    """The items of one run, split three ways.

    Attributes:
        train: items that feed reflection.
        val: items that select candidates.
        test: items touched only by `skynet eval`.
        hash: sha256 over every item (id, input, expected) with its split, in order; any change
            to the data or the split changes it.
    """

    train: tuple[Item, ...]
    val: tuple[Item, ...]
    test: tuple[Item, ...] = ()
    hash: str = field(init=False)
    _split_by_id: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        split_by_id: dict[str, str] = {}
        for split in SPLITS:
            items = tuple(getattr(self, split))
            object.__setattr__(self, split, items)
            for item in items:
                if item.id in split_by_id:
                    raise DatasetError(
                        f"item id '{item.id}' is in both {split_by_id[item.id]} and {split}; "
                        "give every item its own id"
                    )
                split_by_id[item.id] = split
        payload = [_HASH_VERSION] + [
            [split, item.id, item.input, item.expected]
            for split in SPLITS
            for item in getattr(self, split)
        ]
        object.__setattr__(self, "_split_by_id", split_by_id)
        object.__setattr__(
            self, "hash", hashlib.sha256(_canonical(payload).encode("utf-8")).hexdigest()
        )

    def split_of(self, item_id: str) -> str:
        """The split ("train", "val" or "test") holding `item_id`.

        Raises:
            DatasetError: no item has that id.
        """
        try:
            return self._split_by_id[item_id]
        except KeyError:
            raise DatasetError(
                f"item '{item_id}' is not in this dataset ({len(self._split_by_id)} items); "
                "was the data file changed since the run was recorded?"
            ) from None


def load_dataset(config: Config) -> Dataset:
    """Read and split the items skynet.toml's [data] section names.

    Args:
        config: the project's config; paths resolve against config.project_dir.

    Returns:
        The Dataset, split by a split column, by separate files, or by seeded fractions.

    Raises:
        DatasetError: a file is missing, unreadable, of an unknown type, or holds a bad row
            (the message names file, line and column).
        ConfigError: the train or val split came out empty.
    """
    data = config.data
    base = config.project_dir
    check_columns(data.inputs, data.outputs)
    splits: dict[str, list[Item]] = {split: [] for split in SPLITS}
    seen: dict[str, str] = {}
    if data.path is not None:
        file = _resolve(base, data.path)
        rows = list(_read(file, base, "data.path"))
        id_column = _id_column(rows, data.id_column)
        items = [(row, _item(row, data.inputs, data.outputs, id_column)) for row in rows]
        _check_unique(items, seen, content_ids=id_column is None)
        if data.split_column is not None:
            for row, item in items:
                splits[_split_from_column(row, data.split_column)].append(item)
        else:
            fractions = data.split or _default_split()
            for _, item in items:
                split = _split_by_fraction(
                    item.id, fractions.seed, fractions.train, fractions.val, fractions.test
                )
                splits[split].append(item)
        _require_nonempty(splits, _display(file, base), len(items), config)
    else:
        for split in SPLITS:
            name = getattr(data, split)
            if name is None:
                continue
            file = _resolve(base, name)
            rows = list(_read(file, base, f"data.{split}"))
            id_column = _id_column(rows, data.id_column)
            items = [(row, _item(row, data.inputs, data.outputs, id_column)) for row in rows]
            _check_unique(items, seen, content_ids=id_column is None)
            splits[split] = [item for _, item in items]
            if split in ("train", "val") and not items:
                raise ConfigError(
                    f"{_display(file, base)}: the {split} file (data.{split}) has no items; "
                    f"add rows to it — the {split} split cannot be empty"
                )
    return Dataset(
        train=tuple(splits["train"]), val=tuple(splits["val"]), test=tuple(splits["test"])
    )


# -- reading rows --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Row:
    where: str  # "data.jsonl:3" or "data.json[2]"
    values: dict[str, Any]
    absent: tuple[str, ...] = ()  # CSV: header columns the row has no field for
    extra: tuple[str, ...] = ()  # CSV: fields beyond the header's columns


def _resolve(base: Path, name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else base / path


def _display(file: Path, base: Path) -> str:
    try:
        return str(file.relative_to(base))
    except ValueError:
        return str(file)


def _read(file: Path, base: Path, key: str) -> Iterator[_Row]:
    shown = _display(file, base)
    kind = _FORMATS.get(file.suffix.lower())
    if kind is None:
        raise DatasetError(
            f"{shown}: unknown file type '{file.suffix or '(none)'}' ({key} in skynet.toml); "
            "use a .jsonl, .ndjson, .csv or .json file"
        )
    special = _special(file)
    if special is not None:
        raise DatasetError(
            f"{shown}: is {special}, not a data file ({_setting(key)}); reading it could wait "
            f"forever: set {key} to a regular .jsonl, .csv or .json file"
        )
    text = _text(file, shown, key)
    if kind == "jsonl":
        return read_jsonl(text, shown)
    if kind == "csv":
        return _read_csv(text, shown)
    return _read_json(text, shown)


def _setting(key: str) -> str:
    # "data.path" is set in skynet.toml, "train=" in a skynet.optimize() call.
    return f"{key} of the call" if key.endswith("=") else f"{key} in skynet.toml"


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _special(file: Path) -> str | None:
    """What `file` is when it is neither a regular file nor a folder: opening a FIFO with no
    writer blocks forever, so such a file is refused before it is opened."""
    try:
        mode = file.stat().st_mode  # stat() never blocks, even on a FIFO
    except OSError:
        return None  # read_text names a missing, looping or unreadable file
    return next((name for test, name in _SPECIAL_FILES if test(mode)), None)


def _text(file: Path, shown: str, key: str) -> str:
    return read_text(
        file,
        what="data",
        key=_setting(key),
        missing=f"file not found ({_setting(key)}, relative to {file.parent}); fix the path "
        "or create the file",
        error=DatasetError,
        shown=shown,
    )


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


# json.loads recurses once per level and overflows the stack near 1,000 levels.
_TOO_DEEP = (
    "the JSON is nested too deeply to read (lists or objects inside each other about a "
    "thousand levels deep); flatten the row"
)


def read_jsonl(text: str, shown: str) -> Iterator[_Row]:
    """The JSON-object rows of a JSONL text, each with its place ("{shown}:{line}").

    Raises:
        DatasetError: a line is not JSON or not an object; the message names file and line.
    """
    # Split on "\n" only: str.splitlines() would also split at U+2028, legal inside JSON strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue  # a blank line holds no row
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{shown}:{number}: column {exc.colno}: not valid JSON ({exc.msg}); each line must "
                'be one JSON object, e.g. {"text": "...", "label": "..."}'
            ) from None
        except RecursionError:
            raise DatasetError(f"{shown}:{number}: {_TOO_DEEP}") from None
        if not isinstance(value, dict):
            raise DatasetError(
                f"{shown}:{number}: the row is a JSON {_kind(value)}, not an object; each line "
                'must be one JSON object, e.g. {"text": "...", "label": "..."}'
            )
        yield _Row(f"{shown}:{number}", value)


def _read_json(text: str, shown: str) -> Iterator[_Row]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{shown}:{exc.lineno}: column {exc.colno}: not valid JSON ({exc.msg}); fix the file"
        ) from None
    except RecursionError:
        raise DatasetError(f"{shown}: {_TOO_DEEP}") from None
    if not isinstance(value, list):
        found = "an object" if isinstance(value, dict) else f"a {_kind(value)}"
        raise DatasetError(
            f"{shown}: the file holds {found}, not a list; a .json dataset is a list of objects "
            '[{"text": ..., "label": ...}, ...] (or use .jsonl, one object per line)'
        )
    for index, row in enumerate(value):
        if not isinstance(row, dict):
            raise DatasetError(
                f"{shown}[{index}]: the item is a JSON {_kind(row)}, not an object; every item of "
                'the list must be an object like {"text": ..., "label": ...}'
            )
        yield _Row(f"{shown}[{index}]", row)


def _read_csv(text: str, shown: str) -> Iterator[_Row]:
    # DictReader skips blank lines (they hold no row); a short row gets None for the columns it
    # lacks and a long row puts its surplus under the None key: both are errors, not padding.
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames
        if header is None:
            return
        seen: set[str] = set()
        for name in header:
            if name in seen and name:
                raise DatasetError(
                    f"{shown}:{reader.line_num}: column '{name}' appears twice in the header; "
                    "rename one"
                )
            seen.add(name)
        for record in reader:
            extra = tuple(record.pop(None, None) or ())
            values = {name: value for name, value in record.items() if value is not None}
            absent = tuple(name for name in header if record.get(name) is None)
            fields = [*values.values(), *extra]
            # line_num is where the row ends; quoted newlines inside it move its start back.
            start = reader.line_num - sum(value.count("\n") for value in fields)
            yield _Row(f"{shown}:{start}", values, absent=absent, extra=extra)
    except csv.Error as exc:
        raise DatasetError(
            f"{shown}:{reader.line_num}: not valid CSV ({exc}); fix the quoting on that line"
        ) from None


# -- rows to items -------------------------------------------------------------------------------


def _id_column(rows: Iterable[_Row], configured: str | None) -> str | None:
    if configured is not None:
        return configured
    # Without data.id_column, an "id" column is the id wherever a file has one.
    return "id" if any("id" in row.values for row in rows) else None


def check_columns(
    inputs: Iterable[str],
    outputs: Iterable[str],
    *,
    roles: tuple[str, str] = ("data.inputs", "data.outputs"),
    named_in: str = "skynet.toml",
) -> None:
    """Refuse a column named both an input and an output: the model would be shown the
    expected answer, and the metric would be blamed for the key the expected dict lacks.

    Raises:
        ConfigError: naming the column and both keys.
    """
    shown = set(inputs)
    both = next((column for column in outputs if column in shown), None)
    if both is not None:
        raise ConfigError(
            f"{named_in}: {roles[1]} names '{both}', which {roles[0]} names too; an output "
            "column holds the expected answer, which the model must not be shown: name each "
            "column in one of them"
        )


def _check_shape(row: _Row) -> None:
    header = len(row.values) + len(row.absent)
    if row.absent:
        raise DatasetError(
            f"{row.where}: column '{row.absent[0]}' is missing: the row has "
            f"{len(row.values)} fields, the header has {header}; give every row {header} "
            "fields (an empty value is two commas in a row)"
        )
    if row.extra:
        raise DatasetError(
            f"{row.where}: column {header + 1} ({_shown(row.extra[0])}) is beyond the header: the "
            f"row has {header + len(row.extra)} fields, the header has {header}; quote values "
            'that hold commas ("a, b")'
        )


def _value(row: _Row, column: str, role: str, named_in: str = "skynet.toml") -> Any:
    if column not in row.values:
        have = ", ".join(f"'{name}'" for name in row.values) or "none"
        raise DatasetError(
            f"{row.where}: column '{column}' is missing (named in {role} in {named_in}); "
            f"the row has columns {have}. Add it to the row, or fix {role}"
        )
    return row.values[column]


def _content_id(item_input: dict[str, Any], expected: dict[str, Any]) -> str:
    text = _canonical({"input": item_input, "expected": expected})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _item(
    row: _Row,
    inputs: list[str],
    outputs: list[str],
    id_column: str | None,
    *,
    roles: tuple[str, str, str] = ("data.inputs", "data.outputs", "data.id_column"),
    named_in: str = "skynet.toml",
) -> Item:
    _check_shape(row)
    item_input = {
        column: _checked(row, column, roles[0], _value(row, column, roles[0], named_in))
        for column in inputs
    }
    expected = {
        column: _checked(row, column, roles[1], _value(row, column, roles[1], named_in))
        for column in outputs
    }
    if id_column is None:
        return Item(
            id=_content_id(item_input, expected), input=item_input, expected=expected or None
        )
    value = _value(row, id_column, roles[2], named_in)
    # A boolean is an int to Python but no id ("True" would be a guess); a set or bytes has no
    # one text form.
    if (
        isinstance(value, bool)
        or not isinstance(value, (str, int, float))
        or str(value).strip() == ""
    ):
        raise DatasetError(
            f"{row.where}: column '{id_column}': the id is {_shown(value)}; every row needs a "
            "non-empty string or number as its id"
        )
    # No output columns (a reference-free metric): no expected answer, None as the metric reads.
    return Item(
        id=str(_checked(row, id_column, roles[2], value)),
        input=item_input,
        expected=expected or None,
    )


# Deeper values are refused by row and column: json.dumps (the dataset hash, the run records)
# overflows the stack near a thousand levels, and no prompt needs a hundredth of that.
_MAX_DEPTH = 200
_SURROGATE = re.compile("[\ud800-\udfff]")


def _checked(row: _Row, column: str, role: str, value: Any) -> Any:
    """`value`, or a DatasetError naming row and column when it cannot travel as JSON into a
    prompt, the dataset hash and the run records."""
    problem = _problem(value)
    if problem is not None:
        raise DatasetError(f"{row.where}: column '{column}' ({role}): {problem}")
    return value


def _problem(value: Any) -> str | None:
    """What makes `value` unusable as an item's value, or None. Walked with a stack, not by
    recursion, so that a value nested 100,000 deep is refused rather than overflowing."""
    stack = [(value, 0)]
    while stack:
        part, depth = stack.pop()
        if depth > _MAX_DEPTH:
            return f"the value is nested more than {_MAX_DEPTH} levels deep; flatten it"
        if isinstance(part, str):
            found = _SURROGATE.search(part)
            if found is not None:
                return (
                    f"the text holds a lone surrogate \\u{ord(found.group()):04x} at character "
                    f"{found.start()}; the escapes \\ud800-\\udfff are only text in pairs "
                    "(UTF-16): fix the escape or remove it"
                )
        elif isinstance(part, float):
            if not math.isfinite(part):
                return (
                    f"{json.dumps(part)} is not a value skynet can compare or record (JSON has no "
                    "NaN or Infinity; in a DataFrame NaN is a missing value); give a number or a "
                    "string, or drop the row"
                )
        elif isinstance(part, (set, frozenset)):
            return (
                f"a Python {type(part).__name__} is not a JSON value (it has no order); give a "
                "list, e.g. sorted(...)"
            )
        elif isinstance(part, (bytes, bytearray, memoryview)):
            return f"{type(part).__name__} is not text; give a str, e.g. value.decode('utf-8')"
        elif isinstance(part, Mapping):
            for key, inner in part.items():
                stack.extend(((key, depth + 1), (inner, depth + 1)))
        elif isinstance(part, (list, tuple)):
            stack.extend((inner, depth + 1) for inner in part)
    return None


def _shown(value: Any) -> str:
    text = _canonical(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_unique(
    items: list[tuple[_Row, Item]], seen: dict[str, str], *, content_ids: bool
) -> None:
    for row, item in items:
        first = seen.get(item.id)
        if first is not None:
            if content_ids:
                raise DatasetError(
                    f"{row.where}: the same input and expected values as {first} (content id "
                    f"'{item.id}'); remove the duplicate row, or add an 'id' column"
                )
            raise DatasetError(
                f"{row.where}: duplicate id '{item.id}' (first at {first}); give every row its "
                "own id"
            )
        seen[item.id] = row.where


# -- splits --------------------------------------------------------------------------------------


def _split_from_column(row: _Row, column: str) -> str:
    value = _value(row, column, "data.split_column")
    if not isinstance(value, str) or value not in SPLITS:
        raise DatasetError(
            f"{row.where}: column '{column}': split {_shown(value)} is not one of "
            '"train", "val" or "test"; set it to one of those'
        )
    return value


def _split_by_fraction(item_id: str, seed: int, train: float, val: float, test: float) -> str:
    # The split depends on this item's id alone, so adding rows never moves another item.
    digest = hashlib.sha256(f"{seed}:{item_id}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64  # uniform in [0, 1)
    if point < train:
        return "train"
    # With test = 0, rounding in train + val must not push an item into test.
    if point < train + val or test <= 0:
        return "val"
    return "test"


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


@dataclass(frozen=True, slots=True)
class Fractions:
    """A seeded split by fractions; these defaults are [data.split]'s (skynet.config)."""

    train: float = 0.5
    val: float = 0.3
    test: float = 0.2
    seed: int = 0


DEFAULT_SPLIT = Fractions()


def _default_split() -> Fractions:
    return DEFAULT_SPLIT


def _require_nonempty(
    splits: dict[str, list[Item]], shown: str, count: int, config: Config
) -> None:
    data = config.data
    for split in ("train", "val"):
        if splits[split]:
            continue
        if data.split_column is not None:
            raise ConfigError(
                f'{shown}: {_items(count)}, none with {data.split_column} = "{split}"; the {split} '
                f"split cannot be empty: mark some rows \"{split}\" in column '{data.split_column}'"
            )
        fractions = data.split or _default_split()
        raise ConfigError(
            f"{shown}: {_items(count)}, and the seeded split (train {fractions.train:g}, val "
            f"{fractions.val:g}, test {fractions.test:g}, seed {fractions.seed}) left the {split} "
            f"split empty; add rows (a few dozen at least) or raise data.split.{split} in "
            "skynet.toml"
        )


# -- no val given: the train items serve as val (gepa's and dspy.GEPA's valset=None) -------------

VAL_COPY = "val:"  # a val copy's id: this, then the train item's id


def val_copies(train: Iterable[Item]) -> list[Item]:
    """The val split when none is given, as gepa.optimize and dspy.GEPA.compile take
    valset=None: each train item again, under the id "val:" + its id (an item id names one
    split in the run records).

    Raises:
        DatasetError: a train item already holds the id a copy would take.
    """
    items = list(train)
    ids = {item.id for item in items}
    copies = [val_copy(item) for item in items]
    for copy in copies:
        if copy.id in ids:
            raise DatasetError(
                f"train=: item id '{copy.id}' is also the id the val copy of item "
                f"'{copy.id[len(VAL_COPY) :]}' takes (with no val= the train rows serve as val, "
                f"each under '{VAL_COPY}' + its id); rename that row's id, or give val= rows"
            )
    return copies


def val_copy(item: Item) -> Item:
    """`item` as a val item when no val is given: the same input and expected, under "val:" +
    its id."""
    return Item(VAL_COPY + item.id, item.input, item.expected)


def are_val_copies(train: Mapping[str, Any], val: Mapping[str, Any]) -> bool:
    """Whether the val items are `val_copies` of the train items: each train id under
    "val:", with the same value (what the caller compares: an item's input and expected)."""
    if not val or len(val) != len(train):
        return False
    for item_id, value in val.items():
        source = item_id[len(VAL_COPY) :]
        if not item_id.startswith(VAL_COPY) or source not in train or train[source] != value:
            return False
    return True


# -- rows given in Python (skynet.optimize / skynet.evaluate) -------------------------------------


def rows_from(value: Any, name: str) -> list[_Row]:
    """The rows of `value`, as `skynet.optimize(train=...)` takes them: a list of dicts, a list
    of dspy.Example, a pandas DataFrame, or the path of a .jsonl/.csv/.json file. Each row is
    named by where it came from ("train[3]", "data.jsonl:4") in every message.

    Raises:
        DatasetError: a row is not a mapping, or the file cannot be read (named).
    """
    if isinstance(value, (str, Path)):
        file = Path(value).expanduser().absolute()
        return list(_read(file, Path.cwd(), f"{name}="))
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a pandas DataFrame
        # to_dict keeps one of two same-named columns (with only a warning): refuse instead.
        twice = [column for column, n in Counter(value.columns).items() if n > 1]
        if twice:
            raise DatasetError(
                f"{name}=: column '{twice[0]}' appears twice in the DataFrame, and only one "
                "could be read; rename one (df.columns = [...])"
            )
        value = value.to_dict(orient="records")
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise DatasetError(
            f"{name}= is a {type(value).__name__}; give a list of dicts, a list of dspy.Example, "
            "a pandas DataFrame or a data file's path"
        )
    rows = []
    for index, row in enumerate(value):
        fields = _fields(row)
        if fields is None:
            raise DatasetError(
                f"{name}[{index}] is a {type(row).__name__}, not a dict or a dspy.Example; give "
                "each row as a dict of column -> value"
            )
        rows.append(_Row(f"{name}[{index}]", fields))
    return rows


def _fields(row: Any) -> dict[str, Any] | None:
    if isinstance(row, Mapping):
        return dict(row)
    if hasattr(row, "toDict") and hasattr(row, "inputs"):  # a dspy.Example
        return dict(row.toDict())
    return None


def example_inputs(value: Any) -> list[str] | None:
    """The input fields the rows' dspy.Examples declare (`.with_inputs(...)`), if they do."""
    if not isinstance(value, (list, tuple)):
        return None
    for row in value:
        keys = getattr(row, "_input_keys", None)
        if keys:
            return sorted(keys)
    return None


def dataset_from_rows(
    splits: Mapping[str, list[_Row]],
    *,
    inputs: list[str],
    outputs: list[str],
    id_column: str | None = None,
    fractions: Fractions | SplitConfig | None = None,
    required: tuple[str, ...] = ("train", "val"),
    train_as_val: bool = False,
) -> Dataset:
    """The Dataset of rows given in Python: `splits` holds "train", "val" (and "test") row lists,
    or one "data" list split by `fractions` (seeded, as data.split in skynet.toml). The
    `required` splits may not come out empty (an evaluation needs neither train nor val). With
    `train_as_val`, the val split is the train items again (see `val_copies`).

    Raises:
        DatasetError: a row lacks a column, or two rows share an id (both named).
        ConfigError: train or val came out empty.
    """
    roles = ("inputs=", "outputs=", "id_column=")
    seen: dict[str, str] = {}
    out: dict[str, list[Item]] = {split: [] for split in SPLITS}
    for source, rows in splits.items():
        id_col = _id_column(rows, id_column)
        items = [
            (row, _item(row, inputs, outputs, id_col, roles=roles, named_in="the call"))
            for row in rows
        ]
        _check_unique(items, seen, content_ids=id_col is None)
        if source in SPLITS:
            out[source].extend(item for _, item in items)
            continue
        chosen = fractions or _default_split()
        for _, item in items:
            split = _split_by_fraction(item.id, chosen.seed, chosen.train, chosen.val, chosen.test)
            out[split].append(item)
    if train_as_val:
        out["val"] = val_copies(out["train"])
    for split in required:
        if not out[split]:
            given = "data=" if "data" in splits else f"{split}="
            raise ConfigError(
                f"{given}: the {split} split is empty; give {split}= rows (a few dozen at least)"
                + (", or raise its fraction in split=" if "data" in splits else "")
            )
    return Dataset(train=tuple(out["train"]), val=tuple(out["val"]), test=tuple(out["test"]))
