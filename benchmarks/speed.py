"""Whole-run wall time of Skynet's Auto engine against raw gepa at the same concurrency.

    python benchmarks/speed.py            # 300 ms latency, budget 200, concurrency 16, 3 repeats
    python benchmarks/speed.py --quick    # 100 ms, budget 120, 1 repeat (a smoke run)
    python benchmarks/speed.py --reflection-latency-ms 1500   # a reflection model 5x slower

Both optimize the same scripted task on the same loopback model server (benchmarks/overhead.py's
`Server`, a child process; latency per request, task and reflection alike unless
--reflection-latency-ms says the reflection model is slower):

  raw     `gepa.optimize_anything` with GEPAConfig's defaults except max_metric_calls, the
          reflection_lm (the model's name, gepa's own LM; its api_base and key in
          reflection_lm_kwargs), max_workers = Skynet's concurrency (gepa's default is
          os.cpu_count(), 2 on a small machine: the ratio would then measure mostly concurrency)
          and the seed. gepa's default reflection template, frontier "hybrid", one proposal per
          iteration. This is the target's anchor.
  skynet  `skynet run` with [engine] name = "auto", concurrency 16, the same budget and seed, and
          the model declared under [models.endpoints] as a user writes it, without
          max_concurrent (it follows [engine] concurrency). Auto runs engine gepa-async
          (engines/async_gepa.py): one proposal at a time, its child scored on its own and the
          next proposal's minibatch at once, its val evaluation beside the next reflection.

Target: skynet wall time <= 0.4 x raw's, with a mean best val score over the seeds no lower than
raw's (the issue says test score; this project has no test split), on both tasks. Slot
utilisation = (task + reflection requests the server saw) x latency / (wall x concurrency):
the share of the run's call slots that held a call; 1.0 is the physical limit, the issue's
target for Skynet is >= 0.7. Nothing is asserted; the ratios are measured in this run. Other rows
are printed for information: raw gepa with its default max_workers, Skynet on gepa's own loop
with Auto's earlier choice (independent:N proposals per iteration, N = concurrency // 3, the best
of them scored on val), and Skynet with the user writing max_concurrent = 8 in the endpoint.

The scripted tasks (--task): item i belongs to region i % 8. A task reply names the capital
exactly when the system prompt lists the item's region ("Known regions: 1, 4.").
  learn   A reflection reply takes the current text (the prompt's first ``` block, in gepa's
          template and in Skynet's), adds the region of every item its feedback marks wrong, and
          bumps "(rev N)", so no proposal repeats its parent. A proposal learns only what its
          minibatch showed it: val rises over several accepted proposals (up to 3 regions of 8
          per proposal, until 1.0), and proposals from different minibatches differ.
  same    Every reflection reply is the same text, naming regions 0-3: the first accepted
          proposal lifts val to 0.5 and no later proposal improves on it, so parallel proposals
          are all alike and the budget goes to minibatch evaluations that teach nothing.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import argparse
import dataclasses
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # noqa: E402 — benchmarks/overhead.py: server, project writer, skynet run, probe
from overhead import KEY, KEY_ENV, MODEL, RunResult, Shape  # noqa: E402

REGIONS = 8
SHAPE = Shape(items=40, train=24)  # 3 train and 2 val items per region
IMPROVED = "Name the capital city of the country the user gives, in one short sentence."
SAME_REPLY = f"```\n{IMPROVED} Known regions: 0, 1, 2, 3.\n```"  # the "same" task's reflection
TASKS = ("learn", "same")
# The server's child process reads its task here: it is set before each server is spawned (a
# spawned child inherits the environment), so one server answers one task.
TASK_ENV = "SKYNET_SPEED_TASK"
# ... and the reflection replies' extra latency, in ms, over --latency-ms (--reflection-latency-ms)
REFLECTION_ENV = "SKYNET_SPEED_REFLECTION_EXTRA_MS"

_KNOWN = re.compile(r"Known regions: ([\d, ]*)\.")
_WRONG = re.compile(r"does not name the capital of Country (\d+)")
_FENCE = re.compile(r"```\n(.*?)\n```", re.S)
_COUNTRY = re.compile(r"Country (\d+)")


def _known(text: str) -> set[int]:
    found = _KNOWN.search(text)
    return {int(x) for x in found.group(1).replace(",", " ").split()} if found else set()


def answer(body: dict[str, Any]) -> tuple[str, str]:
    """The deterministic reply to one chat request: (kind, text), a function of the request and
    the server's task only."""
    from skynet.testing import is_reflection

    messages = body.get("messages") or []
    if is_reflection(body):
        time.sleep(float(os.environ.get(REFLECTION_ENV) or 0) / 1000)  # a slower model
        if os.environ.get(TASK_ENV) == "same":
            return "reflection", SAME_REPLY
        prompt = str(messages[-1].get("content", ""))
        fence = _FENCE.search(prompt)
        current = fence.group(1) if fence else ""
        known = _known(current) | {int(n) % REGIONS for n in _WRONG.findall(prompt)}
        rev = overhead._revision(current) + 1
        regions = ", ".join(str(r) for r in sorted(known))
        return "reflection", f"```\n{IMPROVED} Known regions: {regions}. (rev {rev})\n```"
    system = next((str(m["content"]) for m in messages if m.get("role") == "system"), "")
    user = next((str(m["content"]) for m in messages if m.get("role") == "user"), "")
    found = _COUNTRY.search(user)
    index = int(found.group(1)) if found else 0
    if index % REGIONS in _known(system):
        return "task", f"The capital of Country {index:02d} is City {index:02d}."
    return "task", f"Country {index:02d} is a country."


# overhead's server answers through its module-level `answer`, looked up at each request. This
# module runs in the server's child process too (multiprocessing's spawn imports the main script
# before it starts the child), so the line below installs this task's replies on both sides.
overhead.answer = answer


# -- the runs ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Variant:
    key: str
    label: str
    kind: str  # "raw" | "skynet"
    slots: int  # the calls it may hold in flight: raw's max_workers, Skynet's concurrency
    max_workers: int | None = None  # raw: None = gepa's default (os.cpu_count())
    options: str = ""  # skynet: [engine.options] lines
    endpoint_max_concurrent: int | None = None  # skynet: written by the user; None = not written


def raw_config(
    server: overhead.Server, *, budget: int, max_workers: int | None, seed: int
) -> overhead.RawConfig:
    """GEPAConfig's defaults, but max_metric_calls, the seed, max_workers when given, and the
    reflection model by name (gepa calls litellm itself, as a raw user's
    `reflection_lm="openai/..."`)."""

    def config(train: list[dict[str, Any]], reflection_lm: Any) -> Any:
        from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig

        engine = EngineConfig(max_metric_calls=budget, seed=seed)
        if max_workers is not None:
            engine = dataclasses.replace(engine, max_workers=max_workers)
        return GEPAConfig(
            engine=engine,
            reflection=ReflectionConfig(
                reflection_lm=MODEL,
                reflection_lm_kwargs={"api_base": server.url, "api_key": KEY, "timeout": 30},
            ),
        )

    return config


def _replace_once(text: str, old: str, new: str) -> str:
    if old not in text:
        raise SystemExit(f"speed.py: overhead.write_project's skynet.toml lacks {old!r}; update")
    return text.replace(old, new, 1)


def write_skynet_project(
    folder: Path,
    server: overhead.Server,
    variant: Variant,
    *,
    concurrency: int,
    budget: int,
    seed: int,
) -> str:
    """overhead's project with [engine] name = "auto" and the endpoint as the variant's user
    writes it; returns the engine plan Skynet prints."""
    from skynet.plan import engine_plan
    from skynet.project import open_project

    overhead.write_project(
        folder, SHAPE, server_url=server.url, concurrency=concurrency, budget=budget, seed=seed
    )
    toml = folder / "skynet.toml"
    text = _replace_once(toml.read_text(), '[engine]\nname = "gepa"', '[engine]\nname = "auto"')
    limit = variant.endpoint_max_concurrent
    text = _replace_once(
        text,
        f"max_concurrent = {concurrency}\n",
        "" if limit is None else f"max_concurrent = {limit}\n",
    )
    if variant.options:
        text += f"\n[engine.options]\n{variant.options}\n"
    toml.write_text(text)
    return engine_plan(open_project(folder))


def in_flight(r: RunResult) -> tuple[float, int]:
    """(mean, peak) evaluations in flight over the run's wall time."""
    spans = r.probe.spans
    if not spans:
        return 0.0, 0
    busy = sum(s[1] - s[0] for s in spans)
    edges = sorted([(s[0], 1) for s in spans] + [(s[1], -1) for s in spans])
    peak = now = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return busy / r.wall_s, peak


def val_evaluations(r: RunResult) -> int:
    return sum(1 for s in r.probe.spans if s[3])


def slot_use(r: RunResult, latency_ms: float, slots: int) -> float:
    """(model calls x latency) / (wall x slots): the share of the run's call slots that held a
    call, model calls being every task and reflection request the server saw in the run (a
    reflection request held its slot for --reflection-latency-ms when that is set)."""
    extra = float(os.environ.get(REFLECTION_ENV) or 0)
    held = (r.task_requests + r.reflection_requests) * latency_ms + r.reflection_requests * extra
    return held / 1000 / (r.wall_s * slots)


# -- the report --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=None, help="per request (300)")
    parser.add_argument(
        "--reflection-latency-ms",
        type=float,
        default=None,
        help="per reflection request, when a slower model than the task's (--latency-ms)",
    )
    parser.add_argument("--budget", type=int, default=None, help="max_metric_calls (200)")
    parser.add_argument("--concurrency", type=int, default=16, help="Skynet's [engine] concurrency")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each variant (3)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..K-1 per variant (1)")
    parser.add_argument(
        "--task", choices=TASKS, default=None, help="one scripted task (default: both)"
    )
    parser.add_argument("--quick", action="store_true", help="100 ms, budget 120, 1 repeat")
    parser.add_argument(
        "--target-only", action="store_true", help="run only raw gepa and Skynet Auto"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp projects")
    args = parser.parse_args(argv)
    latency = args.latency_ms if args.latency_ms is not None else (100.0 if args.quick else 300.0)
    budget = args.budget if args.budget is not None else (120 if args.quick else 200)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: give 1 or more")
    tasks = (args.task,) if args.task else TASKS
    if args.reflection_latency_ms is not None:
        if args.reflection_latency_ms < latency:
            parser.error("--reflection-latency-ms: give at least --latency-ms")
        os.environ[REFLECTION_ENV] = str(args.reflection_latency_ms - latency)  # before spawning

    os.environ[KEY_ENV] = KEY
    servers: dict[str, overhead.Server] = {}
    work = Path(tempfile.mkdtemp(prefix="skynet-speed-"))
    try:
        for task in tasks:  # before the heavy imports
            os.environ[TASK_ENV] = task
            servers[task] = overhead.Server(latency, in_process=False)
        met = _measure(
            servers,
            work,
            latency=latency,
            budget=budget,
            conc=args.concurrency,
            repeats=repeats,
            seeds=args.seeds,
            target_only=args.target_only,
        )
        if len(tasks) > 1:
            print(f"\ntarget met on both tasks: {'yes' if met else 'no'}")
        return 0
    finally:
        for server in servers.values():
            server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _measure(
    servers: dict[str, overhead.Server],
    work: Path,
    *,
    latency: float,
    budget: int,
    conc: int,
    repeats: int,
    seeds: int,
    target_only: bool,
) -> bool:
    """Warm the clients, then each task's runs and report; True when every task met the target."""
    overhead.warm_up(*servers.values())

    cpus = os.cpu_count() or 32
    variants = [
        Variant("raw", f"raw gepa, max_workers = {conc} (anchor)", "raw", conc, max_workers=conc),
        Variant("skynet", f"skynet auto, concurrency {conc}", "skynet", conc),
    ]
    if not target_only:
        variants += [
            Variant(
                "rawdef",
                f"info: raw gepa, defaults (max_workers = os.cpu_count() = {cpus})",
                "raw",
                cpus,
            ),
            Variant(
                "loop",
                f"skynet auto keeping gepa's loop: independent:{conc // 3} + best (auto's "
                "choice before gepa-async)",
                "skynet",
                conc,
                options=f'sampling_strategy = "independent:{conc // 3}"\n'
                'selection_strategy = "best"',
            ),
            Variant(
                "mc8",
                f"skynet auto, concurrency {conc}, endpoint max_concurrent = 8 written by the user",
                "skynet",
                conc,
                endpoint_max_concurrent=8,
            ),
        ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"skynet speed benchmark · python {platform.python_version()} · gepa "
        f"{overhead._version('gepa')} · litellm {overhead._version('litellm')} · {cpus} CPUs "
        f"(load average {load:.1f} at start)"
    )
    print(
        f"{SHAPE.items} items ({SHAPE.train} train / {SHAPE.val} val) in {REGIONS} regions; "
        f"latency {latency:g} ms per request"
        + (
            f" ({latency + float(os.environ[REFLECTION_ENV]):g} ms per reflection request)"
            if os.environ.get(REFLECTION_ENV)
            else ""
        )
        + f"; budget {budget} metric calls; {repeats} repeat(s) "
        f"of seeds 0..{seeds - 1}"
    )
    met = True
    for task, server in servers.items():
        met &= _task_report(
            task,
            server,
            variants,
            work,
            latency=latency,
            budget=budget,
            conc=conc,
            repeats=repeats,
            seeds=seeds,
        )
    return met


def _task_report(
    task: str,
    server: overhead.Server,
    variants: list[Variant],
    work: Path,
    *,
    latency: float,
    budget: int,
    conc: int,
    repeats: int,
    seeds: int,
) -> bool:
    """Run every variant on one task (repeats x seeds) and print its table and summary."""
    print(f"\n== task {task!r} ==")
    overflows_before = overhead.listen_overflows()
    plans: dict[str, str] = {}
    # runs[key][seed]: that seed's repeats
    runs: dict[str, list[list[RunResult]]] = {v.key: [[] for _ in range(seeds)] for v in variants}
    turn = 0
    for rep in range(repeats):
        for seed in range(seeds):
            shift = turn % len(variants)  # rotate the order: slow drift hits every variant alike
            turn += 1
            for v in variants[shift:] + variants[:shift]:
                folder = work / f"{task}-{v.key}-seed{seed}-{rep}"
                if v.kind == "raw":
                    overhead.write_project(
                        folder,
                        SHAPE,
                        server_url=server.url,
                        concurrency=conc,
                        budget=budget,
                        seed=seed,
                    )
                    config = raw_config(server, budget=budget, max_workers=v.max_workers, seed=seed)
                    r = overhead.run_raw(folder, server, config)
                else:
                    plans[v.key] = write_skynet_project(
                        folder, server, v, concurrency=conc, budget=budget, seed=seed
                    )
                    shutil.rmtree(folder / ".skynet", ignore_errors=True)  # the plan's check only
                    r = overhead.run_skynet(folder, server)
                runs[v.key][seed].append(r)
                print(
                    f"  repeat {rep + 1} seed {seed}: {v.key:6s} wall {r.wall_s:6.2f} s  best val "
                    f"{max(r.val_scores):.4f}  slots used {slot_use(r, latency, v.slots):.3f}  "
                    f"metric calls {r.metric_calls}  reflections {r.reflection_requests}  "
                    f"candidates {r.candidates}"
                )
    for key, why in plans.items():
        print(f"  {key} plan: {why}")
    overflows_after = overhead.listen_overflows()
    if overflows_before is not None and overflows_after is not None:
        print(f"  listen-queue overflows during this task: {overflows_after - overflows_before}")

    slots = {v.key: v.slots for v in variants}

    def wall(key: str) -> float:
        """Median over repeats, mean over seeds."""
        return statistics.mean(statistics.median(r.wall_s for r in rs) for rs in runs[key])

    def used(key: str) -> float:
        """Slot utilisation: median over repeats, mean over seeds."""
        return statistics.mean(
            statistics.median(slot_use(r, latency, slots[key]) for r in rs) for rs in runs[key]
        )

    def best(key: str) -> float:
        """Best val score, mean over seeds (each seed's first repeat)."""
        return statistics.mean(max(rs[0].val_scores) for rs in runs[key])

    raw_wall = wall("raw")
    rows = [
        (
            "run",
            "wall s",
            "/ raw",
            "slots used",
            "best val",
            "metric calls",
            "val evals",
            "reflections",
            "candidates",
            "in flight (mean, peak)",
        )
    ]
    for v in variants:
        r = runs[v.key][0][0]
        mean_in_flight, peak = in_flight(r)
        rows.append(
            (
                v.label,
                f"{wall(v.key):.2f}",
                f"{wall(v.key) / raw_wall:.3f}",
                f"{used(v.key):.3f}",
                f"{best(v.key):.4f}",
                str(r.metric_calls),
                str(val_evaluations(r)),
                str(r.reflection_requests),
                str(r.candidates),
                f"{mean_in_flight:.1f}, {peak}",
            )
        )
    print(
        f"\nwall and slots used: median over repeats, mean over {seeds} seed(s); best val: mean "
        "over seeds; the other figures: seed 0, first repeat. slots used = (task + reflection "
        "requests) x latency / (wall x slots), slots = raw's max_workers or Skynet's concurrency"
    )
    print(overhead.table(rows))
    same = all(r.val_scores == rs[0].val_scores for by in runs.values() for rs in by for r in rs)
    print(f"  every repeat of a variant and seed followed the same trajectory: {same}")

    sky_wall, sky_best, raw_best = wall("skynet"), best("skynet"), best("raw")
    ratio, sky_used = sky_wall / raw_wall, used("skynet")
    met_time, met_slots, met_score = ratio <= 0.4, sky_used >= 0.7, sky_best >= raw_best
    summary = [
        ("check", "measured", "target", "result"),
        (
            f"wall time skynet auto / raw gepa max_workers {conc} ({latency:g} ms, conc {conc})",
            f"{ratio:.3f} ({sky_wall:.2f} s / {raw_wall:.2f} s)",
            "<= 0.40",
            "met" if met_time else "NOT MET",
        ),
        (
            "slot utilisation, skynet auto, whole run",
            f"{sky_used:.3f}",
            ">= 0.70",
            "met" if met_slots else "NOT MET",
        ),
        (
            f"best val score (no test split), mean over {seeds} seed(s), skynet auto vs raw gepa",
            f"{sky_best:.4f} vs {raw_best:.4f}",
            ">= raw",
            "met" if met_score else "NOT MET",
        ),
    ]
    if "rawdef" in runs:
        summary.append(
            (
                "wall time skynet auto / raw gepa defaults (max_workers os.cpu_count())",
                f"{sky_wall / wall('rawdef'):.3f}",
                "",
                "info",
            )
        )
    summary.append(
        (
            "metric calls, skynet auto vs raw gepa (seed 0)",
            f"{runs['skynet'][0][0].metric_calls} vs {runs['raw'][0][0].metric_calls}",
            f"<= {budget} (+ one iteration's overshoot)",
            "info",
        )
    )
    print(f"\nsummary ({task!r} task)")
    print(overhead.table(summary))
    met = met_time and met_slots and met_score
    print(f"target met ({task!r} task): {'yes' if met else 'no'}")
    return met


if __name__ == "__main__":
    sys.exit(main())
