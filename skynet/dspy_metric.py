"""A DSPy metric under Skynet's metric contract, recognised by what it accepts.

DSPy's metrics are called as `metric(example, prediction, trace=None, pred_name=None,
pred_trace=None)`: the item as a dspy.Example, the program's output as a dspy.Prediction, and,
when dspy.GEPA asks for one predictor's feedback, that predictor's name and trace. Such a
function, given as metric= in Python or as score() in a project's metric.py, is wrapped here so
that every engine calls it through the same contract (`score(input, output, expected)`), and the
dspy-gepa engine can still ask it for one predictor's feedback (DspyMetric.for_predictor), as
dspy.GEPA does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["DspyMetric", "fit_to_artifact", "is_dspy_metric"]

# The names DSPy's docs and tutorials give a metric's first two parameters.
_GOLD = ("gold", "example", "ex", "gold_example")
_PRED = ("pred", "prediction", "pred_output")
# Parameters only a DSPy metric takes: what dspy.Evaluate and dspy.GEPA pass beyond the pair.
_DSPY_ONLY = ("trace", "pred_name", "pred_trace")


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []


def is_dspy_metric(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is a DSPy metric: it takes a trace, pred_name or pred_trace (what DSPy passes
    and Skynet's contract has no place for), or its first two parameters are named as DSPy's
    are, e.g. (gold, pred) or (example, prediction)."""
    params = _parameters(fn)
    names = [p.name for p in params]
    if any(name in _DSPY_ONLY for name in names):
        return True
    return len(names) >= 2 and names[0] in _GOLD and names[1] in _PRED


class DspyMetric:
    """A DSPy metric as a Skynet `score(input, output, expected=None)`.

    The item becomes a dspy.Example of its inputs and labels (inputs marked), the output a
    dspy.Prediction (a mapping's fields, or the one output column's value); the metric's float,
    bool, dict or dspy.Prediction(score=, feedback=) comes back as (score, {"feedback": ...}),
    with dspy.GEPA's own words when it gives no feedback.

    Args:
        fn: the DSPy metric.
        outputs: the output columns, the first naming a plain output's field.
    """

    def __init__(self, fn: Callable[..., Any], outputs: Sequence[str]) -> None:
        self.fn = fn
        self.outputs = list(outputs)
        # The program's output fields, once known (fit_to_artifact): a DSPy program's output
        # reaches the metric under its own field names, as under dspy.Evaluate.
        self.made: tuple[str, ...] = ()
        params = _parameters(fn)
        positional = [
            p.name
            for p in params
            if p.kind
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        self._varargs = any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params)
        self._kwargs = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params)
        self._positional = positional
        self._keyword_only = {p.name for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY}
        name = getattr(fn, "__name__", type(fn).__name__)
        shown = ", ".join(p.name for p in params) or "..."
        self.contract = f"a DSPy metric, called as {name}({shown})"

    def __repr__(self) -> str:
        return f"<DspyMetric {self.contract}>"

    def __call__(self, input: Any, output: Any, expected: Any = None) -> tuple[float, dict]:
        score, feedback = self._scored(self._call(self.example(input, expected), self.pred(output)))
        return score, {"feedback": feedback}

    def for_predictor(
        self,
        input: Mapping[str, Any],
        expected: Mapping[str, Any] | None,
        pred: Any,
        trace: Any,
        pred_name: str,
        pred_trace: Any,
    ) -> tuple[float, str]:
        """(score, feedback) for one predictor, as dspy.GEPA asks its metric: on the item (as
        every call sees it), with the predictor's name and its part of the trace."""
        gold = self.example(input, expected)
        return self._scored(self._call(gold, pred, trace, pred_name, pred_trace))

    def example(self, input: Mapping[str, Any], expected: Mapping[str, Any] | None) -> Any:
        import dspy

        return dspy.Example(**input, **(expected or {})).with_inputs(*input)

    def pred(self, output: Any) -> Any:
        import dspy

        if isinstance(output, dspy.Prediction):
            return output
        if isinstance(output, Mapping):
            # A field missing (the self-test's empty output) reads as empty text, not as an
            # AttributeError in the metric.
            empty = dict.fromkeys([*self.made, *self.outputs], "")
            return dspy.Prediction(**{**empty, **output})
        # One value: a one-field program's output (under that field's name), else the label's.
        if len(self.made) == 1:
            name = self.made[0]
        else:
            name = self.outputs[0] if self.outputs else "answer"
        return dspy.Prediction(**{name: output})

    def _call(
        self,
        gold: Any,
        pred: Any,
        trace: Any = None,
        pred_name: str | None = None,
        pred_trace: Any = None,
    ) -> Any:
        values = {
            "trace": trace,
            "pred_name": pred_name,
            "pred_trace": pred_trace,
        }
        given = [gold, pred, trace, pred_name, pred_trace]
        count = 5 if self._varargs else min(len(self._positional), 5)
        args = given[: max(2, count)]
        # A name DSPy passes that the metric takes by keyword only (or as **kwargs).
        named = self._positional[: len(args)]
        kwargs = {
            k: v
            for k, v in values.items()
            if k not in named and (k in self._keyword_only or (self._kwargs and v is not None))
        }
        return self.fn(*args, **kwargs)

    @staticmethod
    def _scored(value: Any) -> tuple[float, str]:
        feedback: Any = None
        if isinstance(value, Mapping):
            feedback, value = value.get("feedback"), value.get("score")
        elif hasattr(value, "score") and not isinstance(value, bool | int | float):
            feedback, value = getattr(value, "feedback", None), value.score
        score = float(value)
        if feedback is None or not str(feedback).strip():
            feedback = f"This trajectory got a score of {score}."  # dspy.GEPA's own words
        return score, str(feedback)


def fit_to_artifact(metric: Any, artifact: Any) -> None:
    """Tell a DSPy metric (a Metric whose fn is a DspyMetric) the artifact's output fields, when
    the artifact knows them (a DSPy program): its outputs then reach the metric under the
    program's own field names, as dspy.Evaluate passes them, not under the data's label."""
    fields = getattr(artifact, "output_fields", None)
    if fields and isinstance(metric.fn, DspyMetric):
        metric.fn.made = tuple(fields)
