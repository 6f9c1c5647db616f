"""One optimization run in progress: the session the runner (for the CLI and for
skynet.optimize) drives an engine through.

A RunSession opens or resumes the run's record, then gives the engine its hooks (EngineContext):
evaluate a candidate on an item (recorded, or replayed from the records on resume; counted on
the progress line; the run aborted when too many evaluations fail), reflect, record a proposal
and a candidate's lineage as it is accepted, and say when the money or time budget is spent.
When the engine returns, raises or is interrupted, the session writes how the run ended and the
best candidate. Nothing recorded is paid for twice: a resumed engine runs again with the same
seed, served from the records (the run store and the call cache).
"""

from __future__ import annotations

import errno
import hashlib
import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from time import monotonic as _monotonic
from typing import IO, TYPE_CHECKING, Any

from skynet.contract import TIMED_OUT_KEY, CheckReport
from skynet.data import SPLITS, Item
from skynet.engine import Candidate, Engine, EngineContext, EngineOutcome, ProgramRun
from skynet.errors import (
    BudgetExhausted,
    ConfigError,
    ModelError,
    RunAborted,
    SandboxFailed,
    StorageError,
    type_name,
)
from skynet.evaluation import CANDIDATE_ERROR, METRIC_ERROR, Result
from skynet.executors import open_executor
from skynet.mean import choose_best, mean_of
from skynet.models import Models
from skynet.models.ledger import CallRecord
from skynet.python_objects import proposers_in
from skynet.runs import EVALUATION, RunStore
from skynet.runs.lock import Writer
from skynet.runs.store import FROM_PYTHON, stored_output
from skynet.storage import folder_error
from skynet.terminal import printable
from skynet.tracking import MlflowTracker
from skynet.warm_start import BestSoFar

if TYPE_CHECKING:
    from skynet.plan import EnginePlan
    from skynet.project import Project

__all__ = [
    "MIN_EVALUATIONS_BEFORE_ABORT",
    "SELECTION",
    "Progress",
    "RunOutcome",
    "RunSession",
    "candidate_id",
    "carve_selection",
]

# The error share aborts a run only once this many evaluations were made.
MIN_EVALUATIONS_BEFORE_ABORT = 8
_ANY = object()  # RunSession.recorded(): reuse a recorded result whatever its output


SELECTION = "selection"  # the split carved from val by [engine] select = "holdout"


def carve_selection(val: Sequence[Item], seed: int) -> tuple[list[Item], list[Item]]:
    """[engine] select = "holdout": val split in two by a seeded hash of each item's id (the
    same items for the same seed and ids, whatever their order): (what the engine searches on,
    the selection items), half each (the search keeps the odd one).

    Raises:
        ConfigError: fewer than 2 val items.
    """
    if len(val) < 2:
        raise ConfigError(
            f'[engine] select = "holdout" needs at least 2 val items to carve a selection '
            f'split from (there are {len(val)}); add val items or use select = "val"'
        )
    order = sorted(val, key=lambda item: hashlib.sha256(f"{seed}/{item.id}".encode()).hexdigest())
    chosen = {item.id for item in order[: len(val) // 2]}
    return [i for i in val if i.id not in chosen], [i for i in val if i.id in chosen]


def candidate_id(candidate: Candidate, fingerprint: str = "") -> str:
    """A stable id for a candidate: the hash of its texts and of how it is run (same texts, same
    task model and settings, same id, across runs; another task model makes another id, so its
    outputs are never mistaken for the recorded ones)."""
    canonical = json.dumps(
        [candidate, fingerprint], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def versions() -> dict[str, str]:
    """The versions of Python, Skynet and its engines, recorded with every run."""
    found = {"python": sys.version.split()[0]}
    for dist in ("skynet-optimizer", "gepa", "dspy", "litellm", "llama_cpp_python", "numpy"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return found


def unsandboxed_warning(project: Project) -> str:
    """The line every run and evaluation of unsandboxed code candidates prints ("" when the
    candidates are sandboxed, or are not code)."""
    if not project.artifact.unsandboxed:
        return ""
    return (
        'warning: [artifact] sandbox = "none": code candidates run unsandboxed and can read '
        "your data, metric, keys and run records; this run is reported as unsandboxed"
    )


def note_setup(project: Project, store: RunStore, run_id: str) -> None:
    """Record the items the run is given (the report shows each one's input and expected output
    without the project's data), how code candidates are isolated (part of what the run's
    figures mean) and, for a run made from Python, the call that made it."""
    data = project.dataset
    store.record_items(run_id, [(s, item) for s in SPLITS for item in getattr(data, s)])
    if project.made_in:
        store.set_note(run_id, "made_in", project.made_in)
    if project.artifact.isolation is not None:
        store.set_note(run_id, "sandbox", project.artifact.isolation)


@dataclass
class Progress:
    """The live progress line: metric calls used / budget, best val score, cost by role (an
    unknown cost shows as "unpriced", as in the report), and the money budget when there is one."""

    budget: int | None
    models: Models
    out: IO[str]
    calls: int = 0
    replayed: int = 0
    errors: int = 0
    best_val: float | None = None
    # Roles whose cost Skynet cannot see while none of their calls is measured (a user's
    # proposer writes the reflection role's proposals): "unknown", never $0, as in the report.
    unseen: frozenset[str] = frozenset()
    _last: float = 0.0
    _open: bool = False  # the live line is on the screen without its newline
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self) -> str:
        budget = f"/{self.budget}" if self.budget else ""
        best = "—" if self.best_val is None else f"{self.best_val:.3f}"
        return f"metric calls {self.calls}{budget} · best val {best} · {self.cost_and_counts()}"

    def cost_and_counts(self, roles: Sequence[str] = ("task", "reflection", "metric")) -> str:
        """The line's tail: the cost of `roles`, the money budget's spend, replays and errors."""
        cost = " ".join(f"{role} {self._cost(role)}" for role in roles)
        money = self.models.budget
        if money.max_cost_usd is not None:
            cost += f" (${money.spent_usd:.4f} of ${money.max_cost_usd:g})"
        extra = f" · {self.replayed} replayed" if self.replayed else ""
        errors = f" · {self.errors} errors" if self.errors else ""
        return f"cost {cost}{extra}{errors}"

    def _cost(self, role: str) -> str:
        totals = self.models.ledgers[role].totals()
        if role in self.unseen and totals.calls == totals.unmeasured_calls:
            return "unknown"
        return totals.cost_text

    def tick(self, force: bool = False) -> None:
        now = _monotonic()
        with self._lock:
            if not force and now - self._last < (0.5 if self.out.isatty() else 10.0):
                return
            self._last = now
            if self.out.isatty():
                self.out.write("\r\033[K" + self.line())
                self._open = True
            else:
                self.out.write(self.line() + "\n")
            self.out.flush()

    def say(self, text: str) -> None:
        """A message on a line of its own: the live line (a terminal's, a notebook's, left
        without its newline to be rewritten) is ended first, not run into."""
        with self._lock:
            self._end_line()
            self.out.write(text + "\n")
            self.out.flush()

    def done(self) -> None:
        self.tick(force=True)
        with self._lock:
            self._end_line()

    def _end_line(self) -> None:
        if self._open:
            self.out.write("\n")
            self._open = False


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """What a finished run returns. seed_val and best_val are mean val scores by the rule of
    skynet.mean (a candidate's own failure counts as 0, a metric or model fault is left out);
    None when the candidate was not evaluated on every val item."""

    run_id: str
    status: str
    best_candidate: Candidate
    best_path: Path | None
    seed_val: float | None
    best_val: float | None
    stopped_by: str = ""  # the limit that stopped the run ("" when the engine ran its course)


# The failures of the model or the network (after the model layer's retries) and of the
# sandbox's start: the item was never really tried, so a resumed run tries it again.
_TRANSIENT = frozenset(
    {
        type_name(ModelError),
        type_name(SandboxFailed),
        "skynet.artifacts.code.SandboxFailed",  # its name in runs recorded before it moved
    }
)


def transient(result: Result) -> bool:
    """Whether a recorded error was the model's, the network's or the sandbox's, not final:
    decided on its recorded type (Result.error_type), a metric's included (a judge's model
    call that failed)."""
    if result.ok or result.error_kind == CANDIDATE_ERROR:
        return False
    return result.error_type in _TRANSIENT


def timed_out_below(result: Result, time_s: float | None) -> bool:
    """Whether `result` is the metric running past a time limit lower than `time_s` (None: no
    limit): the user raised metric.time_s as the time-out advised, so a resume scores it again."""
    if result.error_kind != METRIC_ERROR:
        return False
    limit = result.extra.get(TIMED_OUT_KEY)
    return isinstance(limit, int | float) and (time_s is None or time_s > limit)


def _reflection_temperature(given: float | None, draw: int) -> float:
    """[models] reflection_temperature (default 0) for the first draw; a redraw (after an empty
    or unchanged reply) at 0.8, or the given temperature when that is higher."""
    first = 0.0 if given is None else given
    return first if draw == 0 else max(first, 0.8)


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfTested:
    """The metric's self-test before a run, and the model calls it made (a judge's): they are
    metered against the run's budget at once and recorded in the run once it exists."""

    report: CheckReport
    calls: tuple[CallRecord, ...] = ()


class RunSession:
    """One run of `engine` on `project`, from its first record to its best candidate.

    `running` receives the run's id once its row says "running" (the runner marks such a run
    ended if anything escapes). `out` takes what the run says (default: stderr).
    """

    def __init__(
        self,
        project: Project,
        *,
        models: Models,
        plan: EnginePlan,
        resume: str | None,
        writer: Writer,
        out: IO[str] | None = None,
        running: list[str] | None = None,
        self_tested: SelfTested | None = None,
    ) -> None:
        self.project, self.models, self.plan = project, models, plan
        self.self_tested = self_tested
        self.cfg = cfg = project.config
        self.stream: IO[str] = out if out is not None else sys.stderr
        self.budget = plan.max_metric_calls
        # Made first: every line the run says goes through it (see say()).
        self.progress = Progress(
            budget=self.budget,
            models=models,
            out=self.stream,
            unseen=frozenset(
                {"reflection"} if proposers_in(plan.settings.options, callable) else ()
            ),
        )
        self.train, self.val = project.dataset.train, project.dataset.val
        self.seed = dict(project.artifact.components)
        self.metric_hash = project.metric.source_hash
        # [engine] select = "holdout": the engine searches on part of val; the rest chooses.
        self.selection: list[Item] = []
        if cfg.engine.select == "holdout":
            self.val, self.selection = carve_selection(self.val, cfg.engine.seed)
        self.engine_budget = self.budget
        if self.selection and self.budget is not None:
            # The selection's evaluations are the search's too: the engine gets the rest.
            self.engine_budget = self.budget - (cfg.engine.select_top + 1) * len(self.selection)
            if self.engine_budget < len(self.val) + 1:
                raise ConfigError(
                    f"budget.max_metric_calls = {self.budget} is too small for [engine] select "
                    f'= "holdout": scoring {cfg.engine.select_top + 1} candidates on the '
                    f"{len(self.selection)} selection items takes "
                    f"{(cfg.engine.select_top + 1) * len(self.selection)}; raise it, or lower "
                    "[engine] select_top"
                )
        self.split_of = {item.id: "train" for item in self.train}
        self.split_of |= {item.id: "val" for item in self.val}
        self.split_of |= {item.id: SELECTION for item in self.selection}
        self.evaluation = project.evaluation(models)
        # Where the engine's evaluations run ([engine] executor); this process records them.
        # Started first: workers that cannot start (no Ray, no cluster) leave no run behind.
        self.executor = open_executor(
            project,
            models,
            self.evaluation,
            self.say,
            engine=plan.name if plan.runs_program else None,
        )
        try:
            self._open(resume, writer, running)
        except BaseException:
            self.executor.close()
            raise

    def _open(self, resume: str | None, writer: Writer, running: list[str] | None) -> None:
        """The record: the run created or reopened, and what the hooks keep while it runs."""
        project, models, plan = self.project, self.models, self.plan
        self.store = store = project.open_store()
        store.check_integrity()  # a run that cannot record must not start
        self.run_id = run_id = (
            self._reopen(resume, running) if resume else self._create(writer, running)
        )
        store.set_note(run_id, "engine_choice", plan.why)
        note_setup(project, store, run_id)
        warning = unsandboxed_warning(project)
        if warning:
            self.say(warning)
        self.run_dir = project.store_dir / "runs" / run_id
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise folder_error(self.run_dir, exc, what="run's files") from None
        self._log_lock = threading.Lock()
        self.seed_id = self.cid(self.seed)
        store.add_candidate(run_id, self.seed_id, self.seed)
        store.set_seed_candidate(run_id, self.seed_id)
        models.subscribe(lambda record: store.record_call(run_id, record))
        self._record_self_test()

        # Per candidate, per val item: (score, error kind, ok), not the Result (outputs are big).
        self.val_outcomes: dict[str, dict[str, tuple[float | None, str | None, bool]]] = {}
        self._lock = threading.Lock()
        self._known: set[str] = set()  # candidates already recorded in this process
        self._lineage: set[str] = set()  # candidates whose lineage this process recorded
        self._started = _monotonic()
        self._faults = 0
        # What the model or the network failed on in an earlier process is not final: a resumed
        # run asks again (once each), after the endpoint was fixed; so is a metric time-out once
        # metric.time_s was raised. Other errors stand.
        self._retry: set[tuple[str, str]] = (
            {
                (e.candidate_id, e.item_id)
                for e in store.evaluations(run_id)
                if transient(result := e.result())
                or timed_out_below(result, project.metric.limits.time_s)
            }
            if resume
            else set()
        )
        # A code candidate's warm start (skynet.warm_start): per item, the best evaluations
        # recorded so far (a resumed engine's replay notes them again, in the order it first
        # made them). None when the artifact takes none.
        self.best_so_far: BestSoFar | None = None
        if getattr(project.artifact, "warm_start", False):
            self.best_so_far = BestSoFar(
                [*self.train, *self.val, *self.selection],
                k=project.config.artifact.best_example_evals_k,
            )
        # A resumed engine replays its proposals (from the call cache): those are recorded once.
        # Its verdicts on them are made afresh on the replayed (and now repaired) evaluations,
        # so the last attempt's verdicts give way to them (RunStore.forget_verdicts).
        if resume:
            store.forget_verdicts(run_id)
        self._replayed_proposals = Counter(
            (p.status, p.detail, p.text) for p in (store.proposals(run_id) if resume else [])
        )
        self._memo: dict[tuple[str, str, str], Result] = {}
        self._key_locks: dict[tuple[str, str, str], threading.Lock] = {}
        self._aborted: list[RunAborted] = []  # set once: engines that swallow exceptions stop
        self.stopped_by = ""  # the limit that stopped the run, said once at the end
        # [tracking] mlflow: logged as the run goes, off the run's threads; off when unset.
        self.tracker = MlflowTracker.live(self.cfg, say=self.say)
        self.tracker.start(store.get_run(run_id))
        self._set_aside_confirmation()

    def _set_aside_confirmation(self) -> None:
        """Under max_cost_usd, hold the confirmation's worst case back from the search: the
        worst case of the seed's task request on each test item (input at its byte bound,
        output at [artifact] max_tokens), once for the seed and once for the best, times
        `repeat`. A best whose prompt is longer than the seed's, and a judge metric's calls, may
        need more: the confirmation then stops at the limit and says on how many items."""
        test, money = self.project.dataset.test, self.models.budget
        if not (test and self.cfg.budget.confirm and money.limited):
            return
        messages = getattr(self.project.artifact, "messages", None)
        if messages is None:
            self.say(
                "note: a code or DSPy artifact's calls per item are not known before it runs: "
                "nothing is set aside for the confirmation, which may stop at max_cost_usd"
            )
            return
        settings = self.cfg.artifact
        worst = 0.0
        for item in test:
            usd = self.models.worst_case_usd(
                "task", messages(self.seed, item.input), max_tokens=settings.max_tokens
            )
            worst += usd or 0.0
        aside = 2 * worst * max(1, settings.repeat)
        money.set_aside(aside)
        self.say(
            f"budget: ${aside:.4f} of max_cost_usd set aside for the confirmation (the seed "
            f"and the best on {len(test)} test items, at the seed's worst case)"
        )

    # -- opening ---------------------------------------------------------------------------

    def _record_self_test(self) -> None:
        """The self-test's model calls, metered when made, recorded now the run exists; the
        note says what the self-test did (the report's line). A resume adds its own."""
        tested = self.self_tested
        if tested is None:
            return
        for call in tested.calls:
            self.store.record_call(self.run_id, call)
        costs = [c.cost_usd for c in tested.calls]
        notes = self.store.get_run(self.run_id).notes.get("self_test") or []
        notes.append(
            {
                "mode": tested.report.mode,
                "metric_calls": tested.report.metric_calls,
                "model_calls": len(tested.calls),
                "cost_usd": None if None in costs else sum(c or 0.0 for c in costs),
                "skipped": tested.report.skipped() if tested.report.mode == "full" else [],
            }
        )
        self.store.set_note(self.run_id, "self_test", notes)
        for said in notes[-1]["skipped"]:
            self.say(f"metric self-test: {said}")

    def _reopen(self, resume: str, running: list[str] | None) -> str:
        store, project = self.store, self.project
        row = store.get_run(resume)
        if row.engine == EVALUATION:
            raise ConfigError(
                f"run {resume} is an evaluation (skynet eval), not an optimization; "
                "start one with `skynet run`"
            )
        if row.dataset_hash != project.dataset.hash:
            raise ConfigError(
                f"run {resume} was made on other data (dataset hash {row.dataset_hash[:12]} vs "
                f"{project.dataset.hash[:12]} now); start a new run instead of resuming"
            )
        if row.status == "finished":
            raise ConfigError(
                f"run {resume} already finished; start a new run (skynet run) to optimize further"
            )
        store.set_status(row.id, "running")
        if running is not None:
            running.append(row.id)
        # The money budget is the run's: what its recorded calls cost counts against it.
        self.models.budget.add_spent(sum(t.cost_usd for t in store.cost_by_role(row.id).values()))
        self.say(
            f"resuming run {row.id}: recorded evaluations and model calls are replayed, not paid"
        )
        return row.id

    def _create(self, writer: Writer, running: list[str] | None) -> str:
        cfg = self.cfg
        run_id = self.store.create_run(
            config=cfg.as_dict(),
            dataset_hash=self.project.dataset.hash,
            metric_hash=self.metric_hash,
            seed=cfg.engine.seed,
            engine=self.plan.name,
            budget={**cfg.budget.model_dump(), "max_metric_calls": self.budget},
            versions=versions(),
        )
        if running is not None:
            running.append(run_id)
        writer.names(run_id)
        self.say(
            f"run {run_id}: {len(self.train)} train / {len(self.val)} val items · {self.plan.why}"
        )
        return run_id

    # -- what the run says -----------------------------------------------------------------

    def say(self, text: str) -> None:
        """Print a line of the run's; it may quote a candidate or its output, so it is escaped
        (it cannot drive the terminal)."""
        self.progress.say(printable(text, multiline=True))

    def engine_log(self, message: str) -> None:
        """A line of the engine's own log (its progress bars, its messages): runs/ID/engine.log.

        Raises:
            StorageError: the log cannot be written (a full disk, a read-only folder).
        """
        path = self.run_dir / "engine.log"
        try:
            with self._log_lock, open(path, "a", encoding="utf-8") as log:
                log.write(message.rstrip() + "\n")
        except OSError as exc:
            why = "the disk is full" if exc.errno == errno.ENOSPC else "cannot write it"
            raise StorageError(
                f"{path}: {why} ({exc.strerror}); free some space or make it writable"
            ) from exc

    # -- the engine's hooks ----------------------------------------------------------------

    def cid(self, candidate: Candidate) -> str:
        return candidate_id(candidate, self.project.fingerprint)

    def record_proposal(
        self, *, status: str, detail: str, text: str = "", parent: Candidate | None = None
    ) -> None:
        with self._lock:
            key = (status, detail, text)
            if self._replayed_proposals[key] > 0:
                self._replayed_proposals[key] -= 1
                return
        parent_id = self.cid(parent) if parent else None
        self.store.record_proposal(
            self.run_id, parent_id=parent_id, status=status, detail=detail, text=text
        )

    def record_lineage(self, candidate: Candidate, parents: Sequence[Candidate]) -> None:
        """An accepted candidate and the candidates it was made from, recorded as it is
        accepted (a killed run keeps its lineage so far); the first lineage recorded stands."""
        cid = self.cid(candidate)
        with self._lock:
            if cid in self._lineage:
                return
            self._lineage.add(cid)
        parent_ids = [p for p in dict.fromkeys(self.cid(p) for p in parents) if p != cid]
        self.store.add_candidate(self.run_id, cid, candidate, parent_ids)
        with self._lock:
            self._known.add(cid)

    def recorded(
        self, candidate: Candidate, item: Item, make: Callable[[], Result], output: Any = _ANY
    ) -> Result:
        """The recorded result of `candidate` on `item` (for `output`, when given), else a new
        one made by `make()` and recorded; counted on the progress line either way."""
        store, run_id, progress = self.store, self.run_id, self.progress
        cid = self.cid(candidate)
        with self._lock:
            new = cid not in self._known
            self._known.add(cid)
        if new:
            store.add_candidate(run_id, cid, candidate)
        result = store.find_evaluation(run_id, cid, item.id, self.metric_hash)
        replayed = result is not None and (output is _ANY or result.output == stored_output(output))
        if result is not None and replayed and self._retry:
            with self._lock:
                again = (cid, item.id) in self._retry
                self._retry.discard((cid, item.id))
            if again:
                store.forget_evaluation(run_id, cid, item.id, self.metric_hash)
                replayed = False
        if result is None or not replayed:
            result = make()
            split = self.split_of.get(item.id, "train")
            store.record_evaluation(run_id, cid, split, result, self.metric_hash)
            # The engine gets the output as recorded (a huge one cut), as a replay would give it.
            result = replace(result, output=stored_output(result.output))
        if self.best_so_far is not None and item.id in self.split_of:
            self.best_so_far.note(item.id, cid, result.score if result.ok else None, result.output)
        known: tuple[float | None, int] | None = None  # a val score just completed, for tracking
        with self._lock:
            progress.calls += 1
            progress.replayed += replayed
            progress.errors += not result.ok
            # A candidate's own crash is feedback for the next one; a metric or model that keeps
            # failing is a broken run. Only the latter counts toward the abort.
            self._faults += not result.ok and result.error_kind != CANDIDATE_ERROR
            if self.split_of.get(item.id) == "val":
                # A candidate's own failure counts as 0; a metric or model fault is left out
                # (skynet.mean): crashing on the hard items cannot raise a candidate's mean.
                seen = self.val_outcomes.setdefault(cid, {})
                seen[item.id] = (result.score, result.error_kind, result.ok)
                if len(seen) == len(self.val):
                    mean = mean_of(seen.values()).value
                    known = mean, progress.calls
                    if mean is not None and (progress.best_val is None or mean > progress.best_val):
                        progress.best_val = mean
        progress.tick()
        if known is not None:
            self.tracker.val_score(cid, *known)
        return result

    def check_errors(self, result: Result) -> Result:
        """The result, unless too many evaluations failed: then the run aborts (RunAborted is
        raised here, and should_stop() says so to an engine that caught it)."""
        share = self.cfg.engine.max_error_share
        with self._lock:
            errors, calls = self._faults, self.progress.calls
            if self._aborted:
                raise self._aborted[0]
            if calls < MIN_EVALUATIONS_BEFORE_ABORT or errors / calls <= share:
                return result
            command = f"`{self._resume()}`"
            fix = (
                f"Fix the model's endpoint, then resume with {command}: what the model failed "
                "on is asked again (its [models.endpoints] settings may change)"
                if transient(result)
                else f"Fix the metric or the artifact, then resume with {command}"
            )
            if self.project.made_in:  # the CLI reads its records only when told the store
                fix += f"; `{self._show()}` lists the errors"
            self._aborted.append(
                RunAborted(
                    f"{errors} of {calls} evaluations failed (more than {share:.0%}); the last: "
                    f"{result.error or 'see the records'}. {fix}"
                )
            )
            raise self._aborted[0]

    def _resume(self) -> str:
        """How this run is resumed, in the form it was made in: a run made from Python (whose
        metric and rows are the caller's objects) by skynet.resume, with its store."""
        if self.project.made_in:
            return FROM_PYTHON["run"].format(run=self.run_id, store=self.project.store_dir)
        return f"skynet run --resume {self.run_id}"

    def _show(self) -> str:
        """The command that reports this run: with --store where the CLI would not look."""
        store = self.project.store_dir
        default = (self.project.dir / ".skynet").absolute()
        where = "" if store.absolute() == default else f" --store {store}"
        return f"skynet show {self.run_id}{where}"

    def evaluate(self, candidate: Candidate, item: Item) -> Result:
        made = self.recorded(candidate, item, lambda: self._evaluated(candidate, item))
        return self.check_errors(made)

    def _evaluated(self, candidate: Candidate, item: Item) -> Result:
        if self.best_so_far is not None and item.id in self.split_of:  # a test item: none
            item = self.best_so_far.warm(item)
        result, calls = self.executor.evaluate(candidate, item)
        for call in calls:  # made on a worker: counted and recorded here, as the driver's own
            self.models.absorb(call)
        return result

    def score_output(self, candidate: Candidate, item: Item, output: Any, obs: Any) -> Result:
        """An output the engine made itself: scored once per (candidate, item, output)."""
        key = (self.cid(candidate), item.id, json.dumps(output, sort_keys=True, default=repr))
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # two threads on the same output (a minibatch may hold an item twice)
            with self._lock:
                found = self._memo.get(key)
            if found is not None:
                return found  # dspy.GEPA's second call, for feedback: the same verdict
            result = self.recorded(
                candidate, item, lambda: self.evaluation.score_output(item, output, obs), output
            )
            with self._lock:
                self._memo[key] = result
            return self.check_errors(result)

    def record_failure(
        self, candidate: Candidate, item: Item, failure: BaseException, obs: Any
    ) -> Result:
        """A run the engine made itself that raised: the item's evaluation error."""
        made = self.recorded(candidate, item, lambda: self.evaluation.failure(item, failure, obs))
        return self.check_errors(made)

    def reflect(self, prompt: str, draw: int, max_tokens: int | None) -> str:
        reply = self.models.complete(
            "reflection",
            [{"role": "user", "content": prompt}],
            draw=draw,
            max_tokens=max_tokens,
            temperature=_reflection_temperature(self.cfg.models.reflection_temperature, draw),
            seed=draw,
        )
        return reply.text

    def should_stop(self) -> bool:
        """True once the run aborted, or its time or money budget is spent (named once, in
        stopped_by)."""
        self.note_calls()  # the engines check once per iteration: a killed run keeps its count
        if self._aborted:
            return True
        budget = self.cfg.budget
        minutes = (_monotonic() - self._started) / 60
        if budget.max_minutes is not None and minutes >= budget.max_minutes:
            self.stopped_by = self.stopped_by or f"max_minutes = {budget.max_minutes:g} reached"
            return True
        money = self.models.budget
        refused = money.refusal
        if refused is not None:
            self.stopped_by = self.stopped_by or str(refused).split(". Raise", 1)[0]
            return True
        if money.max_cost_usd is not None and money.spent_usd >= money.max_cost_usd:
            self.stopped_by = self.stopped_by or (
                f"budget max_cost_usd = ${money.max_cost_usd:g} spent (${money.spent_usd:.4f})"
            )
            return True
        return False

    def note_calls(self) -> None:
        """The run's note "metric_calls": the metric calls used as the progress line shows them
        (docs/runs.md), of them replayed; the report gives the same count."""
        with self._lock:
            calls = {"used": self.progress.calls, "replayed": self.progress.replayed}
        self.store.set_note(self.run_id, "metric_calls", calls)

    def context(self) -> EngineContext:
        """The engine's view of the run."""
        cfg, plan = self.cfg, self.plan
        return EngineContext(
            seed_candidate=self.seed,
            train=self.train,
            val=self.val,
            evaluate=self.evaluate,
            reflect=self.reflect,
            record_proposal=self.record_proposal,
            record_lineage=self.record_lineage,
            should_stop=self.should_stop,
            max_metric_calls=self.engine_budget,
            patience=plan.patience,
            fit_to_budget=plan.fit_to_budget,
            settings=plan.settings,
            seed=cfg.engine.seed,
            minibatch_size=cfg.engine.reflection_minibatch_size,
            log=self.say,
            engine_log=self.engine_log,
            models=self.models,
            max_side_info_chars=cfg.engine.max_side_info_chars,
            program_run=(
                ProgramRun(
                    artifact=self.project.artifact,
                    artifact_settings=cfg.artifact,
                    score_output=self.score_output,
                    record_failure=self.record_failure,
                    predictor_feedback=getattr(self.project.metric.fn, "for_predictor", None),
                )
                if plan.runs_program
                else None
            ),
        )

    # -- driving and ending ----------------------------------------------------------------

    def drive(self, engine: Engine) -> RunOutcome:
        """Run `engine` to its end, record how the run ended, and write the best candidate.

        Raises:
            RunAborted: too many evaluations failed (the run is marked aborted).
            KeyboardInterrupt: Ctrl-C (the run is marked stopped, resumable).
        """
        try:
            try:
                outcome = self._drive(engine)
            finally:
                self.executor.close()
        except BaseException as exc:
            self.tracker.end(self.store, self.run_id, failed=exc)
            raise
        self.tracker.end(self.store, self.run_id)
        return outcome

    def _drive(self, engine: Engine) -> RunOutcome:
        store, run_id = self.store, self.run_id
        outcome: EngineOutcome | None
        try:
            outcome = engine.optimize(self.context())
            if self._aborted:  # the engine caught the abort (dspy.GEPA scores a failure)
                raise self._aborted[0]
        except BudgetExhausted:
            # A refused call stopped the engine mid-step: the records hold the run so far.
            outcome = None
        except KeyboardInterrupt:
            self.progress.done()
            store.set_status(run_id, "stopped", error="interrupted")
            self.say(f"\nstopped; everything so far is recorded. Resume: {self._resume()}")
            raise
        except RunAborted as exc:
            self.progress.done()
            store.set_status(run_id, "aborted", error=str(exc))
            raise
        except Exception as exc:
            self.progress.done()
            store.set_status(run_id, "failed", error=f"{type(exc).__name__}: {exc}")
            raise
        self.progress.done()
        try:
            return self.finish(outcome)
        except KeyboardInterrupt:  # in the confirmation: the search is recorded, resumable
            store.set_status(run_id, "stopped", error="interrupted")
            self.say(
                f"\nstopped in the confirmation; everything so far is recorded. Resume: "
                f"{self._resume()}"
            )
            raise

    def val_mean(self, cid: str) -> float | None:
        """A candidate's val mean by skynet.mean (the engine's own counts every error as 0);
        None until every val item is recorded."""
        seen = self.val_outcomes.get(cid, {})
        return mean_of(seen.values()).value if len(seen) == len(self.val) else None

    def finish(self, outcome: EngineOutcome | None) -> RunOutcome:
        """The engine returned (None: a refused call stopped it): its lineage, the best
        candidate, what stopped the run; the run marked finished."""
        store, run_id, budget, progress = self.store, self.run_id, self.budget, self.progress
        if outcome is not None:
            # The engine's lineage as it returns it, for the candidates it did not record as
            # they were accepted (a candidate found again, e.g. by a merge: the first stands).
            for index, candidate in enumerate(outcome.candidates):
                parents = [outcome.candidates[p] for p in outcome.parents[index] if p is not None]
                self.record_lineage(candidate, parents)
        if self.models.budget.refusal is not None:
            self.should_stop()  # names the refusal as what stopped the run
            # Stopped mid-step: the engine's own scores may hold items it never evaluated.
            # The best: the largest gain over the seed among those whose val items are recorded.
            best = self._best_recorded()
        else:
            assert outcome is not None
            best = self._may_be_named(dict(outcome.best_candidate))
        stopped_by = self.stopped_by or (outcome.stopped_by if outcome is not None else "")
        if not stopped_by and budget is not None and progress.calls >= budget:
            stopped_by = f"max_metric_calls = {budget} reached"
        if stopped_by:
            store.set_note(run_id, "stopped_by", stopped_by)
            self.say(f"stopped: {stopped_by}; the best so far is kept")
        if budget is not None and progress.calls > budget:
            # gepa (and dspy.GEPA) stop between iterations, never inside one.
            replays = (
                f"; {progress.replayed} of the calls were replayed from the records, not scored "
                "again"
                if progress.replayed
                else ""
            )
            self.say(
                f"metric calls {progress.calls} of {budget}, {progress.calls - budget} over "
                f"max_metric_calls: the {self.plan.name} engine checks the budget only when an "
                f"iteration starts, and lets the last iteration's evaluations finish{replays}"
            )
        if self.selection:
            best = self._select_on_holdout(best)
        best_id = self.cid(best)
        store.set_best(run_id, best_id)
        best_path = self.run_dir / self.project.artifact.best_file
        self.project.artifact.save(best, best_path)
        self.note_calls()
        self.confirm(best)
        store.set_status(run_id, "finished")
        return RunOutcome(
            run_id=run_id,
            status="finished",
            best_candidate=best,
            best_path=best_path,
            seed_val=self.val_mean(self.seed_id),
            best_val=self.val_mean(best_id),
            stopped_by=stopped_by,
        )

    def _each(self, jobs: Sequence[tuple[Any, ...]], do: Callable[..., Any], *, name: str) -> list:
        """do(*job) for every job, [engine] concurrency at once (after the engine: the
        selection and the confirmation); the results in the jobs' order."""
        workers = max(1, min(self.cfg.engine.concurrency, len(jobs)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
            return list(pool.map(lambda job: do(*job), jobs))

    def _select_on_holdout(self, engine_best: Candidate) -> Candidate:
        """[engine] select = "holdout": the seed and the top candidates by val score (up to
        select_top; the engine's choice always among them) scored on the selection items, and
        the best chosen there by the rule of skynet.mean.choose_best (the largest gain over the
        seed on the items both counted). Val ranked them; it does not choose. Recorded in the
        note "selection"."""
        complete = {
            cid: seen for cid, seen in self.val_outcomes.items() if len(seen) == len(self.val)
        }
        contents = {row.id: dict(row.content) for row in self.store.candidates(self.run_id)}
        contents.setdefault(self.seed_id, dict(self.seed))

        def val_mean(cid: str) -> float:
            value = mean_of(complete[cid].values()).value
            return -1.0 if value is None else value

        ranked = sorted(
            (cid for cid in complete if cid in contents and cid != self.seed_id),
            key=val_mean,
            reverse=True,  # sorted is stable: ties keep the order candidates were made in
        )
        top = ranked[: self.cfg.engine.select_top]
        chosen_by_engine = self.cid(engine_best)
        if chosen_by_engine != self.seed_id and chosen_by_engine not in top:
            contents.setdefault(chosen_by_engine, dict(engine_best))
            top = [chosen_by_engine, *top[: self.cfg.engine.select_top - 1]]
        pool = [self.seed_id, *top]
        self.say(
            f"selecting: {len(pool)} candidates (the seed and the top {len(top)} by val) on "
            f"{len(self.selection)} held-out selection items"
        )
        outcomes: dict[str, dict[str, tuple[float | None, str | None, bool]]] = {}
        lock = threading.Lock()

        def one(cid: str, item: Item) -> None:
            try:
                result = self.recorded(
                    contents[cid], item, lambda: self._evaluated(contents[cid], item)
                )
            except BudgetExhausted:
                return
            with lock:
                outcomes.setdefault(cid, {})[item.id] = (result.score, result.error_kind, result.ok)

        jobs = [(cid, item) for cid in pool for item in self.selection]
        self._each(jobs, one, name="select")
        scored = {
            cid: outcomes[cid] for cid in pool if len(outcomes.get(cid, {})) == len(self.selection)
        }
        named = choose_best(
            self.seed_id,
            scored,
            preferred=None,
            max_error_share=self.cfg.engine.max_error_share,
        )
        self.store.set_note(
            self.run_id,
            "selection",
            {
                "mode": "holdout",
                "items": len(self.selection),
                "candidates": pool,
                "scores": {cid: mean_of(seen.values()).value for cid, seen in scored.items()},
                "chosen": named,
                "engine_choice": chosen_by_engine,
            },
        )
        if named != chosen_by_engine:
            self.say(
                f"selection: {named} was chosen on the selection items over the engine's "
                f"choice {chosen_by_engine}"
            )
        return contents.get(named, engine_best)

    def confirm(self, best: Candidate) -> None:
        """The confirmation: the seed and the best scored on every test item, recorded like any
        evaluation (split "test") and counted apart from the search's metric calls. Items chose
        nothing in the search, so best minus seed there is the run's honest gain
        (skynet.gain). Recorded results are reused (a resumed run pays nothing twice); what the
        model or the network failed on in an earlier process is asked again.

        The run's note "confirmation" says what was done: {"state": "done" | "off" |
        "no test split" | "stopped", "items": N, "calls": made now, "stopped_by": why}.
        """
        test = self.project.dataset.test
        if not test:
            self.store.set_note(self.run_id, "confirmation", {"state": "no test split"})
            return
        if not self.cfg.budget.confirm:
            self.store.set_note(self.run_id, "confirmation", {"state": "off", "items": len(test)})
            return
        self.models.budget.release_aside()  # the confirmation's to spend now
        sides = list({self.cid(c): c for c in (self.seed, best)}.items())
        self.say(
            f"confirming: {'the seed and the best' if len(sides) == 2 else 'the seed (the best)'}"
            f" on {len(test)} test items (held out: they chose nothing)"
        )
        stopped_by: list[str] = []

        def one(cid: str, candidate: Candidate, item: Item) -> bool:
            """Score one (candidate, item); False when the money budget refused it."""
            found = self.store.find_evaluation(self.run_id, cid, item.id, self.metric_hash)
            if found is not None and (cid, item.id) in self._retry:
                self.store.forget_evaluation(self.run_id, cid, item.id, self.metric_hash)
                found = None
            if found is not None or stopped_by:
                return False
            try:
                result = self._evaluated(candidate, item)
            except BudgetExhausted as exc:
                stopped_by.append(str(exc).split(". Raise", 1)[0])
                return False
            self.store.record_evaluation(self.run_id, cid, "test", result, self.metric_hash)
            return True

        for cid, candidate in sides:
            self.store.add_candidate(self.run_id, cid, candidate)
        jobs = [(cid, candidate, item) for cid, candidate in sides for item in test]
        made = sum(self._each(jobs, one, name="confirm"))
        note: dict[str, Any] = {
            "state": "stopped" if stopped_by else "done",
            "items": len(test),
            "calls": made,
        }
        if stopped_by:
            note["stopped_by"] = stopped_by[0]
            self.say(f"confirmation stopped: {stopped_by[0]}; the gain is on the items scored")
        self.store.set_note(self.run_id, "confirmation", note)

    def _best_recorded(self) -> Candidate:
        """The engine named none (a refused call stopped it mid-step): the recorded candidate
        with the largest gain over the seed on the val items both have counted, among those
        whose every val item is recorded (ties: the earliest; none: the seed)."""
        return self._may_be_named(None)

    def _may_be_named(self, chosen: Candidate | None) -> Candidate:
        """`chosen`, unless faults that were not its own carried it (skynet.mean.choose_best):
        then the candidate with the largest gain over the seed on the val items both have
        counted. Said in the run's output and recorded as a note."""
        complete = {
            cid: seen for cid, seen in self.val_outcomes.items() if len(seen) == len(self.val)
        }
        contents = {row.id: dict(row.content) for row in self.store.candidates(self.run_id)}
        contents.setdefault(self.seed_id, dict(self.seed))
        order = [cid for cid in contents if cid in complete]
        wanted = None if chosen is None else self.cid(chosen)
        named = choose_best(
            self.seed_id,
            {cid: complete[cid] for cid in order},
            preferred=wanted,
            max_error_share=self.cfg.engine.max_error_share,
        )
        if chosen is None:
            return contents.get(named, dict(self.seed))
        if named == wanted or named not in contents:
            return chosen
        why = (
            f"candidate {wanted} was not named best: more of its val items were left out "
            f"(metric, model or network faults) than the seed's, by more than [engine] "
            f"max_error_share = {self.cfg.engine.max_error_share:g}; the best is {named}, "
            "compared on the items both have counted"
        )
        self.store.set_note(self.run_id, "best_passed_over", why)
        self.say(why)
        return contents[named]
