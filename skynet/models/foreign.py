"""Model calls made outside Skynet's models: seen and recorded as unmeasured, never as $0.

A metric's own DSPy judge (an LM it holds, `with dspy.context(lm=...)`) or a custom dspy.BaseLM
calls its provider directly: Skynet cannot meter, cache or budget those calls, but through DSPy's
callbacks it sees each one and records it as an unmeasured call of the role it was made in
(CallRecord.measured = False: tokens and cost unknown). Without dspy imported there is nothing
to see, and nothing is imported here.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from skynet.errors import ConfigError

__all__ = ["watching"]


@contextlib.contextmanager
def watching(role: str) -> Iterator[None]:
    """While the block runs, a DSPy LM call not made through Skynet's models is recorded as an
    unmeasured call of `role` in the model session in force (none in force: nothing to do)."""
    if "dspy" not in sys.modules:
        yield
        return
    from skynet.models.client import current

    try:
        models = current()
    except ConfigError:
        yield
        return
    from skynet.models.dspy_lm import watch

    with watch(models, role):
        yield
