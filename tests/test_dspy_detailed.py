"""The best program of a DSPy seed carries dspy.GEPA's `detailed_results` (track_stats=True), a
real DspyGEPAResult made from the run's DetailedResults: DSPy's tutorials read it off the
program (find_dominator_programs, candidates[i]) with candidates and val items named by
position, where Skynet's RunResult.detailed_results names them by id (issue 28)."""

from __future__ import annotations

import dataclasses
import itertools
import json

import dspy
import pytest
from dspy.teleprompt.gepa.gepa import DspyGEPAResult
from gepa.gepa_utils import find_dominator_programs
from test_ports import PORTS, _dspy_facility_support, _run
from test_python_api import _tables

import skynet
from skynet.artifacts.dspy_program import DspyArtifact
from skynet.runs import RunStore
from skynet.runs.dspy_detail import as_dspy_result
from skynet.testing import ScriptedServer, reply

CONTINENT = {
    "France": "Europe",
    "Japan": "Asia",
    "Peru": "South America",
    "Italy": "Europe",
    "Egypt": "Africa",
    "Kenya": "Africa",
    "Spain": "Europe",
    "Chile": "South America",
}
CAPITAL = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Peru": "Lima",
    "Italy": "Rome",
    "Egypt": "Cairo",
    "Kenya": "Nairobi",
    "Spain": "Madrid",
    "Chile": "Santiago",
}
TRAIN = ["France", "Japan", "Peru", "Italy"]  # no African country: every proposal gains here
VAL = ["Spain", "Egypt", "Chile", "Kenya"]


class Atlas(dspy.Module):
    """Two predictors, each answering its own field."""

    def __init__(self):
        super().__init__()
        self.capital = dspy.Predict("country -> capital")
        self.continent = dspy.Predict("country -> continent")

    def forward(self, country):
        return dspy.Prediction(
            capital=self.capital(country=country).capital,
            continent=self.continent(country=country).continent,
        )


def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
    capital, continent = pred.capital == gold.capital, pred.continent == gold.continent
    score = (capital + continent) / 2
    if pred_name is None:
        return score
    right = capital if pred_name == "capital" else continent
    return dspy.Prediction(score=score, feedback="right" if right else f"say {gold[pred_name]}")


def _responder():
    """The seed knows no capital and only Africa; a reflected capital instruction knows every
    capital; a reflected continent instruction knows every continent but Africa's (it says
    Asia). So on val the candidates trade off: the Pareto sets differ by item. Each reflection
    is a new text (v1, v2, ...), so each proposal is a candidate of its own."""
    versions = itertools.count(1)

    def respond(body):
        messages = body["messages"]
        text = "\n".join(m["content"] for m in messages)
        if "new_instruction" in text:  # dspy.GEPA's reflection
            field = "continent" if "continent" in text else "capital"
            better = f"Name the {field} of the country (v{next(versions)})."
            return reply(json.dumps({"new_instruction": better}))
        system, user = messages[0]["content"], messages[-1]["content"]
        country = user.split("[[ ## country ## ]]")[1].split("\n")[1].strip()
        if "[[ ## capital ## ]]" in system:
            answer = CAPITAL[country] if "Name the capital" in system else "Unknown"
            return reply(f"[[ ## capital ## ]]\n{answer}\n\n[[ ## completed ## ]]")
        africa = CONTINENT[country] == "Africa"
        if "Name the continent" in system:
            answer = "Asia" if africa else CONTINENT[country]
        else:
            answer = "Africa" if africa else "Unknown"
        return reply(f"[[ ## continent ## ]]\n{answer}\n\n[[ ## completed ## ]]")

    return respond


def _examples(countries):
    return [
        dspy.Example(country=c, capital=CAPITAL[c], continent=CONTINENT[c]).with_inputs("country")
        for c in countries
    ]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    with ScriptedServer(responder=_responder()) as server:
        result = skynet.optimize(
            Atlas(),
            metric=metric,
            train=_examples(TRAIN),
            val=_examples(VAL),
            store=tmp_path_factory.mktemp("run") / "s",
            **{**_tables(server.url, budget=60), "engine": {"name": "dspy-gepa"}},
        )
    with RunStore(result.store / "runs.db", readonly=True) as store:
        items = store.items(result.run_id)
    # The val set's order, by the country each recorded item asks about.
    by_country = {row.input["country"]: item for item, row in items.items() if row.split == "val"}
    return result, [by_country[c] for c in VAL]


def _instructions(program) -> dict[str, str]:
    return {name: p.signature.instructions for name, p in program.named_predictors()}


@pytest.mark.slow
def test_the_best_program_carries_a_dspy_gepa_result(run):
    result, _ = run
    dr = result.best.detailed_results
    assert isinstance(dr, DspyGEPAResult)
    assert len(dr.candidates) >= 3  # the seed, a capital and a continent proposal at least
    assert all(isinstance(c, dspy.Module) and type(c) is Atlas for c in dr.candidates)
    assert _instructions(dr.best_candidate) == _instructions(result.best)
    assert dr.best_idx == result.detailed_results.best_idx
    assert isinstance(dr.val_aggregate_scores[0], float)
    assert dr.parents[0] == [None]
    assert dr.discovery_eval_counts[0] == 0
    assert all(type(n) is int for n in dr.discovery_eval_counts)
    assert dr.num_full_val_evals == len(dr.candidates)
    assert dr.total_metric_calls == result.detailed_results.total_metric_calls > 0
    assert dr.seed == 0 and dr.log_dir is not None


@pytest.mark.slow
def test_its_indices_are_the_run_candidates_and_val_positions(run):
    result, val_ids = run
    dr, detail = result.best.detailed_results, result.detailed_results
    assert None not in detail.val_aggregate_scores  # every one was scored: nothing left out
    recorded = {c["id"]: c["candidate"] for c in result.candidates}
    for i, cid in enumerate(detail.candidates):
        assert _instructions(dr.candidates[i]) == recorded[cid]
        assert dr.parents[i] == ([detail.candidates.index(p) for p in detail.parents[i]] or [None])
        assert dr.val_aggregate_scores[i] == detail.val_aggregate_scores[i]
        assert dr.val_subscores[i] == {
            k: detail.val_subscores[i][item] for k, item in enumerate(val_ids)
        }
    for k, item in enumerate(val_ids):
        best = {detail.candidates.index(c) for c in detail.per_val_instance_best_candidates[item]}
        assert dr.per_val_instance_best_candidates[k] == best
        highest = detail.highest_score_achieved_per_val_task[item]
        assert dr.highest_score_achieved_per_val_task[k] == highest
        for idx, output in dr.best_outputs_valset[k]:
            assert isinstance(output, dspy.Prediction) and idx in best
            # Every item's best knows its capital: val position k is VAL[k].
            assert output.capital == CAPITAL[VAL[k]]
    # The seed: no capital, Africa's continent only (val positions 1 and 3).
    assert dr.val_subscores[0] == {0: 0.0, 1: 0.5, 2: 0.0, 3: 0.5}


def test_the_tutorials_find_dominator_programs_runs_on_it(run):
    result, _ = run
    dr = result.best.detailed_results
    dominators = find_dominator_programs(
        dr.per_val_instance_best_candidates, dr.val_aggregate_scores
    )
    assert dominators and all(0 <= i < len(dr.candidates) for i in dominators)
    fronts = set().union(*dr.per_val_instance_best_candidates.values())
    assert set(dominators) <= fronts
    # The trade-off the responder makes: the African items' best knows no continent (the seed's
    # Africa, a reflected capital), the others' best knows it, so two candidates dominate.
    instructions = [_instructions(dr.candidates[i]) for i in dominators]
    assert {"Name the continent" in i["continent"] for i in instructions} == {True, False}
    assert all("Name the capital" in i["capital"] for i in instructions)


def test_a_candidate_without_a_val_score_is_left_out_and_the_indices_renumbered(run):
    result, val_ids = run
    summary = result._summary()
    detail = result.detailed_results
    # A middle candidate with a child, its val score made unknown (incomplete).
    seed = detail.candidates[0]
    child = next(i for i, ps in enumerate(detail.parents) if ps and ps != [seed])
    gone = detail.candidates.index(detail.parents[child][0])
    assert gone > 0
    candidates = [
        dataclasses.replace(c, val_score=None) if c.id == detail.candidates[gone] else c
        for c in summary.candidates
    ]
    artifact = DspyArtifact(program=Atlas(), path=None)
    dr = as_dspy_result(
        dataclasses.replace(summary, candidates=candidates), artifact, val_order=val_ids
    )
    kept = [cid for i, cid in enumerate(detail.candidates) if i != gone]
    assert len(dr.candidates) == len(kept) == len(dr.val_aggregate_scores)
    assert None not in dr.val_aggregate_scores
    # Its child now names its parent (the one it was made from, renumbered).
    grandparent = detail.candidates.index(detail.parents[gone][0])
    assert dr.parents[kept.index(detail.candidates[child])] == [
        kept.index(detail.candidates[grandparent])
    ]
    assert all(i < len(kept) for s in dr.per_val_instance_best_candidates.values() for i in s)
    find_dominator_programs(dr.per_val_instance_best_candidates, dr.val_aggregate_scores)


@pytest.mark.slow
def test_the_facility_tutorials_bonus_draws_the_same_dag_under_skynet(tmp_path):
    """The tutorial's "Bonus: Detailed Results" (examples/ports/dspy_facility_support): under
    dspy.GEPA and under Skynet, on the same scripted models, the same Graphviz DAG: the same
    candidates, scores, lineage, best and Pareto dominators."""
    graphs = []
    with ScriptedServer(responder=_dspy_facility_support) as server:
        for script in ("tutorial.py", "skynet_port.py"):
            cwd = tmp_path / script.removesuffix(".py")
            cwd.mkdir()
            done = _run(PORTS / "dspy_facility_support" / script, cwd, server.url)
            assert done.returncode == 0, done.stderr[-3000:]
            graphs.append(done.stdout[done.stdout.index("digraph G {") :])
    assert graphs[0] == graphs[1]
    assert "fillcolor=cyan" in graphs[1] and " -> " in graphs[1]  # a best, a lineage
