"""Built-in scorer throughput: xlam-tool-call scoring and tool conversion on generated rows,
and reference scoring (exact rung only) on generated records.

    python benchmarks/scorers.py [--rows 60000] [--records 1000] [--seed 0] [--repeats 3]

Scoring is pure CPU, so everything runs on one core in this process. The rows are generated in
code (seeded), shaped like the published xLAM files: "query", "tools" and "answers" as JSON
strings. Each row also gets a reply, drawn so that every reason of the ladder occurs.

Printed, as ratios to the issue's targets (never asserted):
  - items scored per second by xlam-tool-call (ordering any and strict); target >= 30,000/s;
  - seconds to convert 60,000 rows' tools with tool_schemas; target < 5 s;
  - records scored per second by reference with embedder=None (the exact rung only), on
    --records records of 20 fields (text, numbers, a bool, a date, a list of names), each
    candidate perturbed: re-cased, missing, wrong or extra values, a shuffled list; >= 5,000/s.
Each figure is the best of --repeats runs, each with a fresh scorer (no answer cache carried over).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from skynet import Item  # noqa: E402
from skynet.scorers import Call, Reply, get  # noqa: E402
from skynet.scorers.xlam import tool_schemas  # noqa: E402

SCORE_TARGET = 30_000.0  # items per second, one core
CONVERT_TARGET_S = 5.0  # seconds for 60,000 rows
REFERENCE_TARGET = 5_000.0  # records of 20 fields per second, exact rung only, one core

TYPE_WORDS = [
    ("str", lambda r: r.choice(["Paris", "New York", "café", "tech"])),
    ("int", lambda r: r.randint(-5, 500)),
    ("float", lambda r: round(r.uniform(-90, 90), r.randint(1, 6))),
    ("bool", lambda r: r.random() < 0.5),
    ("List[int]", lambda r: [r.randint(0, 9) for _ in range(r.randint(1, 4))]),
    ("List[str]", lambda r: [r.choice("abcxyz") for _ in range(r.randint(1, 3))]),
    ("Tuple[float, float]", lambda r: [round(r.uniform(0, 1), 3), round(r.uniform(0, 1), 3)]),
    ("List[Union[int, float]]", lambda r: [r.randint(0, 9), round(r.uniform(0, 9), 2)]),
    ("Dict", lambda r: {"k": r.randint(0, 9)}),
    ("set", lambda r: sorted({r.randint(0, 9) for _ in range(3)})),
    ("list", lambda r: [r.randint(0, 9), "x"]),
]
WORDS = ["get", "search", "find", "list", "convert", "fetch", "calc", "lookup"]
NOUNS = ["weather", "stock", "recipe", "flight", "hotel", "news", "movie", "song", "route"]


def make_rows(n: int, seed: int) -> list[dict]:
    r = random.Random(seed)
    rows = []
    for index in range(n):
        tools = []
        values = {}
        for _ in range(r.randint(1, 4)):
            name = f"{r.choice(WORDS)}_{r.choice(NOUNS)}_{r.randint(0, 99)}"
            params = {}
            for p in range(r.randint(1, 5)):
                words, value = r.choice(TYPE_WORDS)
                spec: dict = {"description": f"parameter {p} of {name}"}
                if r.random() < 0.3:
                    spec["type"] = f"{words}, optional"
                    spec["default"] = value(r) if r.random() < 0.5 else ""
                else:
                    spec["type"] = words
                params[f"p{p}"] = spec
                values[(name, f"p{p}")] = value
            tools.append(
                {"name": name, "description": f"{name} does a thing", "parameters": params}
            )
        answers = []
        for tool in r.sample(tools, r.randint(0, min(3, len(tools))) if r.random() < 0.95 else 0):
            args = {p: values[(tool["name"], p)](r) for p in tool["parameters"]}
            answers.append({"name": tool["name"], "arguments": args})
        rows.append(
            {
                "id": str(index),
                "query": f"question {index}",
                "tools": json.dumps(tools),
                "answers": json.dumps(answers),
                "reply": make_reply(r, answers),
            }
        )
    return rows


def make_reply(r: random.Random, answers: list[dict]) -> Reply:
    calls = [Call(a["name"], json.dumps(a["arguments"])) for a in answers]
    draw = r.random()
    if draw < 0.55:  # right, perhaps reordered and re-spaced
        r.shuffle(calls)
        return Reply(calls=tuple(calls))
    if draw < 0.60:
        return Reply(calls=tuple(calls), truncated=True)
    if draw < 0.65:
        return Reply(text='<tool_call>{"name": "x", "arguments": {</tool_call>')
    if draw < 0.70 and calls:
        calls[0] = Call(calls[0].name, calls[0].arguments[:-1])
        return Reply(calls=tuple(calls))
    if draw < 0.78:
        return Reply(text="I think the answer is 42.")
    if draw < 0.84:
        return Reply(calls=tuple(calls + [Call("extra_tool", "{}")]))
    if draw < 0.90 and calls:
        calls[-1] = Call("unknown_tool", calls[-1].arguments)
        return Reply(calls=tuple(calls))
    if calls:
        args = json.loads(calls[0].arguments)
        args[next(iter(args))] = "changed"
        calls[0] = Call(calls[0].name, json.dumps(args))
    return Reply(calls=tuple(calls))


def bench_scoring(rows: list[dict], ordering: str, repeats: int) -> tuple[float, Counter]:
    items = [
        (Item(row["id"], {"query": row["query"]}, {"answers": row["answers"]}), row["reply"])
        for row in rows
    ]
    best = float("inf")
    reasons: Counter = Counter()
    for _ in range(repeats):
        scorer = get("xlam-tool-call", ordering=ordering)
        score = scorer.score
        start = time.perf_counter()
        verdicts = [score(item, reply) for item, reply in items]
        best = min(best, time.perf_counter() - start)
        reasons = Counter(v.reason for v in verdicts)
    return len(items) / best, reasons


def bench_convert(rows: list[dict], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for row in rows:
            tool_schemas(row)
        best = min(best, time.perf_counter() - start)
    return best


FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia"]
LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson"]
PLACES = ["London", "New York City", "Zurich", "Palo Alto", "Cambridge", "Tokyo", "Nairobi"]
TEXT_FIELDS = [f"text_{k}" for k in range(11)]


def make_record(r: random.Random) -> dict:
    """One reference record of 20 fields."""
    record: dict = {
        f: f"{r.choice(FIRST)} {r.choice(LAST)} of {r.choice(PLACES)}" for f in TEXT_FIELDS
    }
    record.update(
        year=r.randint(1900, 2024),
        pages=r.randint(10, 900),
        rank=r.randint(1, 100),
        weight=round(r.uniform(1, 500), 2),
        score=round(r.uniform(0, 10), 1),
        open_access=r.random() < 0.5,
        published=f"{r.randint(1950, 2024)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
        authors=[f"{r.choice(FIRST)} {r.choice(LAST)}" for _ in range(3)],
        city=r.choice(PLACES),
    )
    return record


def perturb(r: random.Random, record: dict) -> dict:
    """A candidate: most values as given or re-cased, some wrong, missing or extra."""
    out: dict = {}
    for key, value in record.items():
        draw = r.random()
        if draw < 0.05:
            continue  # missing
        if draw < 0.12 and isinstance(value, str):
            out[key] = value + " Jr."  # wrong
        elif draw < 0.30 and isinstance(value, str):
            out[key] = f"  {value.upper()} "  # equal after case and whitespace
        elif draw < 0.35 and isinstance(value, int) and not isinstance(value, bool):
            out[key] = float(value)  # 4 = 4.0
        elif isinstance(value, list):
            items = list(value)
            r.shuffle(items)
            if r.random() < 0.3:
                items[0] = "Someone Else"
            out[key] = items
        else:
            out[key] = value
    if r.random() < 0.2:
        out["notes"] = "an extra field"
    return out


def bench_reference(n: int, seed: int, repeats: int) -> tuple[float, float]:
    r = random.Random(seed)
    pairs = []
    for index in range(n):
        reference = make_record(r)
        pairs.append((Item(str(index), {}, {"record": reference}), perturb(r, reference)))
    best = float("inf")
    quality = 0.0
    for _ in range(repeats):
        score = get("reference", embedder=None).score
        start = time.perf_counter()
        results = [score(item, candidate) for item, candidate in pairs]
        best = min(best, time.perf_counter() - start)
        quality = sum(x.quality for x in results) / len(results)
    return n / best, quality


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--records", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core, as targeted
    print(
        f"python {platform.python_version()}, {args.rows} rows, seed {args.seed}, best of {args.repeats}, one core"
    )
    start = time.perf_counter()
    rows = make_rows(args.rows, args.seed)
    print(f"generated in {time.perf_counter() - start:.1f} s")
    for ordering in ("any", "strict"):
        rate, reasons = bench_scoring(rows, ordering, args.repeats)
        print(
            f"xlam-tool-call ordering={ordering}: {rate:,.0f} items/s = {rate / SCORE_TARGET:.2f} x "
            f"the target {SCORE_TARGET:,.0f}/s (ratio >= 1 meets it)"
        )
        print("  reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())))
    seconds = bench_convert(rows, args.repeats)
    scaled = seconds * 60_000 / len(rows)
    print(
        f"tool_schemas on {len(rows)} rows: {seconds:.2f} s (60,000-row equivalent {scaled:.2f} s) = "
        f"{scaled / CONVERT_TARGET_S:.2f} of the {CONVERT_TARGET_S:.0f} s target (ratio < 1 meets it)"
    )
    rate, quality = bench_reference(args.records, args.seed, args.repeats)
    print(
        f"reference, exact rung only, {args.records} records x 20 fields: {rate:,.0f} records/s = "
        f"{rate / REFERENCE_TARGET:.2f} x the target {REFERENCE_TARGET:,.0f}/s (ratio >= 1 meets "
        f"it); mean quality {quality:.3f}"
    )


if __name__ == "__main__":
    main()
