"""The tutorials of gepa and dspy.GEPA, moved to Skynet (issue 28): each examples/ports/NAME holds
tutorial.py, the script as its authors wrote it (small data of the same shape, the models on the
server PORTS_API_BASE names), and skynet_port.py, the same script with the optimizer call moved
to Skynet. Both run here on the loopback server; the diff between them is the lines a user
changes, and it must stay within the optimizer call (and its import)."""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from skynet.testing import ScriptedServer, is_reflection, reply

PORTS = Path(__file__).resolve().parent.parent / "examples" / "ports"
BETTER = "Solve it step by step; end with ### <answer>."


@dataclass(frozen=True)
class Port:
    """One tutorial: its folder, the server's answers, what both scripts print when they work,
    and the lines of tutorial.py a user changes (the optimizer call, its import)."""

    name: str
    responder: object
    prints: str
    changed: int
    # False: more than the call changes, said in the port's docstring (circle packing: the
    # evaluator that ran the candidate itself becomes a metric of its output; Skynet runs the
    # candidate, sandboxed).
    call_only: bool = True


def _quickstart(body: dict) -> object:
    if is_reflection(body) or "```" in body["messages"][-1]["content"]:
        return reply(f"```\n{BETTER}\n```")
    system = body["messages"][0]["content"]
    return reply("42, so ### 42" if "step by step" in system else "The answer is 41.")


# -- dspy.GEPA's tutorials ------------------------------------------------------------------------
# dspy's ChatAdapter on the wire: the system message lists the signature's fields as
# "[[ ## name ## ]]", the user message gives each input so, and the reply gives each output so.
# dspy.GEPA's reflection asks for a `new_instruction` (its proposer reads JSON) or, as gepa's
# template, for the text in ``` fences.


def _field(text: str, name: str) -> str:
    """An input field's value in a dspy ChatAdapter user message."""
    value = text.split(f"[[ ## {name} ## ]]")[1].split("[[ ## ")[0]
    return value.split("\n\nRespond with the corresponding output fields")[0].strip()


def _dspy_reply(**fields: str) -> object:
    body = "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in fields.items())
    return reply(body + "[[ ## completed ## ]]")


def _dspy_reflection(body: dict, better: str) -> object | None:
    """The reflection model's answer (the better instruction), or None for another request."""
    messages = body["messages"]
    if any("new_instruction" in m["content"] for m in messages):
        return reply(f'{{"new_instruction": "{better}"}}')  # no quotes in `better`
    if is_reflection(body) or body.get("model") == "reflection-model":
        return reply(f"```\n{better}\n```")
    return None


AIME_BETTER = "Add the numbers and answer with the integer alone."


def _dspy_aime(body: dict) -> object:
    """The seed answers in words (the metric's "must be a valid integer" feedback); the better
    instruction gets the integer alone."""
    reflected = _dspy_reflection(body, AIME_BETTER)
    if reflected is not None:
        return reflected
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    a, b = map(int, re.findall(r"\$(\d+)\$", _field(user, "problem")))
    answer = str(a + b) if "integer alone" in system else f"The answer is {a + b}."
    return _dspy_reply(reasoning=f"{a} + {b} = {a + b}", answer=answer)


FACILITY_BETTER = "Read the message as a facility manager would and label it by its plain words."


def _facility_labels(message: str) -> dict[str, str]:
    """The labels the examples in dspy_facility_support give each message, by its words."""
    text = message.lower()
    urgent = "medium" if any(w in text for w in ("soon", "unacceptable")) else "low"
    negative = any(w in text for w in ("leak", "flood", "unacceptable"))
    rules = {
        "leak": "emergency_repair_services",
        "flood": "emergency_repair_services",
        "schedul": "cleaning_services_scheduling",
        "unacceptable": "customer_feedback_and_complaints",
        "eco-friendly": "sustainability_and_environmental_practices",
        "training": "training_and_support_requests",
        "inspection": "facility_management_issues",
    }
    categories = sorted({c for w, c in rules.items() if w in text}) or ["general_inquiries"]
    return {
        "urgency": "high" if "immediately" in text else urgent,
        "sentiment": "negative" if negative else "positive" if "thank" in text else "neutral",
        "categories": "[" + ", ".join(f'"{c}"' for c in categories) + "]",
    }


def _dspy_facility_support(body: dict) -> object:
    """Each of the three predictors answers its own field: the seed the same labels for every
    message (partly right), the better instruction the message's own."""
    reflected = _dspy_reflection(body, FACILITY_BETTER)
    if reflected is not None:
        return reflected
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    field = next(f for f in ("urgency", "sentiment", "categories") if f"[[ ## {f} ## ]]" in system)
    if "plain words" in system:
        answer = _facility_labels(_field(user, "message"))[field]
    else:
        answer = {"urgency": "low", "sentiment": "neutral", "categories": '["general_inquiries"]'}
        answer = answer[field]
    return _dspy_reply(reasoning="From the message.", **{field: answer})


PAPILLON_BETTER = "Describe the task in general terms, leaving out every name and address."
UNTRUSTED_REPLY = "Dear hiring manager, I am writing to apply."


def _dspy_papillon(body: dict) -> object:
    """The local model's request repeats the user's query (its PII leaks) until the better
    instruction; the judge counts the PII items found in the request; the untrusted model,
    called with the request alone, answers in plain text."""
    reflected = _dspy_reflection(body, PAPILLON_BETTER)
    if reflected is not None:
        return reflected
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "[[ ## num_pii_leaked ## ]]" in system:  # the judge's leakage check
        pii = re.findall(r"«(.*?)»", _field(user, "pii"))  # a list goes as [1] «a» [2] «b»
        leaked = sum(p in _field(user, "prompt") for p in pii)
        return _dspy_reply(reasoning="Counted.", num_pii_leaked=str(leaked))
    if "[[ ## judgment ## ]]" in system:  # the judge's quality check
        return _dspy_reply(reasoning="As good.", judgment="True")
    if "[[ ## llm_request ## ]]" in system:  # the local model writes the request
        query = _field(user, "user_query")
        leaves_out = "leaving out every name" in system
        request = "Write a cover letter for a job applicant." if leaves_out else f"Help: {query}"
        return _dspy_reply(reasoning="Redact.", llm_request=request)
    if "[[ ## response ## ]]" in system:  # the local model answers the user
        return _dspy_reply(response="Here is your cover letter.")
    return reply(UNTRUSTED_REPLY)  # the untrusted model, called by the module itself


def _circles(body: dict) -> object:
    """Any reflection gets the seed's code back with larger circles (still a valid packing)."""
    text = body["messages"][-1]["content"]
    start = text.find("import numpy as np")
    if start < 0:
        return reply("ok")
    code = text[start : text.find("```", start)].replace("np.full(n, 0.1)", "np.full(n, 0.16)")
    return reply(f"```\n{code}\n```")


PORT_LIST = [
    Port("gepa_circle_packing", _circles, "Best packing code:", 49, call_only=False),
    Port("gepa_quickstart", _quickstart, "GEPA Optimized Prompt: ", 8),
    Port("dspy_aime", _dspy_aime, AIME_BETTER, 14),
    Port("dspy_facility_support", _dspy_facility_support, FACILITY_BETTER, 14),
    Port("dspy_papillon", _dspy_papillon, PAPILLON_BETTER, 13),
]


def _changed(port: Port) -> tuple[list[str], list[str]]:
    """The lines of tutorial.py that skynet_port.py replaces, and the lines it writes instead."""
    raw = (PORTS / port.name / "tutorial.py").read_text().splitlines()
    moved = (PORTS / port.name / "skynet_port.py").read_text().splitlines()
    removed, added = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=raw, b=moved).get_opcodes():
        if tag != "equal":
            removed += raw[i1:i2]
            added += moved[j1:j2]
    return removed, added


def _run(script: Path, cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PORTS_API_BASE": url,
        "OPENAI_API_BASE": url,
        "OPENAI_API_KEY": "none",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm fetches its price table otherwise
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("port", PORT_LIST, ids=[p.name for p in PORT_LIST])
def test_only_the_optimizer_call_changes(port):
    removed, added = _changed(port)
    assert len(removed) == port.changed, "\n".join(removed)
    # What changes is the optimizer's import and its call: nothing of the data, the program,
    # the metric or what is done with the result.
    call = re.compile(r"optimize|GEPA|compile|^import |^from |^\s+\w+=|^\s*\)|^\s+[\w\"{]")
    assert not port.call_only or all(call.search(line) for line in removed + added), removed + added


@pytest.mark.slow
@pytest.mark.parametrize("port", PORT_LIST, ids=[p.name for p in PORT_LIST])
def test_the_tutorial_and_its_port_both_run(port, tmp_path):
    with ScriptedServer(responder=port.responder) as server:
        for script in ("tutorial.py", "skynet_port.py"):
            cwd = tmp_path / script.removesuffix(".py")
            cwd.mkdir()
            done = _run(PORTS / port.name / script, cwd, server.url)
            assert done.returncode == 0, f"{script}:\n{done.stdout}\n{done.stderr[-3000:]}"
            assert port.prints in done.stdout, done.stdout
            assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def papillon_run(tmp_path_factory):
    """PAPILLON's port run once: its report's text and summary, and its recorded calls (the
    port runs in its own folder, so its store is that folder's .skynet)."""
    from skynet.runs import RunStore
    from skynet.runs.report import render_text, summarize, summary_json

    cwd = tmp_path_factory.mktemp("papillon")
    with ScriptedServer(responder=_dspy_papillon) as server:
        done = _run(PORTS / "dspy_papillon" / "skynet_port.py", cwd, server.url)
    assert done.returncode == 0, done.stderr[-3000:]
    with RunStore(cwd / ".skynet" / "runs.db", readonly=True) as store:
        (run,) = store.list_runs()
        summary = summarize(store, run.id)
        calls = store.calls(run.id)
    return render_text(summary), summary_json(summary), calls


@pytest.mark.slow
def test_papillons_judge_with_its_own_lm_is_reported_not_measured(papillon_run):
    text, summary, calls = papillon_run
    judged = [c for c in calls if c.role == "metric"]
    # llm_judge.set_lm(large_lm): each of the judge's calls is in the run, as the metric's,
    # not measured, its cost unknown (never $0).
    assert judged and {c.model for c in judged} == {"openai/large-model"}
    assert not any(c.measured for c in judged) and all(c.cost_usd is None for c in judged)
    assert summary["cost"]["metric"]["unmeasured_calls"] == len(judged)
    assert f"Not measured: {len(judged)} model call(s) (metric {len(judged)})" in text


@pytest.mark.slow
def test_papillons_untrusted_model_calls_are_task_calls(papillon_run):
    _, summary, calls = papillon_run
    untrusted = [c for c in calls if c.model == "openai/large-model" and c.role == "task"]
    assert untrusted and all(c.measured for c in untrusted)
    assert summary["cost"]["task"]["calls"] >= len(untrusted) > 0
