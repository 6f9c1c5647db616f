"""A validated LLM judge: no judge scores a run until it agrees with blind human labels.

This is the judge itself, which knows no project; skynet.judge joins it to a project (its
[judge] section, `skynet judge collect / validate`, the report).

```python
from skynet import scorers
config = scorers.judge_config("openai/gpt-4o-mini", "Is the answer the reference's city?")
record = scorers.judge_validate(config, [(True, True), (False, False), ...])  # (judge, human)
record.save("judge-validation.json")
scorer = scorers.judge_scorer(config, record)            # JudgeUnvalidated unless judge_valid
verdict = scorer.score(item, scorers.Reply(text="Paris"))
```

The judge grades an output against the item's label (every accepted answer listed), once in
each of the configuration's presentation orders. Right when every order answers the positive
grade; a reply it cannot parse, or orders that disagree, are wrong with outcome
"judge_unresolved"; a call that fails after retries is an error with outcome "judge_failed".
Outputs with no text, or that report their own failure, are sorted as the `exact` scorer sorts
them, with no judge call.

Judge calls go through skynet.models with the "metric" role: cached (the draw index is part of
the key), governed, retried, and recorded in the metric (judge) ledger, never in the task cost
that service_cost() reads. The scorer keeps a `trace` of the calls it made; its `ledger` is that
trace's totals, read afresh from it.

The public surface is what __all__ lists; the _modules behind it may change.
"""

from skynet.errors import JudgeFailed
from skynet.scorers.judge._config import DEFAULT_GRADES, MODES, ORDERS, JudgeConfig, judge_config
from skynet.scorers.judge._labels import LabelledRow, judge_labelled, read_labels
from skynet.scorers.judge._prompt import parse_grade
from skynet.scorers.judge._scorer import (
    JUDGE_FAILED,
    JUDGE_UNRESOLVED,
    OUTCOMES,
    RIGHT,
    WRONG,
    JudgeCall,
    JudgeDecision,
    JudgeScorer,
    judge_metric,
    judge_scorer,
)
from skynet.scorers.judge._validation import (
    DEFAULT_THRESHOLDS,
    HOW_TO_VALIDATE,
    Estimate,
    JudgeThresholds,
    JudgeValidation,
    judge_problems,
    judge_valid,
    judge_validate,
)

__all__ = [
    "DEFAULT_GRADES",
    "DEFAULT_THRESHOLDS",
    "HOW_TO_VALIDATE",
    "JUDGE_FAILED",
    "JUDGE_UNRESOLVED",
    "MODES",
    "ORDERS",
    "OUTCOMES",
    "RIGHT",
    "WRONG",
    "Estimate",
    "JudgeCall",
    "JudgeConfig",
    "JudgeDecision",
    "JudgeFailed",
    "JudgeScorer",
    "JudgeThresholds",
    "JudgeValidation",
    "LabelledRow",
    "judge_config",
    "judge_labelled",
    "judge_metric",
    "judge_problems",
    "judge_scorer",
    "judge_valid",
    "judge_validate",
    "parse_grade",
    "read_labels",
]
