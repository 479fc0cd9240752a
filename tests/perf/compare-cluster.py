#!/usr/bin/env python3
"""Configurations head to head on the emulated cluster (deploy/cluster/, needs root): `hccl-tune bench --launched`
across NODES x RPN ranks for each configuration and size, interleaved run by run (A B, B A, ...); prints the median
time per size and configuration and, next to it, the bytes the busiest node's fast0 interface sent per call (its
tx_bytes counter, TCP/IP framing included), and the ratio first / each (> 1: that configuration is faster).

  tests/perf/compare-cluster.py --nodes 4 --rpn 2 -c allgather -s 8,64K,4M,64M -r 5 \\
      'hierarchical(inter=ring(link=tcp@10.77.1.0/24))' 'ring(link=auto)'

The cluster is brought up with --default-net fast and taken down at the end. Each run is one launch of one size
with --warmup W --iters I; per-call bytes = tx growth / (W + I).
"""
import argparse, os, statistics, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
ap.add_argument("-c", "--coll", default="allreduce")
ap.add_argument("--nodes", type=int, default=2)
ap.add_argument("--rpn", type=int, default=2)
ap.add_argument("-s", "--sizes", default="8,64K,4M,64M", help="comma-separated sizes")
ap.add_argument("-r", "--reps", type=int, default=5)
ap.add_argument("--iters", type=int, default=3)
ap.add_argument("--warmup", type=int, default=1)
ap.add_argument("--name", default=f"hcb{os.getpid()}")
ap.add_argument("-b", "--build", default=os.path.join(root, "build"))
ap.add_argument("configs", nargs="+", help="configuration strings (or auto)")
ap.add_argument("--help", action="help")
a = ap.parse_args()
tune = os.path.join(a.build, "tuner", "hccl-tune")
tuned = os.path.join(a.build, "daemon", "hccl-tuned")
cluster = os.path.join(root, "deploy", "cluster", "cluster.sh")
launch = os.path.join(root, "deploy", "cluster", "launch.sh")
for f in (tune, tuned):
    if not os.access(f, os.X_OK):
        sys.exit(f"no {f}: build first")


def tx():
    out = []
    for k in range(a.nodes):
        p = subprocess.run(["ip", "netns", "exec", f"{a.name}-n{k}", "cat", "/sys/class/net/fast0/statistics/tx_bytes"],
                           capture_output=True, text=True, check=True)
        out.append(int(p.stdout))
    return out


def run(cfg, size):
    before = tx()
    p = subprocess.run([launch, "--name", a.name, "--ranks-per-node", str(a.rpn), "--timeout", "600", "--",
                        tune, "bench", "--launched", "--coll", a.coll, "--dtype", "fp32", "--min-bytes", size,
                        "--max-bytes", size, "--iters", str(a.iters), "--warmup", str(a.warmup), "--algo", cfg],
                       capture_output=True, text=True)
    after = tx()
    if p.returncode != 0:
        sys.exit(f"bench --algo {cfg} at {size} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) > 4 and f[0] == a.coll and f[2].isdigit():
            calls = a.iters + a.warmup
            return int(f[2]), float(f[4]), max(x - y for x, y in zip(after, before)) / calls
    sys.exit(f"bench --algo {cfg} at {size}: no row in\n{p.stdout}")


env_up = subprocess.run([cluster, "up", "--name", a.name, "--nodes", str(a.nodes), "--tuned", tuned,
                         "--default-net", "fast"], capture_output=True, text=True)
if env_up.returncode != 0:
    sys.exit(f"cluster up failed ({env_up.returncode}): {env_up.stderr}")
times, nic = {}, {}
try:
    for r in range(a.reps):
        for size in a.sizes.split(","):
            for cfg in a.configs if r % 2 == 0 else a.configs[::-1]:
                b, t, n = run(cfg, size)
                times.setdefault((cfg, b), []).append(t)
                nic.setdefault((cfg, b), []).append(n)
finally:
    subprocess.run([cluster, "down", "--name", a.name], capture_output=True)
print(f"# {a.coll}, {a.nodes} nodes x {a.rpn} ranks, {a.reps} interleaved runs; median time (us) / busiest NIC's "
      "bytes sent per call")
print(f"{'bytes':>10} " + " ".join(f"{c[:34]:>45}" for c in a.configs) + "  first/each")
for s in sorted({s for (_, s) in times}):
    med = [statistics.median(times[(c, s)]) for c in a.configs]
    cells = [f"{m:>12.1f} us {statistics.median(nic[(c, s)]):>14.0f} B" for c, m in zip(a.configs, med)]
    print(f"{s:>10} " + " ".join(f"{x:>45}" for x in cells) + "  " +
          " ".join(f"{med[0] / m:.2f}" for m in med[1:]))
