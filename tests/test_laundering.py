"""A candidate may not launder its wrong answers into faults that are left out of its mean.

The attack (issue 25): a code candidate that cannot answer an item sends the task model a
request the model layer must refuse (a NaN temperature; any request the provider answers 400).
Were that a "model error", the item would be left out of the mean and the candidate would score
1.000 where the seed scores 0.333 with the same answers. Each attack runs against the real
sandbox and the loopback server, with a control that shows it succeeding without the defence.
"""

from __future__ import annotations

import json
import math

import pytest
from litellm import exceptions as litellm_errors

import skynet
from skynet.errors import REQUEST_FAULT, SERVICE_FAULT, SETUP_FAULT, ModelError
from skynet.evaluation import CANDIDATE_ERROR, TASK_ERROR
from skynet.mean import choose_best, left_out_share, paired
from skynet.models.client import _fault_of
from skynet.runs import RunStore, render_text, runs_db_path, summarize
from skynet.sandbox import ModelProxy
from skynet.testing import MODEL, fail, reply

CAPITALS = {"France": "Paris", "Peru": "Lima", "Chad": "N'Djamena"}
ROWS = [{"country": c, "capital": capital} for c, capital in CAPITALS.items()]

# The seed asks the model; the scripted model knows only France's capital: 1 of 3.
SEED = """
from skynet_sandbox import complete

def run(input):
    return complete(f"Capital of {input['country']}?", max_tokens=8)
"""

# Same answers as the seed, but where its answer is wrong it makes the model fail first.
LAUNDER_NAN = """
from skynet_sandbox import chat, complete

def run(input):
    answer = complete(f"Capital of {input['country']}?", max_tokens=8)
    if answer != "Paris":
        try:
            chat([{"role": "user", "content": "x"}], temperature=float("nan"))
        except Exception:
            pass
    return answer
"""

LAUNDER_400 = """
from skynet_sandbox import chat, complete

def run(input):
    answer = complete(f"Capital of {input['country']}?", max_tokens=8)
    if answer != "Paris":
        try:
            chat([{"role": "user", "content": "refuse me " * 400}], max_tokens=8)
        except Exception:
            pass
    return answer
"""


def score(input, output, expected=None):
    right = isinstance(output, str) and expected["capital"] in output
    return float(right), {"feedback": "right" if right else f"say {expected['capital']}"}


def _responder(body):
    prompt = body["messages"][-1]["content"]
    if "refuse me" in prompt:
        return fail(400)  # a provider refusing the request for what it holds
    return reply("Paris" if "France" in prompt else "Lyon")


def _evaluate(source: str, server, tmp_path):
    server.responder = _responder
    return skynet.evaluate(
        skynet.Code(source),
        metric=score,
        data=ROWS,
        inputs=["country"],
        outputs=["capital"],
        models={"task": MODEL, "endpoints": {MODEL: {"api_base": server.url}}},
        store=tmp_path / ".skynet",
    )


def test_the_seed_scores_one_in_three(scripted_server, tmp_path):
    result = _evaluate(SEED, scripted_server, tmp_path)
    assert result.mean == pytest.approx(1 / 3)
    assert result.left_out == 0


def test_a_provoked_400_is_the_candidates_failure_not_a_model_error(
    scripted_server, tmp_path, monkeypatch
):
    result = _evaluate(LAUNDER_400, scripted_server, tmp_path / "defended")
    assert result.mean == pytest.approx(1 / 3)  # no better than the seed
    assert result.left_out == 0
    refused = sum(r.error is None for r in result.results)
    assert refused == 3  # its answers are scored as answers

    # Control: were a 400 the service's fault, the two wrong answers would vanish.
    monkeypatch.setattr(ModelError, "refused_request", property(lambda self: False))
    laundered = _evaluate(LAUNDER_400, scripted_server, tmp_path / "control")
    assert laundered.mean == pytest.approx(1.0)
    assert laundered.left_out == 2
    assert {r.error_kind for r in laundered.results if r.error} == {TASK_ERROR}


@pytest.mark.slow
def test_a_nan_temperature_is_refused_before_it_is_sent(scripted_server, tmp_path, monkeypatch):
    result = _evaluate(LAUNDER_NAN, scripted_server, tmp_path / "defended")
    assert result.mean == pytest.approx(1 / 3)
    assert result.left_out == 0
    # Only the three questions reached the model; the NaN requests never left Skynet.
    assert all(
        not isinstance(r.get("temperature"), float) or math.isfinite(r["temperature"])
        for r in scripted_server.requests
    )
    assert scripted_server.request_count == 3

    # Control: with the proxy's check off, the NaN request is sent and fails in the model
    # layer; with the classification off too, the item vanishes from the mean.
    monkeypatch.setattr("skynet.sandbox._proxy._invalid_params", lambda params: "")
    monkeypatch.setattr(ModelError, "refused_request", property(lambda self: False))
    laundered = _evaluate(LAUNDER_NAN, scripted_server, tmp_path / "control")
    assert laundered.left_out == 2
    assert laundered.mean == pytest.approx(1.0)


def test_a_candidate_that_crashes_after_a_refused_call_counts_zero(scripted_server, tmp_path):
    source = LAUNDER_400.replace(
        "        except Exception:\n            pass\n", "        finally:\n            pass\n"
    )
    result = _evaluate(source, scripted_server, tmp_path)
    assert result.mean == pytest.approx(1 / 3)
    kinds = [r.error_kind for r in result.results if r.error]
    assert kinds == [CANDIDATE_ERROR, CANDIDATE_ERROR]


@pytest.mark.parametrize(
    ("params", "refused"),
    [
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": float("inf")}, "temperature"),
        ({"temperature": -1}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"temperature": "0.5"}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 8.5}, "max_tokens"),
        ({"max_tokens": 2**40}, "max_tokens"),
        ({"seed": 2**70}, "seed"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": [1]}, "stop"),
        ({"stop": ""}, "stop"),
        ({"temperature": 0.7, "top_p": 0.9, "max_tokens": 16, "stop": ["\n"], "seed": 3}, None),
    ],
)
def test_the_proxy_checks_each_parameter_before_sending(params, refused):
    sent = []
    proxy = ModelProxy(call=lambda messages, p: sent.append(p) or {"text": "ok"})
    line = json.dumps({"messages": [{"role": "user", "content": "hi"}], **params}).encode()
    answer = proxy.handle(line)
    if refused is None:
        assert answer == {"text": "ok"} and sent == [params]
    else:
        assert answer["error"].startswith(refused) and sent == []


def _status_error(cls, status: int, **extra):
    return cls(message=f"scripted {status}", model=MODEL, llm_provider="openai", **extra)


@pytest.mark.parametrize(
    ("exc", "fault"),
    [
        (_status_error(litellm_errors.BadRequestError, 400), REQUEST_FAULT),
        (
            litellm_errors.ContextWindowExceededError(
                message="too long", model=MODEL, llm_provider="openai"
            ),
            REQUEST_FAULT,
        ),
        (ValueError("Out of range float values are not JSON compliant"), REQUEST_FAULT),
        (_status_error(litellm_errors.AuthenticationError, 401), SETUP_FAULT),
        (_status_error(litellm_errors.NotFoundError, 404), SETUP_FAULT),
        (_status_error(litellm_errors.RateLimitError, 429), SERVICE_FAULT),
        (_status_error(litellm_errors.InternalServerError, 500), SERVICE_FAULT),
        (_status_error(litellm_errors.ServiceUnavailableError, 503), SERVICE_FAULT),
        (litellm_errors.Timeout(message="t", model=MODEL, llm_provider="openai"), SERVICE_FAULT),
        (
            litellm_errors.APIConnectionError(message="refused", model=MODEL, llm_provider="o"),
            SERVICE_FAULT,
        ),
    ],
)
def test_whose_fault_a_failed_call_is(exc, fault):
    assert _fault_of(exc) == fault


@pytest.mark.parametrize(
    ("step", "fault"),
    [(fail(400), REQUEST_FAULT), (fail(401), SETUP_FAULT), (fail(503), SERVICE_FAULT)],
)
def test_the_fault_of_a_real_http_failure(scripted_server, tmp_path, step, fault):
    scripted_server.script(*[step] * 4)
    models = scripted_server.models(tmp_path)
    with pytest.raises(ModelError) as caught:
        models.complete("task", [{"role": "user", "content": "hi"}])
    assert caught.value.fault == fault
    assert caught.value.refused_request == (fault == REQUEST_FAULT)


# -- which candidate may be named best, and the change the report shows -------------------------
def _outcomes(*cells):
    """Per item: a score, "x" (the candidate's failure) or "-" (a fault, left out)."""
    found = {}
    for index, cell in enumerate(cells):
        if cell == "-":
            found[f"v{index}"] = (None, TASK_ERROR, False)
        elif cell == "x":
            found[f"v{index}"] = (None, CANDIDATE_ERROR, False)
        else:
            found[f"v{index}"] = (float(cell), None, True)
    return found


def test_faults_are_left_out_for_both_candidates_alike():
    seed = _outcomes(1, 0, 0)
    launderer = _outcomes(1, "-", "-")
    assert left_out_share(launderer) == pytest.approx(2 / 3)
    pair = paired(seed, launderer)
    assert (pair.a, pair.b, pair.n, pair.change) == (1.0, 1.0, 1, 0.0)
    assert paired(seed, _outcomes("x", 1, 1)).change == pytest.approx(2 / 3 - 1 / 3)


@pytest.mark.parametrize(
    ("candidates", "preferred", "share", "named"),
    [
        # The engine's choice stands when its faults are no more than the seed's (+ share).
        ({"s": (1, 0, 0, 0), "a": (1, 1, 0, 0)}, "a", 0.25, "a"),
        # A candidate carried by left-out items is passed over: the seed has the best paired
        # gain (none), so the seed is named.
        ({"s": (1, 0, 0, 0), "l": (1, "-", "-", "-")}, "l", 0.25, "s"),
        # ... and an honest candidate with a real gain is named instead.
        ({"s": (1, 0, 0, 0), "l": (1, "-", "-", "-"), "h": (1, 1, 0, 0)}, "l", 0.25, "h"),
        # One left-out item more than the seed is within a share of 0.25 on four items.
        ({"s": (1, 0, 0, 0), "a": (1, 1, 1, "-")}, "a", 0.25, "a"),
        # A seed with faults of its own sets the bar: the same faults are allowed.
        ({"s": (1, "-", "-", 0), "a": (1, "-", "-", 1)}, "a", 0.1, "a"),
    ],
)
def test_which_candidate_may_be_named_best(candidates, preferred, share, named):
    outcomes = {cid: _outcomes(*cells) for cid, cells in candidates.items()}
    assert choose_best("s", outcomes, preferred=preferred, max_error_share=share) == named


def test_the_reports_change_is_on_the_items_both_counted(tmp_path):
    store = RunStore(runs_db_path(tmp_path))
    run_id = store.create_run(
        config={},
        dataset_hash="d" * 64,
        metric_hash="m1",
        seed=0,
        engine="gepa",
        budget={},
        versions={},
    )
    store.add_candidate(run_id, "seed", {"prompt": "a"})
    store.set_seed_candidate(run_id, "seed")
    store.add_candidate(run_id, "best", {"prompt": "b"}, parents=["seed"])
    for cid, cells in (("seed", (1, 0, 0)), ("best", (1, "-", "-"))):
        for item, (value, kind, ok) in _outcomes(*cells).items():
            result = (
                skynet.Result(item_id=item, output="o", score=value, feedback="f")
                if ok
                else skynet.Result(item_id=item, error="the model failed", error_kind=kind)
            )
            store.record_evaluation(run_id, cid, "val", result, "m1")
    store.set_best(run_id, "best")
    summary = summarize(store, run_id)
    assert summary.best is not None and summary.best.val_score == 1.0  # its own mean
    assert summary.paired["val"].change == 0.0
    text = render_text(summary)
    change = next(line for line in text.splitlines() if line.strip().startswith("change"))
    assert "+0.000 (on the 1 items both counted)" in change
    assert "+0.667" not in text
    store.close()
