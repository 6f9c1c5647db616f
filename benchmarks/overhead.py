"""Skynet's overhead over raw GEPA, and its evaluation throughput, against a scripted model server.

    python benchmarks/overhead.py [--latency-ms 20] [--max-metric-calls 120] [--concurrency 8]

One process run measures everything against anchors measured in the same run (no absolute time is
asserted anywhere):

1. Overhead. The same optimization (metric, budget, seed, data, concurrency, gepa's template)
   is run twice per repeat, alternating which goes first:
     raw    - `gepa.optimize_anything` with an evaluator that calls the task model through
              `litellm.completion` and a reflection_lm callable doing the same (no skynet);
     skynet - `skynet.project.open_project` + `skynet.runner.run` on a fresh temp project
              (fresh .skynet each time: no cache hits).
   Printed: wall times, the ratio skynet / raw (target <= 1.10), evaluations recorded in runs.db
   against the metric calls actually made, recorded rows per second.
2. Throughput. Latency 100 ms, concurrency 16: evaluations per second during the skynet run as a
   fraction of the ideal concurrency / latency (target >= 0.9). GEPA's reflection steps evaluate
   minibatches of 3 one after another, which caps the whole run's parallelism whatever Skynet
   does, so the target is applied to the phase where concurrency can apply: the seed candidate's
   full val evaluation. The whole-run rate is printed too, labelled, and raw GEPA's rates on the
   same phases are the anchor.

The model server is skynet.testing.ScriptedServer (a real loopback OpenAI-compatible HTTP server)
with a deterministic responder and a fixed latency. By default it runs in a child process, as a
real model server would: in this process its threads would take the GIL from the client threads
being measured. --server-in-process runs it here instead.
"""

from __future__ import annotations

import os

# Before anything imports litellm: never fetch litellm's price table over the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import contextlib
import dataclasses
import importlib.util
import io
import json
import multiprocessing as mp
import platform
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL = "openai/skynet-test"  # skynet.testing.server.MODEL
KEY_ENV = "SKYNET_BENCH_API_KEY"
KEY = "sk-loopback"
SEED_INSTRUCTION = "Tell the user about the country."
IMPROVED = "Name the capital city of the country the user gives, in one short sentence."
USER_TEMPLATE = "Country: {country}"
MAX_TOKENS = 64
METRIC_SOURCE = '''"""Does the reply name the country's capital? (benchmark metric)"""

CALLS = []  # one entry per call; the benchmark reads len(CALLS) (list.append is atomic)


def score(input, output, expected=None):
    CALLS.append(1)
    capital = expected["capital"]
    named = capital.lower() in str(output).lower()
    if named:
        feedback = f"Right: the reply names {capital}."
    else:
        feedback = (
            f"Wrong: the reply does not name the capital of {input['country']}; it is {capital}."
        )
    return float(named), {"feedback": feedback, "scores": {"names_capital": float(named)}}
'''


# -- the scripted model ------------------------------------------------------------------------

_REV = re.compile(r"\(rev (\d+)\)")
_CURRENT = re.compile(r"```\n(.*?)\n```", re.S)  # the current text: the prompt's first fence
# gepa's default reflection template opens so (both runs use it: the reflection model is not
# an embedded one).
_REFLECTION = "I am optimizing a parameter in my system."
_COUNTRY = re.compile(r"Country (\d+)")


def _revision(text: str) -> int:
    found = _REV.search(text)
    return int(found.group(1)) if found else 0


def answer(body: dict[str, Any]) -> tuple[str, str]:
    """The deterministic reply to one chat request: (kind, text), a function of the request only.

    Reflection: revision r of the instruction becomes revision r + 1 (never the same text back).
    Task: item i is answered right when (7 i mod 10) < 3 + 2 r, so each revision of the
    instruction gets more items right (30 %, 50 %, 70 %, 90 %, 100 %).
    """
    messages = body.get("messages") or []
    text = "\n".join(str(m.get("content", "")) for m in messages)
    if _REFLECTION in text:
        found = _CURRENT.search(text)
        rev = _revision(found.group(1)) if found else 0
        return "reflection", f"```\n{IMPROVED} (rev {rev + 1})\n```"
    system = next((str(m["content"]) for m in messages if m.get("role") == "system"), "")
    user = next((str(m["content"]) for m in messages if m.get("role") == "user"), "")
    found = _COUNTRY.search(user)
    index = int(found.group(1)) if found else 0
    if (7 * index) % 10 < 3 + 2 * _revision(system):
        return "task", f"The capital of Country {index:02d} is City {index:02d}."
    return "task", f"Country {index:02d} is a country."


class _Responder:
    """ScriptedServer responder: answer() after a fixed latency; counts requests by kind."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.lock = threading.Lock()
        self.counts = {"task": 0, "reflection": 0}

    def __call__(self, body: dict[str, Any]) -> Any:
        from skynet.testing.server import reply

        kind, text = answer(body)
        with self.lock:
            self.counts[kind] += 1
        return reply(text, latency_s=self.latency_s)

    def take_counts(self) -> dict[str, int]:
        with self.lock:
            counts, self.counts = self.counts, {"task": 0, "reflection": 0}
        return counts


def _deepen_backlog() -> None:
    """Listen with a backlog of 128 instead of socketserver's 5.

    With 5, a burst of more than 5 new connections (16 threads opening their first connection)
    overflows the listen queue; the kernel drops the SYNs and the client resends them after 1 s,
    a stall that belongs to the test server, not to the client being measured. ScriptedServer
    builds a ThreadingHTTPServer, so the class attribute is set here, in the server's process.
    """
    from http.server import ThreadingHTTPServer

    ThreadingHTTPServer.request_queue_size = 128


def _serve(latency_s: float, conn: Any) -> None:
    """Child process: one ScriptedServer until told to stop; hands back request counts."""
    from skynet.testing.server import ScriptedServer

    _deepen_backlog()
    responder = _Responder(latency_s)
    server = ScriptedServer(responder=responder).start()
    conn.send(server.url)
    while True:
        message = conn.recv()
        if message == "counts":
            conn.send(responder.take_counts())
        else:
            break
    server.stop()


class Server:
    """A ScriptedServer with the benchmark's responder, in a child process or in this one."""

    def __init__(self, latency_ms: float, in_process: bool) -> None:
        self.latency_ms = latency_ms
        self._server: Any = None
        self._responder: _Responder | None = None
        self._process: Any = None
        self._conn: Any = None
        if in_process:
            from skynet.testing.server import ScriptedServer

            _deepen_backlog()
            self._responder = _Responder(latency_ms / 1000)
            self._server = ScriptedServer(responder=self._responder).start()
            self.url = self._server.url
        else:
            ctx = mp.get_context("spawn")
            self._conn, child = ctx.Pipe()
            self._process = ctx.Process(target=_serve, args=(latency_ms / 1000, child), daemon=True)
            self._process.start()
            self.url = self._conn.recv()

    def take_counts(self) -> dict[str, int]:
        """Requests served by kind since the last call."""
        if self._responder is not None:
            return self._responder.take_counts()
        self._conn.send("counts")
        return self._conn.recv()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        if self._process is not None:
            self._conn.send("stop")
            self._process.join(10)


# -- the project -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Shape:
    """A dataset: items 0..n-1, the first `train` of them train, the rest val."""

    items: int
    train: int

    @property
    def val(self) -> int:
        return self.items - self.train


def write_project(
    folder: Path, shape: Shape, *, server_url: str, concurrency: int, budget: int, seed: int
) -> None:
    folder.mkdir(parents=True)
    rows = [
        {
            "id": f"c{i:02d}",
            "country": f"Country {i:02d}",
            "capital": f"City {i:02d}",
            "split": "train" if i < shape.train else "val",
        }
        for i in range(shape.items)
    ]
    (folder / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "metric.py").write_text(METRIC_SOURCE)
    (folder / "prompt.md").write_text(
        f"=== instructions ===\n{SEED_INSTRUCTION}\n=== user ===\n{USER_TEMPLATE}\n"
    )
    (folder / "skynet.toml").write_text(
        f"""[data]
path = "data.jsonl"
inputs = ["country"]
outputs = ["capital"]
split_column = "split"

[artifact]
kind = "prompt"
path = "prompt.md"
max_tokens = {MAX_TOKENS}

[metric]
path = "metric.py"

[engine]
name = "gepa"
seed = {seed}
concurrency = {concurrency}

[budget]
max_metric_calls = {budget}

[models]
task = "{MODEL}"
reflection = "{MODEL}"

[models.endpoints."{MODEL}"]
api_base = "{server_url}"
api_key_env = "{KEY_ENV}"
timeout_s = 30
max_concurrent = {concurrency}

[models.prices."{MODEL}"]
input_per_mtok = 1.0
output_per_mtok = 2.0
"""
    )


def load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- one run, measured -------------------------------------------------------------------------


@dataclasses.dataclass
class Probe:
    """Start and end of every evaluation the engine asked for."""

    seed_candidate: dict[str, str]
    val_ids: frozenset[str]
    spans: list[tuple[float, float, bool, bool, str, str]] = dataclasses.field(default_factory=list)

    def record(self, candidate: Any, item_id: str, t0: float, t1: float) -> None:
        cand = dict(candidate)
        key = json.dumps(cand, sort_keys=True)
        self.spans.append(
            (t0, t1, cand == self.seed_candidate, item_id in self.val_ids, key, item_id)
        )

    @property
    def calls(self) -> int:
        return len(self.spans)

    @property
    def distinct(self) -> int:
        return len({(s[4], s[5]) for s in self.spans})

    def seed_val_rate(self) -> tuple[int, float]:
        """(evaluations, per second) over the seed candidate's full val evaluation."""
        phase = [s for s in self.spans if s[2] and s[3]]
        span = max(s[1] for s in phase) - min(s[0] for s in phase)
        return len(phase), len(phase) / span


@dataclasses.dataclass
class RunResult:
    kind: str
    wall_s: float
    cpu_s: float
    metric_calls: int  # evaluations the engine asked for (GEPA's metric-call count)
    metric_invocations: int  # times score() actually ran for an evaluation
    distinct: int  # distinct (candidate, item) pairs among metric_calls
    task_requests: int
    reflection_requests: int
    candidates: int
    val_scores: list[float]
    probe: Probe
    rows: dict[str, int] = dataclasses.field(default_factory=dict)


_PROBE: Probe | None = None


def warm_up(*servers: Server) -> None:
    """Before the timed runs: the engine instrumented, and both paths warmed once (litellm's
    first call builds schemas; HTTP clients start up) on each server, its counts reset, so the
    first timed run of either kind does not pay it."""
    import litellm

    from skynet.models._litellm import warm

    _instrument_skynet_engine()
    warm()
    for server in servers:
        litellm.completion(
            model=MODEL,
            messages=[{"role": "user", "content": "Country: Country 01"}],
            api_base=server.url,
            api_key=KEY,
            max_tokens=8,
        )
        server.take_counts()


def _instrument_skynet_engine() -> None:
    """Wrap the gepa engines' optimize (in this process only) to time each evaluation and keep
    the outcome.

    The wrapper adds two clock reads and a list append per evaluation, as the raw run's does.
    """
    from engines.async_gepa import AsyncGepaEngine
    from engines.gepa import GepaEngine

    for engine in (GepaEngine, AsyncGepaEngine):
        engine.optimize = _timed_optimize(engine.optimize)  # type: ignore[method-assign]


def _timed_optimize(original: Any) -> Any:
    def optimize(self: Any, ctx: Any) -> Any:
        probe = _PROBE
        assert probe is not None
        evaluate = ctx.evaluate

        def timed(candidate: Any, item: Any) -> Any:
            t0 = time.perf_counter()
            result = evaluate(candidate, item)
            probe.record(candidate, item.id, t0, time.perf_counter())
            return result

        outcome = original(self, dataclasses.replace(ctx, evaluate=timed))
        probe.outcome = outcome  # type: ignore[attr-defined]
        return outcome

    return optimize


def overhead_config(*, concurrency: int, budget: int, seed: int) -> RawConfig:
    """The GEPAConfig the overhead pairs use: Skynet's settings for this project, spelled out."""

    def config(train: list[dict[str, Any]], reflection_lm: Callable[..., str]) -> Any:
        from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig

        return GEPAConfig(
            engine=EngineConfig(
                seed=seed,
                max_metric_calls=budget,
                parallel=concurrency > 1,
                max_workers=concurrency,
                raise_on_exception=True,
                track_best_outputs=False,
                display_progress_bar=False,
                capture_stdio=False,
            ),
            reflection=ReflectionConfig(
                reflection_lm=reflection_lm,
                reflection_minibatch_size=min(3, len(train)),
                # gepa's default template: what Skynet's engine hands gepa for this model.
            ),
        )

    return config


# A GEPAConfig from the train items and a reflection_lm callable that asks the server.
RawConfig = Callable[[list[dict[str, Any]], Callable[..., str]], Any]


def run_raw(folder: Path, server: Server, config: RawConfig) -> RunResult:
    """gepa.optimize_anything + litellm, as a user without skynet would write it."""
    import litellm
    from gepa.optimize_anything import optimize_anything

    server.take_counts()
    cpu0, t0 = time.process_time(), time.perf_counter()
    metric = load_module(folder / "metric.py", f"raw_metric_{id(folder)}")
    rows = [json.loads(line) for line in (folder / "data.jsonl").read_text().splitlines()]
    items = [
        {"id": r["id"], "input": {"country": r["country"]}, "expected": {"capital": r["capital"]}}
        for r in rows
    ]
    train = [it for it, r in zip(items, rows, strict=True) if r["split"] == "train"]
    val = [it for it, r in zip(items, rows, strict=True) if r["split"] == "val"]
    seed_candidate = {"instructions": SEED_INSTRUCTION}
    probe = Probe(seed_candidate, frozenset(it["id"] for it in val))

    def complete(messages: list[dict[str, str]], **params: Any) -> str:
        response = litellm.completion(
            model=MODEL,
            messages=messages,
            api_base=server.url,
            api_key=KEY,
            timeout=30,
            **params,
        )
        return response.choices[0].message.content or ""

    def evaluator(candidate: dict[str, str], example: dict[str, Any]) -> tuple[float, dict]:
        started = time.perf_counter()
        messages = [
            {"role": "system", "content": candidate["instructions"].strip()},
            {"role": "user", "content": USER_TEMPLATE.format(**example["input"])},
        ]
        output = complete(messages, max_tokens=MAX_TOKENS, temperature=0.0)
        value, info = metric.score(example["input"], output, example["expected"])
        side = {
            "Input": example["input"],
            "Expected": example["expected"],
            "Output": output,
            "Feedback": info["feedback"],
            "scores": dict(info["scores"]),
        }
        probe.record(candidate, example["id"], started, time.perf_counter())
        return float(value), side

    def reflection_lm(prompt: str | list[dict[str, Any]]) -> str:
        if not isinstance(prompt, str):
            prompt = "\n\n".join(str(m.get("content", "")) for m in prompt)
        return complete([{"role": "user", "content": prompt}], max_tokens=1024, temperature=0.0)

    with contextlib.redirect_stdout(io.StringIO()):  # GEPA's iteration log, in both runs
        result = optimize_anything(
            seed_candidate=dict(seed_candidate),
            evaluator=evaluator,
            dataset=train,
            valset=val,
            config=config(train, reflection_lm),
        )
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    counts = server.take_counts()
    return RunResult(
        kind="raw",
        wall_s=wall,
        cpu_s=cpu,
        metric_calls=int(result.total_metric_calls or 0),
        metric_invocations=len(metric.CALLS),
        distinct=probe.distinct,
        task_requests=counts["task"],
        reflection_requests=counts["reflection"],
        candidates=len(result.candidates),
        val_scores=[round(float(s), 4) for s in result.val_aggregate_scores],
        probe=probe,
    )


def run_skynet(folder: Path, server: Server) -> RunResult:
    """skynet.project.open_project + run on the project folder (a fresh .skynet)."""
    global _PROBE
    from skynet import runner
    from skynet.project import open_project, self_test

    assert not (folder / ".skynet").exists()
    server.take_counts()
    cpu0, t0 = time.process_time(), time.perf_counter()
    project = open_project(folder)
    _PROBE = probe = Probe(
        dict(project.artifact.components), frozenset(i.id for i in project.dataset.val)
    )
    calls_list = project.metric.fn.__globals__["CALLS"]
    selftest_start = len(calls_list)
    with contextlib.redirect_stdout(io.StringIO()):  # GEPA's iteration log, in both runs
        outcome = runner.run(project, out=io.StringIO())
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    counts = server.take_counts()
    # score() calls made by the self-test: the same self-test, run again, counted.
    before = len(calls_list)
    self_test(project)
    selftest_calls = len(calls_list) - before
    metric_invocations = len(calls_list) - selftest_start - 2 * selftest_calls
    engine_outcome = probe.outcome  # type: ignore[attr-defined]
    with contextlib.closing(sqlite3.connect(project.store_path)) as db:
        rows = {
            table: db.execute(
                f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (outcome.run_id,)
            ).fetchone()[0]
            for table in ("evaluations", "calls", "candidates", "proposals")
        }
    return RunResult(
        kind="skynet",
        wall_s=wall,
        cpu_s=cpu,
        metric_calls=engine_outcome.metric_calls,
        metric_invocations=metric_invocations,
        distinct=probe.distinct,
        task_requests=counts["task"],
        reflection_requests=counts["reflection"],
        candidates=len(engine_outcome.candidates),
        val_scores=[round(s, 4) for s in engine_outcome.val_scores],
        probe=probe,
        rows=rows,
    )


def litellm_async_alone(server: Server, concurrency: int, calls: int) -> float:
    """Calls per second of bare litellm.acompletion: `concurrency` tasks on one event loop.

    The other way this process's litellm client can run calls in parallel; Skynet's sync threads
    would take this path if it were faster (it was not, on 2 cores: see benchmarks/README.md).
    """
    import asyncio

    import litellm

    async def run_all() -> None:
        slots = asyncio.Semaphore(concurrency)

        async def call(i: int) -> None:
            async with slots:
                await litellm.acompletion(
                    model=MODEL,
                    messages=[
                        {"role": "system", "content": SEED_INSTRUCTION},
                        {
                            "role": "user",
                            "content": USER_TEMPLATE.format(country=f"Country {i:02d}"),
                        },
                    ],
                    api_base=server.url,
                    api_key=KEY,
                    timeout=30,
                    max_tokens=MAX_TOKENS,
                    temperature=0.0,
                )

        await asyncio.gather(*(call(i) for i in range(calls)))

    started = time.perf_counter()
    asyncio.run(run_all())
    rate = calls / (time.perf_counter() - started)
    server.take_counts()
    return rate


def litellm_alone(server: Server, concurrency: int, calls: int) -> float:
    """Calls per second of bare litellm.completion from `concurrency` threads: the client's ceiling.

    No GEPA, no metric, no skynet: what this process can push through litellm at this latency.
    """
    from concurrent.futures import ThreadPoolExecutor

    import litellm

    def call(i: int) -> None:
        litellm.completion(
            model=MODEL,
            messages=[
                {"role": "system", "content": SEED_INSTRUCTION},
                {"role": "user", "content": USER_TEMPLATE.format(country=f"Country {i:02d}")},
            ],
            api_base=server.url,
            api_key=KEY,
            timeout=30,
            max_tokens=MAX_TOKENS,
            temperature=0.0,
        )

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(call, range(calls)))
    rate = calls / (time.perf_counter() - started)
    server.take_counts()
    return rate


def listen_overflows() -> int | None:
    """The kernel's count of listen-queue overflows (Linux), or None where it cannot be read."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        names, numbers = head.split(), values.split()
        if "ListenOverflows" in names:
            return int(numbers[names.index("ListenOverflows")])
    return None


def commit_ms(folder: Path) -> dict[str, float]:
    """Median time of one small SQLite WAL commit in `folder`, by synchronous setting.

    Context for the figures, not a result: the run store commits each record with
    synchronous = FULL (an fsync per commit), and this disk's fsync time varies a lot.
    """
    found = {}
    for mode in ("FULL", "NORMAL"):
        path = folder / f"probe-{mode}.db"
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute(f"PRAGMA synchronous = {mode}")
            db.execute("CREATE TABLE t (x)")
            times = []
            for i in range(60):
                t0 = time.perf_counter()
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO t VALUES (?)", (i,))
                db.execute("COMMIT")
                times.append(time.perf_counter() - t0)
        found[mode] = statistics.median(times) * 1000
    return found


# -- the report --------------------------------------------------------------------------------


def table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def describe(r: RunResult) -> str:
    return (
        f"{r.kind:6s} wall {r.wall_s:6.3f} s  cpu {r.cpu_s:6.3f} s  metric calls {r.metric_calls}"
        f"  score() ran {r.metric_invocations}  task requests {r.task_requests}"
        f"  reflection requests {r.reflection_requests}  candidates {r.candidates}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=20.0,
        help="task and reflection model latency in the overhead runs",
    )
    parser.add_argument("--max-metric-calls", type=int, default=120)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeats",
        type=int,
        default=7,
        help="raw/skynet pairs in the overhead check (order alternates)",
    )
    parser.add_argument("--throughput-latency-ms", type=float, default=100.0)
    parser.add_argument("--throughput-concurrency", type=int, default=16)
    parser.add_argument("--throughput-repeats", type=int, default=3)
    parser.add_argument(
        "--server-in-process",
        action="store_true",
        help="run the ScriptedServer in this process (its threads share the GIL)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp projects")
    args = parser.parse_args(argv)

    os.environ[KEY_ENV] = KEY
    # Start the servers before the heavy imports (the child processes are spawned, not forked).
    main_server = Server(args.latency_ms, args.server_in_process)
    tp_server = Server(args.throughput_latency_ms, args.server_in_process)
    work = Path(tempfile.mkdtemp(prefix="skynet-overhead-"))
    try:
        return _measure(args, main_server, tp_server, work)
    finally:
        main_server.stop()
        tp_server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _measure(args: argparse.Namespace, main_server: Server, tp_server: Server, work: Path) -> int:

    from skynet import runner  # noqa: F401 — imported before timing, as litellm and gepa are

    warm_up(main_server, tp_server)

    commits = commit_ms(work)
    overflows_before = listen_overflows()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"skynet overhead benchmark · python {platform.python_version()} · gepa "
        f"{_version('gepa')} · litellm {_version('litellm')} · {os.cpu_count()} CPUs "
        f"(load average {load:.1f} at start) · model server "
        f"{'in this process' if args.server_in_process else 'in a child process'}"
    )
    print(
        f"context: one SQLite WAL commit in the temp folder takes {commits['FULL']:.2f} ms with "
        f"synchronous=FULL, {commits['NORMAL']:.3f} ms with NORMAL (the run store's setting)"
    )

    # ---- 1. overhead --------------------------------------------------------------------------
    shape = Shape(items=40, train=24)
    print(
        f"\n1. overhead: {shape.items} items ({shape.train} train / {shape.val} val), "
        f"latency {args.latency_ms:g} ms, concurrency {args.concurrency}, "
        f"max_metric_calls {args.max_metric_calls}, seed {args.seed}, {args.repeats} pairs"
    )
    pairs: list[tuple[RunResult, RunResult]] = []
    variants = ["raw", "skynet"]
    for rep in range(args.repeats):
        done: dict[str, RunResult] = {}
        shift = rep % len(variants)  # rotate the order, so slow drift hits every variant alike
        for kind in variants[shift:] + variants[:shift]:
            folder = work / f"overhead-{rep}-{kind}"
            write_project(
                folder,
                shape,
                server_url=main_server.url,
                concurrency=args.concurrency,
                budget=args.max_metric_calls,
                seed=args.seed,
            )
            if kind == "raw":
                done[kind] = run_raw(
                    folder,
                    main_server,
                    overhead_config(
                        concurrency=args.concurrency, budget=args.max_metric_calls, seed=args.seed
                    ),
                )
            else:
                done[kind] = run_skynet(folder, main_server)
        raw, sky = done["raw"], done["skynet"]
        pairs.append((raw, sky))
        print(
            f"  pair {rep + 1}: raw {raw.wall_s:.3f} s, skynet {sky.wall_s:.3f} s, "
            f"ratio {sky.wall_s / raw.wall_s:.3f}, cpu ratio {sky.cpu_s / raw.cpu_s:.2f}"
        )
    raw, sky = pairs[0]
    print("  first pair in detail:")
    print("   ", describe(raw))
    print("   ", describe(sky))
    same = sum(r.val_scores == s.val_scores and r.metric_calls == s.metric_calls for r, s in pairs)
    print(
        f"    same trajectory (val scores per candidate, metric calls) in {same} of "
        f"{len(pairs)} pairs; first pair: raw {raw.val_scores}, skynet {sky.val_scores}"
    )
    ratios = [s.wall_s / r.wall_s for r, s in pairs]
    cpu_ratios = [s.cpu_s / r.cpu_s for r, s in pairs]
    ratio = statistics.median(ratios)
    raw_wall = statistics.median(r.wall_s for r, _ in pairs)
    sky_wall = statistics.median(s.wall_s for _, s in pairs)
    evals = sky.rows["evaluations"]
    replayed = sky.metric_calls - sky.metric_invocations
    print(f"  runs.db of the first skynet run: {sky.rows}")
    print(
        f"  skynet: GEPA counted {sky.metric_calls} metric calls; score() ran "
        f"{sky.metric_invocations} times; {replayed} were repeats of a (candidate, item) "
        f"already recorded, served from runs.db (raw GEPA called the model again for them: "
        f"{raw.task_requests} task requests vs skynet's {sky.task_requests})"
    )
    records_ok = evals == sky.metric_invocations == sky.distinct
    rows_per_s = statistics.median(s.rows["evaluations"] / s.wall_s for _, s in pairs)
    all_rows_per_s = statistics.median(sum(s.rows.values()) / s.wall_s for _, s in pairs)

    # ---- 2. throughput --------------------------------------------------------------------------
    conc, lat = args.throughput_concurrency, args.throughput_latency_ms
    ideal = conc / (lat / 1000)
    tp_shape = Shape(items=48, train=16)
    print(
        f"\n2. throughput: latency {lat:g} ms, concurrency {conc} (ideal {ideal:g} evaluations/s), "
        f"{tp_shape.items} items ({tp_shape.train} train / {tp_shape.val} val), "
        f"max_metric_calls {args.max_metric_calls}, {args.throughput_repeats} pairs"
    )
    print(
        f"  GEPA evaluates the seed on the whole val set ({tp_shape.val} items, "
        f"{tp_shape.val // conc} full waves of {conc}) in one parallel batch; after that each "
        "reflection step evaluates minibatches of 3 one after another, between sequential "
        f"reflection calls, so at most 3 of {conc} slots are used there. The target applies to "
        "the seed's full val evaluation; whole-run rates are shown for information."
    )
    print(
        f"  Anchors: raw GEPA on the same data, and bare litellm ({tp_shape.val} calls, no GEPA "
        f"or metric): litellm.completion from {conc} threads, and litellm.acompletion as {conc} "
        "tasks on one event loop: the most this process's litellm client pushes at this latency."
    )
    tp: list[tuple[RunResult, RunResult]] = []
    bare: list[float] = []
    bare_async: list[float] = []
    litellm_async_alone(tp_server, conc, conc)  # warm the async client once, untimed
    for rep in range(args.throughput_repeats):
        done = {}
        for kind in ("raw", "skynet") if rep % 2 == 0 else ("skynet", "raw"):
            folder = work / f"throughput-{rep}-{kind}"
            write_project(
                folder,
                tp_shape,
                server_url=tp_server.url,
                concurrency=conc,
                budget=args.max_metric_calls,
                seed=args.seed,
            )
            if kind == "raw":
                done[kind] = run_raw(
                    folder,
                    tp_server,
                    overhead_config(concurrency=conc, budget=args.max_metric_calls, seed=args.seed),
                )
            else:
                done[kind] = run_skynet(folder, tp_server)
        tp.append((done["raw"], done["skynet"]))
        bare.append(litellm_alone(tp_server, conc, tp_shape.val))
        bare_async.append(litellm_async_alone(tp_server, conc, tp_shape.val))
        r_n, r_rate = done["raw"].probe.seed_val_rate()
        s_n, s_rate = done["skynet"].probe.seed_val_rate()
        print(
            f"  pair {rep + 1}: seed val phase ({s_n} evaluations): raw {r_rate:.1f}/s "
            f"({r_rate / ideal:.2f} of ideal), skynet {s_rate:.1f}/s ({s_rate / ideal:.2f}), "
            f"bare litellm {bare[-1]:.1f}/s ({bare[-1] / ideal:.2f}), async "
            f"{bare_async[-1]:.1f}/s ({bare_async[-1] / ideal:.2f}); "
            f"whole run: raw {done['raw'].metric_calls / done['raw'].wall_s:.1f}/s, "
            f"skynet {done['skynet'].metric_calls / done['skynet'].wall_s:.1f}/s"
        )
    sky_phase = statistics.median(s.probe.seed_val_rate()[1] for _, s in tp)
    raw_phase = statistics.median(r.probe.seed_val_rate()[1] for r, _ in tp)
    sky_whole = statistics.median(s.metric_calls / s.wall_s for _, s in tp)
    raw_whole = statistics.median(r.metric_calls / r.wall_s for r, _ in tp)
    tp_ratio = statistics.median(s.wall_s / r.wall_s for r, s in tp)
    bare_rate = statistics.median(bare)
    bare_async_rate = statistics.median(bare_async)

    overflows_after = listen_overflows()
    if overflows_before is not None and overflows_after is not None:
        print(
            f"  listen-queue overflows on this machine during the benchmark: "
            f"{overflows_after - overflows_before} (each costs a client a 1 s SYN resend; "
            "should be 0)"
        )

    # ---- summary --------------------------------------------------------------------------------
    def met(ok: bool) -> str:
        return "met" if ok else "NOT MET"

    print("\nsummary (medians over pairs; every figure is relative to an anchor measured above)")
    print(
        table(
            [
                ("check", "measured", "target", "result"),
                (
                    f"wall time skynet / raw ({args.latency_ms:g} ms, conc {args.concurrency})",
                    f"{ratio:.3f}  ({sky_wall:.2f} s / {raw_wall:.2f} s; pairs "
                    + ", ".join(f"{x:.2f}" for x in ratios)
                    + ")",
                    "<= 1.10",
                    met(ratio <= 1.10),
                ),
                (
                    "cpu time skynet / raw (same runs)",
                    f"{statistics.median(cpu_ratios):.2f}",
                    "-",
                    "info",
                ),
                (
                    "runs.db evaluations = score() calls made",
                    f"{evals} rows, {sky.metric_invocations} calls, {sky.distinct} distinct pairs "
                    f"(GEPA's count {sky.metric_calls} incl. {replayed} replays)",
                    "equal",
                    met(records_ok),
                ),
                (
                    "recorded rows per second",
                    f"{rows_per_s:.0f} evaluations/s, {all_rows_per_s:.0f} rows/s (all tables)",
                    "-",
                    "info",
                ),
                (
                    f"seed val phase throughput ({lat:g} ms, conc {conc})",
                    f"{sky_phase:.1f}/s = {sky_phase / ideal:.2f} of {ideal:g}/s (raw gepa "
                    f"{raw_phase / ideal:.2f}, bare litellm {bare_rate / ideal:.2f}, "
                    f"async {bare_async_rate / ideal:.2f})",
                    ">= 0.90",
                    met(sky_phase / ideal >= 0.9),
                ),
                ("  same, skynet / raw gepa", f"{sky_phase / raw_phase:.2f}", "-", "info"),
                (
                    "  same, skynet / best bare litellm (threads or async)",
                    f"{sky_phase / max(bare_rate, bare_async_rate):.2f}",
                    "-",
                    "info",
                ),
                (
                    "whole-run throughput (capped by minibatches of 3)",
                    f"{sky_whole:.1f}/s = {sky_whole / ideal:.2f} of ideal (raw gepa {raw_whole / ideal:.2f})",
                    "-",
                    "info",
                ),
                (
                    f"wall time skynet / raw ({lat:g} ms, conc {conc})",
                    f"{tp_ratio:.3f}",
                    "-",
                    "info",
                ),
            ]
        )
    )
    return 0


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
