"""skynet.evaluate's wall time against dspy.Evaluate's, same threads, same server, same program.

    python benchmarks/evaluate.py                          # 10 rows, 1 s per reply, 8 threads
    python benchmarks/evaluate.py --latency 0.05 --rows 6  # a smoke run

Both score one `dspy.Predict("question -> answer")` with one DSPy metric
`metric(example, pred, trace=None)` on the same dspy.Example rows, against the same loopback
model server (skynet.testing.ScriptedServer, in this process), which answers in DSPy's
`[[ ## answer ## ]]` format after a fixed latency per reply:

  dspy    `dspy.Evaluate(devset=rows, metric=metric, num_threads=N)(program)` under
          `dspy.context(lm=dspy.LM("openai/skynet-test", api_base=..., cache=False))`.
  skynet  `skynet.evaluate(program, metric=metric, data=rows, concurrency=N)` with the model
          under [models.endpoints] (max_concurrent N, so the endpoint does not cap it) and a
          fresh store each time (no cache hit); its time includes building the project, the
          metric's self-test and recording every row in runs.db.

One untimed warm-up of each (other questions, no latency) loads dspy and litellm first. The
script prints both wall times, the ratio skynet / dspy (target <= 1.1) and, per side, the requests
the server saw and the most it had in flight at once. Nothing is asserted.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import argparse
import io
import statistics
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dspy

import skynet
from skynet.testing import MODEL, ScriptedServer, Step, reply

QUESTION = "[[ ## question ## ]]"


class Responder:
    """Answers "what is N plus one" with N + 1 after `latency_s`; counts requests and the most
    in flight at once."""

    def __init__(self) -> None:
        self.latency_s = 0.0
        self._lock = threading.Lock()
        self._in_flight = 0
        self.most = 0
        self.requests = 0

    def take(self) -> tuple[int, int]:
        """(requests, most in flight) since the last take."""
        with self._lock:
            seen = self.requests, self.most
            self.requests = self.most = 0
        return seen

    def __call__(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.requests += 1
            self._in_flight += 1
            self.most = max(self.most, self._in_flight)
        try:
            # The server sleeps a reply's latency_s before sending it, after this returns: the
            # wait is held here instead, so the in-flight count covers it.
            time.sleep(self.latency_s)
            text = body["messages"][-1]["content"].split(QUESTION)[1].split("\n")[1]
            number = int(text.split()[2])
            return reply(f"[[ ## answer ## ]]\n{number + 1}\n\n[[ ## completed ## ]]")
        finally:
            with self._lock:
                self._in_flight -= 1


def metric(example: Any, pred: Any, trace: Any = None) -> bool:
    return str(example.answer) == str(pred.answer)


def rows(count: int, start: int) -> list[Any]:
    return [
        dspy.Example(id=f"r{n}", question=f"what is {n} plus one", answer=str(n + 1)).with_inputs(
            "question"
        )
        for n in range(start, start + count)
    ]


def run_dspy(url: str, data: list[Any], threads: int) -> float:
    lm = dspy.LM(MODEL, api_base=url, api_key="unused", cache=False)
    program = dspy.Predict("question -> answer")
    evaluate = dspy.Evaluate(
        devset=data, metric=metric, num_threads=threads, display_progress=False
    )
    with dspy.context(lm=lm):
        result = evaluate(program)
    return float(result.score) / 100


def run_skynet(url: str, data: list[Any], threads: int, store: Path) -> float:
    result = skynet.evaluate(
        dspy.Predict("question -> answer"),
        metric=metric,
        data=data,
        concurrency=threads,
        models={
            "task": MODEL,
            "endpoints": {MODEL: {"api_base": url, "max_concurrent": threads}},
        },
        store=store,
        out=io.StringIO(),
    )
    return result.mean or 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per reply (1.0)")
    parser.add_argument("--rows", type=int, default=10, help="rows scored (10)")
    parser.add_argument("--threads", type=int, default=8, help="threads on both sides (8)")
    parser.add_argument("--repeats", type=int, default=1, help="timed pairs, median (1)")
    args = parser.parse_args(argv)

    # socketserver listens with a backlog of 5: a burst of more new connections than that has
    # its SYNs dropped and resent 1 s later, a stall of the test server, not of either side.
    ThreadingHTTPServer.request_queue_size = 128
    responder = Responder()
    times: dict[str, list[float]] = {"dspy": [], "skynet": []}
    seen: dict[str, tuple[int, int]] = {}
    with ScriptedServer(responder=responder) as server, tempfile.TemporaryDirectory() as tmp:
        run_dspy(server.url, rows(2, 1000), args.threads)  # warm-up: imports, first connection
        run_skynet(server.url, rows(2, 2000), args.threads, Path(tmp) / "warm")
        responder.take()
        responder.latency_s = args.latency
        data = rows(args.rows, 0)
        for repeat in range(args.repeats):
            began = time.perf_counter()
            dspy_mean = run_dspy(server.url, data, args.threads)
            times["dspy"].append(time.perf_counter() - began)
            seen["dspy"] = responder.take()
            began = time.perf_counter()
            skynet_mean = run_skynet(server.url, data, args.threads, Path(tmp) / f"s{repeat}")
            times["skynet"].append(time.perf_counter() - began)
            seen["skynet"] = responder.take()
    dspy_s, skynet_s = statistics.median(times["dspy"]), statistics.median(times["skynet"])
    print(
        f"{args.rows} rows, {args.latency:g} s per reply, {args.threads} threads, "
        f"{args.repeats} timed pair(s), median:"
    )
    print(
        f"  dspy.Evaluate    {dspy_s:7.2f} s  mean {dspy_mean:.3f}  requests {seen['dspy'][0]}"
        f"  most in flight {seen['dspy'][1]}"
    )
    print(
        f"  skynet.evaluate  {skynet_s:7.2f} s  mean {skynet_mean:.3f}  requests "
        f"{seen['skynet'][0]}  most in flight {seen['skynet'][1]}"
    )
    ratio = skynet_s / dspy_s
    print(
        f"ratio skynet/dspy: {ratio:.2f}x (target <= 1.10: {'met' if ratio <= 1.1 else 'missed'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
