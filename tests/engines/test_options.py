"""[engine.options] and [engine] reflection_template: the engines' own options by their own names,
checked against the installed gepa and dspy, and the reflection prompt chosen by model."""

from __future__ import annotations

from pathlib import Path

import pytest
from gepa.strategies.proposal_sampling import (
    IndependentSampling,
    PxNSampling,
    SameParentSampling,
    SingleMutationSampling,
)
from gepa.strategies.proposal_selection import AllImprovements, BestImprovement, TopKImprovements
from projects import make_project, task_responder

from engines.gepa import choose_template
from engines.options import dspy_gepa_options, gepa_options, options_table
from skynet.cli import main
from skynet.errors import ConfigError
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import is_reflection

DOCS = Path(__file__).resolve().parents[2] / "docs" / "engines.md"


def test_the_docs_table_is_the_installed_libraries_options():
    docs = DOCS.read_text(encoding="utf-8")
    start = docs.index("<!-- options table: python -m engines.options -->\n")
    table = docs[start:].split("\n", 1)[1].split("<!-- end options table -->")[0]
    assert table == options_table()


@pytest.mark.parametrize(
    ("form", "kind", "sizes"),
    [
        ("single", SingleMutationSampling, {}),
        ("same-parent:4", SameParentSampling, {"n": 4}),
        ("independent:3", IndependentSampling, {"n": 3}),
        ("PxN:2, 3", PxNSampling, {"p": 2, "n": 3}),
    ],
)
def test_sampling_strategies_take_a_short_string_form(form, kind, sizes):
    strategy = gepa_options({"sampling_strategy": form}).engine["sampling_strategy"]
    assert type(strategy) is kind
    assert {k: getattr(strategy, k) for k in sizes} == sizes


@pytest.mark.parametrize(
    ("form", "kind"),
    [("all", AllImprovements), ("best", BestImprovement), ("top-k:2", TopKImprovements)],
)
def test_selection_strategies_take_a_short_string_form(form, kind):
    assert type(gepa_options({"selection_strategy": form}).engine["selection_strategy"]) is kind


def test_options_land_in_their_gepa_config_sections():
    options = gepa_options(
        {
            "skip_perfect_score": True,
            "perfect_score": 1,
            "frontier_type": "instance",
            "max_candidate_proposals": 4,
            "merge_val_overlap_floor": 2,
        }
    )
    assert options.reflection == {"skip_perfect_score": True, "perfect_score": 1}
    assert options.engine == {"frontier_type": "instance", "max_candidate_proposals": 4}
    assert options.merge == {"merge_val_overlap_floor": 2}  # a MergeConfig field turns merge on
    assert gepa_options({"merge": True}).merge == {}
    assert gepa_options({}).merge is None  # gepa's default: no merge


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"skip_perfect_scor": True},
            "skip_perfect_scor is not an option of gepa; nearest: skip_perfect_score, "
            "perfect_score",
        ),
        ({"seed": 3}, "seed is set by Skynet; use [engine] seed instead"),
        ({"max_workers": 3}, "max_workers is set by Skynet; use [engine] concurrency instead"),
        ({"frontier_type": "hybird"}, "frontier_type = 'hybird': gepa takes \"instance\""),
        ({"max_merge_invocations": True}, "max_merge_invocations = True: gepa takes an integer"),
        ({"skip_perfect_score": "yes"}, "skip_perfect_score = 'yes': gepa takes true or false"),
        ({"sampling_strategy": "independent:0"}, "the numbers must be integers >= 1"),
        ({"sampling_strategy": "many"}, "sampling_strategy = 'many' is not a known form"),
        ({"selection_strategy": 3}, "selection_strategy = 3 is not a string"),
        ({"custom_candidate_proposer": "f"}, "takes a Python object in gepa"),
        ({"max_refinements": 2}, "gepa's refiner is not supported"),
        ({"refiner": True}, "gepa's refiner is not supported"),
        ({"merge": False, "max_merge_invocations": 2}, "merge = false with max_merge_invocations"),
    ],
)
def test_a_bad_gepa_option_is_one_line_naming_it(options, said):
    with pytest.raises(ConfigError) as caught:
        gepa_options(options)
    message = str(caught.value)
    assert message.startswith("[engine.options] ") and said in message and "\n" not in message


def test_dspy_gepa_options_are_dspy_gepas_arguments():
    options = dspy_gepa_options(
        {
            "use_merge": False,
            "candidate_selection_strategy": "current_best",
            "gepa_kwargs": {"frontier_type": "hybrid", "sampling_strategy": "independent:2"},
        }
    )
    assert options["use_merge"] is False
    assert options["gepa_kwargs"]["frontier_type"] == "hybrid"
    assert type(options["gepa_kwargs"]["sampling_strategy"]) is IndependentSampling


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"use_merg": True}, "use_merg is not an option of dspy.GEPA; nearest: use_merge"),
        ({"num_threads": 4}, "num_threads is set by Skynet; use [engine] concurrency instead"),
        ({"candidate_selection_strategy": "epsilon_greedy"}, '"pareto", "current_best"'),
        ({"gepa_kwargs": 3}, "gepa_kwargs = 3 is not a table"),
        ({"gepa_kwargs": {"use_merge": True}}, "set use_merge directly"),
        ({"gepa_kwargs": {"frontier": "x"}}, "not an argument of gepa.optimize; nearest: frontier"),
        ({"gepa_kwargs": {"seed": 2}}, "gepa_kwargs.seed is set by Skynet"),
    ],
)
def test_a_bad_dspy_gepa_option_is_one_line_naming_it(options, said):
    with pytest.raises(ConfigError) as caught:
        dspy_gepa_options(options)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_the_template_is_chosen_by_reflection_model(tmp_path):
    assert choose_template("", "local/smollm2").name == "small"
    assert choose_template("", "local/smollm2").max_tokens == 512
    gepa = choose_template("", "openai/gpt-4o-mini")
    assert (gepa.name, gepa.text, gepa.max_tokens) == ("gepa", None, None)
    assert "the reflection model is openai/gpt-4o-mini" in gepa.reason
    assert (
        "built from [engine] objective" in choose_template("", "x/y", objective="be right").reason
    )
    assert choose_template("gepa", "local/smollm2").name == "gepa"
    small = choose_template("small", "openai/gpt-4o-mini", kind="code")
    assert small.text is not None and small.text.startswith("You improve a Python program")
    template = tmp_path / "t.txt"
    template.write_text("Improve:\n<curr_param>\nGiven:\n<side_info>\n")
    assert choose_template(str(template), "x/y").text == template.read_text()


@pytest.mark.parametrize(
    ("text", "objective", "said"),
    [
        (None, "", "cannot read the template (No such file or directory)"),
        ("only <curr_param>", "", "the template lacks <side_info>"),
        ("<curr_param> <side_info>", "be right", "gepa takes a template or those, not both"),
    ],
)
def test_a_bad_template_file_is_one_line(tmp_path, text, objective, said):
    path = tmp_path / "t.txt"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        choose_template(str(path), "x/y", objective=objective)
    assert said in str(caught.value) and str(path) in str(caught.value)


def _notes(project: Path) -> dict:
    with RunStore(runs_db_path(project), readonly=True) as store:
        return store.list_runs()[-1].notes  # the first recorded


@pytest.mark.slow
def test_an_option_set_with_set_reaches_gepa(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=200)
    args = ["-C", str(project), "run", "--set", "engine.options.max_candidate_proposals=1"]
    assert main(args) == 0
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        proposed = sum(1 for p in store.proposals(run.id) if p.status == "proposed")
    assert proposed == 1  # gepa stopped after one proposal, well inside the budget
    assert "gepa options: max_candidate_proposals = 1" in _notes(project)["engine_choice"]
    assert "max_candidate_proposals = 1" in capsys.readouterr().err


def test_an_unknown_option_exits_2_before_anything_is_spent(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "run", "--set", "engine.options.skip_perfect_scor=1"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "skynet: error: [engine.options] skip_perfect_scor is not an option of gepa; "
        "nearest: skip_perfect_score, perfect_score"
    ]
    assert scripted_server.request_count == 0
    assert main(["-C", str(project), "check", "--set", "engine.options.skip_perfect_scor=1"]) == 2


@pytest.mark.slow
def test_the_small_template_and_a_template_file_reach_the_reflection_model(
    tmp_path, scripted_server
):
    prompts: list[str] = []

    def respond(body):
        content = body["messages"][-1]["content"]
        if is_reflection(body) or content.startswith("MINE"):
            prompts.append(content)
        return (
            task_responder(body)
            if not content.startswith("MINE")
            else task_responder(
                {"messages": [{"role": "user", "content": "You improve an instruction given"}]}
            )
        )

    scripted_server.responder = respond
    project = make_project(tmp_path / "p", scripted_server.url, budget=30)
    assert main(["-C", str(project), "run", "--set", "engine.reflection_template=small"]) == 0
    assert prompts and prompts[0].startswith("You improve an instruction given to an AI")
    assert "Skynet's short template (set in the config)" in _notes(project)["engine_choice"]

    (project / "mine.txt").write_text("MINE\n```\n<curr_param>\n```\n<side_info>\n")
    prompts.clear()
    (project / ".skynet").rename(project / "old.skynet")
    assert main(["-C", str(project), "run", "--set", "engine.reflection_template=mine.txt"]) == 0
    assert prompts[0].startswith("MINE\n```\nTell the user about the country.\n```\n# Example 1")
