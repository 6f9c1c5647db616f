"""skynet.toml: accepted and rejected files, overrides, and the runtime models config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from skynet import config as config_module
from skynet.config import CONFIG_FILE, Config, config_model, load_config
from skynet.errors import ConfigError
from skynet.models import ModelsConfig, Price

DATA = '[data]\npath = "data.jsonl"\ninputs = ["text"]\noutputs = ["label"]\n'


def write(folder: Path, text: str) -> Path:
    (folder / CONFIG_FILE).write_text(text, encoding="utf-8")
    return folder


def value_at(config: Config, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


# (case, file text, overrides, dotted key, expected value)
ACCEPTED = [
    ("default budget", DATA, None, "budget.max_metric_calls", 150),
    ("default engine", DATA, None, "engine.name", "auto"),
    ("default task model", DATA, None, "models.task", "local/smollm2"),
    ("default artifact path", DATA, None, "artifact.path", "prompt.md"),
    ("default split filled in", DATA, None, "data.split.train", 0.5),
    ("default split test", DATA, None, "data.split.test", 0.2),
    ("default id column", DATA, None, "data.id_column", None),
    (
        "dspy artifact path",
        DATA + '[artifact]\nkind = "dspy"\n',
        None,
        "artifact.path",
        "program.py",
    ),
    ("code artifact path", DATA + '[artifact]\nkind = "code"\n', None, "artifact.path", "code.py"),
    (
        "explicit artifact path wins",
        DATA + '[artifact]\nkind = "dspy"\npath = "prog.py"\n',
        None,
        "artifact.path",
        "prog.py",
    ),
    (
        "fractions summing to 1",
        DATA + "split = { train = 0.7, val = 0.2, test = 0.1 }\n",
        None,
        "data.split.val",
        0.2,
    ),
    (
        "fraction left out is 0",
        DATA + "split = { train = 0.6, val = 0.4 }\n",
        None,
        "data.split.test",
        0.0,
    ),
    (
        "seed alone keeps default fractions",
        DATA + "split = { seed = 7 }\n",
        None,
        "data.split.train",
        0.5,
    ),
    ("seed alone is kept", DATA + "split = { seed = 7 }\n", None, "data.split.seed", 7),
    ("split column, no fractions", DATA + 'split_column = "split"\n', None, "data.split", None),
    (
        "separate files",
        '[data]\ntrain = "t.jsonl"\nval = "v.jsonl"\ninputs = ["a"]\noutputs = ["b"]\n',
        None,
        "data.val",
        "v.jsonl",
    ),
    (
        "separate files have no split",
        '[data]\ntrain = "t.jsonl"\nval = "v.jsonl"\ninputs = ["a"]\noutputs = ["b"]\n',
        None,
        "data.split",
        None,
    ),
    (
        "built-in scorer",
        DATA + '[metric]\nname = "xlam-tool-call"\n',
        None,
        "metric.name",
        "xlam-tool-call",
    ),
    (
        "scorer options",
        DATA + '[metric]\nname = "judge"\noptions = { k = 3 }\n',
        None,
        "metric.options",
        {"k": 3},
    ),
    ("engine name", DATA + '[engine]\nname = "dspy-gepa"\n', None, "engine.name", "dspy-gepa"),
    (
        "max error share 1",
        DATA + "[engine]\nmax_error_share = 1\n",
        None,
        "engine.max_error_share",
        1.0,
    ),
    ("budget cost", DATA + "[budget]\nmax_cost_usd = 5\n", None, "budget.max_cost_usd", 5.0),
    (
        "declared price",
        DATA
        + '[models.prices."openai/my-finetune"]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n',
        None,
        "models.prices",
        {"openai/my-finetune": config_module.PriceConfig(input_per_mtok=0.15, output_per_mtok=0.6)},
    ),
    ("override an int", DATA, {"budget.max_metric_calls": 20}, "budget.max_metric_calls", 20),
    ("override a literal", DATA, {"engine.name": "gepa"}, "engine.name", "gepa"),
    (
        "override to no limit",
        DATA,
        {"budget.max_metric_calls": None},
        "budget.max_metric_calls",
        None,
    ),
    (
        "override a quoted name",
        DATA,
        {
            'models.endpoints."openai/gpt-4.1".rpm': 30,
        },
        "models.endpoints",
        {"openai/gpt-4.1": config_module.EndpointConfig(rpm=30)},
    ),
    (
        "override wins over the file",
        DATA + "[budget]\nmax_metric_calls = 99\n",
        {"budget.max_metric_calls": 5},
        "budget.max_metric_calls",
        5,
    ),
]


@pytest.mark.parametrize(
    ("case", "text", "overrides", "key", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED]
)
def test_accepted(tmp_path, case, text, overrides, key, expected):
    config = load_config(write(tmp_path, text), overrides)
    assert value_at(config, key) == expected


# (case, file text, overrides, substrings the message must hold)
REJECTED = [
    (
        "unknown key with suggestion",
        DATA + "[budget]\nmax_metric_call = 20\n",
        None,
        [
            "skynet.toml: unknown key 'budget.max_metric_call'; did you mean 'budget.max_metric_calls'?"
        ],
    ),
    (
        "key in the wrong section",
        DATA + "[engine]\nmax_metric_calls = 20\n",
        None,
        ["unknown key 'engine.max_metric_calls'", "did you mean 'budget.max_metric_calls'?"],
    ),
    (
        "unknown section",
        DATA + "[budgets]\nmax_minutes = 3\n",
        None,
        ["unknown key 'budgets'", "'budget'"],
    ),
    (
        "misspelt required key",
        '[data]\npath = "d.jsonl"\ninput = ["text"]\noutputs = ["label"]\n',
        None,
        ["unknown key 'data.input'", "did you mean 'data.inputs'?"],
    ),
    (
        "unknown key under a model name",
        DATA + '[models.prices."openai/gpt-4.1"]\ninput_per_mtk = 1\noutput_per_mtok = 2\n',
        None,
        [
            "unknown key 'models.prices.\"openai/gpt-4.1\".input_per_mtk'",
            "did you mean 'models.prices.\"openai/gpt-4.1\".input_per_mtok'?",
        ],
    ),
    (
        "string for an int",
        DATA + '[budget]\nmax_metric_calls = "many"\n',
        None,
        ['budget.max_metric_calls = "many"', "set it to an integer >= 1"],
    ),
    (
        # --set reads its value as TOML: a string here was quoted, never a number to coerce.
        "override with a quoted number",
        DATA,
        {"budget.max_metric_calls": "20"},
        ["override 'budget.max_metric_calls'", 'budget.max_metric_calls = "20"', "an integer"],
    ),
    (
        "bool for an int",
        DATA + "[budget]\nmax_metric_calls = true\n",
        None,
        ["budget.max_metric_calls = true", "boolean", "set it to an integer >= 1"],
    ),
    (
        "fractional int",
        DATA + "[engine]\nconcurrency = 2.5\n",
        None,
        ["engine.concurrency = 2.5", "set it to an integer >= 1"],
    ),
    (
        "zero concurrency",
        DATA + "[engine]\nconcurrency = 0\n",
        None,
        ["engine.concurrency = 0", ">= 1"],
    ),
    (
        "zero metric calls",
        DATA + "[budget]\nmax_metric_calls = 0\n",
        None,
        ["budget.max_metric_calls = 0"],
    ),
    (
        "zero cost budget",
        DATA + "[budget]\nmax_cost_usd = 0\n",
        None,
        ["budget.max_cost_usd = 0", "> 0"],
    ),
    ("nan minutes", DATA + "[budget]\nmax_minutes = nan\n", None, ["budget.max_minutes", "finite"]),
    (
        "error share 0",
        DATA + "[engine]\nmax_error_share = 0\n",
        None,
        ["engine.max_error_share = 0", "(0, 1]"],
    ),
    (
        "error share above 1",
        DATA + "[engine]\nmax_error_share = 1.5\n",
        None,
        ["engine.max_error_share = 1.5", "(0, 1]"],
    ),
    (
        "unknown engine",
        DATA + '[engine]\nname = "gepa2"\n',
        None,
        ['engine.name = "gepa2": no engine has this name; known: auto, dspy-gepa, gepa'],
    ),
    (
        "unknown auto level",
        DATA + '[engine]\nauto = "max"\n',
        None,
        ['engine.auto = "max"', '"light"'],
    ),
    (
        "unknown artifact kind",
        DATA + '[artifact]\nkind = "rust"\n',
        None,
        ['artifact.kind = "rust"', '"prompt"'],
    ),
    (
        "negative temperature",
        DATA + "[artifact]\ntemperature = -1\n",
        None,
        ["artifact.temperature = -1", ">= 0"],
    ),
    (
        "fractions not summing to 1",
        DATA + "split = { train = 0.8, val = 0.3, test = 0.2 }\n",
        None,
        ["data.split", "sum to 1.3", "sum to 1"],
    ),
    (
        "negative fraction",
        DATA + "split = { train = 1.2, val = -0.2, test = 0 }\n",
        None,
        ["data.split.val = -0.2", "a fraction between 0 and 1"],
    ),
    (
        "missing inputs",
        '[data]\npath = "d.jsonl"\noutputs = ["label"]\n',
        None,
        ["data.inputs is missing", "under [data]", "input column names"],
    ),
    (
        "inputs not a list",
        '[data]\npath = "d.jsonl"\ninputs = "text"\noutputs = ["label"]\n',
        None,
        ['data.inputs = "text"', "valid list"],
    ),
    ("no data section", "[engine]\nseed = 1\n", None, ["[data] section is missing"]),
    (
        "no data file",
        '[data]\ninputs = ["text"]\noutputs = ["label"]\n',
        None,
        ["no data file", 'data.path = "data.jsonl"'],
    ),
    ("path and files", DATA + 'train = "t.jsonl"\n', None, ["data.path", "data.train", "not both"]),
    (
        "train without val",
        '[data]\ntrain = "t.jsonl"\ninputs = ["a"]\noutputs = ["b"]\n',
        None,
        ["data.val is missing"],
    ),
    (
        "split column with files",
        '[data]\ntrain = "t.jsonl"\nval = "v.jsonl"\nsplit_column = "s"\ninputs = ["a"]\noutputs = ["b"]\n',
        None,
        ["data.split_column only applies with data.path"],
    ),
    (
        "split and split column",
        DATA + 'split_column = "s"\nsplit = { train = 1 }\n',
        None,
        ["data.split", "data.split_column", "not both"],
    ),
    (
        "metric path and name",
        DATA + '[metric]\npath = "m.py"\nname = "x"\n',
        None,
        ["metric.path", "metric.name", "not both"],
    ),
    (
        "negative price",
        DATA + '[models.prices."a/b"]\ninput_per_mtok = -1\noutput_per_mtok = 0\n',
        None,
        ['models.prices."a/b".input_per_mtok = -1', ">= 0"],
    ),
    (
        "price half declared",
        DATA + '[models.prices."a/b"]\ninput_per_mtok = 1\n',
        None,
        ['models.prices."a/b".output_per_mtok is missing', 'under [models.prices."a/b"]'],
    ),
    (
        "empty task model",
        DATA + '[models]\ntask = ""\n',
        None,
        ['models.task = ""', "litellm model name"],
    ),
    ("section not a table", "budget = 5\n" + DATA, None, ["budget = 5", "[budget] section"]),
    (
        "override unknown key",
        DATA,
        {"budget.max_metric_call": 20},
        [
            "override 'budget.max_metric_call': unknown key",
            "did you mean 'budget.max_metric_calls'?",
        ],
    ),
    (
        "override bad value",
        DATA,
        {"engine.concurrency": "lots"},
        ["override 'engine.concurrency'", "engine.concurrency"],
    ),
    (
        "override below a value",
        DATA,
        {"data.inputs.x": 1},
        ["override 'data.inputs.x'", "not a table"],
    ),
    (
        "override malformed key",
        DATA,
        {"engine..name": "gepa"},
        ["override 'engine..name'", "not a dotted key"],
    ),
]


@pytest.mark.parametrize(
    ("case", "text", "overrides", "needles"), REJECTED, ids=[c[0] for c in REJECTED]
)
def test_rejected(tmp_path, case, text, overrides, needles):
    write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, overrides)
    message = str(caught.value)
    for needle in needles:
        assert needle in message
    # The first line of the message is what the CLI shows; no pydantic text dump.
    assert "\n" not in message
    assert "validation error" not in message
    assert not isinstance(caught.value.__cause__, ValidationError)


def test_several_problems_are_counted(tmp_path):
    write(tmp_path, DATA + "[budget]\nmax_metric_calls = 0\nmax_minutes = -1\n")
    with pytest.raises(ConfigError, match=r"\(1 more problem after this one\)"):
        load_config(tmp_path)


def test_unknown_key_reported_before_what_it_causes(tmp_path):
    write(tmp_path, '[data]\npath = "d.jsonl"\ninput = ["text"]\noutputs = ["label"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert "unknown key 'data.input'" in str(caught.value)
    assert "missing" not in str(caught.value).split(";")[0]


def test_missing_file_names_path_and_init(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert str(tmp_path / CONFIG_FILE) in str(caught.value)
    assert "skynet init" in str(caught.value)


def test_toml_syntax_error_names_file_and_line(tmp_path):
    write(tmp_path, DATA + "[engine\nname = 'gepa'\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert f"{tmp_path / CONFIG_FILE}:5:" in str(caught.value)


def test_toml_value_error_names_line(tmp_path):
    write(tmp_path, DATA + "[engine]\nname = gepa\n")
    with pytest.raises(ConfigError, match=r"skynet\.toml:6: TOML syntax error"):
        load_config(tmp_path)


def test_project_dir_is_set_and_not_a_file_key(tmp_path):
    config = load_config(write(tmp_path, DATA))
    assert config.project_dir == tmp_path.absolute()
    assert "project_dir" not in config.as_dict()
    write(tmp_path, DATA + 'project_dir = "/elsewhere"\n')
    with pytest.raises(ConfigError, match="unknown key 'data.project_dir'"):
        load_config(tmp_path)


def test_as_dict_is_json_and_complete(tmp_path):
    config = load_config(
        write(tmp_path, DATA + '[models.prices."a/b"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n')
    )
    record = json.loads(json.dumps(config.as_dict()))
    assert record["budget"]["max_metric_calls"] == 150
    assert record["data"]["split"] == {"train": 0.5, "val": 0.3, "test": 0.2, "seed": 0}
    assert record["models"]["prices"]["a/b"] == {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    # A recorded config reads back to the same settings.
    assert config_model(record).model_validate(record).as_dict() == record


def test_config_is_frozen(tmp_path):
    config = load_config(write(tmp_path, DATA))
    with pytest.raises(ValidationError):
        config.budget.max_metric_calls = 3  # type: ignore[misc]


def test_overrides_leave_the_file_and_the_dict_alone(tmp_path):
    write(tmp_path, DATA)
    overrides = {"data.split": {"train": 0.5, "val": 0.5}}
    load_config(tmp_path, overrides)
    assert overrides == {"data.split": {"train": 0.5, "val": 0.5}}
    assert (tmp_path / CONFIG_FILE).read_text() == DATA
    assert load_config(tmp_path).data.split == config_module.SplitConfig()


@pytest.mark.parametrize(
    "model",
    [
        m
        for m in vars(config_module).values()
        if isinstance(m, type)
        and issubclass(m, BaseModel)
        and m.__module__.startswith(config_module.__name__)
    ],
    ids=lambda m: m.__name__,
)
def test_every_model_forbids_extra_keys_and_is_frozen(model):
    assert model.model_config.get("extra") == "forbid"
    assert model.model_config.get("frozen") is True


# -- models_config() ----------------------------------------------------------------------------

MODELS = (
    DATA
    + """
[models]
task = "openai/served"
reflection = "openai/gpt-4o"
metric = "openai/judge"
cache = "cache/calls.db"

[models.endpoints."openai/served"]
api_base = "http://127.0.0.1:8000/v1"
api_key_env = "SKYNET_TEST_KEY"
timeout_s = 30
max_concurrent = 2
rpm = 60

[models.prices."openai/served"]
input_per_mtok = 0.15
output_per_mtok = 0.6

[models.prices."openai/judge"]
input_per_mtok = 1
output_per_mtok = 2
"""
)


def test_models_config_builds_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("SKYNET_TEST_KEY", "sk-test")
    models = load_config(write(tmp_path, MODELS)).models_config()
    assert isinstance(models, ModelsConfig)
    assert (models.task, models.reflection, models.model_for("metric")) == (
        "openai/served",
        "openai/gpt-4o",
        "openai/judge",
    )
    served = models.settings["openai/served"]
    assert served.api_base == "http://127.0.0.1:8000/v1"
    assert served.api_key == "sk-test"
    assert (served.timeout_s, served.max_concurrent, served.rpm) == (30.0, 2, 60.0)
    assert served.price == Price(input_per_mtok=0.15, output_per_mtok=0.6)
    judge = models.settings["openai/judge"]
    assert judge.price == Price(input_per_mtok=1.0, output_per_mtok=2.0)
    assert judge.api_key is None
    assert "openai/gpt-4o" not in models.settings
    assert models.cache_path == tmp_path.absolute() / "cache" / "calls.db"


def test_models_config_missing_key_env_names_it(tmp_path, monkeypatch):
    monkeypatch.delenv("SKYNET_TEST_KEY", raising=False)
    config = load_config(write(tmp_path, MODELS))
    with pytest.raises(ConfigError) as caught:
        config.models_config()
    assert "SKYNET_TEST_KEY" in str(caught.value)
    assert 'models.endpoints."openai/served".api_key_env' in str(caught.value)


def test_models_config_default_cache_is_in_project(tmp_path):
    models = load_config(write(tmp_path, DATA)).models_config()
    assert models.cache_path == tmp_path.absolute() / ".skynet" / "cache.db"
    assert dict(models.settings) == {}


def test_models_config_empty_cache_is_memory(tmp_path):
    models = load_config(write(tmp_path, DATA + '[models]\ncache = ""\n')).models_config()
    assert models.cache_path is None


def test_models_config_embedded_model_endpoint_keeps_price_zero(tmp_path):
    text = DATA + '[models.endpoints."local/smollm2"]\ntimeout_s = 10\n'
    models = load_config(write(tmp_path, text)).models_config()
    settings = models.settings["local/smollm2"]
    assert settings.timeout_s == 10.0
    assert settings.price == Price(input_per_mtok=0, output_per_mtok=0)


@pytest.mark.parametrize("outputs", ["outputs = []\n", ""], ids=["empty", "absent"])
def test_no_outputs_is_a_reference_free_project(tmp_path, outputs):
    (tmp_path / "skynet.toml").write_text(f'[data]\npath = "d.jsonl"\ninputs = ["text"]\n{outputs}')
    assert load_config(tmp_path).data.outputs == []
