"""Tool-calling runs: each item's tools in the request, the reply unparsed to the xlam-tool-call
scorer as the run's metric; the embedded model's hermes-style tool calls; `skynet selftest`."""

from __future__ import annotations

import json

import pytest
from projects import write_skynet_toml

from skynet.cli import main
from skynet.models.local import parse_tool_calls, with_tools
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import is_reflection, reply

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "city": {"type": "str", "description": "the city"},
        "units": {"type": "str, optional", "description": "c or f", "default": "c"},
    },
}
CITIES = ["Paris", "Lima", "Oslo", "Rome", "Cairo", "Tokyo", "Quito", "Accra"]


def xlam_rows():
    for i, city in enumerate(CITIES):
        yield {
            "id": f"w{i}",
            "query": f"What's the weather in {city}?",
            "tools": json.dumps([WEATHER]),
            "answers": json.dumps([{"name": "get_weather", "arguments": {"city": city}}]),
            "split": "val" if i % 2 else "train",
        }


def make_tool_project(root, server_url):
    root.mkdir()
    with open(root / "data.jsonl", "w") as f:
        for row in xlam_rows():
            f.write(json.dumps(row) + "\n")
    (root / "prompt.md").write_text("=== system ===\nBe helpful.\n=== user ===\n{query}\n")
    write_skynet_toml(
        root,
        inputs=["query", "tools"],
        outputs=["answers"],
        artifact={"kind": "prompt", "tools": "row"},
        metric={"name": "xlam-tool-call"},
        engine={"name": "gepa", "concurrency": 2},
        budget=20,
        url=server_url,
    )
    return root


def responder(body):
    messages = body["messages"]
    if is_reflection(body):
        return reply("```\nAlways answer by calling the right tool.\n```")
    assert body["tools"][0]["function"]["name"] == "get_weather"  # the row's tools were sent
    system = messages[0]["content"]
    city = messages[-1]["content"].split(" in ")[1].rstrip("?")
    if "tool" in system:
        return reply("", tool_calls=[("get_weather", json.dumps({"city": city}))])
    return reply(f"I think it is sunny in {city}.")


@pytest.mark.parametrize("engine", ["gepa", "gepa-async"])  # gepa-async: Auto's for a prompt
def test_a_tool_calling_prompt_is_optimized_with_the_xlam_scorer(
    tmp_path, scripted_server, capsys, engine
):
    scripted_server.responder = responder
    project = make_tool_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "check"]) == 0
    assert "self-test passed" in capsys.readouterr().out
    assert main(["-C", str(project), "run", "--engine", engine]) == 0
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        best, seed = run.best_candidate_id, run.seed_candidate_id
        rows = [
            (e.candidate_id, e.score, e.feedback, json.dumps(e.output))
            for e in store.evaluations(run.id, split="val")
        ]
    seed_rows = [r for r in rows if r[0] == seed]
    best_rows = [r for r in rows if r[0] == best]
    assert best != seed
    assert all(r[1] == 0.0 and r[2].startswith("no-call") for r in seed_rows)
    assert all(r[1] == 1.0 and r[2].startswith("match") for r in best_rows)
    assert json.loads(best_rows[0][3])["calls"][0]["name"] == "get_weather"
    # Every task request with tools says tool_choice (llama.cpp's server calls none without it).
    task = [r for r in scripted_server.requests if not is_reflection(r)]
    assert task and all(r["tool_choice"] == "auto" for r in task)


@pytest.mark.parametrize(
    ("setting", "sent"),
    [
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_tool_choice_is_sent_as_configured(tmp_path, scripted_server, setting, sent):
    scripted_server.responder = responder
    project = make_tool_project(tmp_path / "p", scripted_server.url)
    args = ["-C", str(project), "eval", "--candidate", "seed", "--split", "val"]
    assert main([*args, "--set", f"artifact.tool_choice={setting}"]) == 0
    task = [r for r in scripted_server.requests if not is_reflection(r)]
    assert task and all(r["tool_choice"] == sent for r in task)


def test_a_bad_tool_choice_is_refused_at_load(tmp_path, scripted_server, capsys):
    project = make_tool_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "check", "--set", "artifact.tool_choice=any thing"]) == 2
    err = capsys.readouterr().err
    assert "artifact.tool_choice" in err and len(err.strip().splitlines()) == 1
    assert scripted_server.request_count == 0


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ("no tools here", "no tools here", []),
        (
            '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>',
            "",
            [("f", '{"x": 1}')],
        ),
        (
            'ok <tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g", "arguments": {"y": "z"}}</tool_call>',
            "ok",
            [("f", "{}"), ("g", '{"y": "z"}')],
        ),
        (
            '<tool_call>{"name": "f", "arguments": {"x": 1}}',
            "",
            [("f", '{"x": 1}')],
        ),  # unclosed last block
        ("<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>", []),
        (
            '<tool_call>{"arguments": {}}</tool_call>',
            '<tool_call>{"arguments": {}}</tool_call>',
            [],
        ),
    ],
)
def test_hermes_parsing_of_the_embedded_models_replies(text, content, calls):
    got_content, got_calls = parse_tool_calls(text)
    assert got_content == content
    assert [(c["name"], c["arguments"]) for c in got_calls] == calls


def test_tools_are_described_in_the_system_prompt():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    out = with_tools(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}], tools
    )
    assert out[0]["content"].startswith("Be brief.") and '"name": "f"' in out[0]["content"]
    assert "<tool_call>" in out[0]["content"] and out[1] == {"role": "user", "content": "q"}
    assert with_tools([{"role": "user", "content": "q"}], tools)[0]["role"] == "system"


def test_selftest_command(tmp_path, capsys):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in xlam_rows()))
    assert main(["selftest", "xlam-tool-call", "--data", str(data)]) == 0
    assert "self-test passed on 8 item(s)" in capsys.readouterr().out
    assert (
        main(["selftest", "xlam-tool-call", "--data", str(data), "--option", "ordering=sideways"])
        == 2
    )
    assert "ordering" in capsys.readouterr().err
    assert main(["selftest", "no-such-scorer", "--data", str(data)]) == 2
    assert "xlam-tool-call" in capsys.readouterr().err  # the known names are listed


def test_metric_shorthand_names_a_scorer(tmp_path, scripted_server, capsys):
    project = make_tool_project(tmp_path / "p", scripted_server.url)
    toml = project / "skynet.toml"
    toml.write_text(
        toml.read_text()
        .replace('[metric]\nname = "xlam-tool-call"\n', "")
        .replace("[data]", 'metric = "xlam-tool-call"\n\n[data]')
    )
    assert 'metric = "xlam-tool-call"' in toml.read_text() and "[metric]" not in toml.read_text()
    assert main(["-C", str(project), "check"]) == 0
    assert "scorer 'xlam-tool-call' self-test passed" in capsys.readouterr().out


def test_type_words_outside_the_grammar_refuse_the_dataset_at_load(
    tmp_path, scripted_server, capsys
):
    project = make_tool_project(tmp_path / "p", scripted_server.url)
    rows = [json.loads(line) for line in (project / "data.jsonl").read_text().splitlines()]
    bad = dict(WEATHER, parameters={"city": {"type": "Optional[str]", "description": "x"}})
    rows[3]["tools"] = json.dumps([bad])
    (project / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["-C", str(project), "check"]) == 2
    err = capsys.readouterr().err
    assert "w3" in err and "Optional[str]" in err
    assert scripted_server.request_count == 0
