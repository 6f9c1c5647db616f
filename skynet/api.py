"""Skynet from Python: `optimize`, `evaluate` and `resume` run the pipeline `skynet run` and
`skynet eval` run, with the project's pieces given as Python objects instead of files.

    result = skynet.optimize(
        "Answer with the capital city.",           # the seed: what is optimized
        metric=score,                               # the metric contract, or a scorer's name
        train=rows, val=rows,                       # dicts, dspy.Example, a DataFrame, a path
        inputs=["country"], outputs=["capital"],
        user="Country: {country}",
        models={"task": "openai/gpt-4.1-mini"}, engine="auto", budget={"max_metric_calls": 200},
    )
    result.best, result.best_score, result.report()

The keyword tables (`models`, `engine`, `budget`, `artifact`, `metric` as a table) are
skynet.toml's tables: the same keys, the same checks, the same messages (naming the call where a
file's message names skynet.toml). The metric is checked exactly as metric.py is, self-test
included, before any model call. Runs are recorded in `store` (default ./.skynet, the folder
`skynet runs` and `skynet show` read from the current directory; another is read with
`--store PATH`): they are ordinary runs.
"""

from __future__ import annotations

import copy
import html
import inspect
import os
import reprlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from skynet.contract import Metric
from skynet.dspy_metric import fit_to_artifact
from skynet.errors import ConfigError, ContractError

if TYPE_CHECKING:
    from skynet.gain import Gain
    from skynet.runner import RescoreOutcome
    from skynet.runs.detail import DetailedResults

__all__ = ["Code", "EvalResult", "RunResult", "evaluate", "optimize", "rescore", "resume"]

_CALL = "skynet.optimize()"
_EVALUATE = "skynet.evaluate()"


class Code:
    """A code seed: the source of a module defining `run(input)`, or the path of its file.

    `skynet.Code("def run(input):\\n    return ...")` or `skynet.Code("solver.py")`. Each
    candidate runs in a sandbox (bubblewrap) of its own, as `[artifact] kind = "code"` does.
    """

    def __init__(self, source_or_path: str | os.PathLike[str]) -> None:
        text = os.fspath(source_or_path)
        as_path = Path(text).expanduser()
        if isinstance(source_or_path, os.PathLike) or (
            "\n" not in text and text.endswith(".py") and as_path.is_file()
        ):
            from skynet.textfile import read_text

            self.path: Path | None = as_path.absolute()
            self.source = read_text(
                self.path, what="code", key="skynet.Code(path)", missing="no such code file"
            )
        else:
            self.path, self.source = None, text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Code) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    def __repr__(self) -> str:
        first = self.source.strip().splitlines()[0] if self.source.strip() else ""
        return f"Code({first[:60]!r}{' …' if len(self.source) > len(first) else ''})"


@dataclass(frozen=True)
class RunResult:
    """What `skynet.optimize` returns: the best candidate in the seed's own kind, and the run.

    Attributes:
        best: the best candidate, of the seed's kind: a str (instructions), a dict of
            components, a dspy.Module (its `.detailed_results` dspy.GEPA's, as track_stats=True
            gives it: skynet.runs.dspy_detail), or a skynet.Code.
        best_candidate: the best candidate's components (name -> text).
        best_score, baseline_score: mean val scores of the best candidate and of the seed (None
            when not every val item could be scored).
        run_id: the run's id in `store`: `skynet show RUN` reports it (`skynet show RUN
            --store STORE` where the store is not ./.skynet).
        status: "finished" (or "stopped" when a limit ended it early: see stopped_by).
        store: the folder holding runs.db.
        gain: the best's gain over the seed on the held-out test items, paired by item
            (a skynet.gain.Gain: split, n, estimate, low, high, p_value, verdict,
            val_estimate, ...), or None when there is none (no test split, `confirm = false`).
    """

    best: Any
    best_candidate: dict[str, str]
    best_score: float | None
    baseline_score: float | None
    run_id: str
    status: str
    stopped_by: str
    store: Path
    best_path: Path | None = None
    _summary: Callable[[], Any] = field(default=lambda: None, repr=False, compare=False)

    @property
    def gain(self) -> Gain | None:
        """The best's gain over the seed on the test items (the confirmation), paired by item,
        with its 95% interval, p-value and verdict; val_estimate is the same on val, where the
        best was chosen. None when either has no test evaluation."""
        summary = self._summary()
        return None if summary is None else summary.gain

    @property
    def candidates(self) -> list[dict[str, Any]]:
        """Every candidate of the run, in first-seen order: id, parents, components, val score."""
        summary = self._summary()
        return [
            {
                "id": c.id,
                "parents": list(c.parents),
                "candidate": dict(c.content),
                "val": c.val_score,
            }
            for c in summary.candidates
        ]

    @property
    def detailed_results(self) -> DetailedResults:
        """dspy.GEPA's `detailed_results` (`track_stats=True`) from the run store: the pool's
        candidate ids, parents, val_aggregate_scores, val_subscores ({item id: score} per
        candidate), per_val_instance_best_candidates (the Pareto sets),
        highest_score_achieved_per_val_task, best_outputs_valset, discovery_eval_counts,
        best_candidate (an id) and best_idx; a candidate is named by its id where gepa gives
        its index (skynet.runs.detail says which field maps to which)."""
        from skynet.runs.detail import detailed_results

        return detailed_results(self._summary())

    def report(self) -> str:
        """The text report `skynet show RUN` prints."""
        from skynet.runs.report import render_text

        return render_text(self._summary())

    def to_html(self, path: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Write the run's pages (overview, every item, every candidate, cost and time) as one
        self-contained, offline HTML file to `path`, as `skynet show RUN --html`; returns the
        path. Refused, as there: a database of the store (always), an existing file that is not
        a page Skynet wrote (unless force=True)."""
        from skynet.runs import RunStore
        from skynet.runs.report import check_html_target
        from skynet.view.pages import render_document

        target = check_html_target(
            path,
            self.store,
            force=force,
            given=f"RunResult.to_html({str(path)!r})",
            fix="give to_html() another path, e.g. to_html('report.html')",
            force_flag="force=True",
        )
        summary = self._summary()
        with RunStore(self.store / "runs.db") as store:
            page = render_document(store, summary)
        try:
            target.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"{target}: cannot write the report ({exc.strerror or exc}); give to_html() a "
                "path in a folder that exists"
            ) from None
        return target

    def _repr_html_(self) -> str:
        def score(value: float | None) -> str:
            return "—" if value is None else f"{value:.3f}"

        change = (
            f"{self.best_score - self.baseline_score:+.3f}"
            if self.best_score is not None and self.baseline_score is not None
            else "—"
        )
        texts = "".join(
            f"<tr><td><code>{html.escape(name)}</code></td>"
            f"<td><pre style='white-space:pre-wrap;margin:0'>{html.escape(text)}</pre></td></tr>"
            for name, text in self.best_candidate.items()
        )
        return (
            f"<div><b>skynet run {html.escape(self.run_id)}</b> · {html.escape(self.status)}"
            + (f" · {html.escape(self.stopped_by)}" if self.stopped_by else "")
            + "<table><tr><th></th><th>val</th></tr>"
            f"<tr><td>baseline</td><td>{score(self.baseline_score)}</td></tr>"
            f"<tr><td>best</td><td>{score(self.best_score)}</td></tr>"
            f"<tr><td>change</td><td>{change}</td></tr></table>"
            f"<table><tr><th>component</th><th>best candidate</th></tr>{texts}</table></div>"
        )


@dataclass(frozen=True)
class EvalResult:
    """What `skynet.evaluate` returns: one candidate scored on every row.

    Attributes:
        mean: the mean score (the candidate's own failures count as 0; metric and model faults
            are left out and counted in `left_out`); None when nothing could be scored.
        results: one skynet.Result per row, in order (`.score`, `.feedback`, `.output`, ...).
        left_out: rows left out of the mean (metric or model faults).
        run_id: the evaluation's run in `store`.
    """

    mean: float | None
    results: list[Any]
    left_out: int
    run_id: str
    store: Path
    stopped_by: str = ""
    _items: Sequence[Any] = field(default=(), repr=False, compare=False)

    def table(self) -> Any:
        """One row per scored row of data, in its order: `id`, `split`, the row's `input.*` and
        `expected.*` columns, `output`, `score`, `feedback`, `error`, `error_kind`, the
        metric's named `scores.*`, and the task's `model_calls`, `cost_usd` and `elapsed_ms`.

        Returns:
            A pandas DataFrame when pandas imports, else the rows as a list of dicts.
        """
        items = {item.id: item for item in self._items}
        rows = []
        for result in self.results:
            item = items.get(result.item_id)
            seen = result.observation
            rows.append(
                {
                    "id": result.item_id,
                    "split": "test",  # evaluate(data=) fills the test split, as `skynet eval`
                    **{f"input.{k}": v for k, v in (item.input if item else {}).items()},
                    **{f"expected.{k}": v for k, v in ((item and item.expected) or {}).items()},
                    "output": result.output,
                    "score": result.score,
                    "feedback": result.feedback,
                    "error": result.error,
                    "error_kind": result.error_kind,
                    **{f"scores.{k}": v for k, v in result.scores.items()},
                    "model_calls": seen.model_calls if seen else None,
                    "cost_usd": seen.cost_usd if seen else None,
                    "elapsed_ms": seen.elapsed_ms if seen else None,
                }
            )
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame(rows)

    def _repr_html_(self) -> str:
        shown = "—" if self.mean is None else f"{self.mean:.3f}"
        return (
            f"<div><b>skynet evaluation {html.escape(self.run_id)}</b>: mean {shown} over "
            f"{len(self.results) - self.left_out} row(s)"
            + (f", {self.left_out} left out" if self.left_out else "")
            + "</div>"
        )


def optimize(
    seed: Any,
    *,
    metric: Any,
    train: Any = None,
    val: Any = None,
    test: Any = None,
    data: Any = None,
    split: Mapping[str, Any] | None = None,
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
    id_column: str | None = None,
    user: str | None = None,
    models: Mapping[str, Any] | None = None,
    engine: Mapping[str, Any] | str | None = None,
    budget: Mapping[str, Any] | None = None,
    artifact: Mapping[str, Any] | None = None,
    store: str | os.PathLike[str] = ".skynet",
    out: IO[str] | None = None,
    resume: str | None = None,
    self_test: str | None = None,
    sections: Mapping[str, Mapping[str, Any]] | None = None,
) -> RunResult:
    """Optimize `seed` against `metric`: the run `skynet run` makes, from Python.

    Args:
        seed: the instructions (a str), components ({"name": text}), a prompt.md path, a
            dspy.Module, or a skynet.Code; with artifact={"kind": ...} naming a plugin's kind,
            the path of that kind's file (or None, with artifact={"path": ...}).
        metric: a function with the metric contract (`score(input, output, expected=None)`
            returning `(value, {"feedback": ...})`); a DSPy metric
            `(gold, pred, trace=None, pred_name=None, pred_trace=None)`; a built-in scorer's
            or scorer package's name ("exact", "xlam-tool-call", "judge", a plugin's), a
            package building its metric from the working folder's files and its section in
            `sections=`; or a [metric] table ({"name": ..., "options": {...}, "time_s": ...}).
        train, val, test: rows: a list of dicts, a list of dspy.Example, a pandas DataFrame, or
            a .jsonl/.csv/.json path. Without `val`, the train rows serve as val too (as
            gepa's and dspy.GEPA's valset=None: the val figure is then a train figure).
        data, split: all rows, split by seeded fractions ({"train": .5, "val": .3, "test": .2,
            "seed": 0}, the default), as [data] split in skynet.toml.
        inputs, outputs: the input and expected columns. Inferred when left out: inputs from the
            user template's placeholders, a dspy program's signature or the Examples'
            `with_inputs`; outputs are the remaining columns.
        id_column: the column holding each row's id ("id" is used when rows have one).
        user: the user-message template of a prompt seed, e.g. "Question: {question}".
        models, engine, budget, artifact: skynet.toml's tables; `engine="auto"` names the engine.
        store: the folder for runs.db and the call cache (default ./.skynet; the CLI reads
            another with `--store PATH`).
        out: where progress goes (default: stderr; in Jupyter, one updating line).
        resume: a run id in `store` to resume (see skynet.resume).
        self_test: [metric] self_test: "full" (the default), "contract" or "off".
        sections: skynet.toml's other tables by name, e.g. a scorer package's
            {"judge": {"model": ...}}.

    Returns:
        A RunResult.

    Raises:
        ConfigError: a bad table key or value (named, with the nearest known key), bad data,
            or an out= that is not a text stream.
        ContractError: the metric failed its checks or self-test (named); nothing was spent.
        DatasetError: a row lacks a column, or two rows share an id.
    """
    from skynet import runner
    from skynet.runs.report import summarize

    _check_out(out, _CALL)
    store_dir = Path(store).expanduser().absolute()
    if resume is not None:
        models, engine, budget, artifact = _recorded_tables(
            store_dir, resume, models=models, engine=engine, budget=budget, artifact=artifact
        )
    models, artifact, said, lm = _configured_lm(seed, models, artifact)
    if said:
        print(said, file=out or sys.stderr, flush=True)
    models, lms = _given_lms(models)
    project, kind = _project(
        seed,
        metric=metric,
        splits={"train": train, "val": val, "test": test, "data": data},
        fractions=split,
        inputs=inputs,
        outputs=outputs,
        id_column=id_column,
        user=user,
        tables={
            "models": models,
            "engine": engine,
            "budget": budget,
            "artifact": artifact,
            "metric": None if self_test is None else {"self_test": self_test},
            **_sections(sections, _CALL),
        },
        store_dir=store_dir,
        lm=lm,
        lms=lms,
    )
    if _train_as_val({"train": train, "val": val, "data": data}):
        print(TRAIN_AS_VAL, file=out or sys.stderr, flush=True)
    outcome = runner.run(project, resume=resume, out=_progress_stream(out))

    def summary() -> Any:
        return summarize(project.open_store(), outcome.run_id)

    best = dict(outcome.best_candidate)
    program = _as_seed_kind(kind, project, best)
    if kind == "dspy":  # dspy.GEPA(track_stats=True)'s, which DSPy's tutorials read off it
        from skynet.runs.dspy_detail import for_project

        program.detailed_results = for_project(project, summary())
    return RunResult(
        best=program,
        best_candidate=best,
        best_score=outcome.best_val,
        baseline_score=outcome.seed_val,
        run_id=outcome.run_id,
        status=outcome.status,
        stopped_by=outcome.stopped_by,
        store=store_dir,
        best_path=outcome.best_path,
        _summary=summary,
    )


def resume(run_id: str, seed: Any, **kwargs: Any) -> RunResult:
    """Resume run `run_id` of `store`: `skynet.optimize` with the same seed, metric and data
    (a Python function is not stored, so they are given again), what was recorded replayed,
    not paid again. The run's models, engine, budget and artifact tables are the recorded ones
    unless given.

    Raises:
        ConfigError: the run is unknown, finished, or was made on other data.
    """
    return optimize(seed, resume=run_id, **kwargs)


def evaluate(
    candidate: Any,
    *,
    metric: Any,
    data: Any,
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
    id_column: str | None = None,
    user: str | None = None,
    models: Mapping[str, Any] | None = None,
    artifact: Mapping[str, Any] | None = None,
    budget: Mapping[str, Any] | None = None,
    store: str | os.PathLike[str] = ".skynet",
    concurrency: int | None = None,
    out: IO[str] | None = None,
) -> EvalResult:
    """Score `candidate` (any seed kind `optimize` takes, or a RunResult's `best`) on every row
    of `data`, recorded as an evaluation run in `store` (what `skynet eval` records). The
    arguments not listed are `optimize`'s.

    Args:
        concurrency: rows evaluated at once (default: [engine] concurrency's default, 4); the
            endpoint's `max_concurrent`, when set lower, caps the model calls in flight.
        out: where progress goes (default: stderr; in Jupyter, one updating line).

    Returns:
        An EvalResult (`.mean`, `.results` in the rows' order, `.table()`).

    Raises:
        ConfigError, ContractError, DatasetError: as `optimize`; ConfigError for a concurrency
            that is not an integer >= 1.
    """
    from skynet import runner

    _check_out(out, _EVALUATE)
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ConfigError(
            f"{_EVALUATE}: concurrency={reprlib.repr(concurrency)}; give an integer >= 1 (rows "
            "evaluated at once), or leave it out for the default (4)"
        )
    store_dir = Path(store).expanduser().absolute()
    project, _ = _project(
        candidate,
        metric=metric,
        splits={"test": data},
        fractions=None,
        inputs=inputs,
        outputs=outputs,
        id_column=id_column,
        user=user,
        tables={
            "models": models,
            "artifact": artifact,
            "budget": budget,
            # Recorded with the run's config, as a project's [engine] concurrency is.
            "engine": None if concurrency is None else {"concurrency": concurrency},
        },
        store_dir=store_dir,
        evaluate_only=True,
    )
    from skynet.runs.lock import one_writer

    stream = _progress_stream(out)
    with one_writer(project.store_dir, command="eval") as writer:
        run_id = runner.evaluation_run(project)
        writer.names(run_id)
        outcome = runner.evaluate_candidate(
            project,
            dict(project.artifact.components),
            split="test",
            run_id=run_id,
            label="python",
            out=stream if stream is not None else sys.stderr,
        )
    mean = outcome.mean
    return EvalResult(
        mean=mean.value,
        results=list(outcome.results),
        left_out=sum(mean.left_out.values()),
        run_id=run_id,
        store=store_dir,
        stopped_by=outcome.stopped_by,
        _items=project.dataset.test,
    )


def rescore(
    run_id: str,
    *,
    metric: Any,
    data: Any,
    store: str | os.PathLike[str] = ".skynet",
) -> RescoreOutcome:
    """Score run `run_id`'s saved outputs again with `metric` (what `skynet rescore` does for a
    project folder): no task-model call, the new scores recorded under the new metric's hash,
    so `result.report()`, `skynet show` and the HTML report count them.

    Args:
        run_id: a run recorded in `store`.
        metric: the new metric (a function, a DSPy metric, or a scorer's name, as `optimize`).
        data: the rows the run was made on (train, val and test together, in any form
            `optimize` takes; a run made with no val= scores its val copies from the train
            rows); items are matched by id, and outputs of items not given are counted as gone.
        store: the folder holding the run's runs.db.

    Returns:
        The RescoreOutcome: how many outputs were rescored, errored, kept, or gone.

    Raises:
        ConfigError: the run is unknown, or the store busy; ContractError: a bad metric.
    """
    from skynet import runner
    from skynet.config import config_from_tables
    from skynet.data import dataset_from_rows, rows_from, val_copy
    from skynet.runs import RunStore
    from skynet.runs.lock import one_writer

    store_dir = Path(store).expanduser().absolute()
    path = store_dir / "runs.db"
    if not path.exists():
        raise ConfigError(f"{store_dir}: no runs recorded here; give store= the run's folder")
    with RunStore(path) as runs:
        recorded = runs.get_run(run_id).config.get("data") or {}
        val_ids = {i for i, row in runs.items(run_id).items() if row.split == "val"}
    inputs, outputs = list(recorded.get("inputs") or []), list(recorded.get("outputs") or [])
    id_column = recorded.get("id_column")
    raw: dict[str, Any] = {"data": {"inputs": inputs, "outputs": outputs, "id_column": id_column}}
    metric_table = _metric_table(metric)
    if metric_table is not None:
        raw["metric"] = metric_table
    config = config_from_tables(raw, Path.cwd(), source=_RESCORE, rows_given=True)
    dataset = dataset_from_rows(
        {"test": rows_from(data, "data")},
        inputs=inputs,
        outputs=outputs,
        id_column=id_column,
        required=(),
    )
    # Its signature checked, as `skynet rescore` does.
    the_metric = _metric(metric, config, outputs, dataset)
    # A run made with no val= has val copies of its train rows (skynet.data.val_copies).
    given = {item.id for item in dataset.test}
    copies = [val_copy(item) for item in dataset.test]
    items = [*dataset.test, *(c for c in copies if c.id in val_ids and c.id not in given)]
    with one_writer(store_dir, command="rescore", run_id=run_id), RunStore(path) as runs:
        return runner.rescore_run(runs, run_id, the_metric, items)


_RESCORE = "skynet.rescore()"


# -- building the project --------------------------------------------------------------------


def _project(
    seed: Any,
    *,
    metric: Any,
    splits: Mapping[str, Any],
    fractions: Mapping[str, Any] | None,
    inputs: Sequence[str] | None,
    outputs: Sequence[str] | None,
    id_column: str | None,
    user: str | None,
    tables: Mapping[str, Any],
    store_dir: Path,
    evaluate_only: bool = False,
    lm: Any = None,
    lms: tuple[Any, ...] = (),
) -> tuple[Any, str]:
    """The Project for the call's pieces, every one checked as its file would be (`lm`:
    the configured dspy.LM that is the task model, see _configured_lm)."""
    from skynet.config import SplitConfig, config_from_tables
    from skynet.data import check_columns, dataset_from_rows, rows_from
    from skynet.project import Project

    call = _EVALUATE if evaluate_only else _CALL
    given = {name: value for name, value in splits.items() if value is not None}
    if not evaluate_only:
        if "data" in given and ({"train", "val"} & given.keys()):
            raise ConfigError(
                f"{_CALL}: give data= (split by fractions) or train= and val=, not both"
            )
        if "data" not in given and "train" not in given:
            raise ConfigError(f"{_CALL}: no rows; give train= and val= (or data= to split)")
    # evaluate(data=...) fills the test split: its rows are named data[i], as the call names them.
    argument = {"test": "data"} if evaluate_only else {}
    rows = {name: rows_from(value, argument.get(name, name)) for name, value in given.items()}
    if not any(rows.values()):
        names = ", ".join(f"{argument.get(name, name)}=" for name in given) or "data="
        found = "is None" if not given else ("holds no rows" if len(given) == 1 else "hold no rows")
        raise ConfigError(
            f"{call}: {names} {found}; give the rows to "
            + ("score" if evaluate_only else "optimize on")
            + ": a list of dicts, a list of dspy.Example, a pandas DataFrame or a data file's path"
        )
    plugin = _plugin_kind(tables.get("artifact"), call)
    kind = "plugin" if plugin is not None else _seed_kind(seed)
    if inputs is None and user is None and kind in ("text", "components"):
        user = _gepa_default_user(rows)
    inputs_list = list(inputs) if inputs is not None else _infer_inputs(seed, kind, user, given)
    if not inputs_list and outputs is None and _reference_free(metric):
        # Nothing is expected, so nothing can leak: every column is the candidate's input (a
        # single task's description, as optimize_anything's).
        first_row = next((r for group in rows.values() for r in group), None)
        skip = {id_column or "id", "split"}
        inputs_list = [c for c in (first_row.values if first_row else {}) if c not in skip]
    if not inputs_list:
        raise ConfigError(
            f"{call}: inputs= is needed: say which columns the artifact reads, e.g. "
            'inputs=["question"]'
        )
    first = next((r for group in rows.values() for r in group), None)
    if outputs is not None:
        outputs_list = list(outputs)
    else:
        skip = {*inputs_list, id_column or "id", "split"}
        outputs_list = [c for c in (first.values if first else {}) if c not in skip]
    check_columns(inputs_list, outputs_list, roles=("inputs=", "outputs="), named_in=call)
    raw: dict[str, Any] = {
        "data": {"inputs": inputs_list, "outputs": outputs_list, "id_column": id_column},
    }
    for name, value in tables.items():
        if value is None:
            continue
        if name == "engine" and isinstance(value, str):
            value = {"name": value}
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{call}: {name}= is a {type(value).__name__}; give a dict of skynet.toml's "
                f"[{name}] keys"
            )
        raw[name] = _copied(value)
    if plugin is None:
        raw["artifact"] = {**raw.get("artifact", {}), "kind": _KIND_OF_SEED[kind]}
    elif seed is not None:  # the plugin kind's own file, as [artifact] path names it
        if not isinstance(seed, str | os.PathLike) or (isinstance(seed, str) and "\n" in seed):
            raise ConfigError(
                f"{call}: artifact kind '{plugin}' (a plugin) loads its own file: give the seed "
                f'as that file\'s path, or seed=None and artifact={{"path": ...}}'
            )
        raw["artifact"]["path"] = str(Path(seed).expanduser().absolute())
    raw.setdefault("models", {}).setdefault("cache", str(store_dir / "cache.db"))
    metric_table = _metric_table(metric)
    if metric_table is not None:
        raw["metric"] = {**raw.get("metric", {}), **metric_table}
    config = config_from_tables(raw, Path.cwd(), source=call, rows_given=True)
    split_config = None
    if fractions is not None:
        split_config = config_from_tables(
            {**raw, "data": {**raw["data"], "split": dict(fractions)}},
            Path.cwd(),
            source=_CALL,
            rows_given=True,
        ).data.split
    dataset = dataset_from_rows(
        rows,
        inputs=inputs_list,
        outputs=outputs_list,
        id_column=id_column,
        fractions=split_config or (SplitConfig() if "data" in rows else None),
        required=() if evaluate_only else ("train", "val"),
        train_as_val=not evaluate_only and _train_as_val(given),
    )
    the_metric = _metric(metric, config, outputs_list, dataset)
    if plugin is not None:  # the kind's loader (skynet.registry) checks its own files
        from skynet import registry

        artifact = registry.load("artifact", plugin)(Path.cwd(), config, dataset)
    else:
        artifact = _artifact(seed, kind, config, inputs_list, user, store_dir, lm=lm)
    fit_to_artifact(the_metric, artifact)
    project = Project(
        dir=Path.cwd(),
        config=config,
        dataset=dataset,
        metric=the_metric,
        artifact=artifact,
        store=store_dir,
        made_in=call,
        lms=lms,
    )
    return project, kind


def _train_as_val(splits: Mapping[str, Any]) -> bool:
    """Whether the call gives train= with no val= (nor data=): the train rows then serve as val
    too, as gepa.optimize and dspy.GEPA.compile take valset=None (skynet.data.val_copies)."""
    given = {name for name, value in splits.items() if value is not None}
    return "train" in given and not given & {"val", "data"}


TRAIN_AS_VAL = (
    "note: no val= given: the train rows serve as val too (as gepa and dspy.GEPA do with "
    "valset=None), each as 'val:' + its id; the val figure is then a train figure, not held out"
)

_TABLES = ("data", "metric", "models", "engine", "budget", "artifact")


def _sections(sections: Mapping[str, Any] | None, call: str) -> dict[str, Any]:
    """`sections=`: skynet.toml's other tables by name, e.g. a scorer package's
    {"judge": {...}}; a table the call takes as its own argument is refused here."""
    for name in sections or {}:
        if name in _TABLES:
            raise ConfigError(
                f"{call}: sections= holds [{name}]; give it as {name}= (sections= is for the "
                "other tables, e.g. a scorer package's)"
            )
    return dict(sections or {})


def _plugin_kind(table: Any, call: str) -> str | None:
    """The artifact kind `artifact=` names when it is a plugin's (skynet.registry, group
    "skynet.artifacts"), else None (the seed's own kind decides)."""
    from skynet import registry

    kind = table.get("kind") if isinstance(table, Mapping) else None
    if not isinstance(kind, str) or kind in registry.BUILTIN["artifact"]:
        return None
    if not registry.is_known("artifact", kind):
        raise ConfigError(f"{call}: {registry.unknown('artifact', kind)}")
    return kind


_KIND_OF_SEED = {"text": "prompt", "components": "prompt", "prompt_file": "prompt"}
_KIND_OF_SEED |= {"dspy": "dspy", "code": "code"}


def _check_out(out: Any, call: str) -> None:
    """Refuse an `out=` that is not a text stream here, not as an AttributeError from the first
    progress line."""
    lacks = [m for m in ("write", "flush", "isatty") if not callable(getattr(out, m, None))]
    if out is not None and lacks:
        raise ConfigError(
            f"{call}: out={reprlib.repr(out)} is not a text stream ({type(out).__name__} has "
            f'no {lacks[0]}()); give one, e.g. out=sys.stdout or out=open("progress.log", "w"), '
            "or leave it out (progress goes to stderr)"
        )


def _configured_lm(
    seed: Any, models: Mapping[str, Any] | None, artifact: Mapping[str, Any] | None
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, str, Any]:
    """The models and artifact tables for a DSPy program seed, honouring
    `dspy.configure(lm=...)` as take_over honours a program's own LMs: with no task model given
    (or that same model), the configured LM's model is the task model, its temperature and
    max_tokens the [artifact] ones unless `artifact=` sets them (recorded with the run: they
    decide outputs), and the LM is returned to be held by the artifact, which reaches the model
    as it says (api_base and key, in memory, never recorded); its calls go through Skynet's
    models (metered, cached, budgeted). Also the line that says so ("" for none).

    Raises:
        ConfigError: the configured LM is not a dspy.LM Skynet can route, or models= names
            another task model (one of them would be silently ignored).
    """
    dspy = sys.modules.get("dspy")
    if dspy is None or not isinstance(seed, dspy.Module):
        return models, artifact, "", None
    lm = dspy.settings.lm
    if lm is None:
        return models, artifact, "", None
    name = getattr(lm, "model", None)
    if not isinstance(name, str) or not isinstance(getattr(lm, "kwargs", None), dict):
        raise ConfigError(
            f"{_CALL}: dspy.configure(lm=...) holds a {type(lm).__name__}, whose calls Skynet "
            'cannot route through its models; give models={"task": "PROVIDER/MODEL", ...} and '
            "dspy.configure(lm=None)"
        )
    from skynet.models.dspy_lm import lm_settings

    given = dict(models or {})
    task = given.get("task")
    if task is not None and task != name:
        raise ConfigError(
            f"{_CALL}: dspy.configure(lm={name!r}) and models= task {task!r} differ; Skynet runs "
            "the program on its task model through its own models, so the configured LM would be "
            "ignored: drop one of them"
        )
    art = dict(artifact or {})
    taken = {k: v for k, v in lm_settings(lm).items() if k not in art}
    if task is not None:  # named again (or recorded, on resume): nothing to say
        return models, {**art, **taken} if taken else artifact, "", lm
    given["task"] = name
    said = f"task model {name}: from dspy.configure(lm=...)"
    if taken:
        said += ", at its " + " and ".join(f"{k} {v}" for k, v in taken.items())
    return given, {**art, **taken} if taken else artifact, said, lm


def _given_lms(
    models: Mapping[str, Any] | None,
) -> tuple[Mapping[str, Any] | None, tuple[Any, ...]]:
    """A dspy.LM given as the reflection or metric model (dspy.GEPA's `reflection_lm=dspy.LM(
    ...)`, as its tutorials write it) becomes its model's name in the models table, its
    temperature and max_tokens the reflection ones unless models= sets them (recorded: they
    decide proposals); the LMs are returned, to be reached as they say (their api_base and key,
    in memory, never recorded), as a program's own LMs are."""
    dspy = sys.modules.get("dspy")
    if dspy is None or not models:
        return models, ()
    from skynet.models.dspy_lm import lm_settings

    given, lms = dict(models), []
    for role in ("reflection", "metric"):
        lm: Any = given.get(role)
        if not isinstance(lm, dspy.LM):
            continue
        given[role] = lm.model
        lms.append(lm)
        if role == "reflection":
            for name, value in lm_settings(lm).items():
                given.setdefault(f"reflection_{name}", value)
    return given, tuple(lms)


def _seed_kind(seed: Any) -> str:
    if isinstance(seed, Code):
        return "code"
    if isinstance(seed, os.PathLike) or (
        isinstance(seed, str) and "\n" not in seed and seed.endswith(".md") and Path(seed).is_file()
    ):
        return "prompt_file"
    if isinstance(seed, str):
        if not seed.strip():
            raise ConfigError(f"{_CALL}: the seed is an empty string; give the instructions")
        return "text"
    if isinstance(seed, Mapping):
        bad = [k for k, v in seed.items() if not isinstance(k, str) or not isinstance(v, str)]
        if not seed or bad:
            raise ConfigError(
                f"{_CALL}: a dict seed maps component names to their text, e.g. "
                '{"instructions": "..."}'
                + (f"; {bad[0]!r} is not a str -> str entry" if bad else "")
            )
        return "components"
    if "dspy" in sys.modules:
        import dspy

        if isinstance(seed, dspy.Module):
            return "dspy"
    raise ConfigError(
        f"{_CALL}: the seed is a {type(seed).__name__}; give the instructions (a str), a dict "
        "of components, a prompt.md path, a dspy.Module or a skynet.Code"
    )


def _copied(table: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a call's table, its Python objects (a callable: a selector, a proposer, a
    reflection model) kept as given, so the user's own instance is the one called."""
    memo: dict[int, Any] = {}

    def keep(value: Any) -> None:
        if callable(value):
            memo[id(value)] = value
        elif isinstance(value, Mapping):
            for inner in value.values():
                keep(inner)
        elif isinstance(value, list | tuple):
            for inner in value:
                keep(inner)

    keep(table)
    return copy.deepcopy(dict(table), memo)


def _reference_free(metric: Any) -> bool:
    """Whether `metric` is a function called as score(input, output): it expects nothing."""
    from skynet.contract._metric import _arity
    from skynet.dspy_metric import is_dspy_metric

    if not callable(metric) or isinstance(metric, str | Mapping) or is_dspy_metric(metric):
        return False
    try:
        return _arity(metric, "metric") == 2
    except ContractError:
        return False


def _gepa_default_user(rows: Mapping[str, Sequence[Any]]) -> str | None:
    """ "{input}" for rows in the shape of gepa's default adapter (`input`, `answer`, maybe
    `additional_context`): as gepa.optimize does, the row's input is the user message as it is."""
    first = next((r for group in rows.values() for r in group), None)
    values = getattr(first, "values", None)
    gepa_shape = {"input", "answer", "additional_context", "id", "split"}
    if isinstance(values, Mapping) and {"input", "answer"} <= set(values) <= gepa_shape:
        return "{input}"
    return None


def _infer_inputs(seed: Any, kind: str, user: str | None, given: Mapping[str, Any]) -> list[str]:
    from skynet.data import example_inputs

    for value in given.values():
        declared = example_inputs(value)
        if declared:
            return declared
    if kind == "dspy":
        names: list[str] = []
        for _, predictor in seed.named_predictors():
            names += [n for n in predictor.signature.input_fields if n not in names]
        return names
    if user is not None:
        from skynet.artifacts.prompt import _placeholders

        try:
            return list(dict.fromkeys(_placeholders(user)))
        except ValueError:
            return []
    return []


def _metric_table(metric: Any) -> dict[str, Any] | None:
    if isinstance(metric, str):
        return {"name": metric}
    if isinstance(metric, Mapping):
        return dict(metric)
    return None


def _metric(metric: Any, config: Any, outputs: list[str], dataset: Any) -> Metric:
    import dataclasses

    if isinstance(metric, str | Mapping):
        if not config.metric.name:
            raise ConfigError(
                f"{_CALL}: metric= as a table needs a name (a built-in scorer), e.g. "
                '{"name": "exact"}; pass your own metric as a function'
            )
        from skynet.packages import package_for

        package = package_for(config.metric.name)
        if package is not None:
            # A scorer package (the judge, reference, a plugin's) builds its metric from the
            # working folder, as from a project's: its files and its section (sections=).
            loaded = package.metric(Path.cwd(), config, dataset, verified=True)
        else:
            from skynet.scorers import scorer_metric

            loaded = scorer_metric(config.metric.name, config.metric.options)
    elif isinstance(metric, Metric):
        loaded = metric
    elif callable(metric):
        loaded = _function_metric(metric, outputs)
    else:
        raise ContractError(
            f"{_CALL}: metric= is a {type(metric).__name__}; give a function "
            "score(input, output, expected=None), a DSPy metric, or a scorer's name",
            check="Metric signature",
        )
    loaded.limits = dataclasses.replace(loaded.limits, time_s=config.metric.time_s)
    return loaded


def _where(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    try:
        file = inspect.getsourcefile(fn)
        line = inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return f"metric {name}()"
    return f"metric {name}() ({Path(file).name}:{line})" if file else f"metric {name}()"


def _source_hash(fn: Callable[..., Any]) -> str:
    import hashlib

    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = repr(fn)
    return hashlib.sha256(source.encode()).hexdigest()


def _function_metric(fn: Callable[..., Any], outputs: list[str]) -> Metric:
    """A metric function: Skynet's contract, or a DSPy metric (skynet.dspy_metric), wrapped."""
    from skynet.contract import dspy_adapted

    score, key_fn = dspy_adapted(fn, None, outputs)
    return Metric(score, name=_where(fn), key_fn=key_fn, source_hash=_source_hash(fn))


def _artifact(
    seed: Any,
    kind: str,
    config: Any,
    inputs: list[str],
    user: str | None,
    store_dir: Path,
    lm: Any = None,
) -> Any:
    art = config.artifact
    if kind == "prompt_file":
        from skynet.artifacts.prompt import load_prompt

        loaded = load_prompt(Path(seed).expanduser().absolute(), inputs, key="the seed")
        if user is None:
            return loaded
        components = loaded.components
    elif kind == "text":
        components = {"instructions": seed.strip()}
    elif kind == "components":
        components = {name: text for name, text in seed.items()}
    elif kind == "dspy":
        from skynet.artifacts.dspy_program import DspyArtifact

        if not list(seed.named_predictors()):
            raise ConfigError(f"{_CALL}: the program has no predictors, so nothing to optimize")
        return DspyArtifact(
            program=copy.deepcopy(seed),
            path=None,
            max_tokens=art.max_tokens,
            temperature=art.temperature,
            lm=lm,
        )
    else:
        from skynet.artifacts.code import code_artifact, code_limits

        return code_artifact(
            seed.source,
            path=seed.path,
            shown=str(seed.path) if seed.path else "skynet.Code",
            limits=code_limits(art),
            sandbox_mode=art.sandbox,
            hidden=(store_dir, Path.home(), Path.cwd()),
            max_tokens=art.max_tokens,
            temperature=art.temperature,
        )
    from skynet.artifacts.prompt import PromptArtifact, _placeholders

    template = user if user is not None else "\n".join(f"{n}: {{{n}}}" for n in inputs)
    try:
        names = _placeholders(template)
    except ValueError as exc:
        raise ConfigError(
            f"{_CALL}: user= is not a valid format string ({exc}); write {{{{ and }}}} for "
            "literal braces"
        ) from None
    unknown = [n for n in names if n not in inputs]
    if unknown:
        raise ConfigError(
            f"{_CALL}: user= placeholder {{{unknown[0]}}} names no input column; the input "
            f"columns are {', '.join(inputs)} (inputs=)"
        )
    if not names:
        raise ConfigError(
            f"{_CALL}: user= names no input column, so no row's input reaches the model; add a "
            f"placeholder such as {{{inputs[0]}}}, or leave user= out to send every input column"
        )
    return PromptArtifact(components=components, user_template=template)


def _as_seed_kind(kind: str, project: Any, best: dict[str, str]) -> Any:
    if kind == "text":
        return best.get("instructions", "")
    if kind == "dspy":
        return project.artifact.with_candidate(best)
    if kind == "code":
        from skynet.artifacts.code import COMPONENT

        return Code(best[COMPONENT])
    return dict(best)


def _recorded_tables(store_dir: Path, run_id: str, **given: Any) -> tuple[Any, Any, Any, Any]:
    """The models, engine, budget and artifact tables of a run to resume: the recorded ones,
    where the call gives none."""
    from skynet.runs import RunStore

    path = store_dir / "runs.db"
    if not path.exists():
        raise ConfigError(f"{store_dir}: no runs recorded here; give store= the run's folder")
    with RunStore(path) as store:
        row = store.get_run(run_id)
    recorded = row.config
    out = []
    for name in ("models", "engine", "budget", "artifact"):
        value = given.get(name)
        if value is None:
            value = recorded.get(name)
            if name == "budget":
                value = {**(value or {}), **{k: v for k, v in row.budget.items() if v is not None}}
                value.pop("max_full_evals", None)  # recorded as the max_metric_calls it made
            if name == "artifact" and isinstance(value, dict):
                value = {k: v for k, v in value.items() if k not in ("kind", "path")}
        out.append(value)
    return out[0], out[1], out[2], out[3]


# -- progress --------------------------------------------------------------------------------


class _NotebookLine:
    """Progress in Jupyter: one line rewritten in place (a carriage return, no terminal codes)."""

    def __init__(self, target: IO[str]) -> None:
        self._target = target

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return self._target.write(text.replace("\033[K", ""))

    def flush(self) -> None:
        self._target.flush()


def _progress_stream(out: IO[str] | None) -> IO[str] | None:
    if out is not None:
        return out
    if "ipykernel" in sys.modules and type(sys.stderr).__module__.startswith("ipykernel"):
        return _NotebookLine(sys.stderr)  # type: ignore[return-value]
    return None
