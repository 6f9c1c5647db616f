"""A scorer package from Python: `skynet.optimize(metric="judge", sections={"judge": {...}})`
builds the judge from the working folder (its validation record) and its section, as
`metric = "judge"` in skynet.toml does; without the section or the record it refuses in one
line, as the CLI does."""

from __future__ import annotations

import pytest
from projects import BETTER, task_responder
from test_judge import judge_responder
from test_python_api import TRAIN, VAL, _tables

import skynet
from skynet.config import config_from_tables
from skynet.judge.project import project_judge
from skynet.scorers import judge_validate

JUDGE = {
    "instructions": "Does the output name the same capital city as the reference?",
    "validation": "judge-validation.json",
    "thresholds": {"min_n": 10},
}


def responder(body):
    system = body["messages"][0]["content"] if body["messages"] else ""
    if "GRADE: <grade>" in system:  # a judge call
        return judge_responder(body)
    return task_responder(body)


@pytest.mark.slow
def test_the_judge_scores_a_python_run_from_its_section_and_record(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = responder
    monkeypatch.chdir(tmp_path)
    tables = _tables(scripted_server.url)
    call = {
        "metric": "judge",
        "train": TRAIN,
        "val": VAL,
        "user": "Country: {country}",
        **tables,
    }
    with pytest.raises(skynet.ConfigError, match=r'metric = "judge" needs a \[judge\] section'):
        skynet.optimize("Tell the user about the country.", **call)
    with pytest.raises(skynet.SkynetError, match="judge-validation.json: no judge validation"):
        skynet.optimize("Tell the user about the country.", sections={"judge": JUDGE}, **call)

    # The record a `skynet judge validate` writes, made for exactly this section's judge.
    config = config_from_tables(
        {
            "metric": {"name": "judge"},
            "judge": JUDGE,
            "models": tables["models"],
            "data": {"inputs": ["country"], "outputs": ["capital"]},
        },
        tmp_path,
        source="test",
        rows_given=True,
    )
    judge, _, path = project_judge(config)
    judge_validate(judge, [(True, True), (False, False)] * 20).save(path)
    result = skynet.optimize("Tell the user about the country.", sections={"judge": JUDGE}, **call)
    assert result.best == BETTER and result.best_score == 1.0
    judged = [
        body
        for body in scripted_server.requests
        if "GRADE: <grade>" in (body["messages"][0]["content"] if body["messages"] else "")
    ]
    assert judged  # the judge scored the run, through the run's models
    assert result.report().count("metric") >= 1
    with pytest.raises(skynet.ConfigError, match=r"sections= holds \[models\]; give it as models="):
        skynet.optimize("Say.", sections={"models": {}}, **{**call, "models": None})
