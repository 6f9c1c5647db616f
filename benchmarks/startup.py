"""Start-up to the first evaluation on a large project: Skynet against raw gepa, same settings.

    python benchmarks/startup.py               # 1,000 items, concurrency 16, 3 repeats
    python benchmarks/startup.py --items 64    # the small project of benchmarks/speed.py

Both runs optimize benchmarks/overhead.py's project (items split 80/20 train/val) on its loopback
model server (a child process, 5 ms a request), in this process, with litellm already warm:

  raw     `gepa.optimize_anything` with an evaluator calling litellm (overhead.run_raw);
  skynet  `skynet.project.open_project` + `skynet.runner.run` (overhead.run_skynet): loading
          and checking the data, the metric's self-test on every item ("full", the default),
          the run's records, then the engine.

Start-up is the time from the call to the first evaluation the engine starts (its first model
call). Printed: each side's median, the ratio skynet / raw, and issue 30's target, start-up under
1 s on 1,000 items. Nothing is asserted; the figures are measured in this run. The budget is the
seed's val evaluation and a little more: the runs end soon after the measured moment.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # noqa: E402 — benchmarks/overhead.py: server, project writer, runs, probe
from overhead import KEY, KEY_ENV, Shape  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ[KEY_ENV] = KEY
    server = overhead.Server(args.latency_ms, in_process=False)
    work = Path(tempfile.mkdtemp(prefix="skynet-startup-"))
    try:
        return _measure(server, work, args)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _measure(server: overhead.Server, work: Path, args: argparse.Namespace) -> int:

    overhead.warm_up(server)
    shape = Shape(items=args.items, train=args.items * 4 // 5)
    budget = shape.val + 12
    print(
        f"start-up benchmark · {shape.items} items ({shape.train} train / {shape.val} val) · "
        f"concurrency {args.concurrency} · {args.latency_ms:g} ms a request · "
        f"{args.repeats} repeat(s)"
    )
    found: dict[str, list[float]] = {"raw": [], "skynet": []}
    for rep in range(args.repeats):
        for kind in ("raw", "skynet") if rep % 2 == 0 else ("skynet", "raw"):
            folder = work / f"{kind}-{rep}"
            overhead.write_project(
                folder,
                shape,
                server_url=server.url,
                concurrency=args.concurrency,
                budget=budget,
                seed=0,
            )
            began = time.perf_counter()
            if kind == "raw":
                config = overhead.overhead_config(
                    concurrency=args.concurrency, budget=budget, seed=0
                )
                result = overhead.run_raw(folder, server, config)
            else:
                result = overhead.run_skynet(folder, server)
            first = min(span[0] for span in result.probe.spans) - began
            found[kind].append(first)
            print(f"  repeat {rep + 1}: {kind:6s} first evaluation after {first:.3f} s")
    raw, sky = statistics.median(found["raw"]), statistics.median(found["skynet"])
    print(
        overhead.table(
            [
                ("check", "measured", "target", "result"),
                (
                    f"skynet start-up on {shape.items} items (median)",
                    f"{sky:.3f} s",
                    "< 1 s",
                    "met" if sky < 1.0 else "NOT MET",
                ),
                (
                    "start-up skynet / raw gepa (the self-test and records are Skynet's)",
                    f"{sky / raw:.1f} ({sky:.3f} s / {raw:.3f} s)",
                    "info",
                    "info",
                ),
            ]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
