"""Raw gepa against Skynet's gepa engine: val and test scores on the same tasks, budget and seed.

    python benchmarks/quality.py                        # the embedded model, budget 40, seed 0 (~15 min)
    python benchmarks/quality.py --task-model openai/gpt-4o-mini --reflection-model openai/gpt-4o
    python benchmarks/quality.py --task-model openai/qwen --reflection-model openai/qwen \
        --api-base http://127.0.0.1:8000/v1 --api-key-env MY_KEY     # a vLLM / llama.cpp server

Tasks: examples/capitals and examples/xlam (tool calls, scored by the xlam-tool-call scorer), each
copied to a temp folder (symlinks followed, as cp -rL does). Per task, two runs:

  raw     `gepa.optimize_anything` with GEPAConfig's defaults except max_metric_calls, seed and
          the reflection_lm, which is the model's name (gepa's own LM over litellm; api_base and
          key in reflection_lm_kwargs when given). Its evaluator calls `litellm.completion` for
          the task model. The project's objective goes to optimize_anything, as Skynet hands it.
  skynet  `skynet run` with [engine] name = "gepa" (gepa's defaults; Skynet's own reflection
          template choice: its short one for an embedded reflection model, gepa's otherwise),
          then the best candidate on the test split (`skynet eval`'s path).

Both sides read the same items: the raw run takes the project's split, prompt rendering and
metric (the example's metric.py, or the built-in scorer) from Skynet's loaded project, so the
split, the messages and the scores cannot differ; its optimizer, model calls and records are raw
gepa and litellm. The embedded model (local/smollm2) is litellm's `local` provider, registered by
skynet.models.local.register(), so raw gepa calls it by name like any litellm model; the same
in-process llama.cpp model answers both runs.

Printed per task: seed and best val, the best candidate's test score, for both, and the ratio
skynet / raw. On the 135M embedded model the figures say whether the two loops run the same
search; they say little about what a capable model would reach (benchmarks/README.md).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import argparse
import contextlib
import dataclasses
import io
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):  # skynet and engines; overhead.py's table printer
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

EMBEDDED = "local/smollm2"
TASKS = ("capitals", "xlam")


@dataclasses.dataclass(frozen=True)
class Models:
    task: str
    reflection: str
    api_base: str | None
    api_key_env: str | None

    def litellm_kwargs(self, model: str) -> dict[str, Any]:
        """What raw litellm needs beyond the name to reach `model`."""
        if model.startswith("local/") or self.api_base is None:
            return {}
        key = os.environ[self.api_key_env] if self.api_key_env else "none"
        return {"api_base": self.api_base, "api_key": key}

    def overrides(self) -> dict[str, Any]:
        """skynet.toml settings for the same models."""
        found: dict[str, Any] = {"models.task": self.task, "models.reflection": self.reflection}
        if self.api_base is not None:
            for model in sorted({self.task, self.reflection}):
                if model.startswith("local/"):
                    continue
                found[f'models.endpoints."{model}".api_base'] = self.api_base
                if self.api_key_env:
                    found[f'models.endpoints."{model}".api_key_env'] = self.api_key_env
        return found


@dataclasses.dataclass
class Scores:
    kind: str
    seed_val: float | None
    best_val: float | None
    test: float | None
    metric_calls: int
    candidates: int
    wall_s: float
    template: str


def copy_task(name: str, kind: str, work: Path) -> Path:
    """examples/NAME copied to work/NAME-KIND, links followed (cp -rL), without its records."""
    target = work / f"{name}-{kind}"
    shutil.copytree(ROOT / "examples" / name, target, symlinks=False)
    shutil.rmtree(target / ".skynet", ignore_errors=True)
    return target


_OUTCOMES: list[Any] = []


def _keep_engine_outcomes() -> None:
    """Keep what Skynet's gepa engine returns (gepa's own metric-call count, its candidates)."""
    from engines.gepa import GepaEngine

    original = GepaEngine.optimize

    def optimize(self: Any, ctx: Any) -> Any:
        outcome = original(self, ctx)
        _OUTCOMES.append(outcome)
        return outcome

    GepaEngine.optimize = optimize  # type: ignore[method-assign]


def open_task(
    folder: Path, models: Models, *, budget: int, seed: int, concurrency: int | None
) -> Any:
    from skynet.project import open_project

    overrides = {
        **models.overrides(),
        "engine.name": "gepa",
        "engine.seed": seed,
        "budget.max_metric_calls": budget,
    }
    if concurrency is not None:
        overrides["engine.concurrency"] = concurrency
    return open_project(folder, overrides=overrides)


def run_skynet(project: Any) -> Scores:
    from skynet import runner
    from skynet.plan import engine_plan

    started = time.perf_counter()
    plan = engine_plan(project)
    outcome = runner.run(project, out=io.StringIO())
    test = runner.evaluate_candidate(
        project, outcome.best_candidate, split="test", run_id=outcome.run_id
    )
    engine = _OUTCOMES[-1]
    template = next((p for p in plan.split("; ") if p.startswith("reflection prompt")), "")
    return Scores(
        kind="skynet",
        seed_val=outcome.seed_val,
        best_val=outcome.best_val,
        test=test.mean.value,
        metric_calls=engine.metric_calls,
        candidates=len(engine.candidates),
        wall_s=time.perf_counter() - started,
        template=template.removeprefix("reflection prompt: "),
    )


def run_raw(project: Any, models: Models, *, budget: int, seed: int) -> Scores:
    """gepa.optimize_anything with its defaults, on the project's items, prompt and metric."""
    import litellm
    from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig, optimize_anything

    from skynet.scorers.xlam import tool_schemas

    started = time.perf_counter()
    art = project.config.artifact
    prompt = project.artifact
    task_kwargs = models.litellm_kwargs(models.task)

    def run_task(candidate: dict[str, str], item: Any) -> Any:
        call: dict[str, Any] = {
            "model": models.task,
            "messages": prompt.messages(candidate, item.input),
            "max_tokens": art.max_tokens,
            "temperature": art.temperature,
            **task_kwargs,
        }
        if art.tools == "row":
            call.update(tools=tool_schemas(item.input), tool_choice="auto")
        response = litellm.completion(**call)
        choice = response.choices[0]
        text = choice.message.content or ""
        if art.tools != "row":
            return text
        calls = [
            {"name": c.function.name, "arguments": c.function.arguments}
            for c in (choice.message.tool_calls or [])
        ]
        return {"text": text, "calls": calls, "truncated": choice.finish_reason == "length"}

    def evaluator(candidate: dict[str, str], example: Any) -> tuple[float, dict[str, Any]]:
        output = run_task(candidate, example)
        result = project.metric(example.input, output, example.expected, item_id=example.id)
        side: dict[str, Any] = {
            "Input": example.input,
            "Expected": example.expected,
            "Output": output,
            "Feedback": result.feedback,
        }
        if result.scores:
            side["scores"] = dict(result.scores)
        return float(result.score), side

    reflection_kwargs = models.litellm_kwargs(models.reflection)
    config = GEPAConfig(
        engine=EngineConfig(max_metric_calls=budget, seed=seed),
        reflection=ReflectionConfig(
            reflection_lm=models.reflection,
            **({"reflection_lm_kwargs": reflection_kwargs} if reflection_kwargs else {}),
        ),
    )
    objective = project.config.engine.objective or None
    background = project.config.engine.background or None
    with contextlib.redirect_stdout(io.StringIO()):  # gepa's iteration log
        result = optimize_anything(
            seed_candidate=dict(project.artifact.components),
            evaluator=evaluator,
            dataset=list(project.dataset.train),
            valset=list(project.dataset.val),
            objective=objective,
            background=background,
            config=config,
        )
    best = dict(result.best_candidate)  # type: ignore[arg-type]
    test = [evaluator(best, item)[0] for item in project.dataset.test]
    scores = [float(s) for s in result.val_aggregate_scores]
    return Scores(
        kind="raw",
        seed_val=scores[0],
        best_val=scores[result.best_idx],
        test=sum(test) / len(test) if test else None,
        metric_calls=int(result.total_metric_calls or 0),
        candidates=len(result.candidates),
        wall_s=time.perf_counter() - started,
        template="gepa's own" + (" (built from the objective)" if objective or background else ""),
    )


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _ratio(sky: float | None, raw: float | None) -> str:
    if sky is None or raw is None:
        return "—"
    if raw == 0:
        return "= (both 0)" if sky == 0 else "n/a (raw 0)"
    return f"{sky / raw:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task-model", default=EMBEDDED)
    parser.add_argument("--reflection-model", default=None, help="default: the task model")
    parser.add_argument("--api-base", default=None, help="an OpenAI-compatible server for both")
    parser.add_argument("--api-key-env", default=None, help="the variable holding its key")
    parser.add_argument("--budget", type=int, default=40, help="max_metric_calls per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="Skynet's [engine] concurrency (default: the example's, 1); raw gepa keeps its "
        "default max_workers. Scores do not depend on it.",
    )
    parser.add_argument(
        "--tasks", default=",".join(TASKS), help="comma-separated: " + ", ".join(TASKS)
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp projects")
    args = parser.parse_args(argv)
    models = Models(
        task=args.task_model,
        reflection=args.reflection_model or args.task_model,
        api_base=args.api_base,
        api_key_env=args.api_key_env,
    )
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; the tasks are {', '.join(TASKS)}")

    from skynet.models import local

    _keep_engine_outcomes()
    local.register()  # raw gepa reaches local/smollm2 by name through litellm
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"skynet quality benchmark · python {platform.python_version()} · {os.cpu_count()} CPUs "
        f"(load average {load:.1f}) · task model {models.task} · reflection model "
        f"{models.reflection} · budget {args.budget} metric calls · seed {args.seed}"
    )
    work = Path(tempfile.mkdtemp(prefix="skynet-quality-"))
    rows = [
        (
            "task",
            "run",
            "seed val",
            "best val",
            "test",
            "metric calls",
            "candidates",
            "wall s",
            "reflection prompt",
        )
    ]
    summary = [("task", "val skynet / raw", "test skynet / raw")]
    try:
        for name in tasks:
            done: dict[str, Scores] = {}
            for kind in ("raw", "skynet"):
                project = open_task(
                    copy_task(name, kind, work),
                    models,
                    budget=args.budget,
                    seed=args.seed,
                    concurrency=args.concurrency,
                )
                done[kind] = (
                    run_raw(project, models, budget=args.budget, seed=args.seed)
                    if kind == "raw"
                    else run_skynet(project)
                )
                s = done[kind]
                split = project.dataset
                rows.append(
                    (
                        f"{name} ({len(split.train)}/{len(split.val)}/{len(split.test)})",
                        kind,
                        _fmt(s.seed_val),
                        _fmt(s.best_val),
                        _fmt(s.test),
                        str(s.metric_calls),
                        str(s.candidates),
                        f"{s.wall_s:.0f}",
                        s.template,
                    )
                )
                print(
                    f"  {name} {kind}: best val {_fmt(s.best_val)}, test {_fmt(s.test)} "
                    f"({s.wall_s:.0f} s)",
                    flush=True,
                )
            raw, sky = done["raw"], done["skynet"]
            summary.append((name, _ratio(sky.best_val, raw.best_val), _ratio(sky.test, raw.test)))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    from overhead import table  # benchmarks/overhead.py's table printer

    print()
    print(table(rows))
    print()
    print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
