"""Loading metric.py: import it (first in a child process held to a time limit, when asked),
find score(), key() and REWARD_SPEC, adapt a DSPy metric, and hash its source.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from skynet.contract._check import METRIC_FILE, SIGNATURE, Limits
from skynet.contract._metric import Metric, _exit_call, _user_line
from skynet.errors import ConfigError, ContractError
from skynet.reward import validate_spec
from skynet.textfile import read_bytes


def _load_module(path: Path) -> ModuleType:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    # A name of its own per file: two projects' metric.py never collide in sys.modules.
    name = f"skynet_user_metric_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ContractError(f"{path}: cannot be loaded as a Python module", check=METRIC_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.parent)
    sys.path.insert(0, folder)  # so metric.py can import helpers that sit beside it
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise ContractError(
            f"{path}:{exc.lineno}: syntax error: {exc.msg}; fix the file and run skynet check",
            check=METRIC_FILE,
        ) from None
    except SystemExit as exc:  # a script's exit at module level: never Skynet's end
        sys.modules.pop(name, None)
        at = _user_line(exc, path)
        line = f":{at}" if at is not None else ""
        raise ContractError(
            f"{path}{line}: importing the metric {_exit_call(exc)}; metric.py must import "
            'cleanly: move script code under `if __name__ == "__main__":`',
            check=METRIC_FILE,
        ) from None
    except Exception as exc:
        sys.modules.pop(name, None)
        at = _user_line(exc, path)
        line = f":{at}" if at is not None else ""
        raise ContractError(
            f"{path}{line}: importing the metric raised {type(exc).__name__}: {exc}; "
            "metric.py must import cleanly",
            check=METRIC_FILE,
        ) from exc
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return module


# Run by a child interpreter: import metric.py, then say so on the pipe it was given. What the
# import raises is ignored here: the import in Skynet's own process reports it, with its line.
_PROBE = """
import importlib.util, os, sys
fd, path = int(sys.argv[1]), sys.argv[2]
sys.path.insert(0, os.path.dirname(path))
spec = importlib.util.spec_from_file_location("skynet_metric_probe", path)
try:
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
except BaseException:
    pass
os.write(fd, b"imported")
os._exit(0)
"""


def _probe_import(path: Path, time_s: float) -> None:
    """Import metric.py once in a child process, within `time_s`: a file that hangs at import,
    or ends the process there (os._exit), is one error naming it rather than a `skynet` that
    hangs or ends silently with exit 0. The child and all it started are killed after."""
    read_end, write_end = os.pipe()
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _PROBE, str(write_end), str(path)],
            pass_fds=(write_end,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        os.close(write_end)
    try:
        try:
            code = child.wait(timeout=time_s)
        except subprocess.TimeoutExpired:
            raise ContractError(
                f"{path}: importing the metric took longer than {time_s:g} s "
                "(metric.import_time_s); metric.py must import cleanly: move endless or slow "
                'work into score() or under `if __name__ == "__main__":`, or raise '
                "metric.import_time_s in skynet.toml",
                check=METRIC_FILE,
            ) from None
        os.set_blocking(read_end, False)  # a process the import started may hold the pipe
        try:
            imported = os.read(read_end, 16) == b"imported"
        except BlockingIOError:
            imported = False
        if not imported:
            how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
            raise ContractError(
                f"{path}: importing the metric ended the process ({how}) before the import "
                "finished (os._exit() or a signal at module level); metric.py must import "
                'cleanly: move script code under `if __name__ == "__main__":`',
                check=METRIC_FILE,
            )
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def dspy_adapted(
    fn: Callable[..., Any], key_fn: Callable[..., Any] | None, outputs: Sequence[str]
) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """(score, key) for `fn`: itself, or when it is a DSPy metric, wrapped into the contract
    (skynet.dspy_metric), its answer key then every label at once (a dspy.Prediction of the
    Example's labels, as a DSPy program's output is) unless the module defines key()."""
    from skynet.dspy_metric import DspyMetric, is_dspy_metric

    if not is_dspy_metric(fn):
        return fn, key_fn
    return DspyMetric(fn, outputs), key_fn or _every_label


def _every_label(expected: Any) -> Any:
    """The answer key of a DSPy metric: the item's labels, as the fields of one output."""
    return dict(expected) if isinstance(expected, Mapping) else expected


def load_metric(
    path: str | Path,
    *,
    limits: Limits | None = None,
    import_time_s: float | None = None,
    outputs: Sequence[str] = (),
) -> Metric:
    """Load a user's metric.py.

    Finds `score`, decides from its signature how it is called, validates a module-level
    REWARD_SPEC and picks up an optional `key(expected)`.

    Args:
        path: the metric file.
        limits: the limits its calls are held to.
        import_time_s: when given, metric.py is first imported in a child process held to this
            many seconds, so an import that hangs or ends the process is a ContractError.
        outputs: the project's output columns: a score() that is a DSPy metric
            (skynet.dspy_metric) is called with a dspy.Prediction of them.

    Raises:
        ContractError: the file is missing, does not import (or, with import_time_s, hangs or
            ends the process at import), or has no usable score().
        ConfigError: REWARD_SPEC is malformed (the message names the key).
    """
    given = Path(path).expanduser().absolute()
    source = _metric_source(given)
    p = given.resolve()
    if import_time_s is not None:
        _probe_import(p, import_time_s)
    module = _load_module(p)
    fn = getattr(module, "score", None)
    if fn is None:
        raise ContractError(
            f"{p}: defines no score(); add def score(input, output, expected=None): "
            'return value, {"feedback": "..."}',
            check=SIGNATURE,
        )
    if not callable(fn):
        raise ContractError(f"{p}: score is a {type(fn).__name__}, not a function", check=SIGNATURE)
    spec = None
    if hasattr(module, "REWARD_SPEC"):
        spec = validate_spec(module.REWARD_SPEC, where=f"{p}: REWARD_SPEC")
    key_fn = getattr(module, "key", None)
    if key_fn is not None and not callable(key_fn):
        raise ConfigError(f"{p}: key is a {type(key_fn).__name__}; define key(expected)")
    fn, key_fn = dspy_adapted(fn, key_fn, outputs)
    return Metric(
        fn,
        name=p.name,
        key_fn=key_fn,
        reward_spec=spec,
        path=p,
        source_hash=hashlib.sha256(source).hexdigest(),
        limits=limits,
    )


def _metric_source(given: Path) -> bytes:
    return read_bytes(
        given,
        what="metric",
        key="metric.path in skynet.toml",
        missing="no such metric file; write a metric.py that defines "
        "score(input, output, expected=None)",
        error=lambda message: ContractError(message, check=METRIC_FILE),
    )


def metric_file_hash(path: str | Path) -> str:
    """The hash a run records for the metric file at `path` (load_metric's source_hash), from
    the file's bytes alone: the file is never imported, so reading a run of a downloaded
    project runs none of its code.

    Raises:
        ContractError: the file is missing or cannot be read.
    """
    return hashlib.sha256(_metric_source(Path(path).expanduser().absolute())).hexdigest()
