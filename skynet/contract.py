"""The metric contract: load metric.py, check what score() returns, and self-test it.

```python
def score(input, output, expected=None):
    return score_value, {"feedback": "...", "scores": {"format": 1.0}}
```

Every check has a name that appears in its messages ("Metric return value", "answer key",
"null control", ...), so a user can find it in docs/metric.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import hashlib
import importlib.util
import inspect
import math
import numbers
import os
import queue
import re
import reprlib
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from skynet.data import Item
from skynet.errors import ConfigError, ContractError, MetricError, MetricExited, type_name
from skynet.measure import TESTING, Observation, current_observation, scoring
from skynet.printed import Printed, capturing
from skynet.reward import RewardSpec, validate_spec
from skynet.textfile import read_bytes

__all__ = [
    "RETURN_VALUE",
    "ANSWER_KEY",
    "NULL_CONTROL",
    "Limits",
    "MetricResult",
    "Metric",
    "load_metric",
    "validate_return",
    "CheckFailure",
    "CheckReport",
    "SelfTestRules",
    "check_metric",
]

RETURN_VALUE = "Metric return value"
ANSWER_KEY = "answer key"
NULL_CONTROL = "null control"
METRIC_ERROR = "Metric error"
UNDECLARED_REASON = "undeclared reason"
SIGNATURE = "Metric signature"
METRIC_FILE = "Metric file"
# The key of a result's extra that holds what score() printed (cut to limits.feedback_chars).
STDOUT_KEY = "metric_stdout"
# The key of a timed-out result's extra that holds the limit it ran past (metric.time_s then): a
# resumed run scores the item again when metric.time_s was raised since.
TIMED_OUT_KEY = "metric_timed_out_s"

# The id of the item a metric call scores (Metric.__call__'s item_id), for the adapters inside
# it: a scorer behind the contract sees the run's item, not one made up from the input.
_SCORED_ITEM: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "skynet_scored_item", default=None
)


def scored_item_id() -> str | None:
    """The id of the item the metric call in progress scores; None outside one (or when its
    caller named none)."""
    return _SCORED_ITEM.get()


_FIX = 'return a pair (score, {"feedback": "what is wrong and what right looks like"})'

_short = reprlib.Repr()
_short.maxstring = 120
_short.maxother = 120
_short.maxlist = _short.maxtuple = _short.maxdict = 6


def _shown(value: Any, limit: int = 200) -> str:
    text = _short.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Limits on one metric call; each is a clear error or a recorded note, never a silent cut."""

    time_s: float | None = 60.0
    feedback_chars: int = 4000
    max_scores: int = 32


def _awaited(coroutine: Any) -> Any:
    """The coroutine's result, run on an event loop of its own (on a thread of its own when
    this thread already runs one, as a notebook's does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricResult:
    """A validated metric return value.

    Attributes:
        score: the score as a float.
        feedback: the feedback text (cut to the limit, with a note, when longer).
        scores: named scores (str -> float).
        extra: any other keys of the returned dict, kept and shown to the reflection model;
            "metric_stdout" holds what score() printed, if anything (kept off the report's stdout).
        notes: what Skynet did to the value (e.g. cut the feedback).
    """

    score: float
    feedback: str
    scores: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _is_score(value: Any) -> bool:
    # numbers.Real covers int, float, Fraction and numpy's scalar types; bool is not a score.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def _why_not_score(value: Any) -> str:
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):
        return "a bool is not a score; return 1.0 or 0.0"
    if value is None:
        return "the score is None"
    if isinstance(value, numbers.Real):
        return "the score is not finite (NaN or infinity)"
    if isinstance(value, str):
        return "the score is a str; return a number such as 1.0"
    if type(value).__name__ == "ndarray":
        return "the score is a numpy array; return one number, e.g. float(x.mean())"
    return f"the score is a {type(value).__name__}, not a real number"


def validate_return(
    value: Any,
    *,
    item_id: str | None = None,
    where: str = "metric.py",
    limits: Limits | None = None,
) -> MetricResult:
    """Check a metric's return value against the contract (the check named "Metric return value").

    Raises:
        ContractError: with check == "Metric return value", naming the item, showing what came
            back (cut to ~200 characters) and how to fix it.
    """
    limits = limits or Limits()
    item = f" for item '{item_id}'" if item_id is not None else ""

    def fail(what: str, fix: str = _FIX) -> ContractError:
        return ContractError(
            f"{RETURN_VALUE} check failed{item} ({where}): {what}; got {_shown(value)}. Fix: {fix}",
            check=RETURN_VALUE,
            item_id=item_id,
        )

    if not isinstance(value, (tuple, list)):
        raise fail(f"score() returned a {type(value).__name__}, not a pair")
    if len(value) != 2:
        raise fail(f"score() returned a {len(value)}-{type(value).__name__}, not a pair")
    raw_score, info = value
    if not _is_score(raw_score):
        raise fail(_why_not_score(raw_score))
    if not isinstance(info, Mapping):
        raise fail(
            f"the second element is a {type(info).__name__}, not a dict",
            'return (score, {"feedback": "..."}) with a dict as the second element',
        )
    if "feedback" not in info:
        raise fail(
            'the dict has no "feedback" key',
            'add "feedback": a str saying what is wrong and what right looks like',
        )
    feedback = info["feedback"]
    if not isinstance(feedback, str):
        raise fail(
            f'"feedback" is a {type(feedback).__name__}, not a str',
            'make "feedback" a str (join a list of notes with "\\n")',
        )
    scores: dict[str, float] = {}
    raw_scores = info.get("scores", {})
    if raw_scores is None:
        raw_scores = {}
    if not isinstance(raw_scores, Mapping):
        raise fail(
            f'"scores" is a {type(raw_scores).__name__}, not a dict',
            'make "scores" a dict of name -> number, e.g. {"format": 1.0}',
        )
    if len(raw_scores) > limits.max_scores:
        raise fail(
            f'"scores" has {len(raw_scores)} entries; the limit is {limits.max_scores}',
            "return fewer named scores (aggregate them), or raise limits.max_scores",
        )
    for name, sub in raw_scores.items():
        if not isinstance(name, str):
            raise fail(f'"scores" has a non-str key {name!r}', "name every score with a str")
        if not _is_score(sub):
            raise fail(
                f'"scores"["{name}"]: {_why_not_score(sub)}',
                'make every value in "scores" a finite number',
            )
        scores[name] = float(sub)
    notes: list[str] = []
    if len(feedback) > limits.feedback_chars:
        notes.append(
            f"feedback cut from {len(feedback)} to {limits.feedback_chars} characters "
            "(limit: feedback_chars)"
        )
        feedback = feedback[: limits.feedback_chars]
    extra = {k: v for k, v in info.items() if k not in ("feedback", "scores")}
    return MetricResult(
        score=float(raw_score), feedback=feedback, scores=scores, extra=extra, notes=tuple(notes)
    )


def _arity(fn: Callable[..., Any], where: str) -> int:
    """2 or 3: how score() is called, decided from its signature."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ContractError(
            f"{where}: cannot read the signature of score(): {exc}", check=SIGNATURE
        ) from None
    params = list(sig.parameters.values())
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    kwonly_required = [
        p.name
        for p in params
        if p.kind == inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    fix = "define score(input, output, expected=None) or score(input, output)"
    if kwonly_required:
        raise ContractError(
            f"{where}: score() has required keyword-only parameter(s) "
            f"{', '.join(kwonly_required)} that Skynet cannot fill; {fix}",
            check=SIGNATURE,
        )
    if len(required) > 3:
        raise ContractError(
            f"{where}: score{sig} requires {len(required)} arguments; Skynet passes at most 3 "
            f"(input, output, expected); {fix}",
            check=SIGNATURE,
        )
    has_varargs = any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params)
    if len(positional) >= 3 or has_varargs:
        return 3
    if len(positional) == 2:
        return 2
    raise ContractError(
        f"{where}: score{sig} takes {len(positional)} positional parameter(s); {fix}",
        check=SIGNATURE,
    )


class _DaemonPool:
    """Reused daemon threads for metric calls.

    Not a ThreadPoolExecutor: its threads are joined at interpreter exit, so one metric that
    hangs forever (abandoned after its time limit) would keep `skynet` from ever exiting.
    """

    def __init__(self) -> None:
        self._tasks: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]
        self._tasks = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            spawn = self._idle == 0
            self._idle = max(0, self._idle - 1)
        self._tasks.put((future, lambda: fn(*args)))
        if spawn:
            threading.Thread(target=self._work, name="skynet-metric", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, call = self._tasks.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as exc:  # noqa: BLE001 — handed to the caller
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1


_pool = _DaemonPool()


def _metric_pool() -> _DaemonPool:
    return _pool


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (Mapping, list, tuple, set)):
        return len(value) == 0
    return False


def _empty_like(value: Any) -> Any:
    """The empty output of the answer key's type: "" for text, {} for a dict, [] for a list."""
    if isinstance(value, str):
        return ""
    if isinstance(value, Mapping):
        return {}
    if isinstance(value, (list, tuple)):
        return []
    return None


@dataclass(frozen=True, slots=True)
class SelfTestRules:
    """What the self-test holds a metric to beyond the answer key and null control it holds
    every metric to. A scorer seen as a metric (skynet.scorers.metric_of) sets them.

    Attributes:
        subject: what the report calls what it tested ("metric", "scorer 'xlam-tool-call'").
        key_scores: the score the answer key must reach (a scorer's own answer is correct: 1.0);
            None: at least as high as every other output tried.
        reasons: the reasons a result may give (its "reason" key); None: any.
        raised_as: the check an exception from key() or score() is reported under (a scorer's:
            "scorer error"); None: "answer key" for key(), "Metric error" for score().
    """

    subject: str = "metric"
    key_scores: float | None = None
    reasons: frozenset[str] | None = None
    raised_as: str | None = None


class Metric:
    """A loaded metric: call it as metric(input, output, expected) to get a MetricResult.

    Attributes:
        fn: the user's score function.
        arity: 3 when called score(input, output, expected), 2 when score(input, output).
        reward_spec: the module's REWARD_SPEC, validated, or None.
        key_fn: the module's key(expected), or None.
        item_key: the answer key made from the whole Item (a scorer's key(item)); it wins over
            key_fn.
        path: the metric file, or None for a metric built from a function.
        source_hash: sha256 of the metric's source, recorded with every result.
        limits: the limits each call is held to.
        rules: what its self-test holds it to besides the answer key and null control.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str = "metric",
        key_fn: Callable[[Any], Any] | None = None,
        item_key: Callable[[Item], Any] | None = None,
        reward_spec: RewardSpec | None = None,
        path: Path | None = None,
        source_hash: str | None = None,
        limits: Limits | None = None,
        rules: SelfTestRules | None = None,
    ) -> None:
        self.name = name
        self.rules = rules or SelfTestRules()
        self.where = str(path) if path is not None else name
        self.fn = fn
        self.arity = _arity(fn, self.where)
        self.key_fn = key_fn
        self.item_key = item_key
        self.reward_spec = reward_spec
        self.path = path
        self.limits = limits or Limits()
        if source_hash is None:
            try:
                source_hash = hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()
            except (OSError, TypeError):
                source_hash = ""
        self.source_hash = source_hash

    def __repr__(self) -> str:
        return f"<Metric {self.where} {self.contract}>"

    @property
    def contract(self) -> str:
        """How the user's function is called, as `skynet check` says it: "score/3", or "a DSPy
        metric, called as metric(example, prediction, trace, ...)"."""
        return getattr(self.fn, "contract", None) or f"score/{self.arity}"

    def __call__(
        self, input: Any, output: Any, expected: Any = None, *, item_id: str | None = None
    ) -> MetricResult:
        """Score one output.

        Raises:
            ContractError: the return value broke the contract (check "Metric return value").
            MetricError: score() raised or ran past limits.time_s; not a wrong answer.
        """
        args = (input, output, expected) if self.arity == 3 else (input, output)
        # What score() prints is the item's, kept in its record: never the report's stdout.
        printed = Printed(self.limits.feedback_chars)
        token = _SCORED_ITEM.set(item_id)
        try:
            raw = self._call_limited(args, item_id, printed)
        finally:
            _SCORED_ITEM.reset(token)
        result = validate_return(raw, item_id=item_id, where=self.where, limits=self.limits)
        text = printed.text()
        if text and STDOUT_KEY not in result.extra:
            result = dataclasses.replace(result, extra={**result.extra, STDOUT_KEY: text})
        return result

    def _call_limited(self, args: tuple[Any, ...], item_id: str | None, printed: Printed) -> Any:
        item = f" on item '{item_id}'" if item_id is not None else ""

        from skynet.models.foreign import watching

        def call() -> Any:
            # A DSPy judge's own LM is seen, recorded as the metric's unmeasured calls.
            with capturing(printed), watching("metric"):
                value = self.fn(*args)
                # An `async def score` (inspect_ai's scorers are) is awaited here, to its end.
                return _awaited(value) if inspect.iscoroutine(value) else value

        if self.limits.time_s is None:
            try:
                return call()
            except SystemExit as exc:  # never a signal: score() itself called sys.exit()
                raise self._exited(exc, item, item_id, printed) from None
            except KeyboardInterrupt as exc:
                # On the main thread a Ctrl-C looks the same as score()'s own raise: it stops.
                if threading.current_thread() is threading.main_thread():
                    raise
                raise self._exited(exc, item, item_id, printed) from None
            except Exception as exc:
                raise self._raised(exc, item, item_id, printed) from exc
        # A pool thread lets the caller stop waiting; contextvars carry the Observation over.
        # (A thread per call cost a fifth of a run's overhead; the pool's threads are reused.)
        future = _metric_pool().submit(contextvars.copy_context().run, call)
        try:
            return future.result(timeout=self.limits.time_s)
        except concurrent.futures.TimeoutError:
            raise MetricError(
                f"{self.where}: score() ran longer than {self.limits.time_s:g} s{item} and was "
                "abandoned; make it faster, or raise metric.time_s in skynet.toml (or --set "
                f"metric.time_s={max(2 * self.limits.time_s, 1):g})",
                item_id=item_id,
                extra={**_printed_extra(printed), TIMED_OUT_KEY: self.limits.time_s},
            ) from None
        except (SystemExit, KeyboardInterrupt) as exc:
            # score()'s own exit is the future's exception; a Ctrl-C (or `kill`) while waiting
            # arrives on this thread with the future still running: that one stops the run.
            if not (future.done() and future.exception(timeout=0) is exc):
                raise
            raise self._exited(exc, item, item_id, printed) from None
        except Exception as exc:
            raise self._raised(exc, item, item_id, printed) from exc

    def _line(self, exc: BaseException) -> str:
        line = _user_line(exc, self.path) if self.path is not None else None
        return f" (line {line})" if line is not None else ""

    def _raised(
        self, exc: Exception, item: str, item_id: str | None, printed: Printed
    ) -> MetricError:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return MetricError(
            f"{self.where}: score() raised {type(exc).__name__}: {exc}{item}{self._line(exc)}. "
            "This is recorded as an error, not a score; fix the metric and run again",
            item_id=item_id,
            traceback=tb,
            extra=_printed_extra(printed),
            error_type=type_name(type(exc)),
        )

    def _exited(
        self, exc: BaseException, item: str, item_id: str | None, printed: Printed
    ) -> MetricExited:
        """score() called sys.exit() or raised KeyboardInterrupt: the item's error, not the
        end of Skynet."""
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if isinstance(exc, SystemExit):
            did, why = _exit_call(exc), "an exit in score() would end the run"
        else:
            did, why = "raised KeyboardInterrupt", "a KeyboardInterrupt in score() stops a run"
        return MetricExited(
            f"{self.where}: score() {did}{item}{self._line(exc)}; return a score instead: {why}",
            item_id=item_id,
            traceback=tb,
            extra=_printed_extra(printed),
            error_type=type_name(type(exc)),
        )

    def answer_key(self, item: Item) -> Any:
        """The item's answer as an output: key(expected) when defined, else the single column.

        Raises:
            ContractError: check "answer key", when there is no way to make the key.
        """
        key_fn, item_key = self.key_fn, self.item_key
        if item_key is None and key_fn is not None:
            item_key = lambda it: key_fn(it.expected)  # noqa: E731
        if item_key is not None:
            try:
                return item_key(item)
            except SystemExit as exc:
                raise MetricExited(
                    f"{self.where}: key() {_exit_call(exc)} for item '{item.id}'"
                    f"{self._line(exc)}; key(expected) must return the item's answer as an output",
                    item_id=item.id,
                ) from None
            except Exception as exc:
                raise ContractError(
                    f"{self.where}: key() raised {type(exc).__name__}: {exc} for item "
                    f"'{item.id}'; key(expected) must return the item's answer as an output",
                    check=ANSWER_KEY,
                    item_id=item.id,
                ) from exc
        expected = item.expected
        if not expected:
            raise ContractError(
                f"item '{item.id}' has no expected output, so the self-test has no answer key; "
                "give the item its output column(s)",
                check=ANSWER_KEY,
                item_id=item.id,
            )
        if len(expected) != 1:
            raise ContractError(
                f"item '{item.id}' has {len(expected)} expected columns "
                f"({', '.join(map(str, expected))}); define key(expected) in {self.where} to say "
                "what a right output looks like",
                check=ANSWER_KEY,
                item_id=item.id,
            )
        return next(iter(expected.values()))


def _exit_call(exc: SystemExit) -> str:
    """How the code ended the process: "called sys.exit(3)", "called sys.exit()"."""
    code = "" if exc.code is None else repr(exc.code)
    return f"called sys.exit({code})"


def _printed_extra(printed: Printed) -> dict[str, object]:
    text = printed.text()
    return {STDOUT_KEY: text} if text else {}


def _user_line(exc: BaseException, path: Path) -> int | None:
    """The line of `path` (the user's file) that `exc` was last raised through, if any."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return frames[-1].lineno if frames else None


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


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """One failed check of the self-test: its name, the item, and what went wrong."""

    check: str
    item_id: str | None
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What the self-test found. `ok` is True when nothing failed."""

    items_checked: int
    failures: tuple[CheckFailure, ...] = ()
    null_control_skipped: tuple[str, ...] = ()
    subject: str = "metric"  # "metric", or the scorer tested: "scorer 'xlam-tool-call'"
    mode: str = "full"  # [metric] self_test: "full", "contract" or "off"
    unkeyed: tuple[str, ...] = ()  # items with no answer key: their return value only
    # Why the unkeyed items have no answer key, as the summary says it.
    unkeyed_why: str = "with no expected answer"
    metric_calls: int = 0  # how many times the self-test called the metric

    @property
    def ok(self) -> bool:
        return not self.failures

    def skipped(self) -> list[str]:
        """What a full self-test left out, and why: one phrase per kind of item."""
        said = []
        if self.null_control_skipped:
            said.append(
                f"{len(self.null_control_skipped)} item(s) with an empty key left out of the "
                "null control"
            )
        if self.unkeyed:
            said.append(
                f"{len(self.unkeyed)} item(s) {self.unkeyed_why}: their return value on an empty "
                "output was checked; the answer key and the null control were skipped"
            )
        return said

    def summary(self) -> str:
        if self.mode == "off":
            return (
                f'{self.subject} self-test off ([metric] self_test = "off"): nothing was checked '
                "before the run"
            )
        if self.ok and self.mode == "contract":
            return (
                f"{self.subject} self-test passed, contract only ([metric] self_test = "
                f'"contract"): the return value on {self.items_checked} item(s); the answer key '
                "and the null control were not checked"
            )
        if self.ok:
            skipped = "".join(f" ({said})" for said in self.skipped())
            return f"{self.subject} self-test passed on {self.items_checked} item(s){skipped}"
        # The same fault on many items is one fault: show it once, then the other items' ids.
        groups: dict[tuple[str, str], list[CheckFailure]] = {}
        for f in self.failures:
            shape = f.message.replace(f"'{f.item_id}'", "'…'") if f.item_id else f.message
            shape = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", shape)
            groups.setdefault((f.check, shape), []).append(f)
        items = len({f.item_id for f in self.failures})
        lines = [
            f"{self.subject} self-test failed: {len(self.failures)} check(s) on {items} item(s)"
        ]
        for (check, _), group in groups.items():
            lines.append(f"  - [{check}] {group[0].message}")
            if len(group) > 1:
                others = [str(f.item_id) for f in group[1:]]
                shown = ", ".join(others[:8]) + (
                    f" and {len(others) - 8} more" if len(others) > 8 else ""
                )
                lines.append(f"    the same on {len(others)} more item(s): {shown}")
        return "\n".join(lines)


# The self-test scores outputs no artifact produced: metrics that read observation() see this.
_SELFTEST_OBSERVATION = Observation(
    elapsed_ms=0.0, cost_note="self-test: no artifact ran", time_note="self-test: no artifact ran"
)


def check_metric(
    metric: Metric,
    items: Iterable[Item],
    *,
    others: int = 3,
    mode: str = "full",
    made: Sequence[str] | None = None,
) -> CheckReport:
    """Self-test a metric on the items a run will use, before anything is spent: the one
    self-test of metric.py functions, Python metrics and scorers alike.

    Checks, per item:
      - "Metric return value": every call returns a valid pair;
      - "answer key": the answer key scores at least as high as every other output tried
        (the empty output and up to `others` other items' answer keys), and at least
        metric.rules.key_scores when that is set (a scorer's own answer is correct);
      - "null control": an empty output scores strictly lower than the answer key, unless the key
        is itself empty (such items are left out of this check only);
      - "undeclared reason": with metric.rules.reasons set, every result's reason is declared.
    An exception from key() or score() is an error of its own kind, not a wrong answer.

    mode "contract" checks only the first item's return value on its answer key (a metric whose
    every call costs, a noisy judge); "off" checks nothing ([metric] self_test).

    `made` names the fields the artifact's outputs carry, when it knows them (a DSPy program's
    output fields). A DSPy metric's answer key is a Prediction of the Example's labels; when the
    labels share no name with those fields (the labels are a JSON `answer`, the program outputs
    `urgency`), no output the program gives looks like the key: the item's return value is
    checked on an empty output of those fields, and the report says why the key was skipped.
    """
    if mode == "off":
        return CheckReport(items_checked=0, subject=metric.rules.subject, mode=mode)
    items = list(items)[:1] if mode == "contract" else list(items)
    rules = metric.rules
    failures: list[CheckFailure] = []
    skipped: list[str] = []
    keys: dict[str, Any] = {}
    undeclared: set[tuple[str, Any]] = set()
    calls = 0
    # An item with no expected answer and no key() (a reference-free metric, a single task):
    # its return value is checked on the empty output; it has no answer key to compare with.
    unkeyed = [
        i for i in items if not i.expected and metric.key_fn is None and metric.item_key is None
    ]
    why = "with no expected answer"
    empty: Any = ""
    if made and metric.key_fn is _every_label and metric.item_key is None:
        unlike = [i for i in items if i.expected and not set(i.expected) & set(made)]
        if unlike:
            labels = sorted({str(k) for i in unlike for k in i.expected or ()})
            why = (
                f"whose labels ({', '.join(labels)}) are not among the program's output fields "
                f"({', '.join(made)})"
            )
            unkeyed, empty = unlike, dict.fromkeys(made, "")
    unkeyed_ids = {i.id for i in unkeyed}
    for item in items:
        if item.id in unkeyed_ids:
            continue
        try:
            keys[item.id] = metric.answer_key(item)
        except ContractError as exc:
            failures.append(CheckFailure(rules.raised_as or exc.check, item.id, str(exc)))

    def run(item: Item, output: Any, check: str) -> MetricResult | None:
        nonlocal calls
        calls += 1
        try:
            result = metric(item.input, output, item.expected, item_id=item.id)
        except ContractError as exc:
            failures.append(CheckFailure(exc.check, item.id, str(exc)))
            return None
        except MetricExited:
            raise  # it would end a run: said at once, in one line, not as one item's failure
        except MetricError as exc:
            failures.append(CheckFailure(rules.raised_as or METRIC_ERROR, item.id, str(exc)))
            return None
        reason = result.extra.get("reason")
        if rules.reasons is not None and reason not in rules.reasons:
            if (item.id, reason) in undeclared:
                return result  # said once per item and reason
            undeclared.add((item.id, reason))
            failures.append(
                CheckFailure(
                    UNDECLARED_REASON,
                    item.id,
                    f"{metric.where} gave reason {reason!r} on item '{item.id}' ({check} "
                    f"check), which it does not declare (reasons: "
                    f"{', '.join(sorted(rules.reasons)) or 'none'}); add it to reasons or give "
                    "a declared one",
                )
            )
        return result

    observed = current_observation()
    with scoring(observed or _SELFTEST_OBSERVATION, source=TESTING):
        for item in unkeyed:
            run(item, empty, RETURN_VALUE)
        ordered = [i for i in items if i.id in keys]
        for index, item in enumerate(ordered):
            key = keys[item.id]
            on_key = run(item, key, ANSWER_KEY)
            if on_key is None or mode == "contract":
                continue
            if rules.key_scores is not None and on_key.score < rules.key_scores - 1e-9:
                failures.append(
                    CheckFailure(
                        ANSWER_KEY,
                        item.id,
                        f"{ANSWER_KEY} check failed for item '{item.id}' ({metric.where}): the "
                        f"item's own answer {_shown(key, 80)} scored {on_key.score:g} "
                        f"({_shown(on_key.feedback, 120)}); the answer key must score "
                        f"{rules.key_scores:g}",
                    )
                )
                continue  # a wrong key: comparing other outputs with it says nothing
            tried: list[tuple[str, Any]] = []
            empty_key = _is_empty(key)
            if empty_key:
                skipped.append(item.id)
            else:
                tried.append(("the empty output", _empty_like(key)))
            for other in ordered[index + 1 :] + ordered[:index]:
                if len(tried) >= others + (0 if empty_key else 1):
                    break
                if keys[other.id] != key:
                    tried.append((f"item '{other.id}''s answer key", keys[other.id]))
            for label, output in tried:
                got = run(item, output, NULL_CONTROL if label == "the empty output" else ANSWER_KEY)
                if got is None:
                    continue
                if got.score > on_key.score:
                    failures.append(
                        CheckFailure(
                            ANSWER_KEY,
                            item.id,
                            f"{ANSWER_KEY} check failed for item '{item.id}' ({metric.where}): "
                            f"{label} {_shown(output, 80)} scored {got.score:g}, higher than the "
                            f"answer key {_shown(key, 80)} ({on_key.score:g}); the expected "
                            "output must score at least as high as any other output",
                        )
                    )
                if label == "the empty output" and got.score >= on_key.score:
                    failures.append(
                        CheckFailure(
                            NULL_CONTROL,
                            item.id,
                            f"{NULL_CONTROL} check failed for item '{item.id}' ({metric.where}): "
                            f"an empty output scored {got.score:g}, not lower than the answer key "
                            f"({on_key.score:g}); a metric that marks everything correct cannot "
                            "guide an optimizer: score what the output gets right",
                        )
                    )
    return CheckReport(
        items_checked=len(items),
        failures=tuple(failures),
        null_control_skipped=tuple(skipped),
        subject=rules.subject,
        mode=mode,
        unkeyed=tuple(i.id for i in unkeyed),
        unkeyed_why=why,
        metric_calls=calls,
    )
