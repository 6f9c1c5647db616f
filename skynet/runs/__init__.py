"""Run records: the run store (SQLite, `.skynet/runs.db`) and the run report."""

from skynet.runs.report import CandidateSummary, RunSummary, render_html, render_text, summarize
from skynet.runs.store import (
    EVALUATION,
    MIGRATIONS,
    RUN_STATUSES,
    CandidateRow,
    EvaluationRow,
    ProposalRow,
    RunRow,
    RunStore,
    runs_db_path,
)

__all__ = [
    "EVALUATION",
    "MIGRATIONS",
    "RUN_STATUSES",
    "CandidateRow",
    "CandidateSummary",
    "EvaluationRow",
    "ProposalRow",
    "RunRow",
    "RunStore",
    "RunSummary",
    "render_html",
    "render_text",
    "runs_db_path",
    "summarize",
]
