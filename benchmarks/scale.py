"""Scale-out: evaluations per second on threads, worker processes and Ray, in one run.

    python benchmarks/scale.py [--cpu-items 120] [--io-items 320] [--skip-ray]

Every figure is a ratio against an anchor measured in the same run (the machines here are
shared and noisy); each run is `skynet run` in a process of its own, on a fresh project, against
a loopback model server in a child process (benchmarks/overhead.py's scripted model). The budget
is the val set and one reflection step; the figures are of the seed's val evaluation, the phase
where concurrency applies. Evaluations per second are read from runs.db: the seed's val items over
the span from the first recorded to the last (worker start-up is not in it; it is measured apart).

1. CPU-bound metric: score() spends 20 ms of pure-Python CPU per call (time.thread_time), the
   model answers at once. Evaluations/s with 2 workers over 1 worker, for processes and for ray
   (target >= 1.7x on 2 cores); threads (one GIL) printed as the anchor.
2. I/O-bound: 100 ms model latency, concurrency 16: evaluations/s as a fraction of the ideal
   16 / 0.1 s = 160/s, with 2 worker processes against threads (target >= 0.8 of ideal).
3. Ray's cost: the start-up of a run (the run's start to its first evaluation) against the same
   on threads, and the added milliseconds per evaluation at concurrency 1 against threads.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import importlib.util
import json
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent

CPU_METRIC = '''"""The benchmark metric, with 20 ms of pure-Python CPU per call."""
import time


def score(input, output, expected=None):
    end = time.thread_time() + 0.020  # this thread's CPU time: 20 ms of work, however busy
    n = 0
    while time.thread_time() < end:
        n += 1
    named = expected["capital"].lower() in str(output).lower()
    return float(named), {"feedback": "right" if named else f"name {expected['capital']}"}
'''


def _overhead():
    if "overhead" in sys.modules:
        return sys.modules["overhead"]
    spec = importlib.util.spec_from_file_location("overhead", HERE / "overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["overhead"] = module
    spec.loader.exec_module(module)
    return module


def _project(root: Path, name: str, url: str, *, items: int, concurrency: int,
             executor: str, workers: int, cpu_metric: bool) -> Path:  # fmt: skip
    overhead = _overhead()
    folder = root / name
    shape = overhead.Shape(items=items + 4, train=4)
    # The seed's val evaluation, then the one reflection step gepa needs to be allowed to start.
    overhead.write_project(folder, shape, server_url=url, concurrency=concurrency,
                           budget=shape.val + 6, seed=0)  # fmt: skip
    if cpu_metric:
        (folder / "metric.py").write_text(CPU_METRIC)
    toml = (folder / "skynet.toml").read_text()
    extra = f'executor = "{executor}"\nworkers = {workers}\n'
    (folder / "skynet.toml").write_text(toml.replace("[engine]\n", "[engine]\n" + extra, 1))
    return folder


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _best(folder_of, repeat: int) -> dict[str, float]:
    """The fastest of `repeat` runs, each on a fresh copy of the project."""
    runs = [_run(folder_of(i)) for i in range(repeat)]
    return max(runs, key=lambda r: r["per_s"])


def _run(folder: Path) -> dict[str, float]:
    env = {**os.environ, _overhead().KEY_ENV: _overhead().KEY}
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "skynet.cli", "run", str(folder)],
                          env=env, capture_output=True, text=True, timeout=1800)  # fmt: skip
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"run in {folder} failed:\n{done.stderr[-2000:]}")
    with sqlite3.connect(folder / ".skynet" / "runs.db") as db:
        created, seed = db.execute("SELECT created, seed_candidate_id FROM runs").fetchone()
        stamps = sorted(
            _stamp(c)
            for (c,) in db.execute(
                "SELECT created FROM evaluations WHERE candidate_id = ? AND split = 'val'", (seed,)
            )
        )
    span = stamps[-1] - stamps[0]
    return {
        "evaluations": len(stamps),
        "per_s": (len(stamps) - 1) / span if span > 0 else float("inf"),
        "startup_s": stamps[0] - _stamp(created),
        "wall_s": wall,
    }


def _client_cpu_ms(url: str, calls: int = 60) -> float:
    """CPU milliseconds this process spends per model call (litellm and Skynet's model layer),
    sequential calls to the loopback server: what bounds evaluations/s per core."""
    from skynet.models import Models, ModelsConfig, ModelSettings

    overhead = _overhead()
    os.environ[overhead.KEY_ENV] = overhead.KEY
    settings = {overhead.MODEL: ModelSettings(api_base=url, api_key=overhead.KEY)}
    models = Models(
        ModelsConfig(task=overhead.MODEL, reflection=overhead.MODEL, cache_path=None,
                     settings=settings)
    )  # fmt: skip
    ask = [{"role": "user", "content": "Country: Country 00"}]
    models.complete("task", ask)  # imports and connections out of the figure
    began = time.process_time()
    for i in range(calls):
        models.complete("task", [{"role": "user", "content": f"Country: Country {i:02d} ({i})"}])
    return (time.process_time() - began) / calls * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-items", type=int, default=120, help="val items, CPU-bound runs")
    parser.add_argument("--io-items", type=int, default=320, help="val items, I/O-bound runs")
    parser.add_argument("--skip-ray", action="store_true", help="processes and threads only")
    parser.add_argument("--repeat", type=int, default=2,
                        help="runs of each; the fastest counts (a shared machine is noisy)")  # fmt: skip
    args = parser.parse_args(argv)
    overhead = _overhead()
    try:
        import ray  # noqa: F401

        ray_ok = not args.skip_ray
    except ImportError:
        ray_ok = False
    executors = ["processes", *(["ray"] if ray_ok else [])]
    print(f"scale.py · {platform.python_version()} · {os.cpu_count()} cores · "
          f"executors: threads, {', '.join(executors)}")  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="skynet-scale-"))
    results: dict[str, dict[str, float]] = {}
    try:
        # 1. CPU-bound metric.
        server = overhead.Server(latency_ms=0, in_process=False)
        try:
            for name, executor, workers in [("threads", "threads", 1),
                                            *[(f"{e}-{w}", e, w) for e in executors for w in (1, 2)]]:  # fmt: skip
                results[f"cpu-{name}"] = _best(
                    lambda i, name=name, executor=executor, workers=workers: _project(
                        root, f"cpu-{name}-{i}", server.url, items=args.cpu_items, concurrency=4,
                        executor=executor, workers=workers, cpu_metric=True),
                    args.repeat)  # fmt: skip
            # 3b. Added ms per evaluation at concurrency 1.
            for executor in ["threads", *executors]:
                results[f"one-{executor}"] = _best(
                    lambda i, executor=executor: _project(
                        root, f"one-{executor}-{i}", server.url, items=60, concurrency=1,
                        executor=executor, workers=1, cpu_metric=False),
                    args.repeat)  # fmt: skip
        finally:
            server.stop()
        # 2. I/O-bound.
        server = overhead.Server(latency_ms=100, in_process=False)
        try:
            client_ms = _client_cpu_ms(server.url)
            for name, executor, workers in [
                ("threads", "threads", 1),
                ("processes-2", "processes", 2),
            ]:
                results[f"io-{name}"] = _best(
                    lambda i, name=name, executor=executor, workers=workers: _project(
                        root, f"io-{name}-{i}", server.url, items=args.io_items, concurrency=16,
                        executor=executor, workers=workers, cpu_metric=False),
                    args.repeat)  # fmt: skip
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print("\n1. CPU-bound metric (20 ms CPU per evaluation), evaluations/s")
    threads = results["cpu-threads"]["per_s"]
    print(f"   threads (anchor)      {threads:7.1f}/s")
    for e in executors:
        one, two = results[f"cpu-{e}-1"]["per_s"], results[f"cpu-{e}-2"]["per_s"]
        print(f"   {e:<10} 1 worker  {one:7.1f}/s   2 workers {two:7.1f}/s   "
              f"2 over 1: {two / one:.2f}x (target >= 1.7x)   2 over threads: {two / threads:.2f}x")  # fmt: skip
    print("\n2. I/O-bound (100 ms latency, concurrency 16), fraction of the ideal 160/s")
    for name in ("threads", "processes-2"):
        r = results[f"io-{name}"]
        print(f"   {name:<12} {r['per_s']:7.1f}/s = {r['per_s'] / 160:.2f} of ideal"
              + ("   (target >= 0.8)" if name != "threads" else "   (anchor)"))  # fmt: skip
    cores = os.cpu_count() or 1
    print(f"   client CPU per model call (litellm + skynet.models): {client_ms:.1f} ms; the ideal "
          f"160/s needs {client_ms * 160 / 1000:.2f} of the {cores} cores for that alone, beside "
          "the driver and the model server")  # fmt: skip
    print("\n3. What an executor costs (60 evaluations at concurrency 1, no latency)")
    base = results["one-threads"]
    for e in ["threads", *executors]:
        r = results[f"one-{e}"]
        added = (1 / r["per_s"] - 1 / base["per_s"]) * 1000
        print(f"   {e:<10} whole run {r['wall_s']:6.2f} s, {r['wall_s'] - base['wall_s']:+6.2f} s "
              f"against threads (start-up: workers, Ray)   {added:+6.2f} ms per evaluation")  # fmt: skip
    print(
        "\n" + json.dumps({k: {m: round(v, 3) for m, v in r.items()} for k, r in results.items()})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
