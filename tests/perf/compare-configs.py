#!/usr/bin/env python3
"""Our configurations head to head: `hccl-tune bench --algo CFG` for each CFG, interleaved run by run (A B C,
C B A, A B C, ...), so every configuration sees the same load; prints the median time per size and the ratio
first / each (> 1: that configuration is faster than the first). What decides a default in policies/defaults.cc.

  tests/perf/compare-configs.py -c allgather -n 4 -l 1M -h 64M -r 7 direct recursive_doubling
  HCCL_TUNE_SINGLE_COPY=off tests/perf/compare-configs.py -c broadcast -n 4 'chain(chunk=1M)' linear
"""
import argparse, os, statistics, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
ap.add_argument("-c", "--coll", default="allreduce")
ap.add_argument("-n", "--ranks", default="2")
ap.add_argument("-l", "--min-bytes", default="8")
ap.add_argument("-h", "--max-bytes", default="64M")
ap.add_argument("-r", "--reps", type=int, default=7)
ap.add_argument("-b", "--build", default=os.path.join(root, "build"))
ap.add_argument("configs", nargs="+", help="configuration strings (or auto)")
ap.add_argument("--help", action="help")
a = ap.parse_args()
tune = os.path.join(a.build, "tuner", "hccl-tune")
if not os.access(tune, os.X_OK):
    sys.exit(f"no {tune}: build first")
env = dict(os.environ)
env.setdefault("HCCL_TUNE_DAEMON", "off")
times = {}
for r in range(a.reps):
    for cfg in a.configs if r % 2 == 0 else a.configs[::-1]:
        p = subprocess.run([tune, "bench", "--coll", a.coll, "--ranks", a.ranks, "--min-bytes", a.min_bytes,
                            "--max-bytes", a.max_bytes, "--algo", cfg], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            sys.exit(f"hccl-tune bench --algo {cfg} failed ({p.returncode}):\n{p.stderr.strip()}")
        for line in p.stdout.splitlines():
            f = line.split()
            if len(f) > 4 and f[0] == a.coll and f[2].isdigit():
                times.setdefault((cfg, int(f[2])), []).append(float(f[4]))
print(f"# {a.coll}, {a.ranks} ranks, {a.reps} interleaved runs per configuration; median time (us)")
print(f"{'bytes':>10} " + " ".join(f"{c:>24}" for c in a.configs) + "  first/each")
for s in sorted({s for (_, s) in times}):
    m = [statistics.median(times[(c, s)]) if (c, s) in times else float("nan") for c in a.configs]
    print(f"{s:>10} " + " ".join(f"{x:>24.2f}" for x in m) + "  " + " ".join(f"{m[0] / x:.3f}" for x in m[1:]))
