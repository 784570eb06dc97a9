"""Report a training loop's progress to the Lachesis node agent (opt-in).

In a Slurm job on a node with the Lachesis agent, the environment names the
agent's socket (LACHESIS_PROGRESS, set by the SPANK plugin lachesis_jobend).
A loop that calls step() once per iteration (mini-batch) lets the agent
measure the job's iterations per second, which the scheduler uses as the
job's useful work (docs/profiling.md, "Reporting progress"):

    import lachesis_progress
    p = lachesis_progress.Reporter()
    for batch in loader:
        train_step(batch)
        p.step()

It sends the running count at most every `interval` seconds (5 by default)
and never slows or stops the loop: nothing is sent when the variable is
unset or when this process is not rank 0 (RANK, else SLURM_PROCID), a
report is one short write on a unix socket with a 50 ms timeout, and every
error is swallowed. The agent decides which job a report belongs to from
the reporting process itself; the report carries only the count.

Standard library only; Python 3.6 or later.

    python3 lachesis_progress.py check         # one report; prints the answer
    python3 lachesis_progress.py loop RATE SECONDS
                                               # a synthetic loop of RATE
                                               # iterations/s, reporting
"""

import json
import os
import socket
import sys
import time

ENV = "LACHESIS_PROGRESS"
# The agent takes one report per job per second.
MIN_INTERVAL = 1.0
_MAX_COUNT = 2**64 - 1


class Reporter:
    """Counts iterations and reports the count to the node agent."""

    def __init__(self, interval=5.0, start=0, path=None):
        """interval: seconds between reports (at least 1). start: the count
        to begin from (a run resumed from a checkpoint at iteration N may
        pass N). path: the agent's socket; by default $LACHESIS_PROGRESS."""
        self.count = 0
        self.enabled = False
        try:
            self.count = int(start)
            self.path = path if path is not None else os.environ.get(ENV, "")
            self.interval = max(float(interval), MIN_INTERVAL)
            rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
            self.enabled = bool(self.path) and rank.strip() == "0"
        except Exception:
            self.enabled = False
        self._next = 0.0

    def step(self, n=1):
        """Adds n iterations; reports if the last report is old enough."""
        try:
            self.count += n
            if not self.enabled:
                return
            now = time.monotonic()
            if now < self._next:
                return
            self._next = now + self.interval
            self.send()
        except Exception:
            pass

    def send(self, wait=False):
        """Sends the count now. With wait, returns the agent's answer (a
        dict: {"iterations": {...}} or {"error": "..."}), else None; None
        too when the agent cannot be reached. Never raises."""
        s = None
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5.0 if wait else 0.05)
            s.connect(self.path)
            count = max(0, min(int(self.count), _MAX_COUNT))
            s.sendall(('{"op":"progress","report":{"iterations":%d}}\n' % count).encode())
            if not wait:
                return None
            line = s.makefile("rb").readline(65536)
            return json.loads(line.decode()) if line else None
        except Exception:
            return None
        finally:
            if s is not None:
                try:
                    s.close()
                except Exception:
                    pass


def _main(argv):
    usage = "usage: lachesis_progress.py check | loop RATE SECONDS"
    if not argv or argv[0] not in ("check", "loop"):
        print(usage, file=sys.stderr)
        return 2
    if not os.environ.get(ENV):
        print("%s is not set: not in a Slurm job of a node with the Lachesis agent's SPANK plugin" % ENV,
              file=sys.stderr)
        return 1
    if argv[0] == "check":
        p = Reporter(path=os.environ[ENV])
        answer = p.send(wait=True)
        print(json.dumps(answer))
        return 0 if answer and "iterations" in answer else 1
    if len(argv) != 3:
        print(usage, file=sys.stderr)
        return 2
    rate, seconds = float(argv[1]), float(argv[2])
    p = Reporter(interval=MIN_INTERVAL + 0.5)
    begin = time.monotonic()
    while time.monotonic() - begin < seconds:
        # An iteration of 1/RATE s, kept on schedule over the run.
        due = begin + (p.count + 1) / rate
        time.sleep(max(0.0, due - time.monotonic()))
        p.step()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
