"""Small projects shared by the tests: a scripted capitals project (a model on the loopback server
that names capitals only when the instruction asks for it, and a reflection that proposes that),
and a code project whose items ask for the sum 0..n."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from skynet.testing import is_reflection, reply

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
    (root / "skynet.toml").write_text(
        textwrap.dedent(
            f"""
        [data]
        path = "data.jsonl"
        inputs = ["country"]
        outputs = ["capital"]
        split_column = "split"

        [engine]
        name = "gepa"
        concurrency = {concurrency}

        [budget]
        max_metric_calls = {budget}

        [models]
        task = "openai/skynet-test"
        reflection = "openai/skynet-test"

        [models.endpoints."openai/skynet-test"]
        api_base = "{server_url}"
        timeout_s = 10

        [models.prices."openai/skynet-test"]
        input_per_mtok = 1.0
        output_per_mtok = 2.0
        """
        )
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
    header = textwrap.dedent(
        """
        [data]
        path = "data.jsonl"
        inputs = ["n"]
        outputs = ["total"]
        split_column = "split"

        [artifact]
        kind = "code"
        """
    )
    (root / "skynet.toml").write_text(header + textwrap.dedent(toml).lstrip("\n"))
    return root
