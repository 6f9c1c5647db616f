"""Budgets that cannot be overrun, end to end: whole runs against a loopback server that bills by
the tokens it reports (counted with the same tokenizer a provider would use)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from projects import BETTER, SUM_METRIC, make_project, make_sum_code_project, task_responder

from skynet.cli import main
from skynet.runs import RunStore
from skynet.testing import MODEL, ScriptedServer, is_reflection, reply

PAD = 2_000_000  # characters of output per item: the attack


def _tokens(text: str) -> int:
    from skynet.models._litellm import litellm

    return litellm.token_counter(model=MODEL, text=text)


@pytest.fixture
def billing_server():
    """The loopback server, counting prompt tokens like the provider's tokenizer and billing
    them at the price the projects declare ($1 in, $2 out per million tokens)."""
    with ScriptedServer(count_tokens=_tokens) as server:
        server.bill(input_per_mtok=1.0, output_per_mtok=2.0)
        yield server


def _store(project: Path) -> RunStore:
    return RunStore(project / ".skynet" / "runs.db")


def _spent(store: RunStore, run_id: str) -> float:
    return sum(t.cost_usd for t in store.cost_by_role(run_id).values())


# -- the 2 MB-output reflection attack on a code project --------------------------------------
HOSTILE = textwrap.dedent(
    f"""
    def run(input):
        n = input["n"]
        return {{"total": n * (n + 1) // 2 + (n % 3 == 0), "pad": "x" * {PAD}}}
    """
)


def _code_project(root: Path, server_url: str, *, max_side_info_chars: int = 2000) -> Path:
    return make_sum_code_project(
        root,
        code=HOSTILE,
        metric=SUM_METRIC,
        toml=f"""
        timeout_s = 20
        max_output_bytes = 5000000

        [engine]
        name = "gepa"
        concurrency = 2
        max_side_info_chars = {max_side_info_chars}

        [budget]
        max_metric_calls = 60
        max_cost_usd = 0.10

        [models]
        reflection = "{MODEL}"

        [models.endpoints."{MODEL}"]
        api_base = "{server_url}"
        timeout_s = 30

        [models.prices."{MODEL}"]
        input_per_mtok = 1.0
        output_per_mtok = 2.0
        """,
    )


def _reflection_replies(body):
    # The reflection model answers with the same hostile program each time.
    return reply(f"```python\n{HOSTILE}```")


@pytest.mark.slow
def test_the_2mb_output_attack_reaches_reflection_cut_and_spends_within_budget(
    tmp_path, billing_server, capsys
):
    billing_server.responder = _reflection_replies
    project = _code_project(tmp_path / "p", billing_server.url)
    assert main(["-C", str(project), "run"]) == 0
    prompts = [r["messages"][-1]["content"] for r in billing_server.requests]
    assert prompts, "the reflection model was never called"
    # Each 2 MB output reached the reflection model as its first 2,000 characters and a note.
    assert all(len(p) < 30_000 for p in prompts), max(len(p) for p in prompts)
    assert "[cut: 2,000,0" in prompts[0] and "kept the first 2,000]" in prompts[0]
    assert billing_server.billed_usd <= 0.10
    with _store(project) as store:
        run = store.latest_run()
        assert run is not None and run.status == "finished"
        assert _spent(store, run.id) == pytest.approx(billing_server.billed_usd)


@pytest.mark.slow
def test_without_the_cut_the_budget_alone_refuses_the_huge_reflection_call(
    tmp_path, billing_server, capsys
):
    billing_server.responder = _reflection_replies
    project = _code_project(tmp_path / "p", billing_server.url, max_side_info_chars=10_000_000)
    assert main(["-C", str(project), "run"]) == 0
    err = capsys.readouterr().err
    # The reflection prompt held ~6 MB (~750k tokens, $0.75 of input): never sent.
    assert billing_server.request_count == 0
    assert billing_server.billed_usd == 0
    assert "stopped: budget max_cost_usd = $0.1 reached: the reflection call" in err
    with _store(project) as store:
        run = store.latest_run()
        assert run is not None and run.status == "finished"
        assert "max_cost_usd" in run.notes["stopped_by"]
        assert run.best_candidate_id == run.seed_candidate_id  # the best so far: the seed
    assert next((project / ".skynet" / "runs").glob("*/best_code.py")).read_text() == HOSTILE


# -- a prompt run with task, reflection and concurrency ---------------------------------------
def _with_money_budget(project: Path, max_cost_usd: float) -> None:
    toml = project / "skynet.toml"
    text = toml.read_text()
    toml.write_text(text.replace("[budget]\n", f"[budget]\nmax_cost_usd = {max_cost_usd}\n", 1))


def test_a_prompt_run_stops_within_its_money_budget_and_keeps_its_best(
    tmp_path, billing_server, capsys
):
    billing_server.responder = task_responder
    project = make_project(tmp_path / "p", billing_server.url, budget=400, concurrency=4)
    _with_money_budget(project, 0.004)
    assert main(["-C", str(project), "run"]) == 0
    err = capsys.readouterr().err
    assert "stopped: budget max_cost_usd = $0.004" in err
    assert billing_server.billed_usd <= 0.004
    with _store(project) as store:
        run = store.latest_run()
        assert run is not None and run.status == "finished"
        assert _spent(store, run.id) == pytest.approx(billing_server.billed_usd)
        evaluations = store.evaluations(run.id)
        assert len(evaluations) < 400  # the money, not the metric calls, stopped it
        # The best kept is the best val mean over the candidates evaluated on every val item.
        val_ids = {e.item_id for e in evaluations if e.split == "val"}
        means = {}
        for cid in {e.candidate_id for e in evaluations}:
            mine = [e for e in evaluations if e.candidate_id == cid and e.split == "val"]
            if {e.item_id for e in mine} == val_ids:
                means[cid] = sum(e.score or 0.0 for e in mine) / len(mine)
        assert means[run.best_candidate_id] == max(means.values())
    best = next((project / ".skynet" / "runs").glob("*/best_prompt.md")).read_text()
    assert (BETTER in best) == (max(means.values()) == 1.0)


def test_a_resumed_run_counts_what_it_already_spent(tmp_path, billing_server, capsys):
    billing_server.responder = task_responder
    project = make_project(tmp_path / "p", billing_server.url, budget=400, concurrency=4)
    _with_money_budget(project, 0.004)
    assert main(["-C", str(project), "run"]) == 0
    billed = billing_server.billed_usd
    with _store(project) as store:
        run = store.latest_run()
        assert run is not None
        store.set_status(run.id, "stopped", error="interrupted")  # as if killed at the end
    capsys.readouterr()
    assert main(["-C", str(project), "run", "--resume", run.id]) == 0
    # Its budget was spent already: the resumed run replays and pays nothing more.
    assert billing_server.billed_usd == pytest.approx(billed)
    assert "stopped: budget max_cost_usd" in capsys.readouterr().err


# -- an unpriced model under a money budget ---------------------------------------------------
def test_an_unpriced_model_with_a_money_budget_is_refused_before_any_call(
    tmp_path, billing_server, capsys
):
    billing_server.responder = task_responder
    project = make_project(tmp_path / "p", billing_server.url)
    toml = project / "skynet.toml"
    text = toml.read_text()
    toml.write_text(text[: text.index("[models.prices.")])  # no declared price
    assert main(["-C", str(project), "run", "--max-cost-usd", "1"]) == 2
    err = capsys.readouterr().err
    assert f"'{MODEL}' has no known price" in err
    assert f'[models.prices."{MODEL}"]' in err
    assert billing_server.request_count == 0
    db = project / ".skynet" / "runs.db"
    if db.exists():
        with _store(project) as store:
            assert store.list_runs() == []


# -- a reply holding a lone surrogate ---------------------------------------------------------
@pytest.mark.slow
def test_a_lone_surrogate_reply_is_in_the_ledger_and_the_run_store(tmp_path, billing_server):
    def odd(body):
        step = task_responder(body)
        return reply(step.text + " \ud800", latency_s=step.latency_s)

    billing_server.responder = odd
    project = make_project(tmp_path / "p", billing_server.url, budget=20)
    assert main(["-C", str(project), "run"]) == 0
    with _store(project) as store:
        run = store.latest_run()
        assert run is not None and run.status == "finished"
        calls = store.calls(run.id)
        outputs = [e.output for e in store.evaluations(run.id)]
    task_requests = [r for r in billing_server.requests if not is_reflection(r)]
    paid = [c for c in calls if c.ok and not c.cached]
    assert len(paid) == billing_server.request_count  # every paid call is recorded
    assert sum(c.role == "task" for c in paid) == len(task_requests)
    assert all(c.cost_usd is not None and c.cost_usd > 0 for c in paid)
    assert any(isinstance(o, str) and o.endswith("\ud800") for o in outputs)


# -- agent code: a candidate calling the task model through the sandbox's channel --------------
AGENT = textwrap.dedent(
    """
    from skynet_sandbox import ModelCallFailed, complete

    def run(input):
        try:
            text = complete("Add the numbers from 1 to %d. " % input["n"] + "pad " * 4000)
        except ModelCallFailed:
            text = "?"  # swallows a refused call and answers anyway
        return {"total": input["n"] * (input["n"] + 1) // 2, "said": text}
    """
)


@pytest.mark.slow
def test_an_agent_candidates_refused_call_stops_the_run_and_is_never_recorded(
    tmp_path, billing_server, capsys
):
    billing_server.responder = lambda body: reply("it is " + "many " * 30)
    project = _code_project(tmp_path / "p", billing_server.url)
    (project / "code.py").write_text(AGENT)
    toml = project / "skynet.toml"
    text = toml.read_text().replace("max_cost_usd = 0.10", "max_cost_usd = 0.022")
    toml.write_text(
        text.replace(f'reflection = "{MODEL}"', f'task = "{MODEL}"\nreflection = "{MODEL}"')
    )
    assert main(["-C", str(project), "run"]) == 0
    err = capsys.readouterr().err
    assert "stopped: budget max_cost_usd = $0.022 reached: the task call" in err
    assert billing_server.billed_usd <= 0.022
    with _store(project) as store:
        run = store.latest_run()
        assert run is not None and run.status == "finished"
        evaluations = store.evaluations(run.id)
        task_calls = [c for c in store.calls(run.id) if c.role == "task" and not c.cached]
    # Each task call reserves ~$0.0166 (its ~16,000 bytes of input, the bound no tokenizer can
    # pass, and 256 output tokens at most) and costs ~$0.0041: the budget holds one or two of
    # the seed's six val items (two when the first settles before the second reserves); the
    # items whose call was refused are not in the records (not as errors, not as the "?" the
    # candidate answered).
    assert 1 <= len(task_calls) == len(evaluations) <= 2
    assert all(e.error is None and e.output["said"] != "?" for e in evaluations)
    assert run.best_candidate_id == run.seed_candidate_id


# -- the live progress line -----------------------------------------------------------------
def test_the_progress_line_shows_unpriced_and_the_spend_against_the_budget(billing_server):
    import io

    from skynet.session import Progress

    unpriced = billing_server.models(input_per_mtok=None, output_per_mtok=None)
    unpriced.complete("task", [{"role": "user", "content": "hi"}])
    line = Progress(budget=10, models=unpriced, out=io.StringIO()).line()
    assert "task unpriced reflection $0.0000" in line and " of $" not in line

    billing_server.script(reply("ok", prompt_tokens=100_000, completion_tokens=0))
    priced = billing_server.models(max_cost_usd=0.5)
    priced.complete("task", [{"role": "user", "content": "hi"}], draw=1)
    line = Progress(budget=10, models=priced, out=io.StringIO()).line()
    assert "task $0.1000 reflection $0.0000 metric $0.0000 ($0.1000 of $0.5)" in line
