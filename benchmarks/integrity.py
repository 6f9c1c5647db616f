"""What the run store's integrity check costs when a run starts, against reading the run back.

    python benchmarks/integrity.py [--evaluations 50000] [--output-chars 800] [--repeats 5]

`skynet run`, `--resume` and `skynet eval` call `RunStore.check_integrity()` (SQLite's
`PRAGMA quick_check`: every page read, no index cross-check) before they write, so that a damaged
runs.db is refused with one line instead of half-recording a run. Its cost grows with the file.
The anchor, measured in the same run on the same file: reading every evaluation of the run back
(`RunStore.evaluations`), which `--resume`, `skynet show` and `skynet rescore` do anyway.

Printed: the file's size, the median time of each and the ratio check / read (target <= 1: the
check costs no more than one read of the records a resume makes anyway).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from skynet.evaluation import Result
from skynet.measure import Observation
from skynet.runs import RunStore

TARGET_RATIO = 1.0


def _fill(path: Path, evaluations: int, output_chars: int) -> str:
    store = RunStore(path)
    run_id = store.create_run(
        config={}, dataset_hash="d", metric_hash="m", seed=0, engine="gepa", budget={}, versions={}
    )
    per_candidate = 500
    for start in range(0, evaluations, per_candidate):
        cid = f"cand{start // per_candidate:06d}"
        store.add_candidate(run_id, cid, {"instructions": f"candidate {cid}"})
        for i in range(start, min(start + per_candidate, evaluations)):
            store.record_evaluation(
                run_id,
                cid,
                "val",
                Result(
                    item_id=f"i{i % per_candidate}",
                    output=("x" * output_chars) + str(i),
                    score=0.5,
                    feedback="name the capital; the answer gave a history instead",
                    observation=Observation(elapsed_ms=12.5),
                ),
                "m",
            )
    store.close()
    return run_id


def _median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=50_000)
    parser.add_argument("--output-chars", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.db"
        began = time.perf_counter()
        run_id = _fill(path, args.evaluations, args.output_chars)
        size_mb = path.stat().st_size / 1e6
        print(
            f"runs.db: {args.evaluations} evaluations, {size_mb:.1f} MB "
            f"(written in {time.perf_counter() - began:.1f} s)"
        )
        with RunStore(path) as store:
            check = _median_s(store.check_integrity, args.repeats)
            read = _median_s(lambda: store.evaluations(run_id), args.repeats)
    ratio = check / read
    print(f"check_integrity (quick_check): {check * 1000:.0f} ms median of {args.repeats}")
    print(f"anchor, read the run's evaluations: {read * 1000:.0f} ms median of {args.repeats}")
    print(
        f"ratio check / read: {ratio:.3f} (target <= {TARGET_RATIO:g}) "
        + ("ok" if ratio <= TARGET_RATIO else "OVER")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
