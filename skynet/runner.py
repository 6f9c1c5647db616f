"""One optimization run, end to end: project → self-test → engine → records → best candidate.

Resuming a run replays it: the engine runs again with the same seed, and every evaluation and
model call already recorded is served from the records (the run store and the call cache), so
nothing recorded is paid for twice and the engine reaches the same state it was killed in.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from skynet.contract import Metric
from skynet.data import Item
from skynet.engine import Candidate, Engine, capabilities, get_engine
from skynet.errors import BudgetExhausted, ConfigError, ContractError, RunAborted, SkynetError
from skynet.evaluation import Evaluation, Result
from skynet.gain import Gain, paired_gain
from skynet.mean import Mean, Outcome, mean_of_results, paired_scores
from skynet.models import Models
from skynet.plan import EnginePlan, resolve_engine
from skynet.project import Project, self_test
from skynet.runs import EVALUATION, RunStore
from skynet.runs.lock import Writer, one_writer
from skynet.runs.store import RunRow
from skynet.session import (
    Progress,
    RunOutcome,
    RunSession,
    SelfTested,
    candidate_id,
    note_setup,
    unsandboxed_warning,
    versions,
)

__all__ = [
    "RunAborted",
    "RunOutcome",
    "candidate_id",
    "run",
    "eval_target",
    "eval_targets",
    "gain_over",
    "evaluate_candidate",
    "evaluation_run",
    "EvaluationOutcome",
    "rescore",
    "RescoreOutcome",
    "dry_run",
    "DryRunEstimate",
    "unsandboxed_warning",
]


def _start(project: Project) -> tuple[Models, EnginePlan, Engine, int, SelfTested]:
    """What a run and a dry run both do before spending: the model session, the metric's
    self-test, the engine plan, and the smallest budget that lets the engine propose once.

    Under a money budget ([budget] max_cost_usd) every call of the session reserves its worst
    case against it, and a role whose model has no known price is refused before any call.

    Raises:
        ContractError: the metric failed its self-test.
        ConfigError: a money budget with a role whose model has no known price.
    """
    models = project.models()  # price-checked before the self-test: a judge metric calls models
    if project.lms:
        from skynet.models.dspy_lm import adopt

        for lm in project.lms:
            adopt(lm, models)
    check_models = getattr(project.artifact, "check_models", None)
    if check_models is not None:
        check_models(models)  # a DSPy program's own LMs, taken over as task calls
    plan = resolve_engine(project)  # the engine's options are checked before any model call
    with models.overheard() as calls:  # metered now, recorded once the run exists
        report = self_test(project)
    if not report.ok:
        raise ContractError(report.summary(), check=report.failures[0].check)
    engine = get_engine(plan.name)
    needed = engine.min_metric_calls(
        train=len(project.dataset.train),
        val=len(project.dataset.val),
        minibatch_size=project.config.engine.reflection_minibatch_size,
    )
    return models, plan, engine, needed, SelfTested(report=report, calls=tuple(calls))


def run(
    project: Project,
    *,
    resume: str | None = None,
    out: IO[str] | None = None,
) -> RunOutcome:
    """Optimize the project's artifact, as the project's one writer for the run's whole life
    (see skynet.runs.lock; another writer meanwhile is refused: ProjectBusy). The rest: `_run`."""
    command = "resume" if resume else "run"
    with one_writer(project.store_dir, command=command, run_id=resume) as writer:
        running: list[str] = []  # the run's id, once its row says "running"
        try:
            return _run(project, resume=resume, out=out, writer=writer, running=running)
        except BaseException as exc:
            _mark_ended(project, running, exc)
            if running and isinstance(exc, SkynetError):
                exc.run_id = running[0]  # what tells the user says how to resume it
            raise


def _mark_ended(project: Project, running: list[str], exc: BaseException) -> None:
    """A run that raised with its row still "running" (between its start and its engine, or
    after the engine) is marked stopped (interrupted) or failed, never left running. A store
    too damaged to take the mark keeps the first error as the one said."""
    if not running:
        return
    try:
        with project.open_store() as store:
            if store.get_run(running[0]).status != "running":
                return  # the engine's own handlers said how it ended
            if isinstance(exc, KeyboardInterrupt):
                store.set_status(running[0], "stopped", error="interrupted")
            else:
                store.set_status(running[0], "failed", error=f"{type(exc).__name__}: {exc}")
    except SkynetError:
        pass


def _run(
    project: Project,
    *,
    resume: str | None,
    out: IO[str] | None,
    writer: Writer,
    running: list[str] | None = None,
) -> RunOutcome:
    """Optimize the project's artifact; record everything; write the best candidate.

    Raises:
        ContractError: the metric failed its self-test (nothing was spent on the task).
        ConfigError: the budget is too small to propose once, or the run to resume is unknown.
        RunAborted: too many items errored.
    """
    models, plan, engine, needed, tested = _start(project)
    budget = plan.max_metric_calls
    if budget is not None and budget < needed:
        train, val = project.dataset.train, project.dataset.val
        minibatch = min(project.config.engine.reflection_minibatch_size, len(train))
        full_evals = project.config.budget.max_full_evals
        given, fix = f"budget.max_metric_calls = {budget}", f"--max-metric-calls {needed} or more"
        if full_evals is not None:  # the budget is full_evals x the items of one full evaluation
            given = f"budget.max_full_evals = {full_evals} ({budget} metric calls)"
            fix = (
                f"max_full_evals = {-(-needed * full_evals // budget)} or more (or "
                f"max_metric_calls = {needed})"
            )
        # Beyond gepa's least budget: an engine that also scores the child on val (gepa-async)
        # is said so; another engine's excess is said as a count.
        more = needed - len(val) - 2 * minibatch
        then = (
            f", then the child on the {more} val items"
            if more == len(val)
            else (f", then {more} more" if more > 0 else "")
        )
        raise ConfigError(
            f"{given} is too small: the "
            f"{plan.name} engine needs at least {needed} ({len(val)} val items for the seed, "
            f"then a reflection step on {minibatch} train items, twice{then}) to propose once; "
            f"use {fix}"
        )
    session = RunSession(
        project,
        models=models,
        plan=plan,
        resume=resume,
        writer=writer,
        out=out,
        running=running,
        self_tested=tested,
    )
    return session.drive(engine)


@dataclass(frozen=True, kw_only=True)
class EvaluationOutcome:
    """One candidate scored on one split, and where it was recorded.

    Attributes:
        run_id: the run the evaluations are recorded in.
        candidate_id: the candidate's id in that run.
        split: the split evaluated.
        results: one Result per item of the split, in the split's order.
        mean: the candidate's mean by the rule of skynet.mean: its own failures count as 0,
            metric and model faults are left out and counted.
        stopped_by: why the evaluation stopped before the split's end ("" when it did not):
            the money budget refused a call.
    """

    run_id: str
    candidate_id: str
    split: str
    results: list[Result]
    mean: Mean
    stopped_by: str = ""


def eval_target(
    project: Project, candidate: str, *, run: str | None = None
) -> tuple[RunRow | None, Candidate, str, str]:
    """What `skynet eval --candidate CANDIDATE [--run RUN]` records, and where: (the run to
    record into, or None for a new evaluation-only run; the candidate; its label; a note to
    show, or "").

    `candidate` is "best", "seed" or a candidate file (the artifact's own format, relative to
    the project). `best` is the best candidate of --run, else of the latest run that has one.
    `seed` and a file are recorded in --run, else in the latest optimization run (so the
    report's baseline gets its test column), else, on a project with no optimization run, in an
    evaluation-only run. The project's seed is the run's seed candidate, or the artifact as it
    is now. A run made on other data is not recorded into: the note says so.

    Raises:
        ConfigError: no such run, no best candidate yet, or a candidate file that cannot be read.
    """
    path = project.store_path
    store = RunStore(path) if path.exists() else None
    row = None
    if run:
        if store is None:
            raise ConfigError(
                f"{path.parent}: no runs recorded here; leave out --run to record the "
                "evaluation in a run of its own"
            )
        row = store.get_run(run)
    elif store is not None:
        optimizations = [r for r in store.list_runs() if r.engine != EVALUATION]
        if candidate == "best":
            row = next((r for r in optimizations if r.best_candidate_id), None)
        else:
            row = optimizations[0] if optimizations else None
    if candidate == "best":
        if row is None:
            raise ConfigError(
                "no finished run has a best candidate yet: `skynet run` makes one, or score the "
                "seed with `skynet eval --candidate seed`"
            )
        if not row.best_candidate_id:
            why = "it is an evaluation" if row.engine == EVALUATION else f"it is {row.status}"
            raise ConfigError(
                f"run {row.id} has no best candidate ({why}); name a finished run with --run, "
                "or score the seed with --candidate seed"
            )
    wanted = None
    if row is not None and candidate in ("best", "seed"):
        wanted = row.best_candidate_id if candidate == "best" else row.seed_candidate_id
    if row is not None and store is not None and wanted is not None:
        found = [c for c in store.candidates(row.id) if c.id == wanted]
        if not found:
            raise ConfigError(f"run {row.id} has no {candidate} candidate recorded")
        chosen, label = dict(found[0].content), f"{candidate} ({wanted})"
    elif candidate == "seed":
        chosen, label = dict(project.artifact.components), "seed"
    else:
        given = Path(candidate).expanduser()
        if not given.is_absolute() and not given.exists():
            given = project.dir / given  # relative to the project, like the config's paths
        chosen = project.artifact.read_candidate(
            given,
            inputs=project.config.data.inputs,
            key="--candidate",
            missing="no such candidate file; give --candidate best, seed or a file",
        )
        label = candidate
    note = ""
    if row is not None and row.dataset_hash != project.dataset.hash:
        # Its items are not these: the evaluation goes in a run of its own.
        note = (
            f"run {row.id} was made on other data (dataset hash {row.dataset_hash[:12]} vs "
            f"{project.dataset.hash[:12]} now): recording in an evaluation-only run"
        )
        label = f"{label} of run {row.id}" if candidate == "best" else label
        row = None
    if store is not None:
        store.close()
    return row, chosen, label, note


EvalTarget = tuple[RunRow | None, Candidate, str, str]  # what eval_target returns


def eval_targets(
    project: Project, candidate: str, against: str, *, run: str | None = None
) -> tuple[EvalTarget, EvalTarget]:
    """What `skynet eval --candidate A --against B [--run RUN]` records, and where: eval_target
    of each side, A's first.

    Both sides are taken from one run, so that `--candidate best --against seed` pits a run's
    best against that run's own seed: --run when given, else the run whose best "best" names
    (on either side), else the run A is recorded in. A side that run does not fit (made on
    other data) goes to an evaluation-only run, as with one candidate.

    Raises:
        ConfigError: as eval_target, for either side.
    """
    # "best" picks its run (the latest with a best); the other side follows it.
    names = (against, candidate) if against == "best" and candidate != "best" else None
    first, second = names or (candidate, against)
    leading = eval_target(project, first, run=run)
    following = eval_target(
        project, second, run=run or (leading[0].id if leading[0] is not None else None)
    )
    return (following, leading) if names else (leading, following)


def gain_over(a: EvaluationOutcome, b: EvaluationOutcome, *, project: Project) -> Gain:
    """a minus b on their split, paired by item (skynet.gain): an item left out for one side (a
    metric or model fault) is left out for both. A scorer package that corrects for its own
    error (the judge) measures it (skynet.packages.package_gain).

    The Gain is "b minus a" in its own terms, called with the sides swapped: its `b_mean` is
    a's mean and its `a_mean` is b's, over the items both counted.
    """

    def outcomes(done: EvaluationOutcome) -> dict[str, Outcome]:
        return {r.item_id: (r.score, r.error_kind, r.ok) for r in done.results}

    from skynet.packages import package_gain

    _, theirs, mine = paired_scores(outcomes(b), outcomes(a))
    corrected = package_gain(
        project.config.as_dict(),
        project.dir,
        list(theirs),
        list(mine),
        split=a.split,
        val_estimate=None,
    )
    return corrected or paired_gain(theirs, mine, split=a.split)


def evaluation_run(project: Project) -> str:
    """Record a new evaluation-only run (engine "eval") for `skynet eval` on a project that has
    no optimization run to record into. It holds the project's config, dataset and metric
    hashes like any run, has no best candidate, and cannot be resumed as an optimization.

    Returns:
        The new run's id.
    """
    cfg = project.config
    with project.open_store() as store:
        store.check_integrity()  # an evaluation that cannot record must not start
        run_id = store.create_run(
            config=cfg.as_dict(),
            dataset_hash=project.dataset.hash,
            metric_hash=project.metric.source_hash,
            seed=cfg.engine.seed,
            engine=EVALUATION,
            budget={},
            versions=versions(),
        )
        note_setup(project, store, run_id)
        return run_id


def evaluate_candidate(
    project: Project,
    candidate: Candidate,
    *,
    split: str,
    run_id: str,
    label: str = "",
    out: IO[str] | None = None,
) -> EvaluationOutcome:
    """Score one candidate on a split (e.g. test) and record it in run `run_id`.

    Results already recorded in that run for this candidate, item and metric are reused, not
    made again. In an evaluation-only run (see `evaluation_run`) the candidate is listed under
    `label` (e.g. "seed", a file name) and the run is marked finished when every item is
    recorded (stopped on Ctrl-C, failed on any other exception).

    Items are evaluated [engine] concurrency at once, as a run's are, each recorded as it
    finishes, so a stop (Ctrl-C, the money budget) keeps every finished item; the results are in
    the split's order. `out` gets a progress line as items finish (None: none).

    Raises:
        ConfigError: unknown split or run, or an empty split.
    """
    items = getattr(project.dataset, split, None)
    if items is None or split not in ("train", "val", "test"):
        raise ConfigError(f"unknown split '{split}'; splits: train, val, test")
    if not items:
        raise ConfigError(f"the {split} split is empty; give it items in skynet.toml [data]")
    # [budget] max_cost_usd holds an evaluation too (its own spend): every call reserves first.
    models = project.models()
    store = project.open_store()
    store.check_integrity()
    row = store.get_run(run_id)
    evaluating_only = row.engine == EVALUATION
    models.subscribe(lambda record: store.record_call(run_id, record))
    evaluation = project.evaluation(models)
    cid = candidate_id(candidate, project.fingerprint)
    store.add_candidate(run_id, cid, candidate)
    if evaluating_only:
        listed = dict(row.notes.get("evaluated") or {})
        listed[cid] = label or listed.get(cid) or "candidate"
        store.set_note(run_id, "evaluated", listed)
        store.set_status(run_id, "running")
    recorded: dict[str, Result] = {}  # read once, not once per item under the store's lock
    for earlier in store.evaluations(run_id, candidate_id=cid):
        if earlier.metric_hash == project.metric.source_hash:
            recorded.setdefault(earlier.item_id, earlier.result())
    stop = threading.Event()  # set: items not yet started are skipped
    refused: list[str] = []

    def one(item: Item) -> tuple[Result | None, bool]:
        """The item's result (None: skipped, or refused by the budget) and whether it was
        already recorded."""
        if stop.is_set():
            return None, False
        found = recorded.get(item.id)
        if found is not None:
            return found, True
        try:
            found = evaluation(candidate, item)
        except BudgetExhausted as exc:  # not sent: nothing to record for this item
            refused.append(str(exc))
            stop.set()
            return None, False
        store.record_evaluation(run_id, cid, split, found, project.metric.source_hash)
        return found, False

    progress = None
    if out is not None:
        progress = _EvalProgress(budget=len(items), models=models, out=out)
    done: dict[int, Result] = {}
    workers = max(1, min(project.config.engine.concurrency, len(items)))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="skynet-eval")
    try:
        futures = {pool.submit(one, item): index for index, item in enumerate(items)}
        for future in as_completed(futures):
            found, replayed = future.result()
            if found is None:
                continue
            done[futures[future]] = found
            if progress is not None:
                progress.add(found, replayed=replayed)
    except BaseException as exc:
        stop.set()
        try:
            pool.shutdown(wait=True)  # the items in flight finish and are recorded
            if progress is not None:
                progress.done()
        finally:
            if evaluating_only and isinstance(exc, KeyboardInterrupt):
                store.set_status(run_id, "stopped", error="interrupted")
            elif evaluating_only and isinstance(exc, Exception):
                store.set_status(run_id, "failed", error=f"{type(exc).__name__}: {exc}")
        raise
    pool.shutdown(wait=True)
    if progress is not None:
        progress.done()
    results = [done[index] for index in sorted(done)]
    stopped_by = refused[0] if refused else ""
    if evaluating_only:
        if stopped_by:
            store.set_status(run_id, "stopped", error=stopped_by)
        else:
            store.set_status(run_id, "finished")
    return EvaluationOutcome(
        run_id=run_id,
        candidate_id=cid,
        split=split,
        results=results,
        mean=mean_of_results(results),
        stopped_by=stopped_by,
    )


@dataclass
class _EvalProgress(Progress):
    """`evaluate_candidate`'s progress line: items done of the split, the mean so far, the cost
    (`calls` counts the items done, `budget` the split's)."""

    results: list[Result] = field(default_factory=list)

    def add(self, result: Result, *, replayed: bool) -> None:
        self.results.append(result)
        self.calls += 1
        self.replayed += replayed
        self.errors += not result.ok
        self.tick()

    def line(self) -> str:
        mean = mean_of_results(self.results).value
        shown = "—" if mean is None else f"{mean:.3f}"
        tail = self.cost_and_counts(("task", "metric"))
        return f"evaluated {self.calls}/{self.budget} · mean {shown} · {tail}"


def _no_task(candidate: Candidate, input: dict[str, Any]) -> Any:
    raise AssertionError("a rescore never runs the task")


@dataclass(frozen=True, kw_only=True)
class RescoreOutcome:
    """What `rescore` did. Every count is of recorded evaluations."""

    metric_hash: str
    rescored: int
    metric_errors: int
    task_errors_kept: int
    already_current: int
    not_rescorable: int
    items_gone: int


def rescore(project: Project, run_id: str) -> RescoreOutcome:
    """Score a run's saved outputs again with the project's current metric.

    The task model is not called: each saved output is scored with the Observation recorded
    when it was made. New results are recorded under the current metric's hash, so the report
    counts them and marks what is left under an older metric as stale.

    Raises:
        ConfigError: unknown run.
    """
    data = project.dataset
    with project.open_store() as store:
        return rescore_run(store, run_id, project.metric, [*data.train, *data.val, *data.test])


def rescore_run(
    store: RunStore, run_id: str, metric: Metric, items: Sequence[Item]
) -> RescoreOutcome:
    """`rescore` from its parts: the store, the run, the metric and the items (by id) the run
    was made on; what skynet.rescore calls for a run made from Python."""
    store.get_run(run_id)
    current = metric.source_hash
    scorer = Evaluation(metric, _no_task)
    by_id = {item.id: item for item in items}
    rows = store.evaluations(run_id)
    done = {(r.candidate_id, r.item_id) for r in rows if r.metric_hash == current}
    counts = dict(rescored=0, metric_errors=0, task_errors_kept=0, not_rescorable=0, items_gone=0)
    for row in rows:
        key = (row.candidate_id, row.item_id)
        if key in done:
            continue
        done.add(key)
        item = by_id.get(row.item_id)
        if item is None:
            counts["items_gone"] += 1
            continue
        old = row.result()
        if row.error_kind == "task" and not old.repetitions:
            # No output to score: the error stands under the new metric.
            store.record_evaluation(run_id, row.candidate_id, row.split, old, current)
            counts["task_errors_kept"] += 1
            continue
        if row.output_is_repr or any(r.get("output_is_repr") for r in row.repetitions):
            counts["not_rescorable"] += 1
            continue
        # Every repetition is scored again from its saved output: no task call.
        result = scorer.rescore(item, old)
        store.record_evaluation(run_id, row.candidate_id, row.split, result, current)
        counts["rescored"] += 1
        counts["metric_errors"] += not result.ok
    store.set_note(run_id, "metric_hash", current)
    already = len({(r.candidate_id, r.item_id) for r in rows if r.metric_hash == current})
    return RescoreOutcome(metric_hash=current, already_current=already, **counts)


@dataclass(frozen=True, kw_only=True)
class DryRunEstimate:
    """What `skynet run --dry-run` plans and expects to spend (USD None: a price is unknown)."""

    engine: str
    why: str
    planned_metric_calls: int
    min_metric_calls: int
    sampled_items: int
    task_usd_per_call: float | None
    judge_usd_per_call: float | None
    proposals: int | None  # None: the engine does not say (Engine.proposals_for)
    reflection_usd_per_call: float | None
    notes: tuple[str, ...]
    # The seed and the best on every test item after the search (0: no test split, or
    # [budget] confirm = false); counted apart from planned_metric_calls.
    confirmation_metric_calls: int = 0

    def confirmation_usd(self) -> float | None:
        """The confirmation's task and judge cost (None: either price is unknown)."""
        if not self.confirmation_metric_calls:
            return 0.0
        if self.task_usd_per_call is None or self.judge_usd_per_call is None:
            return None
        return (self.task_usd_per_call + self.judge_usd_per_call) * self.confirmation_metric_calls

    def total_usd(self) -> float | None:
        parts = [
            self.confirmation_usd(),
            None
            if self.task_usd_per_call is None
            else self.task_usd_per_call * self.planned_metric_calls,
            None
            if self.judge_usd_per_call is None
            else self.judge_usd_per_call * self.planned_metric_calls,
            None
            if self.reflection_usd_per_call is None or self.proposals is None
            else self.reflection_usd_per_call * self.proposals,
        ]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def dry_run(project: Project, *, sample: int = 3) -> DryRunEstimate:
    """Plan a run and estimate its cost from a few real, priced calls, recording no run.

    The seed candidate runs on up to `sample` val items (the calls land in the call cache, so the
    real run does not pay for them again). Reflection cost is estimated from the prompt GEPA will
    send (template, minibatch of feedback, the seed's text) at the reflection model's price.

    Raises:
        ContractError: the metric failed its self-test.
    """
    cfg = project.config
    models, plan, _, needed, _ = _start(project)
    engine_name, why = plan.name, plan.why
    train, val = project.dataset.train, project.dataset.val
    minibatch = min(cfg.engine.reflection_minibatch_size, len(train))
    planned = plan.max_metric_calls or needed
    seed = dict(project.artifact.components)
    evaluation = project.evaluation(models, repeat=1)  # the sample runs each item once
    notes: list[str] = []
    task_costs: list[float | None] = []
    judge_before = models.ledgers["metric"].totals()
    feedback_chars = 0
    sampled = list(val[:sample])
    for item in sampled:
        result = evaluation(seed, item)
        obs = result.observation
        task_costs.append(None if obs is None else obs.cost_usd)
        feedback_chars += len(result.feedback or result.error or "") + len(str(result.output))
        if not result.ok:
            notes.append(f"item '{item.id}' errored in the sample: {result.error}")
    judge_after = models.ledgers["metric"].totals()
    task_per_call = (
        None
        if not task_costs or any(c is None for c in task_costs)
        else sum(c for c in task_costs if c is not None) / len(task_costs)
    )
    if task_per_call is None:
        notes.append(f"task cost unknown: no price for {cfg.models.task} (declare one)")
    elif cfg.artifact.repeat > 1:
        # The sample ran each item once; a run pays for `repeat` runs of each.
        task_per_call *= cfg.artifact.repeat
        notes.append(f"artifact.repeat = {cfg.artifact.repeat}: task cost counted that many times")
    judge_per_call = (judge_after.cost_usd - judge_before.cost_usd) / max(1, len(sampled))
    if judge_after.unpriced_calls > judge_before.unpriced_calls:
        judge_per_call = None
        notes.append("judge cost unknown: the metric model has no known price")
    # How many proposals the budget pays for, as the engine spends it (gepa's formula, which
    # Auto sizes budgets with, inverted); an engine that does not say: the cost is unknown.
    count = capabilities(engine_name).proposals_for
    proposals = None if count is None else count(planned, val=len(val), minibatch=minibatch)
    reflection_model = models.config.model_for("reflection")
    price = models.price(reflection_model)
    text = "\n".join(seed.values())
    prompt_chars = 900 + minibatch * (feedback_chars / max(1, len(sampled)) + 200) + len(text)
    if proposals is None:
        reflection_per_call = None
        notes.append(
            f"reflection cost unknown: engine '{engine_name}' does not say how many "
            "proposals its budget pays for (Engine.proposals_for)"
        )
    elif price is None:
        reflection_per_call = None
        notes.append(f"reflection cost unknown: no price for {reflection_model} (declare one)")
    else:
        # ~4 characters a token; the reply is about as long as the text it rewrites.
        reflection_per_call = price.cost(int(prompt_chars / 4), int(len(text) / 4) + 64)
    return DryRunEstimate(
        engine=engine_name,
        why=why,
        planned_metric_calls=planned,
        min_metric_calls=needed,
        sampled_items=len(sampled),
        task_usd_per_call=task_per_call,
        judge_usd_per_call=judge_per_call,
        proposals=proposals,
        reflection_usd_per_call=reflection_per_call,
        notes=tuple(notes),
        # The worst case: the best differs from the seed, so both are scored.
        confirmation_metric_calls=2 * len(project.dataset.test) if cfg.budget.confirm else 0,
    )
