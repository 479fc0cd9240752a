#!/usr/bin/env python3
"""An MPI library's default against the same library reading hccl-tune's exported file, in one run.

Usage: peer_rules_compare.py BENCH --runtime openmpi --env NAME=VALUE... [--ranks 4] [--reps 5]
                             [--colls allreduce,allgather,broadcast,reducescatter] [--min 8] [--max 67108864]

BENCH is hccl-tune-mpi-bench.RUNTIME (tuner/peers/mpi_bench.c). Each repetition launches the bench twice under the
runtime's launcher, once plain (the library's default) and once with the --env settings (the exported file),
alternating which goes first, so load drift falls on both. Each launch times every collective and power-of-two size
with the library's own choice (`default` / `auto`): a batch of timed iterations after warm-up, each after a barrier,
time = max over ranks, figure = median. Per size the result is the median over repetitions of each side; the ratio
is default / exported (above 1: the exported file is faster). Prints one line per size, then the geometric mean
and the minimum of the ratios, and the load average before and after. Exit 1 when a launch fails.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys


def launcher(runtime, ranks, bench):
    if runtime == "openmpi":
        cmd = ["mpirun.openmpi", "--oversubscribe", "--mca", "coll_tuned_use_dynamic_rules", "1"]
        if os.geteuid() == 0:
            cmd.insert(1, "--allow-run-as-root")
    else:
        cmd = ["mpiexec.mpich"]
    return cmd + ["-np", str(ranks), bench]


def iters_for(size):
    if size < (1 << 20):
        return 30, 3
    if size < (16 << 20):
        return 10, 2
    return 5, 1


def run_once(args, env_extra, sizes, colls):
    """{(coll, size): median us} of one launch."""
    own = "default" if args.runtime == "openmpi" else "auto"
    lines = []
    for c in colls:
        for s in sizes:
            it, wu = iters_for(s)
            lines.append(f"measure {c} {s} {own} 0 {it} {wu}")
    lines.append("quit")
    env = dict(os.environ)
    env.update(env_extra)
    p = subprocess.run(launcher(args.runtime, args.ranks, args.bench), input="\n".join(lines) + "\n", text=True,
                       capture_output=True, env=env, timeout=3600)
    answers = [l[2:] for l in p.stdout.splitlines() if l.startswith("@ ")]
    if p.returncode != 0 or len(answers) != len(lines):  # hello + one per measure
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"launch failed (exit {p.returncode}, {len(answers)} answers for {len(lines)} commands)")
    out = {}
    keys = [(c, s) for c in colls for s in sizes]
    for key, a in zip(keys, answers[1:]):
        if not a.startswith("times "):
            raise SystemExit(f"{key}: {a}")
        t = [float(x) for x in a[len("times "):].split("/")[0].split()]
        out[key] = statistics.median(t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench")
    ap.add_argument("--runtime", choices=["openmpi", "mpich"], required=True)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the exported side")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--colls", default="allreduce,allgather,broadcast,reducescatter")
    ap.add_argument("--min", type=int, default=8)
    ap.add_argument("--max", type=int, default=64 << 20)
    args = ap.parse_args()
    exported = dict(e.split("=", 1) for e in args.env)
    if not exported:
        raise SystemExit("--env: give the settings that point the library at the exported file")
    colls = args.colls.split(",")
    sizes = []
    s = 1
    while s < args.min:
        s *= 2
    while s <= args.max:
        sizes.append(s)
        s *= 2
    print(f"# load before: {open('/proc/loadavg').read().strip()}")
    runs = {"default": [], "exported": []}
    for rep in range(args.reps):
        order = ["default", "exported"] if rep % 2 == 0 else ["exported", "default"]
        for side in order:
            runs[side].append(run_once(args, exported if side == "exported" else {}, sizes, colls))
            print(f"# repetition {rep + 1}/{args.reps}: {side} done", flush=True)
    print(f"# load after: {open('/proc/loadavg').read().strip()}")
    print(f"{'coll':<14} {'bytes':>10} {'default_us':>12} {'exported_us':>12} {'speedup':>8}")
    ratios = []
    for c in colls:
        for s in sizes:
            d = statistics.median(r[(c, s)] for r in runs["default"])
            e = statistics.median(r[(c, s)] for r in runs["exported"])
            ratios.append(d / e)
            print(f"{c:<14} {s:>10} {d:>12.2f} {e:>12.2f} {d / e:>8.3f}")
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"# {args.runtime} {args.ranks} ranks, {args.reps} interleaved repetitions, medians: "
          f"geomean speedup {geo:.3f}, minimum {min(ratios):.3f} over {len(ratios)} sizes")


if __name__ == "__main__":
    main()
