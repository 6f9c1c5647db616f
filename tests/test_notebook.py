"""examples/notebook.ipynb, executed on a real Jupyter kernel (ipykernel, through nbclient) against
the loopback server: the run finishes and improves, the result renders as HTML, progress is one
line on stderr, nothing of DSPy's, gepa's or litellm's reaches the cell outputs, and the run is
recorded in ./.skynet of the notebook's working folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import install as install_kernelspec
from nbclient import NotebookClient
from projects import BETTER, task_responder

from skynet.runs.store import RunStore

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "notebook.ipynb"
KERNEL = "skynet-test-python"
CELL_TIMEOUT_S = 300

# Run first in the kernel (not saved in the notebook): the kernel is another process, so the
# conftest guard does not reach it; this one refuses every connection that leaves 127.0.0.1.
NETWORK_GUARD = """\
import ipaddress as _ipaddress, socket as _socket

def _loopback(address):
    if not isinstance(address, tuple):
        return True
    if address[0] in ("localhost", "ip6-localhost"):
        return True
    try:
        return _ipaddress.ip_address(address[0].split("%")[0]).is_loopback
    except ValueError:
        return False

def _guard(real):
    def guarded(self, address):
        if not _loopback(address):
            raise ConnectionRefusedError(f"tests may not reach the network (tried {address!r})")
        return real(self, address)
    return guarded

_socket.socket.connect = _guard(_socket.socket.connect)
_socket.socket.connect_ex = _guard(_socket.socket.connect_ex)
"""


def _source(cell) -> str:
    return cell.source.strip()


def _code_cell(nb, starts: str):
    found = [c for c in nb.cells if c.cell_type == "code" and _source(c).startswith(starts)]
    assert len(found) == 1, f"one code cell starting {starts!r}, found {len(found)}"
    return found[0]


def _streams(cell, name: str) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == name)


def _html(cell) -> str:
    shown = [o for o in cell.outputs if o.output_type == "execute_result"]
    assert len(shown) == 1, f"cell {_source(cell)[:40]!r} shows {len(shown)} results"
    return shown[0].data["text/html"]


@pytest.fixture
def kernel_name(tmp_path_factory, monkeypatch) -> str:
    """A kernel spec for this interpreter (the one skynet is installed in), found first.

    ipykernel writes its spec with sys.executable; JUPYTER_PATH comes before the user's and the
    system's kernel folders, so a `python3` spec of another interpreter cannot be picked up.
    """
    prefix = tmp_path_factory.mktemp("jupyter")
    install_kernelspec(kernel_name=KERNEL, prefix=str(prefix))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    return KERNEL


def test_the_saved_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


@pytest.mark.slow
def test_the_notebook_runs_on_a_real_kernel(tmp_path, scripted_server, monkeypatch, kernel_name):
    scripted_server.responder = task_responder
    # The kernel inherits this process's environment: the notebook's model cell reads it.
    monkeypatch.setenv("SKYNET_NOTEBOOK_API_BASE", scripted_server.url)
    work = tmp_path / "work"
    work.mkdir()

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(NETWORK_GUARD))
    client = NotebookClient(
        nb,
        kernel_name=kernel_name,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(work)}},  # the kernel's working folder
    )
    client.execute()  # raises CellExecutionError on the first cell that raises

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    assert scripted_server.request_count > 0  # the models were the loopback server's

    # The result renders as the HTML table of RunResult._repr_html_: the run finished and the
    # best prompt (the scripted reflection's) takes the val score from 0 to 1.
    page = _html(_code_cell(nb, "result"))  # the cell that is just `result`
    found = re.search(
        r"<b>skynet run ([^<]+)</b> · finished · the best is perfect on val: [^<]*<table>", page
    )
    assert found, page
    run_id = found.group(1)
    assert "<td>baseline</td><td>0.000</td>" in page
    assert "<td>best</td><td>1.000</td>" in page
    assert "<td>change</td><td>+1.000</td>" in page
    assert BETTER in page

    best = _code_cell(nb, "print(result.best)")
    assert _streams(best, "stdout") == BETTER + "\n"
    assert best.outputs[-1].data["text/plain"] == "(0.0, 1.0)"

    evaluation = _code_cell(nb, "ev = skynet.evaluate(")
    assert re.search(r"skynet evaluation \S+</b>: mean 1\.000 over 4 row\(s\)", _html(evaluation))

    # Progress: one line on stderr, rewritten with a carriage return, no terminal codes; the
    # optimization itself prints nothing on stdout.
    optimize = _code_cell(nb, 'user = "Country: {country}"')
    assert _streams(optimize, "stdout") == ""
    progress = _streams(optimize, "stderr")
    assert "\rmetric calls " in progress and "best val 1.000" in progress
    assert progress.endswith("\n")

    # No DSPy, tqdm or litellm noise anywhere in the outputs.
    for cell in code:
        for name in ("stdout", "stderr"):
            text = _streams(cell, name)
            assert "\x1b" not in text, (name, text)
            assert not re.search(r"\d+%\||it/s\]|s/it\]", text), (name, text)  # tqdm bars
            assert "litellm" not in text.lower(), (name, text)
            assert "dspy" not in text.lower(), (name, text)
        if cell not in (optimize, evaluation):
            assert "\r" not in _streams(cell, "stdout") + _streams(cell, "stderr")

    # The runs are recorded in ./.skynet of the kernel's working folder, as ordinary runs.
    db = work / ".skynet" / "runs.db"
    assert db.is_file()
    with RunStore(db, readonly=True) as store:
        runs = {r.id: r.engine for r in store.list_runs() if r.status == "finished"}
        best_id = store.get_run(run_id).best_candidate_id
        best_content = next(
            ((json.dumps(c.content),) for c in store.candidates(run_id) if c.id == best_id), None
        )
    assert runs.get(run_id) == "gepa-async"  # Auto's engine for a prompt
    assert "eval" in runs.values()  # skynet.evaluate's run
    assert best_content is not None and BETTER in best_content[0]
