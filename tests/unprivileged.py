"""Run a code candidate through Skynet's sandbox as an unprivileged user (the usual way people run
Skynet), from a test that runs as root.

The test process is root (CI is); this runs `setpriv` to uid/gid 65534 and the system's
/usr/bin/python3 (the interpreter under /root is not readable by that user), on a copy of the
sandbox's modules in a folder that user can read. Only the standard library is needed: the
sandbox, the code artifact, the meter and the errors import nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

UID = 65534
PYTHON = "/usr/bin/python3"
_MODULES = (
    "errors.py",
    "measure.py",
    "sandbox",  # a package: copied whole
    "_sandbox_client.py",
    "warm_start.py",
    "artifacts/code.py",
)

# Runs as the unprivileged user: the skynet package is stubbed so its __init__ (which needs the
# installed dependencies) is not run; the modules the sandbox needs load from the copy.
_RUNNER = r"""
import json, sys, types
root = sys.argv[1]
for name in ("skynet", "skynet.artifacts"):
    pkg = types.ModuleType(name)
    pkg.__path__ = [root + "/" + name.replace(".", "/")]
    sys.modules[name] = pkg
from skynet.artifacts.code import CodeArtifact, CodeFailed
from skynet.sandbox import Limits
job = json.loads(sys.stdin.read())
art = CodeArtifact(source=job["source"], limits=Limits(**job["limits"]), sandbox=job["mode"],
                   hidden=tuple(__import__("pathlib").Path(p) for p in job["hidden"]))
if job["echo_model"]:
    # No model layer for this interpreter (no litellm): the proxy's call echoes the last message.
    def echo(messages, params):
        return {"text": "echo: " + messages[-1]["content"], "input_tokens": 1,
                "output_tokens": 1, "finish_reason": "stop"}
    CodeArtifact._model_call = lambda self: echo
import resource
try:
    done = {"output": art.run({"code": job["source"]}, job["input"])}
except CodeFailed as exc:
    done = {"failed": str(exc)}
# This process's peak memory (KB): what reading a hostile candidate cost Skynet.
print(json.dumps({**done, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def available() -> str:
    """ "" when unprivileged runs work here, else why not (the test is skipped with it)."""
    if os.geteuid() != 0:
        return "the tests already run unprivileged"
    for tool in ("setpriv", PYTHON, "bwrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return ""


class Unprivileged:
    """A readable copy of the sandbox's modules, and a way to run candidates as uid 65534."""

    def __init__(self, repo: Path) -> None:
        self.last_maxrss_kb = 0
        self.root = Path(tempfile.mkdtemp(prefix="skynet-unpriv-"))
        os.chmod(self.root, 0o755)
        for module in _MODULES:
            target = self.root / "skynet" / module
            target.parent.mkdir(parents=True, exist_ok=True)
            source = repo / "skynet" / module
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copyfile(source, target)
        for folder in (self.root, *self.root.rglob("*")):
            os.chmod(folder, 0o755 if folder.is_dir() else 0o644)

    def run(
        self,
        source: str,
        input: dict[str, Any],
        *,
        mode: str = "bwrap",
        hidden: tuple[Path, ...] = (),
        env: dict[str, str] | None = None,
        echo_model: bool = False,
        **limits: Any,
    ) -> dict[str, Any]:
        job = {
            "echo_model": echo_model,
            "source": source,
            "input": input,
            "limits": limits,
            "mode": mode,
            "hidden": [str(p) for p in hidden],
        }
        done = subprocess.run(
            [
                "setpriv",
                f"--reuid={UID}",
                f"--regid={UID}",
                "--clear-groups",
                PYTHON,
                "-I",
                "-c",
                _RUNNER,
                str(self.root),
            ],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", **(env or {})},
        )
        if done.returncode != 0 or not done.stdout.strip():
            raise RuntimeError(f"the unprivileged runner failed: {done.stderr[-2000:]}")
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        self.last_maxrss_kb = answer.pop("maxrss_kb")
        return answer

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
