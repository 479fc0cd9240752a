#!/usr/bin/env python3
"""The flight recorder's cost in a real job: `hccl-tune bench` of one case with the recorder off
(HCCL_TUNE_FR_ENTRIES=0, twice: `off` and `off'`, the control) and on (the default), interleaved run by run
(off on off', off' on off, ...) in one build. Prints the median time of each, the control's spread
|off'/off - 1| and on/off; exit status 1 when on/off exceeds 1 + max(budget, control).

  tests/perf/flight_recorder_cost.py -r 7                          # 2-rank 8 B allreduce over shm
  tests/perf/flight_recorder_cost.py --case 'allreduce 4 8 shm' --budget 0.05
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench(tune, case, env, iters):
    coll, ranks, size, link = case.split()
    cmd = [tune, "bench", "--coll", coll, "--ranks", ranks, "--min-bytes", size, "--max-bytes", size, "--link", link,
           "--iters", str(iters), "--warmup", str(iters // 10), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr.strip()}")
    rows = json.loads(p.stdout)
    if len(rows) != 1:
        sys.exit(f"{' '.join(cmd)} printed {len(rows)} rows:\n{p.stdout}")
    return float(rows[0]["time_us"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-b", "--build", default=os.path.join(root, "build"))
    ap.add_argument("-r", "--reps", type=int, default=7, help="interleaved repetitions (default 7)")
    ap.add_argument("--case", default="allreduce 2 8 shm", help="COLLECTIVE RANKS BYTES LINK")
    ap.add_argument("--iters", type=int, default=20000, help="timed iterations per run (default 20000)")
    ap.add_argument("--budget", type=float, default=0.05, help="allowed slowdown (default 0.05)")
    a = ap.parse_args()
    tune = os.path.join(a.build, "tuner", "hccl-tune")
    base = dict(os.environ)
    base.setdefault("HCCL_TUNE_DAEMON", "off")
    base.pop("HCCL_TUNE_FR_ENTRIES", None)
    envs = {"off": dict(base, HCCL_TUNE_FR_ENTRIES="0"), "on": base, "off'": dict(base, HCCL_TUNE_FR_ENTRIES="0")}
    order = ["off", "on", "off'"]
    times = {n: [] for n in order}
    for r in range(a.reps):
        for n in order if r % 2 == 0 else order[::-1]:
            times[n].append(bench(tune, a.case, envs[n], a.iters))
    m = {n: statistics.median(times[n]) for n in order}
    control = abs(m["off'"] / m["off"] - 1)
    ratio = m["on"] / m["off"]
    ok = ratio <= 1 + max(a.budget, control)
    print(f"# {a.case}: {a.reps} interleaved runs each; median time (us)")
    print(f"off {m['off']:.3f}  off2 {m[order[2]]:.3f}  on {m['on']:.3f}  "
          f"control {control:.3f}  on/off {ratio:.3f}  {'ok' if ok else 'OVER BUDGET'}")
    for n in order:
        print(f"  {n:<4} " + " ".join(f"{t:.3f}" for t in times[n]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
