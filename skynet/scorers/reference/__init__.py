"""reference: grade one JSON record against a verified reference, field by field, and say why.

Every value of the reference is compared with the candidate's value at the same path, up a ladder
of rungs, cheapest and most certain first; the first rung that can decide does:

    exact       equal after case, surrounding whitespace and numeric precision ("ACME" = "Acme",
                4.0 = 4); booleans are all-or-nothing; fields listed in `exact` stop here
    date        both values read as calendar dates: compared as dates, never by similarity
    similarity  text: embedded and compared by cosine; at or above the threshold it is equal
    judge       free-text fields and every non-equal number: a judge model grades 0-100

Lists are sets: their items are matched one to one by an optimal assignment (not greedily) on a
score matrix built with the same ladder, and the result reports matched, missed and
hallucinated items. The sub-scores count the reference's leaf values and the candidate's:

    completeness = credit / reference values       correctness = credit / values given
    quality      = 2 * credit / (reference values + values given)   (their harmonic mean, F1)

where credit sums each compared value's credit (1 right, 0 wrong, fractional for a similarity or
a judge's grade where the rung gives partial credit). docs/scorers.md ("reference") has the
details: which strings count as dates, the strictness -> threshold mapping and its calibration.

The public surface is what __all__ lists. The private modules, one job each: _rungs (the rung
names), _settings (the options read and refused, strictness -> threshold), _values and _dates
(plain values and calendar dates read and compared), _judge_prompts (the judge rung's
instructions and reply), _compare (one scoring pass: the walk and list matching), _output (an
output read as the candidate record), _results (what a grade holds), _feedback (the grade in
plain words) and _scorer (ReferenceScorer itself).
"""

from skynet.scorers.reference._judge_prompts import (
    JUDGE_NUMBER_EXACT,
    JUDGE_NUMBER_PARTIAL,
    JUDGE_TEXT,
    parse_grade,
)
from skynet.scorers.reference._results import (
    FieldResult,
    ListResult,
    Match,
    ReferenceResult,
    Unmatched,
)
from skynet.scorers.reference._rungs import (
    DATE,
    EXACT,
    EXTRA,
    JUDGE,
    MISSING,
    RUNGS,
    SHAPE,
    SIMILARITY,
)
from skynet.scorers.reference._scorer import ReferenceScorer
from skynet.scorers.reference._settings import CALIBRATION, STRICTNESS_LEVELS, threshold_for

__all__ = [
    "CALIBRATION",
    "DATE",
    "EXACT",
    "EXTRA",
    "JUDGE",
    "JUDGE_NUMBER_EXACT",
    "JUDGE_NUMBER_PARTIAL",
    "JUDGE_TEXT",
    "MISSING",
    "RUNGS",
    "SHAPE",
    "SIMILARITY",
    "STRICTNESS_LEVELS",
    "FieldResult",
    "ListResult",
    "Match",
    "ReferenceResult",
    "ReferenceScorer",
    "Unmatched",
    "parse_grade",
    "threshold_for",
]
