"""A project scored by `reference`, end to end through the CLI on the loopback server:
verify → run → edit a reference → show says stale → verify → rescore (no task call) → show clean;
the embeddings of a run are kept in .skynet and a second run embeds nothing new."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from projects import write_skynet_toml

from skynet.cli import main
from skynet.reference.verified import MARK_FILE
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import is_reflection, reply

pytestmark = pytest.mark.slow

FILMS = {
    "Iron Man": {"director": "Jon Favreau", "year": 2008, "cast": ["Robert Downey Jr.", "Gwyneth Paltrow"]},
    "Heat": {"director": "Michael Mann", "year": 1995, "cast": ["Al Pacino", "Robert De Niro"]},
    "Alien": {"director": "Ridley Scott", "year": 1979, "cast": ["Sigourney Weaver", "Tom Skerritt"]},
    "Up": {"director": "Pete Docter", "year": 2009, "cast": ["Ed Asner", "Jordan Nagai"]},
    "Jaws": {"director": "Steven Spielberg", "year": 1975, "cast": ["Roy Scheider", "Robert Shaw"]},
    "Rocky": {"director": "John G. Avildsen", "year": 1976, "cast": ["Sylvester Stallone", "Talia Shire"]},
}  # fmt: skip
# The task model's records: right but for a spelling ("R. Downey Jr.", "Steven Spielberg" written
# "S. Spielberg") and one wrong year, so exact matching and similarity grade them differently.
ANSWERS = {
    **FILMS,
    "Iron Man": {**FILMS["Iron Man"], "cast": ["Gwyneth Paltrow", "R. Downey Jr."]},
    "Jaws": {**FILMS["Jaws"], "director": "S. Spielberg"},
    "Up": {**FILMS["Up"], "year": 2010},
}


def film_model(body):
    user = body["messages"][-1]["content"]
    if is_reflection(user):
        return reply("```\nDescribe the film as one JSON object: director, year, cast.\n```")
    title = user.removeprefix("Film: ").strip()
    return reply(json.dumps(ANSWERS.get(title, {})))


def make_reference_project(root: Path, url: str, *, embedder: str = "none") -> Path:
    root.mkdir(parents=True)
    with open(root / "data.jsonl", "w") as f:
        for i, (title, record) in enumerate(FILMS.items()):
            split = "val" if i % 2 else "train"
            f.write(json.dumps({"id": f"f{i}", "title": title, "record": record, "split": split}))
            f.write("\n")
    (root / "prompt.md").write_text(
        "=== instructions ===\nDescribe the film as JSON.\n=== user ===\nFilm: {title}\n"
    )
    write_skynet_toml(
        root,
        inputs=["title"],
        outputs=["record"],
        metric={"name": "reference", "options": {"embedder": embedder}},
        engine={"name": "gepa", "concurrency": 1},
        budget=16,
        url=url,
        timeout_s=10,
    )
    return root


def edit_reference(project: Path, item_id: str, **fields) -> None:
    path = project / "data.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if row["id"] == item_id:
            row["record"] = {**row["record"], **fields}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def scores(project: Path, metric_hash: str | None = None) -> dict[str, float | None]:
    with RunStore(runs_db_path(project), readonly=True) as store:
        runs = store.list_runs()
        if metric_hash is None:
            first = runs[-1]  # the first recorded; a rescore notes the metric it scored by
            metric_hash = first.notes.get("metric_hash") or first.metric_hash
        best: dict[str, float | None] = {}
        for run in runs:
            for e in store.evaluations(run.id):
                if e.metric_hash != metric_hash:
                    continue
                best.setdefault(e.item_id, e.score)  # the highest score, None for errors only
                if e.score is not None and (best[e.item_id] is None or e.score > best[e.item_id]):
                    best[e.item_id] = e.score
    return best


def test_verify_run_edit_stale_verify_rescore_clean(tmp_path, scripted_server, capsys):
    scripted_server.responder = film_model
    project = make_reference_project(tmp_path / "p", scripted_server.url)
    cli = ["-C", str(project)]

    # No mark: refused before any model call, one line naming the fix.
    assert main([*cli, "run"]) == 2
    err = capsys.readouterr().err
    assert "skynet reference verify" in err and MARK_FILE in err
    assert len(err.strip().splitlines()) == 1
    assert scripted_server.request_count == 0
    assert main([*cli, "reference", "show"]) == 2
    assert "not verified" in capsys.readouterr().out

    assert main([*cli, "reference", "verify"]) == 0
    out = capsys.readouterr().out
    assert "6 item(s) from data.jsonl" in out and MARK_FILE in out
    mark = json.loads((project / MARK_FILE).read_text())
    assert mark["items"] == 6 and len(mark["hash"]) == 64
    assert main([*cli, "reference", "show"]) == 0
    assert "verified" in capsys.readouterr().out

    assert main([*cli, "run"]) == 0
    before = scores(project)
    # Without an embedder "R. Downey Jr." is a mismatch; the wrong year too.
    assert before["f0"] < 1.0 and before["f3"] < 1.0 and before["f1"] == 1.0
    capsys.readouterr()
    assert main([*cli, "show"]) == 0
    assert "Stale" not in capsys.readouterr().out

    # The reference of f1 (Heat) changes: the mark no longer holds, results are stale.
    edit_reference(project, "f1", director="M. Mann")
    assert main([*cli, "show"]) == 0
    out = capsys.readouterr().out
    with RunStore(runs_db_path(project), readonly=True) as store:
        graded = sum(len(store.evaluations(run.id)) for run in store.list_runs())
    assert graded > 0
    assert (
        f"Stale: {graded} result(s) were graded under an older reference or scoring config" in out
    )
    assert "`skynet reference verify` (if a reference was edited), then `skynet rescore`" in out
    assert main([*cli, "rescore"]) == 2
    err = capsys.readouterr().err
    assert "the reference set changed since it was verified" in err
    assert "skynet reference verify" in err
    assert main([*cli, "reference", "show"]) == 2
    assert "changed since it was verified" in capsys.readouterr().out

    assert main([*cli, "reference", "verify"]) == 0
    requests = scripted_server.request_count
    capsys.readouterr()
    assert main([*cli, "rescore"]) == 0
    out = capsys.readouterr().out
    assert "(no task-model call)" in out
    assert scripted_server.request_count == requests  # no task request during the rescore
    after = scores(project)
    assert after["f1"] < 1.0  # graded against the edited reference
    assert {k: v for k, v in after.items() if k != "f1"} == {
        k: v for k, v in before.items() if k != "f1"
    }
    assert main([*cli, "show"]) == 0
    assert "Stale" not in capsys.readouterr().out

    # Another scoring config (strictness) is stale too, until rescored.
    toml = (project / "skynet.toml").read_text()
    (project / "skynet.toml").write_text(
        toml.replace('{embedder = "none"}', '{embedder = "none", strictness = "strict"}')
    )
    assert main([*cli, "show"]) == 0
    assert "older reference or scoring config" in capsys.readouterr().out
    assert main([*cli, "rescore"]) == 0
    assert main([*cli, "show"]) == 0
    assert "Stale" not in capsys.readouterr().out


def embedding_rows(project: Path) -> tuple[int, float]:
    with sqlite3.connect(project / ".skynet" / "embeddings.db") as db:
        count, newest = db.execute("SELECT COUNT(*), MAX(created) FROM embeddings").fetchone()
    return count, newest


def test_the_default_embedder_keeps_its_vectors_in_the_project(tmp_path, scripted_server, capsys):
    scripted_server.responder = film_model
    project = make_reference_project(tmp_path / "p", scripted_server.url, embedder="default")
    cli = ["-C", str(project)]
    assert main([*cli, "reference", "verify"]) == 0
    assert main([*cli, "run"]) == 0
    got = scores(project)
    # With the embedder, "R. Downey Jr." counts as Robert Downey Jr.: only the year is wrong.
    assert got["f0"] == 1.0 and got["f3"] < 1.0
    count, newest = embedding_rows(project)
    assert count > 0
    assert main([*cli, "run"]) == 0  # a second run: every text is already embedded
    assert embedding_rows(project) == (count, newest)
