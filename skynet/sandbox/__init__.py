"""Isolation of untrusted code: every code-candidate evaluation runs inside bubblewrap.

A candidate is written by a model, so it is treated as an attacker. Each evaluation gets its own
bubblewrap (`bwrap`) sandbox:

- new user, PID, network, IPC, UTS, cgroup and mount namespaces; `--die-with-parent`,
  `--new-session`, every capability dropped. The candidate is never root on the host: as an
  ordinary user Skynet's uid is the candidate's; as root, Skynet maps uid 65534 into the
  sandbox's user namespace and the harness becomes it (with no group) before anything else runs;
- /proc read-only (sysctls, sysrq-trigger, every other knob), /proc/keys unreadable, and the
  kernel keyring syscalls (add_key, request_key, keyctl) refused by a seccomp filter;
- a filesystem of read-only binds of what the interpreter needs (/usr, the interpreter's own
  prefix and its site-packages: installed packages import, `Limits.packages` may narrow which),
  private size-limited tmpfs at /tmp (the working folder) and /dev/shm, everything else
  read-only,
  and /skynet: this evaluation's code.py, input.json, the model socket and the client module,
  read-only. No project file, data, metric, run store, cache, home, other candidate or network
  (not even loopback to the host);
- an environment holding only PATH, HOME, LANG and PYTHONHASHSEED;
- limits: wall time (the parent), CPU time, address space, file size, process count (RLIMIT_*,
  set by the harness before any candidate code runs), plus a cgroup for the process count and the
  memory of the whole sandbox when this machine lets Skynet create one (as root, or in a delegated
  cgroup v2 subtree);
- nothing outlives it: when the harness ends or time runs out, the PID namespace dies and every
  process in it with it (setsid, double fork and nohup included).

The parent never opens a path the candidate controls. The harness speaks on two pipes: the
output channel (one byte "ready", then the JSON of the output) and stderr; the parent reads both
incrementally, each with a deadline, keeps at most `max_output_bytes` of the one and the last
`stderr_tail_bytes` of the other, and bounds the output's JSON nesting. A FIFO, a symlink, a sparse
file or a flood cannot hang or balloon the parent.

One channel out: a model proxy on a Unix socket, served by the parent. The candidate imports
`skynet_sandbox` (a small stdlib client) and calls `complete(...)`; the parent makes the call
through skynet.models as the task role (metered into the item's Observation, cached, governed,
budgeted). No key enters the sandbox.

The time the meter sees is the parent's clock from the moment it lets the harness load the
candidate ("go") to the end of the output: sandbox start-up and teardown are not the candidate's
time, and nothing the candidate does before "go" (there is nothing) or after its output counts.

The parts, each a private module: `_limits` (Limits, Outcome), `_bwrap` (the bubblewrap command:
the filesystem binds, the defences when Skynet is root, starting and killing it), `_cgroups` (the
whole sandbox's processes, memory and CPU: a cgroup, else /proc sampled), `_proxy` (the model
proxy), `_watch` (reading one run bounded) and `_run` (availability, the private folders,
run_python). The candidate's side is skynet/_sandbox_client.py, copied into each sandbox.
"""

from __future__ import annotations

from skynet.sandbox._bwrap import site_folders
from skynet.sandbox._limits import Limits, Outcome
from skynet.sandbox._proxy import ModelProxy
from skynet.sandbox._run import MODES, check_available, describe, run_python
from skynet.sandbox._watch import bounded_json

__all__ = [
    "describe",
    "Limits",
    "Outcome",
    "ModelProxy",
    "MODES",
    "check_available",
    "run_python",
    "bounded_json",
    "site_folders",
]
