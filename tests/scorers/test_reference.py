"""The reference scorer: the ladder, lists as sets, sub-scores, the judge, and the scorer as a metric.

Exact-rung tests run with embedder=None; similarity tests run the real bundled MiniLM; judge tests
talk to a real loopback server (ScriptedServer) through skynet.models.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skynet import ConfigError, DatasetError, Item, scorers
from skynet.contract import check_metric, validate_return
from skynet.errors import MetricError
from skynet.models import using
from skynet.scorers.embed import default_embedder
from skynet.scorers.reference import (
    DATE,
    EXACT,
    EXTRA,
    JUDGE,
    JUDGE_NUMBER_EXACT,
    JUDGE_NUMBER_PARTIAL,
    JUDGE_TEXT,
    MISSING,
    SHAPE,
    SIMILARITY,
    ReferenceScorer,
    parse_grade,
    threshold_for,
)
from skynet.testing.server import ScriptedServer, reply

JUDGE_MODEL = "openai/skynet-judge"


def item(record: Any, item_id: str = "r1") -> Item:
    return Item(item_id, {"text": "about the entity"}, {"record": record})


def exact_only(**options: Any) -> ReferenceScorer:
    return scorers.get("reference", embedder=None, **options)


class Recording:
    """The real bundled MiniLM, recording every text it is asked to embed."""

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


# -- the exact and date rungs, every data type ------------------------------------------------------

EXACT_ROWS = [
    # (reference value, candidate value, equal, rung)
    ("Acme", "ACME", True, EXACT),
    ("  Acme   Corp ", "acme corp", True, EXACT),
    ("Acme Corp", "Acme Corporation", False, EXACT),  # no embedder: a variant is a mismatch
    ("R. Downey Jr.", "Robert Downey Jr.", False, EXACT),
    (4, 4.0, True, EXACT),
    (4, "4.0", True, EXACT),
    ("1,234.5", 1234.5, True, EXACT),
    (0.1 + 0.2, 0.3, True, EXACT),
    (2020, 2023, False, EXACT),  # no judge: a non-equal number is a mismatch
    (273.35, 273.37, False, EXACT),
    (True, True, True, EXACT),
    (True, "yes", True, EXACT),
    (False, "False", True, EXACT),
    (True, False, False, EXACT),
    (True, 1, False, EXACT),  # a boolean is never a number
    (1, True, False, EXACT),
    ("1972-03-14", "14 March 1972", True, DATE),
    ("1972-03-14", "March 14th, 1972", True, DATE),
    ("1972-03-14", "14 Mar. 1972", True, DATE),
    ("14 March 1972", "1972/3/14", True, DATE),
    ("1972-03-14", "3/14/1972", True, DATE),  # unambiguous: there is no 14th month
    ("1972-03-14", "1972-03-24", False, DATE),  # a plain mismatch, never "similar"
    ("1972-03-04", "03/04/1972", False, DATE),  # day and month could swap: not read as a date
    ("1972-03-14", "sometime in 1972", False, DATE),
    ("1972-03-14", "1972-03-14T00:00:00", True, DATE),
    ("2024-01-05T10:00:00", "2024-01-05T10:00:00Z", True, DATE),
    ("2024-01-05T10:00:00", "2024-01-05T11:00:00", False, DATE),
    ("Paris", None, False, MISSING),
    ("Paris", "  ", False, MISSING),
    (None, "Paris", False, EXTRA),
    ({"city": "Paris"}, "Paris", False, SHAPE),
    ("Paris", ["Paris"], False, SHAPE),
]


@pytest.mark.parametrize(("ref", "cand", "equal", "rung"), EXACT_ROWS)
def test_exact_and_date_rungs(ref: Any, cand: Any, equal: bool, rung: str) -> None:
    result = exact_only().score(item({"v": ref}), {"v": cand})
    found = result.field("v")
    assert (found.equal, found.rung) == (equal, rung)
    assert found.credit == (1.0 if equal else 0.0)
    assert found.similarity is None and found.grade is None


def test_an_unreadable_candidate_date_says_so() -> None:
    found = exact_only().score(item({"born": "1972-03-04"}), {"born": "03/04/1972"}).field("born")
    assert found.note == "the answer is not a date read here"


def test_dates_option_reads_any_form_month_first() -> None:
    scorer = exact_only(dates=["born"])
    assert scorer.score(item({"born": "03/04/1972"}), {"born": "1972-03-04"}).field("born").equal
    assert (
        not scorer.score(item({"born": "03/04/1972"}), {"born": "1972-04-03"}).field("born").equal
    )


def test_a_dates_field_whose_reference_is_no_date_cannot_be_judged() -> None:
    with pytest.raises(DatasetError, match=r"item 'r1'.*'born'.*not a date"):
        exact_only(dates=["born"]).score(item({"born": "a long time ago"}), {"born": "1972"})


# -- sub-scores -------------------------------------------------------------------------------------


def test_sub_scores_follow_the_documented_formulas() -> None:
    reference = {"name": "Acme", "year": 1999, "city": "Paris", "ceo": "Ann Lee", "public": True}
    candidate = {"name": "ACME", "year": 1999, "city": "Lyon", "public": True, "motto": "Go"}
    result = exact_only().score(item(reference), candidate)
    # 5 reference values, 5 given (4 shared keys + "motto"); 3 right (name, year, public).
    assert (result.reference_values, result.given_values, result.credit) == (5, 5, 3.0)
    assert result.completeness == pytest.approx(3 / 5)
    assert result.correctness == pytest.approx(3 / 5)
    assert result.quality == pytest.approx(2 * 3 / (5 + 5))
    assert result.field("ceo").rung == MISSING
    assert result.field("motto").rung == EXTRA
    assert result.scores == {
        "quality": result.quality,
        "completeness": result.completeness,
        "correctness": result.correctness,
    }


def test_a_short_right_answer_is_correct_but_incomplete() -> None:
    result = exact_only().score(item({"a": "x", "b": "y", "c": "z", "d": "w"}), {"a": "x"})
    assert result.correctness == 1.0
    assert result.completeness == 0.25
    assert result.quality == pytest.approx(2 * 0.25 / 1.25)


def test_the_reference_itself_scores_one_and_nothing_scores_zero() -> None:
    reference = {"name": "Acme", "staff": [{"n": "Ann"}, {"n": "Bo"}], "tags": ["a", "b"]}
    scorer = exact_only()
    assert scorer.score(item(reference), reference).quality == 1.0
    for empty in (None, "", {}, "   "):
        result = scorer.score(item(reference), empty)
        assert (result.quality, result.completeness) == (0.0, 0.0)


def test_nested_records_are_compared_leaf_by_leaf() -> None:
    reference = {"company": {"name": "Acme", "hq": {"city": "Paris", "country": "France"}}}
    candidate = {"company": {"name": "acme", "hq": {"city": "Lyon", "country": "FRANCE"}}}
    result = exact_only().score(item(reference), candidate)
    assert [(f.path, f.equal) for f in result.fields] == [
        ("company.name", True),
        ("company.hq.city", False),
        ("company.hq.country", True),
    ]
    assert result.quality == pytest.approx(2 / 3)


# -- lists as sets ----------------------------------------------------------------------------------


def test_a_list_is_a_set_order_does_not_matter() -> None:
    reference = {"genres": ["Action", "Drama", "Sci-Fi"]}
    result = exact_only().score(item(reference), {"genres": ["sci-fi", "ACTION", "Drama"]})
    assert result.quality == 1.0
    genres = result.lists["genres"]
    assert sorted((m.reference_index, m.candidate_index) for m in genres.matched) == [
        (0, 1),
        (1, 2),
        (2, 0),
    ]
    assert genres.missed == () and genres.hallucinated == ()


def test_a_list_reports_matched_missed_and_hallucinated() -> None:
    reference = {"genres": ["Action", "Drama", "Sci-Fi"]}
    result = exact_only().score(item(reference), {"genres": ["Drama", "Comedy"]})
    genres = result.lists["genres"]
    assert [(m.reference, m.candidate) for m in genres.matched] == [("Drama", "Drama")]
    assert [(u.index, u.value) for u in genres.missed] == [(0, "Action"), (2, "Sci-Fi")]
    assert [(u.index, u.value) for u in genres.hallucinated] == [(1, "Comedy")]
    assert (result.completeness, result.correctness) == (pytest.approx(1 / 3), 0.5)


def test_finding_more_right_items_wins() -> None:
    reference = {"cast": ["Ann", "Bo", "Cy", "Di"]}
    scorer = exact_only()
    few = scorer.score(item(reference), {"cast": ["Ann"]})
    more = scorer.score(item(reference), {"cast": ["Ann", "Bo", "Cy"]})
    more_and_one_wrong = scorer.score(item(reference), {"cast": ["Ann", "Bo", "Cy", "Ed"]})
    assert few.quality < more_and_one_wrong.quality < more.quality


def test_repeated_items_count_once_each() -> None:
    result = exact_only().score(item({"t": ["a", "a", "b"]}), {"t": ["a", "b", "b"]})
    assert len(result.lists["t"].matched) == 2
    assert [u.value for u in result.lists["t"].missed] == ["a"]
    assert [u.value for u in result.lists["t"].hallucinated] == ["b"]


def test_list_items_match_by_date_as_well() -> None:
    result = exact_only().score(item({"d": ["1972-03-14", "2001-09-09"]}), {"d": ["14 March 1972"]})
    (match,) = result.lists["d"].matched
    assert (match.reference, match.fields[0].rung) == ("1972-03-14", DATE)


def test_the_assignment_is_optimal_where_greedy_is_wrong() -> None:
    # X equals A on 4 of 4 fields and B on 3; Y equals A on 2 and B on 1 (below the match bar).
    # Greedy takes X-A first and leaves Y-B unmatched (1 pair, 4 right values); the optimal
    # assignment takes X-B and Y-A (2 pairs, 5 right values).
    a = {"n": "Ann", "y": 2001, "c": "Oslo", "k": "red"}
    b = {"n": "Ann", "y": 2002, "c": "Oslo", "k": "red"}
    x = {"n": "Ann", "y": 2001, "c": "Oslo", "k": "red"}
    y = {"n": "Ann", "y": 2001, "c": "Rome", "k": "green"}
    result = exact_only().score(item({"people": [a, b]}), {"people": [x, y]})
    people = result.lists["people"]
    pairs = sorted((m.reference_index, m.candidate_index, m.score) for m in people.matched)
    assert pairs == [(0, 1, 0.5), (1, 0, 0.75)]
    assert people.missed == () and people.hallucinated == ()
    assert result.credit == 5.0
    assert result.quality == pytest.approx(2 * 5 / (8 + 8))
    greedy_quality = 2 * 4 / (8 + 8)  # X-A kept, B missed, Y hallucinated
    assert result.quality > greedy_quality
    assert result.field("people[1].y").candidate == 2001  # matched detail, by reference index


def test_a_pair_below_the_match_bar_is_one_missed_and_one_hallucinated() -> None:
    reference = {"people": [{"n": "Ann", "y": 1, "c": "Oslo"}]}
    candidate = {"people": [{"n": "Ann", "y": 2, "c": "Rome"}]}
    result = exact_only().score(item(reference), candidate)
    assert result.lists["people"].matched == ()
    assert len(result.lists["people"].missed) == len(result.lists["people"].hallucinated) == 1
    assert (result.reference_values, result.given_values, result.credit) == (3, 3, 0.0)
    lenient = exact_only(match_bar=0.3).score(item(reference), candidate)
    assert len(lenient.lists["people"].matched) == 1 and lenient.credit == 1.0


def test_nested_lists_inside_list_items() -> None:
    reference = {"films": [{"title": "Heat", "cast": ["Pacino", "De Niro"]}]}
    candidate = {"films": [{"title": "heat", "cast": ["De Niro", "Kilmer"]}]}
    result = exact_only().score(item(reference), candidate)
    inner = result.lists["films[0].cast"]
    assert [m.reference for m in inner.matched] == ["De Niro"]
    assert [u.value for u in inner.missed] == ["Pacino"]
    assert [u.value for u in inner.hallucinated] == ["Kilmer"]
    assert result.credit == 2.0 and result.reference_values == 3 and result.given_values == 3


# -- outputs and references -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "quality", "note"),
    [
        ('{"name": "Acme"}', 1.0, None),
        ('```json\n{"name": "Acme"}\n```', 1.0, None),
        ("The company is Acme.", 0.0, "the output is not JSON"),
        ('["Acme"]', 0.0, "JSON but a list, not an object"),
        (42, 0.0, "the output is a int, not a JSON object"),
        (None, 0.0, "the output is empty"),
    ],
)
def test_outputs_are_read_as_json_objects(output: Any, quality: float, note: str | None) -> None:
    result = exact_only().score(item({"name": "Acme"}), output)
    assert result.quality == quality
    if note is None:
        assert not any("output" in n for n in result.notes)
    else:
        assert any(note in n for n in result.notes)


@pytest.mark.parametrize(
    ("expected", "message"),
    [
        (None, "has no expected output"),
        ({"record": "not json"}, r"item 'r9': the reference \(column 'record'\) is not valid JSON"),
        ({"record": '{"a": 1'}, "is not valid JSON"),
        ({"record": "[1, 2]"}, "is a list, not a JSON object"),
        ({"record": 42}, "is a int, not a JSON object"),
        ({"a": [1], "b": 2, "c": {}}, None),
    ],
)
def test_a_reference_that_is_not_an_object_cannot_be_judged(
    expected: dict | None, message: str | None
) -> None:
    if message is None:  # several columns: they are the record's fields, and that is fine
        assert exact_only().score(Item("r9", {}, expected), {"a": [1], "b": 2}).quality == 1.0
        return
    with pytest.raises(DatasetError, match=message):
        exact_only().score(Item("r9", {}, expected), {"a": 1})


def test_where_the_reference_is_read_from() -> None:
    scorer = exact_only()
    record = {"name": "Acme", "year": 1999}
    as_text = Item("t", {}, {"record": '{"name": "Acme", "year": 1999}'})
    several_columns = Item("c", {}, record)
    assert scorer.key(as_text) == record
    assert scorer.key(several_columns) == record
    named = exact_only(column="truth")
    assert named.key(Item("n", {}, {"truth": record, "other": {"x": 1}})) == record
    with pytest.raises(DatasetError, match="no output column 'truth'"):
        named.key(Item("n", {}, {"record": record}))


# -- degraded: no embedder, no judge ----------------------------------------------------------------


def test_without_an_embedder_the_result_says_so() -> None:
    result = exact_only().score(item({"name": "Robert Downey Jr."}), {"name": "R. Downey Jr."})
    assert result.quality == 0.0
    assert result.threshold is None
    assert any(n.startswith("no embedder") for n in result.notes)


def test_without_a_judge_free_text_and_numbers_fall_back_and_the_result_says_so() -> None:
    scorer = exact_only(free_text=["summary"])
    result = scorer.score(
        item({"summary": "A drug for pain.", "mw": 180.16, "name": "Aspirin"}),
        {"summary": "Relieves pain.", "mw": 180.2, "name": "Aspirin"},
    )
    assert (result.field("summary").rung, result.field("summary").credit) == (EXACT, 0.0)
    assert (result.field("mw").rung, result.field("mw").credit) == (EXACT, 0.0)
    (note,) = [n for n in result.notes if n.startswith("no judge")]
    assert note.endswith("summary, mw")
    all_right = scorer.score(item({"summary": "x", "mw": 1}), {"summary": "X", "mw": 1.0})
    assert not any(n.startswith("no judge") for n in all_right.notes)


# -- the similarity rung, with the real MiniLM ------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Any:
    return default_embedder()


@pytest.mark.parametrize(
    ("ref", "cand", "equal"),
    [
        ("Robert Downey Jr.", "R. Downey Jr.", True),
        ("Acme Corporation", "Acme Corp", True),
        ("New York City", "NYC", True),
        ("Chris Pratt", "Chris Evans", False),
        ("Acme Corporation", "Apex Corporation", False),
    ],
)
def test_similarity_rung_at_normal_strictness(
    minilm: Any, ref: str, cand: str, equal: bool
) -> None:
    result = ReferenceScorer(embedder=minilm).score(item({"v": ref}), {"v": cand})
    found = result.field("v")
    assert found.rung == SIMILARITY and found.equal is equal
    assert found.credit == (1.0 if equal else 0.0)
    rows = minilm.embed([ref, cand])
    assert found.similarity == pytest.approx(float(rows[0] @ rows[1]), abs=1e-6)
    assert result.threshold == threshold_for("normal") == 0.75


def test_strictness_moves_the_threshold(minilm: Any) -> None:
    pair = (item({"v": "Robert Downey Jr."}), {"v": "R. Downey Jr."})  # cosine 0.860
    assert ReferenceScorer(embedder=minilm, strictness="strict").score(*pair).field("v").equal
    assert not ReferenceScorer(embedder=minilm, strictness=1.0).score(*pair).field("v").equal


def test_free_text_without_a_judge_gets_the_cosine_as_credit(minilm: Any) -> None:
    scorer = ReferenceScorer(embedder=minilm, free_text=["summary"])
    ref = "A billionaire industrialist builds an armored suit to escape captivity."
    cand = "A rich engineer escapes his captors in a suit of armor."
    found = scorer.score(item({"summary": ref}), {"summary": cand}).field("summary")
    rows = minilm.embed([ref, cand])
    assert found.rung == SIMILARITY
    assert found.credit == pytest.approx(float(rows[0] @ rows[1]), abs=1e-6)
    assert 0.0 < found.credit < 1.0


def test_similar_list_items_are_matched(minilm: Any) -> None:
    reference = {"cast": ["Robert Downey Jr.", "Gwyneth Paltrow", "Terrence Howard"]}
    candidate = {"cast": ["Gwyneth Paltrow", "R. Downey Jr.", "Jeff Bridges"]}
    result = ReferenceScorer(embedder=minilm).score(item(reference), candidate)
    cast = result.lists["cast"]
    assert sorted((m.reference, m.candidate) for m in cast.matched) == [
        ("Gwyneth Paltrow", "Gwyneth Paltrow"),
        ("Robert Downey Jr.", "R. Downey Jr."),
    ]
    assert [u.value for u in cast.missed] == ["Terrence Howard"]
    assert [u.value for u in cast.hallucinated] == ["Jeff Bridges"]
    assert result.field("cast[0]").rung == SIMILARITY


def test_exact_fields_and_numbers_never_reach_the_embedder() -> None:
    recording = Recording()
    scorer = ReferenceScorer(embedder=recording, exact=["ticker"])
    result = scorer.score(
        item({"ticker": "GOOG", "year": 2004, "price": "85.00", "name": "Alphabet Inc."}),
        {"ticker": "GOOGL", "year": "2005", "price": 85, "name": "Alphabet"},
    )
    assert (result.field("ticker").rung, result.field("ticker").equal) == (EXACT, False)
    assert result.field("year").rung == EXACT and result.field("price").equal
    assert result.field("name").rung == SIMILARITY
    assert not any(t[0].isdigit() or t.startswith("GOOG") for t in recording.texts)
    assert set(recording.texts) <= {"Alphabet Inc.", "Alphabet"}


def test_equal_records_embed_nothing_and_a_text_is_embedded_once() -> None:
    recording = Recording()
    scorer = ReferenceScorer(embedder=recording)
    scorer.score(item({"name": "Acme"}), {"name": "ACME"})
    assert recording.texts == []
    scorer.score(item({"name": "Acme Corporation"}), {"name": "Acme Corp"})
    scorer.score(item({"name": "Acme Corporation"}), {"name": "Acme Corp"})
    assert sorted(recording.texts) == ["Acme Corp", "Acme Corporation"]


def test_embeddings_are_cached_in_the_project_folder(tmp_path: Path) -> None:
    first = ReferenceScorer(cache_dir=tmp_path)
    first.score(item({"name": "Quantum Widgets Ltd"}), {"name": "Quantum Widgets Limited"})
    assert (tmp_path / "embeddings.db").is_file()
    model = default_embedder()
    passes = model.forward_passes
    second = ReferenceScorer(cache_dir=tmp_path)  # a fresh scorer: its memory memo is empty
    result = second.score(
        item({"name": "Quantum Widgets Ltd"}), {"name": "Quantum Widgets Limited"}
    )
    assert model.forward_passes == passes
    assert result.field("name").rung == SIMILARITY


# -- the judge, over loopback -----------------------------------------------------------------------


def judge_scorer(**options: Any) -> ReferenceScorer:
    return ReferenceScorer(embedder=None, judge=JUDGE_MODEL, **options)


def test_the_judge_grades_free_text_and_non_equal_numbers(scripted_server: ScriptedServer) -> None:
    scripted_server.script(reply("0"), reply("Score: 90"), reply("85/100"))
    models = scripted_server.models(metric_model=JUDGE_MODEL)
    scorer = judge_scorer(free_text=["summary"], partial_numeric=["mw"])
    reference = {"year": 2023, "mw": 273.35, "summary": "A drug for pain.", "name": "Aspirin"}
    candidate = {"year": 2020, "mw": 273.37, "summary": "Relieves pain.", "name": "aspirin"}
    with using(models):
        result = scorer.score(item(reference), candidate)
    year, mw, summary = result.field("year"), result.field("mw"), result.field("summary")
    assert (year.rung, year.grade, year.credit, year.equal) == (JUDGE, 0, 0.0, False)
    assert (mw.rung, mw.grade, mw.credit, mw.equal) == (JUDGE, 90, 0.9, True)
    assert (summary.rung, summary.grade, summary.credit) == (JUDGE, 85, 0.85)
    assert result.field("name").rung == EXACT  # an equal value never reaches the judge
    assert result.credit == pytest.approx(0.0 + 0.9 + 0.85 + 1.0)
    systems = [r["messages"][0]["content"] for r in scripted_server.requests]
    assert systems == [JUDGE_NUMBER_EXACT, JUDGE_NUMBER_PARTIAL, JUDGE_TEXT]
    assert scripted_server.requests[0]["model"] == "skynet-judge"
    assert scripted_server.requests[0]["temperature"] == 0.0
    assert models.ledgers["metric"].totals().calls == 3
    assert not any(n.startswith("no judge") for n in result.notes)


def test_a_judge_verdict_is_cached(scripted_server: ScriptedServer) -> None:
    scripted_server.script(reply("20"), reply("99"))
    models = scripted_server.models(metric_model=JUDGE_MODEL)
    pair = (item({"year": 2023}), {"year": 2020})
    with using(models):
        first = judge_scorer().score(*pair)
        second = judge_scorer().score(*pair)
    assert first.field("year").grade == second.field("year").grade == 20
    assert scripted_server.request_count == 1


def test_an_unreadable_judge_reply_leaves_the_field_out_with_a_note(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.script(reply("I'd say about 70"))
    models = scripted_server.models(metric_model=JUDGE_MODEL)
    with using(models):
        result = judge_scorer().score(
            item({"year": 2023, "name": "Acme"}), {"year": 2020, "name": "Acme"}
        )
    year = result.field("year")
    assert (year.rung, year.equal, year.credit) == (JUDGE, None, None)
    assert "I'd say about 70" in year.note
    assert (result.reference_values, result.given_values, result.quality) == (1, 1, 1.0)
    assert any(n.startswith("judge errors on year") for n in result.notes)
    assert "Not graded:" in result.feedback


def test_nothing_but_unreadable_judge_replies_is_an_error_not_a_score(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.script(reply("maybe"))
    models = scripted_server.models(metric_model=JUDGE_MODEL)
    with using(models), pytest.raises(MetricError, match="no readable grade"):
        judge_scorer().score(item({"year": 2023}), {"year": 2020})


def test_in_lists_only_matched_pairs_are_judged(scripted_server: ScriptedServer) -> None:
    scripted_server.script(reply("80"), reply("60"))
    models = scripted_server.models(metric_model=JUDGE_MODEL)
    scorer = judge_scorer(free_text=["cast[].bio"])
    reference = {
        "cast": [
            {"name": "Ann Lee", "bio": "Born in Oslo, an actor."},
            {"name": "Bo Chan", "bio": "A director from Lyon."},
        ]
    }
    candidate = {
        "cast": [
            {"name": "Bo Chan", "bio": "Directs films; from Lyon."},
            {"name": "Ann Lee", "bio": "Actor, born in Oslo."},
        ]
    }
    with using(models):
        result = scorer.score(item(reference), candidate)
    assert scripted_server.request_count == 2  # 2 matched pairs, not 4 candidate pairs
    grades = {f.path: f.grade for f in result.fields if f.rung == JUDGE}
    assert grades == {"cast[0].bio": 80, "cast[1].bio": 60}
    fields = [r["messages"][1]["content"] for r in scripted_server.requests]
    assert all('"field": "cast[].bio"' in f for f in fields)


@pytest.mark.parametrize(
    ("text", "grade"),
    [
        ("85", 85),
        ("  100\n", 100),
        ("0", 0),
        ("Score: 85", 85),
        ("grade 7", 7),
        ("85/100", 85),
        ("85%", 85),
        ("85.", 85),
        ("101", None),
        ("85.5", None),
        ("I'd say 85", None),
        ("85 or 90", None),
        ("", None),
        ("eighty", None),
    ],
)
def test_parse_grade_is_strict(text: str, grade: int | None) -> None:
    assert parse_grade(text) == grade


# -- options and identity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strictness": -0.1}, "outside"),
        ({"strictness": "extreme"}, "not a level"),
        ({"strictness": True}, "must be a number"),
        ({"judge": ""}, "judge must be a model name"),
        ({"embedder": ""}, "embedder is empty"),
        ({"embedder": 3}, "is not an embedder"),
        ({"free_text": ["a..b"]}, "not a field path"),
        ({"free_text": {"a": 1}}, "must be a list of field paths"),
        ({"dates": ["born"], "free_text": ["born"]}, "in both dates and free_text"),
        ({"match_bar": 0}, "match_bar"),
        ({"column": ""}, "column must be"),
        ({"ordering": "any"}, "has no option 'ordering'"),
    ],
)
def test_refused_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        scorers.get("reference", **options)


def test_threshold_mapping() -> None:
    assert [threshold_for(s) for s in (0, 0.25, 0.5, 0.75, 1)] == [0.55, 0.65, 0.75, 0.855, 0.96]
    assert threshold_for("lenient") == 0.65 and threshold_for("strict") == 0.855
    values = [threshold_for(s / 20) for s in range(21)]
    assert values == sorted(values)


def test_config_hash_is_stable_and_covers_every_setting() -> None:
    base = scorers.get("reference", free_text=["b", "a"])
    assert base.config_hash == scorers.get("reference", free_text=("a", "b")).config_hash
    assert (
        base.config_hash
        == scorers.get("reference", embedder="MiniLM", free_text=["a", "b"]).config_hash
    )
    others = [
        scorers.get("reference", strictness=0.6, free_text=["a", "b"]),
        scorers.get("reference", embedder=None, free_text=["a", "b"]),
        scorers.get("reference", judge=JUDGE_MODEL, free_text=["a", "b"]),
        scorers.get("reference", free_text=["a"]),
        scorers.get("reference", free_text=["a", "b"], partial_numeric=["mw"]),
        scorers.get("reference", free_text=["a", "b"], match_bar=0.7),
    ]
    hashes = {base.config_hash} | {o.config_hash for o in others}
    assert len(hashes) == len(others) + 1
    assert base.settings["version"] == base.version == 1


# -- the scorer as a run's metric -------------------------------------------------------------------

ITEMS = [
    item({"name": "Acme", "founded": 1999, "tags": ["tools", "hardware"]}, "a"),
    item({"name": "Globex", "founded": 1989, "tags": ["energy"]}, "b"),
    item({"name": "Initech", "founded": 1999, "tags": ["software", "tps"]}, "c"),
]


def test_the_metric_returns_quality_feedback_and_named_scores() -> None:
    metric = scorers.scorer_metric("reference", {"embedder": "none"})
    one = ITEMS[0]
    result = metric(one.input, '{"name": "ACME", "founded": 2001, "tags": ["tools"]}', one.expected)
    assert result.score == pytest.approx(2 * 2 / (4 + 3))
    assert set(result.scores) == {"quality", "completeness", "correctness"}
    assert result.scores["completeness"] == 0.5
    assert "founded: gave 2001; the reference has 1999" in result.feedback
    assert 'tags[1]: "hardware"' in result.feedback
    raw = scorers.as_metric(exact_only())(one.input, one.expected["record"], one.expected)
    assert validate_return(raw).score == 1.0


def test_the_metric_passes_the_contract_self_test() -> None:
    metric = scorers.scorer_metric("reference", {"embedder": "none"})
    report = check_metric(metric, ITEMS)
    assert report.ok, report.summary()
    assert metric.answer_key(ITEMS[1]) == ITEMS[1].expected["record"]


def test_the_metric_hash_follows_the_scoring_config() -> None:
    one = scorers.scorer_metric("reference", {"embedder": "none"}).source_hash
    same = scorers.scorer_metric("reference", {"embedder": None}).source_hash
    stricter = scorers.scorer_metric("reference", {"embedder": "none", "strictness": 0.9})
    assert one == same != stricter.source_hash


def test_the_scorer_self_test() -> None:
    assert scorers.selftest(exact_only(), ITEMS).ok
    broken = [*ITEMS, Item("bad", {}, {"record": "[1, 2]"})]
    report = scorers.selftest(exact_only(), broken)
    assert [f.check for f in report.failures] == ["scorer error"]
    assert "item 'bad'" in report.failures[0].message


def test_feedback_says_what_is_wrong_and_why(minilm: Any) -> None:
    scorer = ReferenceScorer(embedder=minilm)
    result = scorer.score(
        item({"director": "Jon Favreau", "studio": "Marvel Studios", "year": 2008}),
        {"director": "Jon Favreau", "studio": "Paramount", "runtime": 126},
    )
    text = result.feedback
    assert text.startswith("quality 0.33: completeness 0.33 (1 of 3 reference values found)")
    assert 'studio: gave "Paramount"; the reference has "Marvel Studios" (similarity' in text
    assert "needs 0.75" in text
    assert "- year: the reference has 2008" in text
    assert "- runtime: 126" in text
