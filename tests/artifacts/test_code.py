"""The code artifact's sandbox: each candidate runs in its own limited process, and whatever it
does wrong is an item error with its stderr tail, never a crash of the run."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from skynet import ConfigError
from skynet.artifacts.code import CodeArtifact, CodeFailed, load_code


def run(source: str, input: dict | None = None, **limits):
    return CodeArtifact(source=source, **limits).run({"code": source}, input or {"n": 3})


def test_a_candidate_runs_and_returns_its_output():
    assert run("def run(input):\n    return {'square': input['n'] ** 2}\n") == {"square": 9}


def test_a_crash_is_an_item_error_with_the_stderr_tail():
    with pytest.raises(CodeFailed) as caught:
        run("def run(input):\n    raise ValueError('bad input ' + str(input['n']))\n")
    assert "run(input) raised" in str(caught.value)
    assert "ValueError: bad input 3" in str(caught.value)


def test_an_infinite_loop_is_killed_at_the_time_limit():
    began = time.monotonic()
    with pytest.raises(CodeFailed, match="longer than 1 s"):
        run("def run(input):\n    while True:\n        pass\n", timeout_s=1.0)
    assert time.monotonic() - began < 10


def test_a_4_gb_allocation_is_contained():
    with pytest.raises(CodeFailed) as caught:
        run("def run(input):\n    return len(bytearray(4 * 1024 ** 3))\n", memory_mb=256)
    assert "MemoryError" in str(caught.value)


def test_the_parents_environment_is_not_visible(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-of-the-parent")
    env = run("import os\ndef run(input):\n    return dict(os.environ)\n")
    assert "OPENAI_API_KEY" not in env
    assert "sk-secret-of-the-parent" not in str(env)


def test_output_that_is_not_json_is_an_item_error():
    with pytest.raises(CodeFailed, match="not JSON"):
        run("def run(input):\n    return object()\n")


def test_printing_does_not_corrupt_the_output():
    source = "def run(input):\n    print('debug noise {', flush=True)\n    return 7\n"
    assert run(source) == 7


@pytest.mark.skipif(os.geteuid() != 0, reason="the process limit binds per user: shown as root")
def test_a_fork_bomb_is_contained_and_cleaned_up():
    bomb = "import os\ndef run(input):\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
    with pytest.raises(CodeFailed):
        run(bomb, timeout_s=1.5)
    deadline, left = time.monotonic() + 15, "?"
    while time.monotonic() < deadline:  # killed processes take a moment to be reaped
        left = subprocess.run(["pgrep", "-u", "65534", "-c"], capture_output=True, text=True)
        if left.stdout.strip() in ("", "0"):
            break
        time.sleep(0.2)
    assert left.stdout.strip() in ("", "0"), f"{left.stdout.strip()} bomb processes survived"


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
