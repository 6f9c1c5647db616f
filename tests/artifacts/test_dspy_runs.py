"""A DSPy program as the artifact: its predictors' instructions are the candidate, its model calls
go through skynet (metered, cached, in the task ledger), and the best program is saved in DSPy's
own format, which loads back with dspy alone."""

from __future__ import annotations

import json
import textwrap

import dspy
import pytest
from projects import write_skynet_toml

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import reply

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


def responder(body):
    messages = body["messages"]
    better = "Name the capital city of the country."
    if any("new_instruction" in m["content"] for m in messages):  # dspy.GEPA's reflection
        return reply(json.dumps({"new_instruction": better}))  # its proposer reads JSON
    if "[[ ## country ## ]]" not in messages[-1]["content"]:  # skynet's gepa reflection
        return reply(f"```\n{better}\n```")
    system = messages[0]["content"]
    country = messages[-1]["content"].split("[[ ## country ## ]]")[1].split("\n")[1].strip()
    answer = CAPITAL[country] if "capital city" in system else "Unknown"
    return reply(f"[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]")


def make_dspy_project(root, server_url):
    root.mkdir()
    with open(root / "data.jsonl", "w") as f:
        for i, (country, capital) in enumerate(CAPITAL.items()):
            row = {
                "id": f"d{i}",
                "country": country,
                "answer": capital,
                "split": "val" if i % 2 else "train",
            }
            f.write(json.dumps(row) + "\n")
    (root / "program.py").write_text("import dspy\n\nprogram = dspy.Predict('country -> answer')\n")
    (root / "metric.py").write_text(
        textwrap.dedent(
            """
        import skynet

        def score(input, output, expected=None):
            right = output == expected["answer"]
            calls = skynet.observation().model_calls
            return float(right), {"feedback": "right" if right else f"say {expected['answer']}",
                                  "scores": {"model_calls": float(calls)}}
        """
        )
    )
    write_skynet_toml(
        root,
        inputs=["country"],
        outputs=["answer"],
        artifact={"kind": "dspy"},
        engine={"name": "gepa"},
        budget=20,
        url=server_url,
        prices=(1.0, 1.0),
    )
    return root


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["gepa", "gepa-async"])
def test_a_dspy_program_is_optimized_metered_and_saved_in_dspys_format(
    tmp_path, scripted_server, engine
):
    scripted_server.responder = responder
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "run", "--engine", engine]) == 0
    saved = next((project / ".skynet" / "runs").glob("*/best_program.json"))
    loaded = dspy.Predict("country -> answer")
    loaded.load(str(saved))  # dspy alone reads it back
    assert "capital city" in loaded.signature.instructions
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        best, seed = run.best_candidate_id, run.seed_candidate_id
        val = store.mean_scores(run.id, split="val")
        first = store.evaluations(run.id)[0].observation or {}
        metered = (first.get("model_calls"), first.get("cost_usd"))
    assert val[seed] == 0.0 and val[best] == 1.0
    assert metered[0] == 1 and metered[1] > 0  # DSPy's call went through the meter, priced


@pytest.mark.slow
def test_dspy_gepa_engine_scores_each_output_once(tmp_path, scripted_server, capsys):
    scripted_server.responder = responder
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    counter = project / "calls.txt"
    (project / "metric.py").write_text(
        textwrap.dedent(
            f"""
        import skynet

        def score(input, output, expected=None):
            calls = skynet.observation().model_calls
            if calls:  # an output the program made (the self-test's outputs have no calls)
                with open({str(counter)!r}, "a") as f:
                    f.write(f"{{input['country']}}|{{output}}\\n")
            right = output == expected["answer"]
            return float(right), {{"feedback": "right" if right else f"say {{expected['answer']}}",
                                   "scores": {{"model_calls": float(calls)}}}}
        """
        )
    )
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text().replace('name = "gepa"', 'name = "auto"'))
    counter.write_text("")
    assert main(["-C", str(project), "check"]) == 0
    checked = capsys.readouterr().out
    assert "program ok: " in checked and "prompt ok" not in checked
    assert "engine ok · auto: engine dspy-gepa" in checked and "merge on" in checked
    assert counter.read_text() == ""  # the self-test scored no program output
    assert main(["-C", str(project), "run"]) == 0
    scored = counter.read_text().splitlines()
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        engine, best, seed = run.engine, run.best_candidate_id, run.seed_candidate_id
        note = json.dumps(run.notes)
        val = store.mean_scores(run.id, split="val")
        evaluations = store.evaluations(run.id)
        metered = min(
            (
                (e.observation or {}).get("model_calls")
                for e in evaluations
                if (e.observation or {}).get("model_calls") is not None
            ),
            default=None,
        )
        rows = len(evaluations)
    # dspy.GEPA asks for each output's score, then again for its feedback: the metric ran once
    # per recorded evaluation, not twice.
    assert scored and len(scored) == rows
    assert engine == "dspy-gepa" and "dspy-gepa" in note
    assert "frontier hybrid" in note  # the metric's named scores are dspy.GEPA objectives
    assert val[seed] == 0.0 and val[best] == 1.0
    assert metered == 1  # each scored output carries the Observation of the program call
    saved = next((project / ".skynet" / "runs").glob("*/best_program.json"))
    loaded = dspy.Predict("country -> answer")
    loaded.load(str(saved))
    assert "capital city" in loaded.signature.instructions


@pytest.mark.slow
def test_a_prompt_runs_under_dspy_gepa_as_a_predict(tmp_path, scripted_server):
    def respond(body):
        messages = body["messages"]
        if any("new_instruction" in m["content"] for m in messages):
            return reply(json.dumps({"new_instruction": "Name the capital city of the country."}))
        request = messages[-1]["content"].split("[[ ## request ## ]]")[1].split("\n")[1].strip()
        country = request.removeprefix("Country: ")
        answer = CAPITAL[country] if "capital city" in messages[0]["content"] else "Unknown"
        return reply(f"[[ ## output ## ]]\n{answer}\n\n[[ ## completed ## ]]")

    scripted_server.responder = respond
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    (project / "prompt.md").write_text(
        "=== instructions ===\nTell the user about the country.\n=== user ===\nCountry: {country}\n"
    )
    toml = project / "skynet.toml"
    toml.write_text(
        toml.read_text()
        .replace('kind = "dspy"', 'kind = "prompt"')
        .replace('name = "gepa"', 'name = "dspy-gepa"')
    )
    assert main(["-C", str(project), "run"]) == 0
    best = next((project / ".skynet" / "runs").glob("*/best_prompt.md")).read_text()
    assert "=== instructions ===\nName the capital city of the country." in best
    assert "Country: {country}" in best  # the user template is the prompt's own
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        engine = run.engine
        val = list(store.mean_scores(run.id, split="val").values())
    assert engine == "dspy-gepa" and sorted(val) == [0.0, 1.0]


@pytest.mark.slow
def test_a_dollar_budget_stops_dspy_gepa_within_one_proposal(tmp_path, scripted_server):
    def priced(body):
        step = responder(body)
        return reply(step.text, prompt_tokens=1000, completion_tokens=0)

    scripted_server.responder = priced
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    toml = project / "skynet.toml"
    toml.write_text(
        toml.read_text()
        .replace('name = "gepa"', 'name = "dspy-gepa"')
        .replace("max_metric_calls = 20", "max_metric_calls = 400")
    )
    # $1 per million tokens, 1,000 tokens a call: $0.001 a call.
    assert main(["-C", str(project), "run", "--max-cost-usd", "0.012"]) == 0
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        spent = sum(c.cost_usd or 0.0 for c in store.calls(run.id) if not c.cached)
        evaluations = len(store.evaluations(run.id))
    assert evaluations < 400
    one_proposal = 0.001 * (1 + 3 + 3 + 4)  # reflection, parent and child minibatches, val
    # Input is reserved at its byte bound, so the run may stop before the limit is reached.
    assert 0.002 < spent <= 0.012 + one_proposal + 1e-9, spent


@pytest.mark.slow
def test_eval_accepts_a_saved_program(tmp_path, scripted_server, capsys):
    scripted_server.responder = responder
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "run"]) == 0
    saved = next((project / ".skynet" / "runs").glob("*/best_program.json"))
    capsys.readouterr()
    assert main(["-C", str(project), "eval", "--candidate", str(saved), "--split", "val"]) == 0
    assert "mean score 1.000 over 4 item(s)" in capsys.readouterr().out
    assert main(["-C", str(project), "show"]) == 0
    assert "best" in capsys.readouterr().out


@pytest.mark.slow
def test_repeat_draws_a_dspy_programs_calls_afresh(tmp_path, scripted_server):
    # With repeat = 3 each run of the program is its own draw: three task requests per item, not
    # one request served twice more from the call cache.
    scripted_server.responder = responder
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    with open(project / "skynet.toml") as f:
        text = f.read()
    (project / "skynet.toml").write_text(text.replace('kind = "dspy"', 'kind = "dspy"\nrepeat = 3'))
    assert main(["-C", str(project), "run"]) == 0
    other = project / "other.json"  # a program no run has seen: every call is new
    dspy.Predict(dspy.Signature("country -> answer", "Be brief.")).save(str(other))
    scripted_server.requests.clear()
    assert main(["-C", str(project), "eval", "--candidate", str(other), "--split", "val"]) == 0
    task_requests = [
        r for r in scripted_server.requests if "[[ ## country ## ]]" in r["messages"][-1]["content"]
    ]
    assert len(task_requests) == 3 * 4  # 4 val items, 3 runs each
