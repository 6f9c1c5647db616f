"""The code artifact: code.py defines `run(input) -> output`; the engine evolves its source.

Each evaluation runs the candidate inside its own bubblewrap sandbox (skynet.sandbox): no project
file, data, metric, run store, key or network is visible to it, nothing it starts outlives the
evaluation, and its time, memory, processes, files and output are limited. Its one channel out is
`skynet_sandbox.complete(...)`, which Skynet serves through its model layer as the task role, so
agent code can call models while Skynet meters, caches and budgets every call.

A candidate that crashes, hangs, runs out of memory, passes a limit or returns something that is
not JSON is an item error; the tail of its stderr reaches the reflection model as feedback. The
run goes on.
"""

from __future__ import annotations

import ast
import contextvars
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from skynet import sandbox
from skynet.errors import (
    CandidateFailed,
    CodeFailed,
    ConfigError,
    ModelError,
    SandboxFailed,
    SkynetError,
)
from skynet.measure import active_meter
from skynet.sandbox import Limits, ModelProxy
from skynet.warm_start import best_so_far

if TYPE_CHECKING:
    from skynet.artifacts.base import TaskRunner
    from skynet.config import Config
    from skynet.data import Dataset

__all__ = [
    "CodeArtifact",
    "CodeFailed",
    "SandboxFailed",
    "code_artifact",
    "code_limits",
    "from_project",
    "load_code",
    "COMPONENT",
]

# [artifact] keys of the sandbox beyond timeout_s and memory_mb (each changes what a code
# candidate's run can do, so each is part of its fingerprint when set).
SANDBOX_KEYS = (
    "sandbox",
    "cpu_s",
    "max_processes",
    "max_file_mb",
    "tmpfs_mb",
    "max_output_bytes",
    "stderr_tail_bytes",
    "max_model_calls",
    "packages",
)

COMPONENT = "code"
_STDERR_SHOWN = 1500  # of the tail Skynet keeps, what the error message quotes

# Runs inside the sandbox: set the limits, load the input, say "ready", wait for "go", then load
# the candidate from code.py, call run(input) (run(input, opt_state=...) when run names an
# opt_state parameter) and write {"output": ...} on the output pipe.
_HARNESS = r"""# skynet sandbox harness
import json, os, resource, sys, traceback
fd, limits, box = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
for name, value in limits.items():
    soft = value
    hard = value + 1 if name == "RLIMIT_CPU" else value
    try:
        resource.setrlimit(getattr(resource, name), (soft, hard))
    except (ValueError, OSError):
        resource.setrlimit(getattr(resource, name), (soft, soft))
# The standard library a candidate may want, loaded before the clock starts.
import bisect, collections, dataclasses, datetime, decimal, fractions, functools, heapq
import inspect, itertools, math, operator, random, re, statistics, string, time, typing
sys.path.insert(0, os.path.join(box, "lib"))
# Installed packages import from their folders, after the standard library's. [artifact]
# packages, when set, narrows which top-level names import (and what those import in turn): a
# rule for honest code, not a wall, as the folders are readable either way.
site = json.loads(open(os.path.join(box, "site.json"), encoding="utf-8").read())
sys.path.extend(site["path"])
sys.dont_write_bytecode = True
if site["packages"] is not None:
    import importlib.machinery

    class ListedPackages:
        granted = set(site["packages"])
        listed = ", ".join(site["packages"]) or "none"

        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if path is not None or name in cls.granted or name in sys.stdlib_module_names:
                return None
            if importlib.machinery.PathFinder.find_spec(name, site["path"]) is None:
                return None  # not an installed package: the usual ModuleNotFoundError
            frame = sys._getframe(1)
            while frame is not None and (
                frame.f_code.co_filename.startswith("<frozen")
                or str(frame.f_globals.get("__name__", "")).startswith("importlib")
            ):
                frame = frame.f_back
            importer = "" if frame is None else str(frame.f_globals.get("__name__", ""))
            if importer.partition(".")[0] in cls.granted:
                cls.granted.add(name)  # a listed package's own dependency
                return None
            raise ModuleNotFoundError(
                f"No module named {name!r} here: [artifact] packages does not list it"
                f" (it lists: {cls.listed}); add it there to let candidates import it",
                name=name,
            )

    sys.meta_path.insert(0, ListedPackages)
del sys.argv[1:]
code_path = os.path.join(box, "code.py")  # absolute: tracebacks quote the candidate's lines
source = open(code_path, encoding="utf-8").read()
data = json.loads(open(os.path.join(box, "input.json"), encoding="utf-8").read())
opt_state = json.loads(open(os.path.join(box, "opt_state.json"), encoding="utf-8").read())
os.write(fd, b"R")
if os.read(0, 1) != b"G":
    os._exit(9)
namespace = {"__name__": "candidate"}
try:
    exec(compile(source, code_path, "exec"), namespace)
except BaseException:
    traceback.print_exc()
    sys.stderr.flush()
    os._exit(3)
run = namespace.get("run")
if not callable(run):
    print("code.py defines no run(input) function", file=sys.stderr, flush=True)
    os._exit(4)


def wants_state(fn):
    # A parameter named opt_state (gepa's name), by name or keyword: not **kwargs.
    try:
        named = inspect.signature(fn).parameters.get("opt_state")
    except (TypeError, ValueError):  # no signature to read: called as run(input)
        return False
    return named is not None and named.kind in (named.POSITIONAL_OR_KEYWORD, named.KEYWORD_ONLY)


try:
    result = run(data, opt_state=opt_state) if wants_state(run) else run(data)
except BaseException:
    traceback.print_exc()
    sys.stderr.flush()
    os._exit(5)
try:
    text = json.dumps({"output": result}).encode()
except (TypeError, ValueError, RecursionError) as exc:
    print(f"run() returned {type(result).__name__}, which is not JSON: {exc}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(6)
view = memoryview(text)
while view:
    view = view[os.write(fd, view):]
os.close(fd)
sys.stderr.flush()
os._exit(0)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeArtifact:
    """A loaded code.py, the limits each run of a candidate is held to, and its sandbox.

    Attributes:
        sandbox: "bwrap" (every evaluation in its own bubblewrap sandbox) or "none" (a plain
            child process: the candidate can read what Skynet's user can; recorded and shown).
        hidden: host folders that stay invisible to candidates even inside a bound system tree
            (the project folder, home).
        max_tokens, temperature: defaults for the candidate's model calls.
    """

    kind: ClassVar[str] = "code"
    label: ClassVar[str] = "code"
    best_file: ClassVar[str] = "best_code.py"
    uses_task_model: ClassVar[bool] = False  # each run is a sandboxed process; its calls its own
    # A candidate whose run() names `opt_state` gets the item's best so far (skynet.warm_start.
    # best_so_far): a run hands each evaluation of this artifact its item's warm start.
    warm_start: ClassVar[bool] = True

    source: str
    path: Path | None = None
    limits: Limits = field(default_factory=Limits)
    sandbox: str = "bwrap"
    hidden: tuple[Path, ...] = ()
    max_tokens: int = 256
    temperature: float = 0.0

    @property
    def components(self) -> dict[str, str]:
        return {COMPONENT: self.source}

    def run(self, candidate: dict[str, str], input: dict[str, Any]) -> Any:
        """Run `candidate` on one input in a fresh sandbox; return its output.

        A candidate whose run() names an `opt_state` parameter is called as
        `run(input, opt_state={"best_example_evals": [{"score", "output"}, ...]})`: the item's
        best so far in this run (skynet.warm_start.best_so_far), as a JSON copy in the sandbox.

        The meter counts the candidate's run only (from "go" to the end of its output), not
        the sandbox's start-up and teardown.

        Raises:
            CodeFailed: the candidate crashed, hung, passed a limit, or returned non-JSON.
            ModelError: a model call the candidate made through skynet_sandbox failed: the
                model's fault, not the candidate's.
            SandboxUnavailable: bubblewrap cannot run here (sandbox = "bwrap").
        """
        proxy = ModelProxy(call=self._model_call(), max_calls=self.limits.max_model_calls)
        outcome = sandbox.run_python(
            _HARNESS,
            {
                "code.py": candidate[COMPONENT].encode("utf-8", "surrogatepass"),
                "input.json": json.dumps(input).encode(),
                "opt_state.json": json.dumps({"best_example_evals": list(best_so_far())}).encode(),
                "site.json": json.dumps(
                    {"path": sandbox.site_folders(), "packages": self.limits.packages}
                ).encode(),
            },
            limits=self.limits,
            mode=self.sandbox,
            proxy=proxy,
            hidden=self.hidden,
        )
        meter = active_meter()
        if meter is not None:
            meter.exclude_ns(outcome.total_ns - outcome.run_ns)
            # Measured by the parent: the item's time is never below the tree's CPU time.
            meter.add_cpu_ns(outcome.cpu_ns)
        for error in proxy.errors:
            if isinstance(error, ModelError) and error.refused_request:
                continue  # what the candidate sent was refused: its own doing, answered as such
            if isinstance(error, SkynetError) and not isinstance(error, CandidateFailed):
                raise error  # the model (or the budget) failed the candidate, not the reverse
        tail = _tail(outcome.stderr_tail)
        if not outcome.started:
            # No candidate code ran: the sandbox (or the machine) failed, not the candidate.
            raise SandboxFailed(f"the sandbox could not start: {outcome.failure}{tail}")
        if outcome.failure:
            raise CodeFailed(outcome.failure + tail)
        if outcome.returncode != 0:
            raise CodeFailed(_why(outcome.returncode, self.limits, outcome.oom) + tail)
        output = outcome.output
        if not outcome.has_output or not isinstance(output, dict) or "output" not in output:
            raise CodeFailed("the candidate wrote no output" + tail)
        return output["output"]

    def _model_call(self) -> Any:
        """The proxy's call: through skynet.models as the task role, in this item's context
        (its meter and draw), with the artifact's defaults for max_tokens and temperature."""
        context = contextvars.copy_context()
        defaults = {"max_tokens": self.max_tokens, "temperature": self.temperature}

        def capped(params: dict[str, Any]) -> dict[str, Any]:
            # [artifact] max_tokens caps the candidate as it caps the task role: a call asking
            # 10**12 would otherwise reserve millions of dollars and end the run. The reply's
            # finish_reason ("length") tells the candidate where it was cut.
            asked = {**defaults, **params}
            cap = asked.get("max_tokens")
            if (
                isinstance(cap, (int, float))
                and not isinstance(cap, bool)
                and cap > self.max_tokens
            ):
                asked["max_tokens"] = self.max_tokens
            return asked

        def call(messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
            def inside() -> dict[str, Any]:
                from skynet.evaluation import current_draw
                from skynet.models import current

                reply = current().complete("task", messages, draw=current_draw(), **capped(params))
                return {
                    "text": reply.text,
                    "input_tokens": reply.input_tokens,
                    "output_tokens": reply.output_tokens,
                    "finish_reason": reply.finish_reason,
                }

            return context.copy().run(inside)

        return call

    def render(self, candidate: dict[str, str]) -> str:
        return candidate[COMPONENT]

    @property
    def isolation(self) -> str | None:
        return sandbox.describe(self.sandbox)

    @property
    def unsandboxed(self) -> bool:
        return self.sandbox == "none"

    def fingerprint(self, settings: Any, task_model: str | None) -> str:
        # Limits added since runs were first recorded count only when set, so the candidate ids
        # of earlier runs (and their replay on resume) stay as they were.
        extra = {
            name: getattr(settings, name)
            for name in SANDBOX_KEYS
            if name in settings.model_fields_set
        }
        return json.dumps(
            ["code", settings.timeout_s, settings.memory_mb, *([extra] if extra else [])]
        )

    def task(self, models: Any, settings: Any) -> TaskRunner:
        return self.run

    def save(self, candidate: dict[str, str], path: Path) -> None:
        path.write_text(self.render(candidate), encoding="utf-8")

    def read_candidate(
        self, path: Path, *, inputs: list[str], key: str, missing: str
    ) -> dict[str, str]:
        from skynet.textfile import read_text

        return {COMPONENT: read_text(path, what="candidate", key=key, missing=missing)}


def _why(code: int | None, limits: Limits, oom: bool) -> str:
    if oom:
        return f"the candidate went past its memory limit ({limits.memory_mb} MB) and was killed"
    if code is None:
        return "the candidate was killed"
    if code == 3:
        return "code.py failed to load (syntax or import error)"
    if code == 4:
        return "code.py defines no run(input) function"
    if code == 5:
        return "run(input) raised an exception"
    if code == 6:
        return "run(input) returned something that is not JSON"
    signum = -code if code < 0 else code - 128 if code > 128 else 0
    if signum == signal.SIGXCPU:
        return f"the candidate used more than its CPU time ({limits.rlimits()['RLIMIT_CPU'] - 1} s)"
    if signum == signal.SIGKILL:
        return (
            "the candidate was killed by SIGKILL (a limit: CPU time, or memory past "
            f"{limits.memory_mb} MB)"
        )
    if signum > 0:
        try:
            return f"the candidate was killed by {signal.Signals(signum).name}"
        except ValueError:
            pass
    if code == 1:
        return (
            f"the candidate failed (exit 1; a MemoryError means it went past {limits.memory_mb} MB)"
        )
    return f"the candidate exited with status {code}"


def _tail(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    if len(text) > _STDERR_SHOWN:
        text = "…" + text[-_STDERR_SHOWN:]
    return f"; stderr:\n{text}"


def load_code(
    path: Path,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    limits: Limits | None = None,
    sandbox_mode: str = "bwrap",
    hidden: tuple[Path, ...] = (),
    max_tokens: int = 256,
    temperature: float = 0.0,
) -> CodeArtifact:
    """Read code.py (the seed candidate), check it defines run(), and check that candidates
    can be sandboxed here.

    Raises:
        ConfigError: the file is missing, does not parse, or defines no run function.
        SandboxUnavailable: sandbox_mode "bwrap" and bubblewrap cannot run here.
    """
    # Imported here: the sandbox's modules load on their own, standard library only
    # (tests/unprivileged.py runs them as another user).
    from skynet.textfile import read_text

    key = "artifact.path in skynet.toml"
    source = read_text(
        path, what="code", key=key, missing=f"no such code file; set {key} to your code.py"
    )
    return code_artifact(
        source,
        path=path,
        shown=str(path),
        limits=limits or Limits(wall_s=timeout_s, memory_mb=memory_mb),
        sandbox_mode=sandbox_mode,
        hidden=hidden,
        max_tokens=max_tokens,
        temperature=temperature,
    )


def code_artifact(
    source: str,
    *,
    path: Path | None,
    shown: str,
    limits: Limits,
    sandbox_mode: str = "bwrap",
    hidden: tuple[Path, ...] = (),
    max_tokens: int = 256,
    temperature: float = 0.0,
) -> CodeArtifact:
    """The code artifact of `source` (named `shown` in messages), checked: it parses, defines
    run(), and candidates can be sandboxed here.

    Raises:
        ConfigError: the source does not parse, or defines no run function.
        SandboxUnavailable: sandbox_mode "bwrap" and bubblewrap cannot run here.
    """
    try:
        tree = ast.parse(source, filename=shown)
    except SyntaxError as exc:
        raise ConfigError(f"{shown}:{exc.lineno}: syntax error: {exc.msg}") from None
    if not any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run"
        for node in tree.body
    ):
        raise ConfigError(f"{shown}: defines no run(input) function; the code artifact calls it")
    sandbox.check_available(sandbox_mode)
    return CodeArtifact(
        source=source,
        path=path,
        limits=limits,
        sandbox=sandbox_mode,
        hidden=hidden,
        max_tokens=max_tokens,
        temperature=temperature,
    )


def code_limits(art: Any) -> Limits:
    """The sandbox limits a project's [artifact] section sets for code candidates."""
    return Limits(
        wall_s=art.timeout_s,
        cpu_s=art.cpu_s,
        memory_mb=art.memory_mb,
        max_processes=art.max_processes,
        max_file_mb=art.max_file_mb,
        tmpfs_mb=art.tmpfs_mb,
        max_output_bytes=art.max_output_bytes,
        stderr_tail_bytes=art.stderr_tail_bytes,
        max_model_calls=art.max_model_calls,
        packages=None if art.packages is None else tuple(art.packages),
    )


def from_project(project_dir: Path, config: Config, dataset: Dataset) -> CodeArtifact:
    """[artifact] kind = "code": the project's code.py, with the sandbox the section sets. The
    project folder, home and the working folder stay hidden from candidates.

    Raises:
        ConfigError: code.py is missing, does not parse, or defines no run().
        SandboxUnavailable: sandbox = "bwrap" and bubblewrap cannot run here.
    """
    art = config.artifact
    return load_code(
        project_dir / art.path,
        limits=code_limits(art),
        sandbox_mode=art.sandbox,
        hidden=(project_dir, Path.home(), Path.cwd()),
        max_tokens=art.max_tokens,
        temperature=art.temperature,
    )
