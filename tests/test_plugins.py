"""Plugins: an artifact kind, an engine, a scorer and a scorer package in a throwaway package,
installed with entry points in the groups "skynet.artifacts", "skynet.engines", "skynet.scorers"
and "skynet.packages", are found by name with no edit to Skynet: from skynet.toml through the CLI
(in a process of its own), and from skynet.optimize. The scorer package brings its own
skynet.toml section, its own `skynet` subcommand and its own section of the report."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from projects import BETTER, make_project, task_responder

import skynet
from skynet import registry
from skynet.cli import main

PLUGIN = '''
"""tiny_plugin: a throwaway Skynet plugin (one artifact kind, one engine, one scorer), which
imports Skynet's only through the plugin facade, skynet.plugin."""
from skynet.plugin import ConfigError, EngineOutcome, Reply, Verdict


class TinyText:
    """An artifact kind: instructions in a plain text file, sent as the system message, with
    "Country: {country}" as the user message."""

    kind = "tiny-text"
    label = "instructions"
    best_file = "best_instructions.txt"
    uses_task_model = True
    isolation = None
    unsandboxed = False

    def __init__(self, text, sign_off=""):
        self.components = {"instructions": text}
        self.sign_off = sign_off  # the kind's own setting, from [artifact.options]

    def fingerprint(self, settings, task_model):
        return repr(["tiny-text", task_model, settings.max_tokens])

    def task(self, models, settings):
        def run(candidate, input):
            messages = [
                {"role": "system", "content": candidate["instructions"] + self.sign_off},
                {"role": "user", "content": f"Country: {input['country']}"},
            ]
            return models.complete("task", messages, max_tokens=settings.max_tokens).text

        return run

    def save(self, candidate, path):
        path.write_text(candidate["instructions"] + "\\n")

    def read_candidate(self, path, *, inputs, key, missing):
        if not path.is_file():
            raise ConfigError(f"{path}: {missing}")
        return {"instructions": path.read_text().strip()}


def from_project(project_dir, config, dataset):
    path = project_dir / config.artifact.path
    if not path.is_file():
        raise ConfigError(f"{path}: no instructions file; set [artifact] path")
    options = dict(config.artifact.options)
    sign_off = options.pop("sign_off", "")
    if options:
        raise ConfigError(f"[artifact.options] {sorted(options)[0]}: tiny-text takes sign_off only")
    return TinyText(path.read_text().strip(), sign_off)


class TinyEngine:
    """Scores the seed, then one rewrite the reflection model proposes, and keeps the better."""

    name = "tiny"

    def min_metric_calls(self, *, train, val, minibatch_size):
        return 2 * val

    def choices(self, settings):
        return ("tiny: the seed and one reflection, no search",)

    def optimize(self, ctx):
        def mean(candidate):
            results = [ctx.evaluate(candidate, item) for item in ctx.val]
            return sum(r.score or 0.0 for r in results) / len(results)

        seed = dict(ctx.seed_candidate)
        asked = "You improve an instruction given to an AI assistant. Reply in ``` fences:\\n"
        reply = ctx.reflect(asked + "\\n".join(seed.values()), 0, None)
        text = reply.split("```")[1].strip() if reply.count("```") >= 2 else reply.strip()
        child = {name: text for name in seed}
        ctx.record_proposal(status="accepted", detail="tiny: one rewrite", text=text)
        scores = [mean(seed), mean(child)]
        best = child if scores[1] > scores[0] else seed
        return EngineOutcome(
            best_candidate=best,
            candidates=[seed, child],
            parents=[[None], [0]],
            val_scores=scores,
            metric_calls=2 * len(ctx.val),
        )


class TinyContains:
    """Right when the expected capital appears anywhere in the reply."""

    name = "tiny-contains"
    version = 1
    reasons = ("contains", "missing")

    def __init__(self, *, column="capital"):
        self.column = column

    def key(self, item):
        return Reply(text=str(item.expected[self.column]))

    def score(self, item, reply):
        wanted = str(item.expected[self.column]).lower()
        if wanted in reply.text.lower():
            return Verdict(True, "contains", "the reply names it")
        return Verdict(False, "missing", f"the reply should name {item.expected[self.column]}")


from pydantic import Field

from skynet.plugin import EXIT_OK, ReportSection, Section, folder_of, load_config, with_dir


class PanelSection(Section):
    """[tiny-panel]: which output column the panel checks."""

    column: str = Field(min_length=1, description='an output column, e.g. "capital"')


class TinyPanel:
    """A scorer package: [tiny-panel] column picks what TinyContains checks; `skynet
    tiny-panel show` says what it is set to; the report counts the items the best got right."""

    name = "tiny-panel"
    section = PanelSection

    def metric(self, project_dir, config, dataset, *, verified):
        from skynet.plugin import metric_of

        section = config.section("tiny-panel")
        if section is None:
            raise ConfigError(f"{project_dir / 'skynet.toml'}: add a [tiny-panel] section")
        return metric_of(TinyContains(column=section.column), options={"column": section.column})

    def add_commands(self, commands):
        p = commands.add_parser("tiny-panel", help="the tiny panel's settings")
        with_dir(p)
        p.set_defaults(func=self.show)

    def show(self, args):
        section = load_config(folder_of(args)).section("tiny-panel")
        print(f"tiny-panel checks column {section.column}")
        return EXIT_OK

    def report(self, view):
        best = dict(view.shown).get("best")
        right = [
            e.item_id for e in view.evaluations
            if e.candidate_id == best and e.split == "val" and e.score == 1.0
        ]
        return ReportSection(
            title="Tiny panel",
            header=("candidate", "val items right"),
            rows=((str(best), str(len(right))),),
            notes=(f"checked column: {view.run.config['tiny-panel']['column']}",),
        )


PANEL = TinyPanel()
'''

ENTRY_POINTS = """
[skynet.artifacts]
tiny-text = tiny_plugin:from_project

[skynet.engines]
tiny = tiny_plugin:TinyEngine
broken = tiny_plugin_missing:Nothing

[skynet.scorers]
tiny-contains = tiny_plugin:TinyContains

[skynet.packages]
tiny-panel = tiny_plugin:PANEL
"""


@pytest.fixture
def installed(tmp_path, monkeypatch) -> Path:
    """The plugin as pip installs a distribution: its module and a .dist-info folder (METADATA,
    entry_points.txt) in a site directory on sys.path."""
    site = tmp_path / "site"
    (site / "tiny_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "tiny_plugin.py").write_text(PLUGIN)
    (site / "tiny_plugin-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tiny-plugin\nVersion: 0.1\n"
    )
    (site / "tiny_plugin-0.1.dist-info" / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    return site


def _plugin_project(root: Path, url: str) -> Path:
    project = make_project(root, url)
    toml = (project / "skynet.toml").read_text()
    toml = toml.replace('name = "gepa"', 'name = "tiny"')
    (project / "skynet.toml").write_text('metric = "tiny-contains"\n' + toml)
    (project / "metric.py").unlink()  # the scorer is the metric
    return project


@pytest.mark.slow
def test_a_plugin_engine_and_scorer_run_from_skynet_toml_in_a_process_of_their_own(
    installed, tmp_path, scripted_server
):
    scripted_server.responder = task_responder
    project = _plugin_project(tmp_path / "p", scripted_server.url)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")]),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    done = subprocess.run(
        [sys.executable, "-m", "skynet.cli", "-C", str(project), "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "tiny: the seed and one reflection, no search" in done.stderr
    assert BETTER in done.stdout  # the rewrite won, scored by the plugin's scorer
    assert "+1.000" in done.stdout


@pytest.mark.slow
def test_a_plugin_is_found_from_python_and_listed_among_the_known(
    installed, tmp_path, scripted_server, monkeypatch
):
    from test_python_api import TRAIN, VAL, _tables

    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    assert "tiny" in registry.names("engine") and "tiny-contains" in registry.names("scorer")
    tables = _tables(scripted_server.url)
    tables["engine"] = {"name": "tiny"}
    result = skynet.optimize(
        "Tell the user about the country.",
        metric={"name": "tiny-contains", "options": {"column": "capital"}},
        train=TRAIN,
        val=VAL,
        user="Country: {country}",
        **tables,
    )
    assert result.best == BETTER and result.best_score == 1.0


@pytest.mark.slow
def test_a_plugin_artifact_kind_runs_optimizes_and_evaluates_with_no_edit_to_skynet(
    installed, tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    (project / "prompt.md").unlink()
    (project / "instructions.txt").write_text("Tell the user about the country.\n")
    toml = (project / "skynet.toml").read_text()
    (project / "skynet.toml").write_text(
        toml + '\n[artifact]\nkind = "tiny-text"\npath = "instructions.txt"\n'
    )
    assert "tiny-text" in registry.names("artifact")
    assert main(["-C", str(project), "check"]) == 0
    assert "instructions ok: instructions" in capsys.readouterr().out
    assert main(["-C", str(project), "run"]) == 0
    out = capsys.readouterr().out
    assert "+1.000" in out
    (run_dir,) = [p for p in (project / ".skynet" / "runs").iterdir() if p.is_dir()]
    best = run_dir / "best_instructions.txt"
    assert best.read_text().strip() == BETTER  # saved by the plugin, in its own format
    # The kind reads its own files back: `skynet eval --candidate FILE`.
    assert main(["-C", str(project), "eval", "--candidate", str(best), "--split", "val"]) == 0
    assert "1.000" in capsys.readouterr().out
    assert main(["-C", str(project), "check", "--set", "artifact.kind=tiny-txt"]) == 2
    line = capsys.readouterr().err.strip()
    assert "no artifact kind has this name; known:" in line and '"tiny-text"' in line, line


@pytest.mark.slow
def test_a_plugin_artifact_kind_with_its_own_settings_runs_from_python(
    installed, tmp_path, scripted_server, monkeypatch
):
    from test_python_api import TRAIN, VAL, _tables

    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    seed = tmp_path / "instructions.txt"
    seed.write_text("Tell the user about the country.\n")
    tables = _tables(scripted_server.url)
    tables["artifact"] = {"kind": "tiny-text", "options": {"sign_off": " Be brief."}}
    result = skynet.optimize(
        seed,
        metric={"name": "tiny-contains", "options": {"column": "capital"}},
        train=TRAIN,
        val=VAL,
        inputs=["country"],
        **tables,
    )
    assert result.best == {"instructions": BETTER} and result.best_score == 1.0
    systems = [
        m["content"]
        for body in scripted_server.requests
        for m in body["messages"]
        if m["role"] == "system" and "Country: " in body["messages"][-1]["content"]
    ]
    assert systems and all(text.endswith(" Be brief.") for text in systems)  # the kind's setting
    # Its own settings are the kind's to check; a built-in kind takes none.
    tables["artifact"] = {"kind": "tiny-text", "options": {"tone": "dry"}}
    with pytest.raises(skynet.ConfigError, match="tiny-text takes sign_off only"):
        skynet.optimize(
            seed, metric="tiny-contains", train=TRAIN, val=VAL, inputs=["country"], **tables
        )
    tables["artifact"] = {"kind": "prompt", "options": {"tone": "dry"}}
    with pytest.raises(skynet.ConfigError, match=r"kind 'prompt' takes none"):
        skynet.optimize(
            "Say.", metric="tiny-contains", train=TRAIN, val=VAL, inputs=["country"], **tables
        )
    tables["artifact"] = {"kind": "tiny-txt"}
    with pytest.raises(skynet.ConfigError, match="unknown artifact 'tiny-txt'; known artifacts"):
        skynet.optimize(
            seed, metric="tiny-contains", train=TRAIN, val=VAL, inputs=["country"], **tables
        )


def test_unknown_and_broken_plugins_are_one_line(installed, tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = _plugin_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "check", "--set", "engine.name=tinny"]) == 2
    line = capsys.readouterr().err.strip()
    assert (
        "no engine has this name; known: auto, dspy-gepa, gepa, gepa-async, broken, tiny" in line
    ), line
    assert main(["-C", str(project), "run", "--engine", "broken"]) == 2
    line = capsys.readouterr().err.strip()
    assert line.count("\n") == 0 and "the engine plugin 'broken' (package tiny-plugin)" in line
    assert "ModuleNotFoundError" in line and "fix or reinstall that package" in line
    assert scripted_server.request_count == 0


def test_without_the_plugin_its_names_are_unknown(tmp_path):
    assert "tiny" not in registry.names("engine")
    with pytest.raises(skynet.ConfigError, match="unknown scorer 'tiny-contains'"):
        registry.load("scorer", "tiny-contains")


@pytest.mark.slow
def test_a_plugin_scorer_package_brings_its_section_command_and_report(
    installed, tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    toml = (project / "skynet.toml").read_text()
    (project / "skynet.toml").write_text(
        'metric = "tiny-panel"\n' + toml + '\n[tiny-panel]\ncolumn = "capital"\n'
    )
    (project / "metric.py").unlink()  # the package builds the metric
    assert main(["-C", str(project), "tiny-panel"]) == 0  # its own subcommand
    assert capsys.readouterr().out == "tiny-panel checks column capital\n"
    assert main(["-C", str(project), "check"]) == 0
    assert "scorer 'tiny-contains' self-test passed" in capsys.readouterr().out
    assert main(["-C", str(project), "run"]) == 0
    capsys.readouterr()
    assert main(["-C", str(project), "show"]) == 0
    shown = capsys.readouterr().out
    assert "Tiny panel" in shown and "checked column: capital" in shown
    best = next(text for text in shown.splitlines() if text.strip().startswith("best"))
    best_id = best.split()[1]
    # The package's table: the best got all 8 val items right.
    assert re.search(rf"^\s*{best_id}\s+8\s*$", shown, re.MULTILINE), shown
    # Its section is validated as skynet.toml's own: a misspelt key names the nearest one.
    (project / "skynet.toml").write_text((project / "skynet.toml").read_text() + "colum = 1\n")
    assert main(["-C", str(project), "check"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown key 'tiny-panel.colum'; did you mean 'tiny-panel.column'?" in err, err


def test_the_plugin_facade_resolves_every_name_it_lists():
    """skynet.plugin is what plugins import: every name it lists is there (a module that moves
    breaks this test, not the plugins), and importing it loads none of them."""
    import subprocess
    import sys

    import skynet.plugin as facade

    assert sorted(facade.__all__) == sorted(facade._HOMES)
    for name in facade.__all__:
        assert getattr(facade, name) is not None, name
    lazy = subprocess.run(
        [sys.executable, "-c", "import sys, skynet.plugin; print('skynet.scorers' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert lazy.stdout.strip() == "False"


def test_artifact_options_on_a_built_in_kind_is_one_line_naming_where_it_was_set(tmp_path, capsys):
    project = make_project(tmp_path / "p", "http://127.0.0.1:9/v1")
    assert main(["-C", str(project), "check", "--set", "artifact.options.tone=dry"]) == 2
    line = capsys.readouterr().err.strip()
    assert line == (
        "skynet: error: --set artifact.options.tone=dry: [artifact.options] is for a plugin "
        "kind's own settings; kind 'prompt' takes none: set its keys in [artifact] itself"
    )
    with open(project / "skynet.toml", "a") as f:
        f.write('\n[artifact.options]\ntone = "dry"\n')
    assert main(["-C", str(project), "check"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .startswith(
            f"skynet: error: {project / 'skynet.toml'}: [artifact.options] is for a plugin kind's"
        )
    )
