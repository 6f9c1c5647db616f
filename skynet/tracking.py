"""Runs logged to MLflow: `skynet export mlflow RUN` after the fact, `[tracking] mlflow = URI`
as the run goes.

One MLflow run per Skynet run, found again by its tag `skynet.run_id`: exporting a run twice, or
exporting a run that was logged live, updates the same MLflow run. What is logged:

- params: the recorded config, flattened (`engine.name`, `budget.max_metric_calls`), each value
  cut to MLflow's length limit;
- tags: the Skynet run's id, status, engine, dataset and metric hashes;
- metrics against metric calls used (the step): `val_score` per candidate when its val score
  became known, `val/<objective>` for named scores, `best_val_score` (the report's curve),
  `baseline_val_score`, `best_test_score` when known, and by role `cost_usd/<role>` (left out
  when a call had no known price: an unmeasured cost is never 0), `calls/<role>`, tokens;
- the gain (skynet.gain, best minus seed on the test items, paired): metrics `gain_test`,
  `gain_test_low`, `gain_test_high`, `gain_test_p_value`, and `gain_val` (the val figure that
  chose the best); params `gain_verdict`, `gain_n`, `gain_method` (written once, as MLflow
  params are) and the tag `skynet.gain` (the gain as it stands, in one line);
- artifacts: the best candidate (`best/<component>.txt`), `report.txt`, `report.html` and the
  recorded `config.json`.

Live logging never breaks a run: every MLflow call is made on one background thread; the first
failure prints one warning line and turns tracking off for the rest of the run, whose records
are untouched (`skynet export mlflow RUN` logs it later). mlflow is imported only here, and only
when tracking is used: it is an optional extra, and slow to import.
"""

from __future__ import annotations

import json
import os
import posixpath
import queue
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skynet.errors import TrackingError

if TYPE_CHECKING:
    from skynet.config import Config
    from skynet.runs import RunStore
    from skynet.runs.report import RunSummary
    from skynet.runs.store import RunRow

__all__ = [
    "INSTALL",
    "RUN_TAG",
    "ExportResult",
    "MlflowTracker",
    "TrackingError",
    "export_run",
    "flatten_config",
    "tracking_uri",
]

RUN_TAG = "skynet.run_id"
INSTALL = "pip install 'skynet-optimizer[mlflow]'"
# MLflow's limits (mlflow.utils.validation), kept here so the module loads without mlflow.
_MAX_PARAM_CHARS = 6000
_MAX_TAG_CHARS = 8000
_MAX_KEY_CHARS = 250
_PARAMS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000
_PROBE_TIMEOUT_S = 5.0
_END_TIMEOUT_S = 30.0  # the longest the end of a live run waits for MLflow
# How a Skynet run's status reads in MLflow.
_STATUS = {"finished": "FINISHED", "stopped": "KILLED", "aborted": "FAILED", "failed": "FAILED"}
_BAD_KEY_CHARS = re.compile(r"[^/\w.\- ]")


class _Unreachable(TrackingError):
    """Nothing (or no MLflow) answers at the URI."""


def tracking_uri(given: str | None, configured: str = "") -> str | None:
    """The MLflow tracking URI: the flag, else `[tracking] mlflow`, else MLFLOW_TRACKING_URI."""
    return given or configured or os.environ.get("MLFLOW_TRACKING_URI") or None


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A recorded config as MLflow params: dotted keys (skynet.config.flat_keys), each value as
    text (strings as they are, anything else as JSON), cut to MLflow's limit. An empty table is
    one param, "{}", so that it shows."""
    from skynet.config import flat_keys

    return {
        _key(key): (
            value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        )[:_MAX_PARAM_CHARS]
        for key, value in flat_keys(config, prefix).items()
    }


def _key(name: str) -> str:
    """A param or metric name MLflow accepts: other characters as "_", no path tricks."""
    key = _BAD_KEY_CHARS.sub("_", name)[:_MAX_KEY_CHARS]
    if posixpath.normpath(key) != key or key.startswith("/"):
        key = key.replace("/", "_")
    return key or "_"


def _file_name(name: str) -> str:
    return re.sub(r"[^\w.\-]", "_", name).strip(".") or "component"


def _millis(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        return None


def _reason(exc: BaseException) -> str:
    """One short line for what went wrong (MLflow's own messages quote whole tracebacks)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "Connection refused" in text or "NewConnectionError" in text:
        return "cannot connect: nothing answers there"
    return text if len(text) <= 200 else text[:199] + "…"


# MLflow's own limit on an experiment's name (mlflow.utils.validation).
_MAX_EXPERIMENT_NAME = 500


def _refused(uri: str, experiment: str) -> str:
    """Why MLflow would refuse this URI or experiment name, said before any call ("" if not)."""
    if len(experiment) > _MAX_EXPERIMENT_NAME:
        return (
            f"the experiment name is {len(experiment)} characters, MLflow takes at most "
            f"{_MAX_EXPERIMENT_NAME}: give a shorter one (--experiment, or [tracking] experiment "
            "in skynet.toml; the default is the project folder's name)"
        )
    if urlsplit(uri).scheme in ("", "file") and not _file_store_allowed():
        return (
            f"this MLflow writes no folder store ({uri}) unless MLFLOW_ALLOW_FILE_STORE=true is "
            "set (MLflow keeps that store in maintenance mode): give a database instead "
            "(--tracking-uri sqlite:///mlflow.db), or set that variable"
        )
    return ""


def _file_store_allowed() -> bool:
    """Whether the installed MLflow writes a folder store (the MLflows that refuse one unless
    asked have MLFLOW_ALLOW_FILE_STORE; older ones always write it)."""
    try:
        from mlflow import environment_variables
    except ImportError:
        return True  # no mlflow: the export says so itself
    allow = getattr(environment_variables, "MLFLOW_ALLOW_FILE_STORE", None)
    return allow is None or bool(allow.get())


def _probe(uri: str) -> None:
    """A quick answer from an http(s) server, before MLflow's own client retries for minutes."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return  # a local store (a folder, sqlite) or a provider's scheme: MLflow's to check
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=_PROBE_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        pass  # it answers (some servers have no /health): MLflow's calls will tell
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Unreachable(f"MLflow at {uri}: {_reason(reason)}") from None


def _series(summary: RunSummary) -> dict[str, list[tuple[int, float]]]:
    """The metrics with one point per candidate, at the metric calls used when its val score
    became known (CandidateSummary.val_metric_calls, the report curve's x)."""
    from skynet.runs.report import known_in_order

    series: dict[str, list[tuple[int, float]]] = {
        "val_score": [],
        "best_val_score": list(summary.curve),
    }
    for candidate in known_in_order(summary.candidates):
        assert candidate.val_score is not None and candidate.val_metric_calls is not None
        step = candidate.val_metric_calls
        series["val_score"].append((step, candidate.val_score))
        for name, value in sorted(candidate.objectives.items()):
            series.setdefault(_key(f"val/{name}"), []).append((step, float(value)))
    return series


def _scalars(summary: RunSummary) -> dict[str, float]:
    """The run's figures as they stand now, logged at the run's last step."""
    found: dict[str, float] = {"metric_calls": float(summary.metric_calls)}
    found["errors"] = float(summary.errors)
    seed, best = summary.seed, summary.best  # best_val_score is a series: _series()
    if seed is not None and seed.val_score is not None:
        found["baseline_val_score"] = seed.val_score
    if seed is not None and seed.test_score is not None:
        found["baseline_test_score"] = seed.test_score
    if best is not None and best.test_score is not None:
        found["best_test_score"] = best.test_score
    gain = summary.gain
    if gain is not None:
        for key, value in (
            ("gain_test", gain.estimate),
            ("gain_test_low", gain.low),
            ("gain_test_high", gain.high),
            ("gain_test_p_value", gain.p_value),
        ):
            if value is not None:
                found[key] = float(value)
    val = summary.paired.get("val")
    if val is not None and val.change is not None:
        found["gain_val"] = float(val.change)  # the figure that chose the best: beside, not it
    for role, totals in sorted(summary.cost.items()):
        role_key = _key(role)
        found[f"calls/{role_key}"] = float(totals.calls)
        found[f"input_tokens/{role_key}"] = float(totals.input_tokens)
        found[f"output_tokens/{role_key}"] = float(totals.output_tokens)
        if totals.unpriced_calls:
            found[f"unpriced_calls/{role_key}"] = float(totals.unpriced_calls)
        else:
            found[f"cost_usd/{role_key}"] = float(totals.cost_usd)
    if summary.wall_seconds is not None:
        found["wall_seconds"] = float(summary.wall_seconds)
    return found


def _gain_params(summary: RunSummary) -> dict[str, str]:
    """The gain's verdict, item count and method (skynet.gain), when the run has a gain."""
    gain = summary.gain
    if gain is None:
        return {}
    return {"gain_verdict": gain.verdict, "gain_n": str(gain.n), "gain_method": gain.method}


def _tags(row: RunRow) -> dict[str, str]:
    tags = {
        RUN_TAG: row.id,
        "skynet.status": row.status,
        "skynet.engine": row.engine,
        "skynet.dataset_hash": row.dataset_hash,
        "skynet.metric_hash": row.metric_hash,
        "skynet.seed": str(row.seed),
    }
    if row.best_candidate_id:
        tags["skynet.best_candidate"] = row.best_candidate_id
    stopped_by = (row.notes or {}).get("stopped_by")
    if stopped_by:
        tags["skynet.stopped_by"] = str(stopped_by)
    if row.error:
        tags["skynet.error"] = row.error
    return {key: value[:_MAX_TAG_CHARS] for key, value in tags.items()}


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _mlflow_client(uri: str) -> Any:
    # Skynet says where the run went, once; MLflow would print its own two lines per run end.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise TrackingError(f"mlflow is not installed; {INSTALL}") from None
    return MlflowClient(tracking_uri=uri)


class _Logger:
    """One MLflow run of one Skynet run, through MlflowClient: found by its tag or made."""

    def __init__(self, uri: str, experiment: str) -> None:
        self.uri, self.experiment = uri, experiment
        self.client: Any = None
        self.experiment_id = ""
        self.run_id = ""
        self.created = False  # made by this process
        self.logged = False  # this process logged metrics to it

    def open(self, row: RunRow) -> None:
        """Find the MLflow run of `row` (tag skynet.run_id) in the experiment, or make it; log
        the params it lacks and the tags as they stand."""
        refused = _refused(self.uri, self.experiment)
        if refused:
            raise TrackingError(refused)
        _probe(self.uri)
        self.client = client = _mlflow_client(self.uri)
        self.experiment_id = self._experiment()
        escaped = row.id.replace("\\", "\\\\").replace("'", "\\'")
        found = client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{RUN_TAG}` = '{escaped}'", max_results=1
        )
        if found:
            run = found[0]
            self.run_id, self.created = run.info.run_id, False
            have = set(run.data.params)
        else:
            run = client.create_run(
                self.experiment_id,
                start_time=_millis(row.created),
                tags={RUN_TAG: row.id},
                run_name=row.id,
            )
            self.run_id, self.created, have = run.info.run_id, True, set()
        from mlflow.entities import Param, RunTag

        params = [
            Param(key, value)
            for key, value in flatten_config(row.config).items()
            if key not in have  # a param is written once; the recorded config does not change
        ]
        for batch in _chunks(params, _PARAMS_PER_BATCH):
            client.log_batch(self.run_id, params=batch)
        tags = [RunTag(key, value) for key, value in _tags(row).items()]
        for batch in _chunks(tags, _PARAMS_PER_BATCH):
            client.log_batch(self.run_id, tags=batch)

    def _experiment(self) -> str:
        client = self.client
        experiment = client.get_experiment_by_name(self.experiment)
        if experiment is None:
            try:
                return str(client.create_experiment(self.experiment))
            except Exception:
                experiment = client.get_experiment_by_name(self.experiment)  # made meanwhile
                if experiment is None:
                    raise
        if experiment.lifecycle_stage == "deleted":
            raise TrackingError(
                f"MLflow at {self.uri}: the experiment '{self.experiment}' is deleted; restore "
                "it (mlflow experiments restore), or name another experiment"
            )
        return str(experiment.experiment_id)

    def running(self) -> None:
        """A resumed Skynet run: its MLflow run runs again."""
        self.client.update_run(self.run_id, status="RUNNING")

    def log_points(self, points: Mapping[str, list[tuple[int, float]]]) -> None:
        from mlflow.entities import Metric

        self.logged = True
        now = int(time.time() * 1000)
        metrics = [
            Metric(key, float(value), now, int(step))
            for key, values in points.items()
            for step, value in values
        ]
        for batch in _chunks(metrics, _METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=batch)

    def counts(self, keys: list[str]) -> dict[str, int]:
        """How many points each metric has (none for a run just made, nothing logged yet)."""
        if self.created and not self.logged:
            return dict.fromkeys(keys, 0)
        return {key: len(self.client.get_metric_history(self.run_id, key)) for key in keys}

    def log_summary(self, summary: RunSummary) -> None:
        """Everything the summary holds, adding only what is missing: of each per-candidate
        metric the points past those it has (logged live, or by an earlier export), of each
        run figure a new point only when its value changed; then the artifacts and tags."""
        series = _series(summary)
        have = self.counts(list(series))
        points = {key: values[have[key] :] for key, values in series.items()}
        latest: dict[str, float] = {}
        have_params: set[str] = set()
        if not (self.created and not self.logged):
            data = self.client.get_run(self.run_id).data
            latest, have_params = dict(data.metrics), set(data.params)
        step = summary.metric_calls
        for key, value in _scalars(summary).items():
            if latest.get(key) != value:
                points[key] = [(step, value)]
        self.log_points(points)
        self.log_artifacts(summary)
        from mlflow.entities import Param, RunTag

        # An MLflow param is written once; the gain can change afterwards (test items scored
        # into the run later), so the tag skynet.gain always says the gain as it stands.
        params = [Param(k, v) for k, v in _gain_params(summary).items() if k not in have_params]
        tags = [RunTag(key, value) for key, value in _tags(summary.run).items()]
        if summary.gain is not None:
            tags.append(RunTag("skynet.gain", summary.gain.describe()[:_MAX_TAG_CHARS]))
        self.client.log_batch(self.run_id, params=params, tags=tags)

    def log_artifacts(self, summary: RunSummary) -> None:
        from skynet.runs.report import render_html, render_text

        client, run_id = self.client, self.run_id
        if summary.best is not None:
            for name, text in sorted(summary.best.content.items()):
                client.log_text(run_id, text, f"best/{_file_name(name)}.txt")
        client.log_text(run_id, render_text(summary), "report.txt")
        client.log_text(run_id, render_html(summary), "report.html")
        config = json.dumps(summary.run.config, indent=2, sort_keys=True, ensure_ascii=False)
        client.log_text(run_id, config + "\n", "config.json")

    def end(self, row: RunRow, status: str | None = None) -> None:
        """Mark the MLflow run ended as the Skynet run did (a running one stays running)."""
        status = status or _STATUS.get(row.status)
        if status is not None:
            end = _millis(row.finished) if row.status in _STATUS else None
            self.client.set_terminated(self.run_id, status=status, end_time=end)


# -- export -----------------------------------------------------------------------------------


def _url(uri: str, experiment_id: str, run_id: str) -> str:
    """The run's page on an MLflow server ("" for a local store)."""
    if urlsplit(uri).scheme not in ("http", "https"):
        return ""
    return f"{uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


@dataclass(frozen=True, kw_only=True)
class ExportResult:
    """Where a run went: the MLflow run's id, its experiment, whether it was made now (else
    updated), and its page on the tracking server ("" for a local store)."""

    mlflow_run_id: str
    experiment_id: str
    experiment: str
    created: bool
    url: str


def export_run(summary: RunSummary, *, uri: str, experiment: str) -> ExportResult:
    """Log one Skynet run (its summary, from skynet.runs.report.summarize) as an MLflow run;
    an MLflow run already tagged with its id is updated, not duplicated.

    Raises:
        TrackingError: mlflow is not installed, or the server cannot be reached or refused a
            call; the message names the URI.
    """
    logger = _Logger(uri, experiment)
    fix = (
        "check that an MLflow server runs there (docs/tracking.md), or give another --tracking-uri"
    )
    try:
        logger.open(summary.run)
        logger.log_summary(summary)
        logger.end(summary.run)
    except _Unreachable as exc:
        raise TrackingError(f"{exc}; {fix}") from None
    except TrackingError:
        raise
    except Exception as exc:
        raise TrackingError(f"MLflow at {uri}: {_reason(exc)}; {fix}") from None
    url = _url(uri, logger.experiment_id, logger.run_id)
    return ExportResult(
        mlflow_run_id=logger.run_id,
        experiment_id=logger.experiment_id,
        experiment=experiment,
        created=logger.created,
        url=url,
    )


# -- live -------------------------------------------------------------------------------------


class MlflowTracker:
    """A run logged to MLflow as it goes (`[tracking] mlflow = URI`): the calls RunSession makes.

    Every method returns at once: the MLflow calls run in order on one background thread. The
    first failure (no server, mlflow not installed, a refused call) is said once, by `say`, and
    tracking stops for the rest of the run; the run itself goes on. Off (no URI), every method
    does nothing.
    """

    def __init__(
        self,
        uri: str = "",
        experiment: str = "",
        *,
        say: Callable[[str], None] | None = None,
        project_dir: Path | None = None,
    ) -> None:
        self.uri, self.experiment, self.project_dir = uri, experiment, project_dir
        self._say = say or (lambda text: None)
        self._logger = _Logger(uri, experiment)
        self._tasks: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._off = not uri
        self._run_id = ""
        self._seen: set[str] = set()  # candidates whose val score was logged by this process
        self._skip: dict[str, int] = {}  # points a resumed run logged before: replayed, skipped
        self._logged: dict[str, int] = {"val_score": 0, "best_val_score": 0}
        self._best: float | None = None

    @classmethod
    def live(cls, config: Config, *, say: Callable[[str], None] | None = None) -> MlflowTracker:
        """The tracker `[tracking]` asks for: off when `mlflow` is empty."""
        section = config.tracking
        experiment = section.experiment or config.project_dir.name or "skynet"
        return cls(section.mlflow, experiment, say=say, project_dir=config.project_dir)

    @property
    def on(self) -> bool:
        """Whether the run is still being logged."""
        return not self._off

    def _submit(self, task: Callable[[], None]) -> None:
        if self._off:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="skynet-mlflow", daemon=True)
            self._thread.start()
        self._tasks.put(task)

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            if self._off:
                continue
            try:
                task()
            except Exception as exc:  # tracking never stops the run
                self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            if self._off:
                return
            self._off = True
        reason = str(exc) if isinstance(exc, TrackingError) else _reason(exc)
        reason = reason.removeprefix(f"MLflow at {self.uri}: ")
        if INSTALL in reason:
            self._say(
                f"warning: [tracking] mlflow = {self.uri} is set, but {reason}; this run goes on "
                "untracked"
            )
            return
        self._say(
            f"warning: MLflow tracking at {self.uri} failed ({reason}); this run goes on "
            "untracked and its records are intact: start the server or fix [tracking] mlflow in "
            f"skynet.toml, then `skynet export mlflow {self._run_id}` logs the whole run"
        )

    def start(self, row: RunRow) -> None:
        """The Skynet run started (or was resumed): its MLflow run is made (or found again)."""
        self._run_id = row.id

        def task() -> None:
            logger = self._logger
            logger.open(row)
            if not logger.created:
                logger.running()
                # A resumed engine replays its candidates: what was logged is not logged twice.
                self._skip = logger.counts(list(self._logged))

        self._submit(task)

    def val_score(self, candidate_id: str, score: float | None, metric_calls: int) -> None:
        """A candidate's val score became known after `metric_calls` metric calls."""
        if self._off or score is None:
            return
        with self._lock:
            if candidate_id in self._seen:
                return
            self._seen.add(candidate_id)
            self._best = score if self._best is None else max(self._best, score)
            best = self._best

        def task() -> None:
            points: dict[str, list[tuple[int, float]]] = {}
            for key, value in (("val_score", score), ("best_val_score", best)):
                self._logged[key] += 1
                if self._logged[key] > self._skip.get(key, 0):
                    points[key] = [(metric_calls, value)]
            if points:
                self._logger.log_points(points)

        self._submit(task)

    def end(self, store: RunStore, run_id: str, failed: BaseException | None = None) -> None:
        """The run ended (`failed`: with this exception): its figures, the best candidate and
        the reports logged, and the MLflow run ended as the Skynet run did. Waits for MLflow at
        most _END_TIMEOUT_S."""
        thread = self._thread
        if thread is None:
            return
        if self._off:
            self._tasks.put(None)  # the worker ends
            return
        try:
            from skynet.runs.report import summarize

            summary = summarize(store, run_id, project_dir=self.project_dir)
        except Exception as exc:
            self._fail(exc)
            self._tasks.put(None)
            return
        status = None
        if summary.run.status not in _STATUS:  # it escaped before the status was set
            status = "KILLED" if isinstance(failed, KeyboardInterrupt) else "FAILED"

        def task() -> None:
            self._logger.log_summary(summary)
            self._logger.end(summary.run, status)

        self._submit(task)
        self._tasks.put(None)
        thread.join(_END_TIMEOUT_S)
        if thread.is_alive():
            self._fail(TimeoutError(f"no answer in {_END_TIMEOUT_S:g} s"))
        elif self.on:
            logger = self._logger
            where = _url(self.uri, logger.experiment_id, logger.run_id) or self.uri
            self._say(f"logged to MLflow as run {logger.run_id}: {where}")
