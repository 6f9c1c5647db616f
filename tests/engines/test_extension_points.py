"""gepa's and dspy.GEPA's extension points, reached from Python (issue 28): a component selector
and a proposer given as callables go to the library as they are; the reflection model's
temperature and reply cap reach the server (and its cache key); [engine] reflection_shows keeps
only what it names of each example; a reflection model given as a callable is used as gepa uses
one, and the report says its calls were not measured (never $0). From skynet.toml, an option
that only takes a Python object is one ConfigError line.

All on the loopback model server, with real runs recorded in SQLite.
"""

from __future__ import annotations

import json

import pytest
from projects import BETTER, COUNTRIES, make_project, task_responder

import skynet
from skynet.cli import main
from skynet.engine import EngineSettings
from skynet.errors import ConfigError
from skynet.runs import RunStore
from skynet.runs.report import render_text, summarize, summary_json
from skynet.testing import is_reflection, reply

ROWS = [
    {"id": f"c{i}", "country": country, "capital": capital}
    for i, (country, capital) in enumerate(COUNTRIES)
]
TRAIN, VAL = ROWS[0::2], ROWS[1::2]
SEED = "Tell the user about the country."
MODEL = "openai/skynet-test"


def score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    fb = "right" if named else "the reply does not name the city"
    return float(named), {"feedback": fb}


def _run(url, seed=SEED, *, models=None, engine=None, budget=40, store=".skynet"):
    """skynet.optimize on the capitals rows, the task and reflection on the loopback server."""
    return skynet.optimize(
        seed,
        metric=score,
        train=TRAIN,
        val=VAL,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        models={
            "task": MODEL,
            "reflection": MODEL,
            "endpoints": {MODEL: {"api_base": url, "timeout_s": 10}},
            "prices": {MODEL: {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
            **(models or {}),
        },
        engine={"name": "gepa", "concurrency": 2, **(engine or {})},
        budget={"max_metric_calls": budget},
        store=store,
    )


def _reflections(server) -> list[dict]:
    return [r for r in server.requests if is_reflection(r)]


def _proposals(result) -> list:
    with RunStore(result.store / "runs.db", readonly=True) as store:
        return store.proposals(result.run_id)


# -- callables in [engine.options], given from Python ----------------------------------------


def test_a_component_selector_callable_is_called_and_its_choice_honoured(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    asked = []

    def pick_format(state, trajectories, subsample_scores, candidate_idx, candidate):
        asked.append(sorted(candidate))
        return ["format"]  # round_robin would start with "instructions"

    seed = {"instructions": SEED, "format": "Reply in one sentence."}
    result = _run(scripted_server.url, seed, engine={"options": {"module_selector": pick_format}})
    assert asked and asked[0] == ["format", "instructions"]
    # Only "format" was ever rewritten: every candidate keeps the seed's instructions.
    assert {c["candidate"]["instructions"] for c in result.candidates} == {SEED}
    assert result.best_candidate == {"instructions": SEED, "format": BETTER}
    # The reflection model was shown the chosen component's text, never the other's.
    prompts = [r["messages"][-1]["content"] for r in _reflections(scripted_server)]
    assert prompts and all("Reply in one sentence." in p or BETTER in p for p in prompts)
    assert not any(SEED in p.split("```")[1] for p in prompts)


def test_a_custom_candidate_proposers_text_becomes_a_candidate(
    tmp_path, scripted_server, monkeypatch, capsys
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    seen = []

    def propose(candidate, reflective_dataset, components_to_update):
        seen.append((dict(candidate), reflective_dataset, list(components_to_update)))
        return {name: BETTER for name in components_to_update}

    result = _run(scripted_server.url, engine={"options": {"custom_candidate_proposer": propose}})
    assert result.best == BETTER and result.best_score == 1.0
    candidate, dataset, components = seen[0]
    assert candidate == {"instructions": SEED} and components == ["instructions"]
    first = dataset["instructions"][0]
    assert {"Input", "Expected", "Output", "Feedback"} <= set(first)  # gepa's side info, as raw
    assert not _reflections(scripted_server)  # gepa called the proposer, not the model
    assert ("proposed", BETTER) in [(p.status, p.text) for p in _proposals(result)]
    report = result.report()
    assert "Proposals written by your callable <python callable: " in report
    assert "propose>" in report and "not measured" in report
    # `show` says it too: the run's recorded config names the callable.
    capsys.readouterr()
    assert main(["-C", str(tmp_path), "show", result.run_id]) == 0
    assert "Proposals written by your callable" in capsys.readouterr().out


def test_dspy_gepa_takes_an_instruction_proposer_and_a_component_selector(
    tmp_path, scripted_server, monkeypatch
):
    import dspy

    scripted_server.responder = _dspy_task
    monkeypatch.chdir(tmp_path)
    picked, proposed = [], []

    def pick(state, trajectories, subsample_scores, candidate_idx, candidate):
        picked.append(sorted(candidate))
        return list(candidate)

    def propose(candidate, reflective_dataset, components_to_update):
        proposed.append(list(components_to_update))
        return {name: BETTER for name in components_to_update}

    examples = [
        dspy.Example(country=country, capital=capital).with_inputs("country")
        for country, capital in COUNTRIES
    ]
    result = skynet.optimize(
        dspy.Predict("country -> capital"),
        metric=score,
        train=examples[0::2],
        val=examples[1::2],
        models={
            "task": MODEL,
            "reflection": MODEL,
            "endpoints": {MODEL: {"api_base": scripted_server.url, "timeout_s": 10}},
        },
        engine={
            "name": "dspy-gepa",
            "concurrency": 2,
            "options": {"instruction_proposer": propose, "component_selector": pick},
        },
        budget={"max_metric_calls": 30},
    )
    assert picked and proposed and proposed[0] == ["self"]
    assert result.best.signature.instructions == BETTER
    assert not [r for r in scripted_server.requests if _is_dspy_reflection(r)]
    assert "Proposals written by your callable" in result.report()


def _is_dspy_reflection(body) -> bool:
    return any("new_instruction" in m["content"] for m in body["messages"])


def _dspy_task(body):
    """dspy's chat format: names the capital when the instruction asks for the capital city."""
    messages = body["messages"]
    if _is_dspy_reflection(body):
        return reply(json.dumps({"new_instruction": BETTER}))
    country = messages[-1]["content"].split("[[ ## country ## ]]")[1].split("\n")[1].strip()
    capital = dict(COUNTRIES)[country] if "capital city" in messages[0]["content"] else "?"
    return reply(f"[[ ## capital ## ]]\n{capital}\n\n[[ ## completed ## ]]")


# -- the reflection model's kwargs ------------------------------------------------------------


@pytest.mark.slow
def test_reflection_temperature_and_max_tokens_reach_the_server_and_the_cache_key(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    _run(scripted_server.url, budget=20)
    default = _reflections(scripted_server)
    assert default and default[0]["temperature"] == 0.0 and "max_tokens" not in default[0]

    scripted_server.requests.clear()
    _run(
        scripted_server.url,
        models={"reflection_temperature": 0.7, "reflection_max_tokens": 300},
        budget=20,
    )
    sent = _reflections(scripted_server)
    assert sent and all(r["temperature"] == 0.7 and r["max_tokens"] == 300 for r in sent)
    # The same prompts as the first run's: its task calls came from the cache it filled, its
    # reflection calls did not (their kwargs are in the call's cache key).
    assert not [r for r in scripted_server.requests if not is_reflection(r)]


def test_a_bad_reflection_temperature_is_one_config_error(tmp_path, scripted_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        _run(scripted_server.url, models={"reflection_temperature": 5})
    assert "models.reflection_temperature = 5" in str(caught.value)
    assert "\n" not in str(caught.value) and scripted_server.request_count == 0


# -- what the reflection model is shown -------------------------------------------------------


def test_reflection_shows_drops_expected_from_the_reflection_prompt(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    _run(scripted_server.url, budget=20)
    default = [r["messages"][-1]["content"] for r in _reflections(scripted_server)]
    assert default and all("Expected" in p and "Paris" in p for p in default if "France" in p)

    scripted_server.requests.clear()
    result = _run(
        scripted_server.url,
        engine={"reflection_shows": ["inputs", "output", "feedback"]},
        budget=20,
    )
    prompts = [r["messages"][-1]["content"] for r in _reflections(scripted_server)]
    assert prompts and result.best == BETTER
    for prompt in prompts:
        assert "Expected" not in prompt
        assert "Input" in prompt and "Output" in prompt and "Feedback" in prompt
        assert not any(capital in prompt for _, capital in COUNTRIES)  # the answers stay hidden


def test_a_bad_reflection_shows_entry_is_one_config_error(tmp_path, scripted_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        _run(scripted_server.url, engine={"reflection_shows": ["inputs", "answer"]})
    assert "engine.reflection_shows[1]" in str(caught.value) and "\n" not in str(caught.value)


# -- the reflection model as a callable -------------------------------------------------------


def test_a_callable_reflection_model_is_used_and_reported_unmeasured(
    tmp_path, scripted_server, monkeypatch, capsys
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    prompts = []

    def my_reflection(prompt):
        prompts.append(prompt)
        return f"```\n{BETTER}\n```"

    result = _run(scripted_server.url, models={"reflection": my_reflection})
    assert result.best == BETTER
    # Called as gepa calls its reflection_lm: gepa's own prompt, a str, once per proposal.
    assert prompts and all(isinstance(p, str) and is_reflection(p) for p in prompts)
    assert not _reflections(scripted_server)  # none reached Skynet's models

    with RunStore(result.store / "runs.db", readonly=True) as store:
        s = summarize(store, result.run_id)
    reflection = s.cost["reflection"]
    assert reflection.calls == len(prompts) and reflection.unmeasured_calls == len(prompts)
    assert summary_json(s)["cost"]["reflection"]["cost_usd"] is None  # unknown, never 0
    text = render_text(s)
    row = next(line for line in text.splitlines() if line.strip().startswith("reflection "))
    assert "not measured (your callable)" in row and "$0.0000" not in row
    assert "Reflection made by your callable <python callable: " in text
    assert "my_reflection>" in text
    assert "program's or the metric's own dspy.LM" not in text  # the line is the callable's
    capsys.readouterr()
    assert main(["-C", str(tmp_path), "show", result.run_id]) == 0
    assert "not measured (your callable)" in capsys.readouterr().out


def test_dspy_gepa_refuses_a_callable_reflection_model_and_reflection_shows():
    from engines.dspy_gepa import DspyGepaEngine

    engine = DspyGepaEngine()
    cases = [
        (EngineSettings(reflection_lm=lambda prompt: ""), "instruction_proposer"),
        (EngineSettings(reflection_shows=("inputs",)), "applies to the gepa engine"),
    ]
    for settings, said in cases:
        with pytest.raises(ConfigError) as caught:
            engine.choices(settings)
        assert said in str(caught.value) and "\n" not in str(caught.value)


# -- skynet.toml ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "said"),
    [
        (
            '[engine.options]\ncustom_candidate_proposer = "my_module.propose"\n',
            '"options": {"custom_candidate_proposer": your_object}',
        ),
        (
            '[engine.options]\nmodule_selector = "my_module.pick"\n',
            'gepa takes "round_robin", "all" or (from Python) a Python object',
        ),
    ],
)
def test_a_callable_only_key_in_skynet_toml_is_one_config_error_line(
    tmp_path, scripted_server, capsys, table, said
):
    project = make_project(tmp_path / "p", scripted_server.url)
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text() + table)
    assert main(["-C", str(project), "run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err
    assert scripted_server.request_count == 0


def test_a_resume_asks_for_a_recorded_callable_again(tmp_path, scripted_server, monkeypatch):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    result = _run(
        scripted_server.url,
        engine={"options": {"custom_candidate_proposer": lambda c, d, names: dict(c)}},
        budget=20,
    )
    with pytest.raises(ConfigError) as caught:
        skynet.optimize(
            SEED,
            metric=score,
            train=TRAIN,
            val=VAL,
            inputs=["country"],
            outputs=["capital"],
            user="Country: {country}",
            resume=result.run_id,
        )
    said = str(caught.value)
    assert "custom_candidate_proposer" in said and "give it again from Python" in said


def test_reflection_kwargs_with_a_reflection_callable_are_one_config_error():
    from engines.gepa import GepaEngine

    settings = EngineSettings(reflection_lm=lambda prompt: "", reflection_temperature=0.5)
    with pytest.raises(ConfigError) as caught:
        GepaEngine().choices(settings)
    assert "reflection_temperature" in str(caught.value) and "\n" not in str(caught.value)
