"""The rungs of the ladder: which step decided a field (FieldResult.rung)."""

EXACT = "exact"
DATE = "date"
SIMILARITY = "similarity"
JUDGE = "judge"
MISSING = "missing"  # the reference has a value here, the candidate none
EXTRA = "extra"  # the candidate has a value here, the reference none
SHAPE = "shape"  # one side is a record or a list where the other is a plain value
RUNGS = (EXACT, DATE, SIMILARITY, JUDGE, MISSING, EXTRA, SHAPE)
