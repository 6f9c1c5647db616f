"""`skynet judge collect` and `skynet judge validate`: label a blind sample of a run's outputs,
then hold the project's judge to those labels and write its validation record."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from skynet.commands import (
    EXIT_OK,
    EXIT_USER,
    folder_of,
    overrides_of,
    with_dir,
    with_models,
    write_text,
)
from skynet.errors import ConfigError

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction[Any]) -> None:
    """`skynet judge collect / validate`."""
    p = commands.add_parser("judge", help="validate the LLM judge against blind human labels")
    judge = p.add_subparsers(dest="judge_command", required=True, metavar="STEP")
    p = judge.add_parser("collect", help="write a blind sample of a run's outputs to label")
    with_dir(p)
    p.add_argument("--run", help="the run whose outputs to draw (default: the latest)")
    p.add_argument("--n", type=int, default=50, help="how many outputs to draw (default 50)")
    p.add_argument(
        "--seed", dest="sample_seed", type=int, default=0, help="the draw's seed (default 0)"
    )
    p.add_argument("--out", default="labels.jsonl", help="the file to write (default labels.jsonl)")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(func=collect)
    p = judge.add_parser("validate", help="judge the labelled rows; write the validation record")
    with_dir(p)
    with_models(p)
    p.add_argument("--labels", required=True, help="the labelled file (JSONL from collect)")
    p.add_argument("--B", type=int, default=200, help="bootstrap resamples (default 200)")
    p.add_argument(
        "--seed",
        dest="bootstrap_seed",
        type=int,
        default=0,
        help="the bootstrap's seed (default 0)",
    )
    p.set_defaults(func=validate)


def collect(args: argparse.Namespace) -> int:
    from skynet.config import load_config
    from skynet.judge.project import collect_labels

    project_dir = folder_of(args)
    config = load_config(project_dir, overrides_of(args))
    out = Path(args.out)
    if not out.is_absolute():
        out = project_dir / out
    if out.exists() and not args.force:
        raise ConfigError(
            f"{out}: already exists (it may hold labels); pass --force to overwrite it, or "
            "--out another file"
        )
    run_id, rows = collect_labels(config, args.run, n=args.n, seed=args.sample_seed)
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    write_text(out, lines, flag="--out", example="labels.jsonl")
    print(
        f"wrote {len(rows)} output(s) of run {run_id} to {out} (blind: no judge verdict); set "
        '"human" to true (right) or false (wrong) on each line, then: skynet judge validate '
        f"--labels {args.out}"
    )
    return EXIT_OK


def validate(args: argparse.Namespace) -> int:
    from skynet.config import load_config
    from skynet.judge.project import project_judge
    from skynet.models import configure
    from skynet.scorers.judge import judge_labelled, judge_problems, judge_validate, read_labels

    if args.B < 1:
        # Checked before any judge call, not by judge_validate after every label was judged.
        raise ConfigError(f"--B {args.B}: give an integer >= 1 (bootstrap resamples), e.g. --B 200")
    project_dir = folder_of(args)
    config = load_config(project_dir, overrides_of(args))
    judge, thresholds, target = project_judge(config)
    labels = Path(args.labels)
    if not labels.is_absolute() and not labels.exists():
        labels = project_dir / labels
    rows = read_labels(labels)
    models = configure(config.models_config(), base_dir=project_dir)
    pairs = judge_labelled(judge, rows, models=models)
    record = judge_validate(
        judge,
        pairs,
        B=args.B,
        seed=args.bootstrap_seed,
        thresholds=thresholds,
        ids=[r.id for r in rows],
    )
    record.save(target)
    spent = models.ledgers["metric"].totals()
    print(
        f"judge {judge.config_hash[:12]} ({judge.model}) against {record.n} human label(s); "
        f"{spent.calls} judge call(s), ${spent.cost_usd:.4f}"
    )
    for name in ("accuracy", "kappa", "tpr", "tnr", "balanced_accuracy"):
        value = getattr(record, name)
        shown = "undefined" if value is None else str(value)
        print(f"  {name:<18} {shown}")
    for note in record.notes:
        print(f"  note: {note}")
    problems = judge_problems(record, judge, thresholds)
    print(f"wrote {target}")
    if problems:
        print(f"does not pass ({thresholds.describe()}): {'; '.join(problems)}")
        return EXIT_USER
    print(f"passes ({thresholds.describe()}): the judge may score runs")
    return EXIT_OK
