"""Whole-run wall time: Skynet's Auto engine against raw gepa with its defaults.

    python benchmarks/speed.py [--latency-ms 300] [--budget 200] [--concurrency 16] [--quick]

The same scripted task as benchmarks/overhead.py (a loopback OpenAI-compatible server in a child
process, each reply after a fixed latency; revision r of the instruction gets more items right),
the same budget of metric calls and seed:
- raw: `gepa.optimize_anything` with GEPAConfig's defaults (max_workers = the CPU count, one
  proposal per iteration, gepa's reflection template), its evaluator calling litellm;
- skynet: [engine] name = "auto" at [engine] concurrency N, which proposes independent:K per
  iteration (K = N // minibatch, at most train // minibatch) and sends their reflection calls at
  once.

Target: Skynet's wall time <= 0.4 of raw gepa's, with a final best val score no lower.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # noqa: E402 — the scripted task, server and both runners

TARGET = 0.4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="latency 100 ms, budget 120")
    args = parser.parse_args(argv)
    if args.quick:
        args.latency_ms, args.budget = 100.0, 120
    os.environ.setdefault(overhead.KEY_ENV, "sk-bench")
    overhead._instrument_skynet_engine()
    shape = overhead.Shape(items=40, train=24)
    server = overhead.Server(args.latency_ms, in_process=False)
    try:
        with tempfile.TemporaryDirectory(prefix="skynet-speed-") as work:
            raw_dir, sky_dir = Path(work) / "raw", Path(work) / "skynet"
            wide_dir = Path(work) / "raw-wide"
            for folder, concurrency in (
                (raw_dir, os.cpu_count() or 1),
                (wide_dir, args.concurrency),
                (sky_dir, args.concurrency),
            ):
                overhead.write_project(
                    folder,
                    shape,
                    server_url=server.url,
                    concurrency=concurrency,
                    budget=args.budget,
                    seed=args.seed,
                )
            toml = sky_dir / "skynet.toml"
            toml.write_text(toml.read_text().replace('name = "gepa"', 'name = "auto"'))
            raw = overhead.run_raw(
                raw_dir, server, concurrency=os.cpu_count() or 1, budget=args.budget, seed=args.seed
            )
            # Not the target's anchor: raw gepa given Skynet's concurrency, to show what the
            # parallel proposals add over more workers alone.
            wide = overhead.run_raw(
                wide_dir, server, concurrency=args.concurrency, budget=args.budget, seed=args.seed
            )
            sky = overhead.run_skynet(sky_dir, server)
    finally:
        server.stop()
    ratio = sky.wall_s / raw.wall_s
    raw_best, sky_best = max(raw.val_scores), max(sky.val_scores)
    print(
        f"latency {args.latency_ms:g} ms, budget {args.budget} metric calls, "
        f"{shape.train} train / {shape.val} val, seed {args.seed}"
    )
    print(
        overhead.table(
            [
                ("run", "wall s", "metric calls", "reflections", "candidates", "best val"),
                (
                    f"raw gepa (defaults, {os.cpu_count()} workers)",
                    f"{raw.wall_s:.1f}",
                    str(raw.metric_calls),
                    str(raw.reflection_requests),
                    str(raw.candidates),
                    f"{raw_best:.3f}",
                ),
                (
                    f"raw gepa, max_workers {args.concurrency}",
                    f"{wide.wall_s:.1f}",
                    str(wide.metric_calls),
                    str(wide.reflection_requests),
                    str(wide.candidates),
                    f"{max(wide.val_scores):.3f}",
                ),
                (
                    f"skynet auto (concurrency {args.concurrency})",
                    f"{sky.wall_s:.1f}",
                    str(sky.metric_calls),
                    str(sky.reflection_requests),
                    str(sky.candidates),
                    f"{sky_best:.3f}",
                ),
            ]
        )
    )
    print(
        f"wall time skynet / raw gepa at max_workers {args.concurrency}: {sky.wall_s / wide.wall_s:.2f}"
    )
    met = ratio <= TARGET and sky_best >= raw_best
    print(
        f"wall time skynet / raw gepa: {ratio:.2f} (target <= {TARGET}); best val skynet "
        f"{sky_best:.3f} vs raw {raw_best:.3f}: {'met' if met else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
