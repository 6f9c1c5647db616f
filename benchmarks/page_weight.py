"""The weight of a run's HTML file, and the time to render it, for a 600-item run.

The run is written straight into a real run store (no model): 600 val items, a seed and five
more candidates each evaluated on all of them (outputs and feedback of realistic length), a task
call per evaluation with its request and reply, and a reflection call per proposal. It prints
the size of `skynet show RUN --html` (the whole document: every item, every candidate, the
calls) raw and gzipped, per item, and the time to render it as a ratio against the anchor
measured in the same run: the overview alone (the report before the viewer's pages).

    python benchmarks/page_weight.py              # about 20 s
    python benchmarks/page_weight.py --items 2000 --candidates 10
"""

from __future__ import annotations

import argparse
import gzip
import random
import tempfile
import time
from pathlib import Path

from skynet import Observation, Result
from skynet.models.ledger import CallRecord
from skynet.runs import RunStore, render_html, runs_db_path, summarize
from skynet.view.pages import render_document

WORDS = [
    "the",
    "a",
    "capital",
    "city",
    "of",
    "river",
    "mountain",
    "country",
    "answer",
    "label",
    "ticket",
    "refund",
    "order",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def make_run(store: RunStore, items: int, candidates: int, rng: random.Random) -> str:
    from skynet.data import Item

    run_id = store.create_run(
        config={"engine": {"name": "gepa"}},
        dataset_hash="d" * 64,
        metric_hash="m",
        seed=0,
        engine="gepa",
        budget={"max_metric_calls": items * candidates},
        versions={},
    )
    data = [
        Item(id=f"i{i}", input={"question": _text(rng, 30)}, expected={"answer": _text(rng, 6)})
        for i in range(items)
    ]
    store.record_items(run_id, [("val", item) for item in data])
    parent = None
    for c in range(candidates):
        cid = f"c{c}"
        store.add_candidate(
            run_id, cid, {"instructions": _text(rng, 120)}, parents=[parent] if parent else []
        )
        if c == 0:
            store.set_seed_candidate(run_id, cid)
        else:
            store.record_call(
                run_id,
                CallRecord(
                    role="reflection",
                    model="openai/reflect",
                    elapsed_ms=2000,
                    input_tokens=3000,
                    output_tokens=300,
                    cost_usd=0.01,
                    prompt=f'[{{"role": "user", "content": "{_text(rng, 800)}"}}]',
                    reply=f'{{"text": "{_text(rng, 120)}"}}',
                ),
            )
            store.record_proposal(run_id, parent_id=parent, status="accepted", detail="", text="")
        for item in data:
            score = float(rng.random() < 0.3 + 0.1 * c)
            store.record_evaluation(
                run_id,
                cid,
                "val",
                Result(
                    item_id=item.id,
                    output=_text(rng, 50),
                    score=score,
                    feedback="right" if score else f"expected {_text(rng, 15)}",
                    scores={"accuracy": score, "brevity": rng.random()},
                    observation=Observation(elapsed_ms=200.0),
                ),
                "m",
            )
            store.record_call(
                run_id,
                CallRecord(
                    role="task",
                    model="openai/task",
                    elapsed_ms=200,
                    input_tokens=250,
                    output_tokens=60,
                    cost_usd=0.0002,
                    item_id=item.id,
                    prompt=f'[{{"role": "user", "content": "{_text(rng, 150)}"}}]',
                    reply=f'{{"text": "{_text(rng, 50)}"}}',
                ),
            )
        parent = cid
    store.set_best(run_id, f"c{candidates - 1}")
    store.set_status(run_id, "finished")
    return run_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=600)
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp, RunStore(runs_db_path(Path(tmp))) as store:
        made = time.perf_counter()
        run_id = make_run(store, args.items, args.candidates, rng)
        print(
            f"run: {args.items} val items, {args.candidates} candidates, "
            f"{len(store.call_rows(run_id)):,} calls (written in {time.perf_counter() - made:.1f}s)"
        )
        summary = summarize(store, run_id)
        render_document(store, summary)  # warm: matplotlib's import and font cache
        anchor, full = [], []
        page = overview = ""
        for _ in range(args.repeats):
            started = time.perf_counter()
            overview = render_html(summarize(store, run_id))
            anchor.append(time.perf_counter() - started)
            started = time.perf_counter()
            page = render_document(store, summarize(store, run_id))
            full.append(time.perf_counter() - started)
    raw, packed = len(page.encode()), len(gzip.compress(page.encode()))
    print(f"the file (skynet show RUN --html): {raw / 1e6:.2f} MB, {packed / 1e3:.0f} kB gzipped")
    print(f"  per item: {raw / args.items / 1e3:.1f} kB")
    print(f"  the overview alone (anchor): {len(overview.encode()) / 1e3:.0f} kB")
    print(
        f"render time, fastest of {args.repeats}: {min(full) / min(anchor):.1f}x the overview's "
        f"({min(full):.2f}s against {min(anchor):.2f}s)"
    )


if __name__ == "__main__":
    main()
