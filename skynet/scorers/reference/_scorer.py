"""The reference scorer: its options, identity (settings, config_hash), reference and grade."""

from __future__ import annotations

import hashlib
import json
import numbers
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from skynet.data import Item
from skynet.errors import ConfigError, DatasetError, MetricError
from skynet.scorers.embed import _DEFAULT_ALIASES, DEFAULT_EMBEDDER, Embedder, get_embedder
from skynet.scorers.reference._compare import _Pass, _strings, _Tally
from skynet.scorers.reference._output import _candidate
from skynet.scorers.reference._results import ReferenceResult
from skynet.scorers.reference._settings import _paths, _strictness, threshold_for


class ReferenceScorer:
    """The reference scorer, version 1: a JSON record graded field by field against a reference.

    Args:
        strictness: a number in [0, 1] or "lenient" (0.25), "normal" (0.5), "strict" (0.75):
            how similar two texts must be to count as equal (see threshold_for).
        embedder: "all-MiniLM-L6-v2" (the bundled model, the default), a litellm embedding model
            name, an Embedder, or None for exact matching only.
        judge: the judge model (a litellm name, called through skynet.models as the metric
            role), or None: free text is then graded by similarity and a non-equal number is a
            mismatch.
        free_text: field paths (e.g. "summary", "cast[].bio") whose text the judge grades, or,
            without a judge, the cosine gives partial credit.
        partial_numeric: number fields where the judge may give partial credit (273.37 for
            273.35); elsewhere it is told precision matters.
        dates: field paths always read as dates, in any form python-dateutil reads (month first
            when ambiguous); other fields are dates when both values are in an unambiguous form.
        exact: field paths compared by the exact rung only (identifiers, codes).
        match_bar: the least pair score at which two list items are matched, in (0, 1].
        column: the expected column holding the reference record (a JSON object, or its JSON
            text); None: the only expected column, or, when there are several, the expected
            columns themselves are the record's fields.
        cache_dir: the project's cache folder (.skynet): embeddings are kept there.

    Raises:
        ConfigError: an option's value is refused (the message says which and why).
    """

    name = "reference"
    version = 1

    def __init__(
        self,
        *,
        strictness: float | str = "normal",
        embedder: str | Embedder | None = DEFAULT_EMBEDDER,
        judge: str | None = None,
        free_text: Iterable[str] = (),
        partial_numeric: Iterable[str] = (),
        dates: Iterable[str] = (),
        exact: Iterable[str] = (),
        match_bar: float = 0.5,
        column: str | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.strictness = _strictness(strictness)
        self.threshold = threshold_for(self.strictness)
        if embedder is not None and not isinstance(embedder, str):
            if not isinstance(embedder, Embedder):
                raise ConfigError(
                    f"scorer 'reference': embedder {embedder!r} is not an embedder; give a model "
                    f"name ('{DEFAULT_EMBEDDER}' or a litellm embedding model), an object with "
                    ".name and .embed(texts), or None for exact matching only"
                )
        elif isinstance(embedder, str) and not embedder.strip():
            raise ConfigError(
                f"scorer 'reference': embedder is empty; give '{DEFAULT_EMBEDDER}', a litellm "
                "embedding model name, or None for exact matching only"
            )
        if isinstance(embedder, str) and embedder.strip().lower() == "none":
            embedder = None
        self.embedder_spec = embedder
        if judge is not None and (not isinstance(judge, str) or not judge.strip()):
            raise ConfigError(
                f"scorer 'reference': judge must be a model name (e.g. 'openai/gpt-4o-mini') or "
                f"None, not {judge!r}"
            )
        self.judge = judge.strip() if judge else None
        self.free_text = _paths("free_text", free_text)
        self.partial_numeric = _paths("partial_numeric", partial_numeric)
        self.dates = _paths("dates", dates)
        self.exact = _paths("exact", exact)
        for a, b in (("dates", "free_text"), ("exact", "free_text"), ("exact", "dates")):
            both = getattr(self, a) & getattr(self, b)
            if both:
                raise ConfigError(
                    f"scorer 'reference': {', '.join(sorted(both))} is in both {a} and {b}; a "
                    "field has one kind, list it in one"
                )
        if (
            isinstance(match_bar, bool)
            or not isinstance(match_bar, numbers.Real)
            or not 0.0 < float(match_bar) <= 1.0
        ):
            raise ConfigError(
                f"scorer 'reference': match_bar {match_bar!r} must be a number in (0, 1]"
            )
        self.match_bar = float(match_bar)
        if column is not None and (not isinstance(column, str) or not column):
            raise ConfigError(
                f"scorer 'reference': column must be an output column's name, not {column!r}"
            )
        self.column = column
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._embedder: Embedder | None = None
        self._resolved = False
        self._lock = threading.Lock()
        self._memo: dict[str, np.ndarray] = {}
        self._config_hash: str | None = None

    def __repr__(self) -> str:
        return (
            f"ReferenceScorer(strictness={self.strictness:g}, embedder={self.embedder_name!r}, "
            f"judge={self.judge!r})"
        )

    # Identity -----------------------------------------------------------------------------------

    @property
    def embedder_name(self) -> str | None:
        """The embedder's identity (None for exact matching only), without loading it."""
        spec = self.embedder_spec
        if spec is None:
            return None
        if isinstance(spec, str):
            name = spec.strip()
            return DEFAULT_EMBEDDER if name.lower() in _DEFAULT_ALIASES else name
        return spec.name

    @property
    def settings(self) -> dict[str, Any]:
        """Everything that decides a grade, as plain data (what config_hash covers)."""
        return {
            "scorer": self.name,
            "version": self.version,
            "strictness": self.strictness,
            "threshold": self.threshold,
            "embedder": self.embedder_name,
            "judge": self.judge,
            "free_text": sorted(self.free_text),
            "partial_numeric": sorted(self.partial_numeric),
            "dates": sorted(self.dates),
            "exact": sorted(self.exact),
            "match_bar": self.match_bar,
            "column": self.column,
        }

    @property
    def config_hash(self) -> str:
        """sha256 of `settings`: results graded under another hash are stale."""
        if self._config_hash is None:
            canonical = json.dumps(self.settings, sort_keys=True, separators=(",", ":"))
            self._config_hash = hashlib.sha256(canonical.encode()).hexdigest()
        return self._config_hash

    def embedder(self) -> Embedder | None:
        """The embedder, loaded on first use (thread-safe); None for exact matching only."""
        if not self._resolved:
            with self._lock:
                if not self._resolved:
                    self._embedder = get_embedder(self.embedder_spec, cache_dir=self.cache_dir)
                    self._resolved = True
        return self._embedder

    # The reference ------------------------------------------------------------------------------

    def reference(self, item: Item) -> dict[str, Any]:
        """The item's reference record.

        Raises:
            DatasetError: the item has no expected output, the named column is missing, or the
                reference is not a JSON object (it cannot be judged).
        """
        expected = item.expected
        if not expected:
            raise DatasetError(
                f"item '{item.id}' has no expected output; the reference scorer grades against "
                "the item's reference record: give the item its output column(s)"
            )
        if self.column is not None:
            if self.column not in expected:
                raise DatasetError(
                    f"item '{item.id}' has no output column '{self.column}' (its outputs: "
                    f"{', '.join(map(repr, expected))}); fix the data or the scorer's column"
                )
            raw, where = expected[self.column], f"column '{self.column}'"
        elif len(expected) == 1:
            column, raw = next(iter(expected.items()))
            where = f"column '{column}'"
        else:
            raw, where = expected, "expected columns"
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError as exc:
                raise DatasetError(
                    f"item '{item.id}': the reference ({where}) is not valid JSON ({exc}); it "
                    "must be one JSON object"
                ) from None
        if not isinstance(raw, dict):
            raise DatasetError(
                f"item '{item.id}': the reference ({where}) is a {type(raw).__name__}, not a "
                "JSON object; the reference scorer grades records: make it an object"
            )
        return raw

    def key(self, item: Item) -> dict[str, Any]:
        """The output that scores 1.0: the item's reference record itself."""
        return self.reference(item)

    # Scoring ------------------------------------------------------------------------------------

    def score(self, item: Item, output: Any) -> ReferenceResult:
        """Grade `output` (a dict, JSON text, a fenced JSON block, or None) against the reference.

        A malformed output is a wrong answer (quality 0, with a note), never an exception.

        Raises:
            DatasetError: the item's reference cannot be read (the item cannot be judged).
            ConfigError, ModelError: the embedder or the judge cannot be reached (systemic).
        """
        reference = self.reference(item)
        candidate, problem = _candidate(output)
        notes: list[str] = []
        unreadable = candidate is None
        if candidate is None:
            notes.append(f"{problem}; it scores 0: answer with one JSON object")
            candidate = {}
        elif problem:
            notes.append(problem)
        embedder = self.embedder()
        run = _Pass(self, item.id, embedder)
        if embedder is not None:
            ref_texts: dict[str, str] = {}
            cand_texts: dict[str, str] = {}
            skip = self.exact | self.dates
            _strings(reference, "", skip, ref_texts)
            _strings(candidate, "", skip, cand_texts)
            # Only texts without an exactly equal counterpart can reach the similarity rung.
            run.prefetch(
                [t for n, t in ref_texts.items() if n not in cand_texts]
                + [t for n, t in cand_texts.items() if n not in ref_texts]
            )
        tally = _Tally()
        run.record(tally, "", "", reference, candidate, True)
        errors = [f for f in tally.fields if f.credit is None]
        if errors and tally.reference == 0 and tally.given == 0:
            # Nothing left to grade would read as a perfect score: this item cannot be judged.
            raise MetricError(
                f"item '{item.id}': the judge '{self.judge}' gave no readable grade for any value "
                f"({errors[0].note}); check the judge model, or score without a judge",
                item_id=item.id,
            )
        quality, completeness, correctness = tally.scores()
        if unreadable:
            quality = correctness = 0.0
        if embedder is None:
            notes.append(
                "no embedder: exact matching only, so alternative spellings count as mismatches"
            )
        if tally.unjudged:
            shown = ", ".join(dict.fromkeys(tally.unjudged))
            notes.append(
                "no judge: free text scored by similarity (or exact matching without an "
                f"embedder) and non-equal numbers as mismatches: {shown}"
            )
        if errors:
            notes.append(
                f"judge errors on {', '.join(f.path for f in errors)}: left out of the scores"
            )
        return ReferenceResult(
            quality=quality,
            completeness=completeness,
            correctness=correctness,
            fields=tuple(tally.fields),
            lists=tally.lists,
            notes=tuple(notes),
            credit=tally.credit,
            reference_values=tally.reference,
            given_values=tally.given,
            threshold=self.threshold if embedder is not None else None,
        )

    def metric_result(self, item: Item, output: Any) -> tuple[float, dict[str, Any]]:
        """The grade as a metric's return value: (quality, {"feedback", "scores"})."""
        result = self.score(item, output)
        return result.quality, {"feedback": result.feedback, "scores": result.scores}
