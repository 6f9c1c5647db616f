"""GEPA's search without its waits: the next proposal is written while the last child is scored
on val (issue 30).

gepa's loop runs one step at a time: evaluate the parent on a minibatch, ask the reflection
model, evaluate the child, then score the child on the whole val split, each step waiting for
the last; while the reflection reply or the val evaluation run, most of the model's slots wait,
and a step's critical path is four calls long. Here:
- A child is scored on its own minibatch and, at once, on the minibatch the next proposal will
  read (one proposal at a time only): when the next proposal is drawn from it, that proposal goes
  straight to its reflection call.
- The child chosen for val is scored on val *beside the next proposal*: its items run on the
  same `concurrency` slots (_Slots), behind that proposal's own work, filling the slots the
  proposal leaves idle while its reflection is written. The seed's val evaluation runs beside
  the first proposal the same way (drawn from the seed: there is no other candidate).
So a step's critical path is two calls long: the reflection, then the child's minibatches.
With sampling_strategy "independent:P", proposals go in waves of P from P parents, and of a
wave's accepted proposals the one with the largest gain on its minibatch is scored on val
(gepa's BestImprovement; the others are recorded rejected, as gepa reports them), beside the
next wave; a child is then not scored ahead.

What is kept from gepa, and how the order of events differs:
- Each proposal is gepa's: a parent drawn from the Pareto frontier by gepa's own function
  (frontier "instance" per val item, or "hybrid" per val item and named score), a minibatch of
  train items (epoch-shuffled, as gepa's sampler), one component rewritten (round robin over the
  parent's components), the reflection prompt gepa's template renders, acceptance when the
  child's minibatch sum beats the parent's, a parent perfect on its minibatch not reflected on
  (skip_perfect_score).
- While a child's val evaluation runs, it takes its parent's place in the next parent draw (it
  beat its parent on a minibatch; its val scores are not known yet). Its val scores join the
  pool and the frontier when the next proposal (wave) is done, before that one's child goes to
  val. gepa's loop would draw the next parent after the val evaluation, from the frontier with
  the child at its measured scores.
- A child is scored on one minibatch more than gepa scores it; spent for nothing when the next
  proposal does not build on it (a rejected child), a minibatch of calls.
- Proposals (waves) are barriers and each draw is seeded by the seed and the wave: the same seed
  gives the same run whatever order the model's replies arrive in.
- The budget is never exceeded: a proposal (wave) starts only when what it may spend (three
  minibatches each, two with P > 1) and the val evaluations of the last choice and its own fit
  in what is left after the calls already made or begun (gepa's loop checks at the start of an
  iteration and may overshoot by one).
- It stops on the budget, the money or time budget (ctx.should_stop), a perfect best on val, or
  `patience` proposals (counted in whole waves, as the gepa engine counts iterations) without a
  better best val score; the val evaluation in flight then finishes and is kept.
"""

from __future__ import annotations

import dataclasses
import itertools
import queue
import random
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from engines.budget import gepa_proposals
from engines.gepa import GepaEngine, _extract, _gepa_template, _Reflector, _shown, evaluated
from engines.stops import PerfectOnVal
from skynet.data import Item
from skynet.engine import Candidate, EngineContext, EngineOutcome, EngineSettings
from skynet.errors import ConfigError

__all__ = ["AsyncGepaEngine", "TAKEN"]

# gepa's options this search reads; any other is refused by name (it would be silently ignored).
TAKEN = frozenset(
    {
        "frontier_type",
        "sampling_strategy",
        "selection_strategy",
        "perfect_score",
        "skip_perfect_score",
    }
)
# The forms of gepa's strategies it runs: proposals one at a time or N at once from N parents
# drawn apart, and of a wave's accepted proposals the one with the largest gain scored on val.
_FORMS = {
    "sampling_strategy": (
        re.compile(r"single|independent:[1-9]\d*"),
        '"single" or "independent:N"',
    ),
    "selection_strategy": (re.compile(r"best"), '"best"'),
}

_URGENT, _BEHIND = 0, 1  # a wave's own work; a val evaluation that runs beside the next wave


@dataclass
class _Pool:
    """The candidates accepted so far, their val scores and the Pareto frontier over them."""

    candidates: list[Candidate] = field(default_factory=list)
    parents: list[list[int | None]] = field(default_factory=list)
    val: list[dict[str, float]] = field(default_factory=list)  # item id -> score
    objectives: list[dict[str, float]] = field(default_factory=list)  # named score -> mean
    front: dict[Any, set[int]] = field(default_factory=dict)
    best_at: dict[Any, float] = field(default_factory=dict)
    rewrites: dict[int, int] = field(default_factory=dict)  # candidate -> components rewritten

    def mean(self, index: int) -> float:
        scores = self.val[index]
        return sum(scores.values()) / len(scores) if scores else 0.0

    def add(
        self,
        candidate: Candidate,
        parent: int | None,
        val: dict[str, float],
        objectives: dict[str, float],
        hybrid: bool,
    ) -> int:
        index = len(self.candidates)
        self.candidates.append(dict(candidate))
        self.parents.append([parent])
        self.val.append(val)
        self.objectives.append(objectives)
        keys: list[tuple[Any, float]] = [(("item", i), s) for i, s in val.items()]
        if hybrid:
            keys += [(("objective", name), s) for name, s in objectives.items()]
        for key, score in keys:
            best = self.best_at.get(key)
            if best is None or score > best:
                self.best_at[key], self.front[key] = score, {index}
            elif score == best:
                self.front[key].add(index)
        return index

    def best(self) -> int:
        means = [self.mean(i) for i in range(len(self.candidates))]
        return max(range(len(means)), key=lambda i: (means[i], -i))


@dataclass(frozen=True)
class _Step:
    """What one proposal came to."""

    parent: int | None  # None: the seed
    child: Candidate | None  # None: no proposal (a perfect parent, or no usable reflection)
    accepted: bool
    gain: float = 0.0  # the child's minibatch sum less the parent's
    detail: str = ""
    spent: int = 0  # metric calls made
    k: int = -1  # the proposal's number
    ahead: list[tuple[float, Any]] | None = None  # the child on proposal k + 1's minibatch


class AsyncGepaEngine:
    """gepa's reflective search, the next proposal written while the last child is scored on val
    (the module docstring)."""

    name = "gepa-async"
    proposals_for = staticmethod(gepa_proposals)  # it spends its budget as gepa's steps do

    def min_metric_calls(self, *, train: int, val: int, minibatch_size: int) -> int:
        # gepa's (the seed on val, a parent and its child on a minibatch), and the child on val:
        # a proposal starts only when its val evaluation fits too (the module docstring).
        return 2 * val + 2 * min(minibatch_size, train)

    def choices(self, settings: EngineSettings) -> tuple[str, ...]:
        unknown = sorted(set(settings.options) - TAKEN)
        if unknown:
            raise ConfigError(
                f"[engine.options] {unknown[0]}: engine 'gepa-async' takes "
                f"{', '.join(sorted(TAKEN))}; for gepa's other options use engine 'gepa'"
            )
        for name, (form, said) in _FORMS.items():
            value = settings.options.get(name)
            if value is not None and not (isinstance(value, str) and form.fullmatch(value)):
                raise ConfigError(
                    f"[engine.options] {name} = {value!r}: engine 'gepa-async' runs {said}; "
                    "for gepa's other strategies use engine 'gepa'"
                )
        # gepa's template and reflection choices; what is asynchronous is said by its name
        # (and by Auto's reason when Auto chose it).
        return GepaEngine().choices(dataclasses.replace(settings, options={}))

    def optimize(self, ctx: EngineContext) -> EngineOutcome:
        return _Search(ctx).run()


def _parallel(options: Mapping[str, Any]) -> int:
    strategy = options.get("sampling_strategy")
    if isinstance(strategy, str) and strategy.startswith("independent:"):
        return max(1, int(strategy.split(":", 1)[1]))
    return 1  # gepa's default, "single"


class _Search:
    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        options = dict(ctx.settings.options)
        self.hybrid = options.get("frontier_type", "hybrid") == "hybrid"
        self.perfect = options.get("perfect_score")
        self.perfect_stop = PerfectOnVal(ctx, self.perfect)
        self.skip_perfect = bool(options.get("skip_perfect_score", True))
        self.minibatch = max(1, min(ctx.minibatch_size, len(ctx.train)))
        self.width = _parallel(options)
        # One proposal at a time: each child is also evaluated on the next proposal's minibatch,
        # beside its own, so a next proposal drawn from it goes straight to its reflection (the
        # step's critical path: reflection, then the child's minibatches). With several
        # proposals a wave would still wait for the others' parent minibatches: not done.
        self.speculate = self.width == 1
        settings = ctx.settings
        engine = GepaEngine()
        template = engine._template(settings)
        gepa_text = _gepa_template(
            settings.objective if template.name == "gepa" else "",
            settings.background if template.name == "gepa" else "",
        )
        self.template = template.text or gepa_text
        self.reflector = _Reflector(
            ctx,
            self.template,
            settings.reflection_max_tokens or template.max_tokens,
            settings.reflection_lm,
        )
        self.pool = _Pool()
        self.slots = _Slots(max(1, ctx.concurrency))
        self.spent = 0  # evaluations begun (a val evaluation counts when it is submitted)
        self.lock = threading.Lock()
        self.orders: dict[int, list[Item]] = {}  # epoch -> the train items in its order
        self.stopped_by = ""
        self.proposed = 0  # proposals made so far: proposal k reads the k-th minibatch

    # -- evaluations -----------------------------------------------------------------------

    def _submit(
        self, candidate: Candidate, items: list[Item], *, rank: int = _URGENT
    ) -> list[Future[tuple[float, Any]]]:
        """Each item's evaluation on the shared slots: (score, side info), side by side."""
        with self.lock:
            self.spent += len(items)
        return [self.slots.submit(rank, evaluated, self.ctx, candidate, item) for item in items]

    def _val(
        self, futures: list[Future[tuple[float, Any]]]
    ) -> tuple[dict[str, float], dict[str, float]]:
        """A val evaluation's per-item scores and mean named scores, once its items are done."""
        scored = [f.result() for f in futures]
        val = {item.id: score for item, (score, _) in zip(self.ctx.val, scored, strict=True)}
        named: dict[str, list[float]] = {}
        for _, side in scored:
            for name, value in (side.get("scores") or {}).items():
                named.setdefault(str(name), []).append(float(value))
        return val, {name: sum(v) / len(v) for name, v in named.items()}

    # -- one proposal ----------------------------------------------------------------------

    def _minibatch(self, k: int) -> list[Item]:
        """Proposal k's train items: the k-th minibatch of the train items in epoch-shuffled
        order (as gepa's EpochShuffledBatchSampler; epoch e shuffled by the seed and e)."""
        n, start = len(self.ctx.train), k * self.minibatch
        return [self._epoch(at // n)[at % n] for at in range(start, start + self.minibatch)]

    def _epoch(self, epoch: int) -> list[Item]:
        """The train items in epoch `epoch`'s order, shuffled once (proposal threads share it)."""
        with self.lock:
            order = self.orders.get(epoch)
            if order is None:
                order = list(self.ctx.train)
                random.Random(self.ctx.seed * 7919 + epoch).shuffle(order)
                self.orders[epoch] = order
            return order

    def _propose(
        self,
        k: int,
        parent: int,
        base: Candidate,
        component: str,
        queued: threading.Event,
        given: list[tuple[float, Any]] | None = None,
        ahead: bool = False,
    ) -> _Step:
        """Proposal k from `base`: its minibatch, the reflection, the child on the minibatch
        (and, one proposal at a time, on the next proposal's minibatch: `given` to it)."""
        ctx = self.ctx
        batch = self._minibatch(k)
        if given is None:
            try:
                futures = self._submit(base, batch)
            finally:
                queued.set()  # the parent's minibatch is ahead of the val evaluation (_loop)
            scored, spent = [f.result() for f in futures], len(batch)
        else:
            queued.set()
            scored, spent = given, 0  # counted when the last proposal evaluated it
        parent_sum = sum(score for score, _ in scored)
        top = 1.0 if self.perfect is None else float(self.perfect)
        if self.skip_perfect and all(score >= top for score, _ in scored):
            return _Step(parent=parent, child=None, accepted=False, spent=spent)
        shows = ctx.settings.reflection_shows
        from gepa.strategies.instruction_proposal import InstructionProposalSignature

        prompt = InstructionProposalSignature.prompt_renderer(
            {
                "current_instruction_doc": base[component],
                "dataset_with_feedback": [_shown(side, shows) for _, side in scored],
                "prompt_template": self.template,
            }
        )
        text = _extract(self.slots.submit(_URGENT, self.reflector, prompt).result()).strip()
        if not text or text == base[component]:
            return _Step(parent=parent, child=None, accepted=False, spent=spent)
        child = {**base, component: text}
        own = self._submit(child, batch)
        next_batch = self._submit(child, self._minibatch(k + 1)) if ahead else []
        child_sum = sum(f.result()[0] for f in own)
        return _Step(
            parent=parent,
            child=child,
            accepted=child_sum > parent_sum,
            gain=child_sum - parent_sum,
            detail=f"proposal {k}: minibatch sum {child_sum:g} against its parent's {parent_sum:g}",
            spent=spent + len(own) + len(next_batch),
            k=k,
            ahead=[f.result() for f in next_batch] if next_batch else None,
        )

    # -- the search ------------------------------------------------------------------------

    def _perfect_best(self) -> bool:
        """gepa's stop once a candidate is perfect on every val item (engines/stops.py)."""
        if self.perfect_stop(SimpleNamespace(prog_candidate_val_subscores=self.pool.val)):
            self.stopped_by = self.perfect_stop.said
            return True
        return False

    def run(self) -> EngineOutcome:
        try:
            self._loop()
        finally:
            self.slots.shutdown()
        if self.reflector.fatal is not None:
            raise self.reflector.fatal
        pool = self.pool
        return EngineOutcome(
            best_candidate=dict(pool.candidates[pool.best()]),
            candidates=[dict(c) for c in pool.candidates],
            parents=[list(p) for p in pool.parents],
            val_scores=[pool.mean(i) for i in range(len(pool.candidates))],
            metric_calls=self.spent,
            stopped_by=self.stopped_by,
        )

    def _wave_size(self, pending: _Pending | None) -> tuple[int, bool]:
        """How many proposals the next wave may make, and whether their children are scored
        ahead on the next minibatch: each proposal spends two minibatches (three, ahead), and
        the wave's choice a val evaluation, within what is left of max_metric_calls once the
        last wave's choice is scored on val."""
        limit = self.ctx.max_metric_calls
        if limit is None:
            return self.width, self.speculate
        waiting = len(self.ctx.val) if pending is not None and not pending.val else 0
        left = limit - self.spent - waiting - len(self.ctx.val)
        size = max(0, min(self.width, left // (2 * self.minibatch)))
        return size, self.speculate and left >= size * 3 * self.minibatch

    def _loop(self) -> None:
        ctx, pool = self.ctx, self.pool
        # Patience in whole waves, as the gepa engine counts it in iterations.
        waves_patience = -(-ctx.patience // self.width) if ctx.patience else 0
        proposals = ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="skynet-propose")
        # The last wave's choice, its val evaluation beside this wave: first the seed, whose val
        # evaluation runs beside the first proposal (drawn from it: there is no other).
        seed = _Step(parent=None, child=dict(ctx.seed_candidate), accepted=True)
        pending: _Pending | None = _Pending(seed)
        best, since_better, wave, stopping = float("-inf"), 0, 0, False
        try:
            while True:
                size, ahead = self._wave_size(pending)
                if stopping or size == 0 or ctx.should_stop() or self.reflector.fatal is not None:
                    break
                futures, queued = [], []
                rng = random.Random(ctx.seed * 1_000_003 + wave)
                for _ in range(size):
                    parent, base = self._draw(rng, pending)
                    names = list(base)
                    turn = pool.rewrites.get(parent, 0)
                    pool.rewrites[parent] = turn + 1
                    component = names[turn % len(names)]
                    queued.append(threading.Event())
                    given = None
                    if (
                        pending is not None
                        and parent == len(pool.candidates)
                        and pending.step.k + 1 == self.proposed
                    ):
                        given = pending.step.ahead
                    futures.append(
                        proposals.submit(
                            self._propose,
                            self.proposed,
                            parent,
                            base,
                            component,
                            queued[-1],
                            given,
                            ahead,
                        )
                    )
                    self.proposed += 1
                if pending is not None:
                    for event in queued:
                        event.wait()
                    self._start_val(pending)
                steps = [f.result() for f in futures]
                wave += 1
                if pending is not None:  # its val evaluation ran beside this wave
                    index = self._integrate(pending)
                    pending = None
                    if pool.mean(index) > best:
                        best, since_better = pool.mean(index), 0
                    else:
                        since_better += 1
                    stopping = self._perfect_best()
                chosen = self._choose(steps)
                if chosen is not None and not stopping:
                    assert chosen.child is not None
                    pending = _Pending(chosen)  # scored on val beside the next wave
                elif chosen is None:
                    since_better += 1
                if waves_patience and since_better >= waves_patience and not stopping:
                    stopping = True
                    self.stopped_by = f"no better val score in {ctx.patience} proposals (patience)"
                    ctx.log(
                        f"auto: no better val score in {ctx.patience} proposals (best "
                        f"{best:.3f}); stopping early"
                    )
            if pending is not None:
                self._start_val(pending)
                self._integrate(pending)
                self._perfect_best()
        except BaseException:
            self.slots.cancel_queued()  # a run-level fault or an interrupt: no call more
            raise
        finally:
            proposals.shutdown(wait=True)

    def _draw(self, rng: random.Random, pending: _Pending | None) -> tuple[int, Candidate]:
        """A parent drawn from the Pareto frontier by gepa's own function; the child whose val
        evaluation is in flight takes its parent's place (the module docstring)."""
        from gepa.gepa_utils import select_program_candidate_from_pareto_front

        pool = self.pool
        if pending is not None and pending.step.parent is None:  # the seed, in val evaluation
            assert pending.step.child is not None
            return len(pool.candidates), pending.step.child
        scores = [pool.mean(i) for i in range(len(pool.candidates))]
        front = pool.front
        if pending is not None:
            ahead, behind = len(pool.candidates), pending.step.parent
            assert behind is not None
            front = {
                key: {ahead if i == behind else i for i in members}
                for key, members in front.items()
            }
            scores.append(scores[behind])
        index = select_program_candidate_from_pareto_front(front, scores, rng)
        if pending is not None and index == len(pool.candidates):
            assert pending.step.child is not None
            return index, pending.step.child
        return index, pool.candidates[index]

    def _choose(self, steps: list[_Step]) -> _Step | None:
        """The wave's proposal for val: the accepted one with the largest gain on its minibatch
        (gepa's BestImprovement; the first on a tie); every proposal's verdict recorded."""
        accepted = [s for s in steps if s.accepted]
        chosen = max(accepted, key=lambda s: s.gain) if accepted else None
        for step in steps:
            if step.child is None or step.parent is None:
                continue
            base = self.pool.candidates[step.parent]
            if step is chosen:
                status, detail = "accepted", f"{step.detail}; into the pool"
            elif step.accepted:
                status = "rejected"
                detail = f"{step.detail}; not the wave's largest gain (selection best)"
            else:
                status, detail = "rejected", f"{step.detail}; not better"
            if step is not chosen:
                self.ctx.record_lineage(step.child, [base])
            self.ctx.record_proposal(status=status, detail=detail, parent=base)
        return chosen

    def _start_val(self, pending: _Pending) -> None:
        """The pending child's val evaluation, queued behind the wave's own work (its
        minibatches were queued first: _Slots runs the most urgent first)."""
        assert pending.step.child is not None
        if not pending.val:
            pending.val = self._submit(pending.step.child, list(self.ctx.val), rank=_BEHIND)

    def _integrate(self, pending: _Pending) -> int:
        step = pending.step
        assert step.child is not None
        val, objectives = self._val(pending.val)
        index = self.pool.add(step.child, step.parent, val, objectives, self.hybrid)
        parent = [] if step.parent is None else [self.pool.candidates[step.parent]]
        self.ctx.record_lineage(step.child, parent)
        return index


class _Slots:
    """`concurrency` worker threads taking the most urgent work first: a wave's minibatches and
    reflection calls (its critical path) ahead of the val evaluation running beside it, so that
    evaluation fills the slots the wave leaves idle (during its reflection replies) and never
    delays the wave. Work of one rank runs in the order submitted."""

    def __init__(self, workers: int) -> None:
        self.queue: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self.order = itertools.count()
        self.threads = [
            threading.Thread(target=self._work, name=f"skynet-slot-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in self.threads:
            thread.start()

    def submit(self, rank: int, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.queue.put((rank, next(self.order), (future, fn, args)))
        return future

    def _work(self) -> None:
        while True:
            _, _, job = self.queue.get()
            if job is None:
                return
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 — handed to the one who waits on it
                future.set_exception(exc)

    def cancel_queued(self) -> None:
        """Cancels the work not yet begun (whoever waits on it gets CancelledError)."""
        while True:
            try:
                _, _, job = self.queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job[0].cancel()

    def shutdown(self) -> None:
        """Lets the work queued so far finish, then ends the threads."""
        for _ in self.threads:
            self.queue.put((_BEHIND + 1, next(self.order), None))
        for thread in self.threads:
            thread.join()


@dataclass
class _Pending:
    """A wave's choice, and its val evaluation once begun (beside the next wave)."""

    step: _Step
    val: list[Future[tuple[float, Any]]] = field(default_factory=list)
