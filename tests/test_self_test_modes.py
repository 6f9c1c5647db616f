"""[metric] self_test = "full" | "contract" | "off" (issue 28): a metric whose every call costs
(a noisy LLM judge) need not be called on every item before the first proposal; what ran is said
by `skynet check` and by the run's report."""

from __future__ import annotations

import textwrap

import pytest
from projects import make_project, task_responder

from skynet.cli import main

# A metric that counts its calls and marks everything correct: the full self-test's null
# control refuses it; "contract" and "off" let it run.
COUNTING = """
from pathlib import Path

def score(input, output, expected=None):
    with open(Path(__file__).with_name("calls.txt"), "a") as f:
        f.write("x")
    return 1.0, {"feedback": "fine"}
"""


def _calls(project) -> int:
    path = project / "calls.txt"
    return len(path.read_text()) if path.exists() else 0


# (mode, check's exit code, what check says, the report's line, calls the self-test made)
MODES = [
    ("full", 2, "null control check failed", None, 80),  # 16 items, 5 outputs each
    (
        "contract",
        0,
        'metric self-test passed, contract only ([metric] self_test = "contract"): the return '
        "value on 1 item(s); the answer key and the null control were not checked",
        'Metric self-test: contract only ([metric] self_test = "contract")',
        1,
    ),
    (
        "off",
        0,
        'metric self-test off ([metric] self_test = "off"): nothing was checked before the run',
        'Metric self-test: off ([metric] self_test = "off"): nothing was checked',
        0,
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "code", "said", "reported", "calls"), MODES, ids=[m[0] for m in MODES]
)
def test_the_self_test_runs_as_far_as_asked(
    tmp_path, scripted_server, capsys, mode, code, said, reported, calls
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=16)
    (project / "metric.py").write_text(textwrap.dedent(COUNTING))
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text() + f'\n[metric]\nself_test = "{mode}"\n')
    assert main(["-C", str(project), "check"]) == code
    assert said in capsys.readouterr().out
    assert _calls(project) == calls
    if reported is None:
        return
    assert main(["-C", str(project), "run"]) == 0
    assert reported in capsys.readouterr().out


def test_a_bad_mode_is_one_line(tmp_path, scripted_server, capsys):
    project = make_project(tmp_path / "p", scripted_server.url)
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text() + '\n[metric]\nself_test = "some"\n')
    assert main(["-C", str(project), "check"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("skynet: error: ")
        and "metric.self_test" in err
        and len(err.splitlines()) == 1
    )
