"""The scorer registry, the scorer self-test, and a scorer seen as a metric.py score function.

The registry, not the caller, maps a name to a scorer; an unknown name lists the known ones.
Built-in scorers are listed in skynet.registry (one line each), and so are plugins' scorers
(entry-point group "skynet.scorers"); both are built fresh by `get` with the options it is handed.
Scorers a user registers in-process (`register`) are kept as the objects registered.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

from skynet import registry
from skynet.contract import UNDECLARED_REASON as UNDECLARED_REASON
from skynet.contract import (
    CheckFailure,
    CheckReport,
    Metric,
    SelfTestRules,
    check_metric,
    scored_item_id,
)
from skynet.data import Item
from skynet.errors import ConfigError
from skynet.scorers.base import EMPTY_REPLY, Call, GradedScorer, Reply, Scorer, Verdict
from skynet.scorers.reference import ReferenceScorer

__all__ = [
    "scorer_metric",
    "ANSWER_KEY",
    "NULL_CONTROL",
    "UNDECLARED_REASON",
    "SCORER_ERROR",
    "SelftestFailure",
    "SelftestReport",
    "as_metric",
    "metric_of",
    "get",
    "names",
    "register",
    "selftest",
    "to_reply",
]

ANSWER_KEY = "answer key"
NULL_CONTROL = "null control"
SCORER_ERROR = "scorer error"

_registered: dict[str, Scorer | GradedScorer] = {}

S = TypeVar("S", bound=Scorer | GradedScorer)

_short = reprlib.Repr()
_short.maxstring = 80
_short.maxother = 80


def names() -> list[str]:
    """Every scorer name `get` knows: the built-ins and plugins, then the registered ones."""
    return registry.names("scorer") + sorted(_registered)


def _known() -> str:
    return ", ".join(names())


@overload
def get(name: Literal["reference"], **options: Any) -> ReferenceScorer: ...
@overload
def get(name: str, **options: Any) -> Scorer: ...
def get(name: str, **options: Any) -> Any:
    """The scorer registered under `name`, built with `options` when it is a built-in.

    Most scorers give a Verdict (a Scorer); a GradedScorer such as `reference` grades in [0, 1].

    Raises:
        ConfigError: no scorer has that name (the message lists the known ones), an option is
            unknown (the message lists the scorer's options), or an option's value is refused.
    """
    factory = registry.load("scorer", name) if registry.is_known("scorer", name) else None
    if factory is not None:
        accepted = [
            p.name
            for p in inspect.signature(factory).parameters.values()
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            have = ", ".join(accepted) or "none"
            raise ConfigError(
                f"scorer '{name}' has no option {', '.join(map(repr, unknown))}; its options: "
                f"{have}"
            )
        return factory(**options)
    scorer = _registered.get(name)
    if scorer is None:
        raise ConfigError(f"no scorer named {name!r}; known scorers: {_known()}")
    if options:
        raise ConfigError(
            f"scorer '{name}' was registered as an object and takes no options; got "
            f"{', '.join(sorted(options))}: register one scorer per setting under its own name"
        )
    return scorer


def register(scorer: S) -> S:
    """Make `scorer` available to `get` under its name. Returns it, so it can decorate.

    Raises:
        ConfigError: scorer is None, has no name or an empty one, or its name is a built-in's or
            already registered.
    """
    if scorer is None:
        raise ConfigError("register() was handed None; pass a scorer object")
    name = getattr(scorer, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            f"register() was handed a scorer with name {name!r}; give it a non-empty str name"
        )
    if name in registry.BUILTIN["scorer"]:
        raise ConfigError(
            f"scorer name {name!r} is a built-in scorer's; register yours under another name"
        )
    if name in _registered:
        raise ConfigError(
            f"a scorer named {name!r} is already registered; register yours under another name"
        )
    if _graded(scorer):
        needed = ("version", "config_hash", "key")
        shape = "a graded scorer has name, version, config_hash, key(item) and metric_result"
    else:
        needed = ("version", "reasons", "key", "score")
        shape = "a scorer has name, version, reasons, key(item) and score(item, reply)"
    missing = [attr for attr in needed if not hasattr(scorer, attr)]
    if missing:
        raise ConfigError(f"scorer {name!r} has no {', '.join(missing)}; {shape}")
    _registered[name] = scorer
    return scorer


def _graded(scorer: object) -> bool:
    """True for a GradedScorer: one that grades through metric_result(item, output)."""
    return callable(getattr(scorer, "metric_result", None))


def _unregister(name: str) -> None:
    """Forget a registered scorer (for tests)."""
    _registered.pop(name, None)


# -- self-test -----------------------------------------------------------------------------------

# A scorer's self-test is the metric self-test (skynet.contract.check_metric) of the scorer seen
# as a metric: one self-test for metric.py, Python metrics and scorers. The scorer's rules (its
# key scores correct, its reasons are declared, its exceptions are "scorer error"s) ride on the
# Metric that metric_of builds.
SelftestFailure = CheckFailure
SelftestReport = CheckReport


def selftest(scorer: Scorer | GradedScorer, items: Iterable[Item]) -> CheckReport:
    """Hold a scorer to its contract on every item it will score.

    Checks, per item:
      - "answer key": the item's own answer, key(item), scores correct (a graded scorer: 1.0),
        and no other item's answer scores higher;
      - "null control": a reply with no text and no calls (a graded scorer: the empty output)
        scores lower, unless the item's key is itself empty (left out of this check only);
      - "undeclared reason": a verdict gave a reason the scorer does not declare.
    An exception from key or score is not a wrong answer: it is reported as a "scorer error".
    """
    return check_metric(metric_of(scorer), items)


# -- a scorer as a metric ------------------------------------------------------------------------


def _to_call(value: Any) -> Call:
    if isinstance(value, Call):
        return value
    if isinstance(value, Mapping):
        fn = value.get("function")
        source = fn if isinstance(fn, Mapping) else value  # OpenAI's {"function": {...}} shape
        name = source.get("name", "")
        arguments = source.get("arguments", "")
        if not isinstance(arguments, str):
            # Already-parsed arguments: serialised back, so the scorer reads them as text.
            arguments = json.dumps(arguments, ensure_ascii=False)
        return Call(name=name, arguments=arguments)
    raise TypeError(f"a tool call must be a Call or a dict with name and arguments, not {value!r}")


def to_reply(output: Any) -> Reply:
    """An artifact's output as a Reply: a Reply as is, a dict {text, calls, truncated}, a str as
    the reply's text, None as the empty reply."""
    if isinstance(output, Reply):
        return output
    if output is None:
        return EMPTY_REPLY
    if isinstance(output, str):
        return Reply(text=output)
    if isinstance(output, Mapping):
        text = output.get("text")
        calls: Sequence[Any] = output.get("calls") or ()
        return Reply(
            text="" if text is None else str(text),
            calls=tuple(_to_call(c) for c in calls),
            truncated=bool(output.get("truncated", False)),
        )
    raise TypeError(
        f"the output is a {type(output).__name__}; a scorer reads a Reply, a dict "
        "{text, calls, truncated} or a str"
    )


def _metric_item(input: Any, expected: Mapping[str, Any] | None) -> Item:
    """The Item a metric call's (input, expected) describe, under the id of the item the run is
    scoring (contract.scored_item_id); called outside a run, an input's own "id" or "item"."""
    given = scored_item_id()
    if given is None:
        given = str(input.get("id", "item")) if isinstance(input, Mapping) else "item"
    return Item(
        id=given,
        input=dict(input) if isinstance(input, Mapping) else {},
        expected=dict(expected) if expected is not None else None,
    )


def as_metric(scorer: Scorer | GradedScorer) -> Callable[..., tuple[float, dict[str, Any]]]:
    """A metric.py `score(input, output, expected=None)` that asks `scorer`.

    Correct scores 1.0, wrong 0.0; the feedback is the verdict's reason and detail, so a
    reflection model reads why. A GradedScorer returns its own pair: (grade, {"feedback",
    "scores"}). The scorer's exceptions propagate: the run records an error, not a score.
    """
    name = scorer.name
    if isinstance(scorer, GradedScorer):
        graded = scorer

        def grade(
            input: Mapping[str, Any], output: Any, expected: Mapping[str, Any] | None = None
        ) -> tuple[float, dict[str, Any]]:
            return graded.metric_result(_metric_item(input, expected), output)

        grade.__name__ = f"score_{name.replace('-', '_')}"
        grade.__doc__ = f"Grades with the '{name}' scorer (version {scorer.version})."
        return grade

    def score(
        input: Mapping[str, Any], output: Any, expected: Mapping[str, Any] | None = None
    ) -> tuple[float, dict[str, Any]]:
        item = _metric_item(input, expected)
        # A scorer with score_output reads the output as it came (e.g. a dict reporting its own
        # "error", which a Reply cannot hold); the others read it as a Reply.
        score_output: Callable[[Item, Any], Verdict] | None = getattr(scorer, "score_output", None)
        if score_output is not None:
            verdict = score_output(item, output)
        else:
            verdict = scorer.score(item, to_reply(output))
        if not isinstance(verdict, Verdict):
            raise TypeError(
                f"scorer '{name}' returned {_short.repr(verdict)}, not a Verdict; score() must "
                "return Verdict(correct, reason, detail)"
            )
        feedback = f"{verdict.reason}: {verdict.detail}"
        return (1.0 if verdict.correct else 0.0), {"feedback": feedback, "reason": verdict.reason}

    score.__name__ = f"score_{name.replace('-', '_')}"
    score.__doc__ = f"Scores with the '{name}' scorer (version {scorer.version})."
    return score


def _is_null(reply: Reply) -> bool:
    return not reply.text and not reply.calls


def _reply_as_output(reply: Reply) -> dict[str, Any]:
    """A Reply in the shape a run's output takes (and to_reply reads back)."""
    if _is_null(reply) and not reply.truncated:
        return {}  # the empty output: the contract's self-test leaves such keys out of its null control
    return {
        "text": reply.text,
        "calls": [{"name": c.name, "arguments": c.arguments} for c in reply.calls],
        "truncated": reply.truncated,
    }


def scorer_metric(
    name: str, options: Mapping[str, Any] | None = None, *, depends_on: Sequence[str] = ()
) -> Metric:
    """A built-in scorer as a run's metric (a skynet.Metric): `metric.name` in skynet.toml."""
    options = dict(options or {})
    return metric_of(get(name, **options), options=options, depends_on=depends_on)


def metric_of(
    scorer: Scorer | GradedScorer,
    *,
    options: Mapping[str, Any] | None = None,
    depends_on: Sequence[str | None] = (),
) -> Metric:
    """The one adapter from a scorer to the metric contract: a Metric whose score function asks
    `scorer` (as_metric), whose answer key is the scorer's key(item), and whose self-test rules
    are the scorer's.

    Its source hash names the scorer, its version, its options (a graded scorer's config_hash)
    and `depends_on` (hashes of what else its grades rest on, e.g. the reference set), so
    results are marked stale when any of them changes.
    """
    name = str(getattr(scorer, "name", type(scorer).__name__))
    rules = SelfTestRules(
        subject=f"scorer '{name}'", key_scores=1.0, raised_as=SCORER_ERROR, reasons=None
    )
    if isinstance(scorer, GradedScorer):
        # A graded scorer's key is already an output, and its config_hash covers every setting
        # (options such as an embedder object have no stable text of their own).
        graded = scorer
        identity = json.dumps([graded.name, graded.version, graded.config_hash, *depends_on])
        return Metric(
            as_metric(graded),
            name=f"scorer '{graded.name}' v{graded.version}",
            item_key=graded.key,
            source_hash=hashlib.sha256(identity.encode()).hexdigest(),
            rules=rules,
        )
    verdicts = scorer

    def key(item: Item) -> dict[str, Any]:
        return _reply_as_output(verdicts.key(item))

    identity = json.dumps(
        [name, verdicts.version, dict(options or {}), *depends_on], sort_keys=True, default=str
    )
    return Metric(
        as_metric(verdicts),
        name=f"scorer '{name}' v{verdicts.version}",
        item_key=key,
        source_hash=hashlib.sha256(identity.encode()).hexdigest(),
        rules=dataclasses.replace(rules, reasons=frozenset(verdicts.reasons)),
    )
