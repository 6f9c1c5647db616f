"""The `skynet` command. Only this module turns errors into exit codes and one-line messages.

Exit codes: 0 success; 2 a user error (bad config, data or metric), one line on stderr; 1 an
internal fault or a model that kept failing; 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from skynet import __version__, packages
from skynet.commands import (
    EXIT_FAULT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USER,
    folder_of,
    key_values,
    overrides_of,
    store_of,
    with_dir,
    with_models,
    with_store,
    write_text,
)
from skynet.errors import ConfigError, ModelError, RunAborted, SkynetError
from skynet.terminal import printable
from skynet.terminal import width as terminal_width
from skynet.view import DEFAULT_PORT

if TYPE_CHECKING:
    pass


def cmd_init(args: argparse.Namespace) -> int:
    from skynet.starter import write_starter

    target = folder_of(args)
    written = write_starter(target)
    print(f"wrote a starter project in {target}: {', '.join(p.name for p in written)}")
    print(f"next: skynet check {target}  then  skynet run {target}")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from skynet.gain import split_notes
    from skynet.models import configure
    from skynet.plan import engine_plan
    from skynet.project import open_project, self_test

    project = open_project(folder_of(args), overrides_of(args))
    configure(project.config.models_config(), base_dir=project.dir)
    ds = project.dataset
    print(
        f"config ok · data ok: {len(ds.train)} train / {len(ds.val)} val / {len(ds.test)} test "
        f"items · {project.artifact.label} ok: "
        f"{', '.join(project.artifact.components)} · metric loaded "
        f"({project.metric.contract})"
    )
    report = self_test(project)
    print(report.summary())
    if not report.ok:
        return EXIT_USER
    print(f"engine ok · {engine_plan(project)}")  # the engine's options and template, checked
    empty = [name for name, text in project.artifact.components.items() if not text.strip()]
    if empty:
        # A legitimate seed (the reflection writes the text from the feedback), but rarely meant.
        print(
            f"note: the seed's {', '.join(repr(name) for name in empty)} "
            f"{'is' if len(empty) == 1 else 'are'} empty: the run starts from no text there and "
            "the reflection model writes it from the metric's feedback; write a first version "
            "to start from it"
        )
    nulls = getattr(project.artifact, "null_placeholders", None)
    found = nulls([*ds.train, *ds.val, *ds.test]) if nulls else []
    if found:
        (item, column), more = found[0], len(found) - 1
        print(
            f"note: item '{item}' has a null in column '{column}', which the prompt's user "
            f"section puts in the message: it goes in as empty text"
            + (f" ({more} more null(s) like it)" if more else "")
        )
    for note in split_notes(val=len(ds.val), test=len(ds.test)):
        print(f"note: {note}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from skynet.runner import run
    from skynet.runs.report import render_text, summarize

    overrides = overrides_of(args)
    if args.resume:
        # A resumed run keeps the budget it was started with, unless a flag says otherwise.
        store, _ = _open_run(args)
        recorded = store.get_run(args.resume).budget
        for key, value in recorded.items():
            overrides.setdefault(f"budget.{key}", value)
    project = _open_project(args, "run", overrides)
    _check_seed(project, overrides)
    if args.dry_run:
        return _print_dry_run(project)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops a run as cleanly as Ctrl-C
    outcome = run(project, resume=args.resume)
    store = project.open_store()
    print(
        render_text(
            summarize(store, outcome.run_id, project_dir=project.dir),
            columns=terminal_width(),
        )
    )
    print(f"best candidate written to {outcome.best_path}")
    return EXIT_OK


def _check_seed(project: Any, overrides: Any) -> None:
    """engine.seed must be one a run can record (SQLite's 64-bit integer): one line naming
    where it was set, before anything starts (the store refuses it too, not knowing where)."""
    from skynet.runs.store import SEEDS

    seed = project.config.engine.seed
    if seed in SEEDS:
        return
    where = overrides.given.get("engine.seed") or f"{project.dir / 'skynet.toml'}: [engine] seed"
    raise ConfigError(
        f"{where}: the seed {seed} is outside the seeds a run can record ({SEEDS.start} to "
        f"{SEEDS.stop - 1}, SQLite's 64-bit integer); choose one in that range, e.g. --seed 0"
    )


def _print_dry_run(project: Any) -> int:
    from skynet.runner import dry_run

    plan = dry_run(project)

    def usd(value: float | None, times: int | None) -> str:
        if value is None or times is None:
            return "unknown"
        return f"${value * times:.4f} (${value:.6f} x {times})"

    total = plan.total_usd()
    print(f"dry run: engine {plan.engine} ({plan.why}); nothing is recorded")
    print(
        f"  planned metric calls: {plan.planned_metric_calls} "
        f"(at least {plan.min_metric_calls} to propose once)"
    )
    print(
        f"  task:       {usd(plan.task_usd_per_call, plan.planned_metric_calls)}"
        f"   from {plan.sampled_items} real call(s) on val items"
    )
    print(f"  judge:      {usd(plan.judge_usd_per_call, plan.planned_metric_calls)}")
    print(
        f"  reflection: {usd(plan.reflection_usd_per_call, plan.proposals)}"
        + (
            ""
            if plan.proposals is None
            else f"   estimated from the prompt size, ~{plan.proposals} proposal(s)"
        )
    )
    confirming, cost = plan.confirmation_metric_calls, plan.confirmation_usd()
    if confirming:
        print(
            f"  confirmation: {'unknown' if cost is None else f'${cost:.4f}'} for {confirming} "
            f"metric calls, task + judge (seed and best on {confirming // 2} test items)"
        )
    elif not project.dataset.test:
        print("  confirmation: none (no test split: the gain will not be confirmed)")
    else:
        print("  confirmation: off ([budget] confirm = false)")
    print(f"  total:      {'unknown' if total is None else f'~${total:.4f}'}")
    for note in plan.notes:
        print(f"  note: {printable(note)}")  # a note may quote the seed's error
    return EXIT_OK


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _runs_db(args: argparse.Namespace) -> Path | None:
    """The runs.db of --store PATH or of the project, None when the project recorded no run;
    a .skynet that is a file, not a folder, is one line saying so (not "no runs")."""
    from skynet.storage import folder_error

    folder = store_of(args)  # a --store that holds no runs.db is refused there
    if folder.exists() and not folder.is_dir():
        raise folder_error(folder, NotADirectoryError(folder), what="run records")
    path = folder / "runs.db"
    return path if path.exists() else None


def cmd_runs(args: argparse.Namespace) -> int:
    from skynet.runs import RunStore
    from skynet.runs.lock import writing

    path = _runs_db(args)
    if path is None:
        print("no runs yet: skynet run starts one")
        return EXIT_OK
    with RunStore(path, readonly=True) as store:
        rows = store.list_runs(damaged=True)
    orphans = [r.id for r in rows if r.status == "running" and not writing(path.parent, r.id)]
    print(f"{'run':<22} {'status':<10} {'engine':<9} {'best':<13} created")
    for row in rows:
        status = "damaged" if row.damaged else "unfinished" if row.id in orphans else row.status
        print(
            f"{row.id:<22} {status:<10} {row.engine:<9} {row.best_candidate_id or '—':<13} {row.created}"
        )
    if orphans:
        first = next(r for r in rows if r.id == orphans[0])
        print(_orphaned(first, path.parent, more=len(orphans) - 1))
    for row in rows:
        if row.damaged:  # the others stay listed: one damaged record must not hide them
            print(
                f"skynet: warning: {path}: the record of run {row.id} is damaged: "
                f"{printable(row.damaged)}; the other runs are whole",
                file=sys.stderr,
            )
    return EXIT_OK


def _orphaned(run: Any, store: Path, *, more: int = 0) -> str:
    """The line for a run marked running that no process writes (killed, or it exited); a run
    made from Python is resumed from there."""
    from skynet.runs.store import FROM_PYTHON

    others = f" (and {more} more)" if more else ""
    resume = (
        FROM_PYTHON["run"].format(run=run.id, store=store)
        if (run.notes or {}).get("made_in")
        else f"skynet run --resume {run.id}"
    )
    return (
        f"unfinished: run {run.id}{others} is marked running, but no process writes it (it was "
        f"killed, or its process exited); `{resume}` goes on from what was recorded"
    )


_RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}")


def _open_project(
    args: argparse.Namespace, command: str, overrides: dict[str, Any] | None = None
) -> Any:
    """The project of `args`, as skynet.project.open_project loads it; where the folder has no
    skynet.toml, one line that says what the user most likely meant (a run id given as the
    folder, or a run made from Python, which the CLI cannot rerun without its code)."""
    from skynet.config import CONFIG_FILE
    from skynet.project import open_project

    folder = folder_of(args)
    if not (folder / CONFIG_FILE).is_file():
        _say_why_no_project(args, folder, command)
    own = folder / ".skynet"
    if getattr(args, "store", None) is not None and store_of(args).resolve() != own.resolve():
        raise ConfigError(
            f"--store {args.store}: the project in {folder} records its runs in {own}, and "
            f"`skynet {command}` records there; leave --store out (a run skynet.optimize(store=) "
            "made is given to skynet.rescore / skynet.evaluate from Python)"
        )
    return open_project(folder, overrides_of(args) if overrides is None else overrides)


def _say_why_no_project(args: argparse.Namespace, folder: Path, command: str) -> None:
    from skynet.runs import RunStore

    named = getattr(args, "dir", None)
    if named and not folder.exists() and _RUN_ID.fullmatch(Path(named).name):
        flag = "--resume" if command == "run" else "--run"
        raise ConfigError(
            f"{folder}: no such folder; `skynet {command}` takes the project folder, and a "
            f"run is named with {flag}: skynet {command} {flag} {Path(named).name}"
        )
    path = _runs_db(args)
    if path is None or (command == "run" and not getattr(args, "resume", None)):
        return
    with RunStore(path, readonly=True) as store:
        wanted = getattr(args, "resume", None) or getattr(args, "run", None)
        row = store.get_run(wanted) if wanted else store.latest_run()
    made_in = (row.notes or {}).get("made_in") if row is not None else None
    if row is None or not made_in:
        return
    from skynet.runs.store import FROM_PYTHON

    call = FROM_PYTHON[command].format(run=row.id, store=path.parent)
    raise ConfigError(
        f"{folder}: no skynet.toml here: run {row.id} was made by {made_in}, whose metric and "
        f"rows are in your Python code; from Python: {call}"
    )


def _open_run(args: argparse.Namespace) -> tuple[Any, str]:
    """The run store, read-only (a reader never waits on a run writing it), and the run
    `args` names (default: the one recorded last)."""
    from skynet.runs import RunStore

    path = _runs_db(args)
    if path is None:
        raise ConfigError(
            f"{store_of(args)}: no runs recorded here; skynet run starts one, or --store PATH "
            "reads the runs skynet.optimize(store=PATH) recorded"
        )
    store = RunStore(path, readonly=True)
    run_id = getattr(args, "run", None)
    if not run_id:
        latest = store.latest_run()
        if latest is None:
            raise ConfigError("no runs recorded yet; skynet run starts one")
        run_id = latest.id
    store.get_run(run_id)
    return store, run_id


def _summary(store: Any, run_id: str, args: argparse.Namespace, current: str | None) -> Any:
    """A run's report as `skynet show` counts it: after a rescore, the scores of the metric it
    was rescored with; results graded under another hash than the project's current one (an
    edited reference, a changed scoring config) are marked stale."""
    from skynet.runs.report import summarize

    run = store.get_run(run_id)
    return summarize(
        store,
        run_id,
        metric_hash=run.notes.get("metric_hash"),
        current_hash=current,
        project_dir=folder_of(args),
    )


def _current_hash(args: argparse.Namespace) -> str | None:
    from skynet.project import current_metric_hash

    if store_of(args).resolve() != (folder_of(args) / ".skynet").resolve():
        return None  # another store's runs: the project here did not grade them
    return current_metric_hash(folder_of(args))


def cmd_show(args: argparse.Namespace) -> int:
    from skynet.runs.lock import writing
    from skynet.runs.report import render_text

    runs = list(args.runs or [])
    if len(runs) > 2:
        raise ConfigError(
            f"skynet show takes one run, or two to compare, not {len(runs)}: "
            f"skynet show {runs[0]} {runs[1]}"
        )
    json_out = getattr(args, "json", False)
    if json_out and args.html is not None:
        raise ConfigError(
            "skynet show takes --json (the summary on stdout) or --html FILE (the pages), not "
            "both: skynet show RUN --json > summary.json"
        )
    if json_out and len(runs) == 2:
        raise ConfigError(
            "skynet show --json summarizes one run, not two: skynet show RUN --json for each"
        )
    html = _html_target(args)
    args.run = runs[0] if runs else None
    store, run_id = _open_run(args)
    current = _current_hash(args)
    if len(runs) == 2:
        return _show_two(store, run_id, runs[1], args, current, html=html)
    summary = _summary(store, run_id, args, current)
    if json_out:
        import json

        from skynet.runs.report import summary_json

        # stdout is the document alone, so that another tool can read it as it is.
        print(json.dumps(summary_json(summary), indent=2, ensure_ascii=False))
        if summary.run.status == "running" and not writing(store.path.parent, run_id):
            print(_orphaned(summary.run, store.path.parent), file=sys.stderr)
        return EXIT_OK
    print(render_text(summary, columns=terminal_width()))
    if summary.run.status == "running" and not writing(store.path.parent, run_id):
        print(_orphaned(summary.run, store.path.parent))
    if html is not None:
        from skynet.view.pages import render_document

        write_text(html, render_document(store, summary), flag="--html", example="report.html")
        print(f"wrote {html}")
    return EXIT_OK


def _html_target(args: argparse.Namespace) -> Path | None:
    """The file `show --html` writes, refused before anything is read where writing it would
    destroy something (skynet.runs.report.check_html_target)."""
    from skynet.runs.report import check_html_target

    if args.html is None:
        return None
    return check_html_target(
        args.html,
        store_of(args),
        force=getattr(args, "force", False),
        given=f"--html {args.html!r}" if not args.html.strip() else f"--html {args.html}",
        fix="give --html another path, e.g. --html report.html",
        force_flag="--force",
    )


def _show_two(
    store: Any,
    a: str,
    b: str,
    args: argparse.Namespace,
    current: str | None,
    *,
    html: Path | None,
) -> int:
    from skynet.view.compare import compare, render_compare_html, render_compare_text

    comparison = compare(
        store, _summary(store, a, args, current), _summary(store, b, args, current)
    )
    print(render_compare_text(comparison))
    print(printable("\n".join(_runs_gain_lines(store, comparison)), multiline=True))
    if html is not None:
        write_text(html, render_compare_html(comparison), flag="--html", example="compare.html")
        print(f"wrote {html}")
    return EXIT_OK


def _runs_gain_lines(store: Any, c: Any) -> list[str]:
    """`skynet show RUN_A RUN_B`'s paired comparison (skynet.gain): B's best minus A's best on
    the test items both were evaluated on (the same item id in both runs), each run counted
    under its own metric as its report counts it. A run with no best (an evaluation-only run)
    stands by the candidate the comparison shows for it."""
    from skynet.gain import paired_gain
    from skynet.mean import Outcome, paired_scores
    from skynet.runs.report import TEST

    def outcomes(s: Any, shown: Any) -> dict[str, Outcome]:
        if shown is None:
            return {}
        return {
            e.item_id: (e.score, e.error_kind, e.error is None)
            for e in store.evaluations(s.run.id, candidate_id=shown.id, split=TEST)
            if e.metric_hash == s.metric_hash
        }

    def name(s: Any, shown: Any) -> str:
        if shown is None:
            return "-"
        return f"best {shown.id}" if s.best is not None and s.best.id == shown.id else shown.id

    ours, theirs = outcomes(c.a, c.shown_a), outcomes(c.b, c.shown_b)
    head = f"Test gain: B's {name(c.b, c.shown_b)} minus A's {name(c.a, c.shown_a)}"
    if not set(ours) & set(theirs):
        unscored = [s.run.id for s, o in ((c.a, ours), (c.b, theirs)) if not o]
        if unscored:
            why = f"no test evaluation of the best in run {' nor in run '.join(unscored)}"
        else:  # both were scored on test, on items of other data
            why, unscored = "their test items have no id in common", [c.a.run.id, c.b.run.id]
        fixes = " and ".join(
            f"skynet eval --candidate best --split test --run {run_id}" for run_id in unscored
        )
        return [f"{head}: no shared test item ({why}); score them on one test split: {fixes}"]
    _, a, b = paired_scores(ours, theirs)
    gain = paired_gain(a, b, split=TEST)
    lines = [f"{head}, paired on the test items both were evaluated on", f"  {gain.describe()}"]
    if gain.a_mean is not None and gain.b_mean is not None:
        lines.append(f"  on these items: A {gain.a_mean:.3f}, B {gain.b_mean:.3f} ({gain.method})")
    if c.a.run.dataset_hash != c.b.run.dataset_hash:
        lines.append("  the runs were made on different data: their items are paired by id")
    if c.a.metric_hash != c.b.metric_hash:
        lines.append("  the runs were scored by different metrics (see Config differences)")
    return lines


def cmd_view(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    from skynet.view.server import Viewer, serve

    store, run_id = _open_run(args)  # a project with no runs, or no such run: one line
    first = f"/run/{quote(run_id)}" if args.run else "/"
    try:
        current = _current_hash(args)
    except Exception:  # noqa: BLE001 — a project that no longer loads still has its runs shown
        current = None
    server = serve(
        Viewer(store, project_dir=folder_of(args), current_hash=current),
        port=args.port,
        first=first,
    )
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        print("skynet view: stopped")
    finally:
        server.server_close()
        store.close()
    return EXIT_OK


def cmd_export_mlflow(args: argparse.Namespace) -> int:
    from skynet.tracking import export_run, tracking_uri

    store, run_id = _open_run(args)
    section = _tracking_section(args)
    uri = tracking_uri(args.tracking_uri, section.mlflow if section is not None else "")
    if uri is None:
        raise ConfigError(
            "no MLflow tracking URI: give --tracking-uri URI (e.g. http://127.0.0.1:5000), set "
            '[tracking] mlflow = "URI" in skynet.toml, or export MLFLOW_TRACKING_URI=URI'
        )
    experiment = (
        args.experiment
        or (section.experiment if section is not None else "")
        or folder_of(args).absolute().name
        or "skynet"
    )
    summary = _summary(store, run_id, args, _current_hash(args))
    done = export_run(summary, uri=uri, experiment=experiment)
    verb = "exported" if done.created else "updated"
    print(
        f"{verb} run {run_id} as MLflow run {done.mlflow_run_id} "
        f"(experiment '{printable(experiment)}') at {printable(uri)}"
    )
    if done.url:
        print(done.url)
    return EXIT_OK


def _tracking_section(args: argparse.Namespace) -> Any:
    """[tracking] of the project's skynet.toml; None where there is none to read (a run made
    from Python) or no need to (both flags given)."""
    from skynet.config import CONFIG_FILE, load_config

    folder = folder_of(args)
    if (args.tracking_uri and args.experiment) or not (folder / CONFIG_FILE).is_file():
        return None
    return load_config(folder).tracking


def cmd_selftest(args: argparse.Namespace) -> int:
    import json

    from skynet import scorers
    from skynet.data import Item
    from skynet.errors import DatasetError
    from skynet.textfile import read_text

    # The scorer first: an unknown name is named (with the known ones) before the data is read
    # for the columns that scorer would want.
    options = key_values(args.option, "--option", "ordering=strict")
    scorer = scorers.get(args.scorer, **options)
    path = Path(args.data)
    text = read_text(
        path,
        what="data",
        key="--data",
        missing="no such data file (--data takes a JSONL or JSON list file)",
        error=DatasetError,
    )
    try:
        rows = (
            json.loads(text)
            if path.suffix == ".json"
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from None
    outputs = [c.strip() for c in args.outputs.split(",") if c.strip()]
    items = []
    for n, row in enumerate(rows, start=1):
        missing = [c for c in outputs if c not in row]
        if missing:
            raise DatasetError(f"{path}:{n}: column '{missing[0]}' is missing (--outputs)")
        items.append(
            Item(
                id=str(row.get("id", f"row{n}")),
                input={k: v for k, v in row.items() if k not in outputs},
                expected={c: row[c] for c in outputs},
            )
        )
    report = scorers.selftest(scorer, items)
    print(report.summary())
    return EXIT_OK if report.ok else EXIT_USER


def cmd_rescore(args: argparse.Namespace) -> int:
    from skynet.runner import rescore
    from skynet.runs.lock import one_writer
    from skynet.runs.report import render_text, summarize

    project = _open_project(args, "rescore")
    store, run_id = _open_run(args)
    with one_writer(project.store_dir, command="rescore", run_id=run_id):
        done = rescore(project, run_id)
    print(
        f"rescored {done.rescored} saved output(s) of run {run_id} with metric "
        f"{done.metric_hash[:12]} (no task-model call); {done.metric_errors} metric error(s); "
        f"{done.already_current} already under this metric; {done.task_errors_kept} task "
        f"error(s) kept; {done.not_rescorable} not rescorable (output not JSON); "
        f"{done.items_gone} item(s) no longer in the data"
    )
    summary = summarize(store, run_id, metric_hash=done.metric_hash, project_dir=project.dir)
    print(render_text(summary, columns=terminal_width()))
    return EXIT_OK


_ERRORS_SHOWN = 3
_ERROR_CHARS = 300


def cmd_eval(args: argparse.Namespace) -> int:
    from skynet.gain import BETTER
    from skynet.runner import (
        eval_target,
        eval_targets,
        evaluate_candidate,
        evaluation_run,
        gain_over,
        unsandboxed_warning,
    )
    from skynet.runs.lock import one_writer

    against = getattr(args, "against", None)
    if getattr(args, "require_better", False) and not against:
        raise ConfigError(
            "skynet eval --require-better gates on a comparison: name the candidate to beat "
            f"with --against, e.g. skynet eval --candidate {args.candidate} --against seed "
            f"--split {args.split} --require-better"
        )
    project = _open_project(args, "eval")
    warning = unsandboxed_warning(project)
    if warning:
        print(warning, file=sys.stderr)
    done = []
    with one_writer(project.store_dir, command="eval") as writer:  # it records, and pays
        if against:
            targets = list(eval_targets(project, args.candidate, against, run=args.run))
        else:
            targets = [eval_target(project, args.candidate, run=args.run)]
        own_run = None  # the one evaluation-only run of the sides no run can hold
        for row, candidate, label, note in targets:
            if note:
                print(note, file=sys.stderr)
            where = f"run {row.id}" if row is not None else f"the evaluation-only run {own_run}"
            if row is None and own_run is None:
                own_run = evaluation_run(project)
                where = f"a new evaluation-only run {own_run}"
            run_id = row.id if row is not None else own_run
            assert run_id is not None
            writer.names(run_id)
            outcome = evaluate_candidate(
                project,
                candidate,
                split=args.split,
                run_id=run_id,
                label=label,
                # A live line on a terminal; a log or a pipe gets only the lines below.
                out=sys.stderr if sys.stderr.isatty() else None,
            )
            _print_evaluation(project, args.split, label, outcome, where=where)
            done.append((label, outcome))
    unscored = [(label, outcome) for label, outcome in done if outcome.mean.counted == 0]
    if unscored:  # a mean over no item is no score: a failure, as it is for `skynet run`
        label, outcome = unscored[0]
        failed, total = sum(not r.ok for r in outcome.results), len(outcome.results)
        share = f" ({failed / total:.0%} errors)" if total else ""
        print(
            f"skynet: error: {printable(label)} on {args.split}: no item was scored: {failed} "
            f"of {total} item(s) failed{share}; fix what the errors above name (skynet show "
            f"{outcome.run_id} lists them all), then run skynet eval again",
            file=sys.stderr,
        )
        return EXIT_USER
    if not against:
        return EXIT_OK
    (label_a, a), (label_b, b) = done
    gain = gain_over(a, b, project=project)
    print(f"{printable(label_a)} minus {printable(label_b)} on {args.split}: {gain.describe()}")
    if gain.a_mean is not None and gain.b_mean is not None:
        # gain_over's Gain is "b minus a" with the sides swapped: b_mean is A's.
        print(
            f"  on these items: {printable(label_a)} {gain.b_mean:.3f}, "
            f"{printable(label_b)} {gain.a_mean:.3f} ({gain.method})"
        )
    if getattr(args, "require_better", False) and gain.verdict != BETTER:
        print(
            f"gate: {printable(label_a)} is not better than {printable(label_b)} on "
            f"{args.split}: {gain.describe()}",
            file=sys.stderr,
        )
        return EXIT_FAULT
    return EXIT_OK


def _print_evaluation(project: Any, split: str, label: str, done: Any, *, where: str) -> None:
    """One candidate's `skynet eval` lines: its mean, where it was recorded ("run X"), its
    first errors, and why it stopped early (if it did)."""
    mean = done.mean
    value = "-" if mean.value is None else f"{mean.value:.3f}"
    notes = f" ({', '.join(mean.notes())})" if mean.notes() else ""
    run_id = done.run_id
    print(
        f"{label} on {split}: mean score {value} over {mean.counted} item(s){notes} · "
        f"recorded in {where}"
    )
    errors = [r for r in done.results if not r.ok]
    for r in errors[:_ERRORS_SHOWN]:
        # The first line says what failed, the last (of a stderr tail, a traceback) why.
        # Split on newlines only: a carriage return is the candidate's, and shown escaped.
        lines = [x for x in (r.error or "").split("\n") if x.strip()] or [""]
        text = lines[0] if len(lines) == 1 else f"{lines[0]} … {lines[-1].lstrip(' ')}"
        # A candidate's error quotes its output or stderr: escaped, it cannot drive the terminal.
        line = printable(text)
        line = line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 1] + "…"
        print(f"  {r.error_kind or 'unknown'} error on item '{printable(r.item_id)}': {line}")
    if len(errors) > _ERRORS_SHOWN:
        print(f"  … {len(errors) - _ERRORS_SHOWN} more: skynet show {run_id}")
    if done.stopped_by:
        left = len(getattr(project.dataset, split)) - len(done.results)
        print(
            f"stopped after {len(done.results)} item(s), {left} not evaluated: "
            f"{printable(done.stopped_by)}",
            file=sys.stderr,
        )


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal is one `skynet: error:` line like every other (argparse
    prints its usage first); its subcommands' parsers are of this class too."""

    def error(self, message: str, prog: str = "") -> NoReturn:
        prog = prog or self.prog
        self.exit(2, f"skynet: error: {message}; `{prog} --help` lists what it takes\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:  # name the subcommand they were given to, not the top level
            words = [self.prog, *(getattr(parsed, k, None) for k in ("command", "target", "step"))]
            prog = " ".join(w for w in words if isinstance(w, str))
            self.error(f"unrecognized arguments: {' '.join(extra)}", prog)
        return parsed


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="skynet",
        description="Optimize prompts against one metric.py; every run recorded and reported.",
    )
    parser.add_argument("--version", action="version", version=f"skynet {__version__}")
    parser.add_argument("-C", metavar="DIR", help="run as if started in DIR (like git -C)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", help="write a starter project that `skynet run` runs as it is")
    with_dir(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("check", help="check config, data, prompt and metric; self-test the metric")
    with_dir(p)
    with_models(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("run", help="optimize the artifact")
    with_dir(p)
    with_models(p)
    p.add_argument(
        "--resume", metavar="RUN", help="continue a stopped run; nothing recorded is paid twice"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the planned metric calls and a cost estimate from a few priced calls",
    )
    p.add_argument("--max-metric-calls", type=int, help="budget.max_metric_calls")
    p.add_argument("--max-cost-usd", type=float, help="budget.max_cost_usd")
    p.add_argument("--max-minutes", type=float, help="budget.max_minutes")
    p.add_argument("--engine", help="engine.name: gepa | dspy-gepa | auto")
    p.add_argument("--seed", type=int, help="engine.seed")
    p.add_argument("--concurrency", type=int, help="engine.concurrency")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", help="list the runs of the project")
    with_dir(p)
    with_store(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser(
        "show", help="report a run (default: the latest), or compare two: skynet show RUN_A RUN_B"
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="the run id (default: the latest)")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write the viewer's pages as one self-contained HTML file",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="let --html overwrite an existing file that is not a page Skynet wrote",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the run's summary as one JSON document instead (schema: docs/runs.md)",
    )
    with_store(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser(
        "view", help="browse the runs in a local web viewer on 127.0.0.1 (live while they run)"
    )
    p.add_argument("run", nargs="?", help="the run to open first (default: the list of runs)")
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free)",
    )
    with_store(p)
    p.set_defaults(func=cmd_view)

    p = sub.add_parser("export", help="send a run to an experiment tracker (MLflow)")
    targets = p.add_subparsers(dest="target", required=True, metavar="TARGET")
    p = targets.add_parser(
        "mlflow", help="log a run (default: the latest) as an MLflow run; again: updated"
    )
    p.add_argument("run", nargs="?", help="the run id (default: the latest)")
    p.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="the MLflow tracking server (default: [tracking] mlflow, else MLFLOW_TRACKING_URI)",
    )
    p.add_argument(
        "--experiment",
        metavar="NAME",
        help="the MLflow experiment (default: [tracking] experiment, else the project folder's name)",
    )
    p.add_argument("--dir", help="the project folder (default: the current one)")
    with_store(p)
    p.set_defaults(func=cmd_export_mlflow)

    p = sub.add_parser("selftest", help="hold a built-in scorer to its self-test on a data file")
    p.add_argument("scorer", help="the scorer's name, e.g. xlam-tool-call")
    p.add_argument("--data", required=True, help="a JSONL (or .json list) file of rows")
    p.add_argument("--outputs", default="answers", help="the answer column(s), comma-separated")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="a scorer option")
    p.set_defaults(func=cmd_selftest)

    p = sub.add_parser(
        "rescore", help="score a run's saved outputs with the current metric.py (no task calls)"
    )
    with_dir(p)
    with_store(p)
    p.add_argument("--run", help="the run (default: the latest)")
    p.set_defaults(func=cmd_rescore)

    p = sub.add_parser("eval", help="score a candidate on a split and record it")
    with_dir(p)
    with_store(p)
    with_models(p)
    p.add_argument(
        "--candidate",
        default="best",
        help="best | seed | a candidate file (prompt.md, code.py, a saved DSPy program)",
    )
    p.add_argument("--split", default="test", choices=["train", "val", "test"])
    p.add_argument(
        "--run",
        help="the run to record into (default: for best, the latest run with one; otherwise the "
        "latest optimization run, or, with none, an evaluation-only run of its own)",
    )
    p.add_argument(
        "--against",
        metavar="CANDIDATE",
        help="also score this candidate (best | seed | a file) and print the paired comparison, "
        "--candidate minus it, with its 95%% interval, p-value and verdict",
    )
    p.add_argument(
        "--require-better",
        action="store_true",
        help="exit 1 unless the verdict is 'better' (a CI gate; needs --against)",
    )
    p.set_defaults(func=cmd_eval)

    # A scorer package's own commands (skynet judge, skynet reference, a plugin's).
    for problem in packages.add_commands(sub):
        print(f"skynet: warning: {printable(problem)}", file=sys.stderr)
    return parser


def _resumable(exc: SkynetError) -> None:
    """After the error that ended a recorded run: how to finish it (an abort says so itself)."""
    if exc.run_id and not isinstance(exc, RunAborted):
        print(
            f"  run {exc.run_id} is kept as recorded: once that is fixed, "
            f"`skynet run --resume {exc.run_id}` goes on from it (nothing recorded is sent again)",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `skynet show | head`: the reader left; not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    # A message may quote a candidate's output or stderr (an abort names the last error):
    # escaped, it cannot drive the terminal.
    except ModelError as exc:
        print(f"skynet: model error: {printable(exc)}", file=sys.stderr)
        _resumable(exc)
        return EXIT_FAULT
    except SkynetError as exc:
        first, *rest = str(exc).splitlines() or [""]
        print(f"skynet: error: {printable(first)}", file=sys.stderr)
        for line in rest:
            print(f"  {printable(line)}", file=sys.stderr)
        _resumable(exc)
        return EXIT_USER
    except Exception:
        print(
            "skynet: internal error (a bug in skynet; please report it with this traceback):",
            file=sys.stderr,
        )
        print(printable(traceback.format_exc(), multiline=True), end="", file=sys.stderr)
        return EXIT_FAULT


if __name__ == "__main__":
    sys.exit(main())
