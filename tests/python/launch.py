"""Runs a Python test script as N ranks (env:// variables as torchrun sets them) and fails if any rank fails.

  launch.py --ranks N [--timeout S] SCRIPT [ARGS...]

Every rank's output is prefixed with its rank; the exit status is non-zero when a rank exits non-zero or the
job outlives the timeout (then every rank is killed).
"""

import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from free_port import free_port  # noqa: E402


def pump(rank, stream):
    for line in iter(stream.readline, b""):
        sys.stdout.write(f"[rank {rank}] {line.decode(errors='replace')}")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    port = free_port()
    procs, threads = [], []
    for r in range(a.ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(a.ranks), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(a.ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        p = subprocess.Popen([sys.executable, a.script, *a.args], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        t = threading.Thread(target=pump, args=(r, p.stdout), daemon=True)
        t.start()
        procs.append(p)
        threads.append(t)
    deadline = time.monotonic() + a.timeout
    failed = False
    for r, p in enumerate(procs):
        try:
            rc = p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"launch: timeout after {a.timeout}s; killing every rank", flush=True)
            for q in procs:
                q.kill()
            for q in procs:
                q.wait()
            return 124
        if rc != 0:
            print(f"launch: rank {r} exited with {rc}", flush=True)
            failed = True
            # A failed rank may leave the others blocked until their own timeouts: stop them now.
            for q in procs:
                if q.poll() is None:
                    q.kill()
    for t in threads:
        t.join(timeout=5)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
