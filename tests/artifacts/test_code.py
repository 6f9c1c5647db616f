"""The code artifact: each candidate runs in its own sandbox, whatever it does wrong is an item
error with its stderr tail (never a crash of the run), and its one channel out, the model proxy,
is metered by Skynet. The attacks themselves are in tests/test_sandbox.py."""

from __future__ import annotations

import time

import pytest

from skynet import ConfigError
from skynet.artifacts.code import CodeArtifact, CodeFailed, load_code
from skynet.measure import metering
from skynet.models import using
from skynet.sandbox import Limits
from skynet.testing.server import ScriptedServer, reply


def run(source: str, input: dict | None = None, **limits):
    return CodeArtifact(source=source, limits=Limits(**limits)).run(
        {"code": source}, input or {"n": 3}
    )


def test_a_candidate_runs_and_returns_its_output():
    assert run("def run(input):\n    return {'square': input['n'] ** 2}\n") == {"square": 9}


def test_a_crash_is_an_item_error_with_the_stderr_tail():
    with pytest.raises(CodeFailed) as caught:
        run("def run(input):\n    raise ValueError('bad input ' + str(input['n']))\n")
    assert "run(input) raised" in str(caught.value)
    assert "ValueError: bad input 3" in str(caught.value)
    # The traceback quotes the candidate's own line (not a same-named module's).
    assert "raise ValueError('bad input '" in str(caught.value)


def test_a_syntax_error_and_a_missing_run_are_named():
    with pytest.raises(CodeFailed, match="failed to load"):
        run("def run(input:\n")
    with pytest.raises(CodeFailed, match="defines no run"):
        run("def solve(input):\n    return 1\n")


def test_output_that_is_not_json_is_an_item_error():
    with pytest.raises(CodeFailed, match="not JSON"):
        run("def run(input):\n    return object()\n")


def test_printing_does_not_corrupt_the_output():
    source = "def run(input):\n    print('debug noise {', flush=True)\n    return 7\n"
    assert run(source) == 7


def test_only_the_tail_of_stderr_is_kept():
    source = (
        "import os, sys\ndef run(input):\n    sys.stderr.write('A' * 100000 + 'THE END')\n"
        "    sys.stderr.flush()\n    os._exit(2)\n"
    )
    with pytest.raises(CodeFailed) as caught:
        run(source, stderr_tail_bytes=4096)
    assert "exited with status 2" in str(caught.value)
    assert str(caught.value).endswith("THE END")
    assert len(str(caught.value)) < 2000


def test_the_meter_counts_the_candidate_not_the_sandbox():
    """The item's time runs from "go" to the end of the output: a candidate that sleeps 300 ms
    is measured at about 300 ms, however long the sandbox took to start and stop."""
    source = "import time\ndef run(input):\n    time.sleep(0.3)\n    return 1\n"
    art = CodeArtifact(source=source)
    began = time.perf_counter()
    with metering("i1") as meter:
        assert art.run({"code": source}, {}) == 1
    wall_ms = (time.perf_counter() - began) * 1000
    elapsed = meter.observation().elapsed_ms
    assert 300 <= elapsed < wall_ms, (elapsed, wall_ms)


@pytest.mark.slow
def test_a_candidate_calls_the_model_through_skynet(tmp_path):
    """The one channel out: skynet_sandbox.complete() reaches the task model through Skynet's
    model layer (loopback server), metered into the item, recorded in the task ledger; the
    candidate never sees a key."""
    source = (
        "import os\nfrom skynet_sandbox import complete\n"
        "def run(input):\n"
        "    return {'answer': complete('Capital of ' + input['country'] + '?', max_tokens=8),\n"
        "            'keys': [k for k in os.environ if 'KEY' in k]}\n"
    )
    with ScriptedServer() as server:
        server.script(reply("Paris", prompt_tokens=11, completion_tokens=1))
        models = server.models(tmp_path)
        with using(models), metering("i1") as meter:
            got = CodeArtifact(source=source).run({"code": source}, {"country": "France"})
        assert got == {"answer": "Paris", "keys": []}
        assert server.requests[0]["messages"] == [{"role": "user", "content": "Capital of France?"}]
        assert server.requests[0]["max_tokens"] == 8
    obs = meter.observation()
    assert obs.model_calls == 1 and obs.input_tokens == 11 and obs.output_tokens == 1
    assert obs.cost_usd == pytest.approx((11 * 1.0 + 1 * 2.0) / 1e6)
    calls = models.ledgers["task"].calls
    assert [(c.role, c.item_id) for c in calls] == [("task", "i1")]


@pytest.mark.slow
def test_a_failed_model_call_is_the_models_fault_not_the_candidates(tmp_path):
    from skynet.errors import ModelError
    from skynet.testing.server import fail

    source = (
        "from skynet_sandbox import complete, ModelCallFailed\n"
        "def run(input):\n"
        "    try:\n        return complete('hi')\n"
        "    except ModelCallFailed as exc:\n        return 'swallowed: ' + str(exc)\n"
    )
    with ScriptedServer() as server:
        # A 503 is the service's fault: the item is the model's, even though the candidate
        # swallowed the failure. A 400 is a refusal of what it sent: its own answer stands.
        server.script(fail(503), fail(400))
        models = server.models(tmp_path, max_attempts=1)
        with using(models), metering("i1"), pytest.raises(ModelError):
            CodeArtifact(source=source).run({"code": source}, {})
        with using(models), metering("i2"):
            got = CodeArtifact(source=source).run({"code": source}, {})
        assert got.startswith("swallowed: ")


def test_model_calls_per_evaluation_are_limited(tmp_path):
    source = (
        "from skynet_sandbox import complete, ModelCallFailed\n"
        "def run(input):\n"
        "    answers = []\n"
        "    for i in range(5):\n"
        "        try:\n            answers.append(complete(f'q{i}'))\n"
        "        except ModelCallFailed as exc:\n            answers.append(str(exc))\n"
        "    return answers\n"
    )
    with ScriptedServer() as server:
        models = server.models(tmp_path)
        with using(models), metering("i1"):
            got = CodeArtifact(source=source, limits=Limits(max_model_calls=2)).run(
                {"code": source}, {}
            )
        assert len(server.requests) == 2
    assert got[:2] == ["ok", "ok"]
    assert all("more than 2 model calls" in answer for answer in got[2:])


def test_load_code_checks_the_file(tmp_path):
    path = tmp_path / "code.py"
    path.write_text("def solve(x):\n    return x\n")
    with pytest.raises(ConfigError, match="defines no run"):
        load_code(path, timeout_s=1, memory_mb=256)
    path.write_text("def run(x:\n")
    with pytest.raises(ConfigError, match="code.py:1: syntax error"):
        load_code(path, timeout_s=1, memory_mb=256)
    path.write_text("def run(input):\n    return 1\n")
    assert load_code(path, timeout_s=1, memory_mb=256).components == {"code": path.read_text()}


def test_a_sandbox_that_cannot_start_is_not_the_candidates_fault(monkeypatch):
    """No candidate code ran, so it is not a candidate error (which the engine would take as
    feedback): SandboxFailed, a task error that counts toward the run's abort."""
    from skynet.artifacts.code import SandboxFailed

    monkeypatch.setattr("skynet.sandbox._run._interpreter", lambda: "/nonexistent/python3")
    with pytest.raises(SandboxFailed, match="could not start"):
        run("def run(input):\n    return 1\n")
