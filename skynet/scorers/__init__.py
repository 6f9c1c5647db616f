"""Built-in scorers: reusable metrics with a name, a version and a declared set of reasons.

```python
from skynet import scorers

scorer = scorers.get("xlam-tool-call", ordering="any")
report = scorers.selftest(scorer, items)
verdict = scorer.score(item, scorers.Reply(text="", calls=(scorers.Call("f", '{"x": 1}'),)))
```

The public surface is what __all__ lists; everything else may change.
"""

from skynet.scorers.base import Call, Reply, Scorer, Verdict
from skynet.scorers.registry import (
    SelftestFailure,
    SelftestReport,
    as_metric,
    get,
    names,
    register,
    scorer_metric,
    selftest,
    to_reply,
)

__all__ = [
    "Call",
    "Reply",
    "Scorer",
    "SelftestFailure",
    "SelftestReport",
    "Verdict",
    "as_metric",
    "get",
    "names",
    "register",
    "scorer_metric",
    "selftest",
    "to_reply",
]
