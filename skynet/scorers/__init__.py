"""Built-in scorers: reusable metrics with a name, a version and a declared set of reasons.

```python
from skynet import scorers

scorer = scorers.get("xlam-tool-call", ordering="any")
report = scorers.selftest(scorer, items)
verdict = scorer.score(item, scorers.Reply(text="", calls=(scorers.Call("f", '{"x": 1}'),)))
```

The public surface is what __all__ lists; everything else may change.
"""

from skynet.errors import JudgeUnvalidated
from skynet.scorers.base import Call, GradedScorer, Reply, Scorer, Verdict
from skynet.scorers.exact import Exact
from skynet.scorers.judge import (
    DEFAULT_THRESHOLDS,
    Estimate,
    JudgeCall,
    JudgeConfig,
    JudgeDecision,
    JudgeFailed,
    JudgeScorer,
    JudgeThresholds,
    JudgeValidation,
    judge_config,
    judge_metric,
    judge_problems,
    judge_scorer,
    judge_valid,
    judge_validate,
)
from skynet.scorers.ppi import PPIEstimate, judge_ppi
from skynet.scorers.reference import (
    FieldResult,
    ListResult,
    Match,
    ReferenceResult,
    ReferenceScorer,
    Unmatched,
)
from skynet.scorers.registry import (
    SelftestFailure,
    SelftestReport,
    as_metric,
    get,
    metric_of,
    names,
    register,
    scorer_metric,
    selftest,
    to_reply,
)

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Call",
    "Estimate",
    "Exact",
    "FieldResult",
    "GradedScorer",
    "JudgeCall",
    "JudgeConfig",
    "JudgeDecision",
    "JudgeFailed",
    "JudgeScorer",
    "JudgeThresholds",
    "JudgeUnvalidated",
    "JudgeValidation",
    "ListResult",
    "Match",
    "PPIEstimate",
    "ReferenceResult",
    "ReferenceScorer",
    "Reply",
    "Scorer",
    "SelftestFailure",
    "SelftestReport",
    "Unmatched",
    "Verdict",
    "as_metric",
    "get",
    "judge_config",
    "judge_metric",
    "judge_ppi",
    "judge_problems",
    "judge_scorer",
    "judge_valid",
    "judge_validate",
    "metric_of",
    "names",
    "register",
    "scorer_metric",
    "selftest",
    "to_reply",
]
