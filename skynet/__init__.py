"""Skynet: optimize prompts, DSPy programs and code against one metric.py.

The public surface is what __all__ lists; everything else may change.
"""

from skynet.api import Code, EvalResult, RunResult, evaluate, optimize, rescore, resume
from skynet.contract import (
    CheckFailure,
    CheckReport,
    Limits,
    Metric,
    MetricResult,
    check_metric,
    load_metric,
)
from skynet.data import Item
from skynet.errors import (
    BudgetExhausted,
    CandidateFailed,
    ConfigError,
    ContractError,
    DatasetError,
    JudgeUnvalidated,
    MetricError,
    ModelError,
    NotMeasuring,
    ProjectBusy,
    RunAborted,
    SkynetError,
)
from skynet.evaluation import Evaluation, Result
from skynet.llm_call import llm
from skynet.measure import Observation, observation, service_cost
from skynet.reward import RewardSpec, reward, validate_spec

__version__ = "0.1.0.dev0"

__all__ = [
    "Code",
    "EvalResult",
    "RunResult",
    "evaluate",
    "optimize",
    "rescore",
    "resume",
    "BudgetExhausted",
    "CandidateFailed",
    "CheckFailure",
    "CheckReport",
    "ConfigError",
    "ContractError",
    "DatasetError",
    "Evaluation",
    "Item",
    "JudgeUnvalidated",
    "Limits",
    "Metric",
    "MetricError",
    "MetricResult",
    "ModelError",
    "NotMeasuring",
    "Observation",
    "ProjectBusy",
    "Result",
    "RewardSpec",
    "RunAborted",
    "SkynetError",
    "check_metric",
    "llm",
    "load_metric",
    "observation",
    "reward",
    "service_cost",
    "validate_spec",
]
