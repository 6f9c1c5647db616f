"""Whole-run wall time of Skynet's Auto engine against raw gepa with its defaults.

    python benchmarks/speed.py            # 300 ms latency, budget 200, concurrency 16, 3 repeats
    python benchmarks/speed.py --quick    # 100 ms, budget 120, 1 repeat (a smoke run)

Both optimize the same scripted task on the same loopback model server (benchmarks/overhead.py's
`Server`, a child process; latency per request, task and reflection alike):

  raw     `gepa.optimize_anything` with GEPAConfig's defaults except max_metric_calls and the
          reflection_lm (the model's name, gepa's own LM; its api_base and key in
          reflection_lm_kwargs). gepa's default max_workers is os.cpu_count(); its default
          reflection template, frontier "hybrid", seed 0, one proposal per iteration.
  skynet  `skynet run` with [engine] name = "auto", concurrency 16, the same budget, and the model
          declared under [models.endpoints] with max_concurrent 16 (Auto proposes
          independent:N, N = 16 // minibatch 3, capped at train // 3).

Target: skynet wall time <= 0.4 x raw's, with a best val score no lower than raw's. Nothing is
asserted; the ratios are measured in this run. Other rows are printed for information, to show
what bounds the figure: raw gepa with max_workers = 16 (parallel evaluation without parallel
proposals), Skynet with gepa's default AllImprovements selection ([engine.options]
selection_strategy = "all": one val evaluation per accepted proposal, where Auto's "best" makes
one per iteration), and Skynet with
the endpoint's default max_concurrent (8), which holds calls in flight and Auto's N below 16.

The scripted task: item i belongs to region i % 8. A task reply names the capital exactly when
the system prompt lists the item's region ("Known regions: 1, 4."). A reflection reply takes the
current text (the prompt's first ``` block, in gepa's template and in Skynet's), adds the region
of every item its feedback marks wrong, and bumps "(rev N)", so no proposal repeats its parent.
A proposal thus learns only what its minibatch showed it: the val score rises over several
accepted proposals (0, then up to 3 regions of 8 per proposal, until 1.0), and proposals from
different minibatches differ.
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # noqa: E402 — benchmarks/overhead.py: server, project writer, skynet run, probe
from overhead import KEY, KEY_ENV, MODEL, RunResult, Shape  # noqa: E402

REGIONS = 8
SHAPE = Shape(items=40, train=24)  # 3 train and 2 val items per region
IMPROVED = "Name the capital city of the country the user gives, in one short sentence."

_KNOWN = re.compile(r"Known regions: ([\d, ]*)\.")
_WRONG = re.compile(r"does not name the capital of Country (\d+)")
_FENCE = re.compile(r"```\n(.*?)\n```", re.S)
_COUNTRY = re.compile(r"Country (\d+)")


def _known(text: str) -> set[int]:
    found = _KNOWN.search(text)
    return {int(x) for x in found.group(1).replace(",", " ").split()} if found else set()


def answer(body: dict[str, Any]) -> tuple[str, str]:
    """The deterministic reply to one chat request: (kind, text), a function of the request only."""
    from skynet.testing import is_reflection

    messages = body.get("messages") or []
    if is_reflection(body):
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
    max_workers: int | None = None  # raw: None = gepa's default (os.cpu_count())
    options: str = ""  # skynet: [engine.options] lines
    endpoint_max_concurrent: bool = True  # skynet: max_concurrent = concurrency in the endpoint


def raw_config(
    server: overhead.Server, *, budget: int, max_workers: int | None
) -> overhead.RawConfig:
    """GEPAConfig's defaults, but max_metric_calls, max_workers when given, and the reflection
    model by name (gepa calls litellm itself, as a raw user's `reflection_lm="openai/..."`)."""

    def config(train: list[dict[str, Any]], reflection_lm: Any) -> Any:
        from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig

        engine = EngineConfig(max_metric_calls=budget)
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


def write_skynet_project(
    folder: Path, server: overhead.Server, variant: Variant, *, concurrency: int, budget: int
) -> str:
    """overhead's project with [engine] name = "auto"; returns the engine plan Skynet prints."""
    from skynet.plan import engine_plan
    from skynet.project import open_project

    overhead.write_project(
        folder, SHAPE, server_url=server.url, concurrency=concurrency, budget=budget, seed=0
    )
    toml = folder / "skynet.toml"
    text = toml.read_text().replace('[engine]\nname = "gepa"', '[engine]\nname = "auto"', 1)
    if not variant.endpoint_max_concurrent:
        text = text.replace(f"max_concurrent = {concurrency}\n", "", 1)
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


# -- the report --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=None, help="per request (300)")
    parser.add_argument("--budget", type=int, default=None, help="max_metric_calls (200)")
    parser.add_argument("--concurrency", type=int, default=16, help="Skynet's [engine] concurrency")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each variant (3)")
    parser.add_argument("--quick", action="store_true", help="100 ms, budget 120, 1 repeat")
    parser.add_argument(
        "--target-only", action="store_true", help="run only raw gepa and Skynet Auto"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp projects")
    args = parser.parse_args(argv)
    latency = args.latency_ms if args.latency_ms is not None else (100.0 if args.quick else 300.0)
    budget = args.budget if args.budget is not None else (120 if args.quick else 200)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    conc = args.concurrency

    os.environ[KEY_ENV] = KEY
    server = overhead.Server(latency, in_process=False)  # before the heavy imports
    work = Path(tempfile.mkdtemp(prefix="skynet-speed-"))
    try:
        return _measure(
            server,
            work,
            latency=latency,
            budget=budget,
            conc=conc,
            repeats=repeats,
            target_only=args.target_only,
        )
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _measure(
    server: overhead.Server,
    work: Path,
    *,
    latency: float,
    budget: int,
    conc: int,
    repeats: int,
    target_only: bool,
) -> int:
    import litellm

    from skynet.models._litellm import warm

    overhead._instrument_skynet_engine()
    warm()
    litellm.completion(
        model=MODEL,
        messages=[{"role": "user", "content": "Country: Country 01"}],
        api_base=server.url,
        api_key=KEY,
        max_tokens=8,
    )
    server.take_counts()

    cpus = os.cpu_count() or 32
    variants = [
        Variant("raw", f"raw gepa, defaults (max_workers = os.cpu_count() = {cpus})", "raw"),
        Variant("skynet", f"skynet auto, concurrency {conc}", "skynet"),
    ]
    if not target_only:
        variants += [
            Variant("raw16", f"raw gepa, max_workers = {conc}", "raw", max_workers=conc),
            Variant(
                "all",
                f'skynet auto, concurrency {conc}, selection_strategy = "all" (gepa\'s default)',
                "skynet",
                options='selection_strategy = "all"',
            ),
            Variant(
                "mc8",
                f"skynet auto, concurrency {conc}, endpoint max_concurrent left at 8",
                "skynet",
                endpoint_max_concurrent=False,
            ),
        ]
    overflows_before = overhead.listen_overflows()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"skynet speed benchmark · python {platform.python_version()} · gepa "
        f"{overhead._version('gepa')} · litellm {overhead._version('litellm')} · {cpus} CPUs "
        f"(load average {load:.1f} at start)"
    )
    print(
        f"task: {SHAPE.items} items ({SHAPE.train} train / {SHAPE.val} val) in {REGIONS} regions; "
        f"latency {latency:g} ms per request; budget {budget} metric calls; {repeats} repeat(s)"
    )
    plans: dict[str, str] = {}
    runs: dict[str, list[RunResult]] = {v.key: [] for v in variants}
    for rep in range(repeats):
        shift = rep % len(variants)  # rotate the order, so slow drift hits every variant alike
        for v in variants[shift:] + variants[:shift]:
            folder = work / f"{v.key}-{rep}"
            if v.kind == "raw":
                overhead.write_project(
                    folder, SHAPE, server_url=server.url, concurrency=conc, budget=budget, seed=0
                )
                r = overhead.run_raw(
                    folder, server, raw_config(server, budget=budget, max_workers=v.max_workers)
                )
            else:
                plans[v.key] = write_skynet_project(
                    folder, server, v, concurrency=conc, budget=budget
                )
                shutil.rmtree(folder / ".skynet", ignore_errors=True)  # the plan's check only
                r = overhead.run_skynet(folder, server)
            runs[v.key].append(r)
            print(
                f"  repeat {rep + 1}: {v.key:6s} wall {r.wall_s:6.2f} s  best val "
                f"{max(r.val_scores):.4f}  metric calls {r.metric_calls}  reflections "
                f"{r.reflection_requests}  candidates {r.candidates}"
            )
    for key, why in plans.items():
        print(f"  {key} plan: {why}")
    overflows_after = overhead.listen_overflows()
    if overflows_before is not None and overflows_after is not None:
        print(
            f"  listen-queue overflows during the benchmark: {overflows_after - overflows_before}"
        )

    def wall(key: str) -> float:
        return statistics.median(r.wall_s for r in runs[key])

    raw_wall = wall("raw")
    raw_best = max(runs["raw"][0].val_scores)
    rows = [
        (
            "run",
            "wall s",
            "/ raw",
            "best val",
            "metric calls",
            "val evals",
            "reflections",
            "candidates",
            "in flight (mean, peak)",
        )
    ]
    for v in variants:
        r = runs[v.key][0]
        mean_in_flight, peak = in_flight(r)
        rows.append(
            (
                v.label,
                f"{wall(v.key):.2f}",
                f"{wall(v.key) / raw_wall:.3f}",
                f"{max(r.val_scores):.4f}",
                str(r.metric_calls),
                str(val_evaluations(r)),
                str(r.reflection_requests),
                str(r.candidates),
                f"{mean_in_flight:.1f}, {peak}",
            )
        )
    print("\nmedians over repeats (wall); the other figures are from the first repeat")
    print(overhead.table(rows))
    same = all(r.val_scores == rs[0].val_scores for rs in runs.values() for r in rs)
    print(f"  every repeat of a variant followed the same trajectory: {same}")

    sky_wall, sky_best = wall("skynet"), max(runs["skynet"][0].val_scores)
    ratio = sky_wall / raw_wall
    met_time, met_score = ratio <= 0.4, sky_best >= raw_best
    print("\nsummary")
    print(
        overhead.table(
            [
                ("check", "measured", "target", "result"),
                (
                    f"wall time skynet auto / raw gepa defaults ({latency:g} ms, conc {conc})",
                    f"{ratio:.3f} ({sky_wall:.2f} s / {raw_wall:.2f} s)",
                    "<= 0.40",
                    "met" if met_time else "NOT MET",
                ),
                (
                    "best val score, skynet auto vs raw gepa",
                    f"{sky_best:.4f} vs {raw_best:.4f}",
                    ">= raw",
                    "met" if met_score else "NOT MET",
                ),
                (
                    "metric calls, skynet auto vs raw gepa",
                    f"{runs['skynet'][0].metric_calls} vs {runs['raw'][0].metric_calls}",
                    f"<= {budget} (+ one iteration's overshoot)",
                    "info",
                ),
            ]
        )
    )
    print(f"target met: {'yes' if met_time and met_score else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
