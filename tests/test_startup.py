"""Start-up stays light: `import skynet`, `skynet --help`, `skynet init` and `skynet check` load
neither litellm (~2.6 s to import) nor dspy nor gepa; a model is needed only to run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "capitals"
HEAVY = ("litellm", "dspy", "gepa")

# Runs the CLI in a fresh interpreter, then prints which heavy modules it loaded.
_PROBE = """
import json, sys
args = json.loads(sys.argv[1])
code = 0
if args is not None:
    from skynet.cli import main
    try:
        code = main(args)
    except SystemExit as exit:
        code = exit.code or 0
else:
    import skynet
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(sys.argv[2].split(",")))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def _probe(args: list[str] | None) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args), ",".join(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    shutil.copytree(EXAMPLE, project)
    toml = project / "skynet.toml"
    # A named model that would need litellm (and a key) to call: check must not touch it.
    toml.write_text(toml.read_text().replace('task = "local/smollm2"', 'task = "openai/gpt-4o"'))
    return project


@pytest.mark.parametrize(
    "args",
    [None, ["--help"], ["init", "{tmp}/new"], ["-C", "{project}", "check"]],
    ids=["import", "help", "init", "check"],
)
def test_start_up_loads_no_model_library(tmp_path, args):
    project = _project(tmp_path)
    if args is not None:
        args = [a.format(tmp=tmp_path, project=project) for a in args]
    found = _probe(args)
    assert found["code"] == 0
    assert found["heavy"] == [], f"{args} imported {found['heavy']}"
