"""Identity with raw gepa: with a reflection model that is not an embedded one and gepa's
defaults, Skynet's gepa engine sends the reflection prompts raw `optimize_anything` sends (gepa's
own template, filled by gepa from the same side info) and reaches the same candidates, parents,
val scores and metric-call count, on the same scripted model, seed and budget.

Settings Skynet sets differently from raw gepa, none of which moves the trajectory:
max_workers/parallel (threads; gepa keeps results in item order), track_best_outputs (what the
result keeps, not what it does), display_progress_bar, capture_stdio, the logger.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections import Counter

import pytest
from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig, optimize_anything
from projects import CAPITAL, COUNTRIES, make_project

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path
from skynet.side_info import quoted
from skynet.testing import ScriptedServer, is_reflection, reply

pytestmark = pytest.mark.slow

SEED = "Tell the user about the country."
_REV = re.compile(r"\(rev (\d+)\)")
_CURRENT = re.compile(r"```\n(.*?)\n```", re.S)


def _rev(text: str) -> int:
    found = _REV.search(text)
    return int(found.group(1)) if found else 0


def responder(body):
    """Deterministic, a function of the request: revision r of the instruction proposes r + 1;
    country i is answered right when (7 i mod 10) < 2 r, so later revisions get more right and
    some proposals gain nothing on their minibatch (and are rejected)."""
    messages = body["messages"]
    content = messages[-1]["content"]
    if is_reflection(content):
        current = _CURRENT.search(content)
        rev = _rev(current.group(1)) if current else 0
        return reply(f"```\nName the capital city of the country. (rev {rev + 1})\n```")
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    country = content.removeprefix("Country: ").strip()
    index = [c for c, _ in COUNTRIES].index(country)
    if (7 * index) % 10 < 2 * _rev(system):
        return reply(f"The capital of {country} is {CAPITAL[country]}.")
    return reply(f"{country} is a country with a long history.")


def _metric(expected, output):
    named = expected["capital"].lower() in output.lower()
    return float(named), ("right" if named else f"name the capital: {expected['capital']}")


def _chat(url: str, messages: list[dict]) -> str:
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps({"model": "skynet-test", "messages": messages}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]


def _raw_gepa(url: str, budget: int, objective: str | None):
    """Raw gepa with its defaults: the same task, metric and side info as Skynet's engine."""
    rows = [
        {"id": f"c{i}", "country": country, "capital": capital}
        for i, (country, capital) in enumerate(COUNTRIES)
    ]
    train, val = rows[0::2], rows[1::2]

    def evaluator(candidate, example):
        output = _chat(
            url,
            [
                {"role": "system", "content": candidate["instructions"].strip()},
                {"role": "user", "content": f"Country: {example['country']}"},
            ],
        )
        expected = {"capital": example["capital"]}
        score, feedback = _metric(expected, output)
        side = {
            "Input": {"country": example["country"]},
            "Expected": expected,
            # Quoted as Skynet's engine quotes them (skynet.side_info.quoted, 2000 characters).
            "Output": quoted(output, 2000),
            "Feedback": quoted(feedback, 2000),
        }
        return score, side

    return optimize_anything(
        seed_candidate={"instructions": SEED},
        evaluator=evaluator,
        dataset=train,
        valset=val,
        objective=objective,
        config=GEPAConfig(
            engine=EngineConfig(max_metric_calls=budget, max_workers=2),
            reflection=ReflectionConfig(reflection_lm=lambda prompt: _chat(url, _as_chat(prompt))),
        ),
    )


def _as_chat(prompt):
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt


def _reflection_prompts(server: ScriptedServer) -> Counter:
    return Counter(r["messages"][-1]["content"] for r in server.requests if is_reflection(r))


@pytest.mark.parametrize("objective", [None, "The reply must name the capital city."])
def test_skynet_gepa_is_raw_gepa(tmp_path, objective, capsys):
    budget = 60
    with ScriptedServer() as raw_server:
        raw_server.responder = responder
        raw = _raw_gepa(raw_server.url, budget, objective)
        raw_prompts = _reflection_prompts(raw_server)

    with ScriptedServer() as server:
        server.responder = responder
        project = make_project(tmp_path / "p", server.url, budget=budget)
        if objective:
            toml = project / "skynet.toml"
            toml.write_text(
                toml.read_text().replace("[engine]\n", f'[engine]\nobjective = "{objective}"\n')
            )
        assert main(["-C", str(project), "run"]) == 0
        prompts = _reflection_prompts(server)
    err = capsys.readouterr().err

    # The same reflection prompts: gepa's template (or its builder's), filled by gepa.
    assert prompts == raw_prompts and len(prompts) >= 3
    opening = "You are an expert optimization" if objective else "I am optimizing a parameter"
    assert all(p.startswith(opening) for p in prompts)

    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        rows = [
            (c.id, json.dumps(c.content), json.dumps(c.parents)) for c in store.candidates(run.id)
        ]
        scored = Counter(e.candidate_id for e in store.evaluations(run.id, split="val"))
        val = {  # the candidates scored on the whole val split (8 items)
            cid: mean
            for cid, mean in store.mean_scores(run.id, split="val").items()
            if scored[cid] == 8
        }
    text_of = {cid: json.loads(content)["instructions"] for cid, content, _ in rows}
    parents_of = {cid: json.loads(parents) for cid, _, parents in rows}
    # The candidates gepa kept (scored on the whole val split), in the same order, with the same
    # parents and val scores.
    kept = [cid for cid, _, _ in rows if cid in val]
    assert [text_of[c] for c in kept] == [c["instructions"] for c in raw.candidates]
    assert [val[c] for c in kept] == pytest.approx(list(raw.val_aggregate_scores))
    raw_parents = [
        [raw.candidates[p]["instructions"] for p in parents if p is not None]
        for parents in raw.parents
    ]
    assert [[text_of[p] for p in parents_of[c]] for c in kept] == raw_parents
    assert len(kept) >= 3  # the trajectory went somewhere: several accepted proposals
    # The same metric-call count: the last progress line says what gepa counted.
    calls = re.findall(r"metric calls (\d+)/", err)
    assert int(calls[-1]) == raw.total_metric_calls
