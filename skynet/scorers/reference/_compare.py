"""One scoring pass: the walk over a reference record up the ladder, and lists matched as sets."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from skynet.errors import DatasetError
from skynet.scorers.embed import Embedder
from skynet.scorers.reference._dates import _fixed_date, _loose_date, _same_date
from skynet.scorers.reference._judge_prompts import (
    JUDGE_NUMBER_EXACT,
    JUDGE_NUMBER_PARTIAL,
    JUDGE_TEXT,
    parse_grade,
)
from skynet.scorers.reference._results import FieldResult, ListResult, Match, Unmatched
from skynet.scorers.reference._rungs import DATE, EXACT, EXTRA, JUDGE, MISSING, SHAPE, SIMILARITY
from skynet.scorers.reference._values import (
    _absent,
    _boolean,
    _has_value,
    _leaves,
    _norm,
    _number,
    _same_number,
    _scalar_key,
    _shown,
)

if TYPE_CHECKING:
    from skynet.scorers.reference._scorer import ReferenceScorer

_MEMO_LIMIT = 100_000  # embedded texts kept in memory per scorer before the memo starts afresh


class _Tally:
    """What a comparison found: summed credit, counts, detail, and what a judge would have graded."""

    __slots__ = ("credit", "reference", "given", "fields", "lists", "unjudged", "deferred")

    def __init__(self) -> None:
        self.credit = 0.0
        self.reference = 0
        self.given = 0
        self.fields: list[FieldResult] = []
        self.lists: dict[str, ListResult] = {}
        self.unjudged: list[str] = []  # paths a judge would have graded, had there been one
        self.deferred = 0  # judge-able values scored without the judge while matching lists

    def add(self, result: FieldResult, reference: int = 1, given: int = 1) -> None:
        self.fields.append(result)
        if result.credit is None:
            return  # a judge error: left out of the scores
        self.credit += result.credit
        self.reference += reference
        self.given += given

    def merge(self, other: _Tally) -> None:
        self.credit += other.credit
        self.reference += other.reference
        self.given += other.given
        self.fields.extend(other.fields)
        self.lists.update(other.lists)
        self.unjudged.extend(other.unjudged)
        self.deferred += other.deferred

    def scores(self) -> tuple[float, float, float]:
        """(quality, completeness, correctness); see the package docstring for the formulas."""
        if self.reference == 0 and self.given == 0:
            return 1.0, 1.0, 1.0
        completeness = self.credit / self.reference if self.reference else 1.0
        correctness = self.credit / self.given if self.given else 0.0
        quality = 2.0 * self.credit / (self.reference + self.given)
        return quality, completeness, correctness


class _Pass:
    """Scoring one candidate against one reference with a scorer's settings."""

    __slots__ = ("s", "item_id", "embedder", "memo")

    def __init__(self, scorer: ReferenceScorer, item_id: str, embedder: Embedder | None) -> None:
        self.s = scorer
        self.item_id = item_id
        self.embedder = embedder
        self.memo = scorer._memo

    # The walk ------------------------------------------------------------------------------------

    def value(
        self, t: _Tally, path: str, pattern: str, ref: Any, cand: Any, judge_ok: bool
    ) -> None:
        ref_kind = type(ref)
        if ref_kind is dict:
            if _absent(cand):
                cand = {}
            elif type(cand) is not dict:
                t.add(FieldResult(path, cand, ref, SHAPE, False, 0.0), _leaves(ref), _leaves(cand))
                return
            self.record(t, path, pattern, ref, cand, judge_ok)
        elif ref_kind is list:
            if _absent(cand):
                cand = []
            elif type(cand) is not list:
                t.add(FieldResult(path, cand, ref, SHAPE, False, 0.0), _leaves(ref), _leaves(cand))
                return
            self.list_field(t, path, pattern, ref, cand, judge_ok)
        elif _absent(ref):
            given = _leaves(cand)
            if given:
                t.add(FieldResult(path, cand, None, EXTRA, False, 0.0), 0, given)
        elif _absent(cand):
            t.add(FieldResult(path, None, ref, MISSING, False, 0.0), 1, 0)
        elif type(cand) is dict or type(cand) is list:
            t.add(FieldResult(path, cand, ref, SHAPE, False, 0.0), 1, _leaves(cand))
        else:
            t.add(self.leaf(t, path, pattern, ref, cand, judge_ok))

    def record(
        self, t: _Tally, path: str, pattern: str, ref: dict, cand: dict, judge_ok: bool
    ) -> None:
        fields = t.fields
        same = 0
        for key, rv in ref.items():
            cv = cand.get(key)
            sub = f"{path}.{key}" if path else str(key)
            # The common cases inline: two equal texts, two equal numbers or booleans of one type
            # (the exact rung's fast path).
            kind = type(rv)
            if (
                kind is str
                and type(cv) is str
                and (rv == cv or _norm(rv) == _norm(cv))
                and rv.strip()
            ) or ((kind is int or kind is float or kind is bool) and type(cv) is kind and rv == cv):
                fields.append(FieldResult(sub, cv, rv, EXACT, True, 1.0))
                same += 1
            else:
                sub_pattern = f"{pattern}.{key}" if pattern else str(key)
                self.value(t, sub, sub_pattern, rv, cv, judge_ok)
        t.credit += same
        t.reference += same
        t.given += same
        for key, cv in cand.items():
            if key not in ref:
                given = _leaves(cv)
                if given:
                    sub = f"{path}.{key}" if path else str(key)
                    t.add(FieldResult(sub, cv, None, EXTRA, False, 0.0), 0, given)

    # One value -----------------------------------------------------------------------------------

    def leaf(
        self, t: _Tally, path: str, pattern: str, ref: Any, cand: Any, judge_ok: bool
    ) -> FieldResult:
        s = self.s
        ref_kind, cand_kind = type(ref), type(cand)
        if ref_kind is cand_kind and ref == cand:
            return FieldResult(path, cand, ref, EXACT, True, 1.0)
        if ref_kind is str and cand_kind is str and _norm(ref) == _norm(cand):
            return FieldResult(path, cand, ref, EXACT, True, 1.0)
        # Booleans: all or nothing, never a number, never embedded.
        if ref_kind is bool or cand_kind is bool:
            equal = _boolean(ref) is not None and _boolean(ref) == _boolean(cand)
            return FieldResult(path, cand, ref, EXACT, equal, 1.0 if equal else 0.0)
        ref_number, cand_number = _number(ref), _number(cand)
        # Dates: a reference date (or any value of a `dates` field) is compared as a calendar
        # value, whatever the answer looks like; never by similarity, never as a number.
        if ref_kind is str and ref_number is None and pattern not in s.exact:
            forced = pattern in s.dates
            ref_date = _fixed_date(ref)
            if ref_date is None and forced:
                ref_date = _loose_date(ref, forced=True)
                if ref_date is None:
                    raise DatasetError(
                        f"item '{self.item_id}': field '{path}' is listed in `dates`, but its "
                        f"reference {_shown(ref)} is not a date; fix the reference or the option"
                    )
            if ref_date is not None:
                cand_text = cand if cand_kind is str else str(cand)
                cand_date = _fixed_date(cand_text) or _loose_date(cand_text, forced=forced)
                if cand_date is None:
                    return FieldResult(
                        path, cand, ref, DATE, False, 0.0, note="the answer is not a date read here"
                    )
                equal = _same_date(ref_date, cand_date)
                return FieldResult(path, cand, ref, DATE, equal, 1.0 if equal else 0.0)
        # Numbers: equal, else the judge (or a mismatch); never embedded.
        if (
            ref_number is not None
            and cand_number is not None
            and _same_number(ref_number, cand_number)
        ):
            return FieldResult(path, cand, ref, EXACT, True, 1.0)
        if pattern in s.exact:
            return FieldResult(path, cand, ref, EXACT, False, 0.0)
        if ref_number is not None or cand_number is not None:
            return self.judged(t, path, pattern, ref, cand, "number", judge_ok)
        ref_text = ref if ref_kind is str else str(ref)
        cand_text = cand if cand_kind is str else str(cand)
        if pattern in s.free_text:
            return self.judged(t, path, pattern, ref_text, cand_text, "text", judge_ok)
        if self.embedder is None:
            return FieldResult(path, cand, ref, EXACT, False, 0.0)
        similarity = self.similarity(ref_text, cand_text)
        equal = similarity >= s.threshold
        return FieldResult(path, cand, ref, SIMILARITY, equal, 1.0 if equal else 0.0, similarity)

    def judged(
        self, t: _Tally, path: str, pattern: str, ref: Any, cand: Any, kind: str, judge_ok: bool
    ) -> FieldResult:
        """A free-text value or a non-equal number: the judge, or what stands in for it."""
        s = self.s
        if s.judge is not None and judge_ok:
            return self.ask_judge(path, pattern, ref, cand, kind)
        if s.judge is None:
            t.unjudged.append(path)
        else:
            t.deferred += 1
        if kind == "text" and self.embedder is not None:
            similarity = self.similarity(ref, cand)
            credit = min(1.0, max(0.0, similarity))
            return FieldResult(
                path, cand, ref, SIMILARITY, similarity >= s.threshold, credit, similarity
            )
        return FieldResult(path, cand, ref, EXACT, False, 0.0)

    def ask_judge(self, path: str, pattern: str, ref: Any, cand: Any, kind: str) -> FieldResult:
        from skynet.models.client import current

        s = self.s
        if kind == "text":
            instructions = JUDGE_TEXT
        elif pattern in s.partial_numeric:
            instructions = JUDGE_NUMBER_PARTIAL
        else:
            instructions = JUDGE_NUMBER_EXACT
        # The field's name without list indices: the same pair of values in any list position
        # is one cached call.
        payload = json.dumps(
            {"field": pattern, "reference": ref, "answer": cand}, ensure_ascii=False, default=str
        )
        messages = [
            {"role": "system", "content": instructions},
            {"role": "user", "content": payload},
        ]
        reply = current(for_metric=True).complete(
            "metric", messages, model=s.judge, draw=0, temperature=0.0, max_tokens=16
        )
        grade = parse_grade(reply.text)
        if grade is None:
            return FieldResult(
                path,
                cand,
                ref,
                JUDGE,
                None,
                None,
                note=(
                    f"the judge '{s.judge}' replied {_shown(reply.text, 60)}, not an integer "
                    "0-100; the field is left out of the scores"
                ),
            )
        return FieldResult(path, cand, ref, JUDGE, grade >= 50, grade / 100.0, grade=grade)

    # Similarity ----------------------------------------------------------------------------------

    def similarity(self, a: str, b: str) -> float:
        va, vb = self.vector(a), self.vector(b)
        return float(np.dot(va, vb))

    def vector(self, text: str) -> np.ndarray:
        key = text.strip()
        found = self.memo.get(key)
        if found is None:
            assert self.embedder is not None
            found = self.embedder.embed([key])[0]
            with self.s._lock:
                if len(self.memo) >= _MEMO_LIMIT:
                    self.memo.clear()
                self.memo[key] = found
        return found

    def prefetch(self, texts: Iterable[str]) -> None:
        """Embed, in one batch, those texts the memo lacks."""
        assert self.embedder is not None
        missing = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if not missing:
            return
        rows = self.embedder.embed(missing)
        with self.s._lock:
            if len(self.memo) + len(missing) > _MEMO_LIMIT:
                self.memo.clear()
            for text, row in zip(missing, rows, strict=True):
                self.memo[text] = row

    # Lists ---------------------------------------------------------------------------------------

    def list_field(
        self, t: _Tally, path: str, pattern: str, ref: list, cand: list, judge_ok: bool
    ) -> None:
        refs = [(i, v) for i, v in enumerate(ref) if _has_value(v)]
        cands = [(j, v) for j, v in enumerate(cand) if _has_value(v)]
        equal: dict[int, int] = {}  # reference position -> candidate position, exactly equal
        if refs and cands and _scalars(refs) and _scalars(cands):
            # Pair exactly equal items by value first. Optimal when every pair scores 0 or 1 by
            # a transitive equality (no embedder), or when every item finds its equal (the best
            # total there is); otherwise a similarity could beat it, and the assignment decides.
            keys = [_scalar_key(v) for _, v in refs]
            cand_keys = [_scalar_key(v) for _, v in cands]
            if self.embedder is None or sorted(keys) == sorted(cand_keys):
                waiting: dict[tuple[str, Any], list[int]] = {}
                for b, key in enumerate(cand_keys):
                    waiting.setdefault(key, []).append(b)
                for a, key in enumerate(keys):
                    free = waiting.get(key)
                    if free:
                        equal[a] = free.pop(0)
        found: dict[int, tuple[int, _Tally]] = {}  # the other pairs, with their detail
        if len(equal) < len(refs) and len(equal) < len(cands):
            taken = set(equal.values())
            rest_refs = [a for a in range(len(refs)) if a not in equal]
            rest_cands = [b for b in range(len(cands)) if b not in taken]
            self.assign(found, refs, cands, rest_refs, rest_cands, path, pattern + "[]", judge_ok)
        matched: list[Match] = []
        for a in sorted(equal.keys() | found.keys()):
            i, rv = refs[a]
            if a in equal:
                j, cv = cands[equal[a]]
                same = FieldResult(f"{path}[{i}]", cv, rv, EXACT, True, 1.0)
                t.add(same)
                matched.append(Match(i, j, rv, cv, 1.0, (same,)))
            else:
                b, pair = found[a]
                j, cv = cands[b]
                t.merge(pair)
                matched.append(Match(i, j, rv, cv, pair.scores()[0], tuple(pair.fields)))
        taken = set(equal.values()) | {b for b, _ in found.values()}
        missed = tuple(
            Unmatched(i, v) for a, (i, v) in enumerate(refs) if a not in equal and a not in found
        )
        hallucinated = tuple(Unmatched(j, v) for b, (j, v) in enumerate(cands) if b not in taken)
        if missed:
            t.reference += sum(_leaves(u.value) for u in missed)
        if hallucinated:
            t.given += sum(_leaves(u.value) for u in hallucinated)
        t.lists[path] = ListResult(path, tuple(matched), missed, hallucinated)

    def assign(
        self,
        found: dict[int, tuple[int, _Tally]],
        refs: list[tuple[int, Any]],
        cands: list[tuple[int, Any]],
        rest_refs: list[int],
        rest_cands: list[int],
        path: str,
        item_pattern: str,
        judge_ok: bool,
    ) -> None:
        """Match the remaining items one to one by an optimal assignment on their pair scores."""
        trials: dict[tuple[int, int], _Tally] = {}
        scores = np.zeros((len(rest_refs), len(rest_cands)))
        for x, a in enumerate(rest_refs):
            i, rv = refs[a]
            for y, b in enumerate(rest_cands):
                # Every rung but the judge: n x m judge calls would be paid for pairs that are
                # then thrown away. The matched pairs are judged below.
                trial = _Tally()
                self.value(trial, f"{path}[{i}]", item_pattern, rv, cands[b][1], False)
                trials[x, y] = trial
                scores[x, y] = trial.scores()[0]
        bar = self.s.match_bar
        if len(rest_refs) == 1 or len(rest_cands) == 1:
            # One side has one item: the best pair is the optimal assignment.
            x, y = np.unravel_index(int(np.argmax(scores)), scores.shape)
            chosen = [(int(x), int(y))]
        else:
            from scipy.optimize import linear_sum_assignment

            rows, cols = linear_sum_assignment(np.where(scores >= bar, scores, 0.0), maximize=True)
            chosen = list(zip(rows.tolist(), cols.tolist(), strict=True))
        for x, y in chosen:
            if scores[x, y] < bar:
                continue
            a, b = rest_refs[x], rest_cands[y]
            pair = trials[x, y]
            if pair.deferred and judge_ok and self.s.judge is not None:
                pair = _Tally()
                self.value(
                    pair, f"{path}[{refs[a][0]}]", item_pattern, refs[a][1], cands[b][1], True
                )
            found[a] = (b, pair)


def _scalars(items: list[tuple[int, Any]]) -> bool:
    return all(type(v) is not dict and type(v) is not list for _, v in items)


def _strings(value: Any, pattern: str, skip: frozenset[str], out: dict[str, str]) -> None:
    """The text values of a record that may reach the embedder, by their normalised form.

    Left out: numbers, dates (in a form read without dateutil), and fields in `skip` (exact and
    dates fields), none of which is ever embedded.
    """
    kind = type(value)
    if kind is str:
        text = value.strip()
        if text and pattern not in skip and _number(text) is None and _fixed_date(text) is None:
            out.setdefault(_norm(text), text)
    elif kind is dict:
        for key, v in value.items():
            _strings(v, f"{pattern}.{key}" if pattern else key, skip, out)
    elif kind is list:
        for v in value:
            _strings(v, pattern + "[]", skip, out)
