"""`skynet eval --candidate A --against B [--require-better]`: two candidates scored on one split
and compared paired by item (skynet.gain), a gate a CI pipeline can exit on; and `skynet show
RUN_A RUN_B`'s paired comparison of two runs' bests on their shared test items.

The eval tests run the real command on the loopback server (the scripted capitals model of
tests/projects.py: right only when the instruction asks for the capital); the show tests read a
run store built directly."""

from __future__ import annotations

from projects import BETTER, make_project, task_responder

from skynet import Result
from skynet.cli import main
from skynet.runs import RunStore, runs_db_path

RIGHT = f"=== instructions ===\n{BETTER}\n=== user ===\nCountry: {{country}}\n"


def one_line(text: str) -> str:
    lines = [x for x in text.splitlines() if x.strip()]
    assert len(lines) == 1, text
    return lines[0]


def test_a_right_candidate_against_the_wrong_seed_is_better_and_passes_the_gate(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    (project / "right.md").write_text(RIGHT)

    argv = ["eval", str(project), "--candidate", "right.md", "--against", "seed", "--split", "val"]
    assert main([*argv, "--require-better"]) == 0
    out = capsys.readouterr().out.splitlines()

    with RunStore(runs_db_path(project)) as store:
        (run,) = store.list_runs()  # both sides in one evaluation-only run
        rows = store.evaluations(run.id)
    assert out[0] == (
        f"right.md on val: mean score 1.000 over 8 item(s) · recorded in a new evaluation-only "
        f"run {run.id}"
    )
    assert out[1] == (
        f"seed on val: mean score 0.000 over 8 item(s) · recorded in the evaluation-only run "
        f"{run.id}"
    )
    # 8 of 8 items fixed, none broken: McNemar's exact p = 2 / 2**8.
    assert out[2] == (
        "right.md minus seed on val: +1.000 [+1.000, +1.000] on 8 val items, p = 0.008: better"
    )
    assert (
        out[3] == "  on these items: right.md 1.000, seed 0.000 (McNemar's exact test; t interval)"
    )
    assert len(rows) == 16 and {r.split for r in rows} == {"val"}
    assert sorted(run.notes["evaluated"].values()) == ["right.md", "seed"]


def test_equal_candidates_are_no_difference_and_the_gate_exits_1_with_one_line(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    (project / "same.md").write_text((project / "prompt.md").read_text())
    argv = ["eval", str(project), "--candidate", "same.md", "--against", "seed", "--split", "val"]
    said = (
        "+0.000 [+0.000, +0.000] on 8 val items, p = 1.000: no difference detected "
        "(this split detects gains of 0.70 or more at 80% power)"
    )

    # Without the gate, the comparison is printed and the command succeeds.
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert f"same.md minus seed on val: {said}" in captured.out.splitlines()
    assert "gate" not in captured.err

    assert main([*argv, "--require-better"]) == 1
    captured = capsys.readouterr()
    assert one_line(captured.err) == f"gate: same.md is not better than seed on val: {said}"


def test_require_better_without_against_is_refused_in_one_line(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    assert main(["eval", str(project), "--candidate", "seed", "--require-better"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("skynet: error: skynet eval --require-better")
    assert "--against seed" in line
    assert not (project / ".skynet").exists()  # refused before anything was scored or paid
    assert scripted_server.requests == []


def test_best_against_seed_takes_both_from_the_run_that_has_the_best(
    tmp_path, scripted_server, capsys
):
    """--against best: the run that holds the best anchors both sides, so the seed compared is
    that run's own seed (recorded in it), not a new evaluation-only run."""
    from skynet.project import open_project

    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    loaded = open_project(project)
    seed = dict(loaded.artifact.components)
    best = {
        name: text.replace("Tell the user about the country.", BETTER)
        for name, text in seed.items()
    }
    assert best != seed
    with RunStore(runs_db_path(project)) as store:
        run_id = store.create_run(
            config={},
            dataset_hash=loaded.dataset.hash,
            metric_hash=loaded.metric.source_hash,
            seed=0,
            engine="gepa",
            budget={},
            versions={},
        )
        store.add_candidate(run_id, "s0", seed)
        store.set_seed_candidate(run_id, "s0")
        store.add_candidate(run_id, "b1", best, parents=["s0"])
        store.set_best(run_id, "b1")
        store.set_status(run_id, "finished")

    argv = ["eval", str(project), "--candidate", "seed", "--against", "best", "--split", "val"]
    assert main([*argv, "--require-better"]) == 1
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[0].startswith("seed (s0) on val: mean score 0.000 over 8 item(s)")
    assert out[1].startswith("best (b1) on val: mean score 1.000 over 8 item(s)")
    assert all(line.endswith(f"recorded in run {run_id}") for line in out[:2])
    assert out[2].startswith("seed (s0) minus best (b1) on val: -1.000 [-1.000, -1.000] on 8")
    assert out[2].endswith(": worse")
    assert one_line(captured.err).startswith("gate: seed (s0) is not better than best (b1) on val")
    with RunStore(runs_db_path(project)) as store:
        assert [r.id for r in store.list_runs()] == [run_id]
        assert len(store.evaluations(run_id, split="val")) == 16


# --------------------------------------------------------------------------------------------
# `skynet show RUN_A RUN_B`: the two runs' bests on their shared test items.


def _run(store: RunStore, test: dict[str, float], *, data: str = "d") -> str:
    """A finished run whose best (b) was scored on these test items (seed s: 0 on each)."""
    run_id = store.create_run(
        config={},
        dataset_hash=data * 64,
        metric_hash="m1",
        seed=0,
        engine="gepa",
        budget={},
        versions={},
    )
    store.add_candidate(run_id, "s", {"prompt": "Classify.\n"})
    store.set_seed_candidate(run_id, "s")
    store.add_candidate(run_id, "b", {"prompt": f"Classify well {run_id}.\n"}, parents=["s"])
    store.set_best(run_id, "b")
    for item, score in test.items():
        for cand, value in (("s", 0.0), ("b", score)):
            store.record_evaluation(run_id, cand, "test", Result(item_id=item, score=value), "m1")
    store.set_status(run_id, "finished")
    return run_id


def test_show_two_runs_gives_the_paired_gain_of_their_bests_on_shared_test_items(tmp_path, capsys):
    with RunStore(runs_db_path(tmp_path)) as store:
        # B's best is right on the 8 items A's best got wrong; x9 and x10 are each run's own.
        a = _run(store, {f"x{i}": 0.0 for i in range(1, 9)} | {"x9": 1.0})
        b = _run(store, {f"x{i}": 1.0 for i in range(1, 9)} | {"x10": 0.0})
        unscored = _run(store, {})

    assert main(["-C", str(tmp_path), "show", a, b]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index(
        "Test gain: B's best b minus A's best b, paired on the test items both were evaluated on"
    )
    assert out[at + 1] == "  +1.000 [+1.000, +1.000] on 8 test items, p = 0.008: better"
    assert out[at + 2] == "  on these items: A 0.000, B 1.000 (McNemar's exact test; t interval)"

    # No shared test item: one line that says why and gives the command that fixes it.
    assert main(["-C", str(tmp_path), "show", a, unscored]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("Test gain")]
    assert line == (
        f"Test gain: B's best b minus A's best b: no shared test item (no test evaluation of the "
        f"best in run {unscored}); score them on one test split: skynet eval --candidate best "
        f"--split test --run {unscored}"
    )
