"""The self-test: `check_metric` scores each item's answer key, an empty output and other items'
keys before a run spends anything, and reports what failed in a `CheckReport`.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skynet.contract._check import (
    ANSWER_KEY,
    METRIC_ERROR,
    NULL_CONTROL,
    RETURN_VALUE,
    UNDECLARED_REASON,
    MetricResult,
    _shown,
)
from skynet.contract._load import _every_label
from skynet.contract._metric import Metric
from skynet.data import Item
from skynet.errors import ContractError, MetricError, MetricExited
from skynet.measure import TESTING, Observation, current_observation, scoring

_CHECKING_THREADS = 4  # items self-tested side by side


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (Mapping, list, tuple, set)):
        return len(value) == 0
    return False


def _empty_like(value: Any) -> Any:
    """The empty output of the answer key's type: "" for text, {} for a dict, [] for a list."""
    if isinstance(value, str):
        return ""
    if isinstance(value, Mapping):
        return {}
    if isinstance(value, (list, tuple)):
        return []
    return None


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """One failed check of the self-test: its name, the item, and what went wrong."""

    check: str
    item_id: str | None
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What the self-test found. `ok` is True when nothing failed."""

    items_checked: int
    failures: tuple[CheckFailure, ...] = ()
    null_control_skipped: tuple[str, ...] = ()
    subject: str = "metric"  # "metric", or the scorer tested: "scorer 'xlam-tool-call'"
    mode: str = "full"  # [metric] self_test: "full", "contract" or "off"
    unkeyed: tuple[str, ...] = ()  # items with no answer key: their return value only
    # Why the unkeyed items have no answer key, as the summary says it.
    unkeyed_why: str = "with no expected answer"
    metric_calls: int = 0  # how many times the self-test called the metric

    @property
    def ok(self) -> bool:
        return not self.failures

    def skipped(self) -> list[str]:
        """What a full self-test left out, and why: one phrase per kind of item."""
        said = []
        if self.null_control_skipped:
            said.append(
                f"{len(self.null_control_skipped)} item(s) with an empty key left out of the "
                "null control"
            )
        if self.unkeyed:
            said.append(
                f"{len(self.unkeyed)} item(s) {self.unkeyed_why}: their return value on an empty "
                "output was checked; the answer key and the null control were skipped"
            )
        return said

    def summary(self) -> str:
        if self.mode == "off":
            return (
                f'{self.subject} self-test off ([metric] self_test = "off"): nothing was checked '
                "before the run"
            )
        if self.ok and self.mode == "contract":
            return (
                f"{self.subject} self-test passed, contract only ([metric] self_test = "
                f'"contract"): the return value on {self.items_checked} item(s); the answer key '
                "and the null control were not checked"
            )
        if self.ok:
            skipped = "".join(f" ({said})" for said in self.skipped())
            return f"{self.subject} self-test passed on {self.items_checked} item(s){skipped}"
        # The same fault on many items is one fault: show it once, then the other items' ids.
        groups: dict[tuple[str, str], list[CheckFailure]] = {}
        for f in self.failures:
            shape = f.message.replace(f"'{f.item_id}'", "'…'") if f.item_id else f.message
            shape = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", shape)
            groups.setdefault((f.check, shape), []).append(f)
        items = len({f.item_id for f in self.failures})
        lines = [
            f"{self.subject} self-test failed: {len(self.failures)} check(s) on {items} item(s)"
        ]
        for (check, _), group in groups.items():
            lines.append(f"  - [{check}] {group[0].message}")
            if len(group) > 1:
                others = [str(f.item_id) for f in group[1:]]
                shown = ", ".join(others[:8]) + (
                    f" and {len(others) - 8} more" if len(others) > 8 else ""
                )
                lines.append(f"    the same on {len(others)} more item(s): {shown}")
        return "\n".join(lines)


# The self-test scores outputs no artifact produced: metrics that read observation() see this.
_SELFTEST_OBSERVATION = Observation(
    elapsed_ms=0.0, cost_note="self-test: no artifact ran", time_note="self-test: no artifact ran"
)


def check_metric(
    metric: Metric,
    items: Iterable[Item],
    *,
    others: int = 3,
    mode: str = "full",
    made: Sequence[str] | None = None,
) -> CheckReport:
    """Self-test a metric on the items a run will use, before anything is spent: the one
    self-test of metric.py functions, Python metrics and scorers alike.

    Checks, per item:
      - "Metric return value": every call returns a valid pair;
      - "answer key": the answer key scores at least as high as every other output tried
        (the empty output and up to `others` other items' answer keys), and at least
        metric.rules.key_scores when that is set (a scorer's own answer is correct);
      - "null control": an empty output scores strictly lower than the answer key, unless the key
        is itself empty (such items are left out of this check only);
      - "undeclared reason": with metric.rules.reasons set, every result's reason is declared.
    An exception from key() or score() is an error of its own kind, not a wrong answer.

    mode "contract" checks only the first item's return value on its answer key (a metric whose
    every call costs, a noisy judge); "off" checks nothing ([metric] self_test).

    `made` names the fields the artifact's outputs carry, when it knows them (a DSPy program's
    output fields). A DSPy metric's answer key is a Prediction of the Example's labels; when the
    labels share no name with those fields (the labels are a JSON `answer`, the program outputs
    `urgency`), no output the program gives looks like the key: the item's return value is
    checked on an empty output of those fields, and the report says why the key was skipped.
    """
    if mode == "off":
        return CheckReport(items_checked=0, subject=metric.rules.subject, mode=mode)
    items = list(items)[:1] if mode == "contract" else list(items)
    rules = metric.rules
    failures: list[CheckFailure] = []
    skipped: list[str] = []
    keys: dict[str, Any] = {}
    undeclared: set[tuple[str, Any]] = set()
    # An item with no expected answer and no key() (a reference-free metric, a single task):
    # its return value is checked on the empty output; it has no answer key to compare with.
    unkeyed = [
        i for i in items if not i.expected and metric.key_fn is None and metric.item_key is None
    ]
    why = "with no expected answer"
    empty: Any = ""
    if made and metric.key_fn is _every_label and metric.item_key is None:
        unlike = [i for i in items if i.expected and not set(i.expected) & set(made)]
        if unlike:
            labels = sorted({str(k) for i in unlike for k in i.expected or ()})
            why = (
                f"whose labels ({', '.join(labels)}) are not among the program's output fields "
                f"({', '.join(made)})"
            )
            unkeyed, empty = unlike, dict.fromkeys(made, "")
    unkeyed_ids = {i.id for i in unkeyed}
    for item in items:
        if item.id in unkeyed_ids:
            continue
        try:
            keys[item.id] = metric.answer_key(item)
        except ContractError as exc:
            failures.append(CheckFailure(rules.raised_as or exc.check, item.id, str(exc)))

    counted = itertools.count(1)  # metric calls made, from every checking thread

    def run(item: Item, output: Any, check: str, found: list[CheckFailure]) -> MetricResult | None:
        next(counted)
        try:
            result = metric(item.input, output, item.expected, item_id=item.id)
        except ContractError as exc:
            found.append(CheckFailure(exc.check, item.id, str(exc)))
            return None
        except MetricExited:
            raise  # it would end a run: said at once, in one line, not as one item's failure
        except MetricError as exc:
            found.append(CheckFailure(rules.raised_as or METRIC_ERROR, item.id, str(exc)))
            return None
        reason = result.extra.get("reason")
        if rules.reasons is not None and reason not in rules.reasons:
            if (item.id, reason) in undeclared:
                return result  # said once per item and reason
            undeclared.add((item.id, reason))
            found.append(
                CheckFailure(
                    UNDECLARED_REASON,
                    item.id,
                    f"{metric.where} gave reason {reason!r} on item '{item.id}' ({check} "
                    f"check), which it does not declare (reasons: "
                    f"{', '.join(sorted(rules.reasons)) or 'none'}); add it to reasons or give "
                    "a declared one",
                )
            )
        return result

    def check_item(index: int, item: Item) -> tuple[list[CheckFailure], bool]:
        """One keyed item's checks: its failures, and whether its null control was skipped."""
        found: list[CheckFailure] = []
        key = keys[item.id]
        on_key = run(item, key, ANSWER_KEY, found)
        if on_key is None or mode == "contract":
            return found, False
        if rules.key_scores is not None and on_key.score < rules.key_scores - 1e-9:
            found.append(
                CheckFailure(
                    ANSWER_KEY,
                    item.id,
                    f"{ANSWER_KEY} check failed for item '{item.id}' ({metric.where}): the "
                    f"item's own answer {_shown(key, 80)} scored {on_key.score:g} "
                    f"({_shown(on_key.feedback, 120)}); the answer key must score "
                    f"{rules.key_scores:g}",
                )
            )
            return found, False  # a wrong key: comparing other outputs with it says nothing
        tried: list[tuple[str, Any]] = []
        empty_key = _is_empty(key)
        if not empty_key:
            tried.append(("the empty output", _empty_like(key)))
        for other in ordered[index + 1 :] + ordered[:index]:
            if len(tried) >= others + (0 if empty_key else 1):
                break
            if keys[other.id] != key:
                tried.append((f"item '{other.id}''s answer key", keys[other.id]))
        for label, output in tried:
            check = NULL_CONTROL if label == "the empty output" else ANSWER_KEY
            got = run(item, output, check, found)
            if got is None:
                continue
            if got.score > on_key.score:
                found.append(
                    CheckFailure(
                        ANSWER_KEY,
                        item.id,
                        f"{ANSWER_KEY} check failed for item '{item.id}' ({metric.where}): "
                        f"{label} {_shown(output, 80)} scored {got.score:g}, higher than the "
                        f"answer key {_shown(key, 80)} ({on_key.score:g}); the expected "
                        "output must score at least as high as any other output",
                    )
                )
            if label == "the empty output" and got.score >= on_key.score:
                found.append(
                    CheckFailure(
                        NULL_CONTROL,
                        item.id,
                        f"{NULL_CONTROL} check failed for item '{item.id}' ({metric.where}): "
                        f"an empty output scored {got.score:g}, not lower than the answer key "
                        f"({on_key.score:g}); a metric that marks everything correct cannot "
                        "guide an optimizer: score what the output gets right",
                    )
                )
        return found, empty_key

    observed = current_observation()
    with scoring(observed or _SELFTEST_OBSERVATION, source=TESTING):
        for item in unkeyed:
            run(item, empty, RETURN_VALUE, failures)
        ordered = [i for i in items if i.id in keys]
        # Items are checked side by side (a run calls the metric so too): each call's hand-off
        # to the metric's time-limit thread overlaps the others' (on 1,000 items: 5,000 calls).
        # Their failures are taken in item order, so the report is the same however they ran.
        contexts = [contextvars.copy_context() for _ in ordered]
        with concurrent.futures.ThreadPoolExecutor(
            max_workers=_CHECKING_THREADS, thread_name_prefix="skynet-selftest"
        ) as pool:
            checked = list(
                pool.map(lambda n: contexts[n].run(check_item, n, ordered[n]), range(len(ordered)))
            )
        for item, (found, skipped_null) in zip(ordered, checked, strict=True):
            failures.extend(found)
            if skipped_null:
                skipped.append(item.id)
    calls = next(counted) - 1
    return CheckReport(
        items_checked=len(items),
        failures=tuple(failures),
        null_control_skipped=tuple(skipped),
        subject=rules.subject,
        mode=mode,
        unkeyed=tuple(i.id for i in unkeyed),
        unkeyed_why=why,
        metric_calls=calls,
    )
