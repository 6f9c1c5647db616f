"""The runtime: a loaded `Metric`, how score() is called (its arity, a time limit on a pool of
daemon threads, an `async def` awaited, what it prints kept) and what its failures are.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import hashlib
import inspect
import queue
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skynet.contract._check import (
    ANSWER_KEY,
    SIGNATURE,
    STDOUT_KEY,
    TIMED_OUT_KEY,
    Limits,
    MetricResult,
    validate_return,
)
from skynet.data import Item
from skynet.errors import ContractError, MetricError, MetricExited, type_name
from skynet.printed import Printed, capturing
from skynet.reward import RewardSpec

# The id of the item a metric call scores (Metric.__call__'s item_id), for the adapters inside
# it: a scorer behind the contract sees the run's item, not one made up from the input.
_SCORED_ITEM: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "skynet_scored_item", default=None
)


def scored_item_id() -> str | None:
    """The id of the item the metric call in progress scores; None outside one (or when its
    caller named none)."""
    return _SCORED_ITEM.get()


def _awaited(coroutine: Any) -> Any:
    """The coroutine's result, run on an event loop of its own (on a thread of its own when
    this thread already runs one, as a notebook's does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


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
