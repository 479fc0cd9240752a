"""What the per-rank torch test scripts (ops, p2p, anysource, sparse) share: the backend under test (argv[1],
default hccltune), this rank and the world size from the launcher's environment, a tally of checks and the
report every rank prints at the end ("OK rank R: ..." or "FAIL rank R: ..." with the first failures).
"""

import os
import sys

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "hccltune"
rank = int(os.environ["RANK"])
n = int(os.environ["WORLD_SIZE"])

failures = []
_count = 0


def record(ok, message):
    """Counts one check; `message` is kept when it failed."""
    global _count
    _count += 1
    if not ok:
        failures.append(message)


def count():
    """Checks counted so far."""
    return _count


def report(exit_now=False):
    """Prints this rank's verdict. Exits 1 on a failure; with exit_now, always exits at once (os._exit: no
    clean shutdown, for a group with a dead rank)."""
    if failures:
        print(f"FAIL rank {rank}: {len(failures)} of {_count} checks failed", flush=True)
        for f in failures[:30]:
            print("  " + f, flush=True)
    else:
        print(f"OK rank {rank}: {_count} checks on {n} ranks, backend {BACKEND}", flush=True)
    if exit_now:
        os._exit(1 if failures else 0)
    if failures:
        sys.exit(1)
