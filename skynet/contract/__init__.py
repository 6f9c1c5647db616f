"""The metric contract: load metric.py, check what score() returns, and self-test it.

```python
def score(input, output, expected=None):
    return score_value, {"feedback": "...", "scores": {"format": 1.0}}
```

Every check has a name that appears in its messages ("Metric return value", "answer key",
"null control", ...), so a user can find it in docs/metric.md.

The parts, each a private module: `_check` (the return-value contract and the check names),
`_metric` (the runtime: `Metric` and how score() is called), `_load` (loading metric.py) and
`_self_test` (`check_metric` and its report).
"""

from __future__ import annotations

from skynet.contract._check import (
    ANSWER_KEY,
    METRIC_ERROR,
    METRIC_FILE,
    NULL_CONTROL,
    RETURN_VALUE,
    SIGNATURE,
    STDOUT_KEY,
    TIMED_OUT_KEY,
    UNDECLARED_REASON,
    Limits,
    MetricResult,
    validate_return,
)
from skynet.contract._load import dspy_adapted, load_metric, metric_file_hash
from skynet.contract._metric import Metric, SelfTestRules, scored_item_id
from skynet.contract._self_test import CheckFailure, CheckReport, check_metric

__all__ = [
    "RETURN_VALUE",
    "ANSWER_KEY",
    "NULL_CONTROL",
    "METRIC_ERROR",
    "UNDECLARED_REASON",
    "SIGNATURE",
    "METRIC_FILE",
    "STDOUT_KEY",
    "TIMED_OUT_KEY",
    "Limits",
    "MetricResult",
    "Metric",
    "load_metric",
    "metric_file_hash",
    "dspy_adapted",
    "scored_item_id",
    "validate_return",
    "CheckFailure",
    "CheckReport",
    "SelfTestRules",
    "check_metric",
]
