#!/usr/bin/env python3
"""An MPI library's own choice against the exported choice, paired inside each launch.

Usage: peer_paired_compare.py BENCH --runtime openmpi|mpich --hccl-tune HCCL_TUNE --db DB [--ranks 4] [--reps 5]
                              [--rounds N] [--colls ...] [--min 8] [--max 67108864] [--control]

What the exported file chooses at each size is read from the table it was exported from (`hccl-tune show --db DB
--json`) with the exporters' own rule: a range won by the library's own choice, or by less than 5% over it in the
sweep, keeps the library's choice; sizes below the first range keep it too, sizes above the last get the last
range's. That the library, reading the file, runs exactly that choice is what `export.openmpi_rules` and
`export.mpich_json` check (tests/process/). Here the choice is forced through the bench's control variables
(tuner/peers/mpi_bench.c), so both sides run in the same launch.

Why paired: with more ranks than cores, the library's figures depend on how the scheduler places and interleaves
the busy-polling ranks, which is fixed for a whole launch and differs between launches (a 256 KiB allreduce of
Open MPI: about 190 us in some launches, 550 us in others, with the same binding). Two sides in separate launches
then differ by the launches' luck (the unpaired script's control of two identical sides gave ratios of 0.16 to 5.4);
in one launch they share it.

Each repetition is one launch. Per size, `--rounds` rounds each run one batch of the library's own choice and one
of the exported choice, in alternating order (a batch: one warm-up call, then timed iterations, each after a
barrier, time = max over ranks). Per launch and side the figure is the median over all its iterations; the ratio
is own / exported (above 1: the exported choice is faster). Per size the speedup is the median over repetitions of
the launch's ratio. Sizes where the exported file keeps the library's choice run the same code on both sides and
are not measured: ratio 1, marked "same". `--control` runs the library's own choice on both sides at every size
(the noise floor of this protocol). Prints one line per size, the geometric mean and minimum of the ratios, and
the load average before and after. Exit 1 when a launch fails.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_rules_compare import launcher  # noqa: E402

MIN_GAIN_OVER_DEFAULT = 0.05  # tuner/peer_export/peer_rules.h kMinGainOverDefault
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_bytes(text):
    unit = text[-1] if text and text[-1] in "KMG" else ""
    return int(text[:len(text) - len(unit)]) * UNITS[unit]


def parse_config(runtime, config):
    """(algorithm, segment) the bench forces, or None for the library's own choice."""
    name = config.split(":", 1)[1]
    algo, seg = name, 0
    if "(" in name:
        algo, params = name[:-1].split("(", 1)
        for p in params.split(","):
            key, value = p.split("=", 1)
            if key == "segment":
                seg = parse_bytes(value)
    return None if algo in ("default", "auto") else (algo, seg)


def choices(args):
    """{coll: [(lo, hi, (algo, seg) or None)]} for the world of --ranks, from the table."""
    p = subprocess.run([args.hccl_tune, "show", "--db", args.db, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"hccl-tune show --db {args.db} failed: {p.stderr.strip()}")
    out = {}
    for t in json.loads(p.stdout)["tables"]:
        for e in t["entries"]:
            if e["world_size"] != args.ranks or not e["configuration"].startswith(args.runtime + ":"):
                continue
            lo, hi = (parse_bytes(x) for x in e["bytes"].split("-"))
            keep = e.get("default_margin", 0) < MIN_GAIN_OVER_DEFAULT
            out.setdefault(e["collective"], []).append(
                (lo, hi, None if keep else parse_config(args.runtime, e["configuration"])))
    if not out:
        raise SystemExit(f"{args.db} has no {args.runtime} entries for {args.ranks} ranks")
    for rows in out.values():
        rows.sort()
    return out


def choice_at(rows, size):
    if not rows or size < rows[0][0]:
        return None
    for lo, hi, c in rows:
        if lo <= size < hi:
            return c
    return rows[-1][2]


def iters_for(size):
    if size < (1 << 20):
        return 8
    if size < (16 << 20):
        return 3
    return 1


def run_launch(args, plan, rep):
    """{(coll, size): (own median, exported median)} of one launch."""
    own = "default" if args.runtime == "openmpi" else "auto"
    lines, keys = [], []
    for (c, s), exp in plan.items():
        a, b = (own, 0), exp
        for r in range(args.rounds):
            order = [(0, a), (1, b)] if (r + rep) % 2 == 0 else [(1, b), (0, a)]
            for side, (algo, seg) in order:
                lines.append(f"measure {c} {s} {algo} {seg} {iters_for(s)} 1")
                keys.append(((c, s), side))
    lines.append("quit")
    p = subprocess.run(launcher(args.runtime, args.ranks, args.bench), input="\n".join(lines) + "\n", text=True,
                       capture_output=True, timeout=3600)
    answers = [l[2:] for l in p.stdout.splitlines() if l.startswith("@ ")]
    if p.returncode != 0 or len(answers) != len(lines):  # hello + one per measure
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        raise SystemExit(f"launch failed (exit {p.returncode}, {len(answers)} answers for {len(lines)} commands)")
    samples = {}
    for (key, side), a in zip(keys, answers[1:]):
        if not a.startswith("times "):
            raise SystemExit(f"{key}: {a}")
        samples.setdefault(key, ([], []))[side].extend(float(x) for x in a[len("times "):].split("/")[0].split())
    return {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in samples.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench")
    ap.add_argument("--runtime", choices=["openmpi", "mpich"], required=True)
    ap.add_argument("--hccl-tune", required=True)
    ap.add_argument("--db", required=True, help="the database the exported file was made from")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--colls", default="allreduce,allgather,broadcast,reducescatter")
    ap.add_argument("--min", type=int, default=8)
    ap.add_argument("--max", type=int, default=64 << 20)
    ap.add_argument("--control", action="store_true", help="the library's own choice on both sides")
    args = ap.parse_args()
    table = choices(args)
    own = ("default" if args.runtime == "openmpi" else "auto", 0)
    sizes = [1 << k for k in range(64) if args.min <= (1 << k) <= args.max]
    plan, same = {}, set()
    for c in args.colls.split(","):
        for s in sizes:
            exp = choice_at(table.get(c, []), s)
            if args.control:
                plan[(c, s)] = own
            elif exp is None:
                same.add((c, s))
            else:
                plan[(c, s)] = exp
    print(f"# load before: {open('/proc/loadavg').read().strip()}")
    runs = []
    for rep in range(args.reps):
        runs.append(run_launch(args, plan, rep) if plan else {})
        print(f"# repetition {rep + 1}/{args.reps} done", flush=True)
    print(f"# load after: {open('/proc/loadavg').read().strip()}")
    print(f"{'coll':<14} {'bytes':>10} {'own_us':>12} {'exported_us':>12} {'speedup':>8}  exported choice")
    ratios = []
    for c in args.colls.split(","):
        for s in sizes:
            if (c, s) in same:
                ratios.append(1.0)
                print(f"{c:<14} {s:>10} {'':>12} {'':>12} {1.0:>8.3f}  same (the library's own choice)")
                continue
            own_us = statistics.median(r[(c, s)][0] for r in runs)
            exp_us = statistics.median(r[(c, s)][1] for r in runs)
            ratio = statistics.median(r[(c, s)][0] / r[(c, s)][1] for r in runs)
            ratios.append(ratio)
            algo, seg = plan[(c, s)]
            print(f"{c:<14} {s:>10} {own_us:>12.2f} {exp_us:>12.2f} {ratio:>8.3f}  {algo}"
                  f"{f' segment={seg}' if seg else ''}")
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    what = "control (own choice on both sides)" if args.control else "exported vs own"
    print(f"# {args.runtime} {args.ranks} ranks, {what}, paired in {args.reps} launches x {args.rounds} rounds: "
          f"geomean speedup {geo:.3f}, minimum {min(ratios):.3f} over {len(ratios)} sizes "
          f"({len(same)} the library's own choice)")


if __name__ == "__main__":
    main()
