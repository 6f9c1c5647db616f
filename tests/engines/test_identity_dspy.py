"""Identity with raw dspy.GEPA: on the same DSPy program, data, metric, scripted model, seed and
budget, with dspy.GEPA's defaults (merge on), Skynet's dspy-gepa engine reaches the same
candidates, in the same order, with the same parents (a merge's two included) and the same val
scores. dspy.GEPA asks the metric of each evaluation and again for the feedback of each
reflection example, and re-evaluates a candidate on items it already ran; the user's metric under
Skynet runs once per (candidate, item, output), on exactly the evaluations raw dspy.GEPA made.

The program routes: one predictor knows European capitals, the other the rest. A revised
instruction (rev >= 1) of each gets its half right, except the European "trap" country in val,
which only the seed's European instruction gets right: the seed stays on the Pareto front, so
dspy.GEPA improves each predictor of the seed in turn, and the two children, each best on other
val items, are merged (gepa merges descendants of a common ancestor that changed different
predictors). Revisions past 1 gain nothing and are rejected.

Run twice: with proposals that differ whenever their prompts do, and with proposals that name
only the revision, where dspy.GEPA later finds the merged program again as a child of one of its
parents. Skynet's records are keyed by content: such a program is one candidate there, with the
lineage it was first found with (the merge's two parents), as dspy.GEPA's first copy has.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from pathlib import Path

import dspy
import pytest
from dspy.clients.cache import Cache
from dspy.utils.callback import BaseCallback
from projects import write_skynet_toml

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import MODEL, ScriptedServer, reply

pytestmark = pytest.mark.slow

EUROPE = {
    "France": "Paris", "Italy": "Rome", "Spain": "Madrid", "Greece": "Athens",
    "Norway": "Oslo", "Poland": "Warsaw", "Sweden": "Stockholm", "Portugal": "Lisbon",
}  # fmt: skip
ELSEWHERE = {
    "Japan": "Tokyo", "Peru": "Lima", "Egypt": "Cairo", "Kenya": "Nairobi",
    "Chile": "Santiago", "Cuba": "Havana", "Nepal": "Kathmandu", "Ghana": "Accra",
}  # fmt: skip
CAPITAL = {**EUROPE, **ELSEWHERE}
TRAP = "Greece"  # a val item: only the seed's European instruction names its capital
BUDGET = 100
THREADS = 2

PROGRAM = '''\
import dspy


class Router(dspy.Module):
    """Two predictors: the European one answers first, the other when it says Unknown."""

    def __init__(self):
        super().__init__()
        self.europe = dspy.Predict(
            dspy.Signature("country -> capital", "Name the capital of a European country. (rev 0)")
        )
        self.elsewhere = dspy.Predict(
            dspy.Signature("country -> capital", "Name the capital of a country outside Europe. (rev 0)")
        )

    def forward(self, country):
        first = self.europe(country=country).capital
        second = self.elsewhere(country=country).capital
        return dspy.Prediction(capital=first if first != "Unknown" else second)


program = Router()
'''

_REV = re.compile(r"\(rev (\d+)\)")


def _rev(text: str) -> int:
    found = _REV.search(text)
    return int(found.group(1)) if found else 0


def responder(hint: bool):
    """The scripted model, a function of the request alone. Reflection (dspy.GEPA's proposer,
    JSON out): revision r of the instruction becomes r + 1, with the countries of the examples
    shown as a hint when `hint` (then two proposals are the same text only from the same prompt;
    without it, the seed's two children merged are the program a later child of one of them is
    too). Task: the instruction's predictor names the capitals of its half from rev 1 on, the
    trap only at rev 0."""

    def respond(body):
        messages = body["messages"]
        last = messages[-1]["content"]
        if "new_instruction" in messages[0]["content"]:
            current = last.split("[[ ## current_instruction ## ]]")[1].split("[[ ##")[0].strip()
            head = current.split(" (rev")[0].split(" Hint:")[0]
            if hint:
                shown = re.findall(r'"country": "(\w+)"', last)
                head += f" Hint: {', '.join(shown)}."
            return reply(json.dumps({"new_instruction": f"{head} (rev {_rev(current) + 1})"}))
        instruction = messages[0]["content"].split("your objective is:")[1].strip()
        country = last.split("[[ ## country ## ]]")[1].split("\n")[1].strip()
        rev = _rev(instruction)
        if "European" in instruction:
            right = country in EUROPE and (rev >= 1) != (country == TRAP)
        else:
            right = country in ELSEWHERE and rev >= 1
        answer = CAPITAL[country] if right else "Unknown"
        return reply(f"[[ ## capital ## ]]\n{answer}\n\n[[ ## completed ## ]]")

    return respond


def _feedback(capital: str, output: str) -> tuple[float, str]:
    right = output == capital
    return float(right), "right" if right else f"the capital is {capital}"


METRIC = textwrap.dedent(
    """
    import skynet

    def score(input, output, expected=None):
        if skynet.observation().model_calls:  # a program output (not the self-test's)
            with open({counter!r}, "a") as f:
                f.write(input["country"] + "|" + output + "\\n")
        right = output == expected["capital"]
        return float(right), {{"feedback": "right" if right else f"the capital is {{expected['capital']}}"}}
    """
)

ROWS = [
    {"id": f"c{i}", "country": country, "capital": capital, "split": "val" if i % 2 else "train"}
    for i, (country, capital) in enumerate(CAPITAL.items())
]


@pytest.fixture
def no_dspy_cache(tmp_path, monkeypatch):
    """dspy's own response cache off (the LMs say cache=False too), and any default one it
    might still build kept under tmp_path: nothing serves a reply but the server."""
    cache_dir = tmp_path / "dspy-cache"
    monkeypatch.setenv("DSPY_CACHEDIR", str(cache_dir))
    # dspy builds its default cache when `dspy.cache` is first read: set it without reading it.
    monkeypatch.setitem(vars(dspy), "cache", Cache(False, False, None))
    yield
    assert not cache_dir.exists()


def _load_program(path: Path):
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # the user's program.py
    return namespace["program"]


class _Runs(BaseCallback):
    """Each run of the whole program in raw dspy.GEPA: (its instructions, the item's country)."""

    def __init__(self) -> None:
        self.runs: list[tuple[tuple[str, ...], str]] = []

    def on_module_start(self, call_id, instance, inputs):
        if type(instance).__name__ == "Router":
            texts = tuple(p.signature.instructions for _, p in instance.named_predictors())
            self.runs.append((texts, inputs["kwargs"]["country"]))


def _raw_dspy_gepa(url: str, program_path: Path, dspy_metric=None):
    """Raw dspy.GEPA with its defaults: the same program, data and metric as the project (the
    project's metric as DSPy's, or `dspy_metric` where the project's is one already)."""
    calls: list[tuple[str, str | None]] = []

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        calls.append((gold.country, pred_name))
        if dspy_metric is not None:
            return dspy_metric(gold, pred, trace, pred_name, pred_trace)
        score, feedback = _feedback(gold.capital, pred.capital)
        return dspy.Prediction(score=score, feedback=feedback)

    examples = {
        split: [
            dspy.Example(country=r["country"], capital=r["capital"]).with_inputs("country")
            for r in ROWS
            if r["split"] == split
        ]
        for split in ("train", "val")
    }

    def lm(**kwargs):
        return dspy.LM(MODEL, api_base=url, api_key="sk-loopback", cache=False, **kwargs)

    runs = _Runs()
    optimizer = dspy.GEPA(
        metric=metric,
        max_metric_calls=BUDGET,
        reflection_lm=lm(),
        num_threads=THREADS,
        seed=0,
        track_stats=True,
    )
    with dspy.context(lm=lm(max_tokens=256, temperature=0.0), callbacks=[runs]):
        optimized = optimizer.compile(
            _load_program(program_path), trainset=examples["train"], valset=examples["val"]
        )
    return optimized.detailed_results, calls, runs.runs


def _project(root: Path, url: str) -> Path:
    root.mkdir(parents=True)
    with open(root / "data.jsonl", "w") as f:
        for row in ROWS:
            f.write(json.dumps(row) + "\n")
    (root / "program.py").write_text(PROGRAM)
    (root / "metric.py").write_text(METRIC.format(counter=str(root / "metric-calls.txt")))
    write_skynet_toml(
        root,
        inputs=["country"],
        outputs=["capital"],
        artifact={"kind": "dspy"},
        engine={"name": "dspy-gepa", "seed": 0, "concurrency": THREADS},
        budget=BUDGET,
        url=url,
    )
    return root


def _texts(module) -> tuple[str, ...]:
    return tuple(p.signature.instructions for _, p in module.named_predictors())


@pytest.mark.parametrize("hint", [True, False], ids=["distinct", "found-twice"])
def test_skynet_dspy_gepa_is_raw_dspy_gepa(tmp_path, no_dspy_cache, hint):
    project = tmp_path / "p"
    with ScriptedServer(responder=responder(hint)) as server:
        _project(project, server.url)
        assert main(["-C", str(project), "run"]) == 0
    with ScriptedServer(responder=responder(hint)) as raw_server:
        raw, raw_calls, raw_runs = _raw_dspy_gepa(raw_server.url, project / "program.py")

    with RunStore(runs_db_path(project)) as store:
        (run,) = store.list_runs()
        rows = store.candidates(run.id)
        evaluations = store.evaluations(run.id)
    country = {r["id"]: r["country"] for r in ROWS}
    val_ids = [r["id"] for r in ROWS if r["split"] == "val"]
    text_of = {c.id: tuple(c.content.values()) for c in rows}
    val: dict[str, dict[str, float | None]] = {c.id: {} for c in rows}
    for e in evaluations:
        if e.split == "val":
            val[e.candidate_id][e.item_id] = e.score

    # dspy.GEPA's candidates; a program it found twice is one candidate in Skynet's records (they
    # are keyed by content), with the lineage it was first found with.
    raw_texts = [_texts(c) for c in raw.candidates]
    firsts = [i for i, t in enumerate(raw_texts) if raw_texts.index(t) == i]
    assert (len(firsts) == len(raw_texts)) is hint
    # The candidates dspy.GEPA kept (scored on all of val), in its order; Skynet also records the
    # proposals it rejected on their minibatch, which dspy.GEPA's result leaves out.
    kept = [c for c in rows if len(val[c.id]) == len(val_ids)]
    assert len(kept) < len(rows)  # some proposals were rejected
    assert [text_of[c.id] for c in kept] == [raw_texts[i] for i in firsts]
    assert [[text_of[p] for p in c.parents] for c in kept] == [
        [raw_texts[p] for p in raw.parents[i] if p is not None] for i in firsts
    ]
    # The same val scores, item by item.
    assert [[val[c.id][i] for i in val_ids] for c in kept] == [
        [raw.val_subscores[i][k] for k in range(len(val_ids))] for i in firsts
    ]
    assert [sum(val[c.id].values()) / len(val_ids) for c in kept] == pytest.approx(
        [raw.val_aggregate_scores[i] for i in firsts]
    )
    # Merge ran: a candidate with two parents, the seed's two children, each best on other items.
    ((merged, (a, b)),) = [(i, ps) for i, ps in enumerate(raw.parents) if len(ps) == 2]
    assert raw.parents[a] == raw.parents[b] == [0]
    scores = raw.val_aggregate_scores
    assert scores[merged] > max(scores[a], scores[b])
    # The best program saved in DSPy's format is raw dspy.GEPA's best: the merge.
    (saved,) = (project / ".skynet" / "runs").glob("*/best_program.json")
    best = _load_program(project / "program.py")
    best.load(str(saved))
    assert _texts(best) == raw_texts[raw.best_idx] == raw_texts[merged]

    # Raw dspy.GEPA ran the program once per evaluation it counted, some of them again on the same
    # candidate and item (a parent's minibatch, a merge's val subsample), and asked the metric of
    # each, then again for the feedback of each reflection example.
    evaluated = [c for c, name in raw_calls if name is None]
    for_feedback = [c for c, name in raw_calls if name is not None]
    assert len(evaluated) == len(raw_runs) == raw.total_metric_calls
    assert for_feedback and len(raw_runs) > len(set(raw_runs))
    # Skynet's dspy.GEPA made the same evaluations; the user's metric ran once for each distinct
    # (candidate, item, output): once per recorded evaluation, on exactly raw's set.
    assert {(text_of[e.candidate_id], country[e.item_id]) for e in evaluations} == set(raw_runs)
    scored = (project / "metric-calls.txt").read_text().splitlines()
    assert Counter(scored) == Counter(f"{country[e.item_id]}|{e.output}" for e in evaluations)
    assert len(scored) == len(set(raw_runs)) < len(raw_runs) < len(raw_calls)


# -- a DSPy metric's per-predictor feedback, as dspy.GEPA asks for it --------------------------

DSPY_METRIC = textwrap.dedent(
    """
    import dspy

    def score(gold, pred, trace=None, pred_name=None, pred_trace=None):
        right = pred.capital == gold.capital
        if pred_name is None:
            feedback = "right" if right else f"the capital is {gold.capital}"
        else:  # one predictor's feedback: what it said, from its own trace
            said = pred_trace[0][2]["capital"]
            feedback = f"{pred_name} said {said}; the capital is {gold.capital}"
        return dspy.Prediction(score=float(right), feedback=feedback)
    """
)


def _reflections(server: ScriptedServer) -> Counter:
    return Counter(
        b["messages"][-1]["content"]
        for b in server.requests
        if "new_instruction" in b["messages"][0]["content"]
    )


def test_a_dspy_metric_gives_each_predictor_its_own_feedback_as_raw(tmp_path, no_dspy_cache):
    """The tutorials' metric(gold, pred, trace, pred_name, pred_trace) as metric.py: dspy.GEPA
    asks it for each predictor's feedback with that predictor's name and trace, and each
    reflection is shown that feedback only: the reflection prompts are raw dspy.GEPA's."""
    project = tmp_path / "p"
    with ScriptedServer(responder=responder(True)) as server:
        _project(project, server.url)
        (project / "metric.py").write_text(DSPY_METRIC)
        assert main(["-C", str(project), "run"]) == 0
        skynet_prompts = _reflections(server)
    namespace: dict = {}
    exec(DSPY_METRIC, namespace)
    with ScriptedServer(responder=responder(True)) as raw_server:
        _raw_dspy_gepa(raw_server.url, project / "program.py", namespace["score"])
        raw_prompts = _reflections(raw_server)
    assert raw_prompts and skynet_prompts == raw_prompts
    shown = "\n".join(raw_prompts)
    assert "europe said" in shown and "elsewhere said" in shown  # each predictor's own
