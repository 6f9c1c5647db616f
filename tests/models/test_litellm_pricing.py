"""Skynet hands its own price to litellm, so litellm's per-reply costing takes the short path."""

from __future__ import annotations

import pytest

from skynet.models import Price
from skynet.models.client import _litellm_pricing
from skynet.testing import MODEL, reply

USER = [{"role": "user", "content": "What is the capital of France ?"}]


@pytest.mark.parametrize(
    ("price", "passed"),
    [
        (Price(input_per_mtok=3.0, output_per_mtok=15.0), (3e-6, 15e-6)),
        (Price(input_per_mtok=0.0, output_per_mtok=2.0), (0.0, 2e-6)),
        # Unknown or zero: nothing, so litellm behaves as it would without Skynet's price.
        (None, None),
        (Price(input_per_mtok=0.0, output_per_mtok=0.0), None),
    ],
)
def test_litellm_gets_the_price_per_token_only_when_it_is_known_and_not_zero(price, passed):
    got = _litellm_pricing(price)
    if passed is None:
        assert got == {}
    else:
        assert got["input_cost_per_token"] == pytest.approx(passed[0])
        assert got["output_cost_per_token"] == pytest.approx(passed[1])


def test_the_declared_price_reaches_litellm_and_never_the_wire(scripted_server):
    scripted_server.script(reply("Paris", prompt_tokens=1000, completion_tokens=500))
    models = scripted_server.models(input_per_mtok=3.0, output_per_mtok=15.0)
    price = models.price(MODEL)
    response = models._call_litellm(
        MODEL, USER, {"temperature": 0.0}, models.settings(MODEL), price
    )
    # litellm costed the reply with Skynet's price (the model is in no price table of its own).
    assert response._hidden_params["response_cost"] == pytest.approx(0.0105)
    sent = scripted_server.requests[0]
    assert not {"input_cost_per_token", "output_cost_per_token"} & set(sent)


def test_a_priced_call_still_reports_skynets_own_cost(scripted_server):
    scripted_server.script(reply("Paris", prompt_tokens=1000, completion_tokens=500))
    models = scripted_server.models(input_per_mtok=3.0, output_per_mtok=15.0)
    got = models.complete("task", USER)
    assert got.text == "Paris"
    assert got.cost_usd == pytest.approx(0.0105)
    assert not {"input_cost_per_token", "output_cost_per_token"} & set(scripted_server.requests[0])
