"""gepa's optimize_anything circle packing: evolve Python code that packs N circles in the unit
square, maximizing the sum of their radii, each candidate warm-started from the best packing so
far. tutorial.py is written as gepa's examples/circle_packing writes it (N = 6 instead of 26, a
short budget, no refiner); skynet_port.py is the same search in Skynet, where the candidate code
runs in Skynet's sandbox rather than in the evaluator: `diff tutorial.py skynet_port.py` shows
what changes. More than the call changes: the evaluator that ran the candidate itself
(execute_code, fitness_fn) becomes a metric of the candidate's output, and the candidate gets a
run(input, opt_state) that calls its main() with the best packing so far. The reflection model
is served by the OpenAI-compatible server PORTS_API_BASE names."""

import math
import os

import skynet

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


RUN = '''

def run(input, opt_state):
    best = opt_state["best_example_evals"]
    return main(None, best[0]["output"]["circles"] if best else None)
'''


def score(input, output):
    circles = output.get("circles") if isinstance(output, dict) else None
    if not isinstance(circles, list) or not all(
        isinstance(c, list) and len(c) == 3 and all(isinstance(v, (int, float)) for v in c)
        for c in circles
    ):
        return 0.0, {"feedback": 'run() must return {"circles": [[x, y, r], ...]}'}
    valid, total, message = validate(circles)
    return (total if valid else 0.0), {"feedback": message}


result = skynet.optimize(
    skynet.Code(SEED_CODE + RUN),
    metric=score,
    train=[{"n": N}],
    engine={
        "name": "gepa",
        "objective": f"Maximize the sum of radii of {N} non-overlapping circles in the unit square.",
        "background": BACKGROUND,
    },
    models={"reflection": "openai/reflection-model"},
    budget={"max_metric_calls": 8},
)

print("Best packing code:", result.best.source.strip().splitlines()[0])
