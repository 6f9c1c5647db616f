"""What the bubblewrap sandbox adds to one code-candidate evaluation, against a plain process.

    python benchmarks/sandbox.py [--repeats 40]

Both kinds run the same trivial candidate (`def run(input): return input["n"] + 1`) through the
same harness and the same bounded pipe protocol, alternating, in one process run:

    process - the anchor: what evaluations cost before the sandbox, a child `python -I -S` with a
              clean environment (Skynet's `sandbox = "none"` path);
    sandbox - the same evaluation inside bubblewrap: namespaces, binds, tmpfs, cgroup (when one
              can be made), model-proxy socket, teardown.

Printed: the median wall time of each kind per evaluation, the median added milliseconds
(sandbox - process; target <= 30 ms) and the ratio sandbox / process. It also prints the median
time the meter attributes to the candidate in each kind: the sandbox's start-up and teardown are
left out of the item's time, so the two should be close.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from skynet.artifacts.code import CodeArtifact
from skynet.measure import metering
from skynet.sandbox import check_available

SOURCE = "def run(input):\n    return input['n'] + 1\n"
TARGET_ADDED_MS = 30.0


def _once(art: CodeArtifact, n: int) -> tuple[float, float]:
    began = time.perf_counter()
    with metering(f"i{n}") as meter:
        assert art.run({"code": SOURCE}, {"n": n}) == n + 1
    return (time.perf_counter() - began) * 1000, meter.observation().elapsed_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args(argv)
    check_available("bwrap")
    kinds = {
        "process": CodeArtifact(source=SOURCE, sandbox="none"),
        "sandbox": CodeArtifact(source=SOURCE, sandbox="bwrap"),
    }
    for art in kinds.values():  # warm the page cache and the imports
        _once(art, 0)
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    metered: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(args.repeats):
        order = list(kinds) if i % 2 == 0 else list(reversed(kinds))
        for kind in order:
            w, m = _once(kinds[kind], i)
            wall[kind].append(w)
            metered[kind].append(m)
    med = {k: statistics.median(v) for k, v in wall.items()}
    added = statistics.median(s - p for s, p in zip(wall["sandbox"], wall["process"], strict=True))
    print(f"evaluations: {args.repeats} of each kind, alternating")
    for kind in kinds:
        print(
            f"  {kind:8s} median wall {med[kind]:7.1f} ms per evaluation · "
            f"metered (the candidate's time) {statistics.median(metered[kind]):6.2f} ms"
        )
    verdict = "meets" if added <= TARGET_ADDED_MS else "misses"
    print(
        f"sandbox adds {added:.1f} ms per evaluation (median of pairs; target <= "
        f"{TARGET_ADDED_MS:g} ms: {verdict}); ratio sandbox / process {med['sandbox'] / med['process']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
