"""A code candidate imports the interpreter's installed packages (numpy, as gepa's circle-packing
tutorial does), sandboxed or not; `[artifact] packages` narrows which; site-packages stays
read-only under bubblewrap, and the project (an editable install's path) stays out of reach.

Each project is evaluated with `skynet eval`, the candidate's model call going to the loopback
server, so the candidate runs exactly as in an optimization run."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import numpy
import pytest
from projects import make_sum_code_project
from test_bad_inputs import one_error_line

from skynet.artifacts.code import CodeArtifact
from skynet.cli import main
from skynet.runs.store import RunStore
from skynet.sandbox import Limits, site_folders

MODES = [
    "none",
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed"),
    ),
]

# numpy computes the answer; the one model call shows the proxy works beside it.
NUMPY = """
import numpy as np
from skynet_sandbox import complete

def run(input):
    n = input["n"]
    complete(f"n = {n}", max_tokens=5)
    return {"total": int(np.arange(n + 1, dtype=np.int64).sum())}
"""
# numpy at load time; on item n2, yaml (installed, not listed) and then the answer.
NUMPY_THEN_YAML = """
import numpy as np

def run(input):
    n = input["n"]
    if n == 2:
        import yaml
        n = len(yaml.safe_load("[1, 2]"))
    return {"total": int(np.arange(n + 1).sum())}
"""
# The project itself (an editable install of skynet) is not importable.
SKYNET = """
def run(input):
    import skynet
    return {"total": input["n"] * (input["n"] + 1) // 2}
"""
REFUSED = (
    "ModuleNotFoundError: No module named 'yaml' here: [artifact] packages does not list it "
    "(it lists: numpy); add it there to let candidates import it"
)


def _project(root: Path, url: str, *, code: str, mode: str, packages: str | None) -> Path:
    listed = f"packages = {packages}\n" if packages is not None else ""
    return make_sum_code_project(
        root,
        code=code,
        metric="""
            def score(input, output, expected=None):
                right = isinstance(output, dict) and output.get("total") == expected["total"]
                return float(right), {"feedback": "right" if right else "wrong"}
            """,
        toml=f"""
            timeout_s = 30
            sandbox = "{mode}"
            {listed}
            [models]
            task = "openai/skynet-test"

            [models.endpoints."openai/skynet-test"]
            api_base = "{url}"
            """,
        items=6,
        split=lambda n: "test" if n < 3 else ("train" if n % 2 else "val"),
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("code", "packages", "mean", "error"),
    [
        pytest.param(NUMPY, None, "1.000 over 3 item(s)", None, id="numpy-unlisted-all-importable"),
        pytest.param(NUMPY, '["numpy"]', "1.000 over 3 item(s)", None, id="numpy-listed"),
        pytest.param(
            NUMPY_THEN_YAML, None, "1.000 over 3 item(s)", None, id="yaml-importable-when-unset"
        ),
        pytest.param(
            NUMPY_THEN_YAML,
            '["numpy"]',
            "0.667 over 3 item(s) (1 candidate failure as 0)",
            REFUSED,
            id="yaml-refused-when-not-listed",
        ),
        pytest.param(
            NUMPY,
            "[]",
            "0.000 over 3 item(s) (3 candidate failures as 0)",
            "No module named 'numpy' here: [artifact] packages does not list it (it lists: none)",
            id="empty-list-standard-library-only",
        ),
        pytest.param(
            SKYNET,
            None,
            "0.000 over 3 item(s) (3 candidate failures as 0)",
            "ModuleNotFoundError: No module named 'skynet'",
            id="project-editable-install-not-importable",
        ),
    ],
)
def test_what_a_candidate_imports(
    tmp_path, scripted_server, capsys, mode, code, packages, mean, error
):
    project = _project(tmp_path / "p", scripted_server.url, code=code, mode=mode, packages=packages)
    assert main(["eval", str(project), "--candidate", "code.py", "--split", "test"]) == 0
    assert f"code.py on test: mean score {mean}" in capsys.readouterr().out
    with RunStore(project / ".skynet" / "runs.db") as store:
        (run,) = store.list_runs()
        rows = store.evaluations(run.id, split="test")
    errors = {row.item_id: row.error for row in rows if row.error}
    if error is None:
        assert errors == {}
    else:
        assert errors and all(error in text for text in errors.values()), errors
        if code is NUMPY_THEN_YAML:
            assert set(errors) == {"n2"}  # numpy, listed, worked on the other items
    if code is NUMPY and error is None:
        assert scripted_server.request_count == 3  # one model call per item, metered


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
def test_site_packages_is_read_only_under_bwrap():
    """The candidate reads numpy's folder but cannot write into it (nor anywhere else there)."""
    name = f"planted-{uuid.uuid4().hex}.py"
    source = (
        "import os, numpy\n"
        "def run(input):\n"
        "    folder = os.path.dirname(os.path.dirname(numpy.__file__))\n"
        "    listed = 'numpy' in os.listdir(folder)\n"
        "    try:\n"
        f"        open(os.path.join(folder, {name!r}), 'w').write('import os')\n"
        "        return {'listed': listed, 'wrote': True}\n"
        "    except OSError as exc:\n"
        "        return {'listed': listed, 'wrote': False, 'errno': exc.errno}\n"
    )
    art = CodeArtifact(source=source, limits=Limits(wall_s=30), sandbox="bwrap")
    got = art.run({"code": source}, {})
    folder = os.path.dirname(os.path.dirname(numpy.__file__))
    assert folder in site_folders()
    assert got == {"listed": True, "wrote": False, "errno": 30}  # EROFS
    assert not (Path(folder) / name).exists()


@pytest.mark.parametrize(
    ("value", "named"),
    [
        pytest.param('["numpy.linalg"]', "'numpy.linalg' is not a top-level", id="dotted"),
        pytest.param('["py-yaml"]', "'py-yaml' is not a top-level", id="not-an-identifier"),
        pytest.param('"numpy"', "artifact.packages", id="not-a-list"),
    ],
)
def test_a_bad_packages_value_is_one_error_line(tmp_path, scripted_server, capsys, value, named):
    project = _project(tmp_path / "p", scripted_server.url, code=NUMPY, mode="none", packages=value)
    assert main(["eval", str(project), "--candidate", "code.py", "--split", "test"]) == 2
    line = one_error_line(capsys)
    assert "artifact.packages" in line and named in line, line
    assert scripted_server.request_count == 0
