"""`skynet reference verify` and `skynet reference show`: mark the reference set as reviewed, and
say whether it still is."""

from __future__ import annotations

import argparse
from typing import Any

from skynet.commands import EXIT_OK, EXIT_USER, folder_of, with_dir

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction[Any]) -> None:
    """`skynet reference verify / show`."""
    p = commands.add_parser("reference", help="the verified reference set of metric 'reference'")
    reference = p.add_subparsers(dest="reference_command", required=True, metavar="STEP")
    p = reference.add_parser(
        "verify", help="mark the expected outputs as reviewed: write reference.verified.json"
    )
    with_dir(p)
    p.set_defaults(func=run)
    p = reference.add_parser("show", help="say how many references, from which file, verified")
    with_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from skynet.config import load_config
    from skynet.data import load_dataset
    from skynet.reference.verified import MARK_FILE, read_mark, reference_hash, verify

    project_dir = folder_of(args)
    config = load_config(project_dir)
    dataset = load_dataset(config)
    data = config.data
    data_file = data.path or ", ".join(f for f in (data.train, data.val, data.test) if f)
    items = len(dataset.train) + len(dataset.val) + len(dataset.test)
    if args.reference_command == "verify":
        mark = verify(project_dir, dataset, data_file)
        print(
            f"verified the reference set: {mark.items} item(s) from {data_file} "
            f"(hash {mark.hash[:12]}); wrote {project_dir / MARK_FILE} — commit it"
        )
        return EXIT_OK
    mark = read_mark(project_dir)
    current = reference_hash(dataset)
    print(f"reference set: {items} item(s) from {data_file} (hash {current[:12]})")
    if mark is None:
        print(f"not verified: no {MARK_FILE}; review it, then run `skynet reference verify`")
        return EXIT_USER
    if mark.hash != current:
        print(
            f"changed since it was verified ({mark.verified}, {mark.items} item(s)): review it, "
            "then run `skynet reference verify`"
        )
        return EXIT_USER
    print(f"verified {mark.verified} ({MARK_FILE})")
    return EXIT_OK
