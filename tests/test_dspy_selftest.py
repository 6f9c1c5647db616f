"""The self-test of a DSPy metric whose Example labels are not the program's outputs (issue 28):
the facility-support tutorial's label is one JSON `answer`, its program outputs `urgency`,
`sentiment` and `categories`. No output the program gives looks like a Prediction of the labels,
so the answer key is skipped with its reason said, and the metric's return value is still checked
on an empty output of the program's fields."""

from __future__ import annotations

import json
import textwrap

from artifacts.test_dspy_runs import CAPITAL, make_dspy_project

from skynet.cli import main


def _facts_project(tmp_path, server_url, metric: str):
    """A project whose label is a JSON `facts` column and whose program outputs `capital`."""
    project = make_dspy_project(tmp_path / "p", server_url)
    data = project / "data.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    for row in rows:
        row["facts"] = json.dumps({"capital": row.pop("answer")})
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text().replace('outputs = ["answer"]', 'outputs = ["facts"]'))
    (project / "program.py").write_text(
        "import dspy\n\nprogram = dspy.Predict('country -> capital')\n"
    )
    (project / "metric.py").write_text(textwrap.dedent(metric))
    return project


def test_labels_unlike_the_outputs_skip_the_answer_key_and_say_why(
    tmp_path, scripted_server, capsys
):
    project = _facts_project(
        tmp_path,
        scripted_server.url,
        """
        import json

        def metric(example, pred, trace=None, pred_name=None, pred_trace=None):
            return float(json.loads(example["facts"])["capital"] == pred.capital)

        score = metric
        """,
    )
    assert main(["-C", str(project), "check"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert (
        f"metric self-test passed on {len(CAPITAL)} item(s) ({len(CAPITAL)} item(s) whose labels "
        "(facts) are not among the program's output fields (capital): their return value on an "
        "empty output was checked; the answer key and the null control were skipped)"
    ) in out
    assert not scripted_server.requests  # nothing was spent


def test_a_metric_that_fails_on_the_programs_outputs_still_fails_its_self_test(
    tmp_path, scripted_server, capsys
):
    """Skipping the key is not skipping the metric: one that reads a field the program never
    gives fails, naming the item and the error."""
    project = _facts_project(
        tmp_path,
        scripted_server.url,
        """
        def score(example, pred, trace=None):
            return float(example.facts == pred.city)
        """,
    )
    assert main(["-C", str(project), "check"]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert "metric self-test failed" in text
    assert "AttributeError" in text and "city" in text


def test_the_run_and_its_report_say_what_the_self_test_skipped(tmp_path, scripted_server, capsys):
    from skynet.testing import reply

    def capitals(body):
        text = body["messages"][-1]["content"]
        if "[[ ## country ## ]]" not in text:
            return reply("```\nName the capital city.\n```")
        country = text.split("[[ ## country ## ]]")[1].split("\n")[1].strip()
        return reply(f"[[ ## capital ## ]]\n{CAPITAL[country]}\n\n[[ ## completed ## ]]")

    scripted_server.responder = capitals
    project = _facts_project(
        tmp_path,
        scripted_server.url,
        """
        import json

        def score(example, pred, trace=None):
            return float(json.loads(example.facts)["capital"] == pred.capital)
        """,
    )
    assert main(["-C", str(project), "run", "--max-metric-calls", "12"]) == 0
    said = "metric self-test: 8 item(s) whose labels (facts) are not among the program's output"
    assert said in capsys.readouterr().err
    assert main(["-C", str(project), "show"]) == 0
    assert "Metric self-test: 8 item(s) whose labels (facts)" in capsys.readouterr().out
