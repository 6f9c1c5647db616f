"""Identity with raw gepa (issue 13), held on gepa's own figures inside Skynet: the engine outcome
Skynet's gepa engine returns (gepa's result as Skynet sees it) is raw `optimize_anything`'s, and
the run store says the same through the RunStore API. With objective and background both set,
the prompts are gepa's builder's template, as raw gepa builds it when given the two.

Each side talks to its own loopback server (so neither is served from the other's call cache)
running the same script: a task model whose reply is a function of the instruction and the item,
and a reflection model whose reply is a function of the prompt alone. Skynet runs through its
CLI with [engine] name = "gepa" and nothing in [engine.options]; raw gepa is called as its docs
show (its reflection model by litellm name, as a user would), with an evaluator that renders the
prompt as Skynet's prompt artifact does and returns side info in the shape Skynet's engine
builds. The metric returns named scores, so gepa's default frontier ("hybrid") is part of what
must match: with frontier_type = "instance" the two paths part at the third reflection.
tests/engines/test_identity_gepa.py holds the identity on the records, for a metric without
named scores.
"""

from __future__ import annotations

import hashlib
import json
import re
import runpy
import urllib.request
from typing import Any

import pytest
from projects import CAPITAL, COUNTRIES, make_project

from engines.gepa import GepaEngine
from skynet.cli import main
from skynet.engine import EngineOutcome
from skynet.project import open_project
from skynet.runner import candidate_id
from skynet.runs import RunStore
from skynet.side_info import quoted
from skynet.testing import MODEL, ScriptedServer, is_reflection, reply

pytestmark = pytest.mark.slow

BUDGET = 60
SEED = "Tell the user about the country."
OBJECTIVE = "Answer with the capital city of the country the user names."
BACKGROUND = "The users are school children learning geography."

# -- the scripted model: replies are a function of the request alone ---------------------------


def _hint(country: str) -> str:
    return f"Know {len(country)}."


def task_text(system: str, user: str) -> str:
    """Names the capital only when the instruction holds the hint for the country's name length
    (train and val share the lengths 4, 5 and 6, so what is learnt on train shows on val); a miss
    grows longer with every hint, so the seed stays the briefest (see METRIC)."""
    country = user.removeprefix("Country: ").strip()
    if _hint(country) in system:
        return f"The capital of {country} is {CAPITAL[country]}."
    return f"{country} is a country with a long history." + " Really." * system.count("Know")


# Named scores, so that gepa's default frontier ("hybrid": per val item and per named score)
# differs from a per-item one: the seed, beaten on every item, stays on the frontier as the
# briefest, and gepa's parent selection draws from a different set of candidates.
METRIC = """
def score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    fb = "right" if named else f"name the capital: {expected['capital']}"
    brief = round(1 - len(output) / 200, 3)
    return float(named), {"feedback": fb, "scores": {"named": float(named), "brief": brief}}
"""


_FAILING = re.compile(r"### country\n(\w+)\n\n## Expected.*?## Feedback\n> name the capital", re.S)


def reflection_text(prompt: str) -> str:
    """A new instruction: the current text plus one hint. Two prompts in three get the hint of a
    failing example (the child gains on that minibatch and is accepted); the others get a length
    no country has (no gain: rejected).

    Never empty and never the parent's text: Skynet records such a reply and asks again with a
    new draw (a small model's habit), where raw gepa evaluates the parent's copy and rejects it.
    That difference is Skynet's on purpose, so the script keeps it out of this comparison.
    """
    current = re.search(r"```\n(.*?)\n```", prompt, re.S)
    assert current is not None, prompt[:300]
    failing = [m.group(1) for m in _FAILING.finditer(prompt)]
    h = hashlib.sha256(prompt.encode()).digest()[0]
    length = len(failing[h % len(failing)]) if failing and h % 3 else 7 + h % 3
    return f"```\n{current.group(1)} Know {length}.\n```"


def respond(body: dict[str, Any]) -> Any:
    messages = body["messages"]
    if is_reflection(body):
        return reply(reflection_text(messages[-1]["content"]))
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    return reply(task_text(system, messages[-1]["content"]))


def reflection_prompts(server: ScriptedServer) -> list[str]:
    return [b["messages"][-1]["content"] for b in list(server.requests) if is_reflection(b)]


# -- the two sides ------------------------------------------------------------------------------


def run_skynet(tmp_path, monkeypatch, capsys, server, *, objective, background):
    """Skynet's gepa engine with default settings, through the CLI; its outcome and what it said."""
    project = make_project(tmp_path / "skynet", server.url, budget=BUDGET, concurrency=4)
    (project / "metric.py").write_text(METRIC)
    toml = project / "skynet.toml"
    extra = "".join(
        f"{key} = {json.dumps(value)}\n"
        for key, value in (("objective", objective), ("background", background))
        if value
    )
    toml.write_text(toml.read_text().replace('name = "gepa"\n', f'name = "gepa"\n{extra}', 1))
    outcomes: list[EngineOutcome] = []
    real = GepaEngine.optimize

    def optimize(self, ctx):  # the engine as it is; its outcome is kept for the test
        outcome = real(self, ctx)
        outcomes.append(outcome)
        return outcome

    monkeypatch.setattr(GepaEngine, "optimize", optimize)
    capsys.readouterr()
    assert main(["-C", str(project), "run"]) == 0
    said = capsys.readouterr().err
    (outcome,) = outcomes
    return project, outcome, said


def _chat(url: str, messages: list[dict[str, str]]) -> str:
    """A tiny OpenAI client: the raw side's task calls."""
    request = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps({"model": "skynet-test", "messages": messages}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-loopback"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)["choices"][0]["message"]["content"]


def run_raw_gepa(server, metric, *, objective, background):
    """gepa.optimize_anything as a user calls it, on the same data, metric and scripted model."""
    from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig, optimize_anything

    items = [
        {"id": f"c{i}", "input": {"country": country}, "expected": {"capital": capital}}
        for i, (country, capital) in enumerate(COUNTRIES)
    ]
    train, val = items[0::2], items[1::2]

    def evaluator(candidate: dict[str, str], example: dict[str, Any]):
        # Skynet's prompt artifact: system = the instructions, user = the template filled.
        messages = [
            {"role": "system", "content": candidate["instructions"].strip()},
            {"role": "user", "content": f"Country: {example['input']['country']}"},
        ]
        output = _chat(server.url, messages)
        score, info = metric(example["input"], output, example["expected"])
        # The side info Skynet's engine builds (a metric with named scores, no other keys; what
        # the candidate and the metric wrote quoted, skynet.side_info.quoted).
        side = {
            "Input": example["input"],
            "Expected": example["expected"],
            "Output": quoted(output, 2000),
        }
        return score, {**side, "Feedback": quoted(info["feedback"], 2000), "scores": info["scores"]}

    # gepa's defaults but the seed and budget (the same on both sides). Skynet also sets, none of
    # which moves the trajectory: parallel/max_workers (its concurrency; gepa keeps results in
    # item order, whatever threads made them), raise_on_exception=True, capture_stdio and
    # display_progress_bar False (gepa's defaults anyway), track_best_outputs=False (what the
    # result keeps of outputs, not what gepa does), reflection_minibatch_size=3 (gepa's default
    # with a dataset), a logger (where gepa's lines go) and a stop callback that says False until
    # a money or time limit or repeated reflection failures stop the run (none here).
    result = optimize_anything(
        seed_candidate={"instructions": SEED},
        evaluator=evaluator,
        dataset=train,
        valset=val,
        objective=objective or None,
        background=background or None,
        config=GEPAConfig(
            engine=EngineConfig(max_metric_calls=BUDGET, seed=0),
            reflection=ReflectionConfig(
                reflection_lm=MODEL,
                reflection_lm_kwargs={"api_base": server.url, "api_key": "sk-loopback"},
            ),
        ),
    )
    return result, train, val


# -- identity -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "objective, background",
    [("", ""), (OBJECTIVE, BACKGROUND)],
    ids=["gepa's template", "gepa's builder from objective and background"],
)
def test_the_engine_outcome_is_raw_gepas_result(
    tmp_path, monkeypatch, capsys, objective, background
):
    from gepa.optimize_anything import (
        _build_reflection_prompt_template,
        optimize_anything_reflection_prompt_template,
    )

    with ScriptedServer(responder=respond) as ours, ScriptedServer(responder=respond) as theirs:
        project, outcome, said = run_skynet(
            tmp_path, monkeypatch, capsys, ours, objective=objective, background=background
        )
        metric = runpy.run_path(str(project / "metric.py"))["score"]
        raw, train, val = run_raw_gepa(theirs, metric, objective=objective, background=background)
        sent, raw_sent = reflection_prompts(ours), reflection_prompts(theirs)
        reflection_bodies = [b for b in ours.requests + theirs.requests if is_reflection(b)]

    # The same data on both sides.
    loaded = open_project(project)
    for split, items in ((loaded.dataset.train, train), (loaded.dataset.val, val)):
        assert [(i.id, i.input, i.expected) for i in split] == [
            (i["id"], i["input"], i["expected"]) for i in items
        ]

    # The reflection prompts: gepa's template (its builder's with objective and background),
    # filled exactly as raw optimize_anything fills it, call for call, in the same order.
    template = (
        _build_reflection_prompt_template(objective=objective, background=background)
        if objective
        else optimize_anything_reflection_prompt_template
    )
    head, rest = template.split("<curr_param>")
    middle, tail = rest.split("<side_info>")
    assert raw_sent and sent == raw_sent
    for prompt in sent:
        assert prompt.startswith(head) and middle in prompt and prompt.endswith(tail)
    if objective:
        assert OBJECTIVE in head and BACKGROUND in head
    # Neither side caps the reflection reply (raw gepa sends no max_tokens).
    assert all("max_tokens" not in body for body in reflection_bodies)

    # gepa's figures inside Skynet: the same candidates in the same order, the same parents,
    # val scores and best, and the same metric-call count, which is also the count Skynet shows.
    assert outcome.candidates == [dict(c) for c in raw.candidates]
    assert outcome.parents == [list(p) for p in raw.parents]
    assert outcome.val_scores == pytest.approx(list(raw.val_aggregate_scores))
    assert outcome.best_candidate == dict(raw.best_candidate)
    assert outcome.metric_calls == raw.total_metric_calls
    assert f"metric calls {raw.total_metric_calls}/{BUDGET}" in said

    # A path worth comparing: accepted and rejected proposals, and a val score that rose.
    assert len(raw.candidates) >= 3
    assert len(raw_sent) > len(raw.candidates) - 1
    assert max(raw.val_aggregate_scores) > raw.val_aggregate_scores[0]

    # What Skynet recorded says the same: each candidate, its parents, its val mean, the best.
    with RunStore(project / ".skynet" / "runs.db") as store:
        (run,) = store.list_runs()
        rows = {row.id: row for row in store.candidates(run.id)}
        ids = [candidate_id(dict(c), loaded.fingerprint) for c in raw.candidates]
        for index, cid in enumerate(ids):
            assert rows[cid].content == dict(raw.candidates[index])
            assert rows[cid].parents == [ids[p] for p in raw.parents[index] if p is not None]
            scores = [e.score for e in store.evaluations(run.id, candidate_id=cid, split="val")]
            assert len(scores) == len(val)
            assert sum(scores) / len(scores) == pytest.approx(raw.val_aggregate_scores[index])
        assert run.best_candidate_id == candidate_id(dict(raw.best_candidate), loaded.fingerprint)
        assert "reflection prompt: gepa's own template" in run.notes["engine_choice"]
        # One recorded reflection call per reflection raw gepa made (none redrawn).
        reflections = [c for c in store.calls(run.id) if c.role == "reflection"]
        assert len(reflections) == len(raw_sent)
        proposals = store.proposals(run.id)
        statuses = [p.status for p in proposals]
        assert statuses.count("proposed") == len(raw_sent)
        # gepa's verdict on each: accepted into the pool, or rejected on its minibatch, each
        # with the candidate it was made from.
        accepted = len(raw.candidates) - 1
        assert statuses.count("accepted") == accepted
        assert statuses.count("rejected") == len(raw_sent) - accepted
        judged = [p for p in proposals if p.status in ("accepted", "rejected")]
        assert all(p.parent_id in rows for p in judged)
        # A rejected candidate keeps its parent too: the lineage shows every proposal's origin.
        rejected = [row for cid, row in rows.items() if cid not in ids]
        assert rejected and all(row.parents and row.parents[0] in rows for row in rejected)
