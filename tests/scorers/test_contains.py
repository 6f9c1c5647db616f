"""contains: gepa's default evaluator (the answer is a substring of the reply) as a built-in
scorer, so gepa's README quickstart runs with `metric="contains"` (issue 28)."""

from __future__ import annotations

import pytest

from skynet import scorers
from skynet.data import Item
from skynet.errors import DatasetError
from skynet.scorers.contains import CONTAINS, MISSING


def _item(**expected) -> Item:
    return Item("q1", {"input": "What is 40 + 2?"}, expected)


def test_the_answer_anywhere_in_the_reply_is_right_as_gepa_counts_it():
    scorer = scorers.get("contains")
    verdict = scorer.score_output(_item(answer="### 42"), "40 + 2 = 42, so ### 42")
    assert (verdict.correct, verdict.reason) == (True, CONTAINS)
    # Case and spacing as written, as gepa's `data["answer"] in response`.
    assert not scorer.score_output(_item(answer="### 42"), "###42").correct
    assert not scorer.score_output(_item(answer="Paris"), "paris").correct


def test_a_wrong_reply_says_the_answer_and_the_additional_context():
    item = _item(answer="### 42", additional_context={"solution": "40 + 2 = 42"})
    verdict = scorers.get("contains").score_output(item, "### 41")
    assert (verdict.correct, verdict.reason) == (False, MISSING)
    assert "'### 42'" in verdict.detail and '"solution": "40 + 2 = 42"' in verdict.detail


def test_several_outputs_take_answer_and_a_list_is_several_answers():
    scorer = scorers.get("contains")
    item = _item(answer=["Paris", "Paname"], additional_context="capital of France")
    assert scorer.score_output(item, "It is Paname.").correct
    assert scorer.key(item).text == "Paris"
    with pytest.raises(DatasetError, match="label option"):
        scorer.key(_item(a="x", b="y"))


def test_it_passes_its_own_self_test():
    items = [_item(answer=f"### {n}") for n in (41, 42, 43)]
    items = [Item(f"q{i}", it.input, it.expected) for i, it in enumerate(items)]
    assert scorers.selftest(scorers.get("contains"), items).ok
