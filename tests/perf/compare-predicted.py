#!/usr/bin/env python3
"""A predicted table against a sweep's winners and the built-in defaults on the emulated cluster (needs root).

  tests/perf/compare-predicted.py --nodes 4 --rpn 2 --profile p.json --winners c4.db --winners big.db \\
      -c allreduce,allgather -s 8,2K,512K,64M -r 5

Brings up a fresh NODES x RPN cluster (deploy/cluster/, --default-net fast), stores PROFILE in every node's store as
the model of the cluster's topology class (so hccl-tuned predicts the table of a world nobody swept: docs/MODEL.md),
then, per collective and size, interleaves three runs of `hccl-tune bench --launched`, five times by default:
  predicted  --algo auto with the node's daemon: the table it predicts from the model;
  winner     the configuration with the best median time for that collective, world and size in the --winners
             stores (exhaustive sweeps of this world);
  defaults   --algo auto with HCCL_TUNE_DAEMON=off: the built-in defaults.
Live sampling is off (HCCL_TUNE_SAMPLE_RATE=0), so no exploration moves a call. Prints per size the medians, then
per collective the geomean of predicted/winner and of defaults/winner, the share of the winners' speedup over the
defaults the predicted table recovers, and the worst predicted/defaults.
"""
import argparse, json, math, os, sqlite3, statistics, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("-c", "--colls", default="allreduce,allgather")
ap.add_argument("--nodes", type=int, default=4)
ap.add_argument("--rpn", type=int, default=2)
ap.add_argument("-s", "--sizes", default="8,128,2K,32K,512K,2M,8M,64M")
ap.add_argument("-r", "--reps", type=int, default=5)
ap.add_argument("--iters", type=int, default=3)
ap.add_argument("--warmup", type=int, default=1)
ap.add_argument("--profile", required=True, help="the frozen model (hccl-tune model fit --out)")
ap.add_argument("--winners", action="append", required=True, help="a store holding this world's sweeps")
ap.add_argument("--name", default=f"hcp{os.getpid()}")
ap.add_argument("-b", "--build", default=os.path.join(root, "build"))
a = ap.parse_args()
tune = os.path.join(a.build, "tuner", "hccl-tune")
tuned = os.path.join(a.build, "daemon", "hccl-tuned")
cluster = os.path.join(root, "deploy", "cluster", "cluster.sh")
launch = os.path.join(root, "deploy", "cluster", "launch.sh")
world = a.nodes * a.rpn
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_bytes(s):
    return int(s[:-1]) * UNITS[s[-1]] if s[-1] in UNITS else int(s)


def winners():
    """(collective, bytes) -> the configuration with the best median time in the --winners stores."""
    samples = {}
    for f in a.winners:
        db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        for c, b, cfg, t in db.execute("select collective, bytes, configuration, time_us from sweep_samples "
                                       "where world_size = ? and dtype = 'fp32'", (world,)):
            samples.setdefault((c, b, cfg), []).append(t)
    best = {}
    for (c, b, cfg), ts in samples.items():
        m = statistics.median(ts)
        if (c, b) not in best or m < best[(c, b)][1]:
            best[(c, b)] = (cfg, m)
    return {k: v[0] for k, v in best.items()}


def topology_class():
    """The class of this shape's topology in the --winners stores (the class ignores node and rank counts)."""
    for f in a.winners:
        db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        for j, cls in db.execute("select json, class from topologies"):
            if json.loads(j).get("ranks_per_node") == [a.rpn] * a.nodes and cls:
                return cls
    sys.exit(f"no {a.nodes} x {a.rpn} topology in {', '.join(a.winners)}")


def store_model(cls):
    """The profile as model version 1 of the class in every node's store, before any job asks for a table."""
    profile = open(a.profile).read()
    for k in range(a.nodes):
        db = sqlite3.connect(os.path.join("/tmp/hccl-tune-cluster", a.name, f"n{k}", "tuning.db"), timeout=30)
        db.execute("insert into models(class, version, json, source, fitted_ms, stored_ms) values (?, 1, ?, ?, 0, 0)",
                   (cls, profile, f"compare-predicted {os.path.basename(a.profile)}"))
        db.commit()


def run(coll, cfg, size, env):
    p = subprocess.run([launch, "--name", a.name, "--ranks-per-node", str(a.rpn), "--timeout", "900", "--", "env",
                        "HCCL_TUNE_SAMPLE_RATE=0", *env, tune, "bench", "--launched", "--coll", coll, "--dtype", "fp32",
                        "--min-bytes", size, "--max-bytes", size, "--iters", str(a.iters), "--warmup",
                        str(a.warmup), "--algo", cfg], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench {coll} --algo {cfg} at {size} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) > 4 and f[0] == coll and f[2].isdigit():
            return float(f[4]), f[3]
    sys.exit(f"bench {coll} --algo {cfg} at {size}: no row in\n{p.stdout}")


best = winners()
cls = topology_class()
colls, sizes = a.colls.split(","), a.sizes.split(",")
for c in colls:
    for s in sizes:
        if (c, size_bytes(s)) not in best:
            sys.exit(f"no {c} sweep of {world} ranks at {s} bytes in {', '.join(a.winners)}")
up = subprocess.run([cluster, "up", "--name", a.name, "--nodes", str(a.nodes), "--tuned", tuned, "--default-net",
                     "fast"], capture_output=True, text=True)
if up.returncode != 0:
    sys.exit(f"cluster up failed ({up.returncode}): {up.stderr}")
times, chosen = {}, {}
try:
    store_model(cls)
    for r in range(a.reps):
        for c in colls:
            for s in sizes:
                runs = [("predicted", "auto", []), ("winner", best[(c, size_bytes(s))], []),
                        ("defaults", "auto", ["HCCL_TUNE_DAEMON=off"])]
                for label, cfg, env in runs if r % 2 == 0 else runs[::-1]:
                    t, used = run(c, cfg, s, env)
                    times.setdefault((c, s, label), []).append(t)
                    chosen[(c, s, label)] = used
finally:
    subprocess.run([cluster, "down", "--name", a.name], capture_output=True)
print(f"# {a.nodes} nodes x {a.rpn} ranks, {a.reps} interleaved runs, median us; profile {a.profile}")
for c in colls:
    print(f"{c}\n{'bytes':>8} {'predicted':>11} {'winner':>11} {'defaults':>11}  pred/win def/win pred/def  winner")
    logs = {"pw": [], "dw": []}
    worst = 0.0
    for s in sizes:
        p, w, d = (statistics.median(times[(c, s, k)]) for k in ("predicted", "winner", "defaults"))
        logs["pw"].append(math.log(p / w))
        logs["dw"].append(math.log(d / w))
        worst = max(worst, p / d)
        print(f"{s:>8} {p:>11.1f} {w:>11.1f} {d:>11.1f}  {p / w:8.2f} {d / w:7.2f} {p / d:8.2f}  "
              f"{chosen[(c, s, 'winner')]}")
        print(f"{'':>8} predicted ran {chosen[(c, s, 'predicted')]}; defaults ran {chosen[(c, s, 'defaults')]}")
    gp, gd = (math.exp(sum(v) / len(v)) for v in (logs["pw"], logs["dw"]))
    recovered = (gd - gp) / (gd - 1) if gd > 1 else float("nan")
    print(f"  geomean predicted/winner {gp:.3f}, defaults/winner {gd:.3f}; speedup recovered {100 * recovered:.0f} %; "
          f"worst predicted/defaults {worst:.2f}")
