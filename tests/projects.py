"""Small projects shared by the tests: a scripted capitals project (a model on the loopback server
that names capitals only when the instruction asks for it, and a reflection that proposes that),
and a code project whose items ask for the sum 0..n."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from skynet.testing import MODEL, is_reflection, reply

COUNTRIES = [
    ("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Peru", "Lima"),
    ("Egypt", "Cairo"), ("Kenya", "Nairobi"), ("Spain", "Madrid"), ("Chile", "Santiago"),
    ("Greece", "Athens"), ("Norway", "Oslo"), ("Cuba", "Havana"), ("Nepal", "Kathmandu"),
    ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Ghana", "Accra"), ("Mali", "Bamako"),
]  # fmt: skip
CAPITAL = dict(COUNTRIES)
BETTER = "Name the capital city of the country."


def capital_responder(knows=lambda country: True):
    """A scripted model that names the capital when the instruction asks for it and it
    `knows(country)`; its reflection proposes that instruction."""

    def respond(body):
        messages = body["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = messages[-1]["content"]
        if is_reflection(user):
            return reply(f"```\n{BETTER}\n```")
        country = user.removeprefix("Country: ").strip()
        if "capital" in system.lower() and knows(country):
            return reply(
                f"The capital of {country} is {CAPITAL.get(country, '?')}.", latency_s=0.01
            )
        return reply(f"{country} is a country with a long history.", latency_s=0.01)

    return respond


# The scripted model: names the capital only when the instruction asks for it.
task_responder = capital_responder()
# The same, but it never knows Peru's (a val item): no candidate is perfect on val, so a run
# spends its budget instead of stopping at a perfect best.
never_perfect = capital_responder(knows=lambda country: country != "Peru")


def _toml(value: object) -> str:
    """One TOML value as the tests' projects write it: "text", 1, 1.0, ["a", "b"], {k = "v"}."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return repr(value)


def write_skynet_toml(
    root: Path,
    *,
    inputs: list[str],
    outputs: list[str],
    url: str | None = None,
    artifact: dict | None = None,
    metric: dict | None = None,
    engine: dict | None = None,
    budget: int | None = None,
    timeout_s: int | None = None,
    prices: tuple[float, float] | None = None,
    model: str = MODEL,
    rest: str = "",
) -> Path:
    """Write a test project's skynet.toml: [data] from data.jsonl split by its "split" column,
    then each section given, in skynet.toml's usual order; `url` adds [models] (`model` for the
    task and the reflection) and its endpoint on the loopback server. `rest` is appended as it is.

    The layout is fixed (a blank line before each `[section]`, `key = value` lines) because tests
    edit the file as text: `.replace('name = "gepa"', ...)`, `.replace("[engine]\\n", ...)`.
    """
    sections: dict[str, dict | None] = {
        "data": {
            "path": "data.jsonl",
            "inputs": inputs,
            "outputs": outputs,
            "split_column": "split",
        },
        "artifact": artifact,
        "metric": metric,
        "engine": engine,
        "budget": None if budget is None else {"max_metric_calls": budget},
    }
    if url is not None:
        endpoint = {"api_base": url, **({} if timeout_s is None else {"timeout_s": timeout_s})}
        sections["models"] = {"task": model, "reflection": model}
        sections[f'models.endpoints."{model}"'] = endpoint
        if prices is not None:
            sections[f'models.prices."{model}"'] = {
                "input_per_mtok": prices[0],
                "output_per_mtok": prices[1],
            }
    text = "".join(
        f"\n[{name}]\n" + "".join(f"{key} = {_toml(value)}\n" for key, value in keys.items())
        for name, keys in sections.items()
        if keys is not None
    )
    path = root / "skynet.toml"
    path.write_text(text + rest)
    return path


def make_project(root: Path, server_url: str, *, budget: int = 40, concurrency: int = 2) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "data.jsonl", "w") as f:
        for i, (country, capital) in enumerate(COUNTRIES):
            split = "val" if i % 2 else "train"
            f.write(
                json.dumps({"id": f"c{i}", "country": country, "capital": capital, "split": split})
                + "\n"
            )
    (root / "prompt.md").write_text(
        "=== instructions ===\nTell the user about the country.\n=== user ===\nCountry: {country}\n"
    )
    (root / "metric.py").write_text(
        textwrap.dedent(
            """
        def score(input, output, expected=None):
            named = expected["capital"].lower() in output.lower()
            fb = "right" if named else f"name the capital: {expected['capital']}"
            return float(named), {"feedback": fb}
        """
        )
    )
    write_skynet_toml(
        root,
        inputs=["country"],
        outputs=["capital"],
        engine={"name": "gepa", "concurrency": concurrency},
        budget=budget,
        url=server_url,
        timeout_s=10,
        prices=(1.0, 2.0),
    )
    return root


def _half(n: int) -> str:
    return "val" if n % 2 else "train"


# The sum project's metric: right when the total is, with the total to aim for as feedback; its
# answer key (the total) for the metric's self-test.
SUM_METRIC = """
def score(input, output, expected=None):
    right = isinstance(output, dict) and output.get("total") == expected["total"]
    return float(right), {"feedback": "right" if right else f"want {expected['total']}"}

def key(expected):
    return {"total": expected["total"]}
"""


def make_sum_code_project(
    root: Path, *, code: str, metric: str, toml: str, split=_half, items: int = 12
) -> Path:
    """A code project: item n{k} has input n = k and expects total = 0 + 1 + ... + k.

    Args:
        code: code.py, the seed candidate.
        metric: metric.py (dedented).
        toml: skynet.toml after `[artifact] kind = "code"`, dedented: the rest of [artifact]
            first, then any other sections.
        split: the split of each n.
    """
    root.mkdir(parents=True)
    with open(root / "data.jsonl", "w") as f:
        for n in range(items):
            row = {"id": f"n{n}", "n": n, "total": n * (n + 1) // 2, "split": split(n)}
            f.write(json.dumps(row) + "\n")
    (root / "code.py").write_text(code)
    (root / "metric.py").write_text(textwrap.dedent(metric))
    write_skynet_toml(
        root,
        inputs=["n"],
        outputs=["total"],
        artifact={"kind": "code"},
        rest=textwrap.dedent(toml).lstrip("\n"),
    )
    return root
