"""Long run: Skynet's memory and speed over a 2,000-call optimization, early against late.

    python benchmarks/long_run.py [--calls 2000] [--latency-ms 0] [--concurrency 4]

One `skynet run` in a process of its own, on a fresh project, against a loopback model server in
a child process (benchmarks/overhead.py's project, metric and server, with a responder of its own
below). The figures are ratios of the run against itself, so a shared, noisy machine moves both
ends alike; absolute values are printed only to show where a ratio came from:

- the skynet process's RSS, sampled every 0.5 s: at the first recorded evaluation (start-up
  done), at the end and at its peak; end over start is the figure (target: flat, about 1.0x);
- metric calls per second over the first 10% of the run's recorded evaluations and over the last
  10% (runs.db timestamps, read-only), and late over early (target: no slowdown, >= ~0.8);
- runs.db and cache.db sizes at the end, and per 1,000 recorded evaluations; the wall time.

The scripted model keeps the search proposing for the whole budget, in a steady mix: each
reflection reply is a new instruction (a counter in it), and whether an instruction gets an item
right is a coin from a hash of the two (60% heads), so some proposals are accepted and the Pareto
front grows as in a real run. Items 9, 19, 29... are never answered right, so no candidate is
perfect on val or on every minibatch, and the run spends its calls instead of stopping early.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import importlib.util
import json
import multiprocessing as mp
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

_REFLECTION = "I am optimizing a parameter in my system."  # gepa's default reflection template
_COUNTRY = re.compile(r"Country (\d+)")
KNOWN_PERCENT = 60  # the share of (instruction, item) pairs the model gets right


def _overhead():
    if "overhead" in sys.modules:
        return sys.modules["overhead"]
    spec = importlib.util.spec_from_file_location("overhead", HERE / "overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["overhead"] = module
    spec.loader.exec_module(module)
    return module


class _Responder:
    """Each reflection: a new instruction. Each task reply: right by a hash of (instruction, item),
    never for items 9, 19, 29..."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.lock = threading.Lock()
        self.proposals = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        from skynet.testing.server import reply

        messages = body.get("messages") or []
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if _REFLECTION in text:
            with self.lock:
                self.proposals += 1
                n = self.proposals
            return reply(f"```\n{_overhead().IMPROVED} (v{n})\n```", latency_s=self.latency_s)
        system = next((str(m["content"]) for m in messages if m.get("role") == "system"), "")
        found = _COUNTRY.search(text)
        index = int(found.group(1)) if found else 0
        coin = zlib.crc32(f"{system}|{index}".encode()) % 100
        if index % 10 != 9 and coin < KNOWN_PERCENT:
            return reply(f"The capital of Country {index:02d} is City {index:02d}.",
                         latency_s=self.latency_s)  # fmt: skip
        return reply(f"Country {index:02d} is a country.", latency_s=self.latency_s)


def _serve(latency_s: float, conn: Any) -> None:
    """Child process: one ScriptedServer until told to stop."""
    from skynet.testing.server import ScriptedServer

    _overhead()._deepen_backlog()
    server = ScriptedServer(responder=_Responder(latency_s)).start()
    conn.send(server.url)
    conn.recv()
    server.stop()


def _rss_kb(pid: int) -> tuple[int, int] | None:
    """(resident, peak resident) in kB of a live process, or None once it is gone."""
    try:
        import psutil  # optional: /proc below without it

        info = psutil.Process(pid).memory_info()
        return info.rss // 1024, getattr(info, "peak_wset", info.rss) // 1024
    except ImportError:
        pass
    except Exception:  # psutil.NoSuchProcess and kin: the process ended
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmRSS" not in fields:  # a zombie: exited, not yet reaped
        return None
    return int(fields["VmRSS"].split()[0]), int(fields.get("VmHWM", fields["VmRSS"]).split()[0])


def _sample(pid: int, every_s: float, samples: list[tuple[float, int, int]],
            done: threading.Event) -> None:  # fmt: skip
    """Append (wall clock, RSS kB, peak RSS kB) every `every_s` until the process ends."""
    while not done.is_set():
        rss = _rss_kb(pid)
        if rss is not None:
            samples.append((time.time(), *rss))
        done.wait(every_s)


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _rate(stamps: list[float]) -> float:
    """Evaluations per second over a run of recorded stamps (n stamps bound n - 1 gaps)."""
    span = stamps[-1] - stamps[0]
    return (len(stamps) - 1) / span if span > 0 else float("inf")


def _db_size(path: Path) -> int:
    """A SQLite file's bytes, with its write-ahead log if one is left."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def _run(folder: Path, every_s: float) -> dict[str, Any]:
    overhead = _overhead()
    env = {**os.environ, overhead.KEY_ENV: overhead.KEY}
    samples: list[tuple[float, int, int]] = []
    done = threading.Event()
    began = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "skynet.cli", "run", str(folder)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    sampler = threading.Thread(target=_sample, args=(process.pid, every_s, samples, done))
    sampler.start()
    try:
        out, err = process.communicate(timeout=3600)
    finally:
        done.set()
        sampler.join()
    wall = time.monotonic() - began
    if process.returncode != 0:
        raise SystemExit(f"run in {folder} failed:\n{err[-2000:]}")
    db_path = folder / ".skynet" / "runs.db"
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
        created, notes = db.execute("SELECT created, notes FROM runs").fetchone()
        stamps = sorted(_stamp(c) for (c,) in db.execute("SELECT created FROM evaluations"))
        candidates = db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]
        proposals = db.execute("SELECT COUNT(*) FROM proposals").fetchone()[0]
    return {
        "out": out,
        "wall_s": wall,
        "samples": samples,
        "created": _stamp(created),
        "notes": json.loads(notes),
        "stamps": stamps,
        "candidates": candidates,
        "proposals": proposals,
        "runs_db": _db_size(db_path),
        "cache_db": _db_size(folder / ".skynet" / "cache.db"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="max_metric_calls of the run")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="model reply latency")
    parser.add_argument("--concurrency", type=int, default=4, help="[engine] concurrency")
    parser.add_argument("--sample-s", type=float, default=0.5, help="RSS sampling period")
    parser.add_argument("--keep", action="store_true", help="keep the temp project")
    args = parser.parse_args(argv)
    overhead = _overhead()
    load = os.getloadavg()[0]
    print(f"long_run.py · python {platform.python_version()} · {os.cpu_count()} cores (load "
          f"average {load:.1f} at start) · max_metric_calls {args.calls} · latency "
          f"{args.latency_ms:g} ms · concurrency {args.concurrency}")  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="skynet-long-run-"))
    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(args.latency_ms / 1000, child), daemon=True)
    server.start()
    try:
        folder = root / "project"
        # 40 train items for the minibatches, 10 val: the seed's val evaluation is a small part of
        # the first 10%, so early and late are the same steady mix of reflection steps.
        overhead.write_project(folder, overhead.Shape(items=50, train=40), server_url=conn.recv(),
                               concurrency=args.concurrency, budget=args.calls, seed=0)  # fmt: skip
        r = _run(folder, args.sample_s)
    finally:
        conn.send("stop")
        server.join(10)
        if args.keep:
            print(f"project kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    stamps, samples = r["stamps"], r["samples"]
    if len(stamps) < 20 or not samples:
        raise SystemExit(f"too little to measure: {len(stamps)} evaluations, {len(samples)} "
                         "RSS samples; raise --calls")  # fmt: skip
    tenth = max(2, len(stamps) // 10)
    early, late = _rate(stamps[:tenth]), _rate(stamps[-tenth:])
    # Start-up done: the first sample at or after the first recorded evaluation.
    first = next((s for s in samples if s[0] >= stamps[0]), samples[-1])
    start_mb, end_mb = first[1] / 1024, samples[-1][1] / 1024
    peak_mb = max(max(s[1] for s in samples), samples[-1][2]) / 1024
    per_k = 1000 / len(stamps)
    mb = 1024 * 1024
    calls = r["notes"].get("metric_calls", {})
    print(f"run: {len(stamps)} evaluations recorded, metric calls used {calls.get('used', '?')} "
          f"(replayed {calls.get('replayed', '?')}) of {args.calls}; {r['candidates']} candidates, "
          f"{r['proposals']} proposals; stopped by: {r['notes'].get('stopped_by', '?')}")  # fmt: skip
    print(f"start-up (run created to first evaluation): {stamps[0] - r['created']:.2f} s; "
          f"{len(samples)} RSS samples")  # fmt: skip
    print(f"rss_start_mb      {start_mb:8.1f}   (at the first recorded evaluation)")
    print(f"rss_end_mb        {end_mb:8.1f}   (last sample before exit)")
    print(f"rss_peak_mb       {peak_mb:8.1f}")
    print(f"rss_end_over_start {end_mb / start_mb:7.2f}x  (target: flat, ~1.0x)")
    print(f"calls_per_s_early {early:8.1f}   (first {tenth} evaluations)")
    print(f"calls_per_s_late  {late:8.1f}   (last {tenth} evaluations)")
    print(f"late_over_early   {late / early:8.2f}x  (target >= ~0.8: no slowdown)")
    print(f"runs_db_mb        {r['runs_db'] / mb:8.2f}   ({r['runs_db'] / mb * per_k:.2f} MB "
          "per 1,000 evaluations)")  # fmt: skip
    print(f"cache_db_mb       {r['cache_db'] / mb:8.2f}   ({r['cache_db'] / mb * per_k:.2f} MB "
          "per 1,000 evaluations)")  # fmt: skip
    print(f"wall_s            {r['wall_s']:8.1f}   (whole `skynet run`, start-up included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
