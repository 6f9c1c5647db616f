"""gepa's optimize_anything circle packing: evolve Python code that packs N circles in the unit
square, maximizing the sum of their radii, each candidate warm-started from the best packing so
far. tutorial.py is written as gepa's examples/circle_packing writes it (N = 6 instead of 26, a
short budget, no refiner); skynet_port.py is the same search in Skynet, where the candidate code
runs in Skynet's sandbox rather than in the evaluator: `diff tutorial.py skynet_port.py` shows
what changes. More than the call changes: the evaluator that ran the candidate itself
(execute_code, fitness_fn) becomes a metric of the candidate's output, and the candidate gets a
run(input, opt_state) that calls its main() with the best packing so far. The reflection model
is served by the OpenAI-compatible server PORTS_API_BASE names."""

import json
import math
import os
import subprocess
import sys
import tempfile

from gepa.optimize_anything import (
    EngineConfig,
    GEPAConfig,
    OptimizationState,
    ReflectionConfig,
    optimize_anything,
)

API_BASE = os.environ.get("PORTS_API_BASE", "http://127.0.0.1:8000/v1")
os.environ.setdefault("OPENAI_API_KEY", "none")
os.environ.setdefault("OPENAI_API_BASE", API_BASE)
N = 6

SEED_CODE = '''
import numpy as np


def main(timeout, current_best_solution):
    """Circle packing: returns {"circles": [[x, y, r], ...]}."""
    n = 6
    if current_best_solution is not None:
        return {"circles": np.array(current_best_solution).tolist()}
    xs = (np.arange(n) % 3 + 0.5) / 3
    ys = (np.arange(n) // 3 + 0.5) / 3
    radii = np.full(n, 0.1)
    return {"circles": np.stack([xs, ys, radii], axis=1).tolist()}
'''

BACKGROUND = (
    "Pack N circles in the unit square without overlap; the score is the sum of their radii. "
    "main(timeout, current_best_solution) gets the best packing so far (or None)."
)


def validate(circles):
    """(valid, sum of radii, message) of a packing [[x, y, r], ...]."""
    if len(circles) != N:
        return False, 0.0, f"expected {N} circles, got {len(circles)}"
    for i, (x, y, r) in enumerate(circles):
        if r < 0 or x - r < -1e-9 or x + r > 1 + 1e-9 or y - r < -1e-9 or y + r > 1 + 1e-9:
            return False, 0.0, f"circle {i} leaves the unit square"
        for j, (x2, y2, r2) in enumerate(circles[:i]):
            if math.dist((x, y), (x2, y2)) < r + r2 - 1e-9:
                return False, 0.0, f"circles {j} and {i} overlap"
    total = sum(r for _, _, r in circles)
    return True, total, f"valid packing, sum of radii {total:.4f}"


def execute_code(code, timeout, warm_start):
    """Run the candidate's main() in a subprocess; its result as a dict."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "candidate.py")
        with open(path, "w") as f:
            f.write(code)
            f.write(
                "\nimport json, sys\n"
                "print(json.dumps(main(None, json.loads(sys.argv[1]))))\n"
            )
        done = subprocess.run(
            [sys.executable, path, json.dumps(warm_start)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if done.returncode != 0:
        return {"success": False, "error": done.stderr[-2000:]}
    return {"success": True, "result": json.loads(done.stdout)}


def fitness_fn(candidate, opt_state: OptimizationState | None = None):
    best = opt_state.best_example_evals if opt_state else []
    warm_start = best[0]["side_info"]["Circles"] if best else None
    result = execute_code(candidate["code"], 60, warm_start)
    if not result["success"]:
        return 0.0, {"Error": result["error"]}
    circles = result["result"]["circles"]
    valid, score, message = validate(circles)
    return (score if valid else 0.0), {"Circles": circles, "Validation": message}


result = optimize_anything(
    seed_candidate={"code": SEED_CODE},
    evaluator=fitness_fn,
    objective=f"Maximize the sum of radii of {N} non-overlapping circles in the unit square.",
    background=BACKGROUND,
    config=GEPAConfig(
        engine=EngineConfig(max_metric_calls=8),
        reflection=ReflectionConfig(reflection_lm="openai/reflection-model"),
    ),
)

print("Best packing code:", result.best_candidate["code"].strip().splitlines()[0])
