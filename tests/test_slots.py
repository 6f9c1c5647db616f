"""Issue 30: an endpoint takes as many calls at once as the run makes ([engine] concurrency)
unless its max_concurrent says fewer (the embedded model stays at one); a limit below the
concurrency is said once, in the plan printed at the start."""

from __future__ import annotations

from projects import make_project

from skynet.config import load_config
from skynet.plan import engine_plan
from skynet.project import open_project

MODEL = "openai/skynet-test"


def _project(tmp_path, *, concurrency, max_concurrent=None, engine="gepa"):
    project = make_project(tmp_path / "p", "http://127.0.0.1:9/v1")
    toml = (project / "skynet.toml").read_text()
    toml = toml.replace('[engine]\nname = "gepa"', f'[engine]\nname = "{engine}"')
    toml = toml.replace("concurrency = 2", f"concurrency = {concurrency}")
    if max_concurrent is not None:
        toml = toml.replace("timeout_s = 10", f"timeout_s = 10\nmax_concurrent = {max_concurrent}")
    (project / "skynet.toml").write_text(toml)
    return project


def test_an_endpoint_follows_the_runs_concurrency_unless_it_says_fewer(tmp_path):
    project = _project(tmp_path / "a", concurrency=16)
    config = load_config(project)
    assert config.engine.concurrency == 16
    models = config.models_config()
    assert models.settings_for(MODEL).max_concurrent == 16  # was 8: half the run's slots
    assert models.settings_for("openai/declared-nowhere").max_concurrent == 16
    assert models.settings_for("local/smollm2").max_concurrent == 1  # one llama.cpp context
    assert "takes" not in engine_plan(open_project(project))

    capped = _project(tmp_path / "b", concurrency=16, max_concurrent=4)
    assert load_config(capped).models_config().settings_for(MODEL).max_concurrent == 4
    plan = engine_plan(open_project(capped))
    said = (
        f"{MODEL} takes 4 call(s) at once (its [models.endpoints] max_concurrent), below "
        "[engine] concurrency 16"
    )
    assert plan.count(said) == 1, plan


def test_under_auto_the_limit_is_said_once(tmp_path):
    plan = engine_plan(
        open_project(_project(tmp_path, concurrency=16, max_concurrent=4, engine="auto"))
    )
    assert plan.count(f"{MODEL} takes 4 call(s) at once") == 1, plan


def test_the_self_test_checks_items_side_by_side_and_reports_them_in_order():
    """Items are self-tested on several threads (issue 30: 1,000 items' 5,000 metric calls
    before the first model call); the report is the same as one after another: failures in
    item order, each item's calls counted."""
    import threading

    from skynet.contract import Metric, check_metric
    from skynet.data import Item

    threads = set()

    def score(input, output, expected=None):
        threads.add(threading.get_ident())
        if input["n"] % 7 == 3:  # these items' metric marks everything correct
            return 1.0, {"feedback": "fine"}
        right = output == expected["answer"]
        return float(right), {"feedback": "right" if right else f"say {expected['answer']}"}

    items = [Item(id=f"i{n:03d}", input={"n": n}, expected={"answer": str(n)}) for n in range(60)]
    report = check_metric(Metric(score, name="score"), items)
    failed = [f.item_id for f in report.failures]
    assert failed == [f"i{n:03d}" for n in range(60) if n % 7 == 3]  # in item order
    assert {f.check for f in report.failures} == {"null control"}
    assert report.metric_calls == 60 * 5  # the key, the empty output, three others' keys
    assert len(threads) > 1
