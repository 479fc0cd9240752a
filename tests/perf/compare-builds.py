#!/usr/bin/env python3
"""Two builds of hccl-tune head to head, with a base-against-base control: `hccl-tune bench` of each case from
the base build (twice: `base` and `base'`) and the new build, interleaved run by run (base new base', base' new
base, ...) so every build sees the same load. Prints, per case, the median time of each, the control's spread
|base'/base - 1| and new/base; a case passes when new/base is within 3% or within the control's spread.

  tests/perf/compare-builds.py --base build-base --new build -r 5
  tests/perf/compare-builds.py --base build-base --new build --case 'allreduce 2 1M shm'

A case is `COLLECTIVE RANKS BYTES LINK` (LINK: shm, tcp, or auto). The default cases are the hot paths: 2-rank
allreduce 8 B, 64 KiB, 1 MiB, 64 MiB and 4-rank 8 B, 1 MiB over shm, 2-rank 1 MiB over TCP. Exit status 1 when
a case fails. Run it on an otherwise idle machine (check `uptime`).
"""
import argparse
import os
import statistics
import subprocess
import sys

DEFAULT_CASES = [
    "allreduce 2 8 shm",
    "allreduce 2 64K shm",
    "allreduce 2 1M shm",
    "allreduce 2 64M shm",
    "allreduce 4 8 shm",
    "allreduce 4 1M shm",
    "allreduce 2 1M tcp",
]


def bench(tune, case, env):
    coll, ranks, size, link = case.split()
    cmd = [tune, "bench", "--coll", coll, "--ranks", ranks, "--min-bytes", size, "--max-bytes", size]
    if link != "auto":
        cmd += ["--link", link]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr.strip()}")
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) > 4 and f[0] == coll and f[2].isdigit():
            return float(f[4])
    sys.exit(f"{' '.join(cmd)} printed no row:\n{p.stdout}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="build directory of the base commit")
    ap.add_argument("--new", required=True, help="build directory of the change")
    ap.add_argument("-r", "--reps", type=int, default=5, help="interleaved repetitions (default 5)")
    ap.add_argument("--case", action="append", help="COLLECTIVE RANKS BYTES LINK (repeatable)")
    ap.add_argument("--tolerance", type=float, default=0.03, help="allowed slowdown (default 0.03)")
    a = ap.parse_args()
    tunes = {}
    for name, d in (("base", a.base), ("new", a.new)):
        tunes[name] = os.path.join(d, "tuner", "hccl-tune")
        if not os.access(tunes[name], os.X_OK):
            sys.exit(f"no {tunes[name]}: build it first")
    tunes["base'"] = tunes["base"]
    env = dict(os.environ)
    env.setdefault("HCCL_TUNE_DAEMON", "off")
    cases = a.case or DEFAULT_CASES
    order = ["base", "new", "base'"]
    times = {}
    for r in range(a.reps):
        for case in cases:
            for name in order if r % 2 == 0 else order[::-1]:
                times.setdefault((case, name), []).append(bench(tunes[name], case, env))
    print(f"# {a.reps} interleaved runs per build; median time (us); control = |base'/base - 1|; "
          f"pass: new/base <= 1 + max({a.tolerance:.0%}, control)")
    print(f"{'case':<22} {'base':>10} {'base2':>10} {'new':>10} {'control':>8} {'new/base':>9}  verdict")
    failed = 0
    for case in cases:
        m = {n: statistics.median(times[(case, n)]) for n in order}
        control = abs(m["base'"] / m["base"] - 1)
        ratio = m["new"] / m["base"]
        ok = ratio <= 1 + max(a.tolerance, control)
        failed += not ok
        base, base2, new = m["base"], m["base'"], m["new"]
        verdict = "ok" if ok else "SLOWER"
        print(f"{case:<22} {base:>10.2f} {base2:>10.2f} {new:>10.2f} {control:>8.3f} {ratio:>9.3f}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
